//! `qt_sinc_t`: Qthreads' counting (and reducing) synchronization object.
//! Tasks `submit`; `wait` blocks until the expected number of submissions
//! arrived, then copies out the reduction of the submitted values.
//!
//! The count lives in the caller's 24 bytes, and the "all arrived" state
//! is a `KeySite` phase in the FEB side table (`ffi/feb`) (full = nothing
//! outstanding; a full phase with nobody waiting has no table entry), so
//! a counting sinc (`sizeof_value == 0`) allocates nothing: a program that
//! never calls `qt_sinc_fini` (Qthreads' own test programs do that) leaks
//! nothing. Only a reducing sinc has a heap part (the op, the initial and
//! the accumulated value), freed by `qt_sinc_fini` / `qt_sinc_destroy`.
//!
//! Protocol. The count changes zero-ness (0 <-> non-zero) only under the
//! phase's stripe lock, together with the phase state, so "phase full"
//! and "count == 0" agree whenever the lock is free. Steps that keep the
//! count non-zero (a submission from c > 1, expecting more while c > 0)
//! are one lock-free CAS. A waiter returns at once if it reads 0
//! (Acquire), else it waits for the phase with a FEB readFF. The last
//! submitter touches no sinc memory after its CAS to 0 (only the table
//! entry, under the lock), so a waiter that saw 0 may reuse or free the
//! sinc at once.

use super::buf::AlignedBuf;
use crate::ffi::error::{self, EINVAL, Fail, boundary_void};
use crate::ffi::feb::full_empty::{self, Op};
use crate::ffi::feb::table::KeySite;
use crate::ffi::lifecycle::require_runtime;
use std::ffi::c_void;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

/// `qt_sinc_op_f`: combines `*src` into `*tgt`.
pub type QtSincOpF = Option<unsafe extern "C" fn(tgt: *mut c_void, src: *const c_void)>;

/// `qt_sinc_t` as declared in `qthread/sinc.h`: 24 opaque bytes holding
/// the count of submissions still expected, a tag that marks the sinc
/// initialised, and the reduction's heap part (null for a counting sinc).
#[repr(C, align(8))]
pub struct QtSinc {
    count: AtomicU64,
    tag: u64,
    reduce: *mut Reduce,
}

const _: () = assert!(std::mem::size_of::<QtSinc>() == 24);
const LIVE: u64 = 0x6361_6e74_7573_5343; // "cantusSC"

/// The heap part of a reducing sinc.
struct Reduce {
    op: unsafe extern "C" fn(*mut c_void, *const c_void),
    initial: AlignedBuf,
    value: Mutex<AlignedBuf>,
}

impl QtSinc {
    fn site(&self) -> KeySite {
        KeySite::phase(self as *const QtSinc as usize)
    }

    /// Bytes per submitted value (0 for a counting sinc).
    pub(crate) fn value_size(&self) -> usize {
        self.reduce().map_or(0, |r| r.initial.len())
    }

    fn reduce(&self) -> Option<&Reduce> {
        // SAFETY: non-null `reduce` came from Box::into_raw in init and is
        // freed only by fini/destroy, which the caller does not overlap
        // with other calls on the sinc (sinc.h).
        unsafe { self.reduce.as_ref() }
    }
}

/// The reduction part for `size` bytes, or why it cannot be made.
///
/// # Safety
/// `initial` is NULL or holds `size` readable bytes.
unsafe fn make_reduce(
    call: &str,
    size: usize,
    initial: *const c_void,
    op: QtSincOpF,
) -> Result<*mut Reduce, Fail> {
    if size == 0 {
        return Ok(std::ptr::null_mut());
    }
    let (Some(op), false) = (op, initial.is_null()) else {
        return Err(Fail::new(
            EINVAL,
            format!("{call}: a sinc with sizeof_value > 0 needs an initial value and an op"),
        ));
    };
    // SAFETY: forwarded contract.
    let initial = unsafe { AlignedBuf::copy_of(initial.cast(), size) };
    Ok(Box::into_raw(Box::new(Reduce {
        op,
        value: Mutex::new(initial.clone()),
        initial,
    })))
}

/// Sets the count to `expect` and the phase to match, under the lock.
fn arm(s: &QtSinc, expect: usize) {
    full_empty::with_place(&s.site(), |p, wake| {
        s.count.store(expect as u64, Ordering::Relaxed);
        full_empty::set_locked(p, expect == 0, None, wake);
    });
}

