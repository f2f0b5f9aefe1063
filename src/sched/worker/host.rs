//! A worker hosted by the thread that started the runtime: Qthreads'
//! main task of shepherd 0 (`sched/README.md`, "A hosted worker").
//!
//! Between `qthread_initialize` and `qthread_finalize`, Qthreads' main
//! thread *is* shepherd 0's worker, running the program's `main` as one of
//! its tasks. A runtime built with `Builder::host_worker` does the same:
//! worker 0 has no thread of its own. The starting thread (the *host*)
//! owns worker 0's private state, and:
//!
//! - its forks go on worker 0's deque (where the other workers may steal
//!   them), not through the injector;
//! - its waits (a full/empty word, a join, a sinc, a lock, a yield, a
//!   sleep, the wait for quiescence at the end) run worker 0's loop on the
//!   host's own stack until the wait is over: the task it waits for, often
//!   the one it just forked, runs on the same thread, with no hand-off;
//! - while its own code runs, worker 0 runs nothing else: what other
//!   workers may take (its deque) is stolen; what only worker 0 takes (its
//!   woken tasks, tasks placed on it, migrants) waits for the host's next
//!   wait, as shepherd 0's other tasks wait for Qthreads' main.
//!
//! The host stays an outside thread to everything else
//! (`WorkerLocal::current()` is none while its code runs, so Rust code
//! keeps the rule that an outside thread is not a task); only while it
//! runs worker 0's loop is `current()` worker 0, exactly as on a worker
//! thread. The loop runs from the host's wait, never inside another: no
//! code of the loop waits as an outside thread.
//!
//! Waking the host: a waiter made on the host (`sync/wait.rs`) carries a
//! [`HostWaker`]; its waker stores the wait's flag (Release) and then
//! notifies worker 0 (`Sleep::notify_worker`, an RMW of its sleep state),
//! and the idle loop's re-check reads the flag after its own RMW (S1/S2 of
//! `sleep/README.md`): so the flag is never missed. A carrier of worker 0
//! returns to the loop after any task that leaves the flag set
//! (`resumable_pending`), so a host whose wait ended waits for at most the
//! task that was running.

use super::*;
use crate::sched::outside_wait::{OutsideBlocked, StuckSample};
use std::sync::atomic::AtomicBool;
use std::time::Duration;

/// Tasks the host's forks may queue on its worker's deque; more go
/// through the injector (`sched::push_task`). A fork read right after it
/// (or a few) stays on this thread; a loop of many forks is shared out in
/// batches while the host goes on forking.
pub(crate) const DEQUE_DEPTH: usize = 64;

/// When the worker loop returns to its caller.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Until {
    /// A worker thread's own loop: when the runtime stops.
    Terminate,
    /// The host waits on this flag, set by its waker (`wait`): it lies
    /// on the host's stack, below the loop, for the loop's length.
    Woken(*const AtomicBool),
    /// The host yields: when nothing of worker 0's is ready.
    Idle,
    /// The host stops the runtime: when every task has finished.
    Quiescent,
    /// The host sleeps until the instant.
    Deadline(Instant),
    /// The host helps before it waits: until `ready(arg)` holds, or
    /// nothing of worker 0's is ready (`help`).
    Ready(fn(usize) -> bool, usize),
}

/// What a host's wait keeps while worker 0 idles in it.
struct Idling {
    /// What it waits on, for the accounting made at its first nap.
    kind: BlockKind,
    addr: usize,
    /// The wait counted as an outside thread's blocked one (`None` until
    /// the loop first ran dry: while the host runs tasks in its wait, it
    /// is not blocked, and a wait that a task of its own ends at once
    /// pays for no accounting).
    accounting: Option<OutsideBlocked>,
    /// The deadlock check, as an outside thread's (`outside_wait.rs`): a
    /// sample per grace period. `None`: detection is off.
    check: Option<Check>,
}

#[derive(Clone, Copy)]
struct Check {
    grace: Duration,
    /// The last sample and when it was taken; `None` before the first.
    last: Option<(StuckSample, Instant)>,
}

