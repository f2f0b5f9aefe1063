//! `<qthread/qutil.h>`: Qthreads' array utilities. The sums, products,
//! maxima and minima are `qloop.rs`'s reductions under Qthreads' qutil
//! names; the sorts are parallel on cantus tasks (`join`): a quicksort
//! around the median (`select_nth_unstable`) and a stable merge sort,
//! both sorting parts below `SEQUENTIAL` (4096) elements on one task.

use super::qloop::{add_f64, array_to_use, max_of, min_of, mul_f64, reduce};
use crate::ffi::error::boundary_void;
use std::cmp::Ordering;
use std::ffi::c_int;

/// Parts of at most this many elements are sorted on one task.
const SEQUENTIAL: usize = 4096;

/// qutil_double_sum: the sum of the array (as `qt_double_sum`).
///
/// # Safety
/// See qutil.h.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn qutil_double_sum(
    array: *const f64,
    length: usize,
    checkfeb: c_int,
) -> f64 {
    // SAFETY: forwarded contract.
    unsafe { reduce("qutil_double_sum", array, length, checkfeb, 0.0, add_f64) }
}

/// qutil_double_mult: the product of the array (as `qt_double_prod`).
///
/// # Safety
/// See qutil.h.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn qutil_double_mult(
    array: *const f64,
    length: usize,
    checkfeb: c_int,
) -> f64 {
    // SAFETY: forwarded contract.
    unsafe { reduce("qutil_double_mult", array, length, checkfeb, 1.0, mul_f64) }
}

/// qutil_double_max: the largest element of the array (as `qt_double_max`).
///
/// # Safety
/// See qutil.h.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn qutil_double_max(
    array: *const f64,
    length: usize,
    checkfeb: c_int,
) -> f64 {
    // SAFETY: forwarded contract.
    unsafe { reduce("qutil_double_max", array, length, checkfeb, 0.0, max_of) }
}

/// qutil_double_min: the smallest element of the array (as `qt_double_min`).
///
/// # Safety
/// See qutil.h.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn qutil_double_min(
    array: *const f64,
    length: usize,
    checkfeb: c_int,
) -> f64 {
    // SAFETY: forwarded contract.
    unsafe { reduce("qutil_double_min", array, length, checkfeb, 0.0, min_of) }
}

/// qutil_uint_sum: the sum of the array (as `qt_uint_sum`).
///
/// # Safety
/// See qutil.h.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn qutil_uint_sum(array: *const u64, length: usize, checkfeb: c_int) -> u64 {
    // SAFETY: forwarded contract.
    unsafe {
        reduce(
            "qutil_uint_sum",
            array,
            length,
            checkfeb,
            0,
            u64::wrapping_add,
        )
    }
}

/// qutil_uint_mult: the product of the array (as `qt_uint_prod`).
///
/// # Safety
/// See qutil.h.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn qutil_uint_mult(array: *const u64, length: usize, checkfeb: c_int) -> u64 {
    // SAFETY: forwarded contract.
    unsafe {
        reduce(
            "qutil_uint_mult",
            array,
            length,
            checkfeb,
            1,
            u64::wrapping_mul,
        )
    }
}

/// qutil_uint_max: the largest element of the array (as `qt_uint_max`).
///
/// # Safety
/// See qutil.h.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn qutil_uint_max(array: *const u64, length: usize, checkfeb: c_int) -> u64 {
    // SAFETY: forwarded contract.
    unsafe { reduce("qutil_uint_max", array, length, checkfeb, 0, max_of) }
}

/// qutil_uint_min: the smallest element of the array (as `qt_uint_min`).
///
/// # Safety
/// See qutil.h.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn qutil_uint_min(array: *const u64, length: usize, checkfeb: c_int) -> u64 {
    // SAFETY: forwarded contract.
    unsafe { reduce("qutil_uint_min", array, length, checkfeb, 0, min_of) }
}

/// qutil_int_sum: the sum of the array (as `qt_int_sum`).
///
/// # Safety
/// See qutil.h.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn qutil_int_sum(array: *const i64, length: usize, checkfeb: c_int) -> i64 {
    // SAFETY: forwarded contract.
    unsafe {
        reduce(
            "qutil_int_sum",
            array,
            length,
            checkfeb,
            0,
            i64::wrapping_add,
        )
    }
}

/// qutil_int_mult: the product of the array (as `qt_int_prod`).
///
/// # Safety
/// See qutil.h.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn qutil_int_mult(array: *const i64, length: usize, checkfeb: c_int) -> i64 {
    // SAFETY: forwarded contract.
    unsafe {
        reduce(
            "qutil_int_mult",
            array,
            length,
            checkfeb,
            1,
            i64::wrapping_mul,
        )
    }
}

/// qutil_int_max: the largest element of the array (as `qt_int_max`).
///
/// # Safety
/// See qutil.h.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn qutil_int_max(array: *const i64, length: usize, checkfeb: c_int) -> i64 {
    // SAFETY: forwarded contract.
    unsafe { reduce("qutil_int_max", array, length, checkfeb, 0, max_of) }
}

/// qutil_int_min: the smallest element of the array (as `qt_int_min`).
///
/// # Safety
/// See qutil.h.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn qutil_int_min(array: *const i64, length: usize, checkfeb: c_int) -> i64 {
    // SAFETY: forwarded contract.
    unsafe { reduce("qutil_int_min", array, length, checkfeb, 0, min_of) }
}

