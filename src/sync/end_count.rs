//! End counts: a count of unfinished tasks with wait-for-zero (Chapel's
//! end count; the latch of a join). The count lives in the wait word above
//! its two low bits, so finishing a task is one `fetch_sub`.

use super::wait::BlockKind;
use super::wait_queue::{Node, Op, Panic, WakeList};
use super::word::{LOCKED, ONE, WAITERS, WaitWord};
use crate::loom::Backoff;
use crate::loom::sync::atomic::Ordering;
use std::sync::atomic::AtomicPtr;

/// Counts outstanding tasks; waiters block until it reaches zero.
///
/// Lifetime rule (why `wait` returns only when the word is exactly 0): the
/// finisher that brings the count to zero with waiters queued still has to
/// lock the word to wake them. A waiter may free the end count only once
/// the word reads 0 (count zero, unlocked, no waiters), which the finisher
/// makes true with its final access, its unlock.
pub(crate) struct EndCount {
    word: WaitWord<()>,
    panic: AtomicPtr<Panic>,
}

impl EndCount {
    pub(crate) fn new(count: usize) -> EndCount {
        EndCount {
            word: WaitWord::new(count * ONE),
            panic: AtomicPtr::new(std::ptr::null_mut()),
        }
    }

    /// Adds `n` outstanding tasks (before they are published).
    #[inline]
    pub(crate) fn add(&self, n: usize) {
        self.word.state.fetch_add(n * ONE, Ordering::Relaxed);
    }

    /// Outstanding tasks right now.
    pub(crate) fn count(&self) -> usize {
        self.word.state.load(Ordering::Relaxed) / ONE
    }

    /// Whether every task has finished and no finisher is still touching
    /// the word (see the lifetime rule above).
    #[inline]
    pub(crate) fn is_done(&self) -> bool {
        // Acquire pairs with the AcqRel fetch_sub in `done_one` (and the
        // Release unlock), so the finished tasks' effects are visible.
        self.word.state.load(Ordering::Acquire) == 0
    }

    /// Marks one task finished. The caller must not touch `self` after
    /// this call: a waiter may free it as soon as the count is zero.
    #[inline]
    pub(crate) fn done_one(&self) {
        // AcqRel: Release publishes the task's effects to the waiter that
        // observes zero; Acquire orders the WAITERS check below.
        let prev = self.word.state.fetch_sub(ONE, Ordering::AcqRel);
        debug_assert!(prev >= ONE, "end count underflow");
        if prev / ONE == 1 && prev & WAITERS != 0 {
            let mut l = self.word.lock();
            let mut wake = WakeList::new();
            l.queue().drain_into(&mut wake);
            l.sync_waiters();
            l.unlock();
            // `self` may be freed from here on; wake_all touches only nodes.
            wake.wake_all();
        }
    }

    /// Records a task's panic; the first one is kept for the waiter.
    pub(crate) fn record_panic(&self, payload: Panic) {
        let boxed = Box::into_raw(Box::new(payload));
        if self
            .panic
            // AcqRel pairs with the Acquire swap in take_panic.
            .compare_exchange(
                std::ptr::null_mut(),
                boxed,
                Ordering::AcqRel,
                Ordering::Relaxed,
            )
            .is_err()
        {
            // SAFETY: `boxed` came from Box::into_raw above and was not stored.
            drop(unsafe { Box::from_raw(boxed) });
        }
    }

    /// The first recorded panic, if any (call after the count hit zero).
    pub(crate) fn take_panic(&self) -> Option<Panic> {
        // Acquire pairs with the AcqRel exchange in record_panic.
        let p = self.panic.swap(std::ptr::null_mut(), Ordering::Acquire);
        // SAFETY: non-null pointers in `panic` come from Box::into_raw and
        // are taken out exactly once by this swap.
        (!p.is_null()).then(|| *unsafe { Box::from_raw(p) })
    }

    /// Blocks the calling task or thread until [`is_done`](Self::is_done).
    pub(crate) fn wait_blocking(&self, kind: BlockKind) {
        let backoff = Backoff::new();
        loop {
            let s = self.word.state.load(Ordering::Acquire);
            if s == 0 {
                return;
            }
            if s / ONE == 0 {
                // A finisher is waking waiters right now: it is a few
                // instructions from unlocking.
                debug_assert!(s & (LOCKED | WAITERS) != 0);
                backoff.snooze();
                continue;
            }
            let node = Node::new(Op::Await, self.word.addr(), "waiting for tasks");
            let mut l = self.word.lock();
            if l.state() / ONE == 0 {
                l.unlock();
                continue;
            }
            // SAFETY: `node` stays on this frame, unmoved, until it is
            // woken or removed below.
            let seen = unsafe { l.push(&node) };
            if seen / ONE == 0 {
                // The count reached zero between our check and setting
                // WAITERS: its last finisher did not see WAITERS and will
                // not wake us. (Setting WAITERS is an RMW, so it is ordered
                // against every finisher's fetch_sub: a later one sees it.)
                l.queue().remove(&node);
                l.sync_waiters();
                l.unlock();
                continue;
            }
            l.unlock();
            node.block_until_woken(kind);
        }
    }
}

impl Drop for EndCount {
    fn drop(&mut self) {
        // &mut self: no atomic needed to take a leftover panic.
        let p = *self.panic.get_mut();
        if !p.is_null() {
            // SAFETY: as in take_panic; we own the end count.
            drop(unsafe { Box::from_raw(p) });
        }
    }
}
