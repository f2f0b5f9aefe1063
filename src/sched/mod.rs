//! The scheduler: worker threads, per-worker work-stealing deques, the
//! injector for outside threads, resume queues for woken tasks, idle
//! spinning and sleeping. `README.md` beside this file states the policy
//! (which tasks may move between workers, and why).

#![cfg_attr(loom, allow(dead_code))]

pub(crate) mod block;
pub(crate) mod deadlock;
pub(crate) mod deadlock_wave;
pub(crate) mod deque;
pub(crate) mod driver;
pub(crate) mod idle;
pub(crate) mod new_task;
pub(crate) mod no_wait;
pub(crate) mod outside_wait;
pub(crate) mod registry;
pub(crate) mod sleep;
pub(crate) mod task_storage;
pub(crate) mod worker;

pub(crate) use outside_wait::{
    OutsideBlocked, block_outside, check_outside_block_can_end, note_outside_wake,
};
pub(crate) use registry::Registry;
pub(crate) use worker::WorkerLocal;
pub(crate) use worker::blocking_call::{
    begin as begin_blocking, body_may_go_away, end as end_blocking, errno, set_errno,
};

use block::BlockKind;

/// Names a blocked task so a waker can make it runnable again: its
/// worker and its carrier's slot there.
#[derive(Clone, Copy)]
pub(crate) struct TaskHandle {
    registry: *const Registry,
    worker: u32,
    slot: u32,
}

// SAFETY: the handle is plain data; the registry it points to is kept
// alive by the worker that owns the blocked task (a worker holds an Arc to
// its registry until it exits, and exits only when it has no blocked task).
unsafe impl Send for TaskHandle {}
// SAFETY: as above; `wake` only uses thread-safe parts of the registry.
unsafe impl Sync for TaskHandle {}

impl TaskHandle {
    /// The running task's handle, if the caller is a task.
    #[inline]
    pub(crate) fn current() -> Option<TaskHandle> {
        let local = WorkerLocal::current()?;
        local.in_task().then(|| TaskHandle {
            registry: &*local.registry,
            worker: local.index as u32,
            slot: local.current_slot(),
        })
    }

    /// Makes the task runnable on its own worker.
    #[inline]
    pub(crate) fn wake(self) {
        // SAFETY: see the Send impl: the registry outlives blocked tasks.
        let reg = unsafe { &*self.registry };
        crate::trace::record(
            crate::trace::kind::WAKE,
            0,
            0,
            u64::from(self.worker) << 32 | u64::from(self.slot),
            0,
        );
        reg.workers[self.worker as usize].resume.push(self.slot);
        reg.sleep.notify_worker(self.worker as usize);
    }
}

/// Suspends the calling task until its handle is woken; `addr` names
/// the variable it waits on (for the deadlock report).
pub(crate) fn block_current_task(kind: BlockKind, addr: usize) {
    WorkerLocal::current()
        .expect("block_current_task outside a worker")
        .block_current(kind, addr);
}

/// Counts the calling task blocked (`kind`) from now until the end of
/// `wait`, in which it enters a wait that other tasks can see (a Qthreads
/// queue's length): so whoever sees it waiting never also counts it
/// running (`qthread_readstate`'s busyness), as the block itself would
/// count it only once its worker switched away. A block of `kind` inside
/// `wait` takes the count over; without one, it is undone. Outside a
/// task, just runs `wait`.
pub(crate) fn count_blocked_early<R>(kind: BlockKind, wait: impl FnOnce() -> R) -> R {
    let Some(local) = WorkerLocal::current() else {
        return wait();
    };
    local.count_blocked_early(kind);
    struct Undo(BlockKind);
    impl Drop for Undo {
        fn drop(&mut self) {
            // Looked up afresh: the task may be on another worker now.
            if let Some(local) = WorkerLocal::current() {
                local.uncount_blocked_early(self.0);
            }
        }
    }
    let _undo = Undo(kind);
    wait()
}

/// Whether the calling task may spin before blocking: it is a task and
/// its worker has nothing else ready to run (so blocking would only idle
/// the worker, and spinning catches a quick hand-off from another worker
/// without two switches and a wake-up), and no progress thread of the
/// driver may need the core (then the task blocks at once, and its idle
/// worker gives the core away between polls).
#[inline]
pub(crate) fn may_spin_before_blocking() -> bool {
    WorkerLocal::current()
        .is_some_and(|l| l.in_task() && !l.registry.progress_thread && l.nothing_else_here())
}