/// Sorts `v` with `cmp`, in parallel: the median splits it (smaller to
/// its left), and the halves are sorted as joined tasks.
fn quicksort<T: Copy + Send>(v: &mut [T], cmp: fn(&T, &T) -> Ordering) {
    if v.len() <= SEQUENTIAL {
        v.sort_unstable_by(cmp);
        return;
    }
    let mid = v.len() / 2;
    v.select_nth_unstable_by(mid, cmp);
    let (left, right) = v.split_at_mut(mid);
    both(|| quicksort(left, cmp), || quicksort(&mut right[1..], cmp));
}

/// Runs `a` and `b` as joined tasks (one after the other where no runtime
/// runs: only this file's unit tests, since every C entry point requires
/// one first).
fn both(a: impl FnOnce() + Send, b: impl FnOnce() + Send) {
    if crate::sched::in_runtime() {
        crate::par::join(a, b);
    } else {
        a();
        b();
    }
}

/// Sorts `v` with `cmp`, stably, in parallel: the halves sorted as
/// joined tasks, then merged through `scratch` (as long as `v`).
fn mergesort<T: Copy + Send + Sync>(v: &mut [T], scratch: &mut [T], cmp: fn(&T, &T) -> Ordering) {
    if v.len() <= SEQUENTIAL {
        v.sort_by(cmp);
        return;
    }
    let mid = v.len() / 2;
    {
        let (l, r) = v.split_at_mut(mid);
        let (sl, sr) = scratch.split_at_mut(mid);
        both(|| mergesort(l, sl, cmp), || mergesort(r, sr, cmp));
    }
    scratch.copy_from_slice(v);
    let (l, r) = scratch.split_at(mid);
    let (mut i, mut j) = (0, 0);
    for out in v.iter_mut() {
        // Stable: on a tie the left half's element goes first.
        if j == r.len() || (i < l.len() && cmp(&r[j], &l[i]) != Ordering::Less) {
            *out = l[i];
            i += 1;
        } else {
            *out = r[j];
            j += 1;
        }
    }
}

/// Runs `sort` on the `length` elements at `array`, after the checks
/// every qutil sort makes.
///
/// # Safety
/// `array` holds `length` elements, readable and writable, not accessed
/// by others during the call.
unsafe fn sort_array<T: Copy + Send + Sync>(
    call: &str,
    array: *mut T,
    length: usize,
    sort: impl FnOnce(&mut [T]),
) {
    boundary_void(call, || {
        if !array_to_use(call, array.is_null(), length)? {
            return Ok(());
        }
        // SAFETY: per the contract, `length` elements, ours for the call.
        let v = unsafe { std::slice::from_raw_parts_mut(array, length) };
        sort(v);
        Ok(())
    })
}

/// qutil_qsort: sorts the doubles ascending (IEEE total order), in
/// parallel, not stably.
///
/// # Safety
/// See qutil.h.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn qutil_qsort(array: *mut f64, length: usize) {
    // SAFETY: forwarded contract.
    unsafe {
        sort_array("qutil_qsort", array, length, |v| {
            quicksort(v, f64::total_cmp)
        })
    }
}

/// qutil_aligned_qsort: sorts the aligned_t ascending, in parallel.
///
/// # Safety
/// See qutil.h.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn qutil_aligned_qsort(array: *mut u64, length: usize) {
    // SAFETY: forwarded contract.
    unsafe {
        sort_array("qutil_aligned_qsort", array, length, |v| {
            quicksort(v, u64::cmp)
        })
    }
}

/// qutil_mergesort: sorts the doubles ascending (IEEE total order), in
/// parallel, stably.
///
/// # Safety
/// See qutil.h.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn qutil_mergesort(array: *mut f64, length: usize) {
    // SAFETY: forwarded contract.
    unsafe {
        sort_array("qutil_mergesort", array, length, |v| {
            let mut scratch = v.to_vec();
            mergesort(v, &mut scratch, f64::total_cmp)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn data(n: usize) -> Vec<f64> {
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        (0..n)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                (x % 1000) as f64 - 500.0
            })
            .collect()
    }

    #[test]
    fn both_sorts_sort_and_the_merge_sort_is_stable() {
        // Joined halves run one after the other here unless a runtime
        // runs; the C test (tests/c/test_qutil.c) sorts with one.
        for n in [
            0,
            1,
            5,
            SEQUENTIAL,
            SEQUENTIAL + 1,
            3 * SEQUENTIAL + 7,
            100_000,
        ] {
            let v = data(n);
            let mut expected = v.clone();
            expected.sort_by(f64::total_cmp);
            let mut q = v.clone();
            quicksort(&mut q, f64::total_cmp);
            assert_eq!(q, expected, "quicksort of {n}");
            // Stability: (key, index) pairs sorted by key only.
            let mut pairs: Vec<(i64, usize)> = v
                .iter()
                .enumerate()
                .map(|(i, x)| (*x as i64 / 10, i))
                .collect();
            let mut expected_pairs = pairs.clone();
            expected_pairs.sort_by_key(|p| p.0);
            let mut scratch = pairs.clone();
            mergesort(&mut pairs, &mut scratch, |a, b| a.0.cmp(&b.0));
            assert_eq!(pairs, expected_pairs, "mergesort of {n}");
        }
    }
}
