//! Symmetric areas: memory that every locale of a job maps, each at an
//! address of its own, offered by a transport that has such memory (the
//! shared-memory transport, `shm/`), not by one that has none (MPI).
//! The global address space (`pgas/`) lays its shared-memory
//! implementation out in them; it reaches them only through
//! [`SymmetricAreas`], never through a transport's own type.
//!
//! A job has, for `N` locales:
//!
//! - one **control page** of [`CONTROL_BYTES`];
//! - one **scratch area** of [`SCRATCH_BYTES`] per locale;
//! - one **heap segment** of `heap_bytes` per locale.
//!
//! Every area starts at an address aligned to [`AREA_ALIGN`] in every
//! process, so an offset aligned to at most that is aligned alike
//! everywhere. Their layout inside is `pgas/`'s (`pgas/README.md`).

use std::ptr::NonNull;
use std::sync::Arc;

/// Bytes of the control page.
pub(crate) const CONTROL_BYTES: usize = 4096;
/// Bytes of each locale's scratch area.
pub(crate) const SCRATCH_BYTES: usize = 4 * 4096;
/// The alignment of every area's start, in every process (a page: the
/// areas lie at page-aligned offsets of page-aligned mappings).
pub(crate) const AREA_ALIGN: usize = 4096;

/// This process's addresses of the job's symmetric areas, valid while
/// the [`SymmetricAreas`] that gave them lives.
pub(crate) struct Areas {
    /// This process's locale.
    pub(crate) here: usize,
    /// The locales of the job (the lengths of `scratch` and `heaps`).
    pub(crate) locales: usize,
    /// The control page, [`CONTROL_BYTES`] long.
    pub(crate) control: NonNull<u8>,
    /// Each locale's scratch area, [`SCRATCH_BYTES`] long.
    pub(crate) scratch: Vec<NonNull<u8>>,
    /// Each locale's heap segment, `heap_bytes` long.
    pub(crate) heaps: Vec<NonNull<u8>>,
    /// Bytes of each heap segment (a multiple of [`AREA_ALIGN`]).
    pub(crate) heap_bytes: usize,
}

/// Memory that every locale of a job maps: see the module docs.
///
/// # Safety
///
/// An implementation promises, for the [`Areas`] that `areas` returns:
///
/// - every pointer is valid for reads and writes of its area's length
///   for as long as the implementing value lives, and aligned to
///   [`AREA_ALIGN`];
/// - no two areas overlap, and nothing else of the process (no Rust
///   value, no ring of the transport) lies in them;
/// - area `k` of one process and area `k` of every other process of the
///   job are the same memory (a write through one is seen through the
///   others, atomics on it are atomic across the processes), and all of
///   it was zero when the job began;
/// - `areas` returns the same addresses on every call.
pub(crate) unsafe trait SymmetricAreas: Send + Sync + 'static {
    /// The areas, as this process maps them.
    fn areas(&self) -> Areas;
}

/// The areas a locale shares with the other locales of its node only (an
/// MPI job whose ranks on one node share a region, `comm/mpi/node.rs`):
/// `areas` index the node's members, `members[i]` is member `i`'s locale
/// in the job (ascending). The global address space then reaches the
/// members' heap segments in place and the other locales' by messages.
pub(crate) struct NodeAreas {
    pub(crate) areas: Arc<dyn SymmetricAreas>,
    pub(crate) members: Vec<usize>,
}
