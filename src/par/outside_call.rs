//! Calls from outside threads that need a task: the root task of
//! `block_on`/`run`, and `join`/`forall` called from `main`. The caller
//! pushes a job on its own stack as a root task and waits for it.

use super::stack_job::StackJob;
use crate::sched::Registry;
use crate::sched::block::BlockKind;

/// Runs `f` as a task of `reg` from an outside thread and waits.
pub(crate) fn run_as_task<R: Send, F: FnOnce() -> R + Send>(reg: &Registry, f: F) -> R {
    let job = StackJob::new(f);
    // SAFETY: we wait for the job's latch before `job` goes out of scope.
    reg.inject_root(unsafe { job.as_task() });
    job.latch.wait_blocking(BlockKind::GroupWait);
    job.into_result()
}

/// Runs `f` on a worker for an outside thread (join from outside).
#[track_caller]
pub(crate) fn on_worker<R: Send, F: FnOnce() -> R + Send>(call: &str, f: F) -> R {
    let reg = crate::sched::registry_or_panic(call);
    run_as_task(&reg, f)
}
