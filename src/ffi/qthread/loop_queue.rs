//! Qthreads' loop queues (`qt_loop_queue_*` in `<qthread/qloop.h>`): a
//! loop whose iterations a set of worker tasks, one per shepherd, pull in
//! chunks from one shared counter (self-scheduling), so a slow or late
//! worker takes fewer chunks. The kind picks the chunk sizes: `CHUNK` a
//! fixed size (`qt_loop_queue_setchunk`), `GUIDED` the remaining
//! iterations over the workers, `FACTORED` batches of equal chunks that
//! each cover half of what remains, `TIMED` sizes from each worker's
//! measured time per iteration. `qt_loop_queue_addworker` lets another
//! shepherd join a loop; `run` waits for every joined worker (one end
//! count) and frees the handle.

use super::{NO_SHEPHERD, place, worker_count};
use crate::ffi::error::{self, EINVAL, Fail, boundary_void};
use crate::ffi::lifecycle::require_runtime;
use crate::ffi::qthread::qloop::QtLoopF;
use crate::ffi::tasks::Arg;
use crate::sync::end_count::EndCount;
use crate::sync::wait::BlockKind;
use std::ffi::{c_int, c_ushort, c_void};
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;

/// `qt_loop_queue_type` (a C enum: `CHUNK`, `GUIDED`, `FACTORED`, `TIMED`).
pub type QtLoopQueueType = c_int;

/// How chunk sizes are chosen.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Kind {
    /// `CHUNK`: a fixed size.
    Chunk,
    /// `GUIDED`: `max(1, remaining / workers)`.
    Guided,
    /// `FACTORED`: batches of `workers` chunks of `ceil(remaining / (2 ×
    /// workers))`, the size fixed at the batch's start.
    Factored,
    /// `TIMED`: about [`TIMED_TARGET_NS`] of work per chunk.
    Timed,
}

impl Kind {
    fn from_c(t: QtLoopQueueType) -> Option<Kind> {
        match t {
            0 => Some(Kind::Chunk),
            1 => Some(Kind::Guided),
            2 => Some(Kind::Factored),
            3 => Some(Kind::Timed),
            _ => None,
        }
    }
}

/// What a `TIMED` chunk should take: long enough that claiming and
/// timing cost well under 1%, short enough to balance the tail.
const TIMED_TARGET_NS: f64 = 20_000.0;

/// `FACTORED`'s claim state (a batch is decided as a whole, under a lock:
/// claims are few, a logarithmic number of batches).
struct Factored {
    next: usize,
    /// Chunks left in the current batch.
    batch_left: usize,
    /// The current batch's chunk size.
    size: usize,
}

/// `qqloop_handle_t`: a loop queue.
pub struct QqloopHandle {
    kind: Kind,
    stop: usize,
    func: unsafe extern "C" fn(usize, usize, *mut c_void),
    arg: Arg,
    /// The first unclaimed iteration (`CHUNK`, `GUIDED`, `TIMED`).
    next: AtomicUsize,
    /// `CHUNK`'s size.
    chunk: AtomicUsize,
    /// `FACTORED`'s state (its `next` is the first unclaimed iteration).
    factored: Mutex<Factored>,
    /// Workers that joined the loop (what `GUIDED`, `FACTORED` and
    /// `TIMED` divide by), as Qthreads' active shepherds.
    workers: AtomicUsize,
    /// Joined workers not finished: `run` waits for zero, then frees.
    running: EndCount,
}

/// A `TIMED` worker's measured time per iteration (ns), if any yet.
type Rate = Option<f64>;

impl QqloopHandle {
    /// The joined workers (at least 1).
    fn worker_div(&self) -> usize {
        // Relaxed: a divisor for chunk sizes, any recent value will do.
        self.workers.load(Ordering::Relaxed).max(1)
    }

    /// Claims the next chunk: `[lo, hi)`, never empty, or `None` when all
    /// iterations are claimed.
    fn claim(&self, rate: Rate) -> Option<(usize, usize)> {
        if self.kind == Kind::Factored {
            let mut f = self.factored.lock().unwrap_or_else(|p| p.into_inner());
            if f.next >= self.stop {
                return None;
            }
            let remaining = self.stop - f.next;
            if f.batch_left == 0 {
                let p = self.worker_div();
                f.size = remaining.div_ceil(2 * p).max(1);
                f.batch_left = p;
            }
            let lo = f.next;
            let n = f.size.min(remaining);
            f.batch_left -= 1;
            f.next += n;
            return Some((lo, lo + n));
        }
        // Relaxed throughout: the counter only hands out disjoint ranges;
        // what the bodies write is ordered by the end count.
        let mut lo = self.next.load(Ordering::Relaxed);
        loop {
            if lo >= self.stop {
                return None;
            }
            let remaining = self.stop - lo;
            let want = match self.kind {
                Kind::Chunk => self.chunk.load(Ordering::Relaxed),
                Kind::Guided => remaining / self.worker_div(),
                Kind::Timed => {
                    let cap = remaining / (2 * self.worker_div()) + 1;
                    match rate {
                        None => 1,
                        Some(ns) => ((TIMED_TARGET_NS / ns) as usize).min(cap),
                    }
                }
                Kind::Factored => unreachable!("handled above"),
            };
            let n = want.clamp(1, remaining);
            match self
                .next
                .compare_exchange_weak(lo, lo + n, Ordering::Relaxed, Ordering::Relaxed)
            {
                Ok(_) => return Some((lo, lo + n)),
                Err(now) => lo = now,
            }
        }
    }

