//! `cantus_sync_t`: cantus's own full/empty variable for C. Like the Rust
//! [`SyncVar`](crate::SyncVar), its state and its wait queue live in the
//! variable itself, in the same wait word (`crate::sync::word`); no table
//! is involved. All-zero bytes are a valid, empty variable
//! (`CANTUS_SYNC_INITIALIZER`).

use crate::sync::full_empty::{Place, Site};
use crate::sync::wait_queue::Queue;
use crate::sync::word::{LOCKED, Locked, ONE, WAITERS, WaitWord};
use std::sync::atomic::{AtomicU64, Ordering};

/// State bit: full.
const FULL: usize = ONE;

/// The layout behind the header's opaque `cantus_sync_t`: the wait word
/// (state and queue), then the value, which is there whatever the state.
#[repr(C)]
pub struct CantusSync {
    word: WaitWord<u64>,
    value: AtomicU64,
}

/// Size of `cantus_sync_t` in the header (the tail is unused).
pub(crate) const SIZE: usize = 48;
const _: () = assert!(std::mem::size_of::<CantusSync>() <= SIZE);
const _: () = assert!(std::mem::align_of::<CantusSync>() == 8);

/// A [`CantusSync`] with its lock held; the state is stored into the word
/// when the lock is released.
struct SyncPlace<'a> {
    lock: Locked<'a, u64>,
    value: &'a AtomicU64,
    full: bool,
}

impl Place for SyncPlace<'_> {
    type Value = u64;

    fn is_full(&self) -> bool {
        self.full
    }
    fn set_full(&mut self, full: bool) {
        self.full = full;
    }
    fn queue(&mut self) -> &mut Queue<u64> {
        self.lock.queue()
    }
    unsafe fn take(&mut self) -> u64 {
        // Relaxed: ordered by the lock bit.
        self.value.load(Ordering::Relaxed)
    }
    fn put(&mut self, value: u64) {
        // Relaxed: ordered by the lock bit.
        self.value.store(value, Ordering::Relaxed)
    }
}

impl Site for CantusSync {
    type Value = u64;

    fn locked<R>(&self, f: impl FnOnce(&mut dyn Place<Value = u64>) -> R) -> R {
        let lock = self.word.lock();
        let mut p = SyncPlace {
            full: lock.state() & FULL != 0,
            lock,
            value: &self.value,
        };
        let r = f(&mut p);
        // Release (in unlock_with) pairs with the Acquire of the next
        // holder and of lock-free readers (`is_full`).
        p.lock.unlock_with(if p.full { FULL } else { 0 });
        r
    }

    fn addr(&self) -> usize {
        self.word.addr()
    }

    fn peek_full(&self) -> Option<bool> {
        Some(self.is_full())
    }
}

impl CantusSync {
    /// An empty variable holding 0 (what all-zero bytes are too).
    pub(crate) fn new() -> CantusSync {
        CantusSync {
            word: WaitWord::new(0),
            value: AtomicU64::new(0),
        }
    }

    pub(crate) fn is_full(&self) -> bool {
        // Acquire pairs with the Release store of the last holder's unlock
        // (`Locked::unlock_with` in `locked`).
        self.word.state.load(Ordering::Acquire) & FULL != 0
    }

    pub(crate) fn has_waiters(&self) -> bool {
        self.word.state.load(Ordering::Acquire) & (WAITERS | LOCKED) != 0
    }
}