/// The live sinc behind `s`, or why there is none.
///
/// # Safety
/// `s` is NULL or points at a readable `qt_sinc_t`.
pub(crate) unsafe fn sinc_at<'a>(call: &str, s: *const QtSinc) -> Result<&'a QtSinc, Fail> {
    // SAFETY: per the contract.
    let s = unsafe { s.as_ref() }.ok_or_else(|| Fail::null(call, "sinc"))?;
    if s.tag != LIVE {
        return Err(Fail::new(
            EINVAL,
            format!("{call}: the sinc is not initialised (or was destroyed)"),
        ));
    }
    Ok(s)
}

/// qt_sinc_init: initialises a caller-allocated sinc.
///
/// # Safety
/// See sinc.h.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn qt_sinc_init(
    sinc: *mut QtSinc,
    sizeof_value: usize,
    initial_value: *const c_void,
    op: QtSincOpF,
    expect: usize,
) {
    const CALL: &str = "qt_sinc_init";
    boundary_void(CALL, || {
        if sinc.is_null() {
            return Err(Fail::null(CALL, "sinc"));
        }
        if sinc as usize % 8 != 0 {
            return Err(Fail::new(
                error::EALIGN,
                format!("{CALL}: `sinc` = {sinc:p} is not aligned to 8 bytes"),
            ));
        }
        require_runtime(CALL)?;
        // SAFETY: the caller promises initial_value holds sizeof_value bytes.
        let reduce = unsafe { make_reduce(CALL, sizeof_value, initial_value, op)? };
        // SAFETY: non-null, aligned, writable per the contract; nobody else
        // uses the sinc during init.
        unsafe {
            sinc.write(QtSinc {
                count: AtomicU64::new(0),
                tag: LIVE,
                reduce,
            })
        };
        // SAFETY: just written.
        arm(unsafe { &*sinc }, expect);
        Ok(())
    })
}

/// qt_sinc_create: allocates and initialises a sinc; NULL on error.
///
/// # Safety
/// See sinc.h.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn qt_sinc_create(
    sizeof_value: usize,
    initial_value: *const c_void,
    op: QtSincOpF,
    expect: usize,
) -> *mut QtSinc {
    const CALL: &str = "qt_sinc_create";
    let mut out = std::ptr::null_mut();
    boundary_void(CALL, || {
        require_runtime(CALL)?;
        // SAFETY: the caller promises initial_value holds sizeof_value bytes.
        let reduce = unsafe { make_reduce(CALL, sizeof_value, initial_value, op)? };
        let s = Box::new(QtSinc {
            count: AtomicU64::new(0),
            tag: LIVE,
            reduce,
        });
        arm(&s, expect);
        out = Box::into_raw(s);
        Ok(())
    });
    out
}

/// qt_sinc_expect: expects `count` more submissions.
///
/// # Safety
/// See sinc.h.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn qt_sinc_expect(sinc: *mut QtSinc, count: usize) {
    const CALL: &str = "qt_sinc_expect";
    boundary_void(CALL, || {
        // SAFETY: forwarded contract.
        let s = unsafe { sinc_at(CALL, sinc)? };
        require_runtime(CALL)?;
        let n = count as u64;
        if n == 0 {
            return Ok(());
        }
        loop {
            let c = s.count.load(Ordering::Relaxed);
            let Some(sum) = c.checked_add(n) else {
                return Err(Fail::new(EINVAL, format!("{CALL}: the count overflows")));
            };
            if c > 0 {
                // Stays non-zero: no phase change, one CAS.
                if s.count
                    .compare_exchange_weak(c, sum, Ordering::Relaxed, Ordering::Relaxed)
                    .is_ok()
                {
                    return Ok(());
                }
                continue;
            }
            // 0 -> n: with the phase, under the lock.
            let armed = full_empty::with_place(&s.site(), |p, wake| {
                let ok = s
                    .count
                    .compare_exchange(0, n, Ordering::Relaxed, Ordering::Relaxed)
                    .is_ok();
                if ok {
                    full_empty::set_locked(p, false, None, wake);
                }
                ok
            });
            if armed {
                return Ok(());
            }
        }
    })
}

