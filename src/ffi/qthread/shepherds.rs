//! `qthread_disable_shepherd` / `qthread_enable_shepherd`: a disabled
//! shepherd (worker) takes no new work; it resumes only the tasks it
//! started (cantus tasks never move once started) and hands the tasks
//! queued on it to the enabled ones (`sched::set_worker_disabled`). And
//! the worker forms, `qthread_disable_worker` / `qthread_enable_worker`
//! and `qthread_num_workers_local` (one worker per shepherd), and the
//! shepherd queries `qthread_shep_ok`, `qthread_shep_next/prev(_local)`,
//! `qthread_distance` and `qthread_sorted_sheps(_remote)` (no topology:
//! all shepherds equidistant).

use super::{NO_SHEPHERD, qt};
use crate::ffi::error::{self, Fail};
use crate::ffi::lifecycle::require_runtime;
use std::ffi::{c_int, c_ushort};

/// Checks that `shep` names a shepherd of the running runtime.
fn shepherd(call: &str, shep: c_ushort) -> Result<usize, Fail> {
    require_runtime(call)?;
    let workers = crate::query::workers().unwrap_or(0);
    let w = usize::from(shep);
    if shep == NO_SHEPHERD || w >= workers {
        return Err(Fail::new(
            error::EINVAL,
            format!("{call}: shepherd {shep} does not exist (there are {workers})"),
        ));
    }
    Ok(w)
}

/// qthread_disable_shepherd: stops shepherd `shep` taking new work.
/// Shepherd 0 cannot be disabled (as in Qthreads: so one always runs).
#[unsafe(no_mangle)]
pub extern "C" fn qthread_disable_shepherd(shep: c_ushort) -> c_int {
    let call = "qthread_disable_shepherd";
    qt(call, || {
        let w = shepherd(call, shep)?;
        if w == 0 {
            return Err(Fail::new(
                error::ECONTEXT,
                format!("{call}: shepherd 0 cannot be disabled (as in Qthreads)"),
            ));
        }
        if !crate::sched::set_worker_disabled(w, true) {
            return Err(Fail::no_runtime(call));
        }
        Ok(())
    })
}

/// qthread_enable_shepherd: lets a disabled shepherd take work again
/// (enabling an enabled one does nothing).
#[unsafe(no_mangle)]
pub extern "C" fn qthread_enable_shepherd(shep: c_ushort) {
    let call = "qthread_enable_shepherd";
    error::boundary_void(call, || {
        let w = shepherd(call, shep)?;
        if !crate::sched::set_worker_disabled(w, false) {
            return Err(Fail::no_runtime(call));
        }
        Ok(())
    })
}

/// qthread_disable_worker: `qthread_disable_shepherd` of the worker's
/// shepherd. Qthreads numbers worker `w` as worker `w / shepherds` of
/// shepherd `w % shepherds`; with one worker per shepherd, worker `w` is
/// shepherd `w`'s only worker (and `w` past the last is no worker).
#[unsafe(no_mangle)]
pub extern "C" fn qthread_disable_worker(worker: c_ushort) -> c_int {
    qthread_disable_shepherd(worker)
}

/// qthread_enable_worker: `qthread_enable_shepherd` of the worker's
/// shepherd (see `qthread_disable_worker`).
#[unsafe(no_mangle)]
pub extern "C" fn qthread_enable_worker(worker: c_ushort) {
    qthread_enable_shepherd(worker);
}

/// qthread_num_workers_local: the workers of a shepherd, 1 for every
/// shepherd (as in Qthreads, the same for all, `shep` unchecked); 0
/// without a runtime.
#[unsafe(no_mangle)]
pub extern "C" fn qthread_num_workers_local(_shep: c_ushort) -> c_ushort {
    c_ushort::from(super::worker_count(false) > 0)
}

