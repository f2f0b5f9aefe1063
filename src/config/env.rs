//! Resolving a [`Builder`] against the `CANTUS_*` environment: each
//! setting's variable, parsing, limits and the messages of bad values.
//! [`Builder::resolve`] calls one function per setting (or per group of
//! settings resolved together), in the order their errors are reported;
//! each takes the environment's value over the builder's over the
//! default.

use super::cpus::cpu_share;
use super::*;
use crate::error::ErrorKind;

/// The environment as [`Builder::resolve`] reads it: a variable's value,
/// `None` where it is unset (or the builder ignores the environment).
type Env<'a> = &'a dyn Fn(&str) -> Option<String>;

/// This process's place in its job of locales.
struct LocalePlace {
    /// This process's locale.
    here: usize,
    /// Locales in the job.
    locales: usize,
    /// The count the program asked for and where it said so, if it did
    /// ([`Config::locales_asked`]).
    asked: Option<(usize, String)>,
}

impl Builder {
    /// Applies environment overrides and defaults, and validates.
    pub(crate) fn resolve(&self, env: &dyn Fn(&str) -> Option<String>) -> Result<Config, Error> {
        let env = |name: &str| if self.ignore_env { None } else { env(name) };
        let env: Env = &env;
        let launch = self.launch(env)?;
        let LocalePlace {
            here,
            locales,
            asked: locales_asked,
        } = self.resolve_locales(env, launch)?;
        let ring_bytes = self.resolve_ring_bytes(env)?;
        let rendezvous_bytes = self.resolve_rendezvous_bytes(env)?;
        let heap_bytes = self.resolve_heap_bytes(env)?;
        let pgas = resolve_pgas(env)?;
        let cpus = cpu_share(&affinity_cpus(), here, locales);
        let (workers, workers_given) = self.resolve_workers(env, &cpus)?;
        let stack_size = self.resolve_stack_size(env)?;
        let wait_policy = self.resolve_wait_policy(env)?;
        let spin = self.resolve_spin(env)?;
        let max_threads = self.resolve_max_threads(env)?;
        let pin = self.resolve_pin(env)?;
        let deadlock_ms = self.resolve_deadlock_ms(env)?;
        let stats = self.resolve_stats(env)?;
        let trace = self.resolve_trace(env);
        let trace_job = trace_job_from_env(here)?;
        let trace_events = self.resolve_trace_events(env)?;
        let chant_task_polls = resolve_chant_poll(env)?;
        let mpi_progress = resolve_mpi_progress(env)?;
        let mpi_nodes = resolve_mpi_nodes(env)?;
        check_thread_limit(workers, max_threads)?;
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
            rendezvous_bytes,
            heap_bytes: heap_bytes.next_multiple_of(page),
            pgas,
            chant_task_polls,
            mpi_progress,
            mpi_nodes,
            locales_asked,
            host_worker: self.host_worker,
        })
    }

    /// This locale, the locale count and what the program asked for
    /// (`CANTUS_LOCALE`, `CANTUS_LOCALES` over the MPI launcher's size or
    /// `Builder::locales` over the default locales over 1), checked.
    fn resolve_locales(&self, env: Env, launch: Launch) -> Result<LocalePlace, Error> {
        let here = locale_from_env()?;
        let locales = self.resolve_locale_count(env, launch, here)?;
        let asked = self.locales_asked(env, here, locales);
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
        Ok(LocalePlace {
            here,
            locales,
            asked,
        })
    }

    /// The locale count: locale 0's `CANTUS_LOCALES` for a locale it
    /// started, else `CANTUS_LOCALES` over (under MPI) the launcher's size
    /// or `Builder::locales` over the default locales over 1.
    fn resolve_locale_count(&self, env: Env, launch: Launch, here: usize) -> Result<usize, Error> {
        Ok(match (here, env(LOCALES_VAR)) {
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
        })
    }

    /// The locale count the program asked for and where (`CANTUS_LOCALES`
    /// over `Builder::locales`), none for a locale that locale 0 started.
    fn locales_asked(&self, env: Env, here: usize, locales: usize) -> Option<(usize, String)> {
        // What the program asked for, if it did: an MPI job's size is the
        // launcher's, and a request that disagrees is refused there
        // (`comm/mpi`), from the environment or the builder alike.
        match (here, env(LOCALES_VAR), self.locales) {
            (h, _, _) if h > 0 => None,
            (_, Some(v), _) => Some((locales, format!("{LOCALES_VAR}={}", v.trim()))),
            (_, None, Some(n)) => Some((n, format!("Builder::locales({n})"))),
            (_, None, None) => None,
        }
    }

    /// Bytes of each shared-memory ring: `CANTUS_RING_BYTES` over
    /// `Builder::ring_bytes` over the default, a power of two in range.
    fn resolve_ring_bytes(&self, env: Env) -> Result<usize, Error> {
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
        Ok(ring_bytes)
    }

    /// Bytes of each pair's rendezvous area: `CANTUS_RENDEZVOUS_BYTES`
    /// over `Builder::rendezvous_bytes` over the default; 0 (off) or a
    /// power of two in range.
    fn resolve_rendezvous_bytes(&self, env: Env) -> Result<usize, Error> {
        const WHAT: &str = "0 (off) or a power of two from 1M to 1G (e.g. 8M)";
        let bytes = match env("CANTUS_RENDEZVOUS_BYTES") {
            Some(v) if v.trim() == "0" => 0,
            Some(v) => {
                let bytes = parse_size_in(
                    "CANTUS_RENDEZVOUS_BYTES",
                    &v,
                    MIN_RENDEZVOUS_BYTES,
                    MAX_RENDEZVOUS_BYTES,
                )?;
                if !bytes.is_power_of_two() {
                    return Err(invalid("CANTUS_RENDEZVOUS_BYTES", &v, WHAT));
                }
                bytes
            }
            None => self.rendezvous_bytes.unwrap_or(DEFAULT_RENDEZVOUS_BYTES),
        };
        if bytes != 0
            && (!bytes.is_power_of_two()
                || !(MIN_RENDEZVOUS_BYTES..=MAX_RENDEZVOUS_BYTES).contains(&bytes))
        {
            // Only the builder gets here: the variable's value was checked above.
            return Err(bad_setting(
                "the rendezvous area",
                "rendezvous_bytes",
                &bytes.to_string(),
                "0 (off) or a power of two from 1M to 1G (CANTUS_RENDEZVOUS_BYTES)",
            ));
        }
        Ok(bytes)
    }

    /// Bytes of each locale's heap segment (not yet rounded to pages):
    /// `CANTUS_HEAP_BYTES` over `Builder::heap_bytes` over the default.
    fn resolve_heap_bytes(&self, env: Env) -> Result<usize, Error> {
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
        Ok(heap_bytes)
    }

    /// The worker count and whether it was given: `CANTUS_WORKERS` over
    /// `Builder::workers` over the CPUs of this locale's share (`cpus`).
    fn resolve_workers(&self, env: Env, cpus: &[usize]) -> Result<(usize, bool), Error> {
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
        Ok((workers, workers_given))
    }

    /// Bytes of each task's stack (not yet rounded to pages):
    /// `CANTUS_STACK_SIZE` over `Builder::stack_size` over the default.
    fn resolve_stack_size(&self, env: Env) -> Result<usize, Error> {
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
        Ok(stack_size)
    }

    /// How idle workers wait: `CANTUS_WAIT_POLICY` over
    /// `Builder::wait_policy` over hybrid.
    fn resolve_wait_policy(&self, env: Env) -> Result<WaitPolicy, Error> {
        Ok(match env("CANTUS_WAIT_POLICY") {
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
        })
    }

    /// Idle-loop iterations before sleeping: `CANTUS_SPIN` over
    /// `Builder::spin` over the default.
    fn resolve_spin(&self, env: Env) -> Result<u32, Error> {
        Ok(match env("CANTUS_SPIN") {
            Some(v) => {
                let n = v.trim().parse::<u32>().ok().filter(|n| *n <= 1_000_000_000);
                n.ok_or_else(|| invalid("CANTUS_SPIN", &v, "an integer from 0 to 1000000000"))?
            }
            None => self.spin.unwrap_or(DEFAULT_SPIN),
        })
    }

    /// The thread limit: `CANTUS_MAX_THREADS` over `Builder::max_threads`
    /// over the default.
    fn resolve_max_threads(&self, env: Env) -> Result<usize, Error> {
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
        Ok(max_threads)
    }

    /// Whether workers are pinned to CPUs: `CANTUS_PIN` over
    /// `Builder::pin` over pinned.
    fn resolve_pin(&self, env: Env) -> Result<bool, Error> {
        Ok(match env("CANTUS_PIN") {
            Some(v) => parse_bool("CANTUS_PIN", &v)?,
            None => self.pin.unwrap_or(true),
        })
    }

    /// Milliseconds before a deadlock is reported, 0 for off:
    /// `CANTUS_DEADLOCK_MS` over `Builder::deadlock_ms` over the default.
    fn resolve_deadlock_ms(&self, env: Env) -> Result<u64, Error> {
        Ok(match env("CANTUS_DEADLOCK_MS") {
            Some(v) => parse_deadlock_ms(&v)?,
            None => self.deadlock_ms.unwrap_or(DEFAULT_DEADLOCK_MS),
        })
    }

    /// Whether statistics are printed at shutdown: `CANTUS_STATS` over
    /// `Builder::stats` over off.
    fn resolve_stats(&self, env: Env) -> Result<bool, Error> {
        Ok(match env("CANTUS_STATS") {
            Some(v) => parse_bool("CANTUS_STATS", &v)?,
            None => self.stats.unwrap_or(false),
        })
    }

    /// Where to write a timeline trace: `CANTUS_TRACE` (empty for none)
    /// over `Builder::trace` over none.
    fn resolve_trace(&self, env: Env) -> Option<std::path::PathBuf> {
        match env("CANTUS_TRACE") {
            Some(v) if !v.trim().is_empty() => Some(std::path::PathBuf::from(v.trim())),
            Some(_) => None,
            None => self.trace.clone(),
        }
    }

    /// Events each trace lane holds: `CANTUS_TRACE_EVENTS` over
    /// `Builder::trace_events` over the default, in range.
    fn resolve_trace_events(&self, env: Env) -> Result<usize, Error> {
        Ok(match env("CANTUS_TRACE_EVENTS") {
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
        })
    }
}

