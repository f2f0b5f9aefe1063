//! Settings: the [`Builder`] a runtime is made from
//! (`Runtime::builder()`), how idle workers wait ([`WaitPolicy`]), and
//! every setting's default ([`DEFAULT_SPIN`], [`DEFAULT_STACK_SIZE`],
//! [`DEFAULT_GRAIN`], ...). Each setting is also read from a `CANTUS_*`
//! environment variable, which wins over the builder (README,
//! "Configuration").

// A file per role: `mod.rs` the settings' defaults and limits, the
// variables' names, and `Config`, the validated result; `builder.rs`
// the Builder and its setters; `env.rs` resolving a builder against the
// environment, one function per setting, with the parsing and messages;
// `launch.rs` how this process joins a job (MPI launchers' variables,
// `CANTUS_TRANSPORT`, a locale started by locale 0); `cpus.rs` the CPUs
// a process and a rank of a node may use.

mod builder;
mod cpus;
mod env;
mod launch;
#[cfg(test)]
mod tests;

pub use builder::Builder;
pub(crate) use cpus::{affinity_cpus, page_size};
pub(crate) use env::parse_deadlock_ms;
pub(crate) use launch::mpi_launcher;

use crate::error::Error;
use std::time::Duration;

/// How idle workers wait for work: spin (fast to react, burns the core),
/// sleep (frees the core, slower to react), or spin for a while, then sleep.
// Hybrid waiting as in seed 002.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WaitPolicy {
    /// Spin forever: lowest latency, burns the core. Use only with no more
    /// workers than cores and nothing else to run.
    Active,
    /// Sleep as soon as no work is found.
    Passive,
    /// Spin for the spin budget, then sleep (the default).
    Hybrid,
}

/// The default spin budget: idle-loop iterations before a hybrid worker
/// sleeps. Each iteration looks at the worker's queues and tries one steal;
/// measured on the 2-core reference machine this is roughly 0.1-0.3 ms.
pub const DEFAULT_SPIN: u32 = 4_000;
/// The default task stack size (bytes). Only touched pages use memory.
pub const DEFAULT_STACK_SIZE: usize = 256 * 1024;
/// The smallest stack size accepted.
pub const MIN_STACK_SIZE: usize = 16 * 1024;
/// The largest stack size accepted.
pub const MAX_STACK_SIZE: usize = 1 << 30;
/// The default limit on threads the runtime may start (Chapel's default).
pub const DEFAULT_MAX_THREADS: usize = 255;
/// How long every worker must sit idle, with tasks blocked and an outside
/// thread waiting, before a deadlock is reported.
pub const DEFAULT_DEADLOCK_MS: u64 = 1_000;

/// The most iterations an adaptive loop ([`forall`](crate::forall))
/// runs between looks at whether a worker is hungry (its first steps are
/// shorter); also the smallest piece it splits off: a loop shorter than
/// twice the grain is never split. Override per loop with
/// [`Forall::grain`](crate::Forall::grain).
pub const DEFAULT_GRAIN: usize = 1024;

/// Default events per lane of a trace (8 MiB of 32-byte events).
pub const DEFAULT_TRACE_EVENTS: usize = 1 << 18;
pub(super) const MIN_TRACE_EVENTS: usize = 16;
pub(super) const MAX_TRACE_EVENTS: usize = 1 << 26;

/// Default bytes of each shared-memory ring between two locales.
pub const DEFAULT_RING_BYTES: usize = 128 << 10;
/// The smallest ring a job may have (`CANTUS_RING_BYTES`, `Builder::ring_bytes`).
pub(super) const MIN_RING_BYTES: usize = 4 << 10;
/// The largest ring a job may have.
pub(super) const MAX_RING_BYTES: usize = 1 << 30;

