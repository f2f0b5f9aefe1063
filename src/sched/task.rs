//! A task not yet started: what sits in deques and the injector.
//!
//! A `Task` is a function pointer, the identity of the end count it
//! reports to (so a waiter can recognise its own group's tasks on top of
//! its deque and run them itself), and an inline payload of
//! [`INLINE_WORDS`] machine words. Closures that fit the payload are stored
//! in it: spawning them allocates nothing (seed 002, argument bundles).
//! Larger closures are boxed.

use std::mem::{ManuallyDrop, MaybeUninit, align_of, size_of};
use std::ptr;

/// Payload capacity in machine words.
pub(crate) const INLINE_WORDS: usize = 5;

pub(crate) type Payload = [MaybeUninit<usize>; INLINE_WORDS];

/// What the vtable function is asked to do with the payload.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Action {
    /// Run the task (consumes the payload).
    Run,
    /// Drop the payload without running (the runtime is being torn down).
    Drop,
}

/// `unsafe fn(payload, action)`: the task's code. Contract: called exactly
/// once per task, with the payload its constructor wrote.
pub(crate) type VTable = unsafe fn(*mut Payload, Action);

pub(crate) struct Task {
    vtable: VTable,
    group: *const (),
    payload: Payload,
}

// SAFETY: every constructor requires the captured data to be Send (or is
// unsafe and states that contract), so moving the task to another worker
// thread is sound.
unsafe impl Send for Task {}

impl Task {
    /// A task from raw parts.
    ///
    /// # Safety
    /// `vtable` must accept `payload` under its contract, and whatever the
    /// payload refers to must be safe to use from any worker thread until
    /// the vtable has run.
    pub(crate) unsafe fn from_raw(vtable: VTable, group: *const (), payload: Payload) -> Task {
        Task {
            vtable,
            group,
            payload,
        }
    }

    /// A task running `f`, inline if it fits, boxed otherwise.
    ///
    /// # Safety
    /// Everything `f` borrows must outlive the task's execution (for
    /// `F: 'static` this holds trivially).
    pub(crate) unsafe fn from_closure<F: FnOnce() + Send>(f: F, group: *const ()) -> Task {
        let mut payload: Payload = [MaybeUninit::uninit(); INLINE_WORDS];
        if size_of::<F>() <= size_of::<Payload>() && align_of::<F>() <= align_of::<Payload>() {
            // SAFETY: F fits the payload in size and alignment (checked above).
            unsafe { ptr::write(payload.as_mut_ptr().cast::<F>(), f) };
            // SAFETY: call_inline::<F> reads exactly the F written above.
            unsafe { Task::from_raw(call_inline::<F>, group, payload) }
        } else {
            payload[0] = MaybeUninit::new(Box::into_raw(Box::new(f)) as usize);
            // SAFETY: call_boxed::<F> reads the Box<F> pointer written above.
            unsafe { Task::from_raw(call_boxed::<F>, group, payload) }
        }
    }

    /// The end count this task reports to (null for detached tasks).
    #[inline]
    pub(crate) fn group(&self) -> *const () {
        self.group
    }

    /// Runs the task, consuming it.
    #[inline]
    pub(crate) fn run(self) {
        let mut me = ManuallyDrop::new(self);
        // SAFETY: the vtable is called exactly once (the task is consumed
        // and its Drop is suppressed), with the payload its constructor wrote.
        unsafe { (me.vtable)(&mut me.payload, Action::Run) }
    }
}

impl Drop for Task {
    fn drop(&mut self) {
        // SAFETY: a task that is dropped has not run; this is the one call.
        unsafe { (self.vtable)(&mut self.payload, Action::Drop) }
    }
}

unsafe fn call_inline<F: FnOnce()>(payload: *mut Payload, action: Action) {
    // SAFETY: the payload holds an F written by from_closure; read once.
    let f = unsafe { ptr::read(payload.cast::<F>()) };
    if action == Action::Run {
        f();
    }
}

unsafe fn call_boxed<F: FnOnce()>(payload: *mut Payload, action: Action) {
    // SAFETY: payload[0] holds a Box<F> pointer from from_closure; read once.
    let f = unsafe { Box::from_raw((*payload)[0].assume_init() as *mut F) };
    if action == Action::Run {
        f();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};

    #[test]
    fn small_closures_run_inline_and_large_ones_boxed() {
        let hits = Arc::new(AtomicUsize::new(0));
        let h = hits.clone();
        // SAFETY: the closure is 'static.
        let t = unsafe {
            Task::from_closure(
                move || {
                    h.fetch_add(1, Ordering::Relaxed);
                },
                ptr::null(),
            )
        };
        t.run();
        let big = [7u64; 16];
        let h = hits.clone();
        // SAFETY: the closure is 'static.
        let t = unsafe {
            Task::from_closure(
                move || {
                    h.fetch_add(big.iter().sum::<u64>() as usize, Ordering::Relaxed);
                },
                ptr::null(),
            )
        };
        t.run();
        assert_eq!(hits.load(Ordering::Relaxed), 1 + 7 * 16);
    }

    #[test]
    fn dropping_an_unrun_task_drops_its_captures() {
        let token = Arc::new(());
        for big in [false, true] {
            let t2 = token.clone();
            let pad = [0u8; 64];
            // SAFETY: the closures are 'static.
            let t = unsafe {
                if big {
                    Task::from_closure(move || drop((t2, pad)), ptr::null())
                } else {
                    Task::from_closure(move || drop(t2), ptr::null())
                }
            };
            assert_eq!(Arc::strong_count(&token), 2);
            drop(t);
            assert_eq!(Arc::strong_count(&token), 1);
        }
    }
}
