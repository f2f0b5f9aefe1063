//! Qthreads full/empty bits: on any aligned `aligned_t` (state in the side
//! table, full by default) and on `syncvar_t` (state in the word's low
//! bits, waiters in the table). Same names and semantics as Qthreads:
//! `dest` of a read may be NULL (the value is dropped), a read into its
//! own source writes nothing.

use super::{locks, qt, qt_op};
use crate::ffi::error::Fail;
use crate::ffi::feb::full_empty::{self, Op};
use crate::ffi::feb::table::{KeySite, SyncvarSite, WordSite, syncvar};
use crate::ffi::feb::{put, word_at};
use crate::ffi::lifecycle::require_runtime;
use std::ffi::c_int;
use std::sync::atomic::Ordering;

/// `syncvar_t`: a 64-bit word, 60 bits of value and 4 of state.
#[repr(C)]
pub struct Syncvar {
    w: u64,
}

/// Reads the value to write from `src`.
///
/// # Safety
/// `src` is NULL or readable.
unsafe fn source(call: &str, src: *const u64) -> Result<u64, Fail> {
    if src.is_null() {
        return Err(Fail::null(call, "src"));
    }
    // SAFETY: non-null, readable per the contract.
    Ok(unsafe { src.read_unaligned() })
}

/// A blocking operation on an `aligned_t`.
///
/// # Safety
/// `addr` an aligned_t valid while the call runs; `dest` NULL or writable.
unsafe fn feb_op(call: &str, addr: *const u64, op: Op, value: u64, dest: *mut u64) -> c_int {
    qt(call, || {
        require_runtime(call)?;
        // SAFETY: forwarded contract.
        let w = unsafe { word_at(call, "addr", addr)? };
        let v = full_empty::perform_word(w, op, value);
        if dest.cast_const() != addr {
            // SAFETY: forwarded contract.
            unsafe { put(dest, v) };
        }
        Ok(())
    })
}

/// A non-blocking state change of an `aligned_t`.
///
/// # Safety
/// `addr` an aligned_t valid while the call runs.
unsafe fn feb_set(call: &str, addr: *const u64, full: bool, value: Option<u64>) -> c_int {
    qt(call, || {
        require_runtime(call)?;
        // SAFETY: forwarded contract.
        let w = unsafe { word_at(call, "dest", addr)? };
        full_empty::set_word(w, full, value);
        Ok(())
    })
}

/// qthread_readFE: waits until `src` is full, copies it to `dest`, empties it.
///
/// # Safety
/// See qthread.h.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn qthread_readFE(dest: *mut u64, src: *const u64) -> c_int {
    // SAFETY: forwarded contract.
    unsafe { feb_op("qthread_readFE", src, Op::ReadFE, 0, dest) }
}

/// qthread_readFF: waits until `src` is full, copies it to `dest`.
///
/// # Safety
/// See qthread.h.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn qthread_readFF(dest: *mut u64, src: *const u64) -> c_int {
    // SAFETY: forwarded contract.
    unsafe { feb_op("qthread_readFF", src, Op::ReadFF, 0, dest) }
}

/// qthread_readXX: copies `src` to `dest` whatever the state.
///
/// # Safety
/// See qthread.h.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn qthread_readXX(dest: *mut u64, src: *const u64) -> c_int {
    qt("qthread_readXX", || {
        require_runtime("qthread_readXX")?;
        // SAFETY: forwarded contract.
        let w = unsafe { word_at("qthread_readXX", "src", src)? };
        let v = full_empty::read_any(&WordSite(w));
        if dest.cast_const() != src {
            // SAFETY: forwarded contract.
            unsafe { put(dest, v) };
        }
        Ok(())
    })
}

/// qthread_writeEF: waits until `dest` is empty, writes `*src`, fills it.
///
/// # Safety
/// See qthread.h.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn qthread_writeEF(dest: *mut u64, src: *const u64) -> c_int {
    // SAFETY: forwarded contract.
    match unsafe { source("qthread_writeEF", src) } {
        // SAFETY: forwarded contract.
        Ok(v) => unsafe { qthread_writeEF_const(dest, v) },
        Err(f) => qt("qthread_writeEF", || Err(f)),
    }
}

/// qthread_writeEF_const: waits until `dest` is empty, writes `src`, fills it.
///
/// # Safety
/// See qthread.h.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn qthread_writeEF_const(dest: *mut u64, src: u64) -> c_int {
    // SAFETY: forwarded contract.
    unsafe {
        feb_op(
            "qthread_writeEF_const",
            dest,
            Op::WriteEF,
            src,
            std::ptr::null_mut(),
        )
    }
}

