//! Resolving a [`Builder`] against the `CANTUS_*` environment: each
//! setting's variable, parsing, limits and the messages of bad values.

use super::cpus::cpu_share;
use super::*;
use crate::error::ErrorKind;

impl Builder {
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

/// An environment variable with a value cantus does not accept.
pub(super) fn invalid(name: &str, value: &str, accepts: &str) -> Error {
    Error::new(
        ErrorKind::InvalidConfig,
        format!("{name}={value:?} is not valid: cantus accepts {accepts}"),
    )
}

/// A builder setting (`what`, set with `Builder::method`) with a value
/// cantus does not accept. (The C API's `cantus_config_t` fields reach the
/// same checks.)
pub(super) fn bad_setting(what: &str, method: &str, value: &str, accepts: &str) -> Error {
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

pub(super) fn parse_count(name: &str, v: &str) -> Result<usize, Error> {
    v.trim()
        .parse::<usize>()
        .ok()
        .filter(|n| *n > 0 && *n <= 65_536)
        .ok_or_else(|| invalid(name, v, "a positive integer up to 65536"))
}

pub(super) fn parse_bool(name: &str, v: &str) -> Result<bool, Error> {
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
pub(super) fn parse_size_in(name: &str, v: &str, lo: usize, hi: usize) -> Result<usize, Error> {
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
pub(super) fn human(bytes: usize) -> String {
    for (suffix, unit) in [("G", 1usize << 30), ("M", 1 << 20), ("K", 1 << 10)] {
        if bytes >= unit && bytes % unit == 0 {
            return format!("{}{suffix}", bytes / unit);
        }
    }
    bytes.to_string()
}
