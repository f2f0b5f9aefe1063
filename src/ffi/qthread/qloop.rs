//! `qt_loop` (a task per iteration) and `qt_loop_balance` (a task per
//! shepherd, iterations split evenly), with their `_simple`, `_sinc`,
//! `_sv`, `_dc` and `_aligned` variants, all waiting for their tasks: each
//! is one cantus `coforall`, so one end count covers all the tasks. And
//! `qt_loopaccum_balance*` (a task per worker, partial results accumulated
//! in part order), `qt_qsort` (parts sorted in parallel, then merged) and
//! the array reductions `qt_{uint,int,double}_{sum,prod,max,min}`, one
//! task per shepherd.

use super::qarray::QtAccumF;
use crate::ffi::error::{Fail, boundary_void};
use crate::ffi::feb::full_empty::{self, Op};
use crate::ffi::feb::table::WordSite;
use crate::ffi::lifecycle::require_runtime;
use crate::ffi::tasks::Arg;
use std::ffi::{c_int, c_void};
use std::sync::atomic::{AtomicU64, Ordering};

/// `qt_loop_f`: the body for iterations `[start, stop)`.
pub type QtLoopF = Option<unsafe extern "C" fn(start: usize, stop: usize, arg: *mut c_void)>;

/// A task per iteration of `[start, stop)`, waited for (every `qt_loop`
/// variant).
fn each(call: &str, start: usize, stop: usize, func: QtLoopF, argptr: *mut c_void) {
    boundary_void(call, || {
        let f = func.ok_or_else(|| Fail::null(call, "func"))?;
        require_runtime(call)?;
        let arg = Arg(argptr);
        crate::par::coforall(stop.saturating_sub(start), move |k| {
            // SAFETY: the caller promises the function may run concurrently
            // with its argument on any worker.
            crate::sched::body_may_go_away(|| unsafe { f(start + k, start + k + 1, arg.get()) })
        });
        Ok(())
    })
}

/// A task per shepherd over near-equal parts of `[start, stop)`, waited
/// for (every `qt_loop_balance` variant).
fn balance(call: &str, start: usize, stop: usize, func: QtLoopF, argptr: *mut c_void) {
    boundary_void(call, || {
        let f = func.ok_or_else(|| Fail::null(call, "func"))?;
        require_runtime(call)?;
        if stop <= start {
            return Ok(());
        }
        let parts = crate::query::workers().unwrap_or(1).clamp(1, stop - start);
        let arg = Arg(argptr);
        crate::par::coforall(parts, move |i| {
            let (lo, hi) = chunk(start, stop, parts, i);
            // SAFETY: the caller promises func may run concurrently with argptr.
            crate::sched::body_may_go_away(|| unsafe { f(lo, hi, arg.get()) })
        });
        Ok(())
    })
}

/// qt_loop: `func(i, i + 1, argptr)` for each i in `[start, stop)`, each
/// a task; returns when all have returned.
///
/// # Safety
/// See qloop.h.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn qt_loop(start: usize, stop: usize, func: QtLoopF, argptr: *mut c_void) {
    each("qt_loop", start, stop, func, argptr);
}

/// qt_loop_simple: as `qt_loop` (Qthreads runs "simple" tasks, which may
/// not block; cantus's tasks may).
///
/// # Safety
/// See qloop.h.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn qt_loop_simple(
    start: usize,
    stop: usize,
    func: QtLoopF,
    argptr: *mut c_void,
) {
    each("qt_loop_simple", start, stop, func, argptr);
}

/// qt_loop_sinc: as `qt_loop` (Qthreads waits with a sinc; cantus with
/// the one end count of its coforall).
///
/// # Safety
/// See qloop.h.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn qt_loop_sinc(
    start: usize,
    stop: usize,
    func: QtLoopF,
    argptr: *mut c_void,
) {
    each("qt_loop_sinc", start, stop, func, argptr);
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
    balance("qt_loop_balance", start, stop, func, argptr);
}

