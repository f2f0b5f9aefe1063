//! Locks declared on an address: `qthread_lock_init(a, recursive)` makes
//! the lock of `a` (the one `qthread_lock`/`unlock`/`trylock` take) a
//! recursive one, or declares it plain; `qthread_lock_destroy(a)` forgets
//! the declaration. As in Qthreads (`src/locks.c`), the declaration lives
//! in a table beside the address, not in the word.
//!
//! The lock itself stays the keyed full/empty state of `feb.rs` (full =
//! unlocked, a FIFO hand-off to waiters that suspend); a recursive lock
//! adds its owner and depth: the owner's further `qthread_lock`s count,
//! its `qthread_unlock`s count down and the last one releases. The owner
//! is the calling *task* (its id; an outside thread by a key of its own),
//! where Qthreads takes the calling worker: two tasks of one worker are
//! two owners here, so a lock never lets a second task in because it
//! happens to run on the holder's worker.
//!
//! An address never declared costs `qthread_lock` one relaxed load (the
//! table is looked up only while it holds something).

use super::qt_op;
use crate::ffi::error::Fail;
use crate::ffi::lifecycle::require_runtime;
use std::collections::HashMap;
use std::ffi::c_int;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

/// A declared lock.
pub(crate) struct Declared {
    recursive: bool,
    /// The holder ([`owner_key`]), 0 when free; written by the holder
    /// only while it holds the lock.
    owner: AtomicU64,
    /// How many times the holder took it.
    depth: AtomicU64,
}

/// Declared addresses, and how many there are (read without the lock).
static DECLARED: Mutex<Option<HashMap<usize, Arc<Declared>>>> = Mutex::new(None);
static COUNT: AtomicUsize = AtomicUsize::new(0);

fn table() -> MutexGuard<'static, Option<HashMap<usize, Arc<Declared>>>> {
    // No panic happens under this lock (map operations only).
    DECLARED.lock().unwrap_or_else(|p| p.into_inner())
}

/// The declaration of address `a`, if it has one.
pub(crate) fn declared(a: usize) -> Option<Arc<Declared>> {
    // Relaxed: a declaration made by another thread before this one
    // locked the address was ordered before it by the program (the
    // declaration must precede the locking, as in Qthreads).
    if COUNT.load(Ordering::Relaxed) == 0 {
        return None;
    }
    table().as_ref()?.get(&a).cloned()
}

/// Who is asking: the running task's id, or, outside tasks, a key of the
/// calling thread (high bit set, so it never equals a task id).
pub(super) fn owner_key() -> u64 {
    thread_local! {
        static KEY: u8 = const { 0 };
    }
    crate::query::current_task_id()
        .or_else(crate::sched::away_task_id)
        .unwrap_or_else(|| KEY.with(|k| k as *const u8 as u64) | 1 << 63)
}

impl Declared {
    /// Whether the caller holds it already (and so only counts, for a
    /// recursive lock): if so, counted.
    pub(crate) fn enter_again(&self) -> bool {
        if self.recursive && self.owner.load(Ordering::Relaxed) == owner_key() {
            self.depth.fetch_add(1, Ordering::Relaxed);
            return true;
        }
        false
    }

    /// The caller took the lock.
    pub(crate) fn entered(&self) {
        if self.recursive {
            self.owner.store(owner_key(), Ordering::Relaxed);
            self.depth.store(1, Ordering::Relaxed);
        }
    }

    /// The caller lets go of it once: `Ok(true)` when that released it,
    /// `Ok(false)` when the holder still holds it (a recursive lock taken
    /// more than once), `Err` when a recursive lock is held by another.
    pub(crate) fn leave(&self) -> Result<bool, String> {
        if !self.recursive {
            return Ok(true);
        }
        let me = owner_key();
        match self.owner.load(Ordering::Relaxed) {
            // Unlocking a free lock succeeds, as for a plain address.
            0 => Ok(true),
            o if o == me => {
                let depth = self.depth.fetch_sub(1, Ordering::Relaxed) - 1;
                if depth == 0 {
                    self.owner.store(0, Ordering::Relaxed);
                }
                Ok(depth == 0)
            }
            _ => Err("the recursive lock is held by another task".into()),
        }
    }
}

/// qthread_lock_init: declares the lock of address `a` recursive (or
/// not). `QTHREAD_OPFAIL` if `a` was declared already. `a` is only a
/// key: never read or written.
#[unsafe(no_mangle)]
pub extern "C" fn qthread_lock_init(a: *const u64, is_recursive: bool) -> c_int {
    let call = "qthread_lock_init";
    qt_op(call, || {
        require_runtime(call)?;
        if a.is_null() {
            return Err(Fail::null(call, "a"));
        }
        let mut t = table();
        let map = t.get_or_insert_with(HashMap::new);
        if map.contains_key(&(a as usize)) {
            return Ok(Err(format!(
                "{call}: the lock of {a:p} was declared already"
            )));
        }
        map.insert(
            a as usize,
            Arc::new(Declared {
                recursive: is_recursive,
                owner: AtomicU64::new(0),
                depth: AtomicU64::new(0),
            }),
        );
        COUNT.fetch_add(1, Ordering::Relaxed);
        Ok(Ok(()))
    })
}

/// qthread_lock_destroy: forgets the declaration of address `a`
/// (`QTHREAD_OPFAIL` if it had none). Its lock is a plain one again.
#[unsafe(no_mangle)]
pub extern "C" fn qthread_lock_destroy(a: *mut u64) -> c_int {
    let call = "qthread_lock_destroy";
    qt_op(call, || {
        if a.is_null() {
            return Err(Fail::null(call, "a"));
        }
        let removed = table()
            .as_mut()
            .and_then(|m| m.remove(&(a as usize)))
            .is_some();
        if !removed {
            return Ok(Err(format!(
                "{call}: the lock of {a:p} was not declared (qthread_lock_init)"
            )));
        }
        COUNT.fetch_sub(1, Ordering::Relaxed);
        Ok(Ok(()))
    })
}
