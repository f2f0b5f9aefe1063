//! Runtime configuration: the [`Builder`], its defaults, and the
//! `CANTUS_*` environment variables that override it.

use crate::error::{Error, ErrorKind};
use std::time::Duration;

/// How idle workers wait for work: spin (fast to react, burns the core),
/// sleep (frees the core, slower to react), or spin for a while, then sleep.
// Hybrid waiting as in seed 002.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WaitPolicy {
    /// Spin forever: lowest latency, burns the core. Use only with no more
    /// workers than cores and nothing else to run.
    Active,
    /// Sleep as soon as no work is found.
    Passive,
    /// Spin for the spin budget, then sleep (the default).
    Hybrid,
}

/// The default spin budget: idle-loop iterations before a hybrid worker
/// sleeps. Each iteration looks at the worker's queues and tries one steal;
/// measured on the 2-core reference machine this is roughly 0.1-0.3 ms.
pub const DEFAULT_SPIN: u32 = 4_000;
/// The default task stack size (bytes). Only touched pages use memory.
pub const DEFAULT_STACK_SIZE: usize = 256 * 1024;
/// The smallest stack size accepted.
pub const MIN_STACK_SIZE: usize = 16 * 1024;
/// The largest stack size accepted.
pub const MAX_STACK_SIZE: usize = 1 << 30;
/// The default limit on threads the runtime may start (Chapel's default).
pub const DEFAULT_MAX_THREADS: usize = 255;
/// How long every worker must sit idle, with tasks blocked and an outside
/// thread waiting, before a deadlock is reported.
pub const DEFAULT_DEADLOCK_MS: u64 = 1_000;

/// Builds a [`Runtime`](crate::Runtime). Every setting can be overridden by
/// an environment variable, so a program can be tuned without rebuilding:
///
/// | variable | accepts | default |
/// |---|---|---|
/// | `CANTUS_WORKERS` | a positive integer | CPUs in the affinity mask |
/// | `CANTUS_STACK_SIZE` | bytes, optional `K`/`M`/`G` suffix, 16K..1G | 256K |
/// | `CANTUS_WAIT_POLICY` | `active`, `passive`, `hybrid` | `hybrid` |
/// | `CANTUS_SPIN` | idle-loop iterations before sleeping (0..=10^9) | [`DEFAULT_SPIN`] |
/// | `CANTUS_MAX_THREADS` | a positive integer | 255 |
/// | `CANTUS_PIN` | `1`/`0`, `true`/`false`, `yes`/`no`, `on`/`off` | pinned |
/// | `CANTUS_DEADLOCK_MS` | milliseconds, `0` turns detection off | 1000 |
/// | `CANTUS_STATS` | as `CANTUS_PIN`: `1` prints statistics at shutdown | off |
/// | `CANTUS_LOCALES` | a positive integer: processes (locales) in the job | 1 |
/// | `CANTUS_RING_BYTES` | bytes of each shared-memory ring, a power of two, 4K..1G | 128K |
/// | `CANTUS_HEAP_BYTES` | bytes of each locale's symmetric heap (`pgas`), 64K..64G | 64M |
/// | `CANTUS_TRANSPORT` | `shm` (locales on this machine) or `mpi` (needs the `mpi` feature) | `mpi` under an MPI launcher, else `shm` |
/// | `CANTUS_TRACE` | a path: record a timeline trace there (Chrome trace-event JSON) | off |
/// | `CANTUS_TRACE_EVENTS` | events each thread's lane of the trace holds, 16..2^26 | 2^18 |
/// | `CANTUS_CHANT_POLL` | `scheduler` or `task`: who polls for a Chant receive that waits ([`chant::Policy`](crate::chant::Policy)) | `scheduler` |
/// | `CANTUS_MPI_PROGRESS` | `auto`, `inline` or `thread`: who makes an MPI job's MPI calls | `auto`: `inline` below 16 CPUs per rank |
/// | `CANTUS_MPI_NODES` | a positive integer: for tests, the ranks of each real node behave as if on that many nodes (blocks of consecutive ranks) | the real nodes |
/// | `CANTUS_PGAS` | `shared` (memory every locale maps) or `messages` (remote calls to each segment's owner) | `shared` where the transport maps memory for all locales, else `messages` |
#[derive(Clone, Debug, Default)]
pub struct Builder {
    workers: Option<usize>,
    stack_size: Option<usize>,
    wait_policy: Option<WaitPolicy>,
    spin: Option<u32>,
    max_threads: Option<usize>,
    pin: Option<bool>,
    deadlock_ms: Option<u64>,
    stats: Option<bool>,
    trace: Option<std::path::PathBuf>,
    trace_events: Option<usize>,
    locales: Option<usize>,
    default_locales: Option<usize>,
    ring_bytes: Option<usize>,
    heap_bytes: Option<usize>,
    ignore_env: bool,
}

/// Default events per lane of a trace (8 MiB of 32-byte events).
pub const DEFAULT_TRACE_EVENTS: usize = 1 << 18;
const MIN_TRACE_EVENTS: usize = 16;
const MAX_TRACE_EVENTS: usize = 1 << 26;

/// Default bytes of each shared-memory ring between two locales.
pub const DEFAULT_RING_BYTES: usize = 128 << 10;
/// The smallest ring a job may have (`CANTUS_RING_BYTES`, `Builder::ring_bytes`).
const MIN_RING_BYTES: usize = 4 << 10;
/// The largest ring a job may have.
const MAX_RING_BYTES: usize = 1 << 30;

/// Default bytes of each locale's segment of the symmetric heap
/// ([`pgas`](crate::pgas)); pages take memory only once touched.
pub const DEFAULT_HEAP_BYTES: usize = 64 << 20;
/// The smallest heap segment accepted.
const MIN_HEAP_BYTES: usize = 64 << 10;
/// The largest heap segment accepted.
const MAX_HEAP_BYTES: usize = 64 << 30;