/// qt_loop_balance_simple: as `qt_loop_balance` (see `qt_loop_simple`).
///
/// # Safety
/// See qloop.h.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn qt_loop_balance_simple(
    start: usize,
    stop: usize,
    func: QtLoopF,
    argptr: *mut c_void,
) {
    balance("qt_loop_balance_simple", start, stop, func, argptr);
}

/// qt_loop_balance_sinc: as `qt_loop_balance` (see `qt_loop_sinc`).
///
/// # Safety
/// See qloop.h.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn qt_loop_balance_sinc(
    start: usize,
    stop: usize,
    func: QtLoopF,
    argptr: *mut c_void,
) {
    balance("qt_loop_balance_sinc", start, stop, func, argptr);
}

// ---- qt_{uint,int,double}_{sum,prod,max,min} ----

/// An 8-byte element type of the array reductions.
pub(crate) trait Elem: Copy + Send + Sync + 'static {
    fn from_bits(b: u64) -> Self;
    fn to_bits(self) -> u64;
}

impl Elem for u64 {
    fn from_bits(b: u64) -> u64 {
        b
    }
    fn to_bits(self) -> u64 {
        self
    }
}

impl Elem for i64 {
    fn from_bits(b: u64) -> i64 {
        b as i64
    }
    fn to_bits(self) -> u64 {
        self as u64
    }
}

impl Elem for f64 {
    fn from_bits(b: u64) -> f64 {
        f64::from_bits(b)
    }
    fn to_bits(self) -> u64 {
        f64::to_bits(self)
    }
}

/// The array of a reduction, moved into its tasks.
#[derive(Clone, Copy)]
struct Array(*const u64);

// SAFETY: the caller of the reduction keeps the array valid and
// unmodified (except through FEB calls, with checkfeb) while it runs.
unsafe impl Send for Array {}
// SAFETY: as above; the tasks only read it.
unsafe impl Sync for Array {}

impl Array {
    fn get(self) -> *const u64 {
        self.0
    }
}

/// The checks of every call on a caller's array: a runtime runs, and a
/// non-empty array is not NULL. `Ok(false)`: the array is empty, nothing
/// to do.
pub(crate) fn array_to_use(call: &str, null: bool, length: usize) -> Result<bool, Fail> {
    require_runtime(call)?;
    if length == 0 {
        return Ok(false);
    }
    if null {
        return Err(Fail::null(call, "array"));
    }
    Ok(true)
}

/// Reduces `array[0..length]` with `op` in parallel: one task per
/// shepherd over near-equal contiguous parts, then the parts in order (so
/// a given shepherd count gives the same floating-point result each run).
/// With `checkfeb`, each element is read with readFF (waiting until full).
/// Length 0 gives `empty`.
///
/// # Safety
/// `array` holds `length` readable elements (see qloop.h).
pub(crate) unsafe fn reduce<T: Elem>(
    call: &str,
    array: *const T,
    length: usize,
    checkfeb: c_int,
    empty: T,
    op: fn(T, T) -> T,
) -> T {
    let mut result = empty;
    boundary_void(call, || {
        if !array_to_use(call, array.is_null(), length)? {
            return Ok(());
        }
        if checkfeb != 0 {
            // SAFETY: only the alignment of the first word is checked here.
            unsafe { crate::ffi::feb::word_at(call, "array", array.cast::<u64>())? };
        }
        let parts = crate::query::workers().unwrap_or(1).clamp(1, length);
        let partial: Vec<AtomicU64> = (0..parts).map(|_| AtomicU64::new(0)).collect();
        let a = Array(array.cast());
        let partial_ref = &partial;
        crate::par::coforall(parts, move |i| {
            let (lo, hi) = chunk(0, length, parts, i);
            let read = |k: usize| -> T {
                // SAFETY: k < length; the caller promises `length`
                // readable elements, 8-byte aligned when checkfeb (checked).
                let p = unsafe { a.get().add(k) };
                if checkfeb != 0 {
                    // SAFETY: as above; accessed through FEB calls only.
                    let w = unsafe { std::sync::atomic::AtomicU64::from_ptr(p.cast_mut()) };
                    T::from_bits(full_empty::perform(&WordSite(w), Op::ReadFF, 0))
                } else {
                    // SAFETY: as above.
                    T::from_bits(unsafe { p.read_unaligned() })
                }
            };
            let mut acc = read(lo);
            for k in lo + 1..hi {
                acc = op(acc, read(k));
            }
            // Relaxed: the coforall's end count orders it before the reads below.
            partial_ref[i].store(acc.to_bits(), Ordering::Relaxed);
        });
        result = partial
            .iter()
            .map(|p| T::from_bits(p.load(Ordering::Relaxed)))
            .reduce(op)
            .unwrap_or(empty);
        Ok(())
    });
    result
}

