//! `<qthread/allpairs.h>`: a function on every pair of elements of two
//! qarrays. The pairs are cut into blocks (a piece of a segment of the
//! first array x a segment of the second), each a task forked to one of
//! its two segments' owners (`run_placed`); the call waits for all.

use super::qarray::{Owned, QArray, SendPtr, owned, run_placed};
use crate::ffi::error::{Fail, boundary_void};
use crate::ffi::lifecycle::require_runtime;
use std::ffi::c_void;

/// `dist_f`.
pub type DistF = Option<unsafe extern "C" fn(unit1: *const c_void, unit2: *const c_void)>;
/// `dist_out_f`.
pub type DistOutF =
    Option<unsafe extern "C" fn(unit1: *const c_void, unit2: *const c_void, outstore: *mut c_void)>;

/// The function of a call, with its output.
#[derive(Clone, Copy)]
enum Dist {
    Plain(unsafe extern "C" fn(*const c_void, *const c_void)),
    Out {
        f: unsafe extern "C" fn(*const c_void, *const c_void, *mut c_void),
        output: SendPtr<*mut c_void>,
        outsize: usize,
    },
}

/// One block: elements `[lo1, hi1)` of the first array (inside one
/// segment) against segment `seg2` of the second.
struct Block {
    lo1: usize,
    hi1: usize,
    lo2: usize,
    hi2: usize,
}

/// Cuts the pairs into blocks, each with its shepherd.
fn blocks(a1: &Owned, a2: &Owned, shepherds: usize) -> (Vec<Block>, Vec<usize>) {
    let (ss1, ss2) = (a1.public.segment_size, a2.public.segment_size);
    let (n1, n2) = (a1.public.count, a2.public.count);
    let pairs = a1.segments * a2.segments;
    // Enough blocks to give every shepherd one, where the first array allows.
    let split = shepherds.div_ceil(pairs).max(1);
    let (mut out, mut targets) = (Vec::new(), Vec::new());
    for s1 in 0..a1.segments {
        let (lo, hi) = (s1 * ss1, ((s1 + 1) * ss1).min(n1));
        let parts = split.min(hi - lo);
        for p in 0..parts {
            let (lo1, hi1) = super::qloop::chunk(lo, hi, parts, p);
            for s2 in 0..a2.segments {
                let (lo2, hi2) = (s2 * ss2, ((s2 + 1) * ss2).min(n2));
                let shep = if (s1 + p + s2) % 2 == 0 {
                    a1.owner(s1)
                } else {
                    a2.owner(s2)
                };
                out.push(Block { lo1, hi1, lo2, hi2 });
                targets.push(shep);
            }
        }
    }
    (out, targets)
}

/// The body of both calls.
///
/// # Safety
/// The arrays are NULL or live; `dist` may run on any shepherd; an output
/// holds a row of `a2->count * outsize` bytes per element of `a1`.
unsafe fn allpairs(
    call: &str,
    array1: *const QArray,
    array2: *const QArray,
    dist: Dist,
) -> Result<(), Fail> {
    require_runtime(call)?;
    // SAFETY: the caller's contract.
    let a1 = unsafe { owned(call, array1)? };
    // SAFETY: the caller's contract.
    let a2 = unsafe { owned(call, array2)? };
    let (list, targets) = blocks(a1, a2, super::worker_count(false).max(1));
    let (p1, p2) = (SendPtr(array1.cast_mut()), SendPtr(array2.cast_mut()));
    run_placed(call, &targets, move |k| {
        let b = &list[k];
        // SAFETY: the arrays stay live while the call waits for this task.
        let (a1, a2) = unsafe { (&*p1.get().cast::<Owned>(), &*p2.get().cast::<Owned>()) };
        for i in b.lo1..b.hi1 {
            let e1 = a1.elem(i).cast_const().cast::<c_void>();
            for j in b.lo2..b.hi2 {
                let e2 = a2.elem(j).cast_const().cast::<c_void>();
                match dist {
                    // SAFETY: both are elements of live arrays; the caller
                    // promises the function may run on any shepherd.
                    Dist::Plain(f) => unsafe { f(e1, e2) },
                    Dist::Out { f, output, outsize } => {
                        let out = if output.get().is_null() {
                            std::ptr::null_mut()
                        } else {
                            // SAFETY: output holds a row per element of
                            // array1 with count2 * outsize bytes (contract).
                            unsafe { (*output.get().add(i)).cast::<u8>().add(j * outsize).cast() }
                        };
                        // SAFETY: as for Plain; `out` is this pair's own
                        // result (or NULL).
                        unsafe { f(e1, e2, out) }
                    }
                }
            }
        }
    })
}

/// qt_allpairs: `distfunc(&array1[i], &array2[j])` for every pair, in
/// parallel; returns when all are done.
///
/// # Safety
/// See allpairs.h.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn qt_allpairs(
    array1: *const QArray,
    array2: *const QArray,
    distfunc: DistF,
) {
    const CALL: &str = "qt_allpairs";
    boundary_void(CALL, || {
        require_runtime(CALL)?;
        let f = distfunc.ok_or_else(|| Fail::null(CALL, "distfunc"))?;
        // SAFETY: forwarded contract.
        unsafe { allpairs(CALL, array1, array2, Dist::Plain(f)) }
    });
}

/// qt_allpairs_output: `distfunc(&array1[i], &array2[j], output[i] + j *
/// outsize)` for every pair, in parallel; returns when all are done.
///
/// # Safety
/// See allpairs.h.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn qt_allpairs_output(
    array1: *const QArray,
    array2: *const QArray,
    distfunc: DistOutF,
    output: *mut *mut c_void,
    outsize: usize,
) {
    const CALL: &str = "qt_allpairs_output";
    boundary_void(CALL, || {
        require_runtime(CALL)?;
        let f = distfunc.ok_or_else(|| Fail::null(CALL, "distfunc"))?;
        let dist = Dist::Out {
            f,
            output: SendPtr(output),
            outsize,
        };
        // SAFETY: forwarded contract.
        unsafe { allpairs(CALL, array1, array2, dist) }
    });
}
