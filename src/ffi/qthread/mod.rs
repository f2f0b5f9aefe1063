//! The Qthreads-compatible subset (`include/qthread/*.h`): the same names
//! and semantics as Qthreads for the functions listed in the headers, on
//! cantus's runtime. Error codes are Qthreads' (`QTHREAD_*`); the message
//! of the last failure is `cantus_last_error()`.
//!
//! Mapping: a Qthreads *shepherd* is a cantus worker, and each has one
//! *worker* thread, so `qthread_num_shepherds() == qthread_num_workers()`
//! while no shepherd is disabled.
//! The thread that calls `qthread_initialize` stays an outside thread to
//! Rust code (seed 000, 5.2) and answers as Qthreads' main task
//! (`qthread_id()` 1, `main_task.rs`); with two shepherds or more it also
//! runs shepherd 0's worker, whose tasks its waits run
//! (`sched/worker/host.rs`, `src/ffi/README.md` "Main").

pub mod alloc;
pub mod allpairs;
pub mod atomic;
pub mod barrier;
pub(crate) mod buf;
pub mod dictionary;
pub mod dqueue;
pub mod feb;
pub mod hash;
pub mod io;
pub mod lfqueue;
pub mod locks;
pub mod loop_queue;
pub(crate) mod main_task;
#[cfg(all(test, not(loom)))]
mod migrate_tests;
pub mod pool;
pub mod qarray;
pub mod qloop;
pub mod qtimer;
pub mod queue;
pub mod qutil;
pub mod shepherds;
pub mod sinc;
pub mod spawn;
pub mod spinlock;
pub mod state;
pub mod swsrqueue;
pub mod syscalls;
pub mod tasklocal;
pub mod team;
pub mod wavefront;

use super::Code;
use super::error::{self, Fail, boundary};
use super::feb::full_empty;
use super::feb::word_at;
use super::lifecycle::{self, require_runtime};
use super::tasks::Arg;
use crate::sched::WorkerLocal;
use crate::sched::new_task::Task;
use std::ffi::{c_int, c_uint, c_ushort, c_void};
use std::sync::atomic::{AtomicU32, Ordering};

/// `QTHREAD_SUCCESS`.
pub(crate) const QTHREAD_SUCCESS: c_int = 0;
/// `QTHREAD_BADARGS`.
pub(crate) const QTHREAD_BADARGS: c_int = -1;
/// `QTHREAD_PTHREAD_ERROR`.
pub(crate) const QTHREAD_PTHREAD_ERROR: c_int = -2;
/// `QTHREAD_NOT_ALLOWED`.
pub(crate) const QTHREAD_NOT_ALLOWED: c_int = -3;
/// `QTHREAD_OPFAIL`: an operation that could not be done now (a full or
/// empty queue, a lock held by another).
pub(crate) const QTHREAD_OPFAIL: c_int = -7;
/// `QTHREAD_THIRD_PARTY_ERROR`: cantus reports its internal errors so.
pub(crate) const QTHREAD_THIRD_PARTY_ERROR: c_int = -4;
/// `NO_SHEPHERD`.
pub(crate) const NO_SHEPHERD: c_ushort = c_ushort::MAX;
/// `QTHREAD_NON_TASK_ID`.
const QTHREAD_NON_TASK_ID: c_uint = 0;

/// `qthread_f`: a task body returning its `aligned_t` result.
pub type QthreadF = Option<unsafe extern "C" fn(arg: *mut c_void) -> u64>;

/// A cantus code as the Qthreads code with the same meaning.
pub(crate) fn qt_code(code: Code) -> c_int {
    match code {
        error::OK => QTHREAD_SUCCESS,
        error::EINVAL | error::EALIGN | error::ECONFIG => QTHREAD_BADARGS,
        error::EOS | error::ETHREADS => QTHREAD_PTHREAD_ERROR,
        error::EPANIC => QTHREAD_THIRD_PARTY_ERROR,
        _ => QTHREAD_NOT_ALLOWED,
    }
}

/// [`boundary`], with the result as a Qthreads code.
pub(crate) fn qt(call: &str, body: impl FnOnce() -> Result<(), Fail>) -> c_int {
    qt_code(boundary(call, || body().map(|()| error::OK)))
}

