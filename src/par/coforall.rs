//! `coforall`: n concurrent tasks with ONE end-count update for all of
//! them (seed 002, bounded coforall), spawned lazily: one task stands for
//! a range of indices and splits in half each time it runs, so spawning n
//! tasks pushes O(log n) deque entries per worker and allocates nothing.

use super::join::wait_group;
use crate::sched::WorkerLocal;
use crate::sched::new_task::{Action, INLINE_WORDS, Payload, Task};
use crate::sync::end_count::EndCount;
use crate::sync::wait::BlockKind;
use std::mem::MaybeUninit;
use std::panic::{self, AssertUnwindSafe};

/// `count` comes first so that a pointer to the count (a range task's
/// group) is a pointer to the job.
#[repr(C)]
struct CoforallJob<'a, F> {
    count: EndCount,
    body: &'a F,
    /// The task that called `coforall` (with tracing on; else 0).
    spawner: u64,
}

/// Runs `body(i)` for every `i` in `0..n`, each as its own task, and
/// returns when all have finished. The tasks may block on each other
/// (through sync variables), since each index is a separate task with its
/// own stack once it blocks. A panic in any of them reaches the caller.
///
/// ```
/// use std::sync::atomic::{AtomicUsize, Ordering};
/// let rt = cantus::Runtime::builder().workers(2).build().unwrap();
/// let hits = AtomicUsize::new(0);
/// rt.block_on(|| cantus::coforall(1000, |i| { hits.fetch_add(i, Ordering::Relaxed); }));
/// assert_eq!(hits.into_inner(), 999 * 1000 / 2);
/// ```
///
/// Panics if called outside tasks with no runtime running.
#[track_caller]
pub fn coforall<F>(n: usize, body: F)
where
    F: Fn(usize) + Sync,
{
    if n == 0 {
        return;
    }
    let job = CoforallJob {
        body: &body,
        count: EndCount::new(n),
        spawner: crate::trace::spawner(),
    };
    let group = &job.count as *const EndCount as *const ();
    match WorkerLocal::current().filter(|l| l.in_task()) {
        Some(local) => {
            if n > 1 {
                // SAFETY: `job` outlives every range task: we wait below
                // for the count, which each index decrements last.
                local.push(unsafe { range_task(&job, 1, n) });
            }
            run_index(&job, 0);
            wait_group(local, &job.count, group);
        }
        None => {
            let reg = crate::sched::registry_or_panic("coforall");
            // SAFETY: as above; we block until the count is done.
            reg.inject(unsafe { range_task(&job, 0, n) });
            job.count.wait_blocking(BlockKind::GroupWait);
        }
    }
    if let Some(p) = job.count.take_panic() {
        panic::resume_unwind(p);
    }
}

/// # Safety
/// `job` must stay alive until its count is done.
unsafe fn range_task<F: Fn(usize) + Sync>(job: &CoforallJob<'_, F>, lo: usize, hi: usize) -> Task {
    let mut payload: Payload = [MaybeUninit::new(0); INLINE_WORDS];
    payload[0] = MaybeUninit::new(lo);
    payload[1] = MaybeUninit::new(hi);
    let group = &job.count as *const EndCount as *const ();
    // SAFETY: run_range reads exactly this payload; F: Sync so the body may
    // be called from any worker; the caller keeps `job` alive.
    unsafe { Task::from_raw(run_range::<F>, group, payload) }
}

unsafe fn run_range<F: Fn(usize) + Sync>(payload: *mut Payload, group: *const (), action: Action) {
    // SAFETY: range_task wrote the bounds, and the group is the job's
    // count, its first field (repr(C)), so it points at the live job.
    let (job, lo, hi) = unsafe {
        (
            &*(group as *const CoforallJob<'_, F>),
            (*payload)[0].assume_init(),
            (*payload)[1].assume_init(),
        )
    };
    if action == Action::Drop {
        for _ in lo..hi {
            job.count.done_one();
        }
        return;
    }
    crate::trace::label_spawned_by(crate::trace::task_kind::COFORALL, job.spawner);
    let local = WorkerLocal::current().expect("range tasks run on workers");
    let mut hi = hi;
    while hi - lo > 1 {
        let mid = lo + (hi - lo) / 2;
        // SAFETY: the job outlives its count, which [mid, hi) still holds.
        local.push(unsafe { range_task(job, mid, hi) });
        hi = mid;
    }
    run_index(job, lo);
}

fn run_index<F: Fn(usize) + Sync>(job: &CoforallJob<'_, F>, i: usize) {
    if let Err(p) = panic::catch_unwind(AssertUnwindSafe(|| (job.body)(i))) {
        job.count.record_panic(p);
    }
    job.count.done_one();
}
