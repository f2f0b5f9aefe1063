//! `qdqueue_t` (`qthread/qdqueue.h`): Qthreads' distributed queue. It is
//! one FIFO part per shepherd (worker); a task enqueues into its own
//! shepherd's part (or a chosen one, `qdqueue_enqueue_there`) and
//! dequeues from its own part first. When its part is empty it looks
//! where work was *advertised*: a part that grows while it already holds
//! elements (a backlog) advertises itself to its neighbours, once until
//! one of them answers the advertisement; then it steals from the other
//! parts, nearest first. So elements stay where they were produced while
//! their shepherd keeps up, and move only from parts with a backlog.
//!
//! Order: FIFO within a part (a single producer and consumer on one
//! shepherd see Qthreads' FIFO order); across parts there is none (as in
//! Qthreads). Each part is crossbeam's lock-free `SegQueue`; an
//! advertisement is one bit in the neighbour's advertisement set.
//!
//! cantus has no shepherd distances (`qthread_distance` is left out of
//! `qthread.h`), so "near" is shepherd-id order on a ring: a part's
//! neighbours are the parts of the previous and the next shepherd, and
//! stealing tries `me+1, me-1, me+2, me-2, …`. Outside threads (not a
//! task, e.g. `main`) use the part of shepherd 0, as Qthreads' main
//! thread runs on shepherd 0.

use super::{QTHREAD_BADARGS, boundary_ptr, handle, qt};
use crate::ffi::error::{self, Fail};
use crate::ffi::lifecycle::require_runtime;
use crossbeam_queue::SegQueue;
use crossbeam_utils::CachePadded;
use std::ffi::{c_int, c_ushort, c_void};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

/// One shepherd's part of a distributed queue.
struct Part {
    /// The elements, as addresses (never 0: NULL is refused).
    items: SegQueue<usize>,
    /// The parts that advertised a backlog to this one: bit `i % 64` of
    /// word `i / 64` for part `i`.
    ads: Box<[AtomicU64]>,
    /// True while this part's advertisement is out and unanswered: it
    /// advertises again only after a neighbour answered.
    advertising: AtomicBool,
}

/// A distributed queue (`qdqueue_t` points at one).
pub struct QdQueue {
    /// A part per shepherd that ran when the queue was made.
    parts: Box<[CachePadded<Part>]>,
}

impl QdQueue {
    /// The caller's part: its shepherd's, or shepherd 0's outside tasks.
    fn mine(&self) -> usize {
        crate::query::current_worker().map_or(0, |w| w % self.parts.len())
    }

    /// The other parts, nearest first on the ring of shepherd ids.
    fn by_distance(&self, me: usize) -> impl Iterator<Item = usize> {
        let n = self.parts.len();
        (1..n).map(move |k| {
            let step = k.div_ceil(2);
            if k % 2 == 1 {
                (me + step) % n
            } else {
                (me + n - step) % n
            }
        })
    }

    /// Adds `elem` to part `at`; a part that had a backlog advertises it
    /// to its neighbours unless its last advertisement is unanswered.
    fn push(&self, at: usize, elem: usize) {
        let part = &self.parts[at];
        let backlog = !part.items.is_empty();
        part.items.push(elem);
        if backlog && !part.advertising.swap(true, Ordering::AcqRel) {
            for n in self.by_distance(at).take(2) {
                self.parts[n].ads[at / 64].fetch_or(1 << (at % 64), Ordering::Release);
            }
        }
    }

    /// Takes an element for part `me`: its own, then an advertised one,
    /// then any other part's, nearest first; `None` if all were empty.
    fn pop(&self, me: usize) -> Option<usize> {
        let mine = &self.parts[me];
        if let Some(e) = mine.items.pop() {
            return Some(e);
        }
        // Answer the advertisements, nearest first.
        let mut advertised = Vec::new();
        for (w, word) in mine.ads.iter().enumerate() {
            let mut bits = word.swap(0, Ordering::Acquire);
            while bits != 0 {
                advertised.push(w * 64 + bits.trailing_zeros() as usize);
                bits &= bits - 1;
            }
        }
        let readvertise = |p: usize| {
            mine.ads[p / 64].fetch_or(1 << (p % 64), Ordering::Release);
        };
        if !advertised.is_empty() {
            let order: Vec<usize> = self
                .by_distance(me)
                .filter(|p| advertised.contains(p))
                .collect();
            for (i, &p) in order.iter().enumerate() {
                let part = &self.parts[p];
                // Answered: the part may advertise again.
                part.advertising.store(false, Ordering::Release);
                if let Some(e) = part.items.pop() {
                    if !part.items.is_empty() {
                        // Still a backlog: keep its advertisement here.
                        readvertise(p);
                    }
                    // The advertisements not looked at stay.
                    order[i + 1..].iter().for_each(|&q| readvertise(q));
                    return Some(e);
                }
            }
        }
        self.by_distance(me).find_map(|p| self.parts[p].items.pop())
    }
}