pub(crate) fn max_of<T: PartialOrd>(a: T, b: T) -> T {
    if b > a { b } else { a }
}

pub(crate) fn min_of<T: PartialOrd>(a: T, b: T) -> T {
    if b < a { b } else { a }
}

pub(crate) fn add_f64(a: f64, b: f64) -> f64 {
    a + b
}

pub(crate) fn mul_f64(a: f64, b: f64) -> f64 {
    a * b
}

/// qt_uint_sum: the sum (mod 2^64) of the array.
///
/// # Safety
/// See qloop.h.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn qt_uint_sum(array: *mut u64, length: usize, checkfeb: c_int) -> u64 {
    // SAFETY: forwarded contract.
    unsafe {
        reduce(
            "qt_uint_sum",
            array.cast_const(),
            length,
            checkfeb,
            0,
            u64::wrapping_add,
        )
    }
}

/// qt_uint_prod: the product (mod 2^64) of the array.
///
/// # Safety
/// See qloop.h.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn qt_uint_prod(array: *mut u64, length: usize, checkfeb: c_int) -> u64 {
    // SAFETY: forwarded contract.
    unsafe {
        reduce(
            "qt_uint_prod",
            array.cast_const(),
            length,
            checkfeb,
            1,
            u64::wrapping_mul,
        )
    }
}

/// qt_uint_max: the largest element (0 for an empty array).
///
/// # Safety
/// See qloop.h.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn qt_uint_max(array: *mut u64, length: usize, checkfeb: c_int) -> u64 {
    // SAFETY: forwarded contract.
    unsafe {
        reduce(
            "qt_uint_max",
            array.cast_const(),
            length,
            checkfeb,
            0,
            max_of,
        )
    }
}

/// qt_uint_min: the smallest element (0 for an empty array).
///
/// # Safety
/// See qloop.h.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn qt_uint_min(array: *mut u64, length: usize, checkfeb: c_int) -> u64 {
    // SAFETY: forwarded contract.
    unsafe {
        reduce(
            "qt_uint_min",
            array.cast_const(),
            length,
            checkfeb,
            0,
            min_of,
        )
    }
}

/// qt_int_sum: the sum (wrapping on overflow) of the array.
///
/// # Safety
/// See qloop.h.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn qt_int_sum(array: *mut i64, length: usize, checkfeb: c_int) -> i64 {
    // SAFETY: forwarded contract.
    unsafe {
        reduce(
            "qt_int_sum",
            array.cast_const(),
            length,
            checkfeb,
            0,
            i64::wrapping_add,
        )
    }
}

/// qt_int_prod: the product (wrapping on overflow) of the array.
///
/// # Safety
/// See qloop.h.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn qt_int_prod(array: *mut i64, length: usize, checkfeb: c_int) -> i64 {
    // SAFETY: forwarded contract.
    unsafe {
        reduce(
            "qt_int_prod",
            array.cast_const(),
            length,
            checkfeb,
            1,
            i64::wrapping_mul,
        )
    }
}

/// qt_int_max: the largest element (0 for an empty array).
///
/// # Safety
/// See qloop.h.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn qt_int_max(array: *mut i64, length: usize, checkfeb: c_int) -> i64 {
    // SAFETY: forwarded contract.
    unsafe {
        reduce(
            "qt_int_max",
            array.cast_const(),
            length,
            checkfeb,
            0,
            max_of,
        )
    }
}

