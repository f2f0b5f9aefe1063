//! `begin`: a detached task (Chapel's unstructured `begin`).

use crate::error::Error;
use crate::sched::new_task::Task;

/// Starts `f` as a detached task. It may block on sync variables. The
/// runtime's shutdown waits for it. If it panics, the panic is reported
/// on stderr and counted, and the runtime keeps working.
///
/// Panics if no runtime is running (the panic names the caller's line);
/// [`try_begin`] returns that error.
#[track_caller]
pub fn begin<F>(f: F)
where
    F: FnOnce() + Send + 'static,
{
    if let Err(e) = try_begin(f) {
        panic!("{e}");
    }
}

/// Like [`begin`], but returns an error instead of panicking when no
/// runtime is running.
pub fn try_begin<F>(f: F) -> Result<(), Error>
where
    F: FnOnce() + Send + 'static,
{
    let spawner = crate::trace::spawner();
    // SAFETY: the closure is 'static; detached tasks have no group.
    let task = unsafe {
        Task::from_closure(
            move || {
                crate::trace::label_spawned_by(crate::trace::task_kind::BEGIN, spawner);
                f()
            },
            std::ptr::null(),
        )
    };
    crate::sched::push_task("begin", task)
}
