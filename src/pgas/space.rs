//! The global address space of this process's locale: the installed
//! [`Memory`] and what this process keeps beside it (the SPMD body's
//! flags), and the process-wide handle to it. `runtime.rs` installs it
//! when the locale joins its job ([`install`]); a job of one locale makes
//! one on first use.

use super::memory::Memory;
use super::messages::MessageMemory;
use super::shared::SharedMemory;
use crate::comm::collective::Collectives;
use crate::comm::symmetric::{NodeAreas, SymmetricAreas};
use crate::config::{Config, PgasMemory};
use crate::error::{Error, ErrorKind};
use crate::sched::Registry;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicBool, AtomicU64};
use std::sync::{Arc, RwLock};

/// The global address space of this process's locale.
pub(crate) struct Space {
    pub(crate) memory: Arc<dyn Memory>,
    pub(crate) here: usize,
    pub(crate) locales: usize,
    heap_bytes: usize,
    /// Where this process maps each locale's segment, if it does (copied
    /// from the memory: one load on every put and get).
    mapped: Vec<Option<NonNull<u8>>>,
    /// Whether this locale's SPMD body runs (this process only).
    pub(crate) in_body: AtomicBool,
    /// The last group whose body this locale claimed (this process only).
    pub(crate) claimed: AtomicU64,
}

// SAFETY: the pointers are the memory's own (`Memory::mapped`), valid
// while it lives, which `Space` keeps alive; what is done through them
// follows the protocols of `README.md`.
unsafe impl Send for Space {}
// SAFETY: as for Send; `Space` is never mutated after construction but
// through its atomics.
unsafe impl Sync for Space {}

impl Space {
    fn new(memory: Arc<dyn Memory>) -> Space {
        Space {
            here: memory.here(),
            locales: memory.locales(),
            heap_bytes: memory.heap_bytes(),
            mapped: (0..memory.locales()).map(|l| memory.mapped(l)).collect(),
            in_body: AtomicBool::new(false),
            claimed: AtomicU64::new(0),
            memory,
        }
    }

    /// Bytes of each locale's heap segment.
    pub(crate) fn heap_bytes(&self) -> usize {
        self.heap_bytes
    }

    /// Where this process maps `locale`'s heap segment, if it does.
    #[inline]
    pub(crate) fn mapped(&self, locale: usize) -> Option<NonNull<u8>> {
        self.mapped[locale]
    }

    /// The start of this locale's heap segment in this process (every
    /// memory maps its own locale's).
    pub(crate) fn local_segment(&self) -> NonNull<u8> {
        self.mapped[self.here].expect("a memory maps its own locale's segment")
    }
}

/// The space of the running runtime's locale: installed by
/// `runtime.rs` for a job of several locales, made on first use for one.
static SPACE: RwLock<Option<Arc<Space>>> = RwLock::new(None);

/// The memory `choice` names (`CANTUS_PGAS`), for locale `here` of
/// `locales` with segments of `heap_bytes`; `areas` are the symmetric
/// areas the job's transport maps, if it maps any. Unset, the choice is
/// the shared memory where there are areas, else the message memory.
fn memory_for(
    choice: Option<PgasMemory>,
    (here, locales, heap_bytes): (usize, usize, usize),
    areas: Option<Arc<dyn SymmetricAreas>>,
    node: Option<NodeAreas>,
    collectives: Option<Arc<dyn Collectives>>,
) -> Result<Arc<dyn Memory>, Error> {
    match (choice, areas) {
        (Some(PgasMemory::Messages), _) => Ok(Arc::new(MessageMemory::new(
            (here, locales, heap_bytes),
            None,
            collectives,
        )?)),
        (None, None) => Ok(Arc::new(MessageMemory::new(
            (here, locales, heap_bytes),
            node,
            collectives,
        )?)),
        (_, Some(areas)) => Ok(Arc::new(SharedMemory::new(areas))),
        (Some(PgasMemory::Shared), None) => Err(Error::new(
            ErrorKind::InvalidConfig,
            "CANTUS_PGAS=shared asks for global memory that every locale maps, but this job's \
             transport shares no memory between locales; unset CANTUS_PGAS (or set it to \
             messages)",
        )),
    }
}