/// Default bytes of each ordered pair's rendezvous area on shared memory:
/// a message larger than one ring frame is written once into a block of
/// it and read there by its receiver (`comm/shm/README.md`,
/// "Rendezvous"); the largest such block is half the area, and larger
/// messages go in pieces of that size. Pages take memory only once
/// touched. `0` turns rendezvous off (large messages then go through the
/// rings in pieces of half a ring).
pub const DEFAULT_RENDEZVOUS_BYTES: usize = 8 << 20;
/// The smallest rendezvous area accepted (other than 0, off).
pub(super) const MIN_RENDEZVOUS_BYTES: usize = 1 << 20;
/// The largest rendezvous area accepted.
pub(super) const MAX_RENDEZVOUS_BYTES: usize = 1 << 30;

/// Default bytes of each locale's segment of the symmetric heap
/// ([`pgas`](crate::pgas)): 4 GiB of address space, of which a page
/// takes memory only once touched (the shared region is a memfd, the
/// message memory's segment a `MAP_NORESERVE` mapping), so arrays of
/// gigabytes fit without a setting and a program that allocates little
/// pays nothing for the rest.
pub const DEFAULT_HEAP_BYTES: usize = 4 << 30;
/// The smallest heap segment accepted.
pub(super) const MIN_HEAP_BYTES: usize = 64 << 10;
/// The largest heap segment accepted.
pub(super) const MAX_HEAP_BYTES: usize = 64 << 30;

/// Set by locale 0 for the locales it starts: which locale a process is.
pub(crate) const LOCALE_VAR: &str = "CANTUS_LOCALE";
/// The number of locales (users set it on locale 0; locale 0 sets it for
/// the locales it starts).
pub(crate) const LOCALES_VAR: &str = "CANTUS_LOCALES";

/// Set by locale 0 for the locales it starts when the job is traced: the
/// job's number, which names the directory of its trace's parts
/// (`trace/lane.rs`, `parts_dir`), in hexadecimal.
pub(crate) const TRACE_JOB_VAR: &str = "CANTUS_TRACE_JOB";

/// Chooses the transport (`shm` or `mpi`); by default `mpi` when an MPI
/// launcher started the process.
pub(crate) const TRANSPORT_VAR: &str = "CANTUS_TRANSPORT";

/// How this process takes part in a job of locales: decided before the
/// rest of the configuration, from the environment (`comm/job.rs` starts
/// what it names).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Launch {
    /// One locale, no transport.
    Alone,
    /// Locales on this machine talking through shared memory: locale 0
    /// starts the others as copies of this program.
    SharedMemory,
    /// One locale per rank of a job that an MPI launcher (`mpirun`,
    /// `mpiexec`) started; the MPI size is the number of locales.
    Mpi,
}

/// The variable that chooses the global address space's memory.
pub(super) const PGAS_VAR: &str = "CANTUS_PGAS";

/// The variable that chooses who makes an MPI job's MPI calls.
pub(crate) const MPI_PROGRESS_VAR: &str = "CANTUS_MPI_PROGRESS";

/// The testing setting that splits each real node's ranks into that many
/// nodes (`comm/mpi/README.md`, "Ranks of one node").
pub(crate) const MPI_NODES_VAR: &str = "CANTUS_MPI_NODES";

/// A rank whose share of its node's CPUs is at least this many runs an
/// MPI thread under `CANTUS_MPI_PROGRESS=auto`; a smaller share
/// progresses inline (`comm/mpi/README.md`, "Progress modes").
#[cfg_attr(not(feature = "mpi"), allow(dead_code))]
pub(crate) const MPI_THREAD_MIN_CPUS: usize = 16;

/// Who makes an MPI job's MPI calls (`CANTUS_MPI_PROGRESS`;
/// `comm/mpi/README.md`, "Progress modes").
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(not(feature = "mpi"), allow(dead_code))]
pub(crate) enum MpiProgress {
    /// `inline` where the rank's share of CPUs is below
    /// [`MPI_THREAD_MIN_CPUS`], else `thread`.
    Auto,
    /// The threads that send, poll, wait or park make the calls under one
    /// try-lock (`MPI_THREAD_SERIALIZED`); a helper sleeps beside them.
    Inline,
    /// One MPI thread per rank makes every call (`MPI_THREAD_FUNNELED`).
    Thread,
}