/// One submission to a live sinc: `value` (sizeof_value bytes, or NULL) is
/// reduced in first, then the count goes down. Also the return path of
/// `qthread_spawn(..., QTHREAD_SPAWN_RET_SINC)`.
///
/// A raw pointer, not a reference: a waiter may free the sinc as soon as
/// the count is 0, while this call is still running (it no longer
/// touches the sinc's memory then).
///
/// # Safety
/// `s` is a live sinc (checked with [`sinc_at`]) until this call's
/// decrement; `value` is NULL or holds the sinc's sizeof_value bytes.
pub(crate) unsafe fn submit(
    call: &str,
    s: *const QtSinc,
    value: *const c_void,
) -> Result<(), Fail> {
    // SAFETY: live until our decrement, per the contract; these
    // references are not used after it.
    let (count, reduce) = unsafe { (&(*s).count, (*s).reduce()) };
    let site = KeySite::phase(s as usize);
    if count.load(Ordering::Relaxed) == 0 {
        return Err(too_many(call));
    }
    if let (Some(r), false) = (reduce, value.is_null()) {
        let mut acc = r.value.lock().unwrap_or_else(|e| e.into_inner());
        // SAFETY: the caller promises `value` holds sizeof_value bytes;
        // `acc` holds as many, aligned for any C type; `op` combines two
        // such values (sinc.h).
        unsafe { (r.op)(acc.as_mut_ptr().cast(), value) };
    }
    count_down(call, count, site, 1)
}

/// `n` submissions without values to a live sinc at once: what `n` calls
/// of [`submit`] with NULL would do (those past the expected count are
/// refused). The return path of `QTHREAD_SPAWN_RET_SINC_VOID` tasks,
/// whose submissions their worker holds back and makes together
/// (`sched/worker/deferred.rs`).
///
/// # Safety
/// As for [`submit`].
pub(crate) unsafe fn submit_many(call: &str, s: *const QtSinc, n: u64) -> Result<(), Fail> {
    // SAFETY: live until our decrement, per the contract; not used after.
    let count = unsafe { &(*s).count };
    count_down(call, count, KeySite::phase(s as usize), n)
}

/// Takes `n` (at least 1) from a sinc's count, the step to 0 together
/// with its phase under the lock; refuses what goes past 0. Touches no
/// sinc memory after the step to 0.
fn count_down(call: &str, count: &AtomicU64, site: KeySite, n: u64) -> Result<(), Fail> {
    loop {
        let c = count.load(Ordering::Relaxed);
        if c == 0 {
            return Err(too_many(call));
        }
        if c > n {
            // Release: this submission's effects (the reduction) travel in
            // the count's release sequence to whoever sees 0.
            if count
                .compare_exchange_weak(c, c - n, Ordering::Release, Ordering::Relaxed)
                .is_ok()
            {
                return Ok(());
            }
            continue;
        }
        // The last ones: c -> 0 together with the phase, under the lock.
        // After the CAS only the table entry is touched, never the sinc.
        let done = full_empty::with_place(&site, |p, wake| {
            // AcqRel: Acquire takes in every earlier submitter's Release
            // (the release sequence), Release hands all of it to a waiter
            // that loads 0 (Acquire); woken waiters are ordered by the wake.
            let ok = count
                .compare_exchange(c, 0, Ordering::AcqRel, Ordering::Relaxed)
                .is_ok();
            if ok {
                full_empty::set_locked(p, true, None, wake);
            }
            ok
        });
        if done {
            // More than were expected: the rest are refused.
            return if c == n { Ok(()) } else { Err(too_many(call)) };
        }
    }
}

fn too_many(call: &str) -> Fail {
    Fail::new(
        error::ECONTEXT,
        format!(
            "{call}: more submissions than expected; this one is ignored \
             (call qt_sinc_expect first)"
        ),
    )
}

/// qt_sinc_submit: one submission, with `value` reduced in if the sinc
/// reduces.
///
/// # Safety
/// See sinc.h.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn qt_sinc_submit(sinc: *mut QtSinc, value: *const c_void) {
    const CALL: &str = "qt_sinc_submit";
    boundary_void(CALL, || {
        // SAFETY: forwarded contract.
        unsafe { sinc_at(CALL, sinc)? };
        require_runtime(CALL)?;
        // SAFETY: checked live; `value` per the contract.
        unsafe { submit(CALL, sinc, value) }
    })
}