/// A job of several locales: installs this locale's global memory, the
/// one `config` asks for, over `areas`, the symmetric areas the job's
/// transport maps (`None` for a transport that maps none, such as MPI
/// across nodes: then the memory is the message memory, which reaches
/// the segments of `node`, the locales this one shares memory with, in
/// place, and makes its collectives with the transport's own
/// `collectives` where it has them).
pub(crate) fn install(
    config: &Config,
    areas: Option<Arc<dyn SymmetricAreas>>,
    node: Option<NodeAreas>,
    collectives: Option<Arc<dyn Collectives>>,
) -> Result<(), Error> {
    // The segments' size is the job's: the areas' if there are any (locale
    // 0 chose it for all), else this locale's configuration (every locale
    // runs the same program in the same environment).
    let heap_bytes = areas
        .as_ref()
        .or(node.as_ref().map(|n| &n.areas))
        .map_or(config.heap_bytes, |a| a.areas().heap_bytes);
    let memory = memory_for(
        config.pgas,
        (config.here, config.locales, heap_bytes),
        areas,
        node,
        collectives,
    )?;
    *SPACE.write().unwrap() = Some(Arc::new(Space::new(memory)));
    Ok(())
}

/// The runtime stopped: global memory is no longer reachable.
pub(crate) fn uninstall() {
    *SPACE.write().unwrap() = None;
    super::nonblocking::forget_outstanding();
    super::mailbox::clear();
}

/// The installed space (never making one).
pub(crate) fn installed() -> Option<Arc<Space>> {
    SPACE.read().unwrap().clone()
}

/// The space, for operations that may wait (collectives).
pub(crate) fn space(call: &str) -> Result<Arc<Space>, Error> {
    if let Some(s) = installed() {
        return Ok(s);
    }
    let registry = Registry::current().ok_or_else(|| Error::no_runtime(call))?;
    if registry.config.locales > 1 {
        return Err(Error::new(
            ErrorKind::Locale,
            format!("cantus::{call}: this locale has not joined its job yet (or has left it)"),
        ));
    }
    // One locale: a memory of our own, made once per runtime (the shared
    // memory in a region of its own, unless the message memory is asked
    // for).
    let mut slot = SPACE.write().unwrap();
    if let Some(s) = slot.as_ref() {
        return Ok(s.clone());
    }
    let heap_bytes = registry.config.heap_bytes;
    let areas = match registry.config.pgas {
        Some(PgasMemory::Messages) => None,
        _ => Some(crate::comm::job::private_areas(heap_bytes)?),
    };
    let s = Arc::new(Space::new(memory_for(
        registry.config.pgas,
        (0, 1, heap_bytes),
        areas,
        None,
        None,
    )?));
    *slot = Some(s.clone());
    Ok(s)
}

/// Runs `f` on the space if one is installed (never making one), without
/// taking a reference count.
#[inline]
pub(crate) fn if_installed<R>(f: impl FnOnce(&Space) -> R) -> Option<R> {
    SPACE.read().unwrap().as_ref().map(|s| f(s))
}

/// Runs `f` on the space without taking a reference count: for
/// operations that never wait on a mapped segment (put, get, atomics).
#[inline]
pub(crate) fn with_space<R>(call: &str, f: impl FnOnce(&Space) -> R) -> Result<R, Error> {
    if let Some(s) = SPACE.read().unwrap().as_ref() {
        return Ok(f(s));
    }
    Ok(f(&*space(call)?))
}

/// Which memory is installed: `"shared"` or `"messages"` (tests).
pub(crate) fn installed_memory() -> Option<&'static str> {
    if_installed(|s| {
        if s.memory.as_any().is::<MessageMemory>() {
            "messages"
        } else {
            "shared"
        }
    })
}

/// How the installed memory makes its barrier, broadcast and reductions
/// (a test hook): `"memory"` (in memory every locale maps), `"messages"`
/// (trees of messages) or `"transport"` (the transport's own collectives,
/// MPI's non-blocking ones).
pub(crate) fn installed_collectives() -> Option<&'static str> {
    if_installed(
        |s| match s.memory.as_any().downcast_ref::<MessageMemory>() {
            Some(m) if m.makes_native_collectives() => "transport",
            Some(_) => "messages",
            None => "memory",
        },
    )
}

/// The locales whose heap segments this process maps (reaches in place),
/// once a space is installed (a test hook).
pub(crate) fn mapped_locales() -> Option<Vec<usize>> {
    if_installed(|s| (0..s.locales).filter(|&l| s.mapped(l).is_some()).collect())
}
