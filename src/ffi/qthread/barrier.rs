//! `qt_barrier_t` (`qthread/barrier.h`): Qthreads' reusable barrier for a
//! fixed number of participants, tasks or outside threads.
//!
//! The barrier's phase is a value-less full/empty state in the FEB side
//! table (`KeySite::phase` of the barrier's address, `ffi/feb`), empty while the
//! barrier fills. Under the phase's stripe lock an arrival counts itself;
//! all but the last queue a readFF and block (a task suspends, its worker
//! runs other tasks; an outside thread blocks as a thread); the last one
//! fills the phase, which completes every queued readFF, and empties it
//! again for the next round, all in one critical section. So a woken
//! participant that enters again at once waits for the next round, and
//! nobody can be released twice or missed.

use crate::ffi::error::{self, EINVAL, Fail, boundary_void};
use crate::ffi::feb::full_empty::{self, Op};
use crate::ffi::feb::table::KeySite;
use crate::ffi::lifecycle::require_runtime;
use crate::sync::full_empty::Place;
use std::ffi::c_uint;
use std::sync::atomic::{AtomicUsize, Ordering};

/// `qt_barrier_btype`: `REGION_BARRIER` or `LOOP_BARRIER` (the same barrier
/// in cantus).
pub type QtBarrierBtype = c_uint;

const REGION_BARRIER: QtBarrierBtype = 0;
const LOOP_BARRIER: QtBarrierBtype = 1;

/// `qt_barrier_t`: opaque to C.
pub struct QtBarrier {
    /// Participants per round. Read and written under the phase's lock.
    size: AtomicUsize,
    /// Arrivals in the current round. Under the phase's lock.
    arrived: AtomicUsize,
}

impl QtBarrier {
    fn site(&self) -> KeySite {
        KeySite::phase(self as *const QtBarrier as usize)
    }
}

/// The barrier behind `b`.
///
/// # Safety
/// `b` is NULL or came from `qt_barrier_create` and is not destroyed.
unsafe fn barrier_at<'a>(call: &str, b: *const QtBarrier) -> Result<&'a QtBarrier, Fail> {
    // SAFETY: per the contract.
    unsafe { b.as_ref() }.ok_or_else(|| Fail::null(call, "b"))
}

/// Under the lock: ends the round if `arrived` reached `size`.
fn release_if_complete(
    b: &QtBarrier,
    p: &mut dyn Place<Value = u64>,
    wake: &mut full_empty::WakeList<u64>,
) -> bool {
    let arrived = b.arrived.load(Ordering::Relaxed);
    if arrived == 0 || arrived < b.size.load(Ordering::Relaxed) {
        return false;
    }
    b.arrived.store(0, Ordering::Relaxed);
    // Full completes every queued readFF; empty opens the next round.
    full_empty::set_locked(p, true, None, wake);
    full_empty::set_locked(p, false, None, wake);
    true
}

/// qt_barrier_create: a barrier for `max_threads` participants; NULL on
/// error (`max_threads` 0, an unknown type, no runtime).
#[unsafe(no_mangle)]
pub extern "C" fn qt_barrier_create(max_threads: usize, btype: QtBarrierBtype) -> *mut QtBarrier {
    const CALL: &str = "qt_barrier_create";
    let mut out = std::ptr::null_mut();
    boundary_void(CALL, || {
        require_runtime(CALL)?;
        if max_threads == 0 {
            return Err(Fail::new(EINVAL, format!("{CALL}: max_threads is 0")));
        }
        if btype != REGION_BARRIER && btype != LOOP_BARRIER {
            return Err(Fail::new(
                EINVAL,
                format!("{CALL}: type {btype} is neither REGION_BARRIER nor LOOP_BARRIER"),
            ));
        }
        let b = Box::new(QtBarrier {
            size: AtomicUsize::new(max_threads),
            arrived: AtomicUsize::new(0),
        });
        // The first round is open: phase empty.
        full_empty::set(&b.site(), false, None);
        out = Box::into_raw(b);
        Ok(())
    });
    out
}

/// qt_barrier_enter: waits until all participants of this round entered.
///
/// # Safety
/// See barrier.h.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn qt_barrier_enter(b: *mut QtBarrier) {
    const CALL: &str = "qt_barrier_enter";
    boundary_void(CALL, || {
        // SAFETY: forwarded contract.
        let b = unsafe { barrier_at(CALL, b)? };
        require_runtime(CALL)?;
        enter(b);
        Ok(())
    })
}

