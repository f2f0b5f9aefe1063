//! The lock bit: bit 0 ([`LOCKED`]) of an `AtomicUsize`, the one spin
//! lock of the full/empty engine. A variable's wait word uses it with its
//! other bits beside it (`word.rs`); the C side table guards each stripe
//! with a [`BitLock`] (a word holding only the bit). Critical sections are
//! a few loads and stores and never block, so a contender spins with
//! backoff (`crate::loom::Backoff`, crossbeam's) instead of sleeping.

use crate::loom::Backoff;
use crate::loom::UnsafeCell;
use crate::loom::sync::atomic::{AtomicUsize, Ordering};

/// Bit 0: held.
pub(crate) const LOCKED: usize = 1;

/// Sets [`LOCKED`] in `word`, spinning with backoff while another holder
/// has it, and returns the word as this call set it (`LOCKED` included).
/// The other bits are left as they are. The holder releases the bit with
/// a `Release` store or RMW.
#[inline]
pub(crate) fn acquire(word: &AtomicUsize) -> usize {
    let backoff = Backoff::new();
    let mut s = word.load(Ordering::Relaxed);
    loop {
        if s & LOCKED == 0 {
            // Acquire pairs with the Release of the previous holder's
            // unlock, so what it wrote under the lock is visible.
            match word.compare_exchange_weak(s, s | LOCKED, Ordering::Acquire, Ordering::Relaxed) {
                Ok(_) => return s | LOCKED,
                // Another bit changed (or a spurious failure): retry soon.
                Err(now) => {
                    s = now;
                    backoff.spin();
                    continue;
                }
            }
        }
        // Held: wait for the holder, yielding the thread once spinning
        // has gone on for a while.
        backoff.snooze();
        s = word.load(Ordering::Relaxed);
    }
}

/// Data guarded by a lock bit: the side table's stripes.
#[cfg(not(loom))]
pub(crate) struct BitLock<T> {
    word: AtomicUsize,
    data: UnsafeCell<T>,
}

// SAFETY: `data` is only reached through `with`, by the holder of the lock
// bit, so access is exclusive; sending the value between threads that way
// needs `T: Send`.
#[cfg(not(loom))]
unsafe impl<T: Send> Sync for BitLock<T> {}

#[cfg(not(loom))]
impl<T> BitLock<T> {
    /// An unlocked lock around `data` (usable in a `static`).
    pub(crate) const fn new(data: T) -> BitLock<T> {
        BitLock {
            word: AtomicUsize::new(0),
            data: UnsafeCell::new(data),
        }
    }

    /// Runs `f` with the lock held; the lock is released when `f`
    /// returns or unwinds.
    pub(crate) fn with<R>(&self, f: impl FnOnce(&mut T) -> R) -> R {
        acquire(&self.word);
        struct Unlock<'a>(&'a AtomicUsize);
        impl Drop for Unlock<'_> {
            fn drop(&mut self) {
                // Release pairs with the Acquire CAS of the next holder
                // (`acquire`).
                self.0.store(0, Ordering::Release);
            }
        }
        let _unlock = Unlock(&self.word);
        // SAFETY: we hold the lock bit, so nobody else touches the data
        // until `_unlock` releases it, after `f` is done with the &mut.
        self.data.with_mut(|p| f(unsafe { &mut *p }))
    }
}
