//! Full/empty synchronization from C: on `cantus_sync_t` variables (state
//! in the variable) and on any aligned 64-bit word the caller owns (state
//! in a striped side table, words full by default). A thin layer over the
//! one full/empty engine of `crate::sync`: `full_empty.rs` adapts it to 64-bit
//! C values, `table.rs` finds a caller word's state and queue, `var.rs`
//! lays out `cantus_sync_t`. The Qthreads `aligned_t` and `syncvar_t`
//! functions share all three (`../README.md`).

pub mod full_empty;
pub mod table;
pub mod var;

use super::Code;
use super::error::{EALIGN, EBUSY, Fail, OK, boundary};
use super::lifecycle::require_runtime;
use full_empty::Op;
use std::ffi::c_int;
use std::sync::atomic::AtomicU64;
use table::WordSite;
use var::CantusSync;

/// The word at `p`, checked: non-null and 8-byte aligned.
///
/// # Safety
/// If non-null and aligned, `p` is valid for reads and writes of 8 bytes
/// for `'a`, and is only accessed atomically (through cantus) while FEB
/// calls on it may run.
pub(crate) unsafe fn word_at<'a>(
    call: &str,
    name: &str,
    p: *const u64,
) -> Result<&'a AtomicU64, Fail> {
    if p.is_null() {
        return Err(Fail::null(call, name));
    }
    if p as usize % 8 != 0 {
        return Err(Fail::new(
            EALIGN,
            format!(
                "{call}: `{name}` = {p:p} is not aligned to 8 bytes (full/empty words must be)"
            ),
        ));
    }
    // SAFETY: non-null and aligned (checked); valid and atomically
    // accessed per the contract.
    Ok(unsafe { AtomicU64::from_ptr(p.cast_mut()) })
}

/// Writes `v` to `out` unless it is null.
///
/// # Safety
/// `out` is null or valid for an 8-byte write.
pub(crate) unsafe fn put(out: *mut u64, v: u64) {
    if !out.is_null() {
        // SAFETY: per the contract. Unaligned output pointers are allowed.
        unsafe { out.write_unaligned(v) };
    }
}

/// A blocking or state-changing operation on a caller-owned word.
///
/// # Safety
/// See [`word_at`] and [`put`].
unsafe fn word_op(call: &str, word: *const u64, op: Op, value: u64, out: *mut u64) -> Code {
    boundary(call, || {
        require_runtime(call)?;
        // SAFETY: forwarded contract.
        let w = unsafe { word_at(call, "word", word)? };
        let v = full_empty::perform_word(w, op, value);
        // SAFETY: forwarded contract.
        unsafe { put(out, v) };
        Ok(OK)
    })
}

/// cantus_feb_read_fe: waits until full, reads, leaves empty.
///
/// # Safety
/// `word` as the header says; `out` NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cantus_feb_read_fe(word: *mut u64, out: *mut u64) -> Code {
    // SAFETY: forwarded contract.
    unsafe { word_op("cantus_feb_read_fe", word, Op::ReadFE, 0, out) }
}

/// cantus_feb_read_ff: waits until full, reads, leaves full.
///
/// # Safety
/// `word` as the header says; `out` NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cantus_feb_read_ff(word: *const u64, out: *mut u64) -> Code {
    // SAFETY: forwarded contract.
    unsafe { word_op("cantus_feb_read_ff", word, Op::ReadFF, 0, out) }
}

/// cantus_feb_write_ef: waits until empty, writes, leaves full.
///
/// # Safety
/// `word` as the header says.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cantus_feb_write_ef(word: *mut u64, value: u64) -> Code {
    // SAFETY: forwarded contract.
    unsafe {
        word_op(
            "cantus_feb_write_ef",
            word,
            Op::WriteEF,
            value,
            std::ptr::null_mut(),
        )
    }
}

/// cantus_feb_write_ff: waits until full, writes, leaves full.
///
/// # Safety
/// `word` as the header says.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cantus_feb_write_ff(word: *mut u64, value: u64) -> Code {
    // SAFETY: forwarded contract.
    unsafe {
        word_op(
            "cantus_feb_write_ff",
            word,
            Op::WriteFF,
            value,
            std::ptr::null_mut(),
        )
    }
}

/// A non-blocking operation on a caller-owned word.
///
/// # Safety
/// See [`word_at`].
unsafe fn word_set(call: &str, word: *const u64, full: bool, value: Option<u64>) -> Code {
    boundary(call, || {
        require_runtime(call)?;
        // SAFETY: forwarded contract.
        let w = unsafe { word_at(call, "word", word)? };
        full_empty::set_word(w, full, value);
        Ok(OK)
    })
}