/// What the host thread owns.
struct Hosted {
    /// Dropped by `finish` only: see `Drop`.
    local: std::mem::ManuallyDrop<Box<WorkerLocal>>,
    finished: bool,
    _alt: Option<guard::AltStack>,
    /// The host's current wait on a flag (`wait`), if any.
    idling: RefCell<Option<Idling>>,
}

impl Drop for Hosted {
    fn drop(&mut self) {
        if self.finished {
            return;
        }
        // The host thread ended without stopping its runtime (`finish`
        // takes the worker first): worker 0's carriers may hold blocked
        // tasks whose waiter nodes are linked into wait queues. Unwinding
        // or freeing them would corrupt memory, so the worker's state is
        // left as it is (leaked), and with it those tasks. The process's
        // main thread gets here as the process exits (glibc's `exit` runs
        // its thread-local destructors), which a program without
        // `qthread_finalize` may do: its tasks end with it, as documented.
        // SAFETY: getpid and gettid have no preconditions.
        let main_thread =
            unsafe { libc::syscall(libc::SYS_gettid) } == i64::from(unsafe { libc::getpid() });
        if main_thread {
            return;
        }
        eprintln!(
            "cantus: the thread that started the runtime (and ran its worker 0) ended without \
             stopping it; worker 0's tasks will not run again (call qthread_finalize from the \
             thread that called qthread_initialize)"
        );
    }
}

thread_local! {
    /// The worker this thread hosts, if any (set by `start`, cleared by
    /// `finish`).
    static HOSTED: Cell<*const WorkerLocal> = const { Cell::new(std::ptr::null()) };
    static OWNED: RefCell<Option<Hosted>> = const { RefCell::new(None) };
}

/// Makes the calling thread the host of worker `index` (before any task
/// runs).
pub(crate) fn start(registry: Arc<Registry>, index: usize, deque: Worker<Queued>) {
    let alt = guard::AltStack::ensure();
    let local = Box::new(WorkerLocal::new(registry, index, deque));
    HOSTED.with(|h| h.set(&*local));
    OWNED.with(|o| {
        *o.borrow_mut() = Some(Hosted {
            local: std::mem::ManuallyDrop::new(local),
            finished: false,
            _alt: alt,
            idling: RefCell::new(None),
        })
    });
    crate::trace::enter_worker(index);
    // The host's own code is the main task on worker 0's lane of a trace.
    crate::trace::record(
        crate::trace::kind::TASK_BEGIN,
        crate::trace::how::ROOT,
        0,
        MAIN_TASK,
        0,
    );
}

/// The main task's id in a trace: 1, Qthreads' main's id, which no task
/// of the scheduler has (`task_id_issued`: ids start past the workers).
const MAIN_TASK: u64 = 1;

/// After the runtime stopped (every task finished, the worker threads
/// joined): finishes the hosted worker as a worker thread's end does.
pub(crate) fn finish() {
    let Some(mut h) = OWNED.with(|o| o.borrow_mut().take()) else {
        return;
    };
    HOSTED.with(|p| p.set(std::ptr::null()));
    crate::trace::task_end(MAIN_TASK, crate::trace::why::DONE);
    // SAFETY: `h.local` is taken once, here, and `finished` keeps `Drop`
    // from reading it afterwards.
    let local = unsafe { std::mem::ManuallyDrop::take(&mut h.local) };
    h.finished = true;
    local.finish();
    drop(local);
    drop(h);
}

/// The worker the calling thread hosts, while the thread runs its own
/// code (not the worker's loop).
#[inline]
pub(crate) fn hosted() -> Option<&'static WorkerLocal> {
    let p = HOSTED.with(|h| h.get());
    if p.is_null() || !WORKER.with(|w| w.get()).is_null() {
        return None;
    }
    // SAFETY: HOSTED points at the Box that OWNED holds on this thread; it
    // is cleared (in `finish`) before that Box is dropped, and only this
    // thread reads it.
    Some(unsafe { &*p })
}

/// Whether the calling thread hosts a worker, in its own code or in the
/// worker's loop.
pub(crate) fn is_host_thread() -> bool {
    !HOSTED.with(|h| h.get()).is_null()
}

