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
            AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Ordering,
        };
    }
}

#[cfg(not(loom))]
pub(crate) use std::{hint, thread};

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
