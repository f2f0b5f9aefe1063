//! The C calls' view of the full/empty engine (`crate::sync::full_empty`):
//! every C location holds a 64-bit value whatever its state (a word's
//! bits are always there), so besides the engine's operations the C calls
//! change the state without moving a value (`cantus_feb_fill`/`empty`) or
//! store one whatever the state (`write_xf`, `reset`). The locations are
//! in `table.rs` (caller words, `syncvar_t`, keyed states) and `var.rs`
//! (`cantus_sync_t`); the protocol is in `src/sync/README.md`.

use super::table::WordSite;
use crate::sync::full_empty::{self as core, Place, Site, unwrap_done};
use crate::sync::wait::BlockKind;
use crate::sync::wait_queue;
pub(crate) use crate::sync::wait_queue::WakeList;
use std::sync::atomic::AtomicU64;

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
    /// The engine's operation, with `value` for writes.
    fn with(self, value: u64) -> wait_queue::Op<u64> {
        match self {
            Op::ReadFE => wait_queue::Op::ReadFE,
            Op::ReadFF => wait_queue::Op::ReadFF(|v| *v),
            Op::WriteEF => wait_queue::Op::WriteEF(value),
            Op::WriteFF => wait_queue::Op::WriteFF(value),
        }
    }

    fn block_kind(self) -> BlockKind {
        match self {
            Op::ReadFE | Op::ReadFF => BlockKind::SyncRead,
            Op::WriteEF | Op::WriteFF => BlockKind::SyncWrite,
        }
    }

    fn what(self) -> &'static str {
        match self {
            Op::ReadFE => "a full/empty readFE",
            Op::ReadFF => "a full/empty readFF",
            Op::WriteEF => "a full/empty writeEF",
            Op::WriteFF => "a full/empty writeFF",
        }
    }
}

/// Performs `op` on the location, blocking the calling task (or outside
/// thread) until the state allows it; returns the value read (0 for
/// writes).
pub(crate) fn perform(site: &impl Site<Value = u64>, op: Op, value: u64) -> u64 {
    let done = core::perform(site, op.with(value), op.block_kind(), op.what());
    match (op, unwrap_done(done)) {
        (Op::ReadFE | Op::ReadFF, Some(v)) => v,
        _ => 0,
    }
}

/// [`perform`] on a caller-owned word: a readFF of a word whose fast
/// slot says it is full reads it without the table (`table.rs`).
pub(crate) fn perform_word(w: &AtomicU64, op: Op, value: u64) -> u64 {
    if op == Op::ReadFF {
        if let Some(v) = super::table::fast_read_full(w) {
            return v;
        }
        // A thread that is no worker's (Qthreads' main, blocking as a
        // thread) watches the word's slot a while first: a fork's result
        // is usually a few hundred nanoseconds away, and blocking costs an
        // entry in the table, a place in its queue and a wake-up. A task
        // suspends at once instead (its worker has other work, perhaps
        // the very task it waits for).
        // The thread that hosts a worker (Qthreads' main) runs that
        // worker's ready tasks first, the forked one among them: its
        // result is then usually there without a waiter.
        if let Some(local) = crate::sched::worker::host::hosted() {
            crate::sched::worker::host::help(local, is_full_fast, w.as_ptr().addr());
            if let Some(v) = super::table::fast_read_full(w) {
                return v;
            }
        } else if crate::sched::WorkerLocal::current().is_none() {
            let backoff = crossbeam_utils::Backoff::new();
            while !backoff.is_completed() {
                backoff.snooze();
                if let Some(v) = super::table::fast_read_full(w) {
                    return v;
                }
            }
        }
    }
    perform(&WordSite(w), op, value)
}

/// Whether the word at `addr` reads full by its fast slot (`help`'s
/// test, between two tasks).
fn is_full_fast(addr: usize) -> bool {
    // SAFETY: `addr` is the caller's word of `perform_word`, live and
    // 8-aligned for the length of its `help` call.
    let w = unsafe { &*(addr as *const AtomicU64) };
    super::table::fast_read_full(w).is_some()
}

/// [`set`] on a caller-owned word: emptying a word whose slot is free,
/// and filling one the slot holds empty (nobody waits on either), take
/// the fast slots alone (`table.rs`).
pub(crate) fn set_word(w: &AtomicU64, full: bool, value: Option<u64>) {
    let fast = match (full, value) {
        (false, None) => super::table::try_fast_empty(w),
        (true, v) => super::table::try_fast_fill(w, v),
        (false, Some(_)) => false,
    };
    if !fast {
        set(&WordSite(w), full, value);
    }
}

/// Sets the state (and, with `value`, the value) without waiting, then
/// completes whatever the change admits: fill, empty, writeXF, reset.
pub(crate) fn set(site: &impl Site<Value = u64>, full: bool, value: Option<u64>) {
    core::with_place(site, |p, wake| set_locked(p, full, value, wake));
}

