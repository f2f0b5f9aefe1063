//! `cantus_sync_t`: cantus's own full/empty variable for C. Like the Rust
//! [`SyncVar`](crate::SyncVar), its state and its wait queues live in the
//! variable itself; no table is involved. All-zero bytes are a valid,
//! empty variable (`CANTUS_SYNC_INITIALIZER`).

use super::engine::{self, Op, Place, Queues, Site};
use std::cell::UnsafeCell;
use std::sync::atomic::{AtomicU64, Ordering};

/// State bit: the lock.
const LOCKED: u64 = 1;
/// State bit: full.
const FULL: u64 = 2;
/// State bit: somebody waits.
const WAITERS: u64 = 4;

/// The layout behind the header's opaque `cantus_sync_t`.
#[repr(C)]
pub struct CantusSync {
    state: AtomicU64,
    value: AtomicU64,
    queues: UnsafeCell<Queues>,
}

/// Size of `cantus_sync_t` in the header.
pub(crate) const SIZE: usize = 48;
const _: () = assert!(std::mem::size_of::<CantusSync>() == SIZE);
const _: () = assert!(std::mem::align_of::<CantusSync>() == 8);

// SAFETY: `queues` is only touched by the holder of the LOCKED bit
// (acquired with Acquire, released with Release).
unsafe impl Sync for CantusSync {}

struct VarPlace<'a> {
    var: &'a CantusSync,
    full: bool,
}

impl Place for VarPlace<'_> {
    fn is_full(&self) -> bool {
        self.full
    }
    fn set_full(&mut self, full: bool) {
        self.full = full;
    }
    fn load(&self) -> u64 {
        // Relaxed: ordered by the lock bit.
        self.var.value.load(Ordering::Relaxed)
    }
    fn store(&mut self, value: u64) {
        // Relaxed: ordered by the lock bit.
        self.var.value.store(value, Ordering::Relaxed)
    }
    fn queues(&mut self) -> &mut Queues {
        // SAFETY: the caller of `locked` holds the lock bit, so the queues
        // are ours; the &mut is tied to this place's borrow.
        unsafe { &mut *self.var.queues.get() }
    }
}

impl Site for CantusSync {
    fn addr(&self) -> usize {
        self as *const CantusSync as usize
    }

    fn locked<R>(&self, f: impl FnOnce(&mut dyn Place) -> R) -> R {
        let mut spins = 0u32;
        let mut s = self.state.load(Ordering::Relaxed);
        loop {
            if s & LOCKED == 0 {
                // Acquire pairs with the Release store of the previous holder.
                match self.state.compare_exchange_weak(
                    s,
                    s | LOCKED,
                    Ordering::Acquire,
                    Ordering::Relaxed,
                ) {
                    Ok(_) => break,
                    Err(now) => {
                        s = now;
                        continue;
                    }
                }
            }
            spins += 1;
            if spins < 64 {
                std::hint::spin_loop();
            } else {
                std::thread::yield_now();
            }
            s = self.state.load(Ordering::Relaxed);
        }
        let mut p = VarPlace {
            var: self,
            full: s & FULL != 0,
        };
        let r = f(&mut p);
        let full = p.full;
        let waiters = !p.queues().is_empty();
        let new = if full { FULL } else { 0 } | if waiters { WAITERS } else { 0 };
        // Release pairs with the Acquire of the next holder and of
        // lock-free readers (`is_full`).
        self.state.store(new, Ordering::Release);
        r
    }
}

impl CantusSync {
    pub(crate) fn init(&self) {
        self.state.store(0, Ordering::Relaxed);
        self.value.store(0, Ordering::Relaxed);
        // SAFETY: init's contract (header): nobody else uses the variable.
        unsafe { *self.queues.get() = Queues::EMPTY };
    }

    pub(crate) fn is_full(&self) -> bool {
        // Acquire pairs with the Release store in `locked`.
        self.state.load(Ordering::Acquire) & FULL != 0
    }

    pub(crate) fn has_waiters(&self) -> bool {
        self.state.load(Ordering::Acquire) & (WAITERS | LOCKED) != 0
    }

    pub(crate) fn perform(&self, op: Op, value: u64) -> u64 {
        engine::perform(self, op, value)
    }
}