/// [`boundary`] for a call that returns a pointer: the body's pointer on
/// success, NULL on failure (the reason in `cantus_last_error`).
pub(crate) fn boundary_ptr<T>(call: &str, body: impl FnOnce() -> Result<*mut T, Fail>) -> *mut T {
    let mut out = std::ptr::null_mut();
    let _: Code = boundary(call, || {
        out = body()?;
        Ok(error::OK)
    });
    out
}

/// The object behind a C handle (a data structure's `*_create` result),
/// or `EINVAL` (`QTHREAD_BADARGS`) naming `arg` for NULL.
///
/// # Safety
/// `p` is NULL or points at a live `T` that nothing frees during `'a`.
pub(crate) unsafe fn handle<'a, T>(call: &str, p: *mut T, arg: &str) -> Result<&'a T, Fail> {
    // SAFETY: per the contract, a non-null `p` is a live T.
    unsafe { p.as_ref() }.ok_or_else(|| Fail::null(call, arg))
}

/// Lets others run while a call waits for another party (a blocking
/// queue call): a task yields to its worker's other tasks, an outside
/// thread yields its CPU.
pub(crate) fn pause() {
    // A task yields to its worker's other tasks; the thread that hosts a
    // worker runs that worker's ready tasks; another thread yields its
    // CPU (`task::yield_now` does each).
    crate::task::yield_now();
}

/// As [`qt`], for an operation that may be refused: `Ok(Err(why))` is
/// `QTHREAD_OPFAIL` (the operation could not be done; `why` for
/// `cantus_last_error`), an `Err` the code's usual mapping.
pub(crate) fn qt_op(call: &str, body: impl FnOnce() -> Result<Result<(), String>, Fail>) -> c_int {
    let mut refused = false;
    let code = qt(call, || match body()? {
        Ok(()) => Ok(()),
        Err(why) => {
            refused = true;
            Err(Fail::new(error::EBUSY, why))
        }
    });
    if refused { QTHREAD_OPFAIL } else { code }
}

/// Reads a Qthreads environment variable (`QTHREAD_X` or `QT_X`).
fn qt_env(name: &str) -> Option<String> {
    std::env::var(format!("QTHREAD_{name}"))
        .or_else(|_| std::env::var(format!("QT_{name}")))
        .ok()
        .filter(|v| !v.trim().is_empty())
}

fn qt_env_count(call: &str, name: &str) -> Result<Option<usize>, Fail> {
    match qt_env(name) {
        None => Ok(None),
        Some(v) => match v.trim().parse::<usize>() {
            Ok(0) => Ok(None),
            Ok(n) => Ok(Some(n)),
            Err(_) => Err(Fail::new(
                error::ECONFIG,
                format!("{call}: QTHREAD_{name}={v:?} is not a non-negative integer"),
            )),
        },
    }
}

/// Starts the runtime as Qthreads would (a no-op if one runs);
/// `shepherds` (from `qthread_init`) stands for `QTHREAD_NUM_SHEPHERDS`.
fn initialize(call: &str, shepherds: Option<usize>) -> Result<(), Fail> {
    if lifecycle::running() {
        return Ok(());
    }
    // The calling thread becomes Qthreads' main task of shepherd 0: it
    // runs worker 0 (`sched/worker/host.rs`).
    let mut b = crate::config::Builder::new().host_worker(true);
    let sheps = match shepherds {
        Some(n) => Some(n),
        None => qt_env_count(call, "NUM_SHEPHERDS")?,
    };
    let per = qt_env_count(call, "NUM_WORKERS_PER_SHEPHERD")?;
    let hwpar = qt_env_count(call, "HWPAR")?;
    if let Some(n) = hwpar.or(sheps.map(|s| s * per.unwrap_or(1))) {
        b = b.workers(n);
    }
    if let Some(size) = qt_env_count(call, "STACK_SIZE")? {
        b = b.stack_size(size.max(crate::config::MIN_STACK_SIZE));
    }
    let tasklocal = qt_env_count(call, "TASKLOCAL_SIZE")?;
    // Honoured: cantus has the knob.
    if let Some(v) = qt_env("SPINCOUNT") {
        // (0 is a count here: no spinning.)
        let n = v.trim().parse::<u32>().map_err(|_| {
            Fail::new(
                error::ECONFIG,
                format!(
                    "{call}: QTHREAD_SPINCOUNT={v:?} is not a count from 0 to {}",
                    u32::MAX
                ),
            )
        })?;
        b = b.spin(n);
    }
    if let Some(on) = qt_env_bool(call, "AFFINITY")? {
        b = b.pin(on);
    }
    let info = qt_env_bool(call, "INFO")?.unwrap_or(false);
    // Accepted, checked, and without effect (qthread.h says why).
    qt_env_bool(call, "GUARD_PAGES")?;
    qt_env_count(call, "STEAL_RATIO")?;
    if let Some(unit) = qt_env("WORKER_UNIT") {
        const UNITS: [&str; 10] = [
            "pu", "core", "socket", "package", "node", "numanode", "l1cache", "l2cache", "l3cache",
            "machine",
        ];
        if !UNITS.contains(&unit.trim().to_ascii_lowercase().as_str()) {
            return Err(Fail::new(
                error::ECONFIG,
                format!(
                    "{call}: QTHREAD_WORKER_UNIT={unit:?} is not a hardware unit (one of {})",
                    UNITS.join(", ")
                ),
            ));
        }
    }
    tasklocal::set_default_size(tasklocal);
    // A new runtime numbers its forks from 2 again (as Qthreads after
    // qthread_finalize); Relaxed: no task runs yet.
    NEXT_FORK_ID.store(FIRST_FORK_ID, Ordering::Relaxed);
    let r = match lifecycle::start(call, b) {
        Err(f) if f.code == error::EALREADY => Ok(()),
        r => r,
    };
    if info && r.is_ok() {
        eprintln!(
            "{call}: cantus runs {} shepherd(s) of one worker each, task stacks of {} bytes",
            crate::query::workers().unwrap_or(0),
            crate::sched::stack_size().unwrap_or(0)
        );
    }
    r
}

