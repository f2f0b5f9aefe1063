//! `SyncVar<T>`: a full/empty synchronization variable (Chapel's `sync`),
//! native to the tasking layer: its full bit lives in its own word and
//! blocked tasks queue on the variable itself (seed 000, section 6). Its
//! operations are the engine's (`full_empty.rs`) on a `Var` (`var.rs`).

use super::full_empty::{self, Place, unwrap_done};
use super::var::{FULL, Var};
use super::wait::BlockKind;
use super::wait_queue::Op;
use std::fmt;

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
/// A variable owns its cache lines (it is aligned to 128 bytes on x86-64
/// and aarch64, 64 elsewhere, so a `SyncVar<u64>` takes 128 bytes): two
/// variables never share a line, wherever they lie, and a hand-off
/// between workers moves only its own (sharing one doubled the hand-off,
/// and whether two variables on a stack shared one changed with unrelated
/// code: `BENCHMARKS.md`).
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
// repr(C), word first (`Var` is too): the variable's address is its wait
// word's, which deadlock reports print.
#[repr(C)]
pub struct SyncVar<T> {
    var: Var<T>,
}

// SAFETY: the value moves between threads through the variable, so T: Send
// is needed and sufficient; all access to it holds the word's lock bit.
unsafe impl<T: Send> Send for SyncVar<T> {}
// SAFETY: shared access only moves values in and out under the lock bit
// (readFF clones under the lock, so T: Send suffices as for a Mutex).
unsafe impl<T: Send> core::marker::Sync for SyncVar<T> {}

