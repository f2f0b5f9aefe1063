//! The full/empty engine shared by every kind of FEB location the C ABI
//! offers: words in the side table (`table.rs`), Qthreads `syncvar_t`
//! (state in the word, waiters in the table) and `cantus_sync_t` (state
//! and waiters in the variable). A location is a `Place` reached under
//! its lock through a `Site`; the protocol is in `../README.md`.
//!
//! Blocked operations are completed by the party that changes the state
//! (direct hand-off, as Qthreads' FEB queues do): a writer that fills a
//! word performs the queued readers' reads itself, then wakes them, so a
//! woken waiter never retries and no one can barge in between.

use crate::sync::wait::{BlockKind, Waiter, WakeList, Want};
use std::cell::Cell;
use std::ptr;

/// A full/empty operation that may have to wait.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Op {
    /// Wait for full, read, leave empty.
    ReadFE,
    /// Wait for full, read, leave full.
    ReadFF,
    /// Wait for empty, write, leave full.
    WriteEF,
    /// Wait for full, write, leave full.
    WriteFF,
}

impl Op {
    fn waits_for_full(self) -> bool {
        self != Op::WriteEF
    }

    fn block_kind(self) -> BlockKind {
        match self {
            Op::ReadFE | Op::ReadFF => BlockKind::SyncRead,
            Op::WriteEF | Op::WriteFF => BlockKind::SyncWrite,
        }
    }
}

/// A blocked operation. Lives on the blocked party's stack (a task's
/// stack stays alive while it is suspended) from `enqueue` until its
/// waker has completed it and woken `node`.
pub(crate) struct Pending {
    node: Waiter,
    op: Op,
    /// In: the value to write. Out: the value read. Written by the waker
    /// under the location's lock, read by the owner after it was woken.
    value: Cell<u64>,
    next: Cell<*const Pending>,
}

impl Pending {
    fn new(op: Op, value: u64) -> Pending {
        Pending {
            node: Waiter::current(Want::Full),
            op,
            value: Cell::new(value),
            next: Cell::new(ptr::null()),
        }
    }
}

/// A FIFO of [`Pending`] nodes, linked through their `next`.
#[repr(C)]
struct Fifo {
    head: *const Pending,
    tail: *const Pending,
}

impl Fifo {
    const EMPTY: Fifo = Fifo {
        head: ptr::null(),
        tail: ptr::null(),
    };

    /// # Safety
    /// `p` is live and stays so, unmoved, until popped.
    unsafe fn push_back(&mut self, p: *const Pending) {
        // SAFETY: `p` is live by the contract; the tail, if any, is a live
        // node of this queue.
        unsafe {
            (*p).next.set(ptr::null());
            if self.tail.is_null() {
                self.head = p;
            } else {
                (*self.tail).next.set(p);
            }
        }
        self.tail = p;
    }

    /// The front node, unlinked; null if empty.
    fn pop_front(&mut self) -> *const Pending {
        let p = self.head;
        if !p.is_null() {
            // SAFETY: nodes in the queue are live (push_back's contract).
            self.head = unsafe { (*p).next.get() };
            if self.head.is_null() {
                self.tail = ptr::null();
            }
        }
        p
    }
}

/// The two wait queues of a location: operations waiting for it to be
/// full (readFE, readFF, writeFF) and for it to be empty (writeEF).
#[repr(C)]
pub(crate) struct Queues {
    full: Fifo,
    empty: Fifo,
}

// SAFETY: the raw pointers are only followed by the holder of the owning
// location's lock, and point at nodes whose owners are blocked.
unsafe impl Send for Queues {}

impl Queues {
    pub(crate) const EMPTY: Queues = Queues {
        full: Fifo::EMPTY,
        empty: Fifo::EMPTY,
    };

    pub(crate) fn is_empty(&self) -> bool {
        self.full.head.is_null() && self.empty.head.is_null()
    }
}

/// A full/empty location, seen with its lock held.
pub(crate) trait Place {
    fn is_full(&self) -> bool;
    fn set_full(&mut self, full: bool);
    fn load(&self) -> u64;
    fn store(&mut self, value: u64);
    fn queues(&mut self) -> &mut Queues;
}

/// How to reach a location's [`Place`] with its lock held.
pub(crate) trait Site {
    /// Runs `f` with the lock held. `f` must not block or call user code.
    fn locked<R>(&self, f: impl FnOnce(&mut dyn Place) -> R) -> R;

