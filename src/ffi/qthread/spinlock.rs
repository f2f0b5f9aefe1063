//! `qthread_spinlock_t` (`qthread/qthread.h`): a lock the caller embeds,
//! plain or recursive, with Qthreads' layout (so `QTHREAD_MUTEX_INITIALIZER`
//! and `QTHREAD_RECURSIVE_MUTEX_INITIALIZER` work) and return codes.
//!
//! The first word is the lock: 0 free, otherwise held (a compare-exchange
//! takes it). `state.s` is `QTHREAD_SPINLOCK_IS_NOT_RECURSIVE` (-2) for a
//! plain lock; for a recursive one `QTHREAD_SPINLOCK_IS_RECURSIVE` (-1)
//! while free and the holder's key while held, with `state.count` its
//! depth. The holder is the calling task (an outside thread: the thread),
//! where Qthreads takes the worker, so two tasks of one worker never share
//! a recursive lock. A waiter spins a little, then yields (its worker runs
//! other tasks meanwhile, among them perhaps the holder). Needs no runtime.

use super::{QTHREAD_OPFAIL, QTHREAD_SUCCESS, qt};
use crate::ffi::error::Fail;
use std::ffi::c_int;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};

/// `qthread_spinlock_t`, in Qthreads' layout.
#[repr(C)]
pub struct QthreadSpinlock {
    /// `lock.u`: 0 free, 1 held.
    lock: u64,
    /// `state.s`: the kind, or the holder of a recursive lock.
    s: i64,
    /// `state.count`: the holder's depth (recursive locks).
    count: i64,
}

/// `QTHREAD_SPINLOCK_IS_RECURSIVE`: a free recursive lock.
const RECURSIVE_FREE: i64 = -1;
/// `QTHREAD_SPINLOCK_IS_NOT_RECURSIVE`: a plain lock.
const NOT_RECURSIVE: i64 = -2;
/// Spins before a waiter yields.
const SPINS: u32 = 64;

/// The caller as a recursive lock's holder: never negative, so never one
/// of the kinds above (a task's id; an outside thread's key with bit 62
/// set, which task ids never reach).
fn holder() -> i64 {
    let k = super::locks::owner_key();
    let low = (k & ((1 << 62) - 1)) as i64;
    if k >> 63 == 1 { low | 1 << 62 } else { low }
}

/// The three words of `*a`, shared with other threads.
///
/// # Safety
/// `a` is non-null, aligned and valid while the returned references live.
unsafe fn words<'a>(a: *mut QthreadSpinlock) -> (&'a AtomicU64, &'a AtomicI64, &'a AtomicI64) {
    // SAFETY: per the contract; every access to the lock's words goes
    // through these atomics.
    unsafe {
        (
            AtomicU64::from_ptr(&raw mut (*a).lock),
            AtomicI64::from_ptr(&raw mut (*a).s),
            AtomicI64::from_ptr(&raw mut (*a).count),
        )
    }
}

/// Takes the lock word if it is free.
fn try_take(lock: &AtomicU64) -> bool {
    lock.load(Ordering::Relaxed) == 0
        && lock
            .compare_exchange(0, 1, Ordering::Acquire, Ordering::Relaxed)
            .is_ok()
}

/// Waits for the lock word and takes it.
fn take(lock: &AtomicU64) {
    let mut spins = 0;
    while !try_take(lock) {
        if spins < SPINS {
            spins += 1;
            std::hint::spin_loop();
        } else {
            // A task yields to its worker's other tasks (the holder may be
            // one), a hosting thread runs its worker's, another thread
            // yields its CPU.
            crate::task::yield_now();
        }
    }
}

