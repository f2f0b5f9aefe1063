//! `qlfqueue_t` (`qthread/qlfqueue.h`): Qthreads' unbounded FIFO of
//! non-NULL pointers for any number of producers and consumers. Qthreads
//! builds it as a Michael–Scott lock-free list with hazard pointers;
//! cantus uses crossbeam's `SegQueue` (a linked list of slot arrays,
//! lock-free for producers and consumers alike), which gives the same
//! contract: FIFO order per producer, every element dequeued exactly
//! once, `dequeue` never blocks (NULL when empty).
//!
//! The queue needs no runtime: it is a plain data structure, usable from
//! tasks, outside threads, before `qthread_initialize` and after
//! `qthread_finalize`.

use super::{QTHREAD_BADARGS, boundary_ptr, handle, qt};
use crate::ffi::error::{self, Fail};
use crossbeam_queue::SegQueue;
use std::ffi::{c_int, c_void};

/// A lock-free FIFO of element addresses (`qlfqueue_t` points at one).
pub struct QlfQueue {
    /// The elements, as addresses (never 0: NULL is refused).
    items: SegQueue<usize>,
}

/// qlfqueue_create: a new, empty queue (NULL only if memory ran out).
#[unsafe(no_mangle)]
pub extern "C" fn qlfqueue_create() -> *mut QlfQueue {
    boundary_ptr("qlfqueue_create", || {
        Ok(Box::into_raw(Box::new(QlfQueue {
            items: SegQueue::new(),
        })))
    })
}

/// qlfqueue_destroy: frees `q` (elements still in it are dropped: they
/// are the caller's pointers, not freed). `QTHREAD_BADARGS` for NULL.
///
/// # Safety
/// `q` is NULL or a live queue; no call uses it during or after this one.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn qlfqueue_destroy(q: *mut QlfQueue) -> c_int {
    let call = "qlfqueue_destroy";
    qt(call, || {
        // SAFETY: per the contract.
        unsafe { handle(call, q, "q")? };
        // SAFETY: made by Box::into_raw in qlfqueue_create; the caller
        // uses the handle no more.
        drop(unsafe { Box::from_raw(q) });
        Ok(())
    })
}

/// qlfqueue_enqueue: appends `elem` (non-NULL: NULL is what an empty
/// queue's dequeue returns) to `q`. `QTHREAD_BADARGS` for a NULL `q` or
/// `elem`, as Qthreads.
///
/// # Safety
/// `q` is NULL or a live queue.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn qlfqueue_enqueue(q: *mut QlfQueue, elem: *mut c_void) -> c_int {
    let call = "qlfqueue_enqueue";
    qt(call, || {
        // SAFETY: per the contract.
        let q = unsafe { handle(call, q, "q")? };
        if elem.is_null() {
            return Err(Fail::null(call, "elem"));
        }
        q.items.push(elem as usize);
        Ok(())
    })
}

/// qlfqueue_dequeue: removes and returns the oldest element of `q`, NULL
/// if it is empty (or `q` is NULL, with `cantus_last_error`).
///
/// # Safety
/// `q` is NULL or a live queue.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn qlfqueue_dequeue(q: *mut QlfQueue) -> *mut c_void {
    let call = "qlfqueue_dequeue";
    boundary_ptr(call, || {
        // SAFETY: per the contract.
        let q = unsafe { handle(call, q, "q")? };
        Ok(q.items
            .pop()
            .map_or(std::ptr::null_mut(), |e| e as *mut c_void))
    })
}

/// qlfqueue_empty: 1 if `q` holds no element now, 0 if it holds some;
/// `QTHREAD_BADARGS` for NULL (as Qthreads).
///
/// # Safety
/// `q` is NULL or a live queue.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn qlfqueue_empty(q: *mut QlfQueue) -> c_int {
    let call = "qlfqueue_empty";
    error::guarded(QTHREAD_BADARGS, || {
        // SAFETY: per the contract.
        match unsafe { handle(call, q, "q") } {
            Ok(q) => c_int::from(q.items.is_empty()),
            Err(f) => {
                error::record(f);
                QTHREAD_BADARGS
            }
        }
    })
}