    /// The address deadlock reports show for a party waiting here.
    fn addr(&self) -> usize {
        0
    }
}

/// Restores the invariant "full implies no one waits for full, empty
/// implies no one waits for empty" after a state change, completing the
/// queued operations that the change admits, in queue order, into `wake`.
/// Each round completes one node, so it ends.
fn settle(p: &mut dyn Place, wake: &mut WakeList) {
    loop {
        let full = p.is_full();
        let q = p.queues();
        let w = if full {
            q.full.pop_front()
        } else {
            q.empty.pop_front()
        };
        if w.is_null() {
            return;
        }
        // SAFETY: popped under the lock, so `w` is live and ours to
        // complete; its owner is blocked until we wake it below.
        let w = unsafe { &*w };
        match w.op {
            Op::ReadFF => w.value.set(p.load()),
            Op::WriteFF => p.store(w.value.get()),
            Op::ReadFE => {
                w.value.set(p.load());
                p.set_full(false);
            }
            Op::WriteEF => {
                p.store(w.value.get());
                p.set_full(true);
            }
        }
        // SAFETY: `w.node` is live, blocked (or about to block), and was
        // unlinked by us under the lock.
        unsafe { wake.push(&w.node) };
    }
}

/// Performs `op` now if the state allows it (then settles).
fn attempt(p: &mut dyn Place, op: Op, value: u64, wake: &mut WakeList) -> Option<u64> {
    let full = p.is_full();
    match op {
        Op::ReadFF if full => Some(p.load()),
        Op::WriteFF if full => {
            p.store(value);
            Some(0)
        }
        Op::ReadFE if full => {
            let v = p.load();
            p.set_full(false);
            settle(p, wake);
            Some(v)
        }
        Op::WriteEF if !full => {
            p.store(value);
            p.set_full(true);
            settle(p, wake);
            Some(0)
        }
        _ => None,
    }
}

/// Queues `w` on the queue its operation waits in.
///
/// # Safety
/// `w` stays live and unmoved until a waker has completed and woken it.
unsafe fn enqueue(p: &mut dyn Place, w: &Pending) {
    let q = p.queues();
    let fifo = if w.op.waits_for_full() {
        &mut q.full
    } else {
        &mut q.empty
    };
    // SAFETY: per the contract.
    unsafe { fifo.push_back(w) };
}

/// Performs `op` on the location, blocking the calling task (or outside
/// thread) until the state allows it; returns the value read (0 for
/// writes).
pub(crate) fn perform(site: &impl Site, op: Op, value: u64) -> u64 {
    let mut wake = WakeList::new();
    if let Some(v) = site.locked(|p| attempt(p, op, value, &mut wake)) {
        wake.wake_all();
        return v;
    }
    let pending = Pending::new(op, value);
    pending.node.set_addr(site.addr());
    let done = site.locked(|p| {
        let r = attempt(p, op, value, &mut wake);
        if r.is_none() {
            // SAFETY: `pending` stays on this frame, unmoved, until
            // `block` returns, which is after its waker completed and
            // unlinked it (settle).
            unsafe { enqueue(p, &pending) };
        }
        r
    });
    match done {
        Some(v) => {
            wake.wake_all();
            v
        }
        None => {
            pending.node.block(op.block_kind());
            pending.value.get()
        }
    }
}

/// Sets the state (and, with `value`, the value) without waiting, then
/// completes whatever the change admits: fill, empty, writeXF, reset.
pub(crate) fn set(site: &impl Site, full: bool, value: Option<u64>) {
    with_place(site, |p, wake| set_locked(p, full, value, wake));
}

/// [`set`] for a caller that holds the lock (inside [`with_place`] or
/// [`wait_if`]): what the change completes goes to `wake`.
pub(crate) fn set_locked(p: &mut dyn Place, full: bool, value: Option<u64>, wake: &mut WakeList) {
    if let Some(v) = value {
        p.store(v);
    }
    p.set_full(full);
    settle(p, wake);
}

/// Runs `f` with the location's lock held; `f` changes the state only
/// through [`set_locked`] (which keeps invariant I). What it completed is
/// woken after the lock is released. `f` must not block or call user code.
pub(crate) fn with_place<R>(
    site: &impl Site,
    f: impl FnOnce(&mut dyn Place, &mut WakeList) -> R,
) -> R {
    let mut wake = WakeList::new();
    let r = site.locked(|p| f(p, &mut wake));
    wake.wake_all();
    r
}

