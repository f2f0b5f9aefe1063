//! `qt_sinc_t`: Qthreads' counting (and reducing) synchronization object.
//! Tasks `submit`; `wait` blocks until the expected number of submissions
//! arrived, then copies out the reduction of the submitted values. The
//! count is a cantus end count; the reduction runs under a mutex.

use crate::ffi::error::{self, EINVAL, Fail, boundary_void};
use crate::ffi::lifecycle::require_runtime;
use crate::sync::end_count::EndCount;
use crate::sync::wait::BlockKind;
use std::ffi::c_void;
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

/// `qt_sinc_op_f`: combines `*src` into `*tgt`.
pub type QtSincOpF = Option<unsafe extern "C" fn(tgt: *mut c_void, src: *const c_void)>;

/// `qt_sinc_t` as declared in `qthread/sinc.h`: 24 opaque bytes, holding
/// a pointer to the [`Sinc`] and a tag that marks it initialised.
#[repr(C, align(8))]
pub struct QtSinc {
    inner: *mut Sinc,
    tag: u64,
    _reserved: u64,
}

const _: () = assert!(std::mem::size_of::<QtSinc>() == 24);
const LIVE: u64 = 0x6361_6e74_7573_5343; // "cantusSC"

/// The sinc itself.
pub struct Sinc {
    size: usize,
    op: QtSincOpF,
    initial: Vec<u8>,
    value: Mutex<Vec<u8>>,
    /// Submissions still expected (validates against over-submission).
    remaining: AtomicUsize,
    count: EndCount,
}

impl Sinc {
    fn new(
        call: &str,
        size: usize,
        initial: *const c_void,
        op: QtSincOpF,
        expect: usize,
    ) -> Result<Sinc, Fail> {
        if size > 0 && (op.is_none() || initial.is_null()) {
            return Err(Fail::new(
                EINVAL,
                format!("{call}: a sinc with sizeof_value > 0 needs an initial value and an op"),
            ));
        }
        let initial = if size > 0 {
            // SAFETY: the caller promises `initial` holds sizeof_value bytes.
            unsafe { std::slice::from_raw_parts(initial.cast::<u8>(), size) }.to_vec()
        } else {
            Vec::new()
        };
        Ok(Sinc {
            size,
            op,
            value: Mutex::new(initial.clone()),
            initial,
            remaining: AtomicUsize::new(expect),
            count: EndCount::new(expect),
        })
    }
}