/// qthread_writeFF: waits until `dest` is full, writes `*src`, leaves it full.
///
/// # Safety
/// See qthread.h.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn qthread_writeFF(dest: *mut u64, src: *const u64) -> c_int {
    // SAFETY: forwarded contract.
    match unsafe { source("qthread_writeFF", src) } {
        // SAFETY: forwarded contract.
        Ok(v) => unsafe { qthread_writeFF_const(dest, v) },
        Err(f) => qt("qthread_writeFF", || Err(f)),
    }
}

/// qthread_writeFF_const: waits until `dest` is full, writes `src`.
///
/// # Safety
/// See qthread.h.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn qthread_writeFF_const(dest: *mut u64, src: u64) -> c_int {
    // SAFETY: forwarded contract.
    unsafe {
        feb_op(
            "qthread_writeFF_const",
            dest,
            Op::WriteFF,
            src,
            std::ptr::null_mut(),
        )
    }
}

/// qthread_writeF: writes `*src` to `dest` and fills it, without waiting.
///
/// # Safety
/// See qthread.h.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn qthread_writeF(dest: *mut u64, src: *const u64) -> c_int {
    // SAFETY: forwarded contract.
    match unsafe { source("qthread_writeF", src) } {
        // SAFETY: forwarded contract.
        Ok(v) => unsafe { qthread_writeF_const(dest, v) },
        Err(f) => qt("qthread_writeF", || Err(f)),
    }
}

/// qthread_writeF_const: writes `src` to `dest` and fills it, without waiting.
///
/// # Safety
/// See qthread.h.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn qthread_writeF_const(dest: *mut u64, src: u64) -> c_int {
    // SAFETY: forwarded contract.
    unsafe { feb_set("qthread_writeF_const", dest, true, Some(src)) }
}

/// qthread_fill: marks `dest` full.
///
/// # Safety
/// See qthread.h.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn qthread_fill(dest: *const u64) -> c_int {
    // SAFETY: forwarded contract.
    unsafe { feb_set("qthread_fill", dest, true, None) }
}

/// qthread_empty: marks `dest` empty.
///
/// # Safety
/// See qthread.h.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn qthread_empty(dest: *const u64) -> c_int {
    // SAFETY: forwarded contract.
    unsafe { feb_set("qthread_empty", dest, false, None) }
}

/// qthread_purge: writes 0 to `dest` and marks it empty.
///
/// # Safety
/// See qthread.h.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn qthread_purge(dest: *mut u64) -> c_int {
    // SAFETY: forwarded contract.
    unsafe { feb_set("qthread_purge", dest, false, Some(0)) }
}

/// qthread_purge_to: writes `*src` to `dest` and marks it empty, in one
/// step (no FEB operation sees the value without the state).
///
/// # Safety
/// See qthread.h.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn qthread_purge_to(dest: *mut u64, src: *const u64) -> c_int {
    // SAFETY: forwarded contract.
    match unsafe { source("qthread_purge_to", src) } {
        // SAFETY: forwarded contract.
        Ok(v) => unsafe { feb_set("qthread_purge_to", dest, false, Some(v)) },
        Err(f) => qt("qthread_purge_to", || Err(f)),
    }
}

/// qthread_purge_to_const: writes `src` to `dest` and marks it empty.
///
/// # Safety
/// See qthread.h.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn qthread_purge_to_const(dest: *mut u64, src: u64) -> c_int {
    // SAFETY: forwarded contract.
    unsafe { feb_set("qthread_purge_to_const", dest, false, Some(src)) }
}

/// The lock of address `a`, checked non-null.
fn lock_site(call: &str, a: *const u64) -> Result<KeySite, Fail> {
    if a.is_null() {
        return Err(Fail::null(call, "a"));
    }
    Ok(KeySite::lock(a as usize))
}

/// qthread_lock: takes the lock of address `a`, waiting while another
/// holds it (FIFO hand-off). The lock is separate from the word's FEB
/// state and value; `a` is only a key. A lock declared recursive
/// (`qthread_lock_init`, `locks.rs`) that the caller holds only counts.
#[unsafe(no_mangle)]
pub extern "C" fn qthread_lock(a: *const u64) -> c_int {
    qt("qthread_lock", || {
        require_runtime("qthread_lock")?;
        let site = lock_site("qthread_lock", a)?;
        let declared = locks::declared(a as usize);
        if declared.as_ref().is_some_and(|d| d.enter_again()) {
            return Ok(());
        }
        // Full = unlocked: taking the lock is a readFE of its state.
        full_empty::perform(&site, Op::ReadFE, 0);
        if let Some(d) = declared {
            d.entered();
        }
        Ok(())
    })
}