/// Set by locale 0 for the locales it starts: which locale a process is.
pub(crate) const LOCALE_VAR: &str = "CANTUS_LOCALE";
/// The number of locales (users set it on locale 0; locale 0 sets it for
/// the locales it starts).
pub(crate) const LOCALES_VAR: &str = "CANTUS_LOCALES";

/// Set by locale 0 for the locales it starts when the job is traced: the
/// job's number, which names the directory of its trace's parts
/// (`trace/lane.rs`, `parts_dir`), in hexadecimal.
pub(crate) const TRACE_JOB_VAR: &str = "CANTUS_TRACE_JOB";

/// Chooses the transport (`shm` or `mpi`); by default `mpi` when an MPI
/// launcher started the process.
pub(crate) const TRANSPORT_VAR: &str = "CANTUS_TRANSPORT";

/// How this process takes part in a job of locales: decided before the
/// rest of the configuration, from the environment (`comm/job.rs` starts
/// what it names).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Launch {
    /// One locale, no transport.
    Alone,
    /// Locales on this machine talking through shared memory: locale 0
    /// starts the others as copies of this program.
    SharedMemory,
    /// One locale per rank of a job that an MPI launcher (`mpirun`,
    /// `mpiexec`) started; the MPI size is the number of locales.
    Mpi,
}

/// Variables by which MPI launchers tell a process its place (Open MPI,
/// MPICH's Hydra and other PMI launchers, PMIx): `(name, gives the size)`.
const MPI_LAUNCHER_VARS: [(&str, bool); 4] = [
    ("OMPI_COMM_WORLD_SIZE", true),
    ("PMI_SIZE", true),
    ("PMIX_RANK", false),
    ("PMI_RANK", false),
];

/// If an MPI launcher started this process: the variable that says so,
/// and the job's size if the launcher gives it.
pub(crate) fn mpi_launcher() -> Option<(&'static str, Option<usize>)> {
    let found = MPI_LAUNCHER_VARS
        .iter()
        .find(|(name, _)| std::env::var_os(name).is_some())?;
    let size = MPI_LAUNCHER_VARS
        .iter()
        .filter(|(_, gives_size)| *gives_size)
        .find_map(|(name, _)| std::env::var(name).ok()?.trim().parse::<usize>().ok());
    Some((found.0, size))
}

/// The variable that chooses the global address space's memory.
const PGAS_VAR: &str = "CANTUS_PGAS";

/// The variable that chooses who makes an MPI job's MPI calls.
pub(crate) const MPI_PROGRESS_VAR: &str = "CANTUS_MPI_PROGRESS";

/// The testing setting that splits each real node's ranks into that many
/// nodes (`comm/mpi/README.md`, "Ranks of one node").
pub(crate) const MPI_NODES_VAR: &str = "CANTUS_MPI_NODES";

/// A rank whose share of its node's CPUs is at least this many runs an
/// MPI thread under `CANTUS_MPI_PROGRESS=auto`; a smaller share
/// progresses inline (`comm/mpi/README.md`, "Progress modes").
#[cfg_attr(not(feature = "mpi"), allow(dead_code))]
pub(crate) const MPI_THREAD_MIN_CPUS: usize = 16;

/// Who makes an MPI job's MPI calls (`CANTUS_MPI_PROGRESS`;
/// `comm/mpi/README.md`, "Progress modes").
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(not(feature = "mpi"), allow(dead_code))]
pub(crate) enum MpiProgress {
    /// `inline` where the rank's share of CPUs is below
    /// [`MPI_THREAD_MIN_CPUS`], else `thread`.
    Auto,
    /// The threads that send, poll, wait or park make the calls under one
    /// try-lock (`MPI_THREAD_SERIALIZED`); a helper sleeps beside them.
    Inline,
    /// One MPI thread per rank makes every call (`MPI_THREAD_FUNNELED`).
    Thread,
}

/// Which memory the global address space (`pgas`) uses
/// (`pgas/README.md`, "Two memories").
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum PgasMemory {
    /// Memory every locale maps (the shared-memory transport's areas):
    /// puts are copies, atomics are CPU atomics on it.
    Shared,
    /// Each locale's segment is its own process's; the others reach it
    /// by remote calls (the memory a transport without shared memory
    /// gets; on one machine, to test it).
    Messages,
}

/// A validated configuration.
#[derive(Clone, Debug)]
pub(crate) struct Config {
    /// How this process joins its job.
    pub(crate) launch: Launch,
    /// Whether the worker count was given (builder or `CANTUS_WORKERS`),
    /// not derived from the CPUs (an MPI job derives it once it knows
    /// the node's ranks: [`Config::place`]).
    pub(crate) workers_given: bool,
    pub(crate) workers: usize,
    pub(crate) stack_size: usize,
    pub(crate) wait_policy: WaitPolicy,
    pub(crate) spin: u32,
    pub(crate) max_threads: usize,
    pub(crate) pin: bool,
    pub(crate) deadlock: Option<Duration>,
    pub(crate) stats: bool,
    /// Where to write a timeline trace (`CANTUS_TRACE`), if anywhere.
    pub(crate) trace: Option<std::path::PathBuf>,
    /// Events each lane of the trace holds (`CANTUS_TRACE_EVENTS`).
    pub(crate) trace_events: usize,
    /// The job's number for its trace's parts directory (0 until chosen:
    /// `Runtime::start_locale`; a locale started by locale 0 is given
    /// it, [`TRACE_JOB_VAR`]; over MPI rank 0's is broadcast).
    pub(crate) trace_job: u64,
    /// The CPUs of the process affinity mask, in order.
    pub(crate) cpus: Vec<usize>,
    /// Locales (processes) in the job.
    pub(crate) locales: usize,
    /// This process's locale.
    pub(crate) here: usize,
    /// Bytes of each shared-memory ring.
    pub(crate) ring_bytes: usize,
    /// Bytes of each locale's heap segment, a multiple of the page size.
    pub(crate) heap_bytes: usize,
    /// The global address space's memory (`None`: the transport's
    /// choice, `Shared` where it maps memory for every locale).
    pub(crate) pgas: Option<PgasMemory>,
    /// Who polls for a Chant receive that waits (`CANTUS_CHANT_POLL`):
    /// `Some(true)` the waiting task, `Some(false)` the scheduler, `None`
    /// not set (the default, or what the program chose).
    pub(crate) chant_task_polls: Option<bool>,
    /// Who makes an MPI job's MPI calls (`CANTUS_MPI_PROGRESS`).
    #[cfg_attr(not(feature = "mpi"), allow(dead_code))]
    pub(crate) mpi_progress: MpiProgress,
    /// How many nodes each real node's ranks behave as (`CANTUS_MPI_NODES`,
    /// a testing setting); `None`: the real nodes.
    #[cfg_attr(not(feature = "mpi"), allow(dead_code))]
    pub(crate) mpi_nodes: Option<usize>,
    /// The locale count the program asked for (`CANTUS_LOCALES` or
    /// `Builder::locales`), and how it asked, if it did: under MPI the
    /// launcher decides, and a different count is an error.
    #[cfg_attr(not(feature = "mpi"), allow(dead_code))]
    pub(crate) locales_asked: Option<(usize, String)>,
}

