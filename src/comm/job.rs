//! The launch seam: how this process joins a job of locales, whatever
//! the transport. `runtime.rs` asks [`start`] for a [`Job`] and talks to
//! it alone (its transport, its memory, how it ends); it names no
//! transport. Which one is chosen is configuration ([`Launch`], decided
//! before the rest of the configuration is resolved, `config/launch.rs`):
//!
//! - [`Launch::SharedMemory`]: locales on this machine; locale 0 creates
//!   the shared region and starts the others as copies of this program
//!   (`shm/launch.rs`), which attach to it;
//! - [`Launch::Mpi`] (the `mpi` feature): an MPI launcher started one
//!   process per rank; each initializes MPI on a thread of its own and
//!   is the locale of its rank (`mpi/`).
//!
//! [`Launch`]: crate::config::Launch
//! [`Launch::SharedMemory`]: crate::config::Launch::SharedMemory
//! [`Launch::Mpi`]: crate::config::Launch::Mpi

use super::transport::Transport;
use crate::config::{Config, Launch};
use crate::error::{Error, ErrorKind};
use std::sync::Arc;

/// This process's part of a job of several locales.
pub(crate) trait Job: Send + Sync {
    /// The transport to the other locales.
    fn transport(&self) -> Arc<dyn Transport>;

    /// Memory every locale maps (the global address space's areas), if
    /// the transport has it; without it (MPI) the global address space
    /// works by messages.
    fn shared_memory(&self) -> Option<Arc<dyn super::symmetric::SymmetricAreas>>;

    /// Memory this locale shares with the other locales of its node only,
    /// where the job has no memory every locale maps (an MPI job over
    /// several nodes whose ranks share a region per node).
    fn node_memory(&self) -> Option<super::symmetric::NodeAreas> {
        None
    }

    /// Collectives the transport makes itself, where it has them and
    /// the global address space has no memory every locale maps (an MPI
    /// job over several nodes: MPI's non-blocking collectives).
    fn collectives(&self) -> Option<Arc<dyn super::collective::Collectives>> {
        None
    }

    /// Whether the locales may run on machines of their own, with clocks
    /// of their own (traces are then aligned to locale 0's).
    fn clocks_may_differ(&self) -> bool {
        false
    }

    /// Locale 0 ordered the others to shut down (termination was
    /// detected): from now on their ends are expected, not failures.
    fn shutdown_ordered(&self);

    /// Every locale's work is done and no message is in flight
    /// (termination was detected, `remote/`): releases the job. Locale 0
    /// waits for the others to end; over MPI, every locale completes its
    /// sends and finalizes MPI.
    fn finish(self: Box<Self>);

    /// This locale could not start after all (`why`): ends the job now
    /// (the other locales are stopped; an MPI job is aborted, saying why,
    /// since its other ranks may wait for this one).
    fn abandon(self: Box<Self>, why: &Error);

    /// A fatal error on this locale: ends the whole job at once with
    /// `message`, from any thread. Does not return.
    fn abort(&self, message: &str) -> !;
}

/// The symmetric areas of a runtime of one locale, which has no job: a
/// mapping of its own, laid out as a job's would be (the shared-memory
/// transport's region for one locale; named here, in the launch seam,
/// as every transport is).
pub(crate) fn private_areas(
    heap_bytes: usize,
) -> Result<Arc<dyn super::symmetric::SymmetricAreas>, Error> {
    let transport = super::shm::transport::ShmTransport::create(super::shm::transport::Shape {
        locales: 1,
        ring_bytes: super::shm::ring::MIN_CAPACITY,
        heap_bytes,
        rendezvous_bytes: 0,
    })?;
    Ok(Arc::new(transport))
}

/// Joins (or, on locale 0 of a shared-memory job, starts) the job that
/// `config` describes. Over MPI this also places `config` in it: its
/// locale, the number of locales and its share of the node's CPUs.
pub(crate) fn start(config: &mut Config) -> Result<Box<dyn Job>, Error> {
    match config.launch {
        Launch::SharedMemory => super::shm::launch::start(config),
        #[cfg(feature = "mpi")]
        Launch::Mpi => super::mpi::start(config),
        #[cfg(not(feature = "mpi"))]
        Launch::Mpi => Err(Error::new(
            ErrorKind::InvalidConfig,
            "cantus: an MPI job needs cantus's `mpi` feature",
        )),
        Launch::Alone => Err(Error::new(
            ErrorKind::Locale,
            "cantus: a job of one locale has no transport to start",
        )),
    }
}