/// qthread_trylock: takes the lock of address `a` if nobody holds it
/// (or, recursive, the caller does); `QTHREAD_OPFAIL` otherwise, at once.
#[unsafe(no_mangle)]
pub extern "C" fn qthread_trylock(a: *const u64) -> c_int {
    qt_op("qthread_trylock", || {
        require_runtime("qthread_trylock")?;
        let site = lock_site("qthread_trylock", a)?;
        let declared = locks::declared(a as usize);
        if declared.as_ref().is_some_and(|d| d.enter_again()) {
            return Ok(Ok(()));
        }
        let took = full_empty::with_place(&site, |p, wake| {
            let free = p.is_full();
            if free {
                full_empty::set_locked(p, false, None, wake);
            }
            free
        });
        if !took {
            return Ok(Err(format!("qthread_trylock: the lock of {a:p} is held")));
        }
        if let Some(d) = declared {
            d.entered();
        }
        Ok(Ok(()))
    })
}

/// qthread_unlock: releases the lock of address `a` (handing it to the
/// first waiter); releasing an unlocked address succeeds, as in Qthreads.
/// A recursive lock is released by its holder's last unlock;
/// `QTHREAD_OPFAIL` when another task holds it.
#[unsafe(no_mangle)]
pub extern "C" fn qthread_unlock(a: *const u64) -> c_int {
    qt_op("qthread_unlock", || {
        require_runtime("qthread_unlock")?;
        let site = lock_site("qthread_unlock", a)?;
        if let Some(d) = locks::declared(a as usize) {
            match d.leave() {
                Ok(true) => {}
                Ok(false) => return Ok(Ok(())),
                Err(why) => return Ok(Err(format!("qthread_unlock({a:p}): {why}"))),
            }
        }
        full_empty::set(&site, true, None);
        Ok(Ok(()))
    })
}

/// qthread_feb_status: 1 if full, 0 if empty, or a negative error code.
///
/// # Safety
/// See qthread.h.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn qthread_feb_status(addr: *const u64) -> c_int {
    let mut full = false;
    let rc = qt("qthread_feb_status", || {
        require_runtime("qthread_feb_status")?;
        // SAFETY: forwarded contract.
        let w = unsafe { word_at("qthread_feb_status", "addr", addr)? };
        full = full_empty::is_full(&WordSite(w));
        Ok(())
    });
    if rc == 0 { c_int::from(full) } else { rc }
}

/// A blocking operation on a `syncvar_t`.
///
/// # Safety
/// `var` a syncvar_t valid while the call runs; `dest` NULL or writable.
unsafe fn sv_op(call: &str, var: *mut Syncvar, op: Op, value: u64, dest: *mut u64) -> c_int {
    qt(call, || {
        require_runtime(call)?;
        // SAFETY: forwarded contract.
        let w = unsafe { word_at(call, "syncvar", var.cast::<u64>())? };
        let v = full_empty::perform(&SyncvarSite(w), op, value & syncvar::MAX);
        // SAFETY: forwarded contract.
        unsafe { put(dest, v) };
        Ok(())
    })
}

/// A non-blocking state change of a `syncvar_t`.
///
/// # Safety
/// `var` a syncvar_t valid while the call runs.
unsafe fn sv_set(call: &str, var: *mut Syncvar, full: bool, value: Option<u64>) -> c_int {
    qt(call, || {
        require_runtime(call)?;
        // SAFETY: forwarded contract.
        let w = unsafe { word_at(call, "syncvar", var.cast::<u64>())? };
        full_empty::set(&SyncvarSite(w), full, value.map(|v| v & syncvar::MAX));
        Ok(())
    })
}

/// qthread_syncvar_readFE: waits until full, copies the value, empties.
///
/// # Safety
/// See qthread.h.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn qthread_syncvar_readFE(dest: *mut u64, src: *mut Syncvar) -> c_int {
    // SAFETY: forwarded contract.
    unsafe { sv_op("qthread_syncvar_readFE", src, Op::ReadFE, 0, dest) }
}

/// qthread_syncvar_readFF: waits until full, copies the value.
///
/// # Safety
/// See qthread.h.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn qthread_syncvar_readFF(dest: *mut u64, src: *mut Syncvar) -> c_int {
    // SAFETY: forwarded contract.
    unsafe { sv_op("qthread_syncvar_readFF", src, Op::ReadFF, 0, dest) }
}

