//! The location behind [`SyncVar`](super::SyncVar) and
//! [`SingleVar`](super::SingleVar): a wait word whose bit [`FULL`] is the
//! full/empty state, and a value slot that holds a `T` exactly when full.
//! It is the engine's [`Site`] for both.

use super::full_empty::{Place, Site};
use super::wait_queue::Queue;
use super::word::{Locked, ONE, WaitWord};
use crate::loom::UnsafeCell;
use crate::loom::sync::atomic::Ordering;
use std::mem::MaybeUninit;

/// The state bit: full.
pub(crate) const FULL: usize = ONE;

// repr(C), word first: the variable's address is its wait word's, which
// deadlock reports print.
//
// Aligned to the size of what two cores contend for (crossbeam's
// `CachePadded` rule: 128 bytes where a core's prefetcher pulls pairs of
// 64-byte lines, or the lines are 128 bytes; 64 elsewhere), so that a
// variable owns its lines: two variables, or a variable and other data,
// never share one, wherever a program's stack frame or struct puts them.
// A hand-off between two workers moves its variable's line and nothing
// else's. Sharing a line doubled the cross-worker hand-off (78 -> 150 ns
// here, BENCHMARKS.md "A hand-off that moved with the binary"), and
// whether two variables on a stack shared one changed with unrelated
// code. The cost: a variable of a small `T` takes 128 bytes, not 32.
#[cfg_attr(
    any(
        target_arch = "x86_64",
        target_arch = "aarch64",
        target_arch = "powerpc64",
        target_arch = "arm64ec"
    ),
    repr(C, align(128))
)]
#[cfg_attr(
    not(any(
        target_arch = "x86_64",
        target_arch = "aarch64",
        target_arch = "powerpc64",
        target_arch = "arm64ec"
    )),
    repr(C, align(64))
)]
pub(crate) struct Var<T> {
    pub(crate) word: WaitWord<T>,
    value: UnsafeCell<MaybeUninit<T>>,
}

impl<T> Var<T> {
    pub(crate) fn new(value: Option<T>) -> Var<T> {
        let full = value.is_some();
        Var {
            word: WaitWord::new(if full { FULL } else { 0 }),
            value: UnsafeCell::new(match value {
                Some(v) => MaybeUninit::new(v),
                None => MaybeUninit::uninit(),
            }),
        }
    }

    /// Whether full right now.
    #[inline]
    pub(crate) fn is_full(&self) -> bool {
        // Acquire pairs with the Release of the unlock that set the bit
        // (`Locked::unlock_with`), so the value it published is visible.
        self.word.state.load(Ordering::Acquire) & FULL != 0
    }

    /// The place with `lock` held.
    #[inline]
    pub(crate) fn place<'a>(&'a self, lock: Locked<'a, T>) -> VarPlace<'a, T> {
        VarPlace {
            full: lock.state() & FULL != 0,
            lock,
            value: &self.value,
        }
    }

    /// A shared reference to the value.
    ///
    /// # Safety
    /// The variable is full and its value is never moved out or dropped
    /// while the reference lives (a `SingleVar` after its write).
    pub(crate) unsafe fn value_ref(&self) -> &T {
        let p = self.value.with(|p| p);
        // SAFETY: per the contract the value is initialised and stays put
        // while `&self` lives.
        unsafe { (*p).assume_init_ref() }
    }

    /// The value, if full, consuming the variable.
    pub(crate) fn into_inner(self) -> Option<T> {
        let me = std::mem::ManuallyDrop::new(self);
        let full = me.word.state.load(Ordering::Acquire) & FULL != 0;
        // SAFETY: we own the variable (no other references); the value is
        // initialised when full, and `me` is never dropped, so it is read
        // exactly once.
        full.then(|| me.value.with_mut(|p| unsafe { (*p).assume_init_read() }))
    }
}

impl<T> Drop for Var<T> {
    fn drop(&mut self) {
        if self.word.state.load(Ordering::Relaxed) & FULL != 0 {
            // SAFETY: &mut self: no other access; the value is initialised.
            self.value.with_mut(|p| unsafe { (*p).assume_init_drop() });
        }
    }
}

/// A [`Var`] with its lock held. The state is kept here and stored into
/// the word when the place is released (`unlock`).
pub(crate) struct VarPlace<'a, T> {
    lock: Locked<'a, T>,
    value: &'a UnsafeCell<MaybeUninit<T>>,
    full: bool,
}

impl<T> VarPlace<'_, T> {
    /// Releases the lock, publishing the state (and WAITERS).
    #[inline]
    pub(crate) fn unlock(self) {
        self.lock.unlock_with(if self.full { FULL } else { 0 });
    }

    /// Runs `f` on the value in place (readFF and readXX clone it there).
    /// If `f` unwinds, the lock guard releases the lock with the state
    /// unchanged (see `Locked`'s Drop).
    ///
    /// # Safety
    /// The place is full.
    pub(crate) unsafe fn with_value<R>(&self, f: impl FnOnce(&T) -> R) -> R {
        // SAFETY: full, so the value is initialised; we hold the lock.
        self.value.with(|p| f(unsafe { (*p).assume_init_ref() }))
    }
}

impl<T> Place for VarPlace<'_, T> {
    type Value = T;

    #[inline]
    fn is_full(&self) -> bool {
        self.full
    }

    #[inline]
    fn set_full(&mut self, full: bool) {
        self.full = full;
    }

    #[inline]
    fn queue(&mut self) -> &mut Queue<T> {
        self.lock.queue()
    }

    #[inline]
    unsafe fn take(&mut self) -> T {
        // SAFETY: full by the contract, so initialised; we hold the lock.
        // The slot counts as uninitialised until the next `put`.
        self.value.with_mut(|p| unsafe { (*p).assume_init_read() })
    }

    #[inline]
    fn put(&mut self, v: T) {
        // The slot holds no value (the contract): nothing is overwritten.
        // SAFETY: we hold the lock, so the slot is ours.
        self.value.with_mut(|p| unsafe { (*p).write(v) });
    }
}

impl<T> Site for Var<T> {
    type Value = T;

    #[inline]
    fn locked<R>(&self, f: impl FnOnce(&mut dyn Place<Value = T>) -> R) -> R {
        let mut p = self.place(self.word.lock());
        let r = f(&mut p);
        p.unlock();
        r
    }

    #[inline]
    fn addr(&self) -> usize {
        self.word.addr()
    }

    #[inline]
    fn peek_full(&self) -> Option<bool> {
        Some(self.is_full())
    }
}