/// qthread_shep_ok: whether the caller's shepherd takes work: 1 enabled,
/// 0 disabled; `QTHREAD_PTHREAD_ERROR` outside shepherds (as in Qthreads:
/// a thread that is no shepherd's, or no runtime).
#[unsafe(no_mangle)]
pub extern "C" fn qthread_shep_ok() -> c_int {
    let s = super::qthread_shep();
    if s == NO_SHEPHERD {
        return super::QTHREAD_PTHREAD_ERROR;
    }
    match crate::sched::worker_disabled(usize::from(s)) {
        Some(disabled) => c_int::from(!disabled),
        None => super::QTHREAD_PTHREAD_ERROR,
    }
}

/// Steps `*shep` to the next (`up`) or previous shepherd, wrapping around
/// among all the shepherds (disabled ones included, as in Qthreads).
///
/// # Safety
/// `shep` is NULL or valid for reads and writes.
unsafe fn step(call: &str, shep: *mut c_ushort, up: bool) {
    error::boundary_void(call, || {
        require_runtime(call)?;
        let n = crate::query::workers().unwrap_or(0);
        if shep.is_null() {
            return Err(Fail::null(call, "shep"));
        }
        // SAFETY: non-null, readable and writable per the contract.
        let cur = usize::from(unsafe { shep.read() });
        if cur >= n {
            return Err(Fail::new(
                error::EINVAL,
                format!("{call}: *shep = {cur} is no shepherd (there are {n})"),
            ));
        }
        let next = if up { (cur + 1) % n } else { (cur + n - 1) % n };
        // SAFETY: as above; next < n <= NO_SHEPHERD.
        unsafe { shep.write(next as c_ushort) };
        Ok(())
    })
}

/// qthread_shep_next: `*shep` = the next shepherd (after the last: 0).
///
/// # Safety
/// See qthread.h.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn qthread_shep_next(shep: *mut c_ushort) {
    // SAFETY: forwarded contract.
    unsafe { step("qthread_shep_next", shep, true) }
}

/// qthread_shep_prev: `*shep` = the previous shepherd (before 0: the last).
///
/// # Safety
/// See qthread.h.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn qthread_shep_prev(shep: *mut c_ushort) {
    // SAFETY: forwarded contract.
    unsafe { step("qthread_shep_prev", shep, false) }
}

/// qthread_shep_next_local: as `qthread_shep_next` (every shepherd is
/// local: one process).
///
/// # Safety
/// See qthread.h.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn qthread_shep_next_local(shep: *mut c_ushort) {
    // SAFETY: forwarded contract.
    unsafe { step("qthread_shep_next_local", shep, true) }
}

/// qthread_shep_prev_local: as `qthread_shep_prev` (every shepherd is
/// local).
///
/// # Safety
/// See qthread.h.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn qthread_shep_prev_local(shep: *mut c_ushort) {
    // SAFETY: forwarded contract.
    unsafe { step("qthread_shep_prev_local", shep, false) }
}

/// qthread_distance: the distance between two shepherds: 0 (cantus knows
/// no distances between its workers; Qthreads also answers 0 without
/// topology information); `QTHREAD_BADARGS` for no such shepherd.
#[unsafe(no_mangle)]
pub extern "C" fn qthread_distance(src: c_ushort, dest: c_ushort) -> c_int {
    qt("qthread_distance", || {
        shepherd("qthread_distance", src)?;
        shepherd("qthread_distance", dest)?;
        Ok(())
    })
}

/// qthread_sorted_sheps: the shepherds by distance from the caller's:
/// NULL, Qthreads' answer for "all equidistant" (see `qthread_distance`).
#[unsafe(no_mangle)]
pub extern "C" fn qthread_sorted_sheps() -> *const c_ushort {
    std::ptr::null()
}

/// qthread_sorted_sheps_remote: the shepherds by distance from `src`:
/// NULL, "all equidistant" (as `qthread_sorted_sheps`).
#[unsafe(no_mangle)]
pub extern "C" fn qthread_sorted_sheps_remote(_src: c_ushort) -> *const c_ushort {
    std::ptr::null()
}
