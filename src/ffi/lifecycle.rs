//! Startup and teardown (seed 000, section 3 and 4.1): the runtime the C
//! ABI starts lives here, and every tasking call first checks that one
//! runs.

use super::Code;
use super::error::{ECONTEXT, EINVAL, Fail, OK, boundary};
use crate::runtime::Runtime;
use crate::sched::{Registry, WorkerLocal};
use std::cell::Cell;
use std::ffi::{c_int, c_long};
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

/// The runtime started through the C ABI.
static RUNTIME: Mutex<Option<Runtime>> = Mutex::new(None);
/// Set once `RUNTIME` holds a runtime, cleared after it shut down: the
/// cheap check for outside threads (tasks know a runtime runs).
static STARTED: AtomicBool = AtomicBool::new(false);
/// Counts the runtimes started here; the thread that started the current
/// one has it in `STARTER_OF` (Qthreads' main thread: `qthread_id() == 1`).
static GENERATION: AtomicU64 = AtomicU64::new(0);

thread_local! {
    static STARTER_OF: Cell<u64> = const { Cell::new(0) };
}

/// The number of the runtime started last (0 before the first).
pub(crate) fn generation() -> u64 {
    GENERATION.load(Ordering::Relaxed)
}

/// Whether the calling thread started the runtime that runs now.
pub(crate) fn is_starter_thread() -> bool {
    STARTED.load(Ordering::Acquire)
        && STARTER_OF.try_with(Cell::get).unwrap_or(0) == GENERATION.load(Ordering::Relaxed)
}

/// `cantus_config_t`: settings for `cantus_init`; zero means "default".
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct CantusConfig {
    /// Worker threads; 0 takes `CANTUS_WORKERS` or the CPUs of the affinity mask.
    pub workers: usize,
    /// Task stack size in bytes; 0 takes `CANTUS_STACK_SIZE` or 256 KiB.
    pub stack_size: usize,
    /// Deadlock grace period in ms; negative takes the default, 0 turns it off.
    pub deadlock_ms: c_long,
    /// Non-zero: ignore `CANTUS_*` environment variables.
    pub ignore_environment: c_int,
}

/// Whether a runtime is running, as seen from the caller.
#[inline]
pub(crate) fn running() -> bool {
    WorkerLocal::current().is_some()
        || STARTED.load(Ordering::Acquire)
        || Registry::current().is_some()
}

/// `Ok` if a runtime runs, else the "call cantus_init first" failure.
#[inline]
pub(crate) fn require_runtime(call: &str) -> Result<(), Fail> {
    if running() {
        Ok(())
    } else {
        Err(Fail::no_runtime(call))
    }
}

/// Starts the runtime with `builder` (after the environment overrides).
pub(crate) fn start(call: &str, builder: crate::config::Builder) -> Result<(), Fail> {
    let mut slot = RUNTIME.lock().unwrap_or_else(|e| e.into_inner());
    if slot.is_some() || WorkerLocal::current().is_some() {
        return Err(Fail::new(
            super::error::EALREADY,
            format!("{call}: a cantus runtime is already running in this process"),
        ));
    }
    let rt = builder.build().map_err(|e| Fail::from_error(call, &e))?;
    *slot = Some(rt);
    // Under the RUNTIME lock: one generation per started runtime.
    let generation = GENERATION.load(Ordering::Relaxed) + 1;
    GENERATION.store(generation, Ordering::Relaxed);
    STARTER_OF.with(|g| g.set(generation));
    // Release pairs with the Acquire load in `running`.
    STARTED.store(true, Ordering::Release);
    Ok(())
}

/// Waits for every task, then stops the runtime started by `start`.
pub(crate) fn stop(call: &str) -> Result<(), Fail> {
    if WorkerLocal::current().is_some() {
        return Err(Fail::new(
            ECONTEXT,
            format!(
                "{call} called from inside a task: the runtime waits for every task \
                 before it stops, so it must be stopped from an outside thread"
            ),
        ));
    }
    let rt = {
        let mut slot = RUNTIME.lock().unwrap_or_else(|e| e.into_inner());
        // Worker 0 runs on the thread that started the runtime
        // (`sched/worker/host.rs`): only that thread can finish its tasks.
        if slot
            .as_ref()
            .and_then(|rt| rt.host_thread())
            .is_some_and(|h| h != std::thread::current().id())
        {
            return Err(Fail::new(
                ECONTEXT,
                format!(
                    "{call} called from another thread than the one that started the runtime: \
                     that thread runs shepherd 0 (as Qthreads' main task) and must stop it"
                ),
            ));
        }
        slot.take()
    };
    match rt {
        Some(rt) => {
            let stopped = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| rt.shutdown()));
            STARTED.store(false, Ordering::Release);
            if let Err(p) = stopped {
                std::panic::resume_unwind(p);
            }
            Ok(())
        }
        None => Err(Fail::no_runtime(call)),
    }
}