/// A Qthreads yes/no setting (`QTHREAD_X` or `QT_X`): yes, true, on, 1 /
/// no, false, off, 0 (any case); anything else is an error naming it.
fn qt_env_bool(call: &str, name: &str) -> Result<Option<bool>, Fail> {
    let Some(v) = qt_env(name) else {
        return Ok(None);
    };
    match v.trim().to_ascii_lowercase().as_str() {
        "yes" | "true" | "on" | "1" => Ok(Some(true)),
        "no" | "false" | "off" | "0" => Ok(Some(false)),
        _ => Err(Fail::new(
            error::ECONFIG,
            format!("{call}: QTHREAD_{name}={v:?} is not yes or no (also true/false, on/off, 1/0)"),
        )),
    }
}

/// qthread_initialize: starts the runtime (a no-op if one runs).
#[unsafe(no_mangle)]
pub extern "C" fn qthread_initialize() -> c_int {
    qt("qthread_initialize", || {
        initialize("qthread_initialize", None)
    })
}

/// qthread_init: the deprecated form of `qthread_initialize` with a number
/// of shepherds (0: as `qthread_initialize`).
#[unsafe(no_mangle)]
pub extern "C" fn qthread_init(nshepherds: c_ushort) -> c_int {
    qt("qthread_init", || {
        let n = (nshepherds != 0 && nshepherds != NO_SHEPHERD).then_some(usize::from(nshepherds));
        initialize("qthread_init", n)
    })
}

/// qthread_finalize: waits for every task and stops the runtime.
#[unsafe(no_mangle)]
pub extern "C" fn qthread_finalize() {
    error::boundary_void("qthread_finalize", || {
        if WorkerLocal::current().is_some() {
            return Err(Fail::new(
                error::ECONTEXT,
                "qthread_finalize called from inside a task: ignored (call it from the \
                 thread that called qthread_initialize, after the tasks are done)",
            ));
        }
        main_task::end();
        match lifecycle::stop("qthread_finalize") {
            Err(f) if f.code == error::ENORUNTIME => Ok(()),
            r => r,
        }
    })
}

/// The body of a task made by `qthread_fork`/`fork_to`: `f(arg)` in the
/// forking task's team, its result filling `ret` (if not NULL).
fn forked(
    call: &'static str,
    f: unsafe extern "C" fn(*mut c_void) -> u64,
    arg: Arg,
    ret: *mut u64,
) -> impl FnOnce() + Send + 'static {
    spawn::task_body(call, f, arg, ret_loc(ret), team::for_fork(false, false))
}

/// A fork's return word as a result location.
fn ret_loc(ret: *mut u64) -> spawn::RetLoc {
    if ret.is_null() {
        spawn::RetLoc::None
    } else {
        spawn::RetLoc::Word(ret)
    }
}

