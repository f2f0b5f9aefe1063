//! Queries about the running runtime: how many workers, which task and
//! worker is running, how many tasks are queued, running, blocked or
//! sleeping. Task control (yield, sleep, blocking calls) is
//! [`crate::task`].

// The query set follows Chapel's tasking interface (seed 000, section 3).

use crate::sched::WorkerLocal;
use crate::sched::registry::Registry;

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

/// Moved to [`crate::task::yield_now`].
#[doc(hidden)]
#[deprecated(note = "moved to cantus::task::yield_now")]
pub fn yield_now() {
    crate::task::yield_now()
}

/// Moved to [`crate::task::sleep`].
#[doc(hidden)]
#[deprecated(note = "moved to cantus::task::sleep")]
pub fn sleep(duration: std::time::Duration) {
    crate::task::sleep(duration)
}

/// Moved to [`crate::task::blocking`].
#[doc(hidden)]
#[deprecated(note = "moved to cantus::task::blocking")]
pub fn blocking<F, R>(call: F) -> R
where
    F: FnOnce() -> R + Send,
    R: Send,
{
    crate::task::blocking(call)
}
