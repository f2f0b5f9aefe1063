//! `<qthread/qarray.h>`: Qthreads' distributed array. The elements live
//! in one page-aligned block, cut into segments; each segment has an
//! owning shepherd, given by the distribution (a formula for the fixed
//! ones, one owner for `ALL_SAME`, an owner per segment for `DIST`, kept
//! in `Owned` beside the public struct). Loops over a range run one
//! task per owning shepherd, forked to it (`run_placed`), each doing
//! its pieces (never crossing a segment) in index order.
//!
//! `run_placed`, `SendPtr` and `owned` also serve `allpairs.rs` and
//! `wavefront.rs`.

use super::buf::AlignedBuf;
use super::{NO_SHEPHERD, QthreadF, place, worker_count};
use crate::ffi::error::{self, Fail, boundary_void, guarded};
use crate::ffi::feb::full_empty;
use crate::ffi::feb::word_at;
use crate::ffi::lifecycle::require_runtime;
use crate::sync::end_count::EndCount;
use crate::sync::wait::BlockKind;
use std::alloc::Layout;
use std::collections::BTreeMap;
use std::ffi::{c_char, c_int, c_ushort, c_void};
use std::panic::{self, AssertUnwindSafe};
use std::sync::atomic::{AtomicU16, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

/// `distribution_t` (a C enum: an `int`).
pub type DistributionT = c_int;

/// `FIXED_HASH`: segment s on shepherd s % N.
const FIXED_HASH: DistributionT = 0;
/// `FIXED_FIELDS`: contiguous runs of segments per shepherd.
const FIXED_FIELDS: DistributionT = 1;
/// `ALL_SAME`: one owner for every segment (as input: `ALL_LOCAL`).
const ALL_SAME: DistributionT = 2;
/// `DIST`: an owner per segment (as input: `DIST_RAND`).
const DIST: DistributionT = 3;
/// `DIST_STRIPES`: `DIST`, owners initially as `FIXED_HASH`.
const DIST_STRIPES: DistributionT = 4;
/// `DIST_FIELDS`: `DIST`, owners initially as `FIXED_FIELDS`.
const DIST_FIELDS: DistributionT = 5;
/// `DIST_RAND`: `DIST`, owners initially random.
const DIST_RAND: DistributionT = 6;
/// `DIST_LEAST`: `DIST`, each segment initially on the least loaded shepherd.
const DIST_LEAST: DistributionT = 7;
/// `ALL_LOCAL`: `ALL_SAME` on the caller's shepherd.
const ALL_LOCAL: DistributionT = 8;
/// `ALL_RAND`: `ALL_SAME` on a random shepherd.
const ALL_RAND: DistributionT = 9;
/// `ALL_LEAST`: `ALL_SAME` on the least loaded shepherd.
const ALL_LEAST: DistributionT = 10;

/// `dist_specific.stripes` (`FIXED_FIELDS`): the first `extras`
/// shepherds own `segs_per_shep + 1` segments, the others `segs_per_shep`.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct Stripes {
    pub segs_per_shep: usize,
    pub extras: usize,
}

/// `dist_specific`.
#[repr(C)]
#[derive(Clone, Copy)]
pub union DistSpecific {
    /// `ALL_SAME`: the owner.
    pub dist_shep: c_ushort,
    /// `FIXED_FIELDS`.
    pub stripes: Stripes,
}

/// `qarray`: the public struct, field for field as Qthreads'.
#[repr(C)]
pub struct QArray {
    pub unit_size: usize,
    pub count: usize,
    pub segment_size: usize,
    pub segment_bytes: usize,
    pub base_ptr: *mut c_char,
    pub dist_type: DistributionT,
    pub dist_specific: DistSpecific,
}

/// What `qarray_create*` allocates: the public struct first (so a
/// `qarray *` is a pointer to this), then cantus's bookkeeping.
#[repr(C)]
pub(crate) struct Owned {
    pub(crate) public: QArray,
    /// Shepherds when created: the N of `FIXED_HASH` / `FIXED_FIELDS`.
    shepherds: usize,
    /// Segments allocated.
    pub(crate) segments: usize,
    /// `DIST`: the owner of each segment (empty otherwise).
    owners: Box<[AtomicU16]>,
    /// The block at `base_ptr`.
    block: Layout,
}

/// A raw pointer that tasks may carry: the functions that hand one to a
/// task wait for the task (or, for `qarray_iter_loop_nb`, the caller
/// promises to keep it valid) before the pointee may go away.
pub(crate) struct SendPtr<T>(pub(crate) *mut T);