/// qthread_syncvar_writeEF: waits until empty, writes `*src`, fills.
///
/// # Safety
/// See qthread.h.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn qthread_syncvar_writeEF(dest: *mut Syncvar, src: *const u64) -> c_int {
    // SAFETY: forwarded contract.
    match unsafe { source("qthread_syncvar_writeEF", src) } {
        // SAFETY: forwarded contract.
        Ok(v) => unsafe {
            sv_op(
                "qthread_syncvar_writeEF",
                dest,
                Op::WriteEF,
                v,
                std::ptr::null_mut(),
            )
        },
        Err(f) => qt("qthread_syncvar_writeEF", || Err(f)),
    }
}

/// qthread_syncvar_writeEF_const: waits until empty, writes `src`, fills.
///
/// # Safety
/// See qthread.h.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn qthread_syncvar_writeEF_const(dest: *mut Syncvar, src: u64) -> c_int {
    // SAFETY: forwarded contract.
    unsafe {
        sv_op(
            "qthread_syncvar_writeEF_const",
            dest,
            Op::WriteEF,
            src,
            std::ptr::null_mut(),
        )
    }
}

/// qthread_syncvar_writeF: writes `*src` and fills, without waiting.
///
/// # Safety
/// See qthread.h.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn qthread_syncvar_writeF(dest: *mut Syncvar, src: *const u64) -> c_int {
    // SAFETY: forwarded contract.
    match unsafe { source("qthread_syncvar_writeF", src) } {
        // SAFETY: forwarded contract.
        Ok(v) => unsafe { sv_set("qthread_syncvar_writeF", dest, true, Some(v)) },
        Err(f) => qt("qthread_syncvar_writeF", || Err(f)),
    }
}

/// qthread_syncvar_writeF_const: writes `src` and fills, without waiting.
///
/// # Safety
/// See qthread.h.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn qthread_syncvar_writeF_const(dest: *mut Syncvar, src: u64) -> c_int {
    // SAFETY: forwarded contract.
    unsafe { sv_set("qthread_syncvar_writeF_const", dest, true, Some(src)) }
}

/// qthread_syncvar_fill: marks full.
///
/// # Safety
/// See qthread.h.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn qthread_syncvar_fill(dest: *mut Syncvar) -> c_int {
    // SAFETY: forwarded contract.
    unsafe { sv_set("qthread_syncvar_fill", dest, true, None) }
}

/// qthread_syncvar_empty: marks empty.
///
/// # Safety
/// See qthread.h.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn qthread_syncvar_empty(dest: *mut Syncvar) -> c_int {
    // SAFETY: forwarded contract.
    unsafe { sv_set("qthread_syncvar_empty", dest, false, None) }
}

/// qthread_syncvar_status: 1 if full, 0 if empty, or a negative error code.
///
/// # Safety
/// See qthread.h.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn qthread_syncvar_status(v: *mut Syncvar) -> c_int {
    let mut full = false;
    let rc = qt("qthread_syncvar_status", || {
        // SAFETY: forwarded contract.
        let w = unsafe { word_at("qthread_syncvar_status", "syncvar", v.cast::<u64>())? };
        // Acquire pairs with the Release store of SyncvarSite::locked.
        full = w.load(Ordering::Acquire) & syncvar::EMPTY == 0;
        Ok(())
    });
    if rc == 0 { c_int::from(full) } else { rc }
}

/// qthread_syncvar_incrF: adds `inc` to the syncvar's value (modulo 2^60)
/// without waiting, under the syncvar's lock, and returns the new value.
/// As in Qthreads, the state stays as it was, except that an empty syncvar
/// with waiting readers is filled (and they complete). On error,
/// `(uint64_t)` of the negative error code (never a 60-bit value).
///
/// # Safety
/// See qthread.h.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn qthread_syncvar_incrF(operand: *mut Syncvar, inc: u64) -> u64 {
    const CALL: &str = "qthread_syncvar_incrF";
    let mut out = 0;
    let rc = qt(CALL, || {
        require_runtime(CALL)?;
        // SAFETY: forwarded contract.
        let w = unsafe { word_at(CALL, "operand", operand.cast::<u64>())? };
        out = full_empty::with_place(&SyncvarSite(w), |p, wake| {
            // SAFETY: a syncvar always holds its value, whatever its
            // state; taking reads it and leaves it there.
            let old = unsafe { p.take() };
            let new = old.wrapping_add(inc) & syncvar::MAX;
            let full = p.is_full() || !p.queue().is_empty();
            full_empty::set_locked(p, full, Some(new), wake);
            new
        });
        Ok(())
    });
    if rc == 0 { out } else { rc as i64 as u64 }
}