/// This process's locale: locale 0's `CANTUS_LOCALE` for a locale it
/// started (read whatever `ignore_env` says), else 0.
fn locale_from_env() -> Result<usize, Error> {
    // A locale started by locale 0 takes its place in the job from the
    // variables locale 0 set, whatever `ignore_env` says.
    match std::env::var(LOCALE_VAR) {
        Err(_) => Ok(0),
        Ok(v) => v.parse::<usize>().map_err(|_| {
            invalid(
                LOCALE_VAR,
                &v,
                "a locale number (it is set by cantus: unset it)",
            )
        }),
    }
}

/// The global address space's memory: `CANTUS_PGAS`, else none (the
/// transport's choice).
fn resolve_pgas(env: Env) -> Result<Option<PgasMemory>, Error> {
    Ok(match env(PGAS_VAR) {
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
    })
}

/// The traced job's number: locale 0's `CANTUS_TRACE_JOB` for a locale it
/// started (read whatever `ignore_env` says), else 0 (chosen later).
fn trace_job_from_env(here: usize) -> Result<u64, Error> {
    // A locale started by locale 0 writes its part where locale 0's
    // goes (whatever `ignore_env` says, as its place in the job).
    Ok(match (here, std::env::var(TRACE_JOB_VAR)) {
        (h, Ok(v)) if h > 0 && !v.trim().is_empty() => {
            u64::from_str_radix(v.trim(), 16).map_err(|_| {
                invalid(
                    TRACE_JOB_VAR,
                    &v,
                    "a traced job's number in hexadecimal (it is set by cantus: unset it)",
                )
            })?
        }
        _ => 0,
    })
}