impl<T> Clone for SendPtr<T> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<T> Copy for SendPtr<T> {}

// SAFETY: see the type's comment: the pointee outlives every task holding
// it, and what the tasks do through it is the C caller's concurrent use
// (the headers say what may run concurrently).
unsafe impl<T> Send for SendPtr<T> {}
// SAFETY: as above.
unsafe impl<T> Sync for SendPtr<T> {}

impl<T> SendPtr<T> {
    /// The pointer (a method, so closures capture the whole wrapper).
    pub(crate) fn get(self) -> *mut T {
        self.0
    }
}

// ---- tasks on shepherds ----

/// Runs `work(k)` for every k in `0..targets.len()`, each as a task forked
/// to shepherd `targets[k]` (a hint, as `qthread_fork_to`), and returns
/// when all have returned (a task suspends meanwhile, a thread blocks). A
/// panic in a task is re-raised here (the boundary reports it).
pub(crate) fn run_placed(
    call: &str,
    targets: &[usize],
    work: impl Fn(usize) + Send + Sync + 'static,
) -> Result<(), Fail> {
    if targets.is_empty() {
        return Ok(());
    }
    let work = Arc::new(work);
    let count = Arc::new(EndCount::new(targets.len()));
    let mut result = Ok(());
    for (k, &shep) in targets.iter().enumerate() {
        let (w, c) = (work.clone(), count.clone());
        let body = move || {
            let r =
                panic::catch_unwind(AssertUnwindSafe(|| crate::sched::body_may_go_away(|| w(k))));
            if let Err(p) = r {
                c.record_panic(p);
            }
            c.done_one();
        };
        let shep = shep.min(usize::from(NO_SHEPHERD) - 1) as c_ushort;
        if let Err(f) = place(call, shep, body) {
            // The tasks not placed will never finish: count them here.
            for _ in k..targets.len() {
                count.done_one();
            }
            result = Err(f);
            break;
        }
    }
    count.wait_blocking(BlockKind::GroupWait);
    if let Some(p) = count.take_panic() {
        panic::resume_unwind(p);
    }
    result
}

// ---- segments and owners ----

/// Segments of live qarrays per shepherd (`ALL_LEAST`, `DIST_LEAST`).
static LOAD: Mutex<Vec<usize>> = Mutex::new(Vec::new());

/// Adds `n` segments to shepherd `shep`'s load (`add` false: removes them).
fn load_change(shep: usize, n: usize, add: bool) {
    let mut l = LOAD.lock().unwrap_or_else(|e| e.into_inner());
    if l.len() <= shep {
        l.resize(shep + 1, 0);
    }
    l[shep] = if add {
        l[shep].saturating_add(n)
    } else {
        l[shep].saturating_sub(n)
    };
}

/// The least loaded of shepherds `0..n` (the first of equals).
fn least_loaded(n: usize) -> usize {
    let l = LOAD.lock().unwrap_or_else(|e| e.into_inner());
    (0..n)
        .min_by_key(|&s| l.get(s).copied().unwrap_or(0))
        .unwrap_or(0)
}

/// A random shepherd of `0..n`.
fn random_shepherd(n: usize) -> usize {
    (super::state::qtimer_fastrand() as usize) % n.max(1)
}

/// The owner of segment `seg` of `segments` under `FIXED_FIELDS` with `n`
/// shepherds: the first `segments % n` own one more.
fn field_owner(seg: usize, segments: usize, n: usize) -> usize {
    let (per, extras) = (segments / n, segments % n);
    let big = extras * (per + 1);
    if seg < big {
        seg / (per + 1)
    } else {
        // per > 0 here: with per == 0 every segment is below `big`.
        extras + (seg - big) / per
    }
}

impl Owned {
    /// The owner of segment `seg`.
    pub(crate) fn owner(&self, seg: usize) -> usize {
        let a = &self.public;
        match a.dist_type {
            // SAFETY: ALL_SAME arrays are created with `dist_shep` set.
            ALL_SAME => usize::from(unsafe { a.dist_specific.dist_shep }),
            FIXED_FIELDS => field_owner(seg, self.segments, self.shepherds),
            DIST => usize::from(self.owners[seg].load(Ordering::Relaxed)),
            _ => seg % self.shepherds,
        }
    }

