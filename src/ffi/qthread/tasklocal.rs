//! Task-local storage and stack queries, as a Chapel-style shim uses
//! them: `qthread_get_tasklocal`, `qthread_size_tasklocal` (the bytes are
//! the scheduler's per-task storage, `src/sched/task_storage.rs`), and
//! `qthread_stackleft`, `qthread_bos`, `qthread_tos`.

use crate::ffi::error::{self, Fail};
use std::ffi::{c_uint, c_void};
use std::sync::atomic::{AtomicUsize, Ordering};

/// Qthreads' default task-local size (`TASKLOCAL_DEFAULT`).
const DEFAULT_TASKLOCAL: usize = 64;

/// The task-local bytes every task may use without a larger request:
/// `QTHREAD_TASKLOCAL_SIZE` as the runtime started, at least a pointer's
/// size (as Qthreads).
static TASKLOCAL_SIZE: AtomicUsize = AtomicUsize::new(DEFAULT_TASKLOCAL);

/// Sets the default task-local size (`qthread_initialize`): `None` is
/// Qthreads' default; a size is raised to a pointer's.
pub(crate) fn set_default_size(size: Option<usize>) {
    let n = size.map_or(DEFAULT_TASKLOCAL, |n| n.max(size_of::<*mut c_void>()));
    // Relaxed: written by the thread that starts the runtime, before any
    // task can run (the runtime's start synchronizes with its workers).
    TASKLOCAL_SIZE.store(n, Ordering::Relaxed);
}

fn default_size() -> usize {
    TASKLOCAL_SIZE.load(Ordering::Relaxed)
}

/// qthread_get_tasklocal: the calling task's task-local storage, at least
/// `size` bytes (and at least the default size), zeroed when the task
/// first asks, freed when it ends. A larger request than before moves
/// the storage (contents kept, the new bytes zeroed); earlier pointers
/// are then stale, as in Qthreads. The thread that started the runtime
/// (Qthreads' main task) has storage of its own until `qthread_finalize`;
/// NULL in other threads.
#[unsafe(no_mangle)]
pub extern "C" fn qthread_get_tasklocal(size: c_uint) -> *mut c_void {
    let call = "qthread_get_tasklocal";
    error::guarded(std::ptr::null_mut(), || {
        let want = (size as usize).max(default_size());
        match crate::sched::task_storage::bytes(want)
            .or_else(|| super::main_task::local_bytes(want))
        {
            Some((p, _)) => p.cast(),
            None => {
                error::record(Fail::new(
                    error::ECONTEXT,
                    format!(
                        "{call} called outside a task: only tasks (and the thread that started \
                         the runtime, Qthreads' main task) have task-local storage"
                    ),
                ));
                std::ptr::null_mut()
            }
        }
    })
}

/// qthread_size_tasklocal: the bytes `qthread_get_tasklocal` gives the
/// calling task without growing (the default size until it asks for
/// more); 0 outside a task.
#[unsafe(no_mangle)]
pub extern "C" fn qthread_size_tasklocal() -> c_uint {
    error::guarded(0, || {
        match crate::sched::task_storage::bytes_len().or_else(super::main_task::local_len) {
            None => 0,
            Some(n) => n.max(default_size()).min(c_uint::MAX as usize) as c_uint,
        }
    })
}

/// An address in the caller's frame: where its stack pointer is, near
/// enough for the stack queries.
#[inline(never)]
fn stack_here() -> usize {
    let marker = 0u8;
    std::hint::black_box(&marker) as *const u8 as usize
}

/// qthread_stackleft: bytes of the calling task's stack between its
/// current frame and the guard page below it; 0 outside a task.
#[unsafe(no_mangle)]
pub extern "C" fn qthread_stackleft() -> usize {
    error::guarded(0, || match crate::sched::task_stack() {
        Some((lowest, _)) => stack_here().saturating_sub(lowest),
        None => 0,
    })
}

/// qthread_bos: the "bottom of stack" as Qthreads means it: where the
/// calling task's stack starts (one past its highest address; the stack
/// grows down from it); NULL outside a task.
#[unsafe(no_mangle)]
pub extern "C" fn qthread_bos() -> *mut c_void {
    error::guarded(std::ptr::null_mut(), || {
        crate::sched::task_stack().map_or(std::ptr::null_mut(), |(_, end)| end as *mut c_void)
    })
}

/// qthread_tos: the "top of stack" as Qthreads means it: the lowest
/// usable address of the calling task's stack, just above its guard page
/// (where the stack ends when full); NULL outside a task.
#[unsafe(no_mangle)]
pub extern "C" fn qthread_tos() -> *mut c_void {
    error::guarded(std::ptr::null_mut(), || {
        crate::sched::task_stack().map_or(std::ptr::null_mut(), |(lowest, _)| lowest as *mut c_void)
    })
}