/// cantus_feb_write_xf: writes whatever the state, leaves full.
///
/// # Safety
/// `word` as the header says.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cantus_feb_write_xf(word: *mut u64, value: u64) -> Code {
    // SAFETY: forwarded contract.
    unsafe { word_set("cantus_feb_write_xf", word, true, Some(value)) }
}

/// cantus_feb_reset: writes 0 and leaves empty.
///
/// # Safety
/// `word` as the header says.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cantus_feb_reset(word: *mut u64) -> Code {
    // SAFETY: forwarded contract.
    unsafe { word_set("cantus_feb_reset", word, false, Some(0)) }
}

/// cantus_feb_fill: marks full without writing.
///
/// # Safety
/// `word` as the header says.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cantus_feb_fill(word: *mut u64) -> Code {
    // SAFETY: forwarded contract.
    unsafe { word_set("cantus_feb_fill", word, true, None) }
}

/// cantus_feb_empty: marks empty without writing.
///
/// # Safety
/// `word` as the header says.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cantus_feb_empty(word: *mut u64) -> Code {
    // SAFETY: forwarded contract.
    unsafe { word_set("cantus_feb_empty", word, false, None) }
}

/// cantus_feb_read_xx: reads whatever the state.
///
/// # Safety
/// `word` as the header says; `out` NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cantus_feb_read_xx(word: *const u64, out: *mut u64) -> Code {
    boundary("cantus_feb_read_xx", || {
        require_runtime("cantus_feb_read_xx")?;
        super::tasks::non_null("cantus_feb_read_xx", "out", out)?;
        // SAFETY: forwarded contract.
        let w = unsafe { word_at("cantus_feb_read_xx", "word", word)? };
        let v = full_empty::read_any(&WordSite(w));
        // SAFETY: forwarded contract.
        unsafe { put(out, v) };
        Ok(OK)
    })
}

/// cantus_feb_is_full: 1 if full, 0 if empty, or a negative error code.
///
/// # Safety
/// `word` as the header says.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cantus_feb_is_full(word: *const u64) -> Code {
    boundary("cantus_feb_is_full", || {
        require_runtime("cantus_feb_is_full")?;
        // SAFETY: forwarded contract.
        let w = unsafe { word_at("cantus_feb_is_full", "word", word)? };
        Ok(c_int::from(full_empty::is_full(&WordSite(w))))
    })
}

/// The variable at `p`, checked non-null and aligned.
///
/// # Safety
/// If non-null and aligned, `p` points at a `cantus_sync_t` valid for `'a`.
unsafe fn var_at<'a>(call: &str, p: *const CantusSync) -> Result<&'a CantusSync, Fail> {
    if p.is_null() {
        return Err(Fail::null(call, "sync"));
    }
    if p as usize % 8 != 0 {
        return Err(Fail::new(
            EALIGN,
            format!("{call}: `sync` = {p:p} is not aligned to 8 bytes"),
        ));
    }
    // SAFETY: checked non-null and aligned; valid per the contract.
    Ok(unsafe { &*p })
}

/// A `cantus_sync_t` operation.
///
/// # Safety
/// See [`var_at`] and [`put`].
unsafe fn var_call(
    call: &str,
    var: *const CantusSync,
    f: impl FnOnce(&CantusSync) -> Result<Option<u64>, Fail>,
    out: *mut u64,
) -> Code {
    boundary(call, || {
        require_runtime(call)?;
        // SAFETY: forwarded contract.
        let v = unsafe { var_at(call, var)? };
        if let Some(x) = f(v)? {
            // SAFETY: forwarded contract.
            unsafe { put(out, x) };
        }
        Ok(OK)
    })
}

/// cantus_sync_init: makes `sync` an empty variable holding 0.
///
/// # Safety
/// `sync` is NULL or points at writable storage for a `cantus_sync_t`
/// that no other thread uses during the call.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cantus_sync_init(sync: *mut CantusSync) -> Code {
    boundary("cantus_sync_init", || {
        // SAFETY: forwarded contract.
        unsafe { var_at("cantus_sync_init", sync)? };
        // SAFETY: checked non-null and aligned; writable and used by no
        // other thread during the call, per the contract.
        unsafe { sync.write(CantusSync::new()) };
        Ok(OK)
    })
}