/// Whether the calling thread hosts a worker (in its own code).
#[inline]
pub(crate) fn hosts() -> bool {
    hosted().is_some()
}

/// Runs `local`'s loop on the host until `until`. Only from the host's
/// own code (`hosted`), so never inside another such loop.
fn run_hosted(local: &WorkerLocal, until: Until) {
    struct Leave<'a>(&'a WorkerLocal);
    impl Drop for Leave<'_> {
        fn drop(&mut self) {
            self.0.until.set(Until::Terminate);
            self.0.hosted.set(false);
            WORKER.with(|w| w.set(std::ptr::null()));
        }
    }
    // In a trace, the main task stops while the worker's loop runs, and
    // runs again after.
    let why = match until {
        Until::Idle => crate::trace::why::YIELDED,
        Until::Deadline(_) => crate::trace::why::SLEPT,
        _ => crate::trace::why::BLOCKED,
    };
    crate::trace::task_end(MAIN_TASK, why);
    local.until.set(until);
    local.hosted.set(true);
    local.round_yielded.set(local.yielded.borrow().len());
    WORKER.with(|w| w.set(local));
    let _leave = Leave(local);
    local.run();
    drop(_leave);
    crate::trace::record(
        crate::trace::kind::TASK_BEGIN,
        crate::trace::how::RESUMED,
        0,
        MAIN_TASK,
        0,
    );
}

/// The calling thread, which hosts a worker, blocks on a waiter whose
/// wake sets `woken` (Release) and then notifies that worker
/// (`sync/wait.rs`, `Target::Host`): runs the worker's loop until it is
/// set.
pub(crate) fn wait(kind: BlockKind, addr: usize, woken: &AtomicBool) {
    let local = hosted().expect("a host's waiter blocks on its host");
    // Acquire pairs with the waker's Release store (`sync/wait.rs`).
    if woken.load(Ordering::Acquire) {
        return;
    }
    let check = local
        .registry
        .config
        .deadlock
        .map(|grace| Check { grace, last: None });
    set_idling(Some(Idling {
        kind,
        addr,
        accounting: None,
        check,
    }));
    run_hosted(local, Until::Woken(woken));
    // The accounting (if made) ends here, after the wait.
    set_idling(None);
}

/// The host helps before it waits on something a task will do: runs
/// worker 0's ready tasks until `ready(arg)` holds or none is left
/// ready (it never sleeps here). A fork's result, readFF'd by the host
/// right after the fork, is then made on this thread by the task itself,
/// and read without a waiter.
pub(crate) fn help(local: &WorkerLocal, ready: fn(usize) -> bool, arg: usize) {
    run_hosted(local, Until::Ready(ready, arg));
}

/// The host yields: runs what worker 0 has ready, then returns.
pub(crate) fn yield_round(local: &WorkerLocal) {
    run_hosted(local, Until::Idle);
}

/// The host sleeps until `deadline`, running worker 0's tasks meanwhile.
pub(crate) fn sleep_until(local: &WorkerLocal, deadline: Instant) {
    run_hosted(local, Until::Deadline(deadline));
}

/// The host stops the runtime: runs worker 0's loop until every task has
/// finished.
pub(crate) fn run_until_quiescent(local: &WorkerLocal) {
    run_hosted(local, Until::Quiescent);
}

/// Sets what the host's wait on a flag keeps (`wait`: only its loop reads
/// it, `host_deadlock_check`); the old one, with its accounting, drops.
fn set_idling(idling: Option<Idling>) {
    OWNED.with(|o| {
        if let Some(h) = o.borrow().as_ref() {
            *h.idling.borrow_mut() = idling;
        }
    });
}

/// How a waker made on the host notifies it: worker 0's sleep state.
#[derive(Clone, Copy)]
pub(crate) struct HostWaker {
    registry: *const Registry,
    worker: u32,
}