/// The live sinc behind `s`, or why there is none.
///
/// # Safety
/// `s` is NULL or points at a readable `qt_sinc_t`.
unsafe fn sinc_at<'a>(call: &str, s: *const QtSinc) -> Result<&'a Sinc, Fail> {
    // SAFETY: per the contract.
    let s = unsafe { s.as_ref() }.ok_or_else(|| Fail::null(call, "sinc"))?;
    if s.tag != LIVE || s.inner.is_null() {
        return Err(Fail::new(
            EINVAL,
            format!("{call}: the sinc is not initialised (or was destroyed)"),
        ));
    }
    // SAFETY: a LIVE tag means `inner` came from Box::into_raw in init and
    // has not been freed.
    Ok(unsafe { &*s.inner })
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
    boundary_void("qt_sinc_init", || {
        if sinc.is_null() {
            return Err(Fail::null("qt_sinc_init", "sinc"));
        }
        require_runtime("qt_sinc_init")?;
        let s = Sinc::new("qt_sinc_init", sizeof_value, initial_value, op, expect)?;
        let q = QtSinc {
            inner: Box::into_raw(Box::new(s)),
            tag: LIVE,
            _reserved: 0,
        };
        // SAFETY: non-null, writable per the contract.
        unsafe { sinc.write(q) };
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
    let mut out = std::ptr::null_mut();
    boundary_void("qt_sinc_create", || {
        require_runtime("qt_sinc_create")?;
        let s = Sinc::new("qt_sinc_create", sizeof_value, initial_value, op, expect)?;
        out = Box::into_raw(Box::new(QtSinc {
            inner: Box::into_raw(Box::new(s)),
            tag: LIVE,
            _reserved: 0,
        }));
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
    boundary_void("qt_sinc_expect", || {
        // SAFETY: forwarded contract.
        let s = unsafe { sinc_at("qt_sinc_expect", sinc)? };
        require_runtime("qt_sinc_expect")?;
        s.remaining.fetch_add(count, Ordering::Relaxed);
        s.count.add(count);
        Ok(())
    })
}

/// qt_sinc_submit: one submission, with `value` reduced in if the sinc
/// reduces.
///
/// # Safety
/// See sinc.h.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn qt_sinc_submit(sinc: *mut QtSinc, value: *const c_void) {
    boundary_void("qt_sinc_submit", || {
        // SAFETY: forwarded contract.
        let s = unsafe { sinc_at("qt_sinc_submit", sinc)? };
        require_runtime("qt_sinc_submit")?;
        s.remaining
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| n.checked_sub(1))
            .map_err(|_| {
                Fail::new(
                    error::ECONTEXT,
                    "qt_sinc_submit: more submissions than expected; this one is ignored \
                     (call qt_sinc_expect first)",
                )
            })?;
        if s.size > 0 && !value.is_null() {
            if let Some(op) = s.op {
                let mut acc = s.value.lock().unwrap_or_else(|e| e.into_inner());
                // SAFETY: the caller promises `value` holds sizeof_value
                // bytes and `op` combines two such values.
                unsafe { op(acc.as_mut_ptr().cast(), value) };
            }
        }
        // Last access to `s` (a waiter may destroy the sinc once the count
        // is zero): the end count's done_one is written for exactly this.
        s.count.done_one();
        Ok(())
    })
}

/// qt_sinc_wait: waits for every expected submission; copies the result
/// to `target` (if the sinc reduces and `target` is not NULL).
///
/// # Safety
/// See sinc.h.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn qt_sinc_wait(sinc: *mut QtSinc, target: *mut c_void) {
    boundary_void("qt_sinc_wait", || {
        // SAFETY: forwarded contract.
        let s = unsafe { sinc_at("qt_sinc_wait", sinc)? };
        require_runtime("qt_sinc_wait")?;
        if !s.count.is_done() {
            s.count.wait_blocking(BlockKind::GroupWait);
        }
        if s.size > 0 && !target.is_null() {
            let acc = s.value.lock().unwrap_or_else(|e| e.into_inner());
            // SAFETY: the caller promises `target` has room for
            // sizeof_value bytes.
            unsafe { std::ptr::copy_nonoverlapping(acc.as_ptr(), target.cast::<u8>(), s.size) };
        }
        Ok(())
    })
}

/// qt_sinc_reset: restores the initial value and expects `expect`
/// submissions (only when nobody waits and none are outstanding).
///
/// # Safety
/// See sinc.h.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn qt_sinc_reset(sinc: *mut QtSinc, expect: usize) {
    boundary_void("qt_sinc_reset", || {
        // SAFETY: forwarded contract.
        let s = unsafe { sinc_at("qt_sinc_reset", sinc)? };
        require_runtime("qt_sinc_reset")?;
        if !s.count.is_done() {
            return Err(Fail::new(
                error::EBUSY,
                "qt_sinc_reset: submissions are still outstanding; reset ignored",
            ));
        }
        *s.value.lock().unwrap_or_else(|e| e.into_inner()) = s.initial.clone();
        s.remaining.store(expect, Ordering::Relaxed);
        s.count.add(expect);
        Ok(())
    })
}

/// Frees the sinc behind `s` and marks it dead.
///
/// # Safety
/// `s` points at a live `qt_sinc_t` nobody else uses.
unsafe fn release(call: &str, s: *mut QtSinc) -> Result<(), Fail> {
    // SAFETY: forwarded contract.
    let inner = unsafe { sinc_at(call, s)? } as *const Sinc as *mut Sinc;
    // SAFETY: per the contract `s` is live and unshared.
    unsafe {
        (*s).tag = 0;
        (*s).inner = std::ptr::null_mut();
        drop(Box::from_raw(inner));
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