/// From a task that spins before it blocks: polls the runtime's driver
/// (under its poll token), since the task's worker cannot poll while the
/// task spins. Returns the items handled (0 without a driver).
#[inline]
pub(crate) fn poll_driver_from_task() -> usize {
    match WorkerLocal::current() {
        Some(l) if l.registry.driver.is_some() => driver::poll(&l.registry),
        _ => 0,
    }
}

/// Whether a runtime with a driver (a locale of a job) was ever built in
/// this process: one load of a static, so that code on the paths of a
/// single-locale runtime pays nothing more for a driver's check.
#[inline]
pub(crate) fn has_driver() -> bool {
    // Relaxed: a hint; a worker of a runtime with a driver runs after the
    // store below, on a thread its builder started.
    registry::DRIVER_BUILT.load(std::sync::atomic::Ordering::Relaxed)
}

/// Whether the running worker's driver has something to poll (cheap:
/// loads only); false on a thread that is not a worker, or without a
/// driver.
#[inline]
pub(crate) fn driver_ready_from_task() -> bool {
    WorkerLocal::current().is_some_and(|l| driver::ready(&l.registry))
}

/// How many workers of the running worker's runtime are idle now (a
/// hint, as forall's lazy splitting reads it); 0 on a thread that is
/// not a worker.
#[inline]
pub(crate) fn idle_workers() -> usize {
    WorkerLocal::current().map_or(0, |l| l.registry.idle.idle())
}

/// Whether the running worker's driver moves messages on a thread of
/// its own that may share a core with the workers (an MPI thread): a
/// task that computes for long must then give the core away now and
/// then, or that thread cannot run (`Driver::progress_thread`).
#[inline]
pub(crate) fn driver_has_progress_thread() -> bool {
    WorkerLocal::current().is_some_and(|l| l.registry.progress_thread)
}

/// The running runtime's task stack size (`None` without a runtime).
pub(crate) fn stack_size() -> Option<usize> {
    Registry::current().map(|r| r.config.stack_size)
}

/// The calling task's usable stack `[lowest, highest)` address (just
/// above its guard page); `None` outside a task.
pub(crate) fn task_stack() -> Option<(usize, usize)> {
    WorkerLocal::current().and_then(|l| l.task_stack())
}

/// Disables worker `w` of the calling thread's runtime, or enables it
/// again (`Sleep::set_disabled`): a disabled worker resumes the tasks it
/// started (they never move) and hands its queued tasks to the enabled
/// workers. `false` without a runtime or for no such worker.
pub(crate) fn set_worker_disabled(w: usize, disabled: bool) -> bool {
    match Registry::current() {
        Some(reg) if w < reg.workers.len() => {
            reg.sleep.set_disabled(w, disabled);
            true
        }
        _ => false,
    }
}

/// Queues `task` on worker `w` of the calling thread's runtime, which
/// alone runs it (`worker/migrate.rs`); if `w` is disabled, on the shared
/// injector for the others (and should `w` be disabled by the time it
/// takes the task, it hands it on). `false` (the task dropped unrun)
/// without a runtime or such a worker. One look-up of the runtime.
pub(crate) fn place_on_worker(w: usize, task: new_task::Task) -> bool {
    match Registry::current() {
        Some(reg) if w < reg.workers.len() => {
            if reg.sleep.is_disabled(w) {
                reg.inject(task);
            } else {
                worker::migrate::place_on(&reg, w, task);
            }
            true
        }
        _ => false,
    }
}

pub(crate) use worker::migrate::Unmoved;

/// Moves the calling task to worker `to` for good (`worker/migrate.rs`);
/// returns there. Only for tasks whose every frame below the caller is
/// the scheduler's or the C ABI's (the C ABI's forked tasks).
pub(crate) fn migrate_current_task(to: usize) -> Result<(), Unmoved> {
    worker::migrate::migrate_current(to)
}

/// Whether worker `w` of the calling thread's runtime is disabled
/// (`None` without a runtime or such a worker).
pub(crate) fn worker_disabled(w: usize) -> Option<bool> {
    Registry::current()
        .filter(|reg| w < reg.workers.len())
        .map(|reg| reg.sleep.is_disabled(w))
}

