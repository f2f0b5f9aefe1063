//! The wait word: one `AtomicUsize` holding a lock bit, a has-waiters bit
//! and the variable's own state bits, plus a FIFO queue of [`Waiter`]s that
//! only the lock holder touches. Full/empty variables and end counts are
//! both built on it. The protocol is written down in `README.md` beside
//! this file.

use super::wait::{Waiter, WakeList, Want};
use crate::loom::UnsafeCell;
use crate::loom::sync::atomic::{AtomicUsize, Ordering};
use std::ptr;

/// Bit 0: the queue (and, for `SyncVar`, the value) is locked.
pub(crate) const LOCKED: usize = 1;
/// Bit 1: the queue is non-empty.
pub(crate) const WAITERS: usize = 2;
/// The lowest bit the variable itself may use; state above it is the
/// variable's (the FULL bit, or the count of an end count).
pub(crate) const ONE: usize = 4;

struct Queue {
    head: *const Waiter,
    tail: *const Waiter,
}

pub(crate) struct WaitWord {
    pub(crate) state: AtomicUsize,
    queue: UnsafeCell<Queue>,
}

// SAFETY: the queue is only accessed by the holder of the LOCKED bit, which
// is acquired with Acquire and released with Release (mutual exclusion).
unsafe impl Send for WaitWord {}
// SAFETY: as above.
unsafe impl Sync for WaitWord {}

/// How a state change picks whom to wake.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Wake {
    /// Became full: wake `Full` waiters from the front, up to and including
    /// the first `FullConsume` waiter (it will empty the variable again).
    BecameFull,
    /// Became empty: wake the first `Empty` waiter.
    BecameEmpty,
    /// Wake everyone (an end count reached zero).
    All,
}

impl WaitWord {
    pub(crate) fn new(user: usize) -> WaitWord {
        WaitWord {
            state: AtomicUsize::new(user),
            queue: UnsafeCell::new(Queue {
                head: ptr::null(),
                tail: ptr::null(),
            }),
        }
    }

    /// Acquires the lock bit only if the word is exactly `expected` (no
    /// waiters, unlocked): the one-CAS fast path.
    #[inline]
    pub(crate) fn try_lock_exact(&self, expected: usize) -> Option<Locked<'_>> {
        debug_assert_eq!(expected & (LOCKED | WAITERS), 0);
        // Acquire pairs with the Release in unlock, so the previous holder's
        // writes to the value are visible.
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

    /// Spins until the lock bit is ours. Critical sections are a handful of
    /// instructions, so contention is brief.
    #[inline]
    pub(crate) fn lock(&self) -> Locked<'_> {
        #[cfg(not(loom))]
        let mut spins = 0u32;
        loop {
            let s = self.state.load(Ordering::Relaxed);
            if s & LOCKED == 0
                && self
                    .state
                    // Acquire pairs with the Release in unlock.
                    .compare_exchange_weak(s, s | LOCKED, Ordering::Acquire, Ordering::Relaxed)
                    .is_ok()
            {
                return Locked { word: self };
            }
            #[cfg(loom)]
            crate::loom::thread::yield_now();
            #[cfg(not(loom))]
            {
                spins += 1;
            }
            #[cfg(not(loom))]
            if spins < 64 {
                crate::loom::hint::spin_loop();
            } else {
                std::thread::yield_now();
            }
        }
    }
}

/// Proof that the lock bit is held. The holder releases it explicitly with
/// [`unlock_with`](Locked::unlock_with) or [`unlock`](Locked::unlock),
/// which consume the guard; if the holder unwinds instead (a user `Clone`
/// panicking in `SyncVar::read_ff`), dropping the guard releases the lock
/// (see the `Drop` impl).
#[must_use = "the lock bit stays held until the guard is unlocked or dropped"]
pub(crate) struct Locked<'a> {
    word: &'a WaitWord,
}

