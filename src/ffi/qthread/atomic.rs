//! Qthreads' floating-point atomic increments (`qthread_fincr`,
//! `qthread_dincr`): a compare-and-swap loop on the value's bits, as in
//! Qthreads. (`qthread_incr`, `qthread_cas*` are compiler built-ins in
//! `qthread.h`, as in Qthreads.)

use crate::ffi::error::guarded;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

/// qthread_fincr: atomically adds `incr` to `*operand`; returns the value
/// before. Does nothing and returns NaN if `operand` is NULL or unaligned.
///
/// # Safety
/// `operand` is NULL or a float valid for reads and writes, accessed only
/// atomically while the call runs.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn qthread_fincr(operand: *mut f32, incr: f32) -> f32 {
    guarded(f32::NAN, || {
        if operand.is_null() || !operand.is_aligned() {
            return f32::NAN;
        }
        // SAFETY: non-null and aligned (checked); valid and atomically
        // accessed per the contract.
        let a = unsafe { AtomicU32::from_ptr(operand.cast()) };
        // SeqCst, as Qthreads' __sync compare-and-swap (a full barrier).
        let old = a.fetch_update(Ordering::SeqCst, Ordering::SeqCst, |bits| {
            Some((f32::from_bits(bits) + incr).to_bits())
        });
        f32::from_bits(old.unwrap_or_else(|b| b))
    })
}

/// qthread_dincr: atomically adds `incr` to `*operand`; returns the value
/// before. Does nothing and returns NaN if `operand` is NULL or unaligned.
///
/// # Safety
/// `operand` is NULL or a double valid for reads and writes, accessed
/// only atomically while the call runs.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn qthread_dincr(operand: *mut f64, incr: f64) -> f64 {
    guarded(f64::NAN, || {
        if operand.is_null() || !operand.is_aligned() {
            return f64::NAN;
        }
        // SAFETY: non-null and aligned (checked); valid and atomically
        // accessed per the contract.
        let a = unsafe { AtomicU64::from_ptr(operand.cast()) };
        // SeqCst, as Qthreads' __sync compare-and-swap (a full barrier).
        let old = a.fetch_update(Ordering::SeqCst, Ordering::SeqCst, |bits| {
            Some((f64::from_bits(bits) + incr).to_bits())
        });
        f64::from_bits(old.unwrap_or_else(|b| b))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn increments_return_the_value_before() {
        let mut f = 1.5f32;
        // SAFETY: a live, aligned local.
        assert_eq!(unsafe { qthread_fincr(&mut f, 2.0) }, 1.5);
        assert_eq!(f, 3.5);
        let mut d = -1.0f64;
        // SAFETY: a live, aligned local.
        assert_eq!(unsafe { qthread_dincr(&mut d, 0.25) }, -1.0);
        assert_eq!(d, -0.75);
        // SAFETY: NULL is checked.
        assert!(unsafe { qthread_dincr(std::ptr::null_mut(), 1.0) }.is_nan());
    }
}