fn enter(b: &QtBarrier) {
    full_empty::wait_if(&b.site(), Op::ReadFF, |p, wake| {
        b.arrived.fetch_add(1, Ordering::Relaxed);
        // The last arrival releases the round and goes on; the others wait.
        !release_if_complete(b, p, wake)
    });
}

/// qt_barrier_enter_id: as `qt_barrier_enter`; `id` (the participant's
/// number, below the size) is checked and otherwise unused.
///
/// # Safety
/// See barrier.h.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn qt_barrier_enter_id(b: *mut QtBarrier, id: usize) {
    const CALL: &str = "qt_barrier_enter_id";
    boundary_void(CALL, || {
        // SAFETY: forwarded contract.
        let b = unsafe { barrier_at(CALL, b)? };
        require_runtime(CALL)?;
        let size = full_empty::with_place(&b.site(), |_, _| b.size.load(Ordering::Relaxed));
        if id >= size {
            return Err(Fail::new(
                EINVAL,
                format!("{CALL}: id {id} is not below the barrier's size {size}; not entered"),
            ));
        }
        enter(b);
        Ok(())
    })
}

/// qt_barrier_resize: sets the number of participants per round; if as
/// many as the new size already wait, they are released.
///
/// # Safety
/// See barrier.h.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn qt_barrier_resize(b: *mut QtBarrier, size: usize) {
    const CALL: &str = "qt_barrier_resize";
    boundary_void(CALL, || {
        // SAFETY: forwarded contract.
        let b = unsafe { barrier_at(CALL, b)? };
        require_runtime(CALL)?;
        if size == 0 {
            return Err(Fail::new(EINVAL, format!("{CALL}: size is 0")));
        }
        full_empty::with_place(&b.site(), |p, wake| {
            b.size.store(size, Ordering::Relaxed);
            release_if_complete(b, p, wake);
        });
        Ok(())
    })
}

/// qt_barrier_destroy: frees the barrier (refused while anyone waits).
///
/// # Safety
/// See barrier.h.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn qt_barrier_destroy(b: *mut QtBarrier) {
    const CALL: &str = "qt_barrier_destroy";
    boundary_void(CALL, || {
        // SAFETY: forwarded contract.
        let live = unsafe { barrier_at(CALL, b)? };
        full_empty::with_place(&live.site(), |p, wake| {
            if !p.queue().is_empty() {
                return Err(Fail::new(
                    error::EBUSY,
                    format!("{CALL}: tasks or threads wait in the barrier; not freed"),
                ));
            }
            // Full with nobody waiting: the table entry goes away.
            full_empty::set_locked(p, true, None, wake);
            Ok(())
        })?;
        // SAFETY: qt_barrier_create made `b` with Box::into_raw; destroyed
        // once (contract).
        drop(unsafe { Box::from_raw(b) });
        Ok(())
    })
}

/// `qt_barrier_dtype`: what `qt_barrier_dump` shows (`UPLOCK`,
/// `DOWNLOCK`, `BOTHLOCKS`; all the same here).
pub type QtBarrierDtype = c_uint;

/// qt_barrier_dump: prints the barrier's state on stdout, for debugging:
/// its participants per round and how many have entered the current
/// round (read without the lock, so a snapshot). Qthreads prints its log
/// barrier's lock words; cantus's barrier has none, so every `dt` prints
/// the same line. A NULL barrier is reported on stderr.
///
/// # Safety
/// See barrier.h.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn qt_barrier_dump(b: *mut QtBarrier, dt: QtBarrierDtype) {
    boundary_void("qt_barrier_dump", || {
        // SAFETY: forwarded contract.
        let b = unsafe { barrier_at("qt_barrier_dump", b)? };
        if dt > 2 {
            return Err(Fail::new(
                EINVAL,
                format!("qt_barrier_dump: dt = {dt} is not UPLOCK, DOWNLOCK or BOTHLOCKS"),
            ));
        }
        use std::io::Write;
        let mut out = std::io::stdout().lock();
        // Debug output: a failed write is not worth reporting.
        let _ = writeln!(
            out,
            "qt_barrier {:p}: size {}, entered {}",
            b as *const QtBarrier,
            b.size.load(Ordering::Relaxed),
            b.arrived.load(Ordering::Relaxed)
        );
        let _ = out.flush();
        Ok(())
    })
}
