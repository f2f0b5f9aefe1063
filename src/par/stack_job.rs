//! A job on its owner's stack, with a one-count latch: the second half of
//! a `join`, and the root task of `block_on`. Its owner waits for the
//! latch before the frame holding it ends, which is what makes pushing a
//! pointer to the stack into a deque sound.

use crate::sched::new_task::{Action, INLINE_WORDS, Payload, Task, UNRUN_AT_SHUTDOWN};
use crate::sync::end_count::EndCount;
use std::any::Any;
use std::cell::UnsafeCell;
use std::mem::MaybeUninit;
use std::panic::{self, AssertUnwindSafe};

pub(crate) enum JobResult<R> {
    Pending,
    Done(R),
    Panicked(Box<dyn Any + Send>),
}

pub(crate) struct StackJob<F, R> {
    func: UnsafeCell<Option<F>>,
    result: UnsafeCell<JobResult<R>>,
    pub(crate) latch: EndCount,
}

impl<F: FnOnce() -> R + Send, R: Send> StackJob<F, R> {
    pub(crate) fn new(f: F) -> Self {
        StackJob {
            func: UnsafeCell::new(Some(f)),
            result: UnsafeCell::new(JobResult::Pending),
            latch: EndCount::new(1),
        }
    }

    /// The identity used to recognise this job's task on a deque.
    pub(crate) fn group(&self) -> *const () {
        &self.latch as *const EndCount as *const ()
    }

    /// A task that runs this job.
    ///
    /// # Safety
    /// The caller must keep `self` alive and unmoved until the latch is
    /// done, and must push the task at most once.
    pub(crate) unsafe fn as_task(&self) -> Task {
        let mut payload: Payload = [MaybeUninit::new(0); INLINE_WORDS];
        payload[0] = MaybeUninit::new(self as *const Self as usize);
        // SAFETY: execute::<F, R> reads payload[0] as a pointer to this job,
        // which the caller keeps alive until the latch is done; F and R are
        // Send, so running it on another worker is sound.
        unsafe { Task::from_raw(execute::<F, R>, self.group(), payload) }
    }

    /// Takes the closure back to call it directly (its task was popped
    /// back by the owner, so no other thread can run the job). Returning
    /// it, rather than running it into the result cell, keeps the result
    /// in registers on the fast path.
    pub(crate) fn take_func(&self) -> F {
        // SAFETY: the owner popped the job's task back, so no other thread
        // can touch `func`.
        unsafe { (*self.func.get()).take() }.expect("a job runs once")
    }

    /// # Safety
    /// Called at most once, by whoever holds the job's task.
    unsafe fn run(&self) {
        // SAFETY: per the contract we are the only one touching the cells.
        let f = unsafe { (*self.func.get()).take() }.expect("a job runs once");
        let r = match panic::catch_unwind(AssertUnwindSafe(f)) {
            Ok(v) => JobResult::Done(v),
            Err(p) => JobResult::Panicked(p),
        };
        // SAFETY: as above.
        unsafe { *self.result.get() = r };
    }

    /// The result, re-raising the job's panic. Call once the latch is done
    /// (or after `run_inline`).
    pub(crate) fn into_result(self) -> R {
        match self.result.into_inner() {
            JobResult::Done(v) => v,
            JobResult::Panicked(p) => panic::resume_unwind(p),
            JobResult::Pending => unreachable!("job result read before it ran"),
        }
    }
}

unsafe fn execute<F: FnOnce() -> R + Send, R: Send>(
    payload: *mut Payload,
    _group: *const (),
    action: Action,
) {
    // SAFETY: as_task stored a pointer to a live StackJob<F, R> here.
    let job = unsafe { &*((*payload)[0].assume_init() as *const StackJob<F, R>) };
    match action {
        Action::Run => {
            crate::trace::label(crate::trace::task_kind::JOIN);
            // SAFETY: whoever holds the task is the only one to run the job.
            unsafe { job.run() }
        }
        Action::Drop => {
            // SAFETY: as above; the job never ran, record why.
            unsafe {
                *job.result.get() = JobResult::Panicked(Box::new(UNRUN_AT_SHUTDOWN));
            }
        }
    }
    // Last access to `job`: its owner may free it once the latch is done.
    job.latch.done_one();
}