/// Who polls for a Chant receive that waits: `CANTUS_CHANT_POLL`, else
/// none (the program's choice or the default).
fn resolve_chant_poll(env: Env) -> Result<Option<bool>, Error> {
    Ok(match env("CANTUS_CHANT_POLL") {
        None => None,
        Some(v) => match v.trim().to_ascii_lowercase().as_str() {
            "scheduler" => Some(false),
            "task" => Some(true),
            _ => return Err(invalid("CANTUS_CHANT_POLL", &v, "scheduler or task")),
        },
    })
}

/// Who makes an MPI job's MPI calls: `CANTUS_MPI_PROGRESS`, else auto.
fn resolve_mpi_progress(env: Env) -> Result<MpiProgress, Error> {
    Ok(match env(MPI_PROGRESS_VAR) {
        None => MpiProgress::Auto,
        Some(v) => match v.trim().to_ascii_lowercase().as_str() {
            "auto" => MpiProgress::Auto,
            "inline" => MpiProgress::Inline,
            "thread" => MpiProgress::Thread,
            _ => return Err(invalid(MPI_PROGRESS_VAR, &v, "auto, inline or thread")),
        },
    })
}

/// How many nodes each real node's ranks behave as: `CANTUS_MPI_NODES`,
/// else none (the real nodes).
fn resolve_mpi_nodes(env: Env) -> Result<Option<usize>, Error> {
    env(MPI_NODES_VAR)
        .map(|v| parse_count(MPI_NODES_VAR, &v))
        .transpose()
}

/// Refuses more workers than the thread limit (both resolved above).
fn check_thread_limit(workers: usize, max_threads: usize) -> Result<(), Error> {
    if workers > max_threads {
        return Err(Error::new(
            ErrorKind::TooManyThreads,
            format!(
                "cantus needs {workers} worker threads but the thread limit is {max_threads}: \
                 lower CANTUS_WORKERS or raise CANTUS_MAX_THREADS (no thread was started)"
            ),
        ));
    }
    Ok(())
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