    /// The address of element `i` (< count).
    pub(crate) fn elem(&self, i: usize) -> *mut u8 {
        geometry(&self.public).elem(i)
    }
}

/// Where the elements are: enough for a task to find any of them.
#[derive(Clone, Copy)]
struct Geometry {
    base: SendPtr<u8>,
    unit: usize,
    seg_size: usize,
    seg_bytes: usize,
}

fn geometry(a: &QArray) -> Geometry {
    Geometry {
        base: SendPtr(a.base_ptr.cast()),
        unit: a.unit_size,
        seg_size: a.segment_size,
        seg_bytes: a.segment_bytes,
    }
}

impl Geometry {
    /// The address of element `i` (inside the block).
    fn elem(self, i: usize) -> *mut u8 {
        let seg = i / self.seg_size;
        let off = seg * self.seg_bytes + (i - seg * self.seg_size) * self.unit;
        // `off` is inside the block (i < count), so `wrapping_add` is the
        // in-bounds offset the C inline function computes.
        self.base.get().wrapping_add(off)
    }
}

/// The array behind a caller's pointer.
///
/// # Safety
/// `a` is NULL or came from `qarray_create*` and is not destroyed.
pub(crate) unsafe fn owned<'a>(call: &str, a: *const QArray) -> Result<&'a Owned, Fail> {
    if a.is_null() {
        return Err(Fail::null(call, "a"));
    }
    // SAFETY: `a` came from `Box<Owned>` (contract), whose first field is
    // the public struct (repr(C)), so it points to a live `Owned`.
    Ok(unsafe { &*a.cast::<Owned>() })
}

/// The pieces of `[start, stop)` (no piece crosses a segment), grouped by
/// owner: shepherds in order, each with its pieces in index order.
fn pieces(o: &Owned, start: usize, stop: usize) -> Vec<(usize, Vec<(usize, usize)>)> {
    let ss = o.public.segment_size;
    let mut by: BTreeMap<usize, Vec<(usize, usize)>> = BTreeMap::new();
    let mut lo = start;
    while lo < stop {
        let seg = lo / ss;
        let hi = ((seg + 1) * ss).min(stop);
        by.entry(o.owner(seg)).or_default().push((lo, hi));
        lo = hi;
    }
    by.into_iter().collect()
}

/// Checks a loop's range against the array.
fn check_range(call: &str, o: &Owned, start: usize, stop: usize) -> Result<(), Fail> {
    if start > stop || stop > o.public.count {
        return Err(Fail::new(
            error::EINVAL,
            format!(
                "{call}: range [{start}, {stop}) is not inside the array's {} elements",
                o.public.count
            ),
        ));
    }
    Ok(())
}

/// The shepherds of the running runtime (at least 1).
fn shepherds_now() -> usize {
    worker_count(false).max(1)
}

// ---- creation and destruction ----

/// Sizes: (unit_size, segment_size, segment_bytes, segments, block bytes).
fn sizes(
    call: &str,
    count: usize,
    unit: usize,
    tight: bool,
    seg_pages: c_int,
) -> Result<(usize, usize, usize, usize, usize), Fail> {
    let too_big = || {
        Fail::new(
            error::EINVAL,
            format!("{call}: {count} elements of {unit} bytes do not fit in memory"),
        )
    };
    if count == 0 || unit == 0 {
        return Err(Fail::new(
            error::EINVAL,
            format!("{call}: count ({count}) and unit_size ({unit}) must be above 0"),
        ));
    }
    if seg_pages < 0 {
        return Err(Fail::new(
            error::EINVAL,
            format!("{call}: seg_pages ({seg_pages}) is negative"),
        ));
    }
    let page = crate::config::page_size();
    let unit = if tight {
        unit
    } else {
        unit.checked_next_multiple_of(8).ok_or_else(too_big)?
    };
    let pages = if seg_pages == 0 {
        16
    } else {
        seg_pages as usize
    };
    let mut seg_bytes = pages.checked_mul(page).ok_or_else(too_big)?;
    if unit > seg_bytes {
        seg_bytes = unit.checked_next_multiple_of(page).ok_or_else(too_big)?;
    }
    let seg_size = seg_bytes / unit;
    let segments = count.div_ceil(seg_size);
    let bytes = segments.checked_mul(seg_bytes).ok_or_else(too_big)?;
    if bytes > isize::MAX as usize - page {
        return Err(too_big());
    }
    Ok((unit, seg_size, seg_bytes, segments, bytes))
}

