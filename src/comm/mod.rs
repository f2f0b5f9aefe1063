//! Communication between locales: the [`Transport`](transport::Transport)
//! trait, the transports that implement it, and the driver that plugs a
//! transport into the scheduler's seam (`sched/driver/README.md`).
//!
//! - `transport.rs`: the trait (two networks, never-blocking sends, one
//!   poller at a time, park/unpark for the last idle worker).
//! - `driver.rs`: a transport plus a dispatcher as the scheduler's
//!   `Driver`.
//! - `collective.rs`: collectives a transport makes itself (MPI's
//!   non-blocking collectives), offered to the global address space.
//! - `job.rs`: the launch seam: how this process joins a job (its
//!   transport, how the job ends), whatever the transport.
//! - `symmetric.rs`: memory every locale maps, offered by a transport
//!   that has it (`SymmetricAreas`: the global address space's control
//!   page, scratch areas and heap segments), named by no transport.
//! - `shm/`: the shared-memory transport: the job's shared region, futex
//!   words and single-producer single-consumer frame rings
//!   (`shm/README.md`).
//! - `mpi/` (the `mpi` feature): the MPI transport, its calls made inline
//!   by the threads that need progress or by an MPI thread
//!   (`mpi/README.md`);
//! - `pass.rs`: the pass lock under inline progress (state one thread at
//!   a time works on, given work by any without waiting; loom-checked).

pub(crate) mod collective;
pub(crate) mod driver;
#[cfg(not(loom))]
pub(crate) mod job;
#[cfg(all(feature = "mpi", not(loom)))]
pub(crate) mod mpi;
pub(crate) mod pass;
pub(crate) mod shm;
pub(crate) mod symmetric;
pub(crate) mod transport;
pub(crate) mod wake_bell;