/// Runs only when a holder unwinds with the lock held: `unlock_with` and
/// `unlock` forget the guard. Clears LOCKED and leaves every other bit as
/// it is:
///
/// - The variable bits are the ones the holder found when it locked:
///   `SyncVar`/`SingleVar` change them only in `unlock_with`, and an end
///   count's count changes without the lock anyway. So the variable is left
///   in the state it had before the operation, and its value still
///   matches it: holders move a value in or out only right before that
///   `unlock_with`, with nothing that can panic in between, and drop
///   replaced values only after it.
/// - WAITERS is kept in step with the queue by every queue operation, none
///   of which runs user code, so it is right at any point a panic can come
///   from.
/// - Nobody needs waking: the state did not change, and a state is woken
///   for when it is entered (`SyncVar::release`), so every waiter the
///   unchanged state admits was woken then, or sits behind the
///   `FullConsume` waiter woken then, which will empty the variable again.
impl Drop for Locked<'_> {
    fn drop(&mut self) {
        // Release pairs with the Acquire of the next lock holder.
        self.word.state.fetch_and(!LOCKED, Ordering::Release);
    }
}

impl Locked<'_> {
    /// The word's current value (LOCKED is set).
    #[inline]
    pub(crate) fn state(&self) -> usize {
        self.word.state.load(Ordering::Relaxed)
    }

    /// Appends `w` to the queue and sets WAITERS; returns the word as the
    /// setting read it (for end counts, whose count may have changed since
    /// the lock was taken: see `EndCount::wait_blocking`).
    ///
    /// # Safety
    /// `w` must stay live and unmoved until it is woken.
    pub(crate) unsafe fn push(&self, w: *const Waiter) -> usize {
        self.word.queue.with_mut(|q| {
            // SAFETY: we hold the lock, so the queue is ours; nodes in it are
            // live by the contract of `push`.
            unsafe {
                let q = &mut *q;
                (*w).next.set(ptr::null());
                (*w).set_addr(self.word as *const WaitWord as usize);
                if q.tail.is_null() {
                    q.head = w;
                } else {
                    (*q.tail).next.set(w);
                }
                q.tail = w;
            }
        });
        // Relaxed: the lock orders the queue; the count side is ordered by
        // this RMW's place in the word's modification order.
        self.word.state.fetch_or(WAITERS, Ordering::Relaxed)
    }

    /// Unlinks `w` again (a waiter that found it need not wait after all).
    pub(crate) fn remove(&self, w: *const Waiter) {
        self.unlink_where(|cur| (cur == w, cur == w), |_| {});
    }

    /// Unlinks the waiters `how` selects into `out`; keeps WAITERS in step.
    pub(crate) fn take(&self, how: Wake, out: &mut WakeList) {
        self.unlink_where(
            // SAFETY: `unlink_where` passes live nodes of the queue.
            |cur| match (how, unsafe { (*cur).want }) {
                (Wake::All, _) => (true, false),
                (Wake::BecameFull, Want::Full) => (true, false),
                (Wake::BecameFull, Want::FullConsume) => (true, true),
                (Wake::BecameEmpty, Want::Empty) => (true, true),
                _ => (false, false),
            },
            // SAFETY: the node was just unlinked under the lock, and its
            // waiter is blocked until woken.
            |cur| unsafe { out.push(cur) },
        );
    }

    /// Walks the queue from the front; `pick(node)` says whether to unlink
    /// the node and whether to stop after it. Unlinked nodes go to
    /// `unlinked`. Clears WAITERS if the queue ends up empty.
    fn unlink_where(
        &self,
        mut pick: impl FnMut(*const Waiter) -> (bool, bool),
        mut unlinked: impl FnMut(*const Waiter),
    ) {
        let now_empty = self.word.queue.with_mut(|q| {
            // SAFETY: we hold the lock, so the queue is ours; every node in
            // it is live (contract of `push`).
            unsafe {
                let q = &mut *q;
                let mut prev: *const Waiter = ptr::null();
                let mut cur = q.head;
                while !cur.is_null() {
                    let next = (*cur).next.get();
                    let (take, stop) = pick(cur);
                    if take {
                        if prev.is_null() {
                            q.head = next;
                        } else {
                            (*prev).next.set(next);
                        }
                        if q.tail == cur {
                            q.tail = prev;
                        }
                        unlinked(cur);
                    } else {
                        prev = cur;
                    }
                    if stop {
                        break;
                    }
                    cur = next;
                }
                q.head.is_null()
            }
        });
        if now_empty {
            self.word.state.fetch_and(!WAITERS, Ordering::Relaxed);
        }
    }

    /// Releases the lock, setting the variable's bits to `user` (the
    /// WAITERS bit is kept). For words whose variable bits change only
    /// under the lock (`SyncVar`, `SingleVar`).
    #[inline]
    pub(crate) fn unlock_with(self, user: usize) {
        let waiters = self.state() & WAITERS;
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
