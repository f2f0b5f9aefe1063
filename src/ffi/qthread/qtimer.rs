//! `qtimer_t` (`qthread/qtimer.h`): Qthreads' wall-clock interval timer,
//! on the monotonic clock. Needs no runtime.

use crate::ffi::error::{EINVAL, Fail, boundary_void, guarded};
use std::ffi::c_int;
use std::time::Instant;

/// The timer behind a `qtimer_t`.
pub struct QtimerS {
    start: Option<Instant>,
    stop: Option<Instant>,
}

/// `qtimer_t`: a pointer to an opaque timer.
pub type QtimerT = *mut QtimerS;

/// qtimer_create: a new timer, not started; NULL if out of memory.
#[unsafe(no_mangle)]
pub extern "C" fn qtimer_create() -> QtimerT {
    guarded(std::ptr::null_mut(), || {
        Box::into_raw(Box::new(QtimerS {
            start: None,
            stop: None,
        }))
    })
}

/// The timer behind `t`.
///
/// # Safety
/// `t` is NULL or came from `qtimer_create` and is not destroyed, and no
/// other thread uses it during the call.
unsafe fn timer_at<'a>(call: &str, t: QtimerT) -> Result<&'a mut QtimerS, Fail> {
    // SAFETY: per the contract.
    unsafe { t.as_mut() }.ok_or_else(|| Fail::null(call, "timer"))
}

/// qtimer_start: records the start time (and forgets an earlier stop).
///
/// # Safety
/// See qtimer.h.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn qtimer_start(t: QtimerT) {
    boundary_void("qtimer_start", || {
        // SAFETY: forwarded contract.
        let t = unsafe { timer_at("qtimer_start", t)? };
        t.stop = None;
        t.start = Some(Instant::now());
        Ok(())
    })
}

/// qtimer_stop: records the stop time.
///
/// # Safety
/// See qtimer.h.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn qtimer_stop(t: QtimerT) {
    boundary_void("qtimer_stop", || {
        let now = Instant::now();
        // SAFETY: forwarded contract.
        let t = unsafe { timer_at("qtimer_stop", t)? };
        t.stop = Some(now);
        Ok(())
    })
}

/// qtimer_secs: seconds from the last start to the stop after it; 0.0
/// (reported in cantus_last_error) if the timer was not started and then
/// stopped, or `t` is NULL.
///
/// # Safety
/// See qtimer.h.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn qtimer_secs(t: QtimerT) -> f64 {
    let mut secs = 0.0;
    boundary_void("qtimer_secs", || {
        // SAFETY: forwarded contract.
        let t = unsafe { timer_at("qtimer_secs", t)? };
        match (t.start, t.stop) {
            (Some(a), Some(b)) => {
                secs = b.saturating_duration_since(a).as_secs_f64();
                Ok(())
            }
            _ => Err(Fail::new(
                EINVAL,
                "qtimer_secs: the timer was not started and then stopped",
            )),
        }
    });
    secs
}

/// qtimer_destroy: frees the timer (NULL: nothing).
///
/// # Safety
/// See qtimer.h.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn qtimer_destroy(t: QtimerT) {
    if !t.is_null() {
        // SAFETY: per the contract `t` came from Box::into_raw in
        // qtimer_create and is destroyed once.
        guarded((), || drop(unsafe { Box::from_raw(t) }));
    }
}

/// Seconds in a `timespec` from `clock_gettime` / `clock_getres`.
fn secs(clock: fn(libc::clockid_t, *mut libc::timespec) -> c_int) -> f64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // CLOCK_MONOTONIC always exists on Linux, so the call cannot fail; if
    // it did, `ts` stays 0.
    let _ = clock(libc::CLOCK_MONOTONIC, &mut ts);
    ts.tv_sec as f64 + ts.tv_nsec as f64 * 1e-9
}

/// qtimer_wtime: the monotonic clock's time in seconds (from an
/// arbitrary origin, as in Qthreads); differences are elapsed times.
#[unsafe(no_mangle)]
pub extern "C" fn qtimer_wtime() -> f64 {
    secs(|c, t| {
        // SAFETY: `t` points to a live, writable timespec.
        unsafe { libc::clock_gettime(c, t) }
    })
}

/// qtimer_res: the monotonic clock's resolution in seconds.
#[unsafe(no_mangle)]
pub extern "C" fn qtimer_res() -> f64 {
    secs(|c, t| {
        // SAFETY: `t` points to a live, writable timespec.
        unsafe { libc::clock_getres(c, t) }
    })
}