fn create(
    call: &str,
    count: usize,
    unit: usize,
    d: DistributionT,
    tight: bool,
    seg_pages: c_int,
) -> *mut QArray {
    let mut out = std::ptr::null_mut();
    boundary_void(call, || {
        require_runtime(call)?;
        if !(FIXED_HASH..=ALL_LEAST).contains(&d) {
            return Err(Fail::new(
                error::EINVAL,
                format!("{call}: {d} is not a distribution_t"),
            ));
        }
        let (unit_size, seg_size, seg_bytes, segments, bytes) =
            sizes(call, count, unit, tight, seg_pages)?;
        let n = shepherds_now();
        let block = Layout::from_size_align(bytes, crate::config::page_size())
            .map_err(|e| Fail::new(error::EINVAL, format!("{call}: {e}")))?;
        // SAFETY: `block` has a non-zero size (count and unit are > 0).
        let base = unsafe { std::alloc::alloc_zeroed(block) };
        if base.is_null() {
            return Err(Fail::new(
                error::EOS,
                format!("{call}: could not allocate {bytes} bytes"),
            ));
        }
        let dist_type = match d {
            FIXED_HASH => FIXED_HASH,
            FIXED_FIELDS => FIXED_FIELDS,
            ALL_SAME | ALL_LOCAL | ALL_RAND | ALL_LEAST => ALL_SAME,
            _ => DIST,
        };
        let mut dist_specific = DistSpecific { dist_shep: 0 };
        let mut owners: Vec<AtomicU16> = Vec::new();
        match d {
            ALL_SAME | ALL_LOCAL | ALL_RAND | ALL_LEAST => {
                let shep = match d {
                    ALL_RAND => random_shepherd(n),
                    ALL_LEAST => least_loaded(n),
                    // The caller's shepherd; the main thread has none on
                    // cantus: shepherd 0 (Qthreads' main runs on it).
                    _ => crate::query::current_worker().unwrap_or(0).min(n - 1),
                };
                load_change(shep, segments, true);
                dist_specific.dist_shep = shep as c_ushort;
            }
            FIXED_FIELDS => {
                dist_specific.stripes = Stripes {
                    segs_per_shep: segments / n,
                    extras: segments % n,
                };
                for s in 0..segments {
                    load_change(field_owner(s, segments, n), 1, true);
                }
            }
            FIXED_HASH => {
                for s in 0..segments {
                    load_change(s % n, 1, true);
                }
            }
            _ => {
                for s in 0..segments {
                    let shep = match d {
                        DIST_STRIPES => s % n,
                        DIST_FIELDS => field_owner(s, segments, n),
                        DIST_LEAST => least_loaded(n),
                        // DIST, DIST_RAND.
                        _ => {
                            debug_assert!(d == DIST || d == DIST_RAND);
                            random_shepherd(n)
                        }
                    };
                    load_change(shep, 1, true);
                    owners.push(AtomicU16::new(shep as u16));
                }
            }
        }
        let o = Box::new(Owned {
            public: QArray {
                unit_size,
                count,
                segment_size: seg_size,
                segment_bytes: seg_bytes,
                base_ptr: base.cast(),
                dist_type,
                dist_specific,
            },
            shepherds: n,
            segments,
            owners: owners.into_boxed_slice(),
            block,
        });
        out = Box::into_raw(o).cast::<QArray>();
        Ok(())
    });
    out
}

/// qarray_create: `count` elements of `unit_size` bytes (rounded up to a
/// multiple of 8), `FIXED_HASH`, 16-page segments; NULL on failure.
#[unsafe(no_mangle)]
pub extern "C" fn qarray_create(count: usize, unit_size: usize) -> *mut QArray {
    create("qarray_create", count, unit_size, FIXED_HASH, false, 0)
}

/// qarray_create_tight: as `qarray_create`, elements exactly `unit_size`
/// bytes apart.
#[unsafe(no_mangle)]
pub extern "C" fn qarray_create_tight(count: usize, unit_size: usize) -> *mut QArray {
    create("qarray_create_tight", count, unit_size, FIXED_HASH, true, 0)
}

/// qarray_create_configured: with distribution `d`, `tight` (non-zero:
/// no rounding of `unit_size`) and `seg_pages` pages per segment (0: 16).
#[unsafe(no_mangle)]
pub extern "C" fn qarray_create_configured(
    count: usize,
    unit_size: usize,
    d: DistributionT,
    tight: c_char,
    seg_pages: c_int,
) -> *mut QArray {
    create(
        "qarray_create_configured",
        count,
        unit_size,
        d,
        tight != 0,
        seg_pages,
    )
}

