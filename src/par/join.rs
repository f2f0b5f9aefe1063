//! `join(a, b)`: fork-join of two closures, work-first. `b` is pushed on
//! the worker's deque, `a` runs at once; if nobody stole `b`, it is popped
//! back and called directly, so an unstolen join costs about a function
//! call plus a deque push and pop.

use super::stack_job::StackJob;
use crate::sched::WorkerLocal;
use crate::sync::end_count::EndCount;
use crate::sync::wait::BlockKind;
use std::panic::{self, AssertUnwindSafe};

/// Iterations a waiting task spins on its end count before blocking, when
/// its worker has nothing else to run: a stolen task is usually short,
/// and spinning avoids two switches and a wake-up.
const WAIT_SPIN: u32 = 1_000;

/// Runs `a` and `b`, potentially in parallel, and returns both results.
/// Either may block on sync variables. A panic in either reaches the
/// caller (after both finished). From an outside thread, the pair runs as
/// a task and the thread waits.
///
/// ```
/// let rt = cantus::Runtime::builder().workers(2).build().unwrap();
/// fn fib(n: u64) -> u64 {
///     if n < 2 { return n; }
///     let (a, b) = cantus::join(|| fib(n - 1), || fib(n - 2));
///     a + b
/// }
/// assert_eq!(rt.block_on(|| fib(20)), 6765);
/// ```
///
/// Panics if called outside tasks with no runtime running.
#[track_caller]
pub fn join<A, B, RA, RB>(a: A, b: B) -> (RA, RB)
where
    A: FnOnce() -> RA + Send,
    B: FnOnce() -> RB + Send,
    RA: Send,
    RB: Send,
{
    let Some(local) = WorkerLocal::current().filter(|l| l.in_task()) else {
        return crate::par::on_worker("join", move || join(a, b));
    };
    let job_b = StackJob::new(b);
    // SAFETY: job_b lives on this frame, and we do not leave the frame
    // (not even by unwinding: `a` runs under catch_unwind) before its
    // task was either popped back or its latch is done.
    local.push(unsafe { job_b.as_task() });
    let ra = panic::catch_unwind(AssertUnwindSafe(a));
    if let Some(task) = local.pop_if_group(job_b.group()) {
        // Not stolen: call `b` directly; count it as a task that ran.
        std::mem::forget(task);
        local.count_inline_run();
        let b = job_b.take_func();
        return match ra {
            Ok(ra) => (ra, b()),
            Err(p) => {
                // `a` panicked: `b` still runs (as it would have, had it
                // been stolen), then `a`'s panic propagates.
                let _ = panic::catch_unwind(AssertUnwindSafe(b));
                panic::resume_unwind(p)
            }
        };
    }
    wait_group(local, &job_b.latch, job_b.group());
    let rb = job_b.into_result();
    match ra {
        Ok(ra) => (ra, rb),
        Err(p) => panic::resume_unwind(p),
    }
}

/// Waits, inside a task, for `count` to reach zero: runs the group's own
/// tasks from the top of the worker's deque, spins briefly, then blocks.
/// Running only the group's own tasks keeps this from creating deadlocks
/// that blocking alone would not have.
pub(crate) fn wait_group(local: &WorkerLocal, count: &EndCount, group: *const ()) {
    loop {
        if count.is_done() {
            return;
        }
        match local.pop_if_group(group) {
            Some(t) => local.run_task(t),
            None => break,
        }
    }
    if local.nothing_else_here() {
        for _ in 0..WAIT_SPIN {
            if count.is_done() {
                return;
            }
            std::hint::spin_loop();
        }
    }
    count.wait_blocking(BlockKind::GroupWait);
}