/// cantus_sync_destroy: checks that nobody waits on `sync`.
///
/// # Safety
/// `sync` is NULL or a valid `cantus_sync_t`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cantus_sync_destroy(sync: *mut CantusSync) -> Code {
    boundary("cantus_sync_destroy", || {
        // SAFETY: forwarded contract.
        let v = unsafe { var_at("cantus_sync_destroy", sync)? };
        if v.has_waiters() {
            return Err(Fail::new(
                EBUSY,
                "cantus_sync_destroy: tasks or threads still wait on this variable; \
                 it must outlive them",
            ));
        }
        Ok(OK)
    })
}

/// cantus_sync_read_fe: waits until full, reads, leaves empty.
///
/// # Safety
/// `sync` a valid `cantus_sync_t`; `out` NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cantus_sync_read_fe(sync: *mut CantusSync, out: *mut u64) -> Code {
    // SAFETY: forwarded contract.
    unsafe {
        var_call(
            "cantus_sync_read_fe",
            sync,
            |v| Ok(Some(full_empty::perform(v, Op::ReadFE, 0))),
            out,
        )
    }
}

/// cantus_sync_read_ff: waits until full, reads, leaves full.
///
/// # Safety
/// `sync` a valid `cantus_sync_t`; `out` NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cantus_sync_read_ff(sync: *mut CantusSync, out: *mut u64) -> Code {
    // SAFETY: forwarded contract.
    unsafe {
        var_call(
            "cantus_sync_read_ff",
            sync,
            |v| Ok(Some(full_empty::perform(v, Op::ReadFF, 0))),
            out,
        )
    }
}

/// cantus_sync_write_ef: waits until empty, writes, leaves full.
///
/// # Safety
/// `sync` a valid `cantus_sync_t`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cantus_sync_write_ef(sync: *mut CantusSync, value: u64) -> Code {
    let write = |v: &CantusSync| {
        full_empty::perform(v, Op::WriteEF, value);
        Ok(None)
    };
    // SAFETY: forwarded contract.
    unsafe { var_call("cantus_sync_write_ef", sync, write, std::ptr::null_mut()) }
}

/// cantus_sync_write_ff: waits until full, writes, leaves full.
///
/// # Safety
/// `sync` a valid `cantus_sync_t`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cantus_sync_write_ff(sync: *mut CantusSync, value: u64) -> Code {
    let write = |v: &CantusSync| {
        full_empty::perform(v, Op::WriteFF, value);
        Ok(None)
    };
    // SAFETY: forwarded contract.
    unsafe { var_call("cantus_sync_write_ff", sync, write, std::ptr::null_mut()) }
}

/// cantus_sync_read_xx: reads whatever the state.
///
/// # Safety
/// `sync` a valid `cantus_sync_t`; `out` writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cantus_sync_read_xx(sync: *mut CantusSync, out: *mut u64) -> Code {
    if out.is_null() {
        return boundary("cantus_sync_read_xx", || {
            Err::<Code, _>(Fail::null("cantus_sync_read_xx", "out"))
        });
    }
    // SAFETY: forwarded contract.
    unsafe {
        var_call(
            "cantus_sync_read_xx",
            sync,
            |v| Ok(Some(full_empty::read_any(v))),
            out,
        )
    }
}

/// cantus_sync_write_xf: writes whatever the state, leaves full.
///
/// # Safety
/// `sync` a valid `cantus_sync_t`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cantus_sync_write_xf(sync: *mut CantusSync, value: u64) -> Code {
    // SAFETY: forwarded contract.
    unsafe {
        var_call(
            "cantus_sync_write_xf",
            sync,
            |v| {
                full_empty::set(v, true, Some(value));
                Ok(None)
            },
            std::ptr::null_mut(),
        )
    }
}

/// cantus_sync_reset: writes 0 and leaves empty.
///
/// # Safety
/// `sync` a valid `cantus_sync_t`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cantus_sync_reset(sync: *mut CantusSync) -> Code {
    // SAFETY: forwarded contract.
    unsafe {
        var_call(
            "cantus_sync_reset",
            sync,
            |v| {
                full_empty::set(v, false, Some(0));
                Ok(None)
            },
            std::ptr::null_mut(),
        )
    }
}

/// cantus_sync_is_full: 1 if full, 0 if empty, or a negative error code.
///
/// # Safety
/// `sync` a valid `cantus_sync_t`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cantus_sync_is_full(sync: *const CantusSync) -> Code {
    boundary("cantus_sync_is_full", || {
        require_runtime("cantus_sync_is_full")?;
        // SAFETY: forwarded contract.
        let v = unsafe { var_at("cantus_sync_is_full", sync)? };
        Ok(c_int::from(v.is_full()))
    })
}

#[cfg(test)]
mod tests;