impl Builder {
    /// A builder with every setting at its default.
    pub fn new() -> Builder {
        Builder::default()
    }

    /// Number of worker threads.
    pub fn workers(mut self, n: usize) -> Builder {
        self.workers = Some(n);
        self
    }

    /// Size in bytes of each task stack (rounded up to whole pages).
    pub fn stack_size(mut self, bytes: usize) -> Builder {
        self.stack_size = Some(bytes);
        self
    }

    /// How idle workers wait.
    pub fn wait_policy(mut self, policy: WaitPolicy) -> Builder {
        self.wait_policy = Some(policy);
        self
    }

    /// Idle-loop iterations a hybrid worker spins before it sleeps.
    pub fn spin(mut self, iterations: u32) -> Builder {
        self.spin = Some(iterations);
        self
    }

    /// Upper bound on the threads the runtime may start, checked before
    /// any starts.
    pub fn max_threads(mut self, n: usize) -> Builder {
        self.max_threads = Some(n);
        self
    }

    /// Pin worker `i` to the `i`-th CPU of the affinity mask.
    pub fn pin(mut self, pin: bool) -> Builder {
        self.pin = Some(pin);
        self
    }

    /// Grace period for deadlock detection; `None` turns it off.
    pub fn deadlock_detection(mut self, after: Option<Duration>) -> Builder {
        self.deadlock_ms = Some(after.map_or(0, |d| d.as_millis().max(1) as u64));
        self
    }

    /// Print statistics when the runtime shuts down.
    pub fn stats(mut self, on: bool) -> Builder {
        self.stats = Some(on);
        self
    }

    /// Record a timeline trace of the run into `path` (Chrome trace-event
    /// JSON, merged from every locale at shutdown; `CANTUS_TRACE`).
    pub fn trace(mut self, path: impl Into<std::path::PathBuf>) -> Builder {
        self.trace = Some(path.into());
        self
    }

    /// Events each thread's lane of a trace holds before it is full (then
    /// it records no more and counts what it drops; `CANTUS_TRACE_EVENTS`).
    pub fn trace_events(mut self, events: usize) -> Builder {
        self.trace_events = Some(events);
        self
    }

    /// Number of locales: processes of one job, each with its own workers,
    /// that talk through shared memory. `run`/`build` on locale 0 starts
    /// the others as copies of this program (same binary, same
    /// arguments; on a test's thread, only that test: README, "Testing a
    /// program that uses locales"); on those, `build` never returns: they serve remote
    /// calls until the job ends, then exit. Each locale gets its share of
    /// the CPUs.
    ///
    /// `CANTUS_LOCALES` overrides it. Under an MPI launcher the job has
    /// one locale per rank, and a count that disagrees is refused (as
    /// `CANTUS_LOCALES` is): a program that runs on whatever it is given
    /// there says [`default_locales`](Builder::default_locales) instead.
    pub fn locales(mut self, n: usize) -> Builder {
        self.locales = Some(n);
        self
    }

    /// Number of locales when nothing else says: `CANTUS_LOCALES`, an MPI
    /// launcher's ranks and [`locales`](Builder::locales) each win over
    /// it, without error. For programs (the examples) that run on two
    /// locales when started alone and on every rank under `mpirun -n N`.
    pub fn default_locales(mut self, n: usize) -> Builder {
        self.default_locales = Some(n);
        self
    }

    /// Bytes of each shared-memory ring between two locales (a power of
    /// two, 4K to 1G); messages larger than half a ring travel in pieces.
    pub fn ring_bytes(mut self, bytes: usize) -> Builder {
        self.ring_bytes = Some(bytes);
        self
    }

    /// Bytes of each locale's segment of the symmetric heap, where
    /// [`pgas::alloc`](crate::pgas::alloc) places global arrays (rounded
    /// up to whole pages; only touched pages take memory).
    pub fn heap_bytes(mut self, bytes: usize) -> Builder {
        self.heap_bytes = Some(bytes);
        self
    }

    /// Ignore `CANTUS_*` environment variables (for embedding runtimes that
    /// configure cantus themselves).
    pub fn ignore_environment(mut self) -> Builder {
        self.ignore_env = true;
        self
    }

