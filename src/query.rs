//! Queries about the running runtime (how many workers, which task and
//! worker is running, how many tasks are queued, running, blocked or
//! sleeping) and task control (yield, sleep, blocking calls).

// The query set follows Chapel's tasking interface (seed 000, section 3).

use crate::sched::WorkerLocal;
use crate::sched::registry::Registry;
use std::time::{Duration, Instant};

/// Lets other tasks run, then continues. In a task, the task goes to the
/// back of its worker's ready list; in an outside thread, the OS thread
/// yields.
pub fn yield_now() {
    const WHAT: &str = "cantus::yield_now";
    match WorkerLocal::current() {
        Some(local) => {
            if let Some(name) = local.no_wait.get() {
                crate::sched::no_wait::refuse_wait(name, WHAT);
            }
            if local.in_task() {
                // A driver's progress thread (MPI) may share this core and
                // be what the task waits for (room to send, a message):
                // give the core away too, or a task that yields in a loop
                // would keep it until the kernel's time slice ends.
                if local.registry.progress_thread {
                    std::thread::yield_now();
                }
                local.yield_current()
            } else {
                std::thread::yield_now()
            }
        }
        None => {
            crate::sched::no_wait::check_wait(WHAT);
            std::thread::yield_now()
        }
    }
}

/// Sleeps for `duration`. In a task, only the task sleeps: its worker runs
/// other tasks meanwhile. In an outside thread, the OS thread sleeps.
pub fn sleep(duration: Duration) {
    crate::sched::no_wait::check_wait("cantus::sleep");
    match WorkerLocal::current().filter(|l| l.in_task()) {
        Some(local) => local.sleep_current(Instant::now() + duration),
        None => std::thread::sleep(duration),
    }
}

/// Runs `call`, which blocks its thread (a system call: a read from a
/// pipe or socket, a wait for a child process), without holding up the
/// task's worker: in a task, the task moves to a blocking-call thread of
/// the runtime for the length of `call` and then comes back, and its
/// worker runs other tasks meanwhile (Qthreads' `qt_begin_blocking_action`
/// and `qt_end_blocking_action`). So a task may wait for I/O that another
/// task of the same worker is to produce.
///
/// While it runs there, `call` is on another OS thread, as in an outside
/// thread: cantus's waits (a `SyncVar` read, a join) block that thread,
/// and queries answer as for an outside thread. Hence `call` and its
/// result must be `Send`. A panic in `call` comes home and continues in
/// the task.
///
/// Also counted as outside activity while it runs, so a deadlock is not
/// reported while every other task waits for what `call` will bring. In
/// an outside thread (or in an inline remote call, which may not leave
/// its worker) `call` simply runs where it is, declared as activity.
///
/// ```
/// let rt = cantus::Runtime::new().unwrap();
/// let got = rt.block_on(|| {
///     cantus::blocking(|| {
///         // A blocking system call, off the worker.
///         std::fs::read_to_string("/proc/self/status").map(|s| !s.is_empty())
///     })
/// });
/// assert!(got.unwrap());
/// ```
///
/// The call runs on another thread, so what it captures must be `Send`
/// (an `Rc` is refused):
///
/// ```compile_fail
/// fn read(shared: std::rc::Rc<String>) -> usize {
///     cantus::blocking(move || shared.len())
/// }
/// ```
///
/// and so must what it returns:
///
/// ```compile_fail
/// fn open() -> std::rc::Rc<u32> {
///     cantus::blocking(|| std::rc::Rc::new(1))
/// }
/// ```
pub fn blocking<F, R>(call: F) -> R
where
    F: FnOnce() -> R + Send,
    R: Send,
{
    crate::sched::body_may_go_away(|| away_and_back(call))
        .unwrap_or_else(|p| std::panic::resume_unwind(p))
}

/// `blocking`'s switch and back, in a frame of its own: `call` runs away
/// and nothing else of this frame runs after the switch but returning,
/// so no thread-local address computed on one thread is used on the
/// other (`sched/README.md`, "Blocking calls"). A panic comes home as a
/// value, to continue on the task's own thread.
#[inline(never)]
fn away_and_back<F, R>(call: F) -> std::thread::Result<R>
where
    F: FnOnce() -> R + Send,
    R: Send,
{
    crate::sched::begin_blocking();
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(call));
    crate::sched::end_blocking();
    r
}

/// A snapshot of the runtime's task counts. Counts are summed from
/// per-worker counters without stopping the workers, so while tasks run
/// they are approximate.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Snapshot {
    /// Worker threads.
    pub workers: usize,
    /// Tasks running now (started, not finished, blocked or sleeping).
    pub running: u64,
    /// Tasks spawned and not started.
    pub queued: u64,
    /// Tasks blocked on sync variables, task groups, joins.
    pub blocked: u64,
    /// Tasks sleeping in [`sleep`].
    pub sleeping: u64,
    /// Outside threads blocked on cantus variables.
    pub blocked_outside_threads: usize,
    /// Workers with nothing to do (spinning or asleep).
    pub idle_workers: usize,
}

/// Counts for the running runtime, or `None` if none runs.
pub fn snapshot() -> Option<Snapshot> {
    let r = Registry::current()?;
    Some(Snapshot {
        workers: r.config.workers,
        running: r.running_tasks(),
        queued: r.queued_tasks(),
        blocked: r.blocked_tasks(),
        sleeping: r.sleeping_tasks(),
        blocked_outside_threads: r.outside_blocked(),
        idle_workers: r.idle_workers(),
    })
}

/// Worker threads of the running runtime.
pub fn workers() -> Option<usize> {
    Registry::current().map(|r| r.config.workers)
}

/// The calling task's id (unique within the runtime's life), or `None`
/// outside tasks.
pub fn current_task_id() -> Option<u64> {
    WorkerLocal::current().and_then(|l| l.current_task_id())
}

/// The index of the worker running the calling task, or `None` outside
/// tasks. A started task stays on its worker, so this does not change
/// during a task's life.
pub fn current_worker() -> Option<usize> {
    WorkerLocal::current()
        .filter(|l| l.in_task())
        .map(|l| l.index)
}