/// [`set`] for a caller that holds the lock (inside [`with_place`] or
/// [`wait_if`]): what the change completes goes to `wake`.
pub(crate) fn set_locked<P: Place<Value = u64> + ?Sized>(
    p: &mut P,
    full: bool,
    value: Option<u64>,
    wake: &mut WakeList<u64>,
) {
    if let Some(v) = value {
        p.put(v);
    }
    core::change_state(p, full, wake);
}

/// Runs `f` with the location's lock held; `f` changes the state only
/// through [`set_locked`] (which keeps the engine's invariant). What it
/// completed is woken after the lock is released. `f` must not block.
pub(crate) fn with_place<S: Site<Value = u64>, R>(
    site: &S,
    f: impl FnOnce(&mut dyn Place<Value = u64>, &mut WakeList<u64>) -> R,
) -> R {
    core::with_place(site, f)
}

/// Runs `f` as [`with_place`] does; if it returns true, the caller's `op`
/// is queued in the same critical section and the caller blocks until a
/// state change completes it (see `crate::sync::full_empty::wait_if`).
/// Returns whether the caller waited.
pub(crate) fn wait_if<S: Site<Value = u64>>(
    site: &S,
    op: Op,
    f: impl FnOnce(&mut dyn Place<Value = u64>, &mut WakeList<u64>) -> bool,
) -> bool {
    core::wait_if(site, op.with(0), op.block_kind(), op.what(), f).is_some()
}

/// Reads the value whatever the state (readXX).
pub(crate) fn read_any(site: &impl Site<Value = u64>) -> u64 {
    // SAFETY: a C location always holds its value; taking reads it and
    // leaves it there.
    site.locked(|p| unsafe { p.take() })
}

/// The state right now.
pub(crate) fn is_full(site: &impl Site<Value = u64>) -> bool {
    site.locked(|p| p.is_full())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sync::wait_queue::Queue;
    use std::cell::RefCell;

    /// A location for single-threaded tests of the hand-off rules.
    struct Cell1 {
        full: bool,
        value: u64,
        queue: Queue<u64>,
    }

    struct TestSite(RefCell<Cell1>);

    impl Place for Cell1 {
        type Value = u64;
        fn is_full(&self) -> bool {
            self.full
        }
        fn set_full(&mut self, full: bool) {
            self.full = full;
        }
        unsafe fn take(&mut self) -> u64 {
            self.value
        }
        fn put(&mut self, value: u64) {
            self.value = value;
        }
        fn queue(&mut self) -> &mut Queue<u64> {
            &mut self.queue
        }
    }

    impl Site for TestSite {
        type Value = u64;
        fn locked<R>(&self, f: impl FnOnce(&mut dyn Place<Value = u64>) -> R) -> R {
            f(&mut *self.0.borrow_mut())
        }
        fn addr(&self) -> usize {
            0
        }
    }

    fn site(full: bool, value: u64) -> TestSite {
        TestSite(RefCell::new(Cell1 {
            full,
            value,
            queue: Queue::EMPTY,
        }))
    }

    #[test]
    fn a_fill_completes_waiters_in_queue_order_with_direct_hand_off() {
        let site = site(false, 0);
        // Empty: readers and full-writers queue, in this order.
        let ops = [Op::ReadFF, Op::WriteFF, Op::ReadFF, Op::ReadFE, Op::ReadFF];
        let mut slots: Vec<Option<wait_queue::Node<u64>>> = (0..ops.len()).map(|_| None).collect();
        for (op, slot) in ops.iter().zip(slots.iter_mut()) {
            // SAFETY: the slots outlive the test's use of the queue; every
            // node is completed by `set` or checked still queued below.
            site.locked(|p| unsafe { core::enqueue(p, slot, op.with(5), 0, "test") });
        }
        // Filling with 1: the first reads 1, the writeFF writes 5 (and gets
        // 1 back), the next reads 5, the readFE takes 5 and empties, which
        // leaves the last readFF queued.
        let mut wake = WakeList::new();
        site.locked(|p| set_locked(p, true, Some(1), &mut wake));
        // The nodes were completed under the "lock": read their results
        // without blocking.
        let result = |i: usize| slots[i].as_ref().unwrap().peek_done();
        assert_eq!(result(0), Some(Some(1)));
        assert_eq!(result(1), Some(Some(1)));
        assert_eq!(result(2), Some(Some(5)));
        assert_eq!(result(3), Some(Some(5)));
        assert_eq!(result(4), None, "still waits: the readFE emptied it");
        let mut cell = site.0.borrow_mut();
        assert!(!cell.full);
        assert_eq!(
            cell.queue.pop_front(),
            slots[4].as_ref().unwrap() as *const _
        );
        assert!(cell.queue.is_empty());
    }

    #[test]
    fn immediate_operations_follow_the_state() {
        let site = site(true, 3);
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
