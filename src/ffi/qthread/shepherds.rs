//! `qthread_disable_shepherd` / `qthread_enable_shepherd`: a disabled
//! shepherd (worker) takes no new work; it resumes only the tasks it
//! started (cantus tasks never move once started) and hands the tasks
//! queued on it to the enabled ones (`sched::set_worker_disabled`). And
//! the worker forms, `qthread_disable_worker` / `qthread_enable_worker`
//! and `qthread_num_workers_local` (one worker per shepherd).

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
