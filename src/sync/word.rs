//! The wait word: one `AtomicUsize` holding the lock bit, a has-waiters
//! bit and the variable's own state bits, plus the variable's queue of
//! blocked operations, which only the lock holder touches. `SyncVar`,
//! `SingleVar`, end counts and the C `cantus_sync_t` are built on it. The
//! protocol is written down in `README.md` beside this file.

use super::lock;
use super::wait_queue::{Node, Queue};
use crate::loom::UnsafeCell;
use crate::loom::sync::atomic::{AtomicUsize, Ordering};

/// Bit 0: the queue (and the variable's value) is locked.
pub(crate) const LOCKED: usize = lock::LOCKED;
/// Bit 1: the queue is non-empty.
pub(crate) const WAITERS: usize = 2;
/// The lowest bit the variable itself may use; state above it is the
/// variable's (the FULL bit, or the count of an end count).
pub(crate) const ONE: usize = 4;

/// A wait word whose queue holds operations on a `V`.
pub(crate) struct WaitWord<V> {
    pub(crate) state: AtomicUsize,
    queue: UnsafeCell<Queue<V>>,
}

// SAFETY: the queue is only accessed by the holder of the LOCKED bit, which
// is acquired with Acquire and released with Release (mutual exclusion).
// Values move between threads through the queue's nodes, so `V: Send`.
unsafe impl<V: Send> Send for WaitWord<V> {}
// SAFETY: as above.
unsafe impl<V: Send> Sync for WaitWord<V> {}

impl<V> WaitWord<V> {
    pub(crate) fn new(user: usize) -> WaitWord<V> {
        WaitWord {
            state: AtomicUsize::new(user),
            queue: UnsafeCell::new(Queue::EMPTY),
        }
    }

    /// The word's address (deadlock reports print it).
    pub(crate) fn addr(&self) -> usize {
        self as *const WaitWord<V> as usize
    }

    /// Acquires the lock bit only if the word is exactly `expected` (no
    /// waiters, unlocked): the one-CAS fast path.
    #[inline]
    pub(crate) fn try_lock_exact(&self, expected: usize) -> Option<Locked<'_, V>> {
        debug_assert_eq!(expected & (LOCKED | WAITERS), 0);
        // Acquire pairs with the Release of the previous holder's unlock,
        // so its writes to the value are visible.
        self.state
            .compare_exchange(
                expected,
                expected | LOCKED,
                Ordering::Acquire,
                Ordering::Relaxed,
            )
            .ok()
            .map(|_| Locked { word: self })
    }

    /// Spins (with backoff) until the lock bit is ours.
    #[inline]
    pub(crate) fn lock(&self) -> Locked<'_, V> {
        lock::acquire(&self.state);
        Locked { word: self }
    }
}

/// Proof that the lock bit is held. The holder releases it explicitly with
/// [`unlock_with`](Locked::unlock_with) or [`unlock`](Locked::unlock),
/// which consume the guard; if the holder unwinds instead (a user `Clone`
/// panicking in `SyncVar::read_xx`, or `Node::new` refusing to block an
/// outside thread forever), dropping the guard releases the lock (see the
/// `Drop` impl).
#[must_use = "the lock bit stays held until the guard is unlocked or dropped"]
pub(crate) struct Locked<'a, V> {
    word: &'a WaitWord<V>,
}

/// Runs only when a holder unwinds with the lock held: `unlock_with` and
/// `unlock` forget the guard. Clears LOCKED and leaves every other bit as
/// it is:
///
/// - The variable bits are the ones the holder found when it locked:
///   `SyncVar`/`SingleVar` change them only in `unlock_with`, and an end
///   count's count changes without the lock anyway. So the variable is left
///   in the state it had before the operation, and its value still
///   matches it: nothing that can unwind runs between a value's move and
///   that `unlock_with` (a readFF's copy runs under `catch_unwind`, and
///   replaced values are dropped after the unlock).
/// - WAITERS is in step with the queue: the only things that can unwind
///   under the lock run before a node is linked or after the queue and
///   WAITERS were made to agree.
/// - Nobody needs waking: the state did not change, and every state
///   change completes what it admits before its unlock (`engine::settle`).
impl<V> Drop for Locked<'_, V> {
    fn drop(&mut self) {
        // Release pairs with the Acquire of the next lock holder.
        self.word.state.fetch_and(!LOCKED, Ordering::Release);
    }
}

impl<V> Locked<'_, V> {
    /// The word's current value (LOCKED is set).
    #[inline]
    pub(crate) fn state(&self) -> usize {
        self.word.state.load(Ordering::Relaxed)
    }

    /// The queue; ours while the guard lives.
    #[inline]
    pub(crate) fn queue(&mut self) -> &mut Queue<V> {
        // SAFETY: we hold the lock bit, so nobody else touches the queue;
        // the &mut borrows the guard, so it ends before the unlock.
        self.word.queue.with_mut(|q| unsafe { &mut *q })
    }

    /// Appends `n` to the queue and sets WAITERS with an RMW; returns the
    /// word as that RMW read it (end counts, whose count may have changed
    /// since the lock was taken: see `EndCount::wait_blocking`).
    ///
    /// # Safety
    /// As for [`Queue::push_back`].
    pub(crate) unsafe fn push(&mut self, n: *const Node<V>) -> usize {
        // SAFETY: forwarded contract.
        unsafe { self.queue().push_back(n) };
        // Relaxed: the lock orders the queue; the count side is ordered by
        // this RMW's place in the word's modification order.
        self.word.state.fetch_or(WAITERS, Ordering::Relaxed)
    }

    /// Clears WAITERS if the queue is empty (after unlinking nodes, for
    /// words whose other bits change without the lock: end counts).
    pub(crate) fn sync_waiters(&mut self) {
        if self.queue().is_empty() {
            self.word.state.fetch_and(!WAITERS, Ordering::Relaxed);
        }
    }

    /// Releases the lock, setting the variable's bits to `user` and
    /// WAITERS to whether the queue is non-empty. For words whose variable
    /// bits change only under the lock (`SyncVar`, `SingleVar`,
    /// `cantus_sync_t`).
    #[inline]
    pub(crate) fn unlock_with(mut self, user: usize) {
        debug_assert_eq!(user & (LOCKED | WAITERS), 0);
        let waiters = if self.queue().is_empty() { 0 } else { WAITERS };
        // Release pairs with the Acquire of the next lock holder and of
        // lock-free readers of the variable's bits (is_full, SingleVar::read).
        self.word.state.store(user | waiters, Ordering::Release);
        // Released: the guard's Drop must not release it again.
        std::mem::forget(self);
    }

    /// Releases the lock, leaving every other bit as it is (end counts,
    /// whose count changes without the lock).
    #[inline]
    pub(crate) fn unlock(self) {
        // Release pairs with the Acquire of the next lock holder.
        self.word.state.fetch_and(!LOCKED, Ordering::Release);
        // Released: the guard's Drop must not release it again.
        std::mem::forget(self);
    }
}