/// qt_int_min: the smallest element (0 for an empty array).
///
/// # Safety
/// See qloop.h.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn qt_int_min(array: *mut i64, length: usize, checkfeb: c_int) -> i64 {
    // SAFETY: forwarded contract.
    unsafe {
        reduce(
            "qt_int_min",
            array.cast_const(),
            length,
            checkfeb,
            0,
            min_of,
        )
    }
}

/// qt_double_sum: the sum of the array.
///
/// # Safety
/// See qloop.h.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn qt_double_sum(array: *mut f64, length: usize, checkfeb: c_int) -> f64 {
    // SAFETY: forwarded contract.
    unsafe {
        reduce(
            "qt_double_sum",
            array.cast_const(),
            length,
            checkfeb,
            0.0,
            add_f64,
        )
    }
}

/// qt_double_prod: the product of the array.
///
/// # Safety
/// See qloop.h.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn qt_double_prod(array: *mut f64, length: usize, checkfeb: c_int) -> f64 {
    // SAFETY: forwarded contract.
    unsafe {
        reduce(
            "qt_double_prod",
            array.cast_const(),
            length,
            checkfeb,
            1.0,
            mul_f64,
        )
    }
}

/// qt_double_max: the largest element (0.0 for an empty array).
///
/// # Safety
/// See qloop.h.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn qt_double_max(array: *mut f64, length: usize, checkfeb: c_int) -> f64 {
    // SAFETY: forwarded contract.
    unsafe {
        reduce(
            "qt_double_max",
            array.cast_const(),
            length,
            checkfeb,
            0.0,
            max_of,
        )
    }
}

/// qt_double_min: the smallest element (0.0 for an empty array).
///
/// # Safety
/// See qloop.h.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn qt_double_min(array: *mut f64, length: usize, checkfeb: c_int) -> f64 {
    // SAFETY: forwarded contract.
    unsafe {
        reduce(
            "qt_double_min",
            array.cast_const(),
            length,
            checkfeb,
            0.0,
            min_of,
        )
    }
}

// ---- the other synchronisation variants ----

/// qt_loop_sv: as `qt_loop` (Qthreads waits on a syncvar per task; cantus,
/// as for every variant, with its coforall's one end count).
///
/// # Safety
/// See qloop.h.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn qt_loop_sv(start: usize, stop: usize, func: QtLoopF, argptr: *mut c_void) {
    each("qt_loop_sv", start, stop, func, argptr);
}

/// qt_loop_dc: as `qt_loop` (Qthreads waits on a done-count).
///
/// # Safety
/// See qloop.h.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn qt_loop_dc(start: usize, stop: usize, func: QtLoopF, argptr: *mut c_void) {
    each("qt_loop_dc", start, stop, func, argptr);
}

/// qt_loop_aligned: as `qt_loop` (Qthreads waits on an aligned_t per
/// task).
///
/// # Safety
/// See qloop.h.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn qt_loop_aligned(
    start: usize,
    stop: usize,
    func: QtLoopF,
    argptr: *mut c_void,
) {
    each("qt_loop_aligned", start, stop, func, argptr);
}

/// qt_loop_balance_sv: as `qt_loop_balance` (see `qt_loop_sv`).
///
/// # Safety
/// See qloop.h.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn qt_loop_balance_sv(
    start: usize,
    stop: usize,
    func: QtLoopF,
    argptr: *mut c_void,
) {
    balance("qt_loop_balance_sv", start, stop, func, argptr);
}

/// qt_loop_balance_dc: as `qt_loop_balance` (see `qt_loop_dc`).
///
/// # Safety
/// See qloop.h.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn qt_loop_balance_dc(
    start: usize,
    stop: usize,
    func: QtLoopF,
    argptr: *mut c_void,
) {
    balance("qt_loop_balance_dc", start, stop, func, argptr);
}

/// qt_loop_balance_aligned: as `qt_loop_balance` (see
/// `qt_loop_aligned`).
///
/// # Safety
/// See qloop.h.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn qt_loop_balance_aligned(
    start: usize,
    stop: usize,
    func: QtLoopF,
    argptr: *mut c_void,
) {
    balance("qt_loop_balance_aligned", start, stop, func, argptr);
}