/// Checks and prepares a fork: the function, the runtime, `ret` emptied.
fn prepare(
    call: &str,
    f: QthreadF,
    ret: *mut u64,
) -> Result<unsafe extern "C" fn(*mut c_void) -> u64, Fail> {
    let f = f.ok_or_else(|| Fail::null(call, "f"))?;
    require_runtime(call)?;
    if !ret.is_null() {
        // SAFETY: the caller promises `ret` is a valid aligned_t if non-null.
        let w = unsafe { word_at(call, "ret", ret)? };
        full_empty::set_word(w, false, None);
    }
    Ok(f)
}

/// qthread_fork: starts `f(arg)` as a task; its result fills `*ret`.
///
/// # Safety
/// `f` may run with `arg` on any worker; `ret` is NULL or an `aligned_t`
/// that stays valid until the task has filled it.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn qthread_fork(f: QthreadF, arg: *const c_void, ret: *mut u64) -> c_int {
    fork_word("qthread_fork", f, arg, ret, NO_SHEPHERD)
}

/// `qthread_fork` and `qthread_fork_to`: `f(arg)` on shepherd `shep`
/// (`NO_SHEPHERD`: anywhere), its result filling `ret`; a plain fork's
/// task when it can be one (`spawn::plain_fork_task`), else a closure.
fn fork_word(
    call: &'static str,
    f: QthreadF,
    arg: *const c_void,
    ret: *mut u64,
    shep: c_ushort,
) -> c_int {
    qt(call, || {
        let f = prepare(call, f, ret)?;
        if let Some(task) = spawn::plain_fork_task(f, Arg(arg.cast_mut()), ret_loc(ret)) {
            return place_task(call, shep, task);
        }
        place(call, shep, forked(call, f, Arg(arg.cast_mut()), ret))
    })
}

/// Queues a task body on shepherd `shep` (`NO_SHEPHERD`: anywhere): the
/// shepherd's worker alone runs it, from its inbox (`sched/worker/
/// migrate.rs`), as Qthreads runs a task forked to a shepherd there. A
/// disabled shepherd's task goes to the others (as in Qthreads).
pub(crate) fn place(
    call: &str,
    shep: c_ushort,
    body: impl FnOnce() + Send + 'static,
) -> Result<(), Fail> {
    if shep == NO_SHEPHERD {
        return crate::par::try_begin(body).map_err(|_| Fail::no_runtime(call));
    }
    // SAFETY: the closure is 'static.
    place_task(call, shep, unsafe {
        Task::from_closure(body, std::ptr::null())
    })
}

/// [`place`] for a task already made.
pub(crate) fn place_task(call: &str, shep: c_ushort, task: Task) -> Result<(), Fail> {
    if shep == NO_SHEPHERD {
        return crate::sched::push_task(call, task).map_err(|_| Fail::no_runtime(call));
    }
    let workers = crate::query::workers().unwrap_or(1).max(1);
    if crate::sched::place_on_worker(usize::from(shep) % workers, task) {
        Ok(())
    } else {
        Err(Fail::no_runtime(call))
    }
}

/// qthread_fork_to: as `qthread_fork`, on shepherd `shep`.
///
/// # Safety
/// As for `qthread_fork`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn qthread_fork_to(
    f: QthreadF,
    arg: *const c_void,
    ret: *mut u64,
    shep: c_ushort,
) -> c_int {
    fork_word("qthread_fork_to", f, arg, ret, shep)
}

/// `qthread_id` of the thread that started the runtime (Qthreads' main).
const MAIN_ID: c_uint = 1;
/// The first id of a forked task (Qthreads numbers forks from 2).
const FIRST_FORK_ID: u32 = 2;
/// The label of a forked task that has not asked for its id yet: its
/// number is drawn at its first `qthread_id` call, as Qthreads draws it
/// (so a fork costs no shared counter, and its task no word to carry
/// one). 1 is main's id, never a fork's.
pub(crate) const UNNUMBERED_FORK: u64 = 1;
/// Forked tasks' ids run from [`FIRST_FORK_ID`] below this, then start
/// again; tasks not made by a `qthread_fork*`/`qthread_spawn` (a
/// `qt_loop` body, `cantus_spawn`, Rust tasks) have ids from here to
/// `UINT_MAX - 1`, so the two never meet while fewer forks than this
/// are alive.
const UNFORKED_IDS: u32 = 1 << 31;

/// The id the next forked task to ask for one gets.
static NEXT_FORK_ID: AtomicU32 = AtomicU32::new(FIRST_FORK_ID);