/// qarray_destroy: frees the array and its elements.
///
/// # Safety
/// `a` is NULL or a live array from `qarray_create*`, not used afterwards.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn qarray_destroy(a: *mut QArray) {
    const CALL: &str = "qarray_destroy";
    boundary_void(CALL, || {
        // SAFETY: the caller's contract.
        let o = unsafe { owned(CALL, a)? };
        for s in 0..o.segments {
            load_change(o.owner(s), 1, false);
        }
        // SAFETY: `a` came from Box::into_raw of an `Owned` (contract) and
        // is destroyed once; its block was allocated with `block`.
        unsafe {
            let o = Box::from_raw(a.cast::<Owned>());
            std::alloc::dealloc(o.public.base_ptr.cast(), o.block);
        }
        Ok(())
    });
}

// ---- owners ----

/// qarray_shepof: the shepherd owning element `index`; `NO_SHEPHERD` if
/// the array is NULL or `index >= count`.
///
/// # Safety
/// `a` is NULL or a live array.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn qarray_shepof(a: *const QArray, index: usize) -> c_ushort {
    guarded(NO_SHEPHERD, || {
        if a.is_null() {
            return NO_SHEPHERD;
        }
        // SAFETY: non-null and live (contract).
        let o = unsafe { &*a.cast::<Owned>() };
        if index >= o.public.count {
            return NO_SHEPHERD;
        }
        o.owner(index / o.public.segment_size) as c_ushort
    })
}

/// Moves the segments `set_shepof` moves.
///
/// # Safety
/// `a` is a live array with no loop over it running, and no reference to
/// its public struct is used across this call (the owner of an
/// `ALL_SAME` array is written through `a`).
unsafe fn set_owner(a: *mut QArray, i: usize, shep: usize) -> Result<(), Fail> {
    let o = a.cast::<Owned>();
    // SAFETY: `a` is a live `Owned` (contract); these are plain reads of
    // fields nothing writes concurrently.
    let (dist_type, segments, seg_size) =
        unsafe { ((*a).dist_type, (*o).segments, (*a).segment_size) };
    match dist_type {
        ALL_SAME => {
            // SAFETY: as above; ALL_SAME arrays have `dist_shep` set.
            let old = usize::from(unsafe { (*a).dist_specific.dist_shep });
            if old != shep {
                load_change(old, segments, false);
                load_change(shep, segments, true);
                // SAFETY: `a` is live (contract) and no reference to it is
                // in use; writing its owner concurrently with loops over
                // it is undefined (qarray.h), so nothing reads it now.
                unsafe { (*a).dist_specific.dist_shep = shep as c_ushort };
            }
        }
        DIST => {
            // SAFETY: `owners` is apart from the public struct and atomic.
            let owners = unsafe { &(*o).owners };
            let old = owners[i / seg_size].swap(shep as u16, Ordering::Relaxed);
            if usize::from(old) != shep {
                load_change(usize::from(old), 1, false);
                load_change(shep, 1, true);
            }
        }
        // FIXED_*: the owners are a formula (as Qthreads: nothing moves).
        _ => {}
    }
    Ok(())
}

/// Checks that `shep` is a shepherd of the running runtime.
fn check_shepherd(call: &str, shep: c_ushort) -> Result<usize, Fail> {
    let n = worker_count(false);
    if usize::from(shep) >= n {
        return Err(Fail::new(
            error::EINVAL,
            format!("{call}: shepherd {shep} does not exist (there are {n})"),
        ));
    }
    Ok(usize::from(shep))
}

/// qarray_set_shepof: `ALL_SAME`: every segment to `shep`; `DIST`: the
/// segment of element `i` to `shep`; `FIXED_*`: nothing.
///
/// # Safety
/// `a` is NULL or a live array, with no loop over it running.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn qarray_set_shepof(a: *mut QArray, i: usize, shep: c_ushort) {
    const CALL: &str = "qarray_set_shepof";
    boundary_void(CALL, || {
        require_runtime(CALL)?;
        // SAFETY: the caller's contract.
        let count = unsafe { owned(CALL, a)? }.public.count;
        let shep = check_shepherd(CALL, shep)?;
        if i >= count {
            return Err(Fail::new(
                error::EINVAL,
                format!("{CALL}: index {i} is not below count {count}"),
            ));
        }
        // SAFETY: a live array (contract); no reference to it is in use.
        unsafe { set_owner(a, i, shep) }
    });
}

