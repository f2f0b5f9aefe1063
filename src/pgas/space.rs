//! The global address space as this process maps it: the control page,
//! each locale's scratch area and heap segment (`README.md` beside this
//! file lays them out), and the process-wide handle to it.

use crate::comm::shm::region::LINE;
use crate::comm::shm::transport::{
    PGAS_CONTROL_BYTES, PGAS_SCRATCH_BYTES, ShmTransport, Symmetric,
};
use crate::comm::transport::Transport;
use crate::error::{Error, ErrorKind};
use crate::sched::Registry;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64};
use std::sync::{Arc, RwLock};

// Offsets in the control page (one line per writer group).
/// Barrier: locales arrived at the current barrier (u32).
pub(crate) const BARRIER_COUNT: usize = 0;
/// Barrier: how many barriers completed (u32).
pub(crate) const BARRIER_GEN: usize = LINE;
/// Allocator: lock (u32) at +0, top, last, high (u64) at +8, +16, +24.
pub(crate) const ALLOC: usize = 2 * LINE;
/// The result of the current collective allocation, written by locale 0.
pub(crate) const ALLOC_RESULT: usize = 3 * LINE;
/// The SPMD group (`collective.rs`), five u64 words from here.
pub(crate) const SPMD: usize = 4 * LINE;
/// The running group's handler id.
pub(crate) const SPMD_ID: usize = SPMD;
/// The poison word: 0, or 1 + the locale whose body panicked first.
pub(crate) const SPMD_POISON: usize = SPMD + 8;
/// Groups begun so far (the current group's number).
pub(crate) const SPMD_EPOCH: usize = SPMD + 16;
/// 1 while a group runs (from its `begin` to its `end`), else 0.
pub(crate) const SPMD_RUNNING: usize = SPMD + 24;
/// 0, or 1 + the first locale whose body returned (without a panic).
pub(crate) const SPMD_RETURNED: usize = SPMD + 32;
const _: () = assert!(SPMD + LINE <= PGAS_CONTROL_BYTES);

/// In each scratch area: the collective signature (three u64) at 0, data
/// from `SCRATCH_DATA` on.
pub(crate) const SCRATCH_DATA: usize = LINE;
/// Bytes of collective data each scratch area holds.
pub(crate) const SCRATCH_DATA_BYTES: usize = PGAS_SCRATCH_BYTES - SCRATCH_DATA;

/// The global address space of this process's locale.
pub(crate) struct Space {
    pub(crate) here: usize,
    pub(crate) locales: usize,
    /// Whether this locale's SPMD body runs (this process only).
    pub(crate) in_body: AtomicBool,
    /// The last group whose body this locale claimed (this process only).
    pub(crate) claimed: AtomicU64,
    areas: Symmetric,
    /// Owns the mapping the areas lie in.
    _transport: Arc<ShmTransport>,
}

// SAFETY: the pointers are into the transport's mapping, which `Space`
// keeps alive; everything reached through them is either accessed
// atomically or copied as plain bytes under the protocols of
// `README.md` (memory other processes write anyway).
unsafe impl Send for Space {}
// SAFETY: as for Send; `Space` itself is never mutated after construction.
unsafe impl Sync for Space {}

impl Space {
    fn new(transport: Arc<ShmTransport>) -> Space {
        Space {
            here: transport.here(),
            locales: transport.locales(),
            in_body: AtomicBool::new(false),
            claimed: AtomicU64::new(0),
            areas: transport.symmetric(),
            _transport: transport,
        }
    }

    /// Bytes of each locale's heap segment.
    pub(crate) fn heap_bytes(&self) -> usize {
        self.areas.heap_bytes
    }

    /// The start of `locale`'s heap segment in this process.
    pub(crate) fn heap(&self, locale: usize) -> NonNull<u8> {
        self.areas.heaps[locale]
    }