/// qthread_spinlock_init: makes `*a` a free lock, recursive or not.
///
/// # Safety
/// See qthread.h.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn qthread_spinlock_init(
    a: *mut QthreadSpinlock,
    is_recursive: bool,
) -> c_int {
    qt("qthread_spinlock_init", || {
        if a.is_null() {
            return Err(Fail::null("qthread_spinlock_init", "a"));
        }
        let kind = if is_recursive {
            RECURSIVE_FREE
        } else {
            NOT_RECURSIVE
        };
        // SAFETY: non-null; the caller promises a writable lock no one
        // else uses during the call.
        unsafe {
            a.write(QthreadSpinlock {
                lock: 0,
                s: kind,
                count: 0,
            })
        };
        Ok(())
    })
}

/// qthread_spinlock_destroy: nothing to release (as in Qthreads).
///
/// # Safety
/// See qthread.h.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn qthread_spinlock_destroy(_a: *mut QthreadSpinlock) -> c_int {
    QTHREAD_SUCCESS
}

/// qthread_spinlock_lock: waits for the lock and takes it (a recursive
/// lock's holder only counts one more); `QTHREAD_OPFAIL` for NULL.
///
/// # Safety
/// See qthread.h.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn qthread_spinlock_lock(a: *mut QthreadSpinlock) -> c_int {
    if a.is_null() {
        return QTHREAD_OPFAIL;
    }
    // SAFETY: non-null; the caller promises an initialised lock.
    let (lock, s, count) = unsafe { words(a) };
    if s.load(Ordering::Relaxed) == NOT_RECURSIVE {
        take(lock);
        return QTHREAD_SUCCESS;
    }
    let me = holder();
    // Only this caller can have stored its own key, so a match means it
    // holds the lock.
    if s.load(Ordering::Relaxed) != me {
        take(lock);
        s.store(me, Ordering::Relaxed);
    }
    count.fetch_add(1, Ordering::Relaxed);
    QTHREAD_SUCCESS
}

/// qthread_spinlock_trylock: takes the lock if that needs no wait. As in
/// Qthreads, a plain lock answers 1 if taken and 0 if not; a recursive
/// one `QTHREAD_SUCCESS` or `QTHREAD_OPFAIL`. `QTHREAD_OPFAIL` for NULL.
///
/// # Safety
/// See qthread.h.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn qthread_spinlock_trylock(a: *mut QthreadSpinlock) -> c_int {
    if a.is_null() {
        return QTHREAD_OPFAIL;
    }
    // SAFETY: non-null; the caller promises an initialised lock.
    let (lock, s, count) = unsafe { words(a) };
    if s.load(Ordering::Relaxed) == NOT_RECURSIVE {
        return c_int::from(try_take(lock));
    }
    let me = holder();
    if s.load(Ordering::Relaxed) != me {
        if !try_take(lock) {
            return QTHREAD_OPFAIL;
        }
        s.store(me, Ordering::Relaxed);
    }
    count.fetch_add(1, Ordering::Relaxed);
    QTHREAD_SUCCESS
}

/// qthread_spinlock_unlock: releases the lock (a recursive lock's holder
/// counts one down and releases at 0). `QTHREAD_OPFAIL` for NULL, for a
/// plain lock that is not held, and for a recursive lock held by another.
///
/// # Safety
/// See qthread.h.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn qthread_spinlock_unlock(a: *mut QthreadSpinlock) -> c_int {
    if a.is_null() {
        return QTHREAD_OPFAIL;
    }
    // SAFETY: non-null; the caller promises an initialised lock.
    let (lock, s, count) = unsafe { words(a) };
    let kind = s.load(Ordering::Relaxed);
    if kind == NOT_RECURSIVE {
        return if lock.swap(0, Ordering::Release) == 1 {
            QTHREAD_SUCCESS
        } else {
            QTHREAD_OPFAIL
        };
    }
    if kind != holder() {
        // Held by another (Qthreads' OPFAIL), or free (nothing to do).
        return if count.load(Ordering::Relaxed) != 0 {
            QTHREAD_OPFAIL
        } else {
            QTHREAD_SUCCESS
        };
    }
    if count.fetch_sub(1, Ordering::Relaxed) == 1 {
        s.store(RECURSIVE_FREE, Ordering::Relaxed);
        lock.store(0, Ordering::Release);
    }
    QTHREAD_SUCCESS
}