    /// Applies environment overrides and defaults, and validates.
    pub(crate) fn resolve(&self, env: &dyn Fn(&str) -> Option<String>) -> Result<Config, Error> {
        let env = |name: &str| if self.ignore_env { None } else { env(name) };
        let launch = self.launch(&env)?;
        // A locale started by locale 0 takes its place in the job from the
        // variables locale 0 set, whatever `ignore_env` says.
        let here = match std::env::var(LOCALE_VAR) {
            Err(_) => 0,
            Ok(v) => v.parse::<usize>().map_err(|_| {
                invalid(
                    LOCALE_VAR,
                    &v,
                    "a locale number (it is set by cantus: unset it)",
                )
            })?,
        };
        let locales = match (here, env(LOCALES_VAR)) {
            (h, _) if h > 0 => match std::env::var(LOCALES_VAR) {
                Ok(v) => parse_count(LOCALES_VAR, &v)?,
                Err(_) => {
                    return Err(invalid(
                        LOCALE_VAR,
                        &h.to_string(),
                        "a locale started by cantus, with CANTUS_LOCALES set",
                    ));
                }
            },
            (_, Some(v)) => parse_count(LOCALES_VAR, &v)?,
            // Under MPI the launcher's size (checked again against MPI's
            // own once it is initialized); a builder's count is for jobs
            // cantus starts itself.
            (_, None) if launch == Launch::Mpi => mpi_launcher().and_then(|l| l.1).unwrap_or(1),
            (_, None) => self.locales.or(self.default_locales).unwrap_or(1),
        };
        // What the program asked for, if it did: an MPI job's size is the
        // launcher's, and a request that disagrees is refused there
        // (`comm/mpi`), from the environment or the builder alike.
        let locales_asked = match (here, env(LOCALES_VAR), self.locales) {
            (h, _, _) if h > 0 => None,
            (_, Some(v), _) => Some((locales, format!("{LOCALES_VAR}={}", v.trim()))),
            (_, None, Some(n)) => Some((n, format!("Builder::locales({n})"))),
            (_, None, None) => None,
        };
        if locales == 0 {
            return Err(bad_setting(
                "the locale count",
                "locales",
                "0",
                "a positive integer",
            ));
        }
        if here >= locales {
            return Err(invalid(
                LOCALE_VAR,
                &here.to_string(),
                "a locale below CANTUS_LOCALES",
            ));
        }
        let ring_bytes = match env("CANTUS_RING_BYTES") {
            Some(v) => {
                let bytes = parse_size_in("CANTUS_RING_BYTES", &v, MIN_RING_BYTES, MAX_RING_BYTES)?;
                if !bytes.is_power_of_two() {
                    return Err(invalid(
                        "CANTUS_RING_BYTES",
                        &v,
                        "a power of two from 4K to 1G (e.g. 128K, 1M)",
                    ));
                }
                bytes
            }
            None => self.ring_bytes.unwrap_or(DEFAULT_RING_BYTES),
        };
        if !ring_bytes.is_power_of_two() || !(MIN_RING_BYTES..=MAX_RING_BYTES).contains(&ring_bytes)
        {
            // Only the builder gets here: the variable's value was checked above.
            return Err(bad_setting(
                "the ring size",
                "ring_bytes",
                &ring_bytes.to_string(),
                "a power of two from 4K to 1G (CANTUS_RING_BYTES)",
            ));
        }
        let heap_bytes = match env("CANTUS_HEAP_BYTES") {
            Some(v) => parse_size_in("CANTUS_HEAP_BYTES", &v, MIN_HEAP_BYTES, MAX_HEAP_BYTES)?,
            None => self.heap_bytes.unwrap_or(DEFAULT_HEAP_BYTES),
        };
        if !(MIN_HEAP_BYTES..=MAX_HEAP_BYTES).contains(&heap_bytes) {
            // Only the builder gets here: the variable's parser checks the range.
            return Err(bad_setting(
                "the heap size",
                "heap_bytes",
                &heap_bytes.to_string(),
                "a size in bytes from 64K (65536) to 64G (CANTUS_HEAP_BYTES)",
            ));
        }
        let pgas = match env(PGAS_VAR) {
            Some(v) => match v.trim().to_ascii_lowercase().as_str() {
                "shared" => Some(PgasMemory::Shared),
                "messages" => Some(PgasMemory::Messages),
                _ => {
                    return Err(invalid(
                        PGAS_VAR,
                        &v,
                        "shared (global memory every locale maps) or messages (remote calls \
                         to each segment's owner)",
                    ));
                }
            },
            None => None,
        };
        let cpus = cpu_share(&affinity_cpus(), here, locales);
        let (workers, workers_given) = match env("CANTUS_WORKERS") {
            Some(v) => (parse_count("CANTUS_WORKERS", &v)?, true),
            None => match self.workers {
                Some(n) => (n, true),
                None => (cpus.len().max(1), false),
            },
        };
        if workers == 0 {
            // Only the builder can give 0: the variable's parser refuses it.
            return Err(bad_setting(
                "the worker count",
                "workers",
                "0",
                "a positive integer",
            ));
        }
        let stack_size = match env("CANTUS_STACK_SIZE") {
            Some(v) => parse_size("CANTUS_STACK_SIZE", &v)?,
            None => self.stack_size.unwrap_or(DEFAULT_STACK_SIZE),
        };
        if !(MIN_STACK_SIZE..=MAX_STACK_SIZE).contains(&stack_size) {
            // Only the builder gets here: parse_size checks the range.
            return Err(bad_setting(
                "the stack size",
                "stack_size",
                &stack_size.to_string(),
                "a size in bytes from 16K (16384) to 1G (1073741824)",
            ));
        }
        let wait_policy = match env("CANTUS_WAIT_POLICY") {
            Some(v) => match v.trim().to_ascii_lowercase().as_str() {
                "active" => WaitPolicy::Active,
                "passive" => WaitPolicy::Passive,
                "hybrid" => WaitPolicy::Hybrid,
                _ => {
                    return Err(invalid(
                        "CANTUS_WAIT_POLICY",
                        &v,
                        "one of active, passive, hybrid",
                    ));
                }
            },
            None => self.wait_policy.unwrap_or(WaitPolicy::Hybrid),
        };
        let spin = match env("CANTUS_SPIN") {
            Some(v) => {
                let n = v.trim().parse::<u32>().ok().filter(|n| *n <= 1_000_000_000);
                n.ok_or_else(|| invalid("CANTUS_SPIN", &v, "an integer from 0 to 1000000000"))?
            }
            None => self.spin.unwrap_or(DEFAULT_SPIN),
        };
        let max_threads = match env("CANTUS_MAX_THREADS") {
            Some(v) => parse_count("CANTUS_MAX_THREADS", &v)?,
            None => self.max_threads.unwrap_or(DEFAULT_MAX_THREADS),
        };
        if max_threads == 0 {
            // Only the builder can give 0: the variable's parser refuses it.
            return Err(bad_setting(
                "the thread limit",
                "max_threads",
                "0",
                "a positive integer",
            ));
        }
        let pin = match env("CANTUS_PIN") {
            Some(v) => parse_bool("CANTUS_PIN", &v)?,
            None => self.pin.unwrap_or(true),
        };
        let deadlock_ms = match env("CANTUS_DEADLOCK_MS") {
            Some(v) => parse_deadlock_ms(&v)?,
            None => self.deadlock_ms.unwrap_or(DEFAULT_DEADLOCK_MS),
        };
        let stats = match env("CANTUS_STATS") {
            Some(v) => parse_bool("CANTUS_STATS", &v)?,
            None => self.stats.unwrap_or(false),
        };
        let trace = match env("CANTUS_TRACE") {
            Some(v) if !v.trim().is_empty() => Some(std::path::PathBuf::from(v.trim())),
            Some(_) => None,
            None => self.trace.clone(),
        };
        // A locale started by locale 0 writes its part where locale 0's
        // goes (whatever `ignore_env` says, as its place in the job).
        let trace_job = match (here, std::env::var(TRACE_JOB_VAR)) {
            (h, Ok(v)) if h > 0 && !v.trim().is_empty() => u64::from_str_radix(v.trim(), 16)
                .map_err(|_| {
                    invalid(
                        TRACE_JOB_VAR,
                        &v,
                        "a traced job's number in hexadecimal (it is set by cantus: unset it)",
                    )
                })?,
            _ => 0,
        };
        let trace_events = match env("CANTUS_TRACE_EVENTS") {
            Some(v) => match v.trim().parse::<usize>() {
                Ok(n) if (MIN_TRACE_EVENTS..=MAX_TRACE_EVENTS).contains(&n) => n,
                _ => {
                    return Err(invalid(
                        "CANTUS_TRACE_EVENTS",
                        &v,
                        &format!(
                            "a count of events per lane, {MIN_TRACE_EVENTS}..={MAX_TRACE_EVENTS}"
                        ),
                    ));
                }
            },
            None => match self.trace_events {
                None => DEFAULT_TRACE_EVENTS,
                Some(n) if (MIN_TRACE_EVENTS..=MAX_TRACE_EVENTS).contains(&n) => n,
                Some(n) => {
                    return Err(bad_setting(
                        "trace events per lane",
                        "Builder::trace_events",
                        &n.to_string(),
                        &format!("{MIN_TRACE_EVENTS}..={MAX_TRACE_EVENTS}"),
                    ));
                }
            },
        };
        let chant_task_polls = match env("CANTUS_CHANT_POLL") {
            None => None,
            Some(v) => match v.trim().to_ascii_lowercase().as_str() {
                "scheduler" => Some(false),
                "task" => Some(true),
                _ => return Err(invalid("CANTUS_CHANT_POLL", &v, "scheduler or task")),
            },
        };
        let mpi_progress = match env(MPI_PROGRESS_VAR) {
            None => MpiProgress::Auto,
            Some(v) => match v.trim().to_ascii_lowercase().as_str() {
                "auto" => MpiProgress::Auto,
                "inline" => MpiProgress::Inline,
                "thread" => MpiProgress::Thread,
                _ => return Err(invalid(MPI_PROGRESS_VAR, &v, "auto, inline or thread")),
            },
        };
        let mpi_nodes = env(MPI_NODES_VAR)
            .map(|v| parse_count(MPI_NODES_VAR, &v))
            .transpose()?;
        if workers > max_threads {
            return Err(Error::new(
                ErrorKind::TooManyThreads,
                format!(
                    "cantus needs {workers} worker threads but the thread limit is {max_threads}: \
                     lower CANTUS_WORKERS or raise CANTUS_MAX_THREADS (no thread was started)"
                ),
            ));
        }
        let page = page_size();
        Ok(Config {
            launch: if launch == Launch::SharedMemory && locales == 1 && here == 0 {
                Launch::Alone
            } else {
                launch
            },
            workers_given,
            workers,
            stack_size: stack_size.div_ceil(page) * page,
            wait_policy,
            spin: if wait_policy == WaitPolicy::Passive {
                0
            } else {
                spin
            },
            max_threads,
            pin,
            deadlock: (deadlock_ms > 0).then(|| Duration::from_millis(deadlock_ms)),
            stats,
            trace,
            trace_events,
            trace_job,
            cpus,
            locales,
            here,
            ring_bytes,
            heap_bytes: heap_bytes.next_multiple_of(page),
            pgas,
            chant_task_polls,
            mpi_progress,
            mpi_nodes,
            locales_asked,
        })
    }
}

