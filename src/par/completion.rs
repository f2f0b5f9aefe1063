//! How a task of a group reports its end: the [`Completion`]s of scope
//! and `TaskGroup` tasks, which count an end count down and record a
//! panic for whoever waits. (The scheduler only knows the `Completion`
//! trait; the end counts are this layer's.)

use crate::sched::new_task::{Completion, Task};
use crate::sync::end_count::EndCount;
use std::any::Any;
use std::sync::Arc;

/// A task of a scope: `group` is an `EndCount` the scope keeps alive until
/// the count is zero.
pub(crate) enum Scoped {}

impl Completion for Scoped {
    unsafe fn finished(group: *const (), result: Result<(), Box<dyn Any + Send>>) {
        // SAFETY: the scope keeps its count alive until done_one, our last
        // access (contract of `Task::closure`).
        let count = unsafe { &*(group as *const EndCount) };
        if let Err(p) = result {
            count.record_panic(p);
        }
        count.done_one();
    }
}

/// A task of a `TaskGroup`: `group` came from `Arc::into_raw` and the task
/// owns that reference.
pub(crate) enum Shared {}

impl Completion for Shared {
    unsafe fn finished(group: *const (), result: Result<(), Box<dyn Any + Send>>) {
        // SAFETY: the task owns one strong reference, taken back here once.
        let count = unsafe { Arc::from_raw(group as *const EndCount) };
        if let Err(p) = result {
            count.record_panic(p);
        }
        count.done_one();
    }
}

/// Pushes a task of a group (a scope's or a `TaskGroup`'s): `f`, labelled
/// as spawned by the running task when tracing, then `C`'s completion
/// with `group`. The group's count was raised for it already; `call`
/// names the spawning call in the panic if the task cannot be pushed
/// (the unpushed task was dropped, which counted it finished).
///
/// # Safety
/// As [`Task::closure`]: everything `f` borrows outlives the task's run,
/// and `group` satisfies `C`'s contract.
#[inline(always)]
#[track_caller]
pub(crate) unsafe fn push_group_task<F, C>(f: F, group: *const (), call: &str)
where
    F: FnOnce() + Send,
    C: Completion,
{
    let task = if crate::trace::on() {
        let spawner = crate::trace::spawner();
        let f = move || {
            crate::trace::label_spawned_by(crate::trace::task_kind::BEGIN, spawner);
            f()
        };
        // SAFETY: the caller's contract, for the same closure wrapped.
        unsafe { Task::closure::<_, C>(f, group) }
    } else {
        // SAFETY: the caller's contract.
        unsafe { Task::closure::<F, C>(f, group) }
    };
    if let Err(e) = crate::sched::push_task(call, task) {
        panic!("{e}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn group_completions_count_and_record_panics() {
        let count = EndCount::new(2);
        let group = &count as *const EndCount as *const ();
        // SAFETY: `count` outlives both tasks (run right here).
        unsafe {
            Task::closure::<_, Scoped>(|| (), group).run();
            Task::closure::<_, Scoped>(|| panic!("scoped task failed"), group).run();
        }
        assert!(count.is_done());
        assert!(count.take_panic().is_some());

        let shared = Arc::new(EndCount::new(1));
        let raw = Arc::into_raw(shared.clone()) as *const ();
        // SAFETY: the task owns the strong reference `raw`.
        unsafe { drop(Task::closure::<_, Shared>(|| (), raw)) };
        assert!(shared.is_done(), "a dropped task still counts as finished");
        assert_eq!(Arc::strong_count(&shared), 1, "and releases its reference");
    }
}