/// qarray_dist_like: gives `modified` the owners of `reference`, index
/// for index (see qarray.h for which pairs are possible).
///
/// # Safety
/// Both are NULL or live arrays, with no loop over `modified` running.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn qarray_dist_like(reference: *const QArray, modified: *mut QArray) {
    const CALL: &str = "qarray_dist_like";
    boundary_void(CALL, || {
        require_runtime(CALL)?;
        // SAFETY: the caller's contract.
        let r = unsafe { owned(CALL, reference)? };
        // SAFETY: the caller's contract.
        let m = unsafe { owned(CALL, modified)? };
        if r.public.count != m.public.count || r.public.unit_size != m.public.unit_size {
            return Err(Fail::new(
                error::EINVAL,
                format!(
                    "{CALL}: the arrays differ in count ({} and {}) or unit_size ({} and {})",
                    r.public.count, m.public.count, r.public.unit_size, m.public.unit_size
                ),
            ));
        }
        match (r.public.dist_type, m.public.dist_type) {
            (ALL_SAME, ALL_SAME) => {
                let shep = r.owner(0);
                // SAFETY: a live array (contract); `r` and `m` are not used
                // after this write (they may be the same array).
                unsafe { set_owner(modified, 0, shep) }
            }
            (_, DIST) => {
                let (ss, segments) = (m.public.segment_size, m.segments);
                for s in 0..segments {
                    let first = s * ss;
                    let shep = r.owner(first / r.public.segment_size);
                    // SAFETY: a live DIST array (contract): only its atomic
                    // owners change, so `r` and `m` stay valid.
                    unsafe { set_owner(modified, first, shep)? };
                }
                Ok(())
            }
            (_, ALL_SAME) => Err(Fail::new(
                error::EINVAL,
                format!("{CALL}: an ALL_SAME array can only be like another ALL_SAME array"),
            )),
            _ => Err(Fail::new(
                error::EINVAL,
                format!("{CALL}: a FIXED_HASH or FIXED_FIELDS array cannot change its owners"),
            )),
        }
    });
}

/// qarray_elem_migrate: the address of element `index` (NULL if out of
/// range); the caller is not moved (cantus tasks never move).
///
/// # Safety
/// `a` is NULL or a live array.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn qarray_elem_migrate(a: *const QArray, index: usize) -> *mut c_void {
    guarded(std::ptr::null_mut(), || {
        if a.is_null() {
            return std::ptr::null_mut();
        }
        // SAFETY: non-null and live (contract).
        let o = unsafe { &*a.cast::<Owned>() };
        if index >= o.public.count {
            return std::ptr::null_mut();
        }
        o.elem(index).cast()
    })
}

// ---- loops ----

/// `qa_loop_f`.
pub type QaLoopF = Option<
    unsafe extern "C" fn(startat: usize, stopat: usize, array: *mut QArray, arg: *mut c_void),
>;
/// `qa_loopr_f`.
pub type QaLooprF = Option<
    unsafe extern "C" fn(
        startat: usize,
        stopat: usize,
        array: *mut QArray,
        arg: *mut c_void,
        ret: *mut c_void,
    ),
>;
/// `qa_cloop_f`.
pub type QaCloopF = Option<
    unsafe extern "C" fn(startat: usize, stopat: usize, array: *const QArray, arg: *mut c_void),
>;
/// `qt_accum_f`.
pub type QtAccumF = Option<unsafe extern "C" fn(a: *mut c_void, b: *const c_void)>;

/// Runs `work(k, pieces)` for the pieces of `[start, stop)` of `o`: one
/// task per owning shepherd (k: its place in shepherd order), forked to
/// it, with that shepherd's pieces in index order; waits for all.
fn per_owner(
    call: &str,
    o: &Owned,
    start: usize,
    stop: usize,
    work: impl Fn(usize, &[(usize, usize)]) + Send + Sync + 'static,
) -> Result<(), Fail> {
    let groups = pieces(o, start, stop);
    let targets: Vec<usize> = groups.iter().map(|g| g.0).collect();
    run_placed(call, &targets, move |k| work(k, &groups[k].1))
}

/// [`per_owner`] calling `piece(lo, hi)` for each piece.
fn each_piece(
    call: &str,
    o: &Owned,
    start: usize,
    stop: usize,
    piece: impl Fn(usize, usize) + Send + Sync + 'static,
) -> Result<(), Fail> {
    per_owner(call, o, start, stop, move |_, ps| {
        for &(lo, hi) in ps {
            piece(lo, hi);
        }
    })
}

