//! `SyncVar<T>`: a full/empty synchronization variable (Chapel's `sync`),
//! native to the tasking layer: its full bit lives in its own word and
//! blocked tasks queue on the variable itself (seed 000, section 6).

use super::wait::{BlockKind, Waiter, WakeList, Want};
use super::word::{Locked, ONE, WaitWord, Wake};
use crate::loom::UnsafeCell;
use crate::loom::sync::atomic::Ordering;
use std::fmt;
use std::mem::MaybeUninit;

const FULL: usize = ONE;

/// A variable that is either full (holds a `T`) or empty: Chapel's `sync`
/// variable (and Qthreads' full/empty bits). Named `SyncVar` so that
/// `use cantus::*;` leaves the standard `Sync` trait alone.
///
/// Operations are named as in Chapel and Qthreads: the first letter is the
/// state the operation waits for (`F`ull, `E`mpty, or `X` for any), the
/// second the state it leaves (`readFE` waits for full, leaves empty).
/// Waiting blocks only the calling task: its worker runs other tasks
/// meanwhile. Outside OS threads may call every operation too; they spin
/// briefly, then park.
///
/// ```
/// let rt = cantus::Runtime::builder().workers(2).build().unwrap();
/// let v = cantus::SyncVar::new();
/// rt.block_on(|| {
///     cantus::scope(|s| {
///         s.spawn(|| v.write_ef(42));
///         assert_eq!(v.read_fe(), 42);
///     });
/// });
/// assert!(!v.is_full());
/// ```
// repr(C), word first: the variable's address is its wait word's, which
// deadlock reports print.
#[repr(C)]
pub struct SyncVar<T> {
    word: WaitWord,
    value: UnsafeCell<MaybeUninit<T>>,
}

// SAFETY: the value moves between threads through the variable, so T: Send
// is needed and sufficient; all access to it holds the word's lock bit.
unsafe impl<T: Send> Send for SyncVar<T> {}
// SAFETY: shared access only moves values in and out under the lock bit
// (readFF clones under the lock, so T: Send suffices as for a Mutex).
unsafe impl<T: Send> core::marker::Sync for SyncVar<T> {}

// A panic never leaves the variable's lock held, its queue half-linked or
// its value half-moved, so it stays usable: the only user code that runs
// under the lock is `T::clone` in read_ff/read_xx, and if it panics the lock
// guard (`Locked`'s Drop) releases the lock with the state unchanged; old
// values replaced by write_ff/write_xf/reset are dropped after the lock is
// released. Values move in and out whole, so no broken `T` is left behind.
impl<T> std::panic::RefUnwindSafe for SyncVar<T> {}
impl<T> std::panic::UnwindSafe for SyncVar<T> {}

impl<T> Default for SyncVar<T> {
    fn default() -> Self {
        SyncVar::new()
    }
}

impl<T> SyncVar<T> {
    /// An empty variable.
    pub fn new() -> SyncVar<T> {
        SyncVar {
            word: WaitWord::new(0),
            value: UnsafeCell::new(MaybeUninit::uninit()),
        }
    }

    /// A full variable holding `value`.
    pub fn with_value(value: T) -> SyncVar<T> {
        SyncVar {
            word: WaitWord::new(FULL),
            value: UnsafeCell::new(MaybeUninit::new(value)),
        }
    }

    /// Whether the variable is full right now (it may change at once).
    pub fn is_full(&self) -> bool {
        // Acquire pairs with the Release in Locked::unlock_with.
        self.word.state.load(Ordering::Acquire) & FULL != 0
    }

    /// Waits until full, takes the value, leaves the variable empty.
    pub fn read_fe(&self) -> T {
        if let Some(l) = self.word.try_lock_exact(FULL) {
            // SAFETY: we hold the lock and the variable is full.
            let v = unsafe { self.take_value() };
            l.unlock_with(0);
            return v;
        }
        let l = self.acquire(Want::FullConsume, BlockKind::SyncRead);
        // SAFETY: we hold the lock and acquire returned with FULL set.
        let v = unsafe { self.take_value() };
        Self::release(l, true, false);
        v
    }

    /// Waits until full, returns a copy, leaves the variable full.
    ///
    /// If `T::clone` panics, the panic reaches the caller and the variable
    /// is left as it was: full, holding the same value.
    pub fn read_ff(&self) -> T
    where
        T: Clone,
    {
        let l = self.acquire(Want::Full, BlockKind::SyncRead);
        // SAFETY: we hold the lock and the variable is full. If clone
        // panics, `l`'s Drop releases the lock with the state unchanged.
        let v = unsafe { self.value.with(|p| (*p).assume_init_ref().clone()) };
        l.unlock_with(FULL);
        v
    }

    /// Returns a copy of the value if full, `None` if empty, without
    /// waiting; the state is unchanged (also when `T::clone` panics).
    pub fn read_xx(&self) -> Option<T>
    where
        T: Clone,
    {
        let l = self.word.lock();
        let full = l.state() & FULL != 0;
        // SAFETY: we hold the lock; the value is initialised when full. If
        // clone panics, `l`'s Drop releases the lock with the state unchanged.
        let v = full.then(|| unsafe { self.value.with(|p| (*p).assume_init_ref().clone()) });
        l.unlock_with(if full { FULL } else { 0 });
        v
    }

