//! `begin`: a detached task (Chapel's unstructured `begin`).

use crate::error::Error;
use crate::sched::WorkerLocal;
use crate::sched::task::Task;
use std::panic::{self, AssertUnwindSafe};

/// Starts `f` as a detached task. It may block on sync variables. The
/// runtime's shutdown waits for it. If it panics, the panic is reported
/// on stderr and counted, and the runtime keeps working.
///
/// Panics if no runtime is running; [`try_begin`] returns that error.
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
    let wrapped = move || {
        if panic::catch_unwind(AssertUnwindSafe(f)).is_err() {
            if let Some(local) = WorkerLocal::current() {
                local.note_detached_panic();
                eprintln!(
                    "cantus: detached task {} panicked (message above); the runtime keeps running",
                    local.current_task_id().unwrap_or(0)
                );
            }
        }
    };
    // SAFETY: the closure is 'static.
    let task = unsafe { Task::from_closure(wrapped, std::ptr::null()) };
    crate::runtime::push_task("begin", task)
}