/// The checks of every loop: runtime, array, range.
///
/// # Safety
/// `a` is NULL or a live array.
unsafe fn loop_array<'a>(
    call: &str,
    a: *const QArray,
    start: usize,
    stop: usize,
) -> Result<&'a Owned, Fail> {
    require_runtime(call)?;
    // SAFETY: the caller's contract.
    let o = unsafe { owned(call, a)? };
    check_range(call, o, start, stop)?;
    Ok(o)
}

/// qarray_iter: `func(address of element i)` for each i in
/// `[startat, stopat)`, on the owners' shepherds; returns when all ran.
///
/// # Safety
/// `a` is NULL or a live array; `func` may run on any shepherd.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn qarray_iter(
    a: *mut QArray,
    startat: usize,
    stopat: usize,
    func: QthreadF,
) {
    const CALL: &str = "qarray_iter";
    boundary_void(CALL, || {
        // SAFETY: the caller's contract.
        let o = unsafe { loop_array(CALL, a, startat, stopat)? };
        let f = func.ok_or_else(|| Fail::null(CALL, "func"))?;
        let g = geometry(&o.public);
        each_piece(CALL, o, startat, stopat, move |lo, hi| {
            for i in lo..hi {
                // SAFETY: element i is inside the live array (i < count);
                // the caller promises func may run with it on any shepherd.
                unsafe { f(g.elem(i).cast()) };
            }
        })
    });
}

/// The body of `qarray_iter_loop` (after its checks).
fn run_loop(
    call: &str,
    o: &Owned,
    a: *mut QArray,
    start: usize,
    stop: usize,
    f: unsafe extern "C" fn(usize, usize, *mut QArray, *mut c_void),
    arg: *mut c_void,
) -> Result<(), Fail> {
    let (a, arg) = (SendPtr(a), SendPtr(arg));
    each_piece(call, o, start, stop, move |lo, hi| {
        // SAFETY: a piece of the live array; the caller promises func may
        // run with arg on any shepherd.
        unsafe { f(lo, hi, a.get(), arg.get()) }
    })
}

/// qarray_iter_loop: `func(lo, hi, a, arg)` for pieces of `[startat,
/// stopat)`, each inside one segment, on the owners' shepherds; returns
/// when all ran.
///
/// # Safety
/// `a` is NULL or a live array; `func` may run with `arg` on any shepherd.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn qarray_iter_loop(
    a: *mut QArray,
    startat: usize,
    stopat: usize,
    func: QaLoopF,
    arg: *mut c_void,
) {
    const CALL: &str = "qarray_iter_loop";
    boundary_void(CALL, || {
        // SAFETY: the caller's contract.
        let o = unsafe { loop_array(CALL, a, startat, stopat)? };
        let f = func.ok_or_else(|| Fail::null(CALL, "func"))?;
        run_loop(CALL, o, a, startat, stopat, f, arg)
    });
}

/// qarray_iter_loop_nb: forks a task that runs `qarray_iter_loop` and
/// then fills `*ret` (emptied now; may be NULL).
///
/// # Safety
/// As `qarray_iter_loop`, and the array stays live until the task is
/// done; `ret` is NULL or an `aligned_t` valid until filled.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn qarray_iter_loop_nb(
    a: *mut QArray,
    startat: usize,
    stopat: usize,
    func: QaLoopF,
    arg: *mut c_void,
    ret: *mut u64,
) {
    const CALL: &str = "qarray_iter_loop_nb";
    boundary_void(CALL, || {
        // SAFETY: the caller's contract.
        unsafe { loop_array(CALL, a, startat, stopat)? };
        let f = func.ok_or_else(|| Fail::null(CALL, "func"))?;
        if !ret.is_null() {
            // SAFETY: the caller promises `ret` is a valid aligned_t.
            let w = unsafe { word_at(CALL, "ret", ret)? };
            full_empty::set_word(w, false, None);
        }
        let (arr, argp, retp) = (SendPtr(a), SendPtr(arg), SendPtr(ret));
        let here = super::qthread_shep();
        place(CALL, here, move || {
            // SAFETY: the caller keeps the array live until `ret` is
            // filled (contract), so the `Owned` is live here.
            let o = unsafe { &*arr.get().cast::<Owned>() };
            boundary_void(CALL, || {
                run_loop(CALL, o, arr.get(), startat, stopat, f, argp.get())
            });
            let r = retp.get();
            if !r.is_null() {
                // SAFETY: checked non-null and aligned above; valid until
                // filled (contract).
                let w = unsafe { AtomicU64::from_ptr(r) };
                full_empty::set_word(w, true, Some(0));
            }
        })
    });
}