    /// Waits until empty, stores `value`, leaves the variable full.
    pub fn write_ef(&self, value: T) {
        if let Some(l) = self.word.try_lock_exact(0) {
            // SAFETY: we hold the lock and the variable is empty.
            unsafe { self.value.with_mut(|p| (*p).write(value)) };
            l.unlock_with(FULL);
            return;
        }
        let l = self.acquire(Want::Empty, BlockKind::SyncWrite);
        // SAFETY: we hold the lock and the variable is empty.
        unsafe { self.value.with_mut(|p| (*p).write(value)) };
        Self::release(l, false, true);
    }

    /// Waits until full, replaces the value, leaves the variable full.
    ///
    /// The old value is dropped after the new one is in place and the
    /// variable is released, so other tasks never wait on its `Drop`; if
    /// that `Drop` panics, the panic reaches the caller with the write done.
    pub fn write_ff(&self, value: T) {
        let l = self.acquire(Want::Full, BlockKind::SyncWrite);
        // SAFETY: we hold the lock and the variable is full: move the old
        // value out and the new one in (no user code runs).
        let old = unsafe {
            self.value
                .with_mut(|p| std::mem::replace((*p).assume_init_mut(), value))
        };
        l.unlock_with(FULL);
        drop(old);
    }

    /// Stores `value` whatever the state, leaves the variable full.
    ///
    /// A value it replaces is dropped after the variable is released; if
    /// that `Drop` panics, the panic reaches the caller with the write done.
    pub fn write_xf(&self, value: T) {
        let l = self.word.lock();
        let was_full = l.state() & FULL != 0;
        // SAFETY: we hold the lock; the old value is initialised (and moved
        // out) only if the variable is full; no user code runs.
        let old = unsafe {
            self.value.with_mut(|p| {
                let old = was_full.then(|| (*p).assume_init_read());
                (*p).write(value);
                old
            })
        };
        Self::release(l, was_full, true);
        drop(old);
    }

    /// Empties the variable, dropping any value (Chapel's `reset`).
    ///
    /// The value is dropped after the variable is released; if its `Drop`
    /// panics, the panic reaches the caller and the variable is empty.
    pub fn reset(&self) {
        let l = self.word.lock();
        let was_full = l.state() & FULL != 0;
        // SAFETY: we hold the lock, and the variable is full (the value
        // initialised) when we take it.
        let old = was_full.then(|| unsafe { self.take_value() });
        Self::release(l, was_full, false);
        drop(old);
    }

    /// Takes the value out if full, without waiting; leaves it empty.
    pub fn try_read_fe(&self) -> Option<T> {
        let l = self.word.lock();
        if l.state() & FULL == 0 {
            l.unlock_with(0);
            return None;
        }
        // SAFETY: we hold the lock and the variable is full.
        let v = unsafe { self.take_value() };
        Self::release(l, true, false);
        Some(v)
    }

    /// Consumes the variable, returning its value if full.
    pub fn into_inner(self) -> Option<T> {
        let me = std::mem::ManuallyDrop::new(self);
        let full = me.word.state.load(Ordering::Acquire) & FULL != 0;
        // SAFETY: we own the variable (no other references); the value is
        // initialised when full, and `me` is never dropped, so it is read
        // exactly once.
        full.then(|| unsafe { me.value.with_mut(|p| (*p).assume_init_read()) })
    }

    /// # Safety
    /// The caller holds the lock and the variable is full.
    unsafe fn take_value(&self) -> T {
        // SAFETY: per the contract the value is initialised and ours to move.
        self.value.with_mut(|p| unsafe { (*p).assume_init_read() })
    }

    /// Locks the word once its FULL bit matches `want`, blocking meanwhile.
    fn acquire(&self, want: Want, kind: BlockKind) -> Locked<'_> {
        let need_full = want != Want::Empty;
        #[cfg(not(loom))]
        if crate::sched::may_spin_before_blocking() {
            for _ in 0..crate::sched::SPIN_BEFORE_BLOCKING {
                // Acquire pairs with the Release that set the bit.
                if (self.word.state.load(Ordering::Acquire) & FULL != 0) == need_full {
                    break;
                }
                std::hint::spin_loop();
            }
        }
        loop {
            let l = self.word.lock();
            if (l.state() & FULL != 0) == need_full {
                return l;
            }
            let waiter = Waiter::current(want);
            // SAFETY: `waiter` stays on this frame, unmoved, until block()
            // returns, which happens only after a waker unlinked it.
            let _ = unsafe { l.push(&waiter) };
            let full = l.state() & FULL;
            l.unlock_with(full);
            waiter.block(kind);
        }
    }

    /// Unlocks with the new state and wakes whoever the change admits.
    fn release(l: Locked<'_>, was_full: bool, now_full: bool) {
        let mut wake = WakeList::new();
        if was_full != now_full {
            l.take(
                if now_full {
                    Wake::BecameFull
                } else {
                    Wake::BecameEmpty
                },
                &mut wake,
            );
        }
        l.unlock_with(if now_full { FULL } else { 0 });
        wake.wake_all();
    }
}

impl<T> Drop for SyncVar<T> {
    fn drop(&mut self) {
        if self.word.state.load(Ordering::Relaxed) & FULL != 0 {
            // SAFETY: &mut self: no other access; the value is initialised.
            self.value.with_mut(|p| unsafe { (*p).assume_init_drop() });
        }
    }
}

impl<T> fmt::Debug for SyncVar<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SyncVar")
            .field("full", &self.is_full())
            .finish()
    }
}
