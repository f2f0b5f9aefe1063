//! `SingleVar<T>`: a write-once variable (Chapel's `single`).

use super::full_empty;
use super::var::Var;
use super::wait::BlockKind;
use super::wait_queue::Op;
use crate::error::{Error, ErrorKind};
use std::fmt;

/// Empty until written once; then every read returns the value at once:
/// Chapel's `single` variable.
/// Reads before the write block (only the calling task).
// repr(C), word first (`Var` is too): the variable's address is its wait
// word's, which deadlock reports print.
#[repr(C)]
pub struct SingleVar<T> {
    var: Var<T>,
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
            var: Var::new(None),
        }
    }

    /// Whether the value has been written.
    pub fn is_full(&self) -> bool {
        self.var.is_full()
    }

    /// Writes the value; a second write is an error and gives the value back.
    pub fn try_write(&self, value: T) -> Result<(), (T, Error)> {
        full_empty::with_place(&self.var, |p, wake| {
            if p.is_full() {
                return Err(value);
            }
            p.put(value);
            full_empty::change_state(p, true, wake);
            Ok(())
        })
        .map_err(|value| {
            (
                value,
                Error::new(
                    ErrorKind::AlreadyWritten,
                    "cantus::SingleVar written twice: a SingleVar takes one write \
                     (try_write hands a second value back instead of panicking)",
                ),
            )
        })
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
        if !self.is_full() {
            let done = full_empty::perform(
                &self.var,
                Op::Await,
                BlockKind::SingleRead,
                "reading a SyncVar or SingleVar (readFF)",
            );
            full_empty::unwrap_done(done);
        }
        // SAFETY: full (seen with Acquire, or completed under the lock and
        // woken); a SingleVar's value is never moved out or dropped while
        // `&self` lives.
        unsafe { self.var.value_ref() }
    }

    /// The value if written, without waiting.
    pub fn try_read(&self) -> Option<&T> {
        // SAFETY: as in `read`.
        self.is_full().then(|| unsafe { self.var.value_ref() })
    }
}

impl<T: fmt::Debug> fmt::Debug for SingleVar<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SingleVar")
            .field("value", &self.try_read())
            .finish()
    }
}
