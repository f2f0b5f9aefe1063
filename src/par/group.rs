//! Task groups: an end count with wait-for-zero that tasks of any
//! lifetime can join (for structured borrowing use [`scope`](crate::scope)).

use super::completion::{Shared, push_group_task};
use super::join::wait_group;
use crate::sched::WorkerLocal;
use crate::sync::end_count::EndCount;
use crate::sync::wait::BlockKind;
use std::panic;
use std::sync::Arc;

/// A set of tasks to wait for. Cloning gives another handle to the same
/// group, so tasks can add tasks to their own group.
///
/// ```
/// use std::sync::Arc;
/// use std::sync::atomic::{AtomicU32, Ordering};
/// let rt = cantus::Runtime::builder().workers(2).build().unwrap();
/// let group = cantus::TaskGroup::new();
/// let done = Arc::new(AtomicU32::new(0));
/// for _ in 0..10 {
///     let d = done.clone();
///     group.spawn(move || { d.fetch_add(1, Ordering::Relaxed); });
/// }
/// group.wait();
/// assert_eq!(done.load(Ordering::Relaxed), 10);
/// ```
#[derive(Clone)]
pub struct TaskGroup {
    count: Arc<EndCount>,
}

// A panic never leaves the group's end count locked or its queue
// half-linked, so the group stays usable: no user code runs while the count's
// lock is held (and the lock guard would release it on unwind anyway), and
// task panics are caught, kept, and re-raised by `wait`.
impl std::panic::RefUnwindSafe for TaskGroup {}
impl std::panic::UnwindSafe for TaskGroup {}

impl Default for TaskGroup {
    fn default() -> Self {
        TaskGroup::new()
    }
}

impl TaskGroup {
    /// An empty group.
    pub fn new() -> TaskGroup {
        TaskGroup {
            count: Arc::new(EndCount::new(0)),
        }
    }

    /// Spawns `f` as a task of this group. Panics if no runtime runs (the
    /// panic names the caller's line).
    #[track_caller]
    pub fn spawn<F>(&self, f: F)
    where
        F: FnOnce() + Send + 'static,
    {
        self.count.add(1);
        let group = Arc::into_raw(self.count.clone()) as *const ();
        // SAFETY: the closure is 'static; the task owns the strong
        // reference `group`, which `Shared` takes back when it finishes.
        unsafe { push_group_task::<F, Shared>(f, group, "TaskGroup::spawn") }
    }

    /// Tasks of the group not yet finished.
    pub fn pending(&self) -> usize {
        self.count.count()
    }

    /// Waits until every task of the group has finished, then re-raises
    /// the first panic among them, if any.
    pub fn wait(&self) {
        let group = Arc::as_ptr(&self.count) as *const ();
        match WorkerLocal::current().filter(|l| l.in_task()) {
            Some(local) => wait_group(local, &self.count, group),
            None => self.count.wait_blocking(BlockKind::GroupWait),
        }
        if let Some(p) = self.count.take_panic() {
            panic::resume_unwind(p);
        }
    }
}