impl Builder {
    /// How this process joins a job (`CANTUS_TRANSPORT`, an MPI launcher's
    /// variables, `CANTUS_LOCALE`), before anything else is resolved.
    fn launch(&self, env: &dyn Fn(&str) -> Option<String>) -> Result<Launch, Error> {
        // A locale that locale 0 started over shared memory (it inherits
        // locale 0's environment, launcher variables included).
        if std::env::var_os(LOCALE_VAR).is_some() {
            return Ok(Launch::SharedMemory);
        }
        let launcher = mpi_launcher();
        match env(TRANSPORT_VAR).map(|v| v.trim().to_ascii_lowercase()) {
            Some(v) if v == "shm" => return Ok(Launch::SharedMemory),
            Some(v) if v == "mpi" => {
                return if cfg!(feature = "mpi") {
                    Ok(Launch::Mpi)
                } else {
                    Err(without_mpi(&format!("{TRANSPORT_VAR}=mpi asks for MPI")))
                };
            }
            Some(v) => return Err(invalid(TRANSPORT_VAR, &v, "shm or mpi")),
            None => {}
        }
        match launcher {
            Some(_) if cfg!(feature = "mpi") => Ok(Launch::Mpi),
            // One rank: running the program as it is is what was asked.
            Some((_, Some(1))) => Ok(Launch::SharedMemory),
            Some((var, size)) => Err(without_mpi(&match size {
                Some(n) => format!(
                    "an MPI launcher started this program as one of {n} ranks ({var} is set)"
                ),
                None => format!("an MPI launcher started this program ({var} is set)"),
            })),
            None => Ok(Launch::SharedMemory),
        }
    }
}

