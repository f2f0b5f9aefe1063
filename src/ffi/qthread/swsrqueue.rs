//! `qswsrqueue_t` (`qthread/qswsrqueue.h`): Qthreads' bounded FIFO of
//! non-NULL pointers, meant for a single writer and a single reader.
//! Qthreads builds it as a ring of slots with fences that is correct only
//! for one writer and one reader; cantus uses crossbeam's `ArrayQueue`
//! (a bounded lock-free ring for any number of producers and consumers),
//! so the single-writer/single-reader use is a special case and a second
//! writer or reader is not undefined.
//!
//! The queue holds exactly the number of elements asked for (Qthreads
//! rounds it up to a whole number of cache lines of slots, one of which
//! it keeps empty). The blocking calls wait by yielding: a task to its
//! worker's other tasks, an outside thread its CPU. No runtime is needed.

use super::{QTHREAD_BADARGS, QTHREAD_OPFAIL, boundary_ptr, handle, pause, qt};
use crate::ffi::error::{self, Fail};
use crossbeam_queue::ArrayQueue;
use std::ffi::{c_int, c_void};

/// A bounded FIFO of element addresses (`qswsrqueue_t` points at one).
pub struct QswsrQueue {
    /// The elements, as addresses (never 0: NULL is refused).
    items: ArrayQueue<usize>,
}

/// qswsrqueue_create: a new, empty queue for up to `elements` elements.
/// NULL for 0 (a queue that can hold nothing; Qthreads rounds it up).
#[unsafe(no_mangle)]
pub extern "C" fn qswsrqueue_create(elements: usize) -> *mut QswsrQueue {
    let call = "qswsrqueue_create";
    boundary_ptr(call, || {
        if elements == 0 {
            return Err(Fail::new(
                error::EINVAL,
                format!("{call}: a queue of 0 elements could hold nothing"),
            ));
        }
        Ok(Box::into_raw(Box::new(QswsrQueue {
            items: ArrayQueue::new(elements),
        })))
    })
}

/// qswsrqueue_destroy: frees `q` (elements left in it are the caller's
/// pointers, not freed). `QTHREAD_BADARGS` for NULL.
///
/// # Safety
/// `q` is NULL or a live queue; no call uses it during or after this one.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn qswsrqueue_destroy(q: *mut QswsrQueue) -> c_int {
    let call = "qswsrqueue_destroy";
    qt(call, || {
        // SAFETY: per the contract.
        unsafe { handle(call, q, "q")? };
        // SAFETY: made by Box::into_raw in qswsrqueue_create; the caller
        // uses the handle no more.
        drop(unsafe { Box::from_raw(q) });
        Ok(())
    })
}

/// The queue and the element as an address, or `EINVAL` for NULL.
///
/// # Safety
/// `q` is NULL or a live queue.
unsafe fn checked<'a>(
    call: &str,
    q: *mut QswsrQueue,
    elem: *mut c_void,
) -> Result<(&'a QswsrQueue, usize), Fail> {
    // SAFETY: per the contract.
    let q = unsafe { handle(call, q, "q")? };
    if elem.is_null() {
        return Err(Fail::null(call, "elem"));
    }
    Ok((q, elem as usize))
}

/// qswsrqueue_enqueue: appends `elem` (non-NULL) if there is room;
/// `QTHREAD_OPFAIL` if the queue is full (nothing recorded: a full queue
/// is an answer, not an error), `QTHREAD_BADARGS` for NULL.
///
/// # Safety
/// `q` is NULL or a live queue.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn qswsrqueue_enqueue(q: *mut QswsrQueue, elem: *mut c_void) -> c_int {
    let call = "qswsrqueue_enqueue";
    let mut full = false;
    let code = qt(call, || {
        // SAFETY: per the contract.
        let (q, e) = unsafe { checked(call, q, elem)? };
        full = q.items.push(e).is_err();
        Ok(())
    });
    if full { QTHREAD_OPFAIL } else { code }
}

/// qswsrqueue_enqueue_blocking: appends `elem` (non-NULL), waiting
/// (yielding) while the queue is full. `QTHREAD_BADARGS` for NULL.
///
/// # Safety
/// `q` is NULL or a live queue.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn qswsrqueue_enqueue_blocking(
    q: *mut QswsrQueue,
    elem: *mut c_void,
) -> c_int {
    let call = "qswsrqueue_enqueue_blocking";
    qt(call, || {
        // SAFETY: per the contract.
        let (q, mut e) = unsafe { checked(call, q, elem)? };
        while let Err(back) = q.items.push(e) {
            e = back;
            pause();
        }
        Ok(())
    })
}

/// qswsrqueue_dequeue: removes and returns the oldest element, NULL if
/// the queue is empty (or `q` is NULL, with `cantus_last_error`).
///
/// # Safety
/// `q` is NULL or a live queue.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn qswsrqueue_dequeue(q: *mut QswsrQueue) -> *mut c_void {
    let call = "qswsrqueue_dequeue";
    boundary_ptr(call, || {
        // SAFETY: per the contract.
        let q = unsafe { handle(call, q, "q")? };
        Ok(q.items
            .pop()
            .map_or(std::ptr::null_mut(), |e| e as *mut c_void))
    })
}

/// qswsrqueue_dequeue_blocking: removes and returns the oldest element,
/// waiting (yielding) while the queue is empty; NULL only for a NULL `q`.
///
/// # Safety
/// `q` is NULL or a live queue.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn qswsrqueue_dequeue_blocking(q: *mut QswsrQueue) -> *mut c_void {
    let call = "qswsrqueue_dequeue_blocking";
    boundary_ptr(call, || {
        // SAFETY: per the contract.
        let q = unsafe { handle(call, q, "q")? };
        loop {
            if let Some(e) = q.items.pop() {
                return Ok(e as *mut c_void);
            }
            pause();
        }
    })
}

/// qswsrqueue_empty: 1 if `q` holds no element now, 0 if it holds some;
/// `QTHREAD_BADARGS` for NULL.
///
/// # Safety
/// `q` is NULL or a live queue.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn qswsrqueue_empty(q: *mut QswsrQueue) -> c_int {
    error::guarded(QTHREAD_BADARGS, || {
        // SAFETY: per the contract.
        match unsafe { handle("qswsrqueue_empty", q, "q") } {
            Ok(q) => c_int::from(q.items.is_empty()),
            Err(f) => {
                error::record(f);
                QTHREAD_BADARGS
            }
        }
    })
}
