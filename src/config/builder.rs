//! [`Builder`]: every setting of a runtime, each with a setter; unset
//! ones take the environment's value or the default when the runtime
//! starts (`env.rs`, `Builder::build` beside `Runtime`).

use super::*;

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
/// | `CANTUS_RENDEZVOUS_BYTES` | bytes of each ordered pair's area for large messages on shared memory, `0` (off) or a power of two, 1M..1G | 8M |
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
    pub(super) workers: Option<usize>,
    pub(super) stack_size: Option<usize>,
    pub(super) wait_policy: Option<WaitPolicy>,
    pub(super) spin: Option<u32>,
    pub(super) max_threads: Option<usize>,
    pub(super) pin: Option<bool>,
    pub(super) deadlock_ms: Option<u64>,
    pub(super) stats: Option<bool>,
    pub(super) trace: Option<std::path::PathBuf>,
    pub(super) trace_events: Option<usize>,
    pub(super) locales: Option<usize>,
    pub(super) default_locales: Option<usize>,
    pub(super) ring_bytes: Option<usize>,
    pub(super) rendezvous_bytes: Option<usize>,
    pub(super) heap_bytes: Option<usize>,
    pub(super) ignore_env: bool,
    /// The thread that builds the runtime hosts worker 0 (`sched/worker/host.rs`).
    pub(super) host_worker: bool,
}

impl Builder {
    /// A builder with every setting at its default.
    pub fn new() -> Builder {
        Builder::default()
    }

    /// The thread that builds the runtime runs worker 0 itself, between
    /// its own code, instead of a thread of its own: its forks go to
    /// worker 0's deque and its waits run worker 0's tasks (Qthreads' main
    /// task of shepherd 0, `sched/worker/host.rs`). Only for a runtime of
    /// one locale; the C ABI's `qthread_initialize` asks for it.
    pub(crate) fn host_worker(mut self, on: bool) -> Builder {
        self.host_worker = on;
        self
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

    /// Bytes of each ordered pair of locales' rendezvous area on shared
    /// memory (`0`, off, or a power of two, 1M to 1G): a message larger
    /// than half a ring is written once into a block of it and read there
    /// by its receiver, instead of travelling through the ring in pieces;
    /// messages larger than half the area go in pieces of that size.
    /// Pages take memory only once touched.
    pub fn rendezvous_bytes(mut self, bytes: usize) -> Builder {
        self.rendezvous_bytes = Some(bytes);
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
}