/// The error for MPI asked of a build without the `mpi` feature.
fn without_mpi(why: &str) -> Error {
    Error::new(
        ErrorKind::InvalidConfig,
        format!(
            "cantus: {why}, but cantus was built without its `mpi` feature, so each rank would \
             run the whole program alone; build with `--features cantus/mpi` (MPI and libclang \
             installed), or start the job without mpirun (CANTUS_LOCALES=n runs n locales on \
             this machine), or set {TRANSPORT_VAR}=shm to run each rank as a job of its own"
        ),
    )
}

impl Config {
    /// Places this process in an MPI job once MPI told it where it is:
    /// locale `rank` of `size`, rank `node_rank` of the `node_size` on
    /// its node. The CPUs are shared among the node's ranks (not by the
    /// global locale number), and unless the worker count was given, a
    /// rank with an MPI thread (`progress_thread`) runs one worker fewer
    /// than its share of CPUs (at least one), leaving room for that
    /// thread; a rank that progresses inline runs its whole share.
    #[cfg_attr(not(feature = "mpi"), allow(dead_code))]
    pub(crate) fn place(
        &mut self,
        rank: usize,
        size: usize,
        node_rank: usize,
        node_size: usize,
        progress_thread: bool,
    ) {
        self.here = rank;
        self.locales = size;
        self.cpus = cpu_share(&affinity_cpus(), node_rank, node_size);
        if !self.workers_given {
            self.workers = if progress_thread {
                self.cpus.len().saturating_sub(1).max(1)
            } else {
                self.cpus.len().max(1)
            };
        }
    }

    /// This rank's share of its node's CPUs, from what the MPI launcher
    /// says before MPI starts (its node-local rank and size), or `None`
    /// if the launcher does not say (`CANTUS_MPI_PROGRESS=auto` then
    /// progresses inline).
    #[cfg_attr(not(feature = "mpi"), allow(dead_code))]
    pub(crate) fn cpu_share_before_mpi(&self) -> Option<usize> {
        launcher_cpu_share(&|v| std::env::var(v).ok(), &affinity_cpus())
    }
}

/// A rank's share of `cpus` by the node-local rank and size its launcher
/// put in the environment (Open MPI, MPICH's Hydra, PMIx), if it did.
#[cfg_attr(not(feature = "mpi"), allow(dead_code))]
fn launcher_cpu_share(env: &dyn Fn(&str) -> Option<String>, cpus: &[usize]) -> Option<usize> {
    let var = |names: &[&str]| {
        names
            .iter()
            .find_map(|n| env(n)?.trim().parse::<usize>().ok())
    };
    let rank = var(&[
        "OMPI_COMM_WORLD_LOCAL_RANK",
        "MPI_LOCALRANKID",
        "PMIX_LOCAL_RANK",
    ])?;
    let size = var(&[
        "OMPI_COMM_WORLD_LOCAL_SIZE",
        "MPI_LOCALNRANKS",
        "PMIX_LOCAL_SIZE",
    ])?;
    (rank < size).then(|| cpu_share(cpus, rank, size).len())
}

/// Locale `here`'s share of `cpus` when `locales` locales split them: a
/// contiguous slice, so N locales never start more workers than CPUs
/// (unless there are more locales than CPUs: then one CPU each, shared).
fn cpu_share(cpus: &[usize], here: usize, locales: usize) -> Vec<usize> {
    if locales <= 1 || cpus.is_empty() {
        return cpus.to_vec();
    }
    let (lo, hi) = (
        here * cpus.len() / locales,
        (here + 1) * cpus.len() / locales,
    );
    if lo < hi {
        cpus[lo..hi].to_vec()
    } else {
        vec![cpus[here % cpus.len()]]
    }
}

/// An environment variable with a value cantus does not accept.
fn invalid(name: &str, value: &str, accepts: &str) -> Error {
    Error::new(
        ErrorKind::InvalidConfig,
        format!("{name}={value:?} is not valid: cantus accepts {accepts}"),
    )
}

/// A builder setting (`what`, set with `Builder::method`) with a value
/// cantus does not accept. (The C API's `cantus_config_t` fields reach the
/// same checks.)
fn bad_setting(what: &str, method: &str, value: &str, accepts: &str) -> Error {
    Error::new(
        ErrorKind::InvalidConfig,
        format!("{what} {value} (Builder::{method}) is not valid: cantus accepts {accepts}"),
    )
}

/// `CANTUS_DEADLOCK_MS`: milliseconds, 0 for off (also read with no
/// runtime running, by outside threads blocked on a variable).
pub(crate) fn parse_deadlock_ms(v: &str) -> Result<u64, Error> {
    v.trim().parse::<u64>().map_err(|_| {
        invalid(
            "CANTUS_DEADLOCK_MS",
            v,
            "milliseconds as an integer (0 turns detection off)",
        )
    })
}

fn parse_count(name: &str, v: &str) -> Result<usize, Error> {
    v.trim()
        .parse::<usize>()
        .ok()
        .filter(|n| *n > 0 && *n <= 65_536)
        .ok_or_else(|| invalid(name, v, "a positive integer up to 65536"))
}

fn parse_bool(name: &str, v: &str) -> Result<bool, Error> {
    match v.trim().to_ascii_lowercase().as_str() {
        "1" | "true" | "yes" | "on" => Ok(true),
        "0" | "false" | "no" | "off" => Ok(false),
        _ => Err(invalid(name, v, "1/0, true/false, yes/no or on/off")),
    }
}

/// Parses `4096`, `64K`, `1M`, `1G` (case-insensitive, optional `B`/`iB`).
pub(crate) fn parse_size(name: &str, v: &str) -> Result<usize, Error> {
    parse_size_in(name, v, MIN_STACK_SIZE, MAX_STACK_SIZE)
}