// A panic never leaves the variable's lock held, its queue half-linked or
// its value half-moved, so it stays usable: the only user code that runs
// under the lock is `T::clone` in read_ff/read_xx. read_ff's runs under
// `catch_unwind` with the value put back before the panic is resumed in
// the reader (also when a writer runs it to hand a queued reader its
// copy); read_xx's unwinds through the lock guard (`Locked`'s Drop), which
// releases the lock with the state unchanged. Old values replaced by
// write_ff/write_xf/reset are dropped after the lock is released, by the
// caller that replaced them. Values move in and out whole, so no broken
// `T` is left behind.
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
            var: Var::new(None),
        }
    }

    /// A full variable holding `value`.
    pub fn with_value(value: T) -> SyncVar<T> {
        SyncVar {
            var: Var::new(Some(value)),
        }
    }

    /// Whether the variable is full right now (it may change at once).
    pub fn is_full(&self) -> bool {
        self.var.is_full()
    }

    /// The address a task or thread blocked on this variable is listed
    /// at (deadlock reports; `sched::block::WaitPurpose`).
    pub(crate) fn wait_addr(&self) -> usize {
        self.var.word.addr()
    }

    /// Waits until full, takes the value, leaves the variable empty.
    pub fn read_fe(&self) -> T {
        // Fast path: full, unlocked, nobody queued.
        if let Some(l) = self.var.word.try_lock_exact(FULL) {
            let mut p = self.var.place(l);
            // SAFETY: the lock is ours and the variable is full.
            let v = unsafe { p.take() };
            p.set_full(false);
            p.unlock();
            return v;
        }
        let done = full_empty::perform(
            &self.var,
            Op::ReadFE,
            BlockKind::SyncRead,
            "SyncVar::read_fe",
        );
        unwrap_done(done).expect("a readFE yields the value")
    }

    /// Waits until full, returns a copy, leaves the variable full.
    ///
    /// The copy is made under the variable's lock, by this caller or, if it
    /// had to wait, by the writer that fills the variable (direct hand-off).
    /// If `T::clone` panics, the panic reaches this caller and the variable
    /// is left as it was: full, holding the same value.
    pub fn read_ff(&self) -> T
    where
        T: Clone,
    {
        let done = full_empty::perform(
            &self.var,
            Op::ReadFF(T::clone),
            BlockKind::SyncRead,
            "reading a SyncVar or SingleVar (readFF)",
        );
        unwrap_done(done).expect("a readFF yields a copy")
    }

    /// Returns a copy of the value if full, `None` if empty, without
    /// waiting; the state is unchanged (also when `T::clone` panics).
    pub fn read_xx(&self) -> Option<T>
    where
        T: Clone,
    {
        let p = self.var.place(self.var.word.lock());
        // SAFETY: the value is initialised when full. If clone panics, the
        // lock guard in `p` releases the lock with the state unchanged.
        let v = p.is_full().then(|| unsafe { p.with_value(T::clone) });
        p.unlock();
        v
    }

    /// Waits until empty, stores `value`, leaves the variable full.
    pub fn write_ef(&self, value: T) {
        // Fast path: empty, unlocked, nobody queued.
        if let Some(l) = self.var.word.try_lock_exact(0) {
            let mut p = self.var.place(l);
            p.put(value);
            p.set_full(true);
            p.unlock();
            return;
        }
        let done = full_empty::perform(
            &self.var,
            Op::WriteEF(value),
            BlockKind::SyncWrite,
            "SyncVar::write_ef",
        );
        unwrap_done(done);
    }

    /// Waits until full, replaces the value, leaves the variable full.
    ///
    /// The old value is dropped by this caller after the new one is in
    /// place and the variable is released, so other tasks never wait on its
    /// `Drop`; if that `Drop` panics, the panic reaches the caller with the
    /// write done.
    pub fn write_ff(&self, value: T) {
        let done = full_empty::perform(
            &self.var,
            Op::WriteFF(value),
            BlockKind::SyncWrite,
            "SyncVar::write_ff",
        );
        drop(unwrap_done(done));
    }

    /// Stores `value` whatever the state, leaves the variable full.
    ///
    /// A value it replaces is dropped after the variable is released; if
    /// that `Drop` panics, the panic reaches the caller with the write done.
    pub fn write_xf(&self, value: T) {
        let old = full_empty::with_place(&self.var, |p, wake| {
            // SAFETY: the value is initialised (and moved out) only if full.
            let old = p.is_full().then(|| unsafe { p.take() });
            p.put(value);
            full_empty::change_state(p, true, wake);
            old
        });
        drop(old);
    }

    /// Empties the variable, dropping any value (Chapel's `reset`).
    ///
    /// The value is dropped after the variable is released; if its `Drop`
    /// panics, the panic reaches the caller and the variable is empty.
    pub fn reset(&self) {
        drop(self.take_now());
    }

    /// Takes the value out if full, without waiting; leaves it empty.
    pub fn try_read_fe(&self) -> Option<T> {
        self.take_now()
    }

    /// Consumes the variable, returning its value if full.
    pub fn into_inner(self) -> Option<T> {
        self.var.into_inner()
    }

    /// Operations queued on the variable now (for the loom models).
    #[cfg(all(test, loom))]
    pub(crate) fn queued(&self) -> usize {
        use super::full_empty::Site;
        self.var.locked(|p| p.queue().len())
    }

    /// Whether an operation is queued now, without the lock (for the loom
    /// models).
    #[cfg(all(test, loom))]
    pub(crate) fn queued_now(&self) -> bool {
        // Acquire pairs with the Release of the unlock that set WAITERS:
        // the queued node is visible to our next lock holder.
        self.var
            .word
            .state
            .load(crate::loom::sync::atomic::Ordering::Acquire)
            & super::word::WAITERS
            != 0
    }

    /// Empties the variable now, returning the value it held.
    fn take_now(&self) -> Option<T> {
        full_empty::with_place(&self.var, |p, wake| {
            // SAFETY: the value is initialised (and moved out) only if full.
            let old = p.is_full().then(|| unsafe { p.take() });
            full_empty::change_state(p, false, wake);
            old
        })
    }
}

impl<T> fmt::Debug for SyncVar<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SyncVar")
            .field("full", &self.is_full())
            .finish()
    }
}