// SAFETY: plain data. The registry outlives the host's wait: the host
// holds an `Arc` of it in its worker until `finish`, which comes after
// quiescence; a waker that is a task has not finished (so no quiescence)
// until its wake returned, and a waker that is another outside thread
// waking the host while the host stops the runtime breaks the C ABI's
// contract (as it would for any task it woke).
unsafe impl Send for HostWaker {}
// SAFETY: as above; `notify` uses only the thread-safe sleep state.
unsafe impl Sync for HostWaker {}

impl HostWaker {
    /// Wakes the host's worker (after the wait's flag was stored).
    #[inline]
    pub(crate) fn notify(self) {
        // SAFETY: see the Send impl.
        let reg = unsafe { &*self.registry };
        reg.sleep.notify_worker(self.worker as usize);
    }
}

/// The waker for a wait of the calling thread, if it hosts a worker.
#[inline]
pub(crate) fn waker() -> Option<HostWaker> {
    hosted().map(|l| HostWaker {
        registry: &*l.registry,
        worker: l.index as u32,
    })
}

impl WorkerLocal {
    /// Whether the loop should return to its host now.
    #[inline]
    pub(super) fn until_met(&self) -> bool {
        if !self.hosted.get() {
            return false;
        }
        match self.until.get() {
            Until::Terminate | Until::Idle => false,
            // SAFETY: the flag of the host's wait (`wait`), on the host's
            // stack below this loop; `run_hosted` puts `Until::Terminate`
            // back before that wait returns.
            Until::Woken(flag) => unsafe { (*flag).load(Ordering::Acquire) },
            Until::Quiescent => self.registry.quiescent(),
            Until::Deadline(d) => Instant::now() >= d,
            Until::Ready(ready, arg) => ready(arg),
        }
    }

    /// Whether the loop returns to its host when nothing is ready (rather
    /// than idling).
    #[inline]
    pub(super) fn returns_when_idle(&self) -> bool {
        self.hosted.get() && matches!(self.until.get(), Until::Idle | Until::Ready(..))
    }

    /// For the idle loop of a hosted worker about to sleep: the longest
    /// it may sleep (`None`: until notified), after the deadlock check of
    /// the host's wait (which does not return if it finds a deadlock).
    pub(super) fn host_nap(&self) -> Option<Duration> {
        match self.until.get() {
            Until::Terminate | Until::Idle | Until::Ready(..) => None,
            // Nobody notifies quiescence: look again now and then, as the
            // outside stop's polling does.
            Until::Quiescent => Some(Duration::from_millis(1)),
            Until::Deadline(d) => Some(d.saturating_duration_since(Instant::now())),
            Until::Woken(_) => self.host_deadlock_check(),
        }
    }

    /// Samples the runtime once per grace period while the host waits,
    /// and reports a deadlock when two samples agree (`outside_wait.rs`,
    /// `block_outside`); this worker is in its idle loop meanwhile, so it
    /// counts among the idle ones. Counts the wait blocked first. Returns
    /// the time to the next sample.
    fn host_deadlock_check(&self) -> Option<Duration> {
        let reg = &*self.registry;
        let now = Instant::now();
        let (check, report) = OWNED.with(|o| {
            let o = o.borrow();
            let mut idling = o.as_ref()?.idling.borrow_mut();
            let idling = idling.as_mut()?;
            if idling.accounting.is_none() {
                // Not a prompt outside wait: the host needs no core freed
                // to notice its end (it is woken as worker 0).
                idling.accounting = Some(OutsideBlocked::enter_as(idling.kind, idling.addr, false));
            }
            let check = idling.check.as_mut()?;
            let mut report = false;
            match check.last {
                None => check.last = Some((super::super::deadlock::stuck_sample(reg), now)),
                Some((prev, at)) if now.duration_since(at) >= check.grace => {
                    let sample = super::super::deadlock::stuck_sample(reg);
                    report = sample.is_some() && sample == prev && !self.until_met();
                    check.last = Some((sample, now));
                }
                Some(_) => {}
            }
            Some((*check, report))
        })?;
        if report {
            super::super::deadlock::report(reg, check.grace);
        }
        let at = check.last.map_or(now, |(_, at)| at);
        Some(check.grace.saturating_sub(now.duration_since(at)))
    }
}