/// As [`parse_size`], accepting `lo..=hi` bytes.
fn parse_size_in(name: &str, v: &str, lo: usize, hi: usize) -> Result<usize, Error> {
    let accepts = format!(
        "a size in bytes with an optional K, M or G suffix (e.g. 256K), from {} to {}",
        human(lo),
        human(hi)
    );
    let accepts = accepts.as_str();
    let t = v.trim().to_ascii_uppercase();
    let t = t
        .strip_suffix("IB")
        .or_else(|| t.strip_suffix('B'))
        .unwrap_or(&t);
    let (digits, mult) = match t.chars().last() {
        Some('K') => (&t[..t.len() - 1], 1usize << 10),
        Some('M') => (&t[..t.len() - 1], 1 << 20),
        Some('G') => (&t[..t.len() - 1], 1 << 30),
        _ => (t, 1),
    };
    let n = digits
        .trim()
        .parse::<usize>()
        .map_err(|_| invalid(name, v, accepts))?;
    let bytes = n
        .checked_mul(mult)
        .ok_or_else(|| invalid(name, v, accepts))?;
    if !(lo..=hi).contains(&bytes) {
        return Err(invalid(name, v, accepts));
    }
    Ok(bytes)
}

/// `16K`, `1G`: a size as its largest exact suffix.
fn human(bytes: usize) -> String {
    for (suffix, unit) in [("G", 1usize << 30), ("M", 1 << 20), ("K", 1 << 10)] {
        if bytes >= unit && bytes % unit == 0 {
            return format!("{}{suffix}", bytes / unit);
        }
    }
    bytes.to_string()
}

pub(crate) fn page_size() -> usize {
    // SAFETY: sysconf has no preconditions.
    let p = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    if p > 0 { p as usize } else { 4096 }
}

