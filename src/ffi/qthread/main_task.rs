//! Qthreads' main task. In Qthreads, the thread that calls
//! `qthread_initialize` becomes a qthread of shepherd 0 until
//! `qthread_finalize`: it has id 1, shepherd and worker 0, task-local
//! storage, and counts as shepherd 0's running task. The C ABI answers so
//! for cantus's starter thread too (`qthread_id`, `qthread_shep`,
//! `qthread_worker`, `qthread_readstate`'s `CURRENT_*` and busyness
//! selectors, `qthread_get_tasklocal`, `qthread_size_tasklocal`); inside a
//! blocking action it is away from its shepherd (`NO_SHEPHERD`), as in
//! Qthreads.
//!
//! With two shepherds or more, the thread also *runs* shepherd 0's
//! worker (`sched/worker/host.rs`): its waits run shepherd 0's tasks, as
//! Qthreads' main does. It stays an outside thread to Rust code (it is
//! not on a carrier, and `WorkerLocal::current()` is none while its own
//! code runs), which is what `is_main` tells apart. With one shepherd it
//! runs beside that shepherd's worker (`src/ffi/README.md`, "Main").

use crate::ffi::lifecycle;
use std::cell::RefCell;

/// Whether the caller is Qthreads' main task: the thread that started
/// the running runtime, outside any task (`false` before
/// `qthread_initialize` and after `qthread_finalize`).
pub(crate) fn is_main() -> bool {
    crate::sched::WorkerLocal::current().is_none() && lifecycle::is_starter_thread()
}

/// The main task's shepherd, 0, if the caller is the main task and not
/// away in a blocking action.
pub(crate) fn shepherd() -> Option<usize> {
    (is_main() && !crate::sched::in_blocking_action_in_place()).then_some(0)
}

/// Whether a runtime runs, and so a main task (counted as running on
/// shepherd 0, as Qthreads counts its main qthread while it runs).
pub(crate) fn alive() -> usize {
    usize::from(lifecycle::running())
}

thread_local! {
    /// The main task's task-local bytes (16-aligned units), kept until
    /// `qthread_finalize` (or the next runtime's first request).
    static LOCAL: RefCell<(u64, Vec<u128>)> = const { RefCell::new((0, Vec::new())) };
}

/// The main task's task-local storage, at least `len` bytes (zeroed when
/// first made, contents kept when it grows; it may move then): its
/// address and size. `None` if the caller is not the main task.
pub(crate) fn local_bytes(len: usize) -> Option<(*mut u8, usize)> {
    if !is_main() {
        return None;
    }
    let generation = lifecycle::generation();
    LOCAL.with(|l| {
        let mut l = l.borrow_mut();
        if l.0 != generation {
            *l = (generation, Vec::new());
        }
        let units = len.div_ceil(size_of::<u128>());
        if l.1.len() < units {
            l.1.resize(units, 0);
        }
        Some((l.1.as_mut_ptr().cast::<u8>(), l.1.len() * size_of::<u128>()))
    })
}

/// The size of the main task's task-local bytes (0 before it asked);
/// `None` if the caller is not the main task.
pub(crate) fn local_len() -> Option<usize> {
    if !is_main() {
        return None;
    }
    let generation = lifecycle::generation();
    Some(LOCAL.with(|l| {
        let l = l.borrow();
        if l.0 == generation {
            l.1.len() * size_of::<u128>()
        } else {
            0
        }
    }))
}

/// Frees the main task's storage (`qthread_finalize`, on the starter
/// thread).
pub(crate) fn end() {
    let _ = LOCAL.try_with(|l| *l.borrow_mut() = (0, Vec::new()));
}