/// How many workers of the calling thread's runtime are enabled (`None`
/// without a runtime).
pub(crate) fn enabled_workers() -> Option<usize> {
    Registry::current().map(|reg| {
        (0..reg.workers.len())
            .filter(|&w| !reg.sleep.is_disabled(w))
            .count()
    })
}

/// The id of the task running on this blocking-call thread, if any
/// (`worker/blocking_call.rs`): between `qt_begin_blocking_action` and its end a
/// task keeps its identity for the C ABI.
pub(crate) fn away_task_id() -> Option<u64> {
    worker::blocking_call::away_task().map(|(id, _)| id)
}

/// How many tasks wait in the calling worker's own deque (`None` on a
/// thread that is not a worker): Qthreads' "busyness" of a shepherd.
pub(crate) fn current_queue_len() -> Option<usize> {
    WorkerLocal::current().map(|l| l.queued_here())
}

/// How many tasks wait in worker `w`'s deque of the calling thread's
/// runtime (a moment's view; `None` without a runtime or such a worker).
pub(crate) fn queue_len_of(w: usize) -> Option<usize> {
    let reg = Registry::current()?;
    reg.workers.get(w).map(|s| s.stealer.len())
}

/// Whether the calling thread, not a task, is inside a blocking action
/// (`qt_begin_blocking_action` made in place).
pub(crate) fn in_blocking_action_in_place() -> bool {
    worker::blocking_call::in_place_action()
}

/// The bytes the runtime keeps for a task besides its usable stack: the
/// guard page below the stack and the task's queued record.
pub(crate) fn task_runtime_bytes() -> usize {
    crate::config::page_size() + std::mem::size_of::<new_task::Queued>()
}

/// Whether a runtime runs for the calling thread (a worker's, or the
/// process's current one).
pub(crate) fn in_runtime() -> bool {
    Registry::current().is_some()
}

/// Iterations a task spins on a variable before it blocks, when
/// [`may_spin_before_blocking`] allows.
pub(crate) const SPIN_BEFORE_BLOCKING: u32 = 256;

/// The running runtime, or a panic with a clear message.
#[track_caller]
pub(crate) fn registry_or_panic(call: &str) -> std::sync::Arc<Registry> {
    match Registry::current() {
        Some(r) => r,
        None => panic!("{}", crate::error::Error::no_runtime(call)),
    }
}

/// Holds back one finish of the running task's group on this worker
/// (`worker/deferred.rs`): `finish(group, n)` makes it later, with the
/// group's other held finishes. `false` (nothing held) off a worker: the
/// caller finishes at once.
///
/// # Safety
/// As [`WorkerLocal::defer_finish`].
pub(crate) unsafe fn defer_finish(group: *const (), finish: worker::FinishMany) -> bool {
    match WorkerLocal::current() {
        Some(local) => {
            // SAFETY: forwarded contract.
            unsafe { local.defer_finish(group, finish) };
            true
        }
        None => false,
    }
}

/// Pushes a task: on the worker's own deque from a worker, through the
/// injector from an outside thread.
pub(crate) fn push_task(call: &str, task: new_task::Task) -> Result<(), crate::error::Error> {
    if let Some(local) = WorkerLocal::current() {
        local.push(task);
        return Ok(());
    }
    // The thread that hosts a worker pushes on its deque (`worker/host.rs`)
    // while the deque is short. While the host runs its own code, that
    // deque is drained only by steals, one task each; beyond
    // `worker::host::DEQUE_DEPTH` its forks go through the injector,
    // which the other workers drain in batches.
    if let Some(local) = worker::host::hosted() {
        if local.queued_fewer_than(worker::host::DEQUE_DEPTH) {
            local.push(task);
            return Ok(());
        }
    }
    // Injected under the registry's lock, not through a clone of it: an
    // outside thread that forks in a loop (Qthreads' main) saves the two
    // reference-count updates per task.
    // Without a runtime the task comes back, to be dropped (running its
    // captures' destructors) after the lock is released.
    let unplaced = Registry::with_current(move |r| match r {
        Some(r) => {
            r.inject(task);
            None
        }
        None => Some(task),
    });
    match unplaced {
        None => Ok(()),
        Some(task) => {
            drop(task);
            Err(crate::error::Error::no_runtime(call))
        }
    }
}