/// Numbers a forked task at its first `qthread_id` call: Qthreads' ids,
/// 2, 3, ... in the order of those calls (of all threads together).
fn next_fork_id() -> u32 {
    // Relaxed: only uniqueness and each thread's order matter.
    let id = NEXT_FORK_ID.fetch_add(1, Ordering::Relaxed);
    if id < UNFORKED_IDS {
        return id;
    }
    // 2^31 ids later: start again (a compare-exchange, so only one
    // thread resets what all of them overran).
    let _ = NEXT_FORK_ID.compare_exchange(
        id.wrapping_add(1),
        FIRST_FORK_ID,
        Ordering::Relaxed,
        Ordering::Relaxed,
    );
    FIRST_FORK_ID + id % (UNFORKED_IDS - FIRST_FORK_ID)
}

/// qthread_id: the calling task's id: a forked task's number (2, 3, ...,
/// drawn at its first call, as in Qthreads), 1 in the thread that
/// started the runtime (Qthreads' main task), `QTHREAD_NON_TASK_ID` in
/// other threads.
#[unsafe(no_mangle)]
pub extern "C" fn qthread_id() -> c_uint {
    error::guarded(QTHREAD_NON_TASK_ID, || {
        match crate::sched::task_storage::label() {
            Some(UNNUMBERED_FORK) => {
                let id = next_fork_id();
                crate::sched::task_storage::set_label(u64::from(id));
                return id as c_uint;
            }
            Some(id) => return id as c_uint,
            None => {}
        }
        // A task away in a blocking call keeps its id (as Qthreads' I/O
        // workers run the task as itself).
        match crate::query::current_task_id().or_else(crate::sched::away_task_id) {
            // UNFORKED_IDS..=UINT_MAX-1: never a fork's id, NON_TASK_ID
            // (0), the main thread's 1, nor NULL_TASK_ID (UINT_MAX).
            Some(id) => (id % u64::from(c_uint::MAX - UNFORKED_IDS)) as c_uint + UNFORKED_IDS,
            None if lifecycle::is_starter_thread() => MAIN_ID,
            None => QTHREAD_NON_TASK_ID,
        }
    })
}

/// The calling task's shepherd: its worker, 0 for Qthreads' main task
/// (`main_task.rs`), `None` elsewhere (and in a blocking action).
pub(crate) fn current_shepherd() -> Option<usize> {
    crate::query::current_worker().or_else(main_task::shepherd)
}

/// qthread_shep: the calling task's shepherd (worker), 0 in the main
/// task, or `NO_SHEPHERD`.
#[unsafe(no_mangle)]
pub extern "C" fn qthread_shep() -> c_ushort {
    error::guarded(NO_SHEPHERD, || {
        current_shepherd().map_or(NO_SHEPHERD, |w| {
            w.min(usize::from(NO_SHEPHERD) - 1) as c_ushort
        })
    })
}

/// qthread_worker: the calling task's worker (its shepherd: one worker
/// each), written to `*shep` too if not NULL; `NO_WORKER` (and
/// `NO_SHEPHERD`) outside tasks.
///
/// # Safety
/// `shep` is NULL or valid for a write of a `qthread_shepherd_id_t`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn qthread_worker(shep: *mut c_ushort) -> c_ushort {
    let w = qthread_shep();
    if !shep.is_null() {
        // SAFETY: non-null and writable per the contract.
        unsafe { shep.write(w) };
    }
    w
}

/// qthread_worker_unique: the calling task's worker, numbered across all
/// shepherds from 1 as Qthreads numbers them (shepherd-major; one worker
/// per shepherd here, so `qthread_shep() + 1`); `*shep` (if not NULL) set
/// to the shepherd. `NO_WORKER` (and `*shep` untouched) outside tasks.
///
/// # Safety
/// `shep` is NULL or valid for a write of a `qthread_shepherd_id_t`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn qthread_worker_unique(shep: *mut c_ushort) -> c_ushort {
    let s = qthread_shep();
    if s == NO_SHEPHERD {
        return NO_SHEPHERD;
    }
    if !shep.is_null() {
        // SAFETY: non-null and writable per the contract.
        unsafe { shep.write(s) };
    }
    s + 1
}

