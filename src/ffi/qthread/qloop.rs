//! `qt_loop` (a task per iteration) and `qt_loop_balance` (a task per
//! shepherd, iterations split evenly), both waiting for their tasks: each
//! is one cantus `coforall`, so one end count covers all the tasks.

use crate::ffi::error::{Fail, boundary_void};
use crate::ffi::lifecycle::require_runtime;
use crate::ffi::tasks::Arg;
use std::ffi::c_void;

/// `qt_loop_f`: the body for iterations `[start, stop)`.
pub type QtLoopF = Option<unsafe extern "C" fn(start: usize, stop: usize, arg: *mut c_void)>;

/// qt_loop: `func(i, i + 1, argptr)` for each i in `[start, stop)`, each
/// a task; returns when all have returned.
///
/// # Safety
/// See qloop.h.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn qt_loop(start: usize, stop: usize, func: QtLoopF, argptr: *mut c_void) {
    boundary_void("qt_loop", || {
        let f = func.ok_or_else(|| Fail::null("qt_loop", "func"))?;
        require_runtime("qt_loop")?;
        let arg = Arg(argptr);
        // SAFETY: the caller promises func may run concurrently with argptr.
        crate::coforall(stop.saturating_sub(start), move |k| unsafe {
            f(start + k, start + k + 1, arg.get())
        });
        Ok(())
    })
}

/// The `i`-th of `parts` near-equal chunks of `[start, stop)`.
pub(crate) fn chunk(start: usize, stop: usize, parts: usize, i: usize) -> (usize, usize) {
    let n = stop - start;
    let (base, extra) = (n / parts, n % parts);
    let lo = start + i * base + i.min(extra);
    let hi = lo + base + usize::from(i < extra);
    (lo, hi)
}

/// qt_loop_balance: `[start, stop)` split evenly over one task per
/// shepherd; returns when all have returned.
///
/// # Safety
/// See qloop.h.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn qt_loop_balance(
    start: usize,
    stop: usize,
    func: QtLoopF,
    argptr: *mut c_void,
) {
    boundary_void("qt_loop_balance", || {
        let f = func.ok_or_else(|| Fail::null("qt_loop_balance", "func"))?;
        require_runtime("qt_loop_balance")?;
        if stop <= start {
            return Ok(());
        }
        let parts = crate::query::workers().unwrap_or(1).clamp(1, stop - start);
        let arg = Arg(argptr);
        crate::coforall(parts, move |i| {
            let (lo, hi) = chunk(start, stop, parts, i);
            // SAFETY: the caller promises func may run concurrently with argptr.
            unsafe { f(lo, hi, arg.get()) }
        });
        Ok(())
    })
}

#[cfg(test)]
mod tests {
    use super::chunk;

    #[test]
    fn chunks_cover_the_range_evenly() {
        for (start, stop, parts) in [(0, 10, 3), (5, 6, 1), (7, 107, 8), (0, 3, 3)] {
            let mut next = start;
            for i in 0..parts {
                let (lo, hi) = chunk(start, stop, parts, i);
                assert_eq!(lo, next);
                assert!(hi - lo == (stop - start) / parts || hi - lo == (stop - start) / parts + 1);
                next = hi;
            }
            assert_eq!(next, stop);
        }
    }
}