    /// The start of `locale`'s scratch data (`SCRATCH_DATA_BYTES` long).
    pub(crate) fn scratch_data(&self, locale: usize) -> NonNull<u8> {
        // SAFETY: SCRATCH_DATA < PGAS_SCRATCH_BYTES, the area's length.
        unsafe { self.areas.scratch[locale].add(SCRATCH_DATA) }
    }

    /// Word `i` (0..3) of `locale`'s collective signature.
    pub(crate) fn signature(&self, locale: usize, i: usize) -> &AtomicU64 {
        assert!(i < 3);
        // SAFETY: the scratch area is page-aligned and PGAS_SCRATCH_BYTES
        // long; word `i` lies in its first line. The area lives as long as
        // `self`; every process accesses it only atomically.
        unsafe {
            self.areas.scratch[locale]
                .add(8 * i)
                .cast::<AtomicU64>()
                .as_ref()
        }
    }

    /// The 64-bit word at `offset` in the control page.
    pub(crate) fn control64(&self, offset: usize) -> &AtomicU64 {
        assert!(offset % 8 == 0 && offset + 8 <= PGAS_CONTROL_BYTES);
        // SAFETY: in bounds and aligned (checked; the page is
        // page-aligned); the page lives as long as `self`; every process
        // accesses control words only atomically.
        unsafe { self.areas.control.add(offset).cast::<AtomicU64>().as_ref() }
    }

    /// The 32-bit word at `offset` in the control page.
    pub(crate) fn control32(&self, offset: usize) -> &AtomicU32 {
        assert!(offset % 4 == 0 && offset + 4 <= PGAS_CONTROL_BYTES);
        // SAFETY: as in `control64`.
        unsafe { self.areas.control.add(offset).cast::<AtomicU32>().as_ref() }
    }
}

/// The space of the running runtime's locale: installed by
/// `runtime.rs` for a job of several locales, made on first use for one.
static SPACE: RwLock<Option<Arc<Space>>> = RwLock::new(None);

/// A job of several locales: this locale's view of the job's region.
pub(crate) fn install(transport: &Arc<ShmTransport>) {
    *SPACE.write().unwrap() = Some(Arc::new(Space::new(transport.clone())));
}

/// The runtime stopped: global memory is no longer reachable.
pub(crate) fn uninstall() {
    *SPACE.write().unwrap() = None;
}

/// The space, for operations that may wait (collectives).
pub(crate) fn space(call: &str) -> Result<Arc<Space>, Error> {
    if let Some(s) = SPACE.read().unwrap().as_ref() {
        return Ok(s.clone());
    }
    let registry = Registry::current().ok_or_else(|| Error::no_runtime(call))?;
    if registry.config.locales > 1 {
        return Err(Error::new(
            ErrorKind::Locale,
            format!("cantus::{call}: this locale has not joined its job yet (or has left it)"),
        ));
    }
    // One locale: a region of our own, made once per runtime.
    let mut slot = SPACE.write().unwrap();
    if let Some(s) = slot.as_ref() {
        return Ok(s.clone());
    }
    let transport = ShmTransport::create(
        1,
        crate::comm::shm::ring::MIN_CAPACITY,
        registry.config.heap_bytes,
    )?;
    let s = Arc::new(Space::new(Arc::new(transport)));
    *slot = Some(s.clone());
    Ok(s)
}

/// Runs `f` on the space if one is installed (never making one), without
/// taking a reference count.
#[inline]
pub(crate) fn if_installed<R>(f: impl FnOnce(&Space) -> R) -> Option<R> {
    SPACE.read().unwrap().as_ref().map(|s| f(s))
}

/// Runs `f` on the space without taking a reference count: for short
/// operations that never wait (put, get, atomics).
#[inline]
pub(crate) fn with_space<R>(call: &str, f: impl FnOnce(&Space) -> R) -> Result<R, Error> {
    if let Some(s) = SPACE.read().unwrap().as_ref() {
        return Ok(f(s));
    }
    Ok(f(&*space(call)?))
}