/// qt_sinc_wait: waits for every expected submission; copies the result
/// to `target` (if the sinc reduces and `target` is not NULL).
///
/// # Safety
/// See sinc.h.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn qt_sinc_wait(sinc: *mut QtSinc, target: *mut c_void) {
    const CALL: &str = "qt_sinc_wait";
    boundary_void(CALL, || {
        // SAFETY: forwarded contract.
        let s = unsafe { sinc_at(CALL, sinc)? };
        require_runtime(CALL)?;
        // Acquire pairs with the last submitter's AcqRel CAS to 0.
        if s.count.load(Ordering::Acquire) != 0 {
            // Blocks until the phase is full (count 0); the stripe lock or
            // the wake orders the submitters' effects before we go on.
            full_empty::perform(&s.site(), Op::ReadFF, 0);
        }
        if let (Some(r), false) = (s.reduce(), target.is_null()) {
            let acc = r.value.lock().unwrap_or_else(|e| e.into_inner());
            // SAFETY: the caller promises `target` has room for
            // sizeof_value bytes; `acc` holds that many.
            unsafe { std::ptr::copy_nonoverlapping(acc.as_ptr(), target.cast::<u8>(), acc.len()) };
        }
        Ok(())
    })
}

/// qt_sinc_reset: restores the initial value and expects `expect`
/// submissions (only when none are outstanding).
///
/// # Safety
/// See sinc.h.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn qt_sinc_reset(sinc: *mut QtSinc, expect: usize) {
    const CALL: &str = "qt_sinc_reset";
    boundary_void(CALL, || {
        // SAFETY: forwarded contract.
        let s = unsafe { sinc_at(CALL, sinc)? };
        require_runtime(CALL)?;
        // The value's lock first (never inside the stripe lock: a
        // submitter may hold it while running `op`), so no submission can
        // reduce into the old value once the count is armed again.
        let mut value = s
            .reduce()
            .map(|r| (r, r.value.lock().unwrap_or_else(|e| e.into_inner())));
        full_empty::with_place(&s.site(), |p, wake| {
            if s.count.load(Ordering::Acquire) != 0 {
                return Err(Fail::new(
                    error::EBUSY,
                    format!("{CALL}: submissions are still outstanding; reset ignored"),
                ));
            }
            if let Some((r, v)) = &mut value {
                // Same length: copies without allocating.
                v.clone_from(&r.initial);
            }
            s.count.store(expect as u64, Ordering::Relaxed);
            full_empty::set_locked(p, expect == 0, None, wake);
            Ok(())
        })
    })
}

/// Leaves the table without an entry for the sinc, marks it dead and
/// frees its heap part.
///
/// # Safety
/// `s` points at a `qt_sinc_t` nobody else uses during the call.
unsafe fn release(call: &str, s: *mut QtSinc) -> Result<(), Fail> {
    // SAFETY: forwarded contract.
    let live = unsafe { sinc_at(call, s)? };
    full_empty::with_place(&live.site(), |p, wake| {
        if !p.queue().is_empty() {
            return Err(Fail::new(
                error::EBUSY,
                format!("{call}: tasks or threads still wait on the sinc; not freed"),
            ));
        }
        // Full with nobody waiting: the entry goes away.
        full_empty::set_locked(p, true, None, wake);
        Ok(())
    })?;
    // SAFETY: per the contract `s` is live and unshared; `reduce` came
    // from Box::into_raw (or is null) and is freed once, here.
    unsafe {
        let reduce = (*s).reduce;
        (*s).tag = 0;
        (*s).reduce = std::ptr::null_mut();
        if !reduce.is_null() {
            drop(Box::from_raw(reduce));
        }
    }
    Ok(())
}

/// qt_sinc_fini: frees what qt_sinc_init allocated.
///
/// # Safety
/// See sinc.h.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn qt_sinc_fini(sinc: *mut QtSinc) {
    // SAFETY: forwarded contract.
    boundary_void("qt_sinc_fini", || unsafe { release("qt_sinc_fini", sinc) })
}

/// qt_sinc_destroy: frees a sinc from qt_sinc_create.
///
/// # Safety
/// See sinc.h.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn qt_sinc_destroy(sinc: *mut QtSinc) {
    boundary_void("qt_sinc_destroy", || {
        // SAFETY: forwarded contract.
        unsafe { release("qt_sinc_destroy", sinc)? };
        // SAFETY: qt_sinc_create made `sinc` with Box::into_raw.
        drop(unsafe { Box::from_raw(sinc) });
        Ok(())
    })
}