    /// Whether every iteration has been claimed.
    fn exhausted(&self) -> bool {
        if self.kind == Kind::Factored {
            let f = self.factored.lock().unwrap_or_else(|p| p.into_inner());
            f.next >= self.stop
        } else {
            self.next.load(Ordering::Relaxed) >= self.stop
        }
    }

    /// A worker: claims and runs chunks until none are left.
    fn work(&self) {
        let mut rate: Rate = None;
        while let Some((lo, hi)) = self.claim(rate) {
            let t0 = (self.kind == Kind::Timed).then(Instant::now);
            let (f, arg) = (self.func, self.arg);
            // SAFETY: the caller of qt_loop_queue_create promises func may
            // run concurrently with its argument on any worker, for any
            // range within [start, stop).
            crate::sched::body_may_go_away(|| unsafe { f(lo, hi, arg.get()) });
            if let Some(t0) = t0 {
                let ns = t0.elapsed().as_nanos().max(1) as f64;
                rate = Some(ns / (hi - lo) as f64);
            }
        }
    }
}

/// A joined worker's hold on its loop: finishing (or never starting)
/// counts it out of `running`. The handle stays alive while any hold
/// does (`run` waits for all of them).
struct Joined(*const QqloopHandle);

// SAFETY: the handle is shared by its workers (atomics, a mutex, the end
// count, and the user's function and argument, which the header lets run
// on any worker), and it outlives every `Joined` (see above).
unsafe impl Send for Joined {}

impl Drop for Joined {
    fn drop(&mut self) {
        // SAFETY: the handle is alive while this hold exists; done_one is
        // this hold's last access to it.
        unsafe { (*self.0).running.done_one() };
    }
}

/// Starts one worker of `q` on (aimed at) shepherd `shep`; the caller
/// counted it in `q.workers` already (all of a run's workers before the
/// first starts, so none sizes its chunks for fewer workers).
fn join(call: &str, q: &QqloopHandle, shep: c_ushort) -> Result<(), Fail> {
    q.running.add(1);
    let hold = Joined(q);
    place(call, shep, move || {
        let hold = hold;
        // SAFETY: alive while `hold` exists.
        let q = unsafe { &*hold.0 };
        error::guarded((), || q.work());
        drop(hold);
    })
    // On an error the body was dropped unrun: its hold counted it out.
}

/// The handle behind `h`.
///
/// # Safety
/// `h` is NULL or a live handle from `qt_loop_queue_create`.
unsafe fn handle<'a>(call: &str, h: *mut QqloopHandle) -> Result<&'a QqloopHandle, Fail> {
    // SAFETY: per the contract.
    unsafe { h.as_ref() }.ok_or_else(|| Fail::null(call, "loop"))
}

/// Waits until every worker joined to `loop_` has finished, then frees it.
///
/// # Safety
/// `loop_` is a live handle from `Box::into_raw`, not used afterwards.
unsafe fn finish(loop_: *mut QqloopHandle) {
    // SAFETY: live per the contract.
    let q = unsafe { &*loop_ };
    q.running.wait_blocking(BlockKind::GroupWait);
    // SAFETY: every hold is gone (the count reads exactly 0, the end
    // count's lifetime rule), so nothing else touches the handle.
    drop(unsafe { Box::from_raw(loop_) });
}

/// The shepherd count, checking `shep` is one of them.
fn check_shepherd(call: &str, shep: c_ushort) -> Result<(), Fail> {
    let n = worker_count(false);
    if shep == NO_SHEPHERD || usize::from(shep) >= n {
        return Err(Fail::new(
            EINVAL,
            format!("{call}: shepherd {shep} does not exist (there are {n})"),
        ));
    }
    Ok(())
}