/// Which memory the global address space (`pgas`) uses
/// (`pgas/README.md`, "Two memories").
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum PgasMemory {
    /// Memory every locale maps (the shared-memory transport's areas):
    /// puts are copies, atomics are CPU atomics on it.
    Shared,
    /// Each locale's segment is its own process's; the others reach it
    /// by remote calls (the memory a transport without shared memory
    /// gets; on one machine, to test it).
    Messages,
}

/// A validated configuration.
#[derive(Clone, Debug)]
pub(crate) struct Config {
    /// How this process joins its job.
    pub(crate) launch: Launch,
    /// Whether the worker count was given (builder or `CANTUS_WORKERS`),
    /// not derived from the CPUs (an MPI job derives it once it knows
    /// the node's ranks: [`Config::place`]).
    pub(crate) workers_given: bool,
    pub(crate) workers: usize,
    pub(crate) stack_size: usize,
    pub(crate) wait_policy: WaitPolicy,
    pub(crate) spin: u32,
    pub(crate) max_threads: usize,
    pub(crate) pin: bool,
    pub(crate) deadlock: Option<Duration>,
    pub(crate) stats: bool,
    /// Where to write a timeline trace (`CANTUS_TRACE`), if anywhere.
    pub(crate) trace: Option<std::path::PathBuf>,
    /// Events each lane of the trace holds (`CANTUS_TRACE_EVENTS`).
    pub(crate) trace_events: usize,
    /// The job's number for its trace's parts directory (0 until chosen:
    /// `Runtime::start_locale`; a locale started by locale 0 is given
    /// it, [`TRACE_JOB_VAR`]; over MPI rank 0's is broadcast).
    pub(crate) trace_job: u64,
    /// The CPUs of the process affinity mask, in order.
    pub(crate) cpus: Vec<usize>,
    /// Locales (processes) in the job.
    pub(crate) locales: usize,
    /// This process's locale.
    pub(crate) here: usize,
    /// Bytes of each shared-memory ring.
    pub(crate) ring_bytes: usize,
    /// Bytes of each ordered pair's rendezvous area on shared memory (0:
    /// off).
    pub(crate) rendezvous_bytes: usize,
    /// Bytes of each locale's heap segment, a multiple of the page size.
    pub(crate) heap_bytes: usize,
    /// The global address space's memory (`None`: the transport's
    /// choice, `Shared` where it maps memory for every locale).
    pub(crate) pgas: Option<PgasMemory>,
    /// Who polls for a Chant receive that waits (`CANTUS_CHANT_POLL`):
    /// `Some(true)` the waiting task, `Some(false)` the scheduler, `None`
    /// not set (the default, or what the program chose).
    pub(crate) chant_task_polls: Option<bool>,
    /// Who makes an MPI job's MPI calls (`CANTUS_MPI_PROGRESS`).
    #[cfg_attr(not(feature = "mpi"), allow(dead_code))]
    pub(crate) mpi_progress: MpiProgress,
    /// How many nodes each real node's ranks behave as (`CANTUS_MPI_NODES`,
    /// a testing setting); `None`: the real nodes.
    #[cfg_attr(not(feature = "mpi"), allow(dead_code))]
    pub(crate) mpi_nodes: Option<usize>,
    /// The locale count the program asked for (`CANTUS_LOCALES` or
    /// `Builder::locales`), and how it asked, if it did: under MPI the
    /// launcher decides, and a different count is an error.
    #[cfg_attr(not(feature = "mpi"), allow(dead_code))]
    pub(crate) locales_asked: Option<(usize, String)>,
    /// The thread that builds the runtime hosts worker 0
    /// (`Builder::host_worker`; honoured by a runtime of one locale).
    pub(crate) host_worker: bool,
}