/// The CPUs this process may run on, from its affinity mask.
pub(crate) fn affinity_cpus() -> Vec<usize> {
    // SAFETY: cpu_set_t is plain data; zeroed is a valid empty set.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: `set` is a valid, writable cpu_set_t of the size we pass.
    let rc =
        unsafe { libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) };
    if rc != 0 {
        let n = std::thread::available_parallelism().map_or(1, |n| n.get());
        return (0..n).collect();
    }
    (0..libc::CPU_SETSIZE as usize)
        // SAFETY: `i` is below CPU_SETSIZE, the set's capacity.
        .filter(|&i| unsafe { libc::CPU_ISSET(i, &set) })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn with_env(vars: &[(&str, &str)]) -> Result<Config, Error> {
        let vars: Vec<(String, String)> = vars
            .iter()
            .map(|(a, b)| (a.to_string(), b.to_string()))
            .collect();
        Builder::new()
            .resolve(&move |name| vars.iter().find(|(k, _)| k == name).map(|(_, v)| v.clone()))
    }

    #[test]
    fn defaults_follow_the_affinity_mask() {
        let c = with_env(&[]).unwrap();
        assert_eq!(c.workers, affinity_cpus().len());
        assert_eq!(c.stack_size, DEFAULT_STACK_SIZE);
        assert_eq!(c.wait_policy, WaitPolicy::Hybrid);
        assert!(c.pin);
    }

    #[test]
    fn environment_overrides_builder() {
        let c = Builder::new()
            .workers(3)
            .resolve(&|n| (n == "CANTUS_WORKERS").then(|| "5".to_string()))
            .unwrap();
        assert_eq!(c.workers, 5);
        let c = with_env(&[
            ("CANTUS_STACK_SIZE", "64k"),
            ("CANTUS_WAIT_POLICY", "Active"),
            ("CANTUS_PIN", "no"),
        ])
        .unwrap();
        assert_eq!(c.stack_size, 64 * 1024);
        assert_eq!(c.wait_policy, WaitPolicy::Active);
        assert!(!c.pin);
        let c = with_env(&[("CANTUS_WAIT_POLICY", "passive"), ("CANTUS_SPIN", "77")]).unwrap();
        assert_eq!(c.spin, 0, "passive never spins");
    }

    #[test]
    fn a_rank_s_share_before_mpi_comes_from_its_launcher() {
        let cpus: Vec<usize> = (0..16).collect();
        let with = |vars: &'static [(&'static str, &'static str)]| {
            launcher_cpu_share(
                &move |n| {
                    vars.iter()
                        .find(|(k, _)| *k == n)
                        .map(|(_, v)| v.to_string())
                },
                &cpus,
            )
        };
        // Open MPI: 2 ranks on the node share its 16 CPUs.
        assert_eq!(
            with(&[
                ("OMPI_COMM_WORLD_LOCAL_RANK", "1"),
                ("OMPI_COMM_WORLD_LOCAL_SIZE", "2")
            ]),
            Some(8)
        );
        // Hydra and PMIx say it in their own words.
        assert_eq!(
            with(&[("MPI_LOCALRANKID", "0"), ("MPI_LOCALNRANKS", "16")]),
            Some(1)
        );
        assert_eq!(
            with(&[("PMIX_LOCAL_RANK", "2"), ("PMIX_LOCAL_SIZE", "3")]),
            Some(6)
        );
        // A launcher that does not say, or says nonsense: unknown.
        assert_eq!(with(&[]), None);
        assert_eq!(with(&[("OMPI_COMM_WORLD_LOCAL_RANK", "0")]), None);
        assert_eq!(
            with(&[
                ("OMPI_COMM_WORLD_LOCAL_RANK", "4"),
                ("OMPI_COMM_WORLD_LOCAL_SIZE", "4")
            ]),
            None
        );
    }

    #[test]
    fn bad_values_name_the_variable_and_what_it_accepts() {
        for (var, val, accepts) in [
            ("CANTUS_WORKERS", "two", "positive integer"),
            ("CANTUS_WORKERS", "0", "positive integer"),
            ("CANTUS_STACK_SIZE", "12Q", "K, M or G"),
            ("CANTUS_STACK_SIZE", "1K", "from 16K"),
            ("CANTUS_WAIT_POLICY", "lazy", "active, passive, hybrid"),
            ("CANTUS_SPIN", "-1", "integer from 0"),
            ("CANTUS_MAX_THREADS", "x", "positive integer"),
            ("CANTUS_PIN", "maybe", "true/false"),
            ("CANTUS_DEADLOCK_MS", "soon", "milliseconds"),
            ("CANTUS_CHANT_POLL", "tasks", "scheduler or task"),
            ("CANTUS_MPI_PROGRESS", "progress", "auto, inline or thread"),
            ("CANTUS_MPI_NODES", "0", "positive integer"),
            ("CANTUS_MPI_NODES", "two", "positive integer"),
            (
                "CANTUS_PGAS",
                "mpi",
                "shared (global memory every locale maps) or messages",
            ),
        ] {
            let e = with_env(&[(var, val)]).unwrap_err();
            assert_eq!(e.kind(), ErrorKind::InvalidConfig);
            let msg = e.to_string();
            assert!(msg.contains(var) && msg.contains(accepts), "{msg}");
        }
    }

    #[test]
    fn messages_are_sentences_and_debug_adds_the_kind() {
        let e = with_env(&[("CANTUS_WORKERS", "abc")]).unwrap_err();
        assert_eq!(
            e.to_string(),
            "CANTUS_WORKERS=\"abc\" is not valid: cantus accepts a positive integer up to 65536"
        );
        assert_eq!(format!("{e:?}"), format!("Error(InvalidConfig): {e}"));
        let e = Builder::new()
            .ignore_environment()
            .stack_size(100)
            .resolve(&|_| None)
            .unwrap_err();
        assert_eq!(
            e.to_string(),
            "the stack size 100 (Builder::stack_size) is not valid: cantus accepts a size in \
             bytes from 16K (16384) to 1G (1073741824)"
        );
        let e = Builder::new()
            .ignore_environment()
            .max_threads(0)
            .resolve(&|_| None)
            .unwrap_err();
        assert!(
            e.to_string()
                .starts_with("the thread limit 0 (Builder::max_threads) is not valid"),
            "{e}"
        );
        let e = with_env(&[("CANTUS_WORKERS", "8"), ("CANTUS_MAX_THREADS", "4")]).unwrap_err();
        assert_eq!(
            format!("{e:?}"),
            "Error(TooManyThreads): cantus needs 8 worker threads but the thread limit is 4: \
             lower CANTUS_WORKERS or raise CANTUS_MAX_THREADS (no thread was started)"
        );
    }

    #[test]
    fn thread_limit_is_checked_before_start() {
        let e = with_env(&[("CANTUS_WORKERS", "8"), ("CANTUS_MAX_THREADS", "4")]).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::TooManyThreads);
        assert!(e.to_string().contains("CANTUS_MAX_THREADS"));
    }

    #[test]
    fn heap_bytes_default_validate_and_round_to_pages() {
        assert_eq!(with_env(&[]).unwrap().heap_bytes, DEFAULT_HEAP_BYTES);
        let c = with_env(&[("CANTUS_HEAP_BYTES", "1G")]).unwrap();
        assert_eq!(c.heap_bytes, 1 << 30);
        let e = with_env(&[("CANTUS_HEAP_BYTES", "4K")]).unwrap_err();
        assert!(
            e.to_string()
                .contains("CANTUS_HEAP_BYTES=\"4K\" is not valid")
                && e.to_string().contains("from 64K to 64G"),
            "{e}"
        );
        let e = Builder::new()
            .ignore_environment()
            .heap_bytes(1000)
            .resolve(&|_| None)
            .unwrap_err();
        assert!(e.to_string().contains("Builder::heap_bytes"), "{e}");
        let c = Builder::new()
            .ignore_environment()
            .heap_bytes(100_000)
            .resolve(&|_| None)
            .unwrap();
        assert_eq!(c.heap_bytes % page_size(), 0);
        assert!(c.heap_bytes >= 100_000);
    }

    #[test]
    fn ring_bytes_accept_4k_to_1g_and_blame_the_setting_given() {
        assert_eq!(
            with_env(&[("CANTUS_RING_BYTES", "4K")]).unwrap().ring_bytes,
            4096
        );
        assert_eq!(
            with_env(&[("CANTUS_RING_BYTES", "1G")]).unwrap().ring_bytes,
            1 << 30
        );
        for bad in ["3000", "2K", "96K", "2G"] {
            let e = with_env(&[("CANTUS_RING_BYTES", bad)])
                .unwrap_err()
                .to_string();
            assert!(
                e.starts_with(&format!("CANTUS_RING_BYTES=\"{bad}\" is not valid"))
                    && e.contains("4K")
                    && !e.contains("Builder::"),
                "{e}"
            );
        }
        let e = Builder::new()
            .ignore_environment()
            .ring_bytes(3 << 10)
            .resolve(&|_| None)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("Builder::ring_bytes") && e.contains("from 4K to 1G"),
            "{e}"
        );
    }

    #[test]
    fn the_pgas_memory_is_chosen_by_name() {
        assert_eq!(with_env(&[]).unwrap().pgas, None);
        let c = with_env(&[("CANTUS_PGAS", " Messages")]).unwrap();
        assert_eq!(c.pgas, Some(PgasMemory::Messages));
        let c = with_env(&[("CANTUS_PGAS", "shared")]).unwrap();
        assert_eq!(c.pgas, Some(PgasMemory::Shared));
        let e = with_env(&[("CANTUS_PGAS", "")]).unwrap_err();
        assert!(
            e.to_string()
                .starts_with("CANTUS_PGAS=\"\" is not valid: cantus accepts shared"),
            "{e}"
        );
    }

    #[test]
    fn sizes_parse_with_suffixes() {
        assert_eq!(parse_size("X", "16384").unwrap(), 16384);
        assert_eq!(parse_size("X", "1M").unwrap(), 1 << 20);
        assert_eq!(parse_size("X", "2MiB").unwrap(), 2 << 20);
        assert_eq!(parse_size("X", "1g").unwrap(), 1 << 30);
        assert!(parse_size("X", "2G").is_err());
        assert!(parse_size("X", "99999999999999999999K").is_err());
    }
}
