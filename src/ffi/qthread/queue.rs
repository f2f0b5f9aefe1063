//! `qthread_queue_*`: queues that tasks join to wait until another task
//! releases them (one, or all). cantus keeps one kind of queue for every
//! flag: a FIFO of waiters under a mutex, each waiter a word of the one
//! full/empty engine, emptied, on which the joiner waits for full (a
//! task suspends, an outside thread blocks as a thread), so a waiting
//! join shows in the deadlock report like any read of a variable.
//!
//! A joiner enters the queue in the same critical section of its word's
//! lock that queues its wait, and then blocks at once (no spinning
//! first): as in Qthreads, where the scheduler enqueues a task after it
//! stopped running, a task counted in `qthread_queue_length` is one that
//! waits, not one still running (`qthread_readstate`'s busyness leaves
//! it out but for the instant between the two).

use super::{qt, qt_op};
use crate::ffi::error::{self, Fail};
use crate::ffi::feb::full_empty::{self, Op};
use crate::ffi::feb::table::WordSite;
use crate::ffi::lifecycle::require_runtime;
use crate::sync::wait::BlockKind;
use std::collections::VecDeque;
use std::ffi::{c_int, c_void};
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex};

/// `QTHREAD_QUEUE_NO_SYNCH`: Qthreads' unsynchronized queue (cantus's is
/// always synchronized).
const NO_SYNCH: u8 = 1 << 0;
/// `QTHREAD_QUEUE_MULTI_JOIN`.
const MULTI_JOIN: u8 = 1 << 1;
/// `QTHREAD_QUEUE_MULTI_JOIN_LENGTH`.
const MULTI_JOIN_LENGTH: u8 = 1 << 2;
/// `QTHREAD_QUEUE_CAPPED`: at most `length` waiters.
const CAPPED: u8 = 1 << 3;

/// A queue of waiting tasks (`qthread_queue_t` points at one).
pub struct Queue {
    /// The waiters' words (empty while they wait; released by filling).
    waiters: Mutex<VecDeque<Arc<AtomicU64>>>,
    /// `QTHREAD_QUEUE_CAPPED`'s limit on waiters.
    cap: Option<usize>,
}

impl Queue {
    fn waiters(&self) -> std::sync::MutexGuard<'_, VecDeque<Arc<AtomicU64>>> {
        // A panic never happens under this lock (pushes and pops only), so
        // a poisoned lock still holds a consistent queue.
        self.waiters.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// The queue behind a handle, or `QTHREAD_BADARGS` for NULL.
///
/// # Safety
/// `q` is NULL or a handle from `qthread_queue_create` not yet destroyed.
unsafe fn queue<'a>(call: &str, q: *mut c_void) -> Result<&'a Queue, Fail> {
    // SAFETY: per the contract, a non-null handle is a live Queue.
    unsafe { q.cast::<Queue>().as_ref() }.ok_or_else(|| Fail::null(call, "q"))
}

/// qthread_queue_create: a new, empty queue. `flags`: any of Qthreads'
/// `QTHREAD_QUEUE_*` (every kind is synchronized on cantus, and counts
/// its waiters); `QTHREAD_QUEUE_CAPPED` admits at most `length` waiters.
/// NULL for unknown flags or a cap of 0 (with `cantus_last_error`).
#[unsafe(no_mangle)]
pub extern "C" fn qthread_queue_create(flags: u8, length: u64) -> *mut c_void {
    let call = "qthread_queue_create";
    let mut out = std::ptr::null_mut();
    // As qt_barrier_create: the handle is written on success, else NULL
    // (the reason in cantus_last_error).
    let _: crate::ffi::Code = error::boundary(call, || {
        if flags & !(NO_SYNCH | MULTI_JOIN | MULTI_JOIN_LENGTH | CAPPED) != 0 {
            return Err(Fail::new(
                error::EINVAL,
                format!("{call}: unknown flags {flags:#x} (QTHREAD_QUEUE_* only)"),
            ));
        }
        let cap = if flags & CAPPED != 0 {
            if length == 0 {
                return Err(Fail::new(
                    error::EINVAL,
                    format!("{call}: QTHREAD_QUEUE_CAPPED with length 0 admits no waiter"),
                ));
            }
            Some(usize::try_from(length).unwrap_or(usize::MAX))
        } else {
            None
        };
        let q = Box::new(Queue {
            waiters: Mutex::new(VecDeque::new()),
            cap,
        });
        out = Box::into_raw(q).cast();
        Ok(error::OK)
    });
    out
}

/// qthread_queue_join: waits in `q` until a release lets the caller go
/// (waiters leave in the order they joined).
///
/// # Safety
/// `q` is NULL or a live queue handle.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn qthread_queue_join(q: *mut c_void) -> c_int {
    let call = "qthread_queue_join";
    qt_op(call, || {
        require_runtime(call)?;
        // SAFETY: per the contract.
        let q = unsafe { queue(call, q)? };
        let me = Arc::new(AtomicU64::new(0));
        let site = WordSite(&me);
        full_empty::set(&site, false, None);
        let mut full = None;
        // Joins the queue under the word's lock, in the critical section
        // that queues the wait (lock order: the word's, then the queue's;
        // a release takes them one after the other, never nested).
        // Counted blocked before it is seen in the queue: a task that
        // reads the queue's length and then the busyness never finds a
        // joiner in both (Qthreads queues a joiner only once it has left
        // its worker).
        crate::sched::count_blocked_early(BlockKind::SyncRead, || {
            full_empty::wait_if(&site, Op::ReadFF, |_, _| {
                let mut w = q.waiters();
                if q.cap.is_some_and(|cap| w.len() >= cap) {
                    full = Some(w.len());
                    return false;
                }
                w.push_back(me.clone());
                true
            })
        });
        if let Some(n) = full {
            // Full again (the default): the word leaves the side table
            // before its memory goes.
            full_empty::set(&site, true, None);
            return Ok(Err(format!(
                "{call}: the capped queue holds its {n} waiters already"
            )));
        }
        Ok(Ok(()))
    })
}

