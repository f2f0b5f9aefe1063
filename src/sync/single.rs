//! `SingleVar<T>`: a write-once variable (Chapel's `single`).

use super::wait::{BlockKind, Waiter, WakeList, Want};
use super::word::{ONE, WaitWord, Wake};
use crate::error::{Error, ErrorKind};
use crate::loom::UnsafeCell;
use crate::loom::sync::atomic::Ordering;
use std::fmt;
use std::mem::MaybeUninit;

const FULL: usize = ONE;

/// Empty until written once; then every read returns the value at once:
/// Chapel's `single` variable.
/// Reads before the write block (only the calling task).
// repr(C), word first: the variable's address is its wait word's, which
// deadlock reports print.
#[repr(C)]
pub struct SingleVar<T> {
    word: WaitWord,
    value: UnsafeCell<MaybeUninit<T>>,
}

// SAFETY: the value is written once under the lock bit, then only read
// through shared references; sending or sharing it needs T: Send + Sync.
unsafe impl<T: Send> Send for SingleVar<T> {}
// SAFETY: as above; readers get &T, so T: Sync is required too.
unsafe impl<T: Send + core::marker::Sync> core::marker::Sync for SingleVar<T> {}

// A panic never leaves the variable's lock held or its queue half-linked,
// so it stays usable: no user code runs while the lock is held (the value
// is moved in, never cloned or dropped under it), and were anything under it
// to unwind, the lock guard (`Locked`'s Drop) would release the lock.
impl<T> std::panic::RefUnwindSafe for SingleVar<T> {}
impl<T> std::panic::UnwindSafe for SingleVar<T> {}

impl<T> Default for SingleVar<T> {
    fn default() -> Self {
        SingleVar::new()
    }
}

impl<T> SingleVar<T> {
    /// An empty variable.
    pub fn new() -> SingleVar<T> {
        SingleVar {
            word: WaitWord::new(0),
            value: UnsafeCell::new(MaybeUninit::uninit()),
        }
    }

    /// Whether the value has been written.
    pub fn is_full(&self) -> bool {
        // Acquire pairs with the Release in unlock_with in `try_write`.
        self.word.state.load(Ordering::Acquire) & FULL != 0
    }

    /// Writes the value; a second write is an error and gives the value back.
    pub fn try_write(&self, value: T) -> Result<(), (T, Error)> {
        let l = self.word.lock();
        if l.state() & FULL != 0 {
            l.unlock_with(FULL);
            return Err((
                value,
                Error::new(
                    ErrorKind::AlreadyWritten,
                    "cantus::SingleVar written twice: a SingleVar takes one write \
                     (try_write hands a second value back instead of panicking)",
                ),
            ));
        }
        // SAFETY: we hold the lock and the variable was never written.
        unsafe { self.value.with_mut(|p| (*p).write(value)) };
        let mut wake = WakeList::new();
        l.take(Wake::BecameFull, &mut wake);
        l.unlock_with(FULL);
        wake.wake_all();
        Ok(())
    }

    /// Writes the value (`writeEF`). Panics if it was already written; the
    /// panic names the caller's line. [`try_write`](Self::try_write) hands
    /// the value back instead.
    #[track_caller]
    pub fn write(&self, value: T) {
        if let Err((_, e)) = self.try_write(value) {
            panic!("{e}");
        }
    }

    /// Waits until written (`readFF`), then returns the value.
    pub fn read(&self) -> &T {
        while !self.is_full() {
            let l = self.word.lock();
            if l.state() & FULL != 0 {
                l.unlock_with(FULL);
                break;
            }
            let waiter = Waiter::current(Want::Full);
            // SAFETY: `waiter` stays on this frame until woken.
            let _ = unsafe { l.push(&waiter) };
            l.unlock_with(0);
            waiter.block(BlockKind::SingleRead);
        }
        // SAFETY: FULL was observed with Acquire after the write's Release;
        // the value is never written or dropped again while &self lives.
        unsafe { &*self.value.with(|p| (*p).as_ptr()) }
    }

    /// The value if written, without waiting.
    pub fn try_read(&self) -> Option<&T> {
        // SAFETY: as in `read`.
        self.is_full()
            .then(|| unsafe { &*self.value.with(|p| (*p).as_ptr()) })
    }
}

impl<T> Drop for SingleVar<T> {
    fn drop(&mut self) {
        if self.word.state.load(Ordering::Relaxed) & FULL != 0 {
            // SAFETY: &mut self: no other access; the value is initialised.
            self.value.with_mut(|p| unsafe { (*p).assume_init_drop() });
        }
    }
}

impl<T: fmt::Debug> fmt::Debug for SingleVar<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SingleVar")
            .field("value", &self.try_read())
            .finish()
    }
}