/// Runs `f` as [`with_place`] does; if it returns true, the caller's `op`
/// is queued in the same critical section and the caller blocks until a
/// state change completes it. `f` must return true only when the state
/// does not admit `op` (so invariant I holds). Returns whether the caller
/// waited. The building block of barriers: the last arrival changes the
/// state, everyone else waits for it.
pub(crate) fn wait_if(
    site: &impl Site,
    op: Op,
    f: impl FnOnce(&mut dyn Place, &mut WakeList) -> bool,
) -> bool {
    let pending = Pending::new(op, 0);
    pending.node.set_addr(site.addr());
    let mut wake = WakeList::new();
    let queued = site.locked(|p| {
        if !f(p, &mut wake) {
            return false;
        }
        debug_assert!(
            p.is_full() != op.waits_for_full(),
            "wait_if: the state admits {op:?}"
        );
        // SAFETY: `pending` stays on this frame, unmoved, until `block`
        // returns, which is after its waker completed and unlinked it.
        unsafe { enqueue(p, &pending) };
        true
    });
    wake.wake_all();
    if queued {
        pending.node.block(op.block_kind());
    }
    queued
}

/// Reads the value whatever the state (readXX).
pub(crate) fn read_any(site: &impl Site) -> u64 {
    site.locked(|p| p.load())
}

/// The state right now.
pub(crate) fn is_full(site: &impl Site) -> bool {
    site.locked(|p| p.is_full())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::RefCell;

    /// A location for single-threaded tests of the hand-off rules.
    struct Cell1 {
        full: bool,
        value: u64,
        queues: Queues,
    }

    struct TestSite(RefCell<Cell1>);

    impl Place for Cell1 {
        fn is_full(&self) -> bool {
            self.full
        }
        fn set_full(&mut self, full: bool) {
            self.full = full;
        }
        fn load(&self) -> u64 {
            self.value
        }
        fn store(&mut self, value: u64) {
            self.value = value;
        }
        fn queues(&mut self) -> &mut Queues {
            &mut self.queues
        }
    }

    impl Site for TestSite {
        fn locked<R>(&self, f: impl FnOnce(&mut dyn Place) -> R) -> R {
            f(&mut *self.0.borrow_mut())
        }
    }

    #[test]
    fn a_fill_completes_waiters_in_queue_order_with_direct_hand_off() {
        let site = TestSite(RefCell::new(Cell1 {
            full: false,
            value: 0,
            queues: Queues::EMPTY,
        }));
        let a = Pending::new(Op::ReadFF, 0);
        let b = Pending::new(Op::WriteFF, 5);
        let c = Pending::new(Op::ReadFE, 0);
        let d = Pending::new(Op::ReadFF, 0);
        let e = Pending::new(Op::WriteEF, 9);
        let f = Pending::new(Op::WriteEF, 10);
        for w in [&a, &b, &c, &d, &e, &f] {
            // SAFETY: the nodes outlive the test's last use of the queues
            // (each is completed by `set` or checked still queued below).
            site.locked(|p| unsafe { enqueue(p, w) });
        }
        // Filling with 1: a reads 1, b writes 5, c reads 5 and empties,
        // which admits e (writes 9, fills), which admits d (reads 9).
        set(&site, true, Some(1));
        assert_eq!(a.value.get(), 1);
        assert_eq!(c.value.get(), 5);
        assert_eq!(d.value.get(), 9);
        let mut cell = site.0.borrow_mut();
        assert!(cell.full);
        assert_eq!(cell.value, 9);
        // f still waits for empty; nobody waits for full.
        assert!(cell.queues.full.head.is_null());
        assert_eq!(cell.queues.empty.head, &f as *const Pending);
        assert_eq!(cell.queues.empty.pop_front(), &f as *const Pending);
        assert!(cell.queues.is_empty());
    }

    #[test]
    fn immediate_operations_follow_the_state() {
        let site = TestSite(RefCell::new(Cell1 {
            full: true,
            value: 3,
            queues: Queues::EMPTY,
        }));
        assert_eq!(perform(&site, Op::ReadFF, 0), 3);
        assert_eq!(perform(&site, Op::WriteFF, 4), 0);
        assert_eq!(perform(&site, Op::ReadFE, 0), 4);
        assert!(!is_full(&site));
        assert_eq!(read_any(&site), 4);
        assert_eq!(perform(&site, Op::WriteEF, 7), 0);
        assert!(is_full(&site));
        set(&site, false, Some(0));
        assert!(!is_full(&site));
        assert_eq!(read_any(&site), 0);
    }
}