pub(crate) fn builder_from(
    call: &str,
    c: Option<&CantusConfig>,
) -> Result<crate::config::Builder, Fail> {
    let mut b = crate::config::Builder::new();
    if let Some(c) = c {
        if c.workers > 0 {
            b = b.workers(c.workers);
        }
        if c.stack_size > 0 {
            b = b.stack_size(c.stack_size);
        }
        if c.deadlock_ms == 0 {
            b = b.deadlock_detection(None);
        } else if c.deadlock_ms > 0 {
            b = b.deadlock_detection(Some(Duration::from_millis(c.deadlock_ms as u64)));
        }
        if c.ignore_environment != 0 {
            b = b.ignore_environment();
        }
        if c.workers > u32::MAX as usize {
            return Err(Fail::new(
                EINVAL,
                format!("{call}: workers = {} is out of range", c.workers),
            ));
        }
    }
    Ok(b)
}

/// cantus_init: starts the runtime.
///
/// # Safety
/// `config` is NULL or points at a readable `cantus_config_t`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cantus_init(config: *const CantusConfig) -> Code {
    boundary("cantus_init", || {
        // SAFETY: per the contract, config is NULL or valid for reads.
        let c = unsafe { config.as_ref() };
        start("cantus_init", builder_from("cantus_init", c)?)?;
        Ok(OK)
    })
}

/// cantus_finalize: waits for every task, then stops the runtime.
#[unsafe(no_mangle)]
pub extern "C" fn cantus_finalize() -> Code {
    boundary("cantus_finalize", || stop("cantus_finalize").map(|()| OK))
}

/// cantus_is_running: 1 if a runtime runs, else 0.
#[unsafe(no_mangle)]
pub extern "C" fn cantus_is_running() -> Code {
    boundary("cantus_is_running", || Ok(c_int::from(running())))
}

thread_local! {
    /// Activity declarations of this outside thread, innermost last.
    static ACTIVITY: std::cell::RefCell<Vec<crate::task::OutsideActivity>> =
        const { std::cell::RefCell::new(Vec::new()) };
}

/// cantus_outside_activity_begin: declares that the calling outside thread
/// is busy and may still wake waiting tasks.
#[unsafe(no_mangle)]
pub extern "C" fn cantus_outside_activity_begin() -> Code {
    const CALL: &str = "cantus_outside_activity_begin";
    boundary(CALL, || {
        if WorkerLocal::current().is_some() {
            return Err(Fail::new(
                ECONTEXT,
                format!("{CALL} called from a task: only outside threads declare activity"),
            ));
        }
        require_runtime(CALL)?;
        let a = crate::task::OutsideActivity::begin().ok_or_else(|| Fail::no_runtime(CALL))?;
        ACTIVITY.with(|v| v.borrow_mut().push(a));
        Ok(OK)
    })
}

/// cantus_outside_activity_end: ends the innermost declaration of
/// `cantus_outside_activity_begin` on this thread.
#[unsafe(no_mangle)]
pub extern "C" fn cantus_outside_activity_end() -> Code {
    const CALL: &str = "cantus_outside_activity_end";
    boundary(CALL, || match ACTIVITY.with(|v| v.borrow_mut().pop()) {
        Some(a) => {
            drop(a);
            Ok(OK)
        }
        None => Err(Fail::new(
            ECONTEXT,
            format!(
                "{CALL}: this thread has no activity declared by cantus_outside_activity_begin"
            ),
        )),
    })
}

/// The runtime of the crate's unit tests that need one: the C ABI's (two
/// workers, no deadlock detection), started once and kept for the
/// process, since one runtime runs at a time and some tests keep theirs
/// (the full/empty table's). The guard serialises its users.
#[cfg(all(test, not(loom)))]
pub(crate) fn shared_test_runtime() -> std::sync::MutexGuard<'static, ()> {
    use std::sync::{Mutex, OnceLock};
    static STARTED: OnceLock<()> = OnceLock::new();
    static SERIAL: Mutex<()> = Mutex::new(());
    STARTED.get_or_init(|| {
        let b = crate::config::Builder::new()
            .workers(2)
            .ignore_environment()
            .deadlock_detection(None);
        crate::ffi::lifecycle::start("test", b).unwrap_or_else(|f| panic!("{}", f.message));
    });
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}