/// qarray_iter_constloop: as `qarray_iter_loop` with a function that
/// takes the array as const.
///
/// # Safety
/// As `qarray_iter_loop`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn qarray_iter_constloop(
    a: *const QArray,
    startat: usize,
    stopat: usize,
    func: QaCloopF,
    arg: *mut c_void,
) {
    const CALL: &str = "qarray_iter_constloop";
    boundary_void(CALL, || {
        // SAFETY: the caller's contract.
        let o = unsafe { loop_array(CALL, a, startat, stopat)? };
        let f = func.ok_or_else(|| Fail::null(CALL, "func"))?;
        let (a, arg) = (SendPtr(a.cast_mut()), SendPtr(arg));
        each_piece(CALL, o, startat, stopat, move |lo, hi| {
            // SAFETY: a piece of the live array; the caller promises func
            // may run with arg on any shepherd.
            unsafe { f(lo, hi, a.get(), arg.get()) }
        })
    });
}

/// qarray_iter_loopaccum: `func(lo, hi, a, arg, part)` for pieces of
/// `[startat, stopat)` as `qarray_iter_loop`, each writing its result
/// (`retsize` bytes) to `part`; the parts are combined with `acc` (in
/// each shepherd's index order, then in shepherd order) into `*ret`,
/// which is overwritten (an empty range leaves it alone).
///
/// # Safety
/// As `qarray_iter_loop`; `ret` holds `retsize` writable bytes; `acc`
/// combines two results of `retsize` bytes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn qarray_iter_loopaccum(
    a: *mut QArray,
    startat: usize,
    stopat: usize,
    func: QaLooprF,
    arg: *mut c_void,
    ret: *mut c_void,
    retsize: usize,
    acc: QtAccumF,
) {
    const CALL: &str = "qarray_iter_loopaccum";
    boundary_void(CALL, || {
        // SAFETY: the caller's contract.
        let o = unsafe { loop_array(CALL, a, startat, stopat)? };
        let f = func.ok_or_else(|| Fail::null(CALL, "func"))?;
        let acc = acc.ok_or_else(|| Fail::null(CALL, "acc"))?;
        if ret.is_null() {
            return Err(Fail::null(CALL, "ret"));
        }
        let groups = pieces(o, startat, stopat).len();
        let parts: Arc<Vec<Mutex<Option<AlignedBuf>>>> =
            Arc::new((0..groups).map(|_| Mutex::new(None)).collect());
        let (arr, argp, slots) = (SendPtr(a), SendPtr(arg), parts.clone());
        per_owner(CALL, o, startat, stopat, move |k, ps| {
            let mut part = AlignedBuf::zeroed(retsize);
            let mut more = AlignedBuf::zeroed(retsize);
            for (n, &(lo, hi)) in ps.iter().enumerate() {
                let out = if n == 0 { &mut part } else { &mut more };
                // SAFETY: a piece of the live array; `out` holds retsize
                // bytes; the caller promises func may run with arg on
                // any shepherd.
                unsafe { f(lo, hi, arr.get(), argp.get(), out.as_mut_ptr().cast()) };
                if n > 0 {
                    // SAFETY: acc combines two results of retsize bytes
                    // (contract); the buffers are distinct.
                    unsafe { acc(part.as_mut_ptr().cast(), more.as_ptr().cast()) };
                }
            }
            *slots[k].lock().unwrap_or_else(|e| e.into_inner()) = Some(part);
        })?;
        let mut first = true;
        for slot in parts.iter() {
            let slot = slot.lock().unwrap_or_else(|e| e.into_inner());
            let Some(part) = slot.as_ref() else { continue };
            if first {
                // SAFETY: `ret` holds retsize writable bytes (contract);
                // `part` holds retsize bytes; they do not overlap.
                unsafe { std::ptr::copy_nonoverlapping(part.as_ptr(), ret.cast::<u8>(), retsize) };
                first = false;
            } else {
                // SAFETY: acc combines two results of retsize bytes.
                unsafe { acc(ret, part.as_ptr().cast()) };
            }
        }
        Ok(())
    });
}
