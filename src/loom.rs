//! The loom shim: the concurrency primitives the protocols are written
//! against. Under `--cfg loom` they are loom's model-checked versions (see
//! `tests/loom_*.rs`); otherwise they are `std`'s. The same source is
//! compiled both ways, as tokio's `src/loom` does.

#[cfg(loom)]
pub(crate) use loom::{sync, thread};

#[cfg(not(loom))]
pub(crate) mod sync {
    pub(crate) use std::sync::{Condvar, Mutex};

    pub(crate) mod atomic {
        pub(crate) use std::sync::atomic::{
            AtomicBool, AtomicPtr, AtomicU32, AtomicU64, AtomicUsize, Ordering, fence,
        };
    }
}

#[cfg(not(loom))]
pub(crate) use std::thread;

/// Runs a loom model (every `loom_tests` module's one way in): at most
/// `bound` forced preemptions per execution (`None`: exhaustive), as
/// tokio bounds its models so they finish in CI time, unless
/// `LOOM_MAX_PREEMPTIONS` sets another bound; with room for 100,000
/// branches, since spins and lock retries yield to loom's scheduler.
#[cfg(all(loom, test))]
pub(crate) fn model(bound: Option<usize>, f: impl Fn() + Sync + Send + 'static) {
    let mut b = loom::model::Builder::new();
    if b.preemption_bound.is_none() {
        b.preemption_bound = bound;
    }
    b.max_branches = 100_000;
    b.check(f);
}

/// Exponential backoff for every spin in cantus's locks and waits:
/// crossbeam's `Backoff` (spin with `spin_loop` hints, doubling, then
/// `yield_now`; `is_completed` says when blocking is advised).
#[cfg(not(loom))]
pub(crate) use crossbeam_utils::Backoff;

/// Under loom, every backoff step yields to loom's scheduler (a spinning
/// thread must, or loom explores the spin forever), and the backoff
/// completes at once.
#[cfg(loom)]
#[derive(Default)]
pub(crate) struct Backoff;

#[cfg(loom)]
impl Backoff {
    pub(crate) fn new() -> Backoff {
        Backoff
    }

    pub(crate) fn spin(&self) {
        loom::thread::yield_now();
    }

    pub(crate) fn snooze(&self) {
        loom::thread::yield_now();
    }

    pub(crate) fn is_completed(&self) -> bool {
        true
    }
}

/// An `UnsafeCell` with loom's closure-based API, so that loom can track
/// accesses to the data it guards.
#[cfg(not(loom))]
#[derive(Debug)]
pub(crate) struct UnsafeCell<T>(core::cell::UnsafeCell<T>);

#[cfg(not(loom))]
impl<T> UnsafeCell<T> {
    pub(crate) const fn new(value: T) -> Self {
        UnsafeCell(core::cell::UnsafeCell::new(value))
    }

    #[inline(always)]
    pub(crate) fn with<R>(&self, f: impl FnOnce(*const T) -> R) -> R {
        f(self.0.get())
    }

    #[inline(always)]
    pub(crate) fn with_mut<R>(&self, f: impl FnOnce(*mut T) -> R) -> R {
        f(self.0.get())
    }
}

#[cfg(loom)]
pub(crate) use loom::cell::UnsafeCell;