// ---- qt_loopaccum_balance* ----

/// `qt_loopr_f`: the body for iterations `[start, stop)`, writing its
/// partial result to `ret`.
pub type QtLooprF =
    Option<unsafe extern "C" fn(start: usize, stop: usize, arg: *mut c_void, ret: *mut c_void)>;

/// Every `qt_loopaccum_balance` variant: one task per worker over
/// near-equal parts of `[start, stop)` (as in Qthreads, a task per worker
/// even when some parts are empty), each writing its `size`-byte partial
/// result; then, in part order, `out` = part 0 (with `fold_out`: the value
/// `out` held before, accumulated with part 0) accumulated with the others.
///
/// # Safety
/// As for `qt_loopaccum_balance` (qloop.h).
#[allow(clippy::too_many_arguments)]
unsafe fn accum_balance(
    call: &str,
    start: usize,
    stop: usize,
    size: usize,
    out: *mut c_void,
    func: QtLooprF,
    argptr: *mut c_void,
    acc: QtAccumF,
    fold_out: bool,
) {
    boundary_void(call, || {
        let f = func.ok_or_else(|| Fail::null(call, "func"))?;
        let acc = acc.ok_or_else(|| Fail::null(call, "acc"))?;
        if out.is_null() {
            return Err(Fail::null(call, "out"));
        }
        require_runtime(call)?;
        let parts = crate::query::workers().unwrap_or(1).max(1);
        let stop = stop.max(start);
        // Part 0 writes straight into `out`, unless `out`'s value is kept.
        let first = usize::from(!fold_out);
        let mut temps: Vec<super::buf::AlignedBuf> = (first..parts)
            .map(|_| super::buf::AlignedBuf::zeroed(size))
            .collect();
        let mut rets: Vec<Arg> = Vec::with_capacity(parts);
        if !fold_out {
            rets.push(Arg(out));
        }
        rets.extend(temps.iter_mut().map(|t| Arg(t.as_mut_ptr().cast())));
        let arg = Arg(argptr);
        let rets = &rets;
        crate::par::coforall(parts, move |i| {
            let (lo, hi) = chunk(start, stop, parts, i);
            let ret = rets[i];
            // SAFETY: the caller promises func may run concurrently with
            // argptr; each part writes its own `size` bytes.
            crate::sched::body_may_go_away(|| unsafe { f(lo, hi, arg.get(), ret.get()) })
        });
        for t in &temps {
            // SAFETY: `out` and each partial hold `size` bytes.
            unsafe { acc(out, t.as_ptr().cast()) };
        }
        Ok(())
    })
}

/// qt_loopaccum_balance: `func(lo, hi, argptr, ret)` over one part of
/// `[start, stop)` per worker, in parallel; `out` = part 0's result
/// accumulated (`acc`) with the others' in order.
///
/// # Safety
/// See qloop.h.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn qt_loopaccum_balance(
    start: usize,
    stop: usize,
    size: usize,
    out: *mut c_void,
    func: QtLooprF,
    argptr: *mut c_void,
    acc: QtAccumF,
) {
    // SAFETY: forwarded contract.
    unsafe {
        accum_balance(
            "qt_loopaccum_balance",
            start,
            stop,
            size,
            out,
            func,
            argptr,
            acc,
            false,
        )
    }
}

/// qt_loopaccum_balance_sv: as `qt_loopaccum_balance` (Qthreads waits
/// on syncvars).
///
/// # Safety
/// See qloop.h.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn qt_loopaccum_balance_sv(
    start: usize,
    stop: usize,
    size: usize,
    out: *mut c_void,
    func: QtLooprF,
    argptr: *mut c_void,
    acc: QtAccumF,
) {
    // SAFETY: forwarded contract.
    unsafe {
        accum_balance(
            "qt_loopaccum_balance_sv",
            start,
            stop,
            size,
            out,
            func,
            argptr,
            acc,
            false,
        )
    }
}