/// qthread_queue_length: how many wait in `q` now (every kind counts).
///
/// # Safety
/// `q` is NULL or a live queue handle.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn qthread_queue_length(q: *mut c_void) -> u64 {
    error::guarded(0, || {
        // SAFETY: per the contract.
        match unsafe { queue("qthread_queue_length", q) } {
            Ok(q) => q.waiters().len() as u64,
            Err(f) => {
                error::record(f);
                0
            }
        }
    })
}

/// Releases up to `n` waiters of `q`, oldest first; how many it released.
fn release(q: &Queue, n: usize) -> usize {
    let woken: Vec<_> = {
        let mut w = q.waiters();
        let k = n.min(w.len());
        w.drain(..k).collect()
    };
    for w in &woken {
        // Each waiter is filled once, by the release that popped it.
        full_empty::set(&WordSite(w), true, None);
    }
    woken.len()
}

/// qthread_queue_release_one: lets the oldest waiter of `q` go.
/// `QTHREAD_OPFAIL` if none waits (Qthreads leaves that undefined).
///
/// # Safety
/// `q` is NULL or a live queue handle.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn qthread_queue_release_one(q: *mut c_void) -> c_int {
    let call = "qthread_queue_release_one";
    qt_op(call, || {
        // SAFETY: per the contract.
        let q = unsafe { queue(call, q)? };
        if release(q, 1) == 0 {
            return Ok(Err(format!("{call}: no task waits in the queue")));
        }
        Ok(Ok(()))
    })
}

/// qthread_queue_release_all: lets every waiter of `q` go (none is fine).
///
/// # Safety
/// `q` is NULL or a live queue handle.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn qthread_queue_release_all(q: *mut c_void) -> c_int {
    let call = "qthread_queue_release_all";
    qt(call, || {
        // SAFETY: per the contract.
        let q = unsafe { queue(call, q)? };
        release(q, usize::MAX);
        Ok(())
    })
}

/// qthread_queue_destroy: frees `q`. Refused (`QTHREAD_NOT_ALLOWED`, the
/// queue kept) while tasks wait in it: they would never be released.
///
/// # Safety
/// `q` is NULL or a live queue handle; no call uses it after this one
/// succeeds.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn qthread_queue_destroy(q: *mut c_void) -> c_int {
    let call = "qthread_queue_destroy";
    qt(call, || {
        // SAFETY: per the contract.
        let queue = unsafe { queue(call, q)? };
        let waiting = queue.waiters().len();
        if waiting > 0 {
            return Err(Fail::new(
                error::ECONTEXT,
                format!("{call}: {waiting} task(s) still wait in the queue; release them first"),
            ));
        }
        // SAFETY: made by Box::into_raw in qthread_queue_create; the
        // caller uses the handle no more.
        drop(unsafe { Box::from_raw(q.cast::<Queue>()) });
        Ok(())
    })
}