/// qt_loop_queue_create: a loop queue of `type` over `[start, stop)`
/// calling `func(startat, stopat, argptr)` on each claimed chunk; run it
/// with `qt_loop_queue_run` or `_run_there`. `incr` is accepted and
/// ignored, as in Qthreads' chunking: the body gets contiguous ranges and
/// applies any stride itself. `CHUNK`'s chunk is `(stop - start) /
/// workers / 10` (at least 1) until `qt_loop_queue_setchunk`. NULL (with
/// `cantus_last_error`) without a runtime, for a NULL `func` or an
/// unknown `type`.
///
/// # Safety
/// `func` may run concurrently with `argptr` on any worker.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn qt_loop_queue_create(
    kind: QtLoopQueueType,
    start: usize,
    stop: usize,
    incr: usize,
    func: QtLoopF,
    argptr: *mut c_void,
) -> *mut QqloopHandle {
    let call = "qt_loop_queue_create";
    let _ = incr;
    let mut out = std::ptr::null_mut();
    let _: crate::ffi::Code = error::boundary(call, || {
        require_runtime(call)?;
        let func = func.ok_or_else(|| Fail::null(call, "func"))?;
        let kind = Kind::from_c(kind).ok_or_else(|| {
            Fail::new(
                EINVAL,
                format!("{call}: unknown type {kind} (CHUNK, GUIDED, FACTORED or TIMED)"),
            )
        })?;
        let workers = worker_count(false).max(1);
        let chunk = (stop.saturating_sub(start) / workers / 10).max(1);
        out = Box::into_raw(Box::new(QqloopHandle {
            kind,
            stop,
            func,
            arg: Arg(argptr),
            next: AtomicUsize::new(start),
            chunk: AtomicUsize::new(chunk),
            factored: Mutex::new(Factored {
                next: start,
                batch_left: 0,
                size: 0,
            }),
            workers: AtomicUsize::new(0),
            running: EndCount::new(0),
        }));
        Ok(error::OK)
    });
    out
}

/// qt_loop_queue_setchunk: `CHUNK`'s chunk size from now on. Reported
/// (and ignored) for a NULL handle, another kind (Qthreads asserts) or 0.
///
/// # Safety
/// `l` is NULL or a live handle.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn qt_loop_queue_setchunk(l: *mut QqloopHandle, chunk: usize) {
    let call = "qt_loop_queue_setchunk";
    boundary_void(call, || {
        // SAFETY: forwarded contract.
        let q = unsafe { handle(call, l)? };
        if q.kind != Kind::Chunk {
            return Err(Fail::new(
                EINVAL,
                format!(
                    "{call}: the loop is {:?}, only CHUNK loops have a chunk size",
                    q.kind
                ),
            ));
        }
        if chunk == 0 {
            return Err(Fail::new(
                EINVAL,
                format!("{call}: a chunk of 0 iterations"),
            ));
        }
        // Relaxed: workers read it when they claim; any value they see is
        // one the user set.
        q.chunk.store(chunk, Ordering::Relaxed);
        Ok(())
    })
}

/// qt_loop_queue_run: runs the loop with one worker per shepherd (plus
/// any added), returns when every iteration has run, and frees the
/// handle. Reported (nothing runs, the handle stays) without a runtime or
/// for a NULL handle.
///
/// # Safety
/// `loop_` is NULL or a live handle, not used after the call returns.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn qt_loop_queue_run(loop_: *mut QqloopHandle) {
    let call = "qt_loop_queue_run";
    boundary_void(call, || {
        require_runtime(call)?;
        // SAFETY: forwarded contract.
        let q = unsafe { handle(call, loop_)? };
        let n = worker_count(false).max(1);
        q.workers.fetch_add(n, Ordering::Relaxed);
        let mut failed = Ok(());
        for shep in 0..n {
            let shep = shep.min(usize::from(NO_SHEPHERD) - 1) as c_ushort;
            if let Err(f) = join(call, q, shep) {
                failed = Err(f);
                break;
            }
        }
        // SAFETY: a live handle from qt_loop_queue_create, not used by the
        // caller afterwards.
        unsafe { finish(loop_) };
        failed
    })
}

/// qt_loop_queue_run_there: as `qt_loop_queue_run` with one worker, on
/// shepherd `shep` (plus any added). Reported (nothing runs, the handle
/// stays) for a shepherd that does not exist, as Qthreads' check.
///
/// # Safety
/// As `qt_loop_queue_run`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn qt_loop_queue_run_there(loop_: *mut QqloopHandle, shep: c_ushort) {
    let call = "qt_loop_queue_run_there";
    boundary_void(call, || {
        require_runtime(call)?;
        // SAFETY: forwarded contract.
        let q = unsafe { handle(call, loop_)? };
        check_shepherd(call, shep)?;
        q.workers.fetch_add(1, Ordering::Relaxed);
        let r = join(call, q, shep);
        // SAFETY: as in qt_loop_queue_run.
        unsafe { finish(loop_) };
        r
    })
}

/// qt_loop_queue_addworker: another worker, on shepherd `shep`, joins the
/// loop (none if every iteration is claimed already). Valid before `run`
/// or while it runs (from a loop body, say: its worker keeps the loop
/// alive); after `run` returned the handle is gone, as in Qthreads.
/// Reported for a NULL handle or a shepherd that does not exist.
///
/// # Safety
/// `loop_` is NULL or a handle whose `run` has not returned.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn qt_loop_queue_addworker(loop_: *mut QqloopHandle, shep: c_ushort) {
    let call = "qt_loop_queue_addworker";
    boundary_void(call, || {
        require_runtime(call)?;
        // SAFETY: forwarded contract.
        let q = unsafe { handle(call, loop_)? };
        check_shepherd(call, shep)?;
        if q.exhausted() {
            return Ok(());
        }
        q.workers.fetch_add(1, Ordering::Relaxed);
        join(call, q, shep)
    })
}