/// qt_loopaccum_balance_dc: as `qt_loopaccum_balance` (Qthreads waits
/// on a done-count).
///
/// # Safety
/// See qloop.h.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn qt_loopaccum_balance_dc(
    start: usize,
    stop: usize,
    size: usize,
    out: *mut c_void,
    func: QtLooprF,
    argptr: *mut c_void,
    acc: QtAccumF,
) {
    // SAFETY: forwarded contract.
    unsafe {
        accum_balance(
            "qt_loopaccum_balance_dc",
            start,
            stop,
            size,
            out,
            func,
            argptr,
            acc,
            false,
        )
    }
}

/// qt_loopaccum_balance_sinc: as `qt_loopaccum_balance`, but, as
/// Qthreads' sinc does, `out`'s prior value is accumulated with every
/// part's result (part 0's included).
///
/// # Safety
/// See qloop.h.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn qt_loopaccum_balance_sinc(
    start: usize,
    stop: usize,
    size: usize,
    out: *mut c_void,
    func: QtLooprF,
    argptr: *mut c_void,
    acc: QtAccumF,
) {
    // SAFETY: forwarded contract.
    unsafe {
        accum_balance(
            "qt_loopaccum_balance_sinc",
            start,
            stop,
            size,
            out,
            func,
            argptr,
            acc,
            true,
        )
    }
}

// ---- qt_qsort ----

/// qt_qsort: sorts `array[0 .. length)` ascending in place: one task per
/// worker sorts a near-equal part, then the parts are merged. Doubles are
/// ordered as by `<`, with -0.0 before +0.0 and NaNs by their bits (a
/// negative NaN first, a positive one last), so the result is one order
/// whatever the input.
///
/// # Safety
/// See qloop.h.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn qt_qsort(array: *mut f64, length: usize) {
    boundary_void("qt_qsort", || {
        if length == 0 {
            return Ok(());
        }
        if array.is_null() {
            return Err(Fail::null("qt_qsort", "array"));
        }
        if !array.is_aligned() {
            return Err(Fail::new(
                crate::ffi::error::EINVAL,
                "qt_qsort: `array` is not aligned for a double",
            ));
        }
        require_runtime("qt_qsort")?;
        let parts = crate::query::workers().unwrap_or(1).clamp(1, length);
        let base = array as usize;
        crate::par::coforall(parts, move |i| {
            let (lo, hi) = chunk(0, length, parts, i);
            // SAFETY: the caller promises `length` doubles no one else
            // touches during the call; the parts are disjoint.
            let part =
                unsafe { std::slice::from_raw_parts_mut((base as *mut f64).add(lo), hi - lo) };
            part.sort_unstable_by(f64::total_cmp);
        });
        // SAFETY: as above; the tasks have returned.
        let all = unsafe { std::slice::from_raw_parts_mut(array, length) };
        let mut runs: Vec<(usize, usize)> =
            (0..parts).map(|i| chunk(0, length, parts, i)).collect();
        let mut buf: Vec<f64> = Vec::with_capacity(length);
        while runs.len() > 1 {
            let mut next = Vec::with_capacity(runs.len().div_ceil(2));
            for pair in runs.chunks(2) {
                if let [(a_lo, a_hi), (_, b_hi)] = *pair {
                    merge(&mut all[a_lo..b_hi], a_hi - a_lo, &mut buf);
                    next.push((a_lo, b_hi));
                } else {
                    next.push(pair[0]);
                }
            }
            runs = next;
        }
        Ok(())
    })
}

/// Merges the sorted `v[..mid]` and `v[mid..]` in place, through `buf`.
fn merge(v: &mut [f64], mid: usize, buf: &mut Vec<f64>) {
    buf.clear();
    let (mut i, mut j) = (0, mid);
    while i < mid && j < v.len() {
        if v[j].total_cmp(&v[i]).is_lt() {
            buf.push(v[j]);
            j += 1;
        } else {
            buf.push(v[i]);
            i += 1;
        }
    }
    buf.extend_from_slice(&v[i..mid]);
    buf.extend_from_slice(&v[j..]);
    v.copy_from_slice(buf);
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