/// qthread_worker_local: the calling task's worker within its shepherd
/// (always 0: one worker per shepherd); `*shep` (if not NULL) set to the
/// shepherd. `NO_WORKER` (and `*shep` untouched) outside tasks.
///
/// # Safety
/// `shep` is NULL or valid for a write of a `qthread_shepherd_id_t`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn qthread_worker_local(shep: *mut c_ushort) -> c_ushort {
    let s = qthread_shep();
    if s == NO_SHEPHERD {
        return NO_SHEPHERD;
    }
    if !shep.is_null() {
        // SAFETY: non-null and writable per the contract.
        unsafe { shep.write(s) };
    }
    0
}

/// The running runtime's workers (`enabled`: only those not disabled);
/// 0 without a runtime.
pub(crate) fn worker_count(enabled: bool) -> usize {
    if !lifecycle::running() {
        return 0;
    }
    if enabled {
        crate::sched::enabled_workers()
    } else {
        crate::query::workers()
    }
    .unwrap_or(0)
}

/// [`worker_count`] as a shepherd count.
fn shepherd_count(enabled: bool) -> c_ushort {
    error::guarded(0, || {
        worker_count(enabled).min(usize::from(NO_SHEPHERD) - 1) as c_ushort
    })
}

/// qthread_num_shepherds: the number of shepherds (workers) scheduling
/// work, as in Qthreads: those not disabled; 0 if none run.
#[unsafe(no_mangle)]
pub extern "C" fn qthread_num_shepherds() -> c_ushort {
    shepherd_count(true)
}

/// qthread_migrate_to: moves the calling task to `shepherd`, where it
/// goes on (as in Qthreads). Only a task made by `qthread_fork*` or
/// `qthread_spawn` moves: cantus's other tasks never move once started
/// (`sched/README.md`), and neither does the main task (Qthreads refuses
/// it too): `QTHREAD_NOT_ALLOWED`, with a message. Its own shepherd,
/// `NO_SHEPHERD` or a disabled shepherd: it stays where it is, with
/// success. A shepherd that does not exist is `QTHREAD_BADARGS`.
#[unsafe(no_mangle)]
pub extern "C" fn qthread_migrate_to(shepherd: c_ushort) -> c_int {
    let call = "qthread_migrate_to";
    let mut to = None;
    let rc = qt(call, || {
        require_runtime(call)?;
        if shepherd == NO_SHEPHERD {
            return Ok(());
        }
        let workers = crate::query::workers().unwrap_or(0);
        if usize::from(shepherd) >= workers {
            return Err(Fail::new(
                error::EINVAL,
                format!("{call}: shepherd {shepherd} does not exist (there are {workers})"),
            ));
        }
        let Some(here) = crate::query::current_worker() else {
            return Err(Fail::new(
                error::ECONTEXT,
                format!(
                    "{call} called outside a task (or in a blocking action): only a task \
                     on a shepherd moves"
                ),
            ));
        };
        if crate::sched::task_storage::label().is_none() {
            return Err(Fail::new(
                error::ECONTEXT,
                format!(
                    "{call}({shepherd}) from a task not made by qthread_fork or qthread_spawn: \
                     cantus's other tasks never move once started"
                ),
            ));
        }
        let target = usize::from(shepherd);
        if target != here && crate::sched::worker_disabled(target) == Some(false) {
            to = Some(target);
        }
        Ok(())
    });
    // The move itself outside `qt`'s frame: code after it runs on another
    // thread, and nothing there may use what was looked up before.
    if let Some(target) = to {
        if crate::sched::migrate_current_task(target).is_err() {
            return QTHREAD_NOT_ALLOWED;
        }
    }
    rc
}

/// qthread_num_workers: the number of worker threads, 0 if none run.
#[unsafe(no_mangle)]
pub extern "C" fn qthread_num_workers() -> c_ushort {
    shepherd_count(false)
}

/// qthread_yield_: lets other tasks run; does nothing outside tasks.
#[unsafe(no_mangle)]
pub extern "C" fn qthread_yield_(_kind: c_int) {
    error::guarded((), || {
        // A task yields; so does Qthreads' main, running shepherd 0's
        // ready tasks when it hosts shepherd 0 (`sched/worker/host.rs`).
        if WorkerLocal::current().is_some_and(|l| l.in_task())
            || crate::sched::worker::host::hosts()
        {
            crate::task::yield_now();
        }
    })
}

/// qthread_flushsc: flushes the caller's spawn cache. cantus queues every
/// task at its fork, so there is never anything to flush (qthread.h).
#[unsafe(no_mangle)]
pub extern "C" fn qthread_flushsc() {}