/// qdqueue_create: a new, empty queue with a part per shepherd. NULL
/// without a running runtime (the parts are its shepherds').
#[unsafe(no_mangle)]
pub extern "C" fn qdqueue_create() -> *mut QdQueue {
    let call = "qdqueue_create";
    boundary_ptr(call, || {
        require_runtime(call)?;
        let n = crate::query::workers().unwrap_or(1).max(1);
        let parts = (0..n)
            .map(|_| {
                CachePadded::new(Part {
                    items: SegQueue::new(),
                    ads: (0..n.div_ceil(64)).map(|_| AtomicU64::new(0)).collect(),
                    advertising: AtomicBool::new(false),
                })
            })
            .collect();
        Ok(Box::into_raw(Box::new(QdQueue { parts })))
    })
}

/// qdqueue_destroy: frees `q` (elements left in it are the caller's
/// pointers, not freed). `QTHREAD_BADARGS` for NULL.
///
/// # Safety
/// `q` is NULL or a live queue; no call uses it during or after this one.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn qdqueue_destroy(q: *mut QdQueue) -> c_int {
    let call = "qdqueue_destroy";
    qt(call, || {
        // SAFETY: per the contract.
        unsafe { handle(call, q, "q")? };
        // SAFETY: made by Box::into_raw in qdqueue_create; the caller uses
        // the handle no more.
        drop(unsafe { Box::from_raw(q) });
        Ok(())
    })
}

/// qdqueue_enqueue: adds `elem` (non-NULL) to the caller's shepherd's
/// part. `QTHREAD_BADARGS` for a NULL `q` or `elem`.
///
/// # Safety
/// `q` is NULL or a live queue.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn qdqueue_enqueue(q: *mut QdQueue, elem: *mut c_void) -> c_int {
    let call = "qdqueue_enqueue";
    qt(call, || {
        // SAFETY: per the contract.
        let q = unsafe { handle(call, q, "q")? };
        if elem.is_null() {
            return Err(Fail::null(call, "elem"));
        }
        q.push(q.mine(), elem as usize);
        Ok(())
    })
}

/// qdqueue_enqueue_there: adds `elem` (non-NULL) to shepherd `there`'s
/// part. `QTHREAD_BADARGS` for NULL or a shepherd the queue has no part
/// for.
///
/// # Safety
/// `q` is NULL or a live queue.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn qdqueue_enqueue_there(
    q: *mut QdQueue,
    elem: *mut c_void,
    there: c_ushort,
) -> c_int {
    let call = "qdqueue_enqueue_there";
    qt(call, || {
        // SAFETY: per the contract.
        let q = unsafe { handle(call, q, "q")? };
        if elem.is_null() {
            return Err(Fail::null(call, "elem"));
        }
        let at = usize::from(there);
        if at >= q.parts.len() {
            return Err(Fail::new(
                error::EINVAL,
                format!(
                    "{call}: shepherd {there} out of range (the queue has {} parts)",
                    q.parts.len()
                ),
            ));
        }
        q.push(at, elem as usize);
        Ok(())
    })
}

/// qdqueue_dequeue: an element of `q`: from the caller's part, else an
/// advertised or any other part's; NULL if every part is empty (or `q`
/// is NULL, with `cantus_last_error`).
///
/// # Safety
/// `q` is NULL or a live queue.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn qdqueue_dequeue(q: *mut QdQueue) -> *mut c_void {
    let call = "qdqueue_dequeue";
    boundary_ptr(call, || {
        // SAFETY: per the contract.
        let q = unsafe { handle(call, q, "q")? };
        Ok(q.pop(q.mine())
            .map_or(std::ptr::null_mut(), |e| e as *mut c_void))
    })
}

/// qdqueue_empty: 1 if every part of `q` is empty as it looks at them
/// (Qthreads looks only at the caller's part and parts busy with their
/// own work), 0 otherwise; `QTHREAD_BADARGS` for NULL.
///
/// # Safety
/// `q` is NULL or a live queue.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn qdqueue_empty(q: *mut QdQueue) -> c_int {
    error::guarded(QTHREAD_BADARGS, || {
        // SAFETY: per the contract.
        match unsafe { handle("qdqueue_empty", q, "q") } {
            Ok(q) => c_int::from(q.parts.iter().all(|p| p.items.is_empty())),
            Err(f) => {
                error::record(f);
                QTHREAD_BADARGS
            }
        }
    })
}
