//! The MPI transport (the `mpi` feature): locales on any number of
//! machines, one per rank of a job an MPI launcher started (seed 001,
//! Tascell over MPI: two-sided, non-blocking messages; workers that never
//! wait on MPI). Who makes the MPI calls is the progress mode
//! (`CANTUS_MPI_PROGRESS`): the threads that need progress, one at a
//! time under a try-lock (`inline`, `MPI_THREAD_SERIALIZED`), or one MPI
//! thread per locale (`thread`, `MPI_THREAD_FUNNELED`).
//!
//! - `sys.rs`: the MPI calls made, over rsmpi's raw bindings, each
//!   returning a cantus error with MPI's own text;
//! - `transport.rs`: the locale's threads' side (`try_send` queues a
//!   frame under a credit, `poll` hands on what arrived, `park`);
//! - `progress.rs`: a pass of MPI calls (batches, credit, matched
//!   receives) and the ordered end; the MPI thread's loop (waiting when
//!   idle);
//! - `inline.rs`: inline progress (the try-lock, the parked worker's
//!   naps, the helper);
//! - `node.rs`: which ranks share a node, and the node's shared region,
//!   handed over without a name;
//! - `route.rs`: the routing transport of a job whose node shares memory
//!   (the node's ranks through its rings, the others through MPI).
//! - `spare.rs`: large messages' receive buffers kept for the next ones;
//! - `collective.rs`: the job's collectives for the global address space
//!   as MPI's non-blocking collectives, started and tested by the passes.
//!
//! `README.md` beside this file states the protocols and why no locale
//! can deadlock.

mod batch;
mod collective;
mod inline;
mod landing;
mod node;
mod progress;
mod route;
mod spare;
mod sys;
mod transport;

use crate::comm::job::Job;
use crate::comm::symmetric::{NodeAreas, SymmetricAreas};
use crate::comm::transport::Transport;
use crate::config::{Config, LOCALES_VAR, MPI_THREAD_MIN_CPUS, MpiProgress};
use crate::error::{Error, ErrorKind};
use inline::Inline;
use node::{Node, NodeSetup};
use progress::Progress;
use route::RoutingTransport;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock, mpsc};
use std::thread::JoinHandle;
use std::time::Duration;
use transport::{MpiTransport, Shared};

/// MPI may be initialized once per process: set by the first MPI job.
static STARTED: AtomicBool = AtomicBool::new(false);

/// The locales this rank shares its node's memory with (itself
/// included), once its job started.
static NODE_MEMBERS: OnceLock<Vec<usize>> = OnceLock::new();

/// The locales this rank shares its node's memory with, once its MPI job
/// started (a test hook: `__test::mpi_node_members`).
pub(crate) fn node_members() -> Option<Vec<usize>> {
    NODE_MEMBERS.get().cloned()
}

/// How long a fatal error on another thread waits for the MPI thread to
/// abort the job before calling `MPI_Abort` itself.
const ABORT_GRACE: Duration = Duration::from_secs(3);

/// Where MPI placed this process.
struct Placement {
    rank: usize,
    size: usize,
    /// The ranks this one shares memory with, and their region.
    node: Node,
    /// Rank 0's number for the job's trace parts (`Config::trace_job`).
    trace_job: u64,
}

/// This process's part of an MPI job.
struct MpiJob {
    shared: Arc<Shared>,
    transport: Arc<MpiTransport>,
    /// Where the node shares memory: the routing transport (the node's
    /// ranks through its rings, the others through `transport`), which
    /// holds the node's region and its members' locales.
    routing: Option<Arc<RoutingTransport>>,
    /// The MPI thread (`thread` mode) or the helper (`inline`); joined
    /// when the job finishes.
    thread: Mutex<Option<JoinHandle<()>>>,
    /// The inline mode's lock and MPI state (`None` in `thread` mode).
    inline: Option<Arc<Inline>>,
}

/// Initializes MPI, places `config` in the job (its locale is its rank,
/// the number of locales the MPI size, its CPUs a share of its node's,
/// its workers that share, less one in `thread` mode) and returns the
/// job. Who makes the MPI calls from then on is `config.mpi_progress`
/// (`README.md`, "Progress modes"): the threads that need progress
/// (`inline`: MPI is initialized here, at `MPI_THREAD_SERIALIZED`) or an
/// MPI thread (`thread`: MPI is initialized on it, at
/// `MPI_THREAD_FUNNELED`).
pub(crate) fn start(config: &mut Config) -> Result<Box<dyn Job>, Error> {
    if STARTED.swap(true, Ordering::AcqRel) {
        return Err(Error::new(
            ErrorKind::AlreadyRunning,
            "cantus: this process already ran a job over MPI; MPI is initialized once per \
             process, so a process runs one multi-locale runtime under MPI",
        ));
    }
    let inline = match config.mpi_progress {
        MpiProgress::Inline => true,
        MpiProgress::Thread => false,
        MpiProgress::Auto => config
            .cpu_share_before_mpi()
            .is_none_or(|cpus| cpus < MPI_THREAD_MIN_CPUS),
    };
    let (frame_bytes, trace_job) = (config.ring_bytes / 2, config.trace_job);
    let setup = NodeSetup {
        nodes: config.mpi_nodes,
        ring_bytes: config.ring_bytes,
        heap_bytes: config.heap_bytes,
        rendezvous_bytes: config.rendezvous_bytes,
    };
    let (placement, mut job) = if inline {
        start_inline(frame_bytes, trace_job, setup)?
    } else {
        start_thread(frame_bytes, trace_job, setup)?
    };
    // (A rank whose node shares no memory is its node's only member.)
    let _ = NODE_MEMBERS.set(placement.node.members.clone());
    if let Some(shm) = &placement.node.shm {
        job.routing = Some(Arc::new(RoutingTransport::new(
            shm.clone(),
            job.transport.clone(),
            placement.node.members.clone(),
        )));
    }
    if let Some((_, asked)) = config
        .locales_asked
        .as_ref()
        .filter(|(n, _)| *n != placement.size)
    {
        let remedy = if asked.starts_with(LOCALES_VAR) {
            format!("unset {LOCALES_VAR}")
        } else {
            "drop Builder::locales".to_string()
        };
        let e = Error::new(
            ErrorKind::InvalidConfig,
            format!(
                "cantus: {asked} but the MPI launcher started {} ranks: under MPI the number of \
                 ranks is the number of locales ({remedy}, or start as many ranks)",
                placement.size
            ),
        );
        // Every rank sees the same setting and says the same.
        job.end_quietly();
        return Err(e);
    }
    // Ranks the launcher bound to CPU sets of their own use theirs; ranks
    // that may all use the same CPUs share them by their rank on the node.
    let (share_rank, share_of) = if placement.node.bound_apart {
        (0, 1)
    } else {
        (placement.node.real_rank, placement.node.real_size)
    };
    config.place(
        placement.rank,
        placement.size,
        share_rank,
        share_of,
        !inline,
    );
    config.trace_job = placement.trace_job;
    Ok(Box::new(job))
}

/// `inline` mode: MPI initialized on this thread; a helper thread
/// started beside the workers.
fn start_inline(
    frame_bytes: usize,
    trace_job: u64,
    setup: NodeSetup,
) -> Result<(Placement, MpiJob), Error> {
    let (placement, progress, shared) = init(frame_bytes, trace_job, Level::Serialized, &setup)?;
    let inline = Arc::new(Inline::new(shared.clone(), progress));
    let helper = {
        let inline = inline.clone();
        std::thread::Builder::new()
            .name("cantus-mpi-help".into())
            .spawn(move || inline.helper())
    };
    let helper = match helper {
        Ok(h) => h,
        Err(e) => {
            // Every rank must finish what it started: the others wait.
            let _ = inline.finish();
            return Err(Error::new(
                ErrorKind::Os,
                format!("cantus: could not start the MPI helper thread: {e}"),
            ));
        }
    };
    let job = MpiJob {
        transport: Arc::new(MpiTransport {
            shared: shared.clone(),
            inline: Some(inline.clone()),
        }),
        shared,
        routing: None,
        thread: Mutex::new(Some(helper)),
        inline: Some(inline),
    };
    Ok((placement, job))
}

/// `thread` mode: MPI initialized on the MPI thread, which makes every
/// call from then on.
fn start_thread(
    frame_bytes: usize,
    trace_job: u64,
    setup: NodeSetup,
) -> Result<(Placement, MpiJob), Error> {
    let (tx, rx) = mpsc::channel();
    let thread = std::thread::Builder::new()
        .name("cantus-mpi".into())
        .spawn(move || mpi_thread(frame_bytes, trace_job, setup, tx))
        .map_err(|e| {
            Error::new(
                ErrorKind::Os,
                format!("cantus: could not start the MPI thread: {e}"),
            )
        })?;
    let (placement, shared) = match rx.recv() {
        Ok(Ok(r)) => r,
        Ok(Err(e)) => {
            let _ = thread.join();
            return Err(e);
        }
        Err(_) => {
            let _ = thread.join();
            return Err(Error::new(
                ErrorKind::Locale,
                "cantus: the MPI thread ended before MPI was initialized",
            ));
        }
    };
    let job = MpiJob {
        transport: Arc::new(MpiTransport {
            shared: shared.clone(),
            inline: None,
        }),
        shared,
        routing: None,
        thread: Mutex::new(Some(thread)),
        inline: None,
    };
    Ok((placement, job))
}

/// The MPI thread's body: initializes MPI, reports where it placed this
/// process (or why it could not), then runs the transport until the job
/// finishes. A panic or an MPI error here aborts the job.
fn mpi_thread(
    frame_bytes: usize,
    trace_job: u64,
    setup: NodeSetup,
    tx: mpsc::Sender<Result<(Placement, Arc<Shared>), Error>>,
) {
    let started =
        std::panic::catch_unwind(|| init(frame_bytes, trace_job, Level::Funneled, &setup));
    let progress = match started {
        Ok(Ok((placement, progress, shared))) => {
            let _ = tx.send(Ok((placement, shared)));
            progress
        }
        Ok(Err(e)) => {
            let _ = tx.send(Err(e));
            return;
        }
        Err(_) => {
            let _ = tx.send(Err(Error::new(
                ErrorKind::Locale,
                "cantus: the MPI thread panicked while initializing MPI",
            )));
            return;
        }
    };
    let here = progress.here();
    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| progress.run())) {
        Ok(Ok(())) => {}
        Ok(Err(e)) => {
            eprintln!("cantus: locale {here}: {e}; aborting the MPI job");
            sys::abort(1);
        }
        Err(p) => {
            eprintln!(
                "cantus: locale {here}: the MPI thread panicked ({}); aborting the MPI job",
                crate::error::panic_text(&*p).unwrap_or("a panic")
            );
            sys::abort(1);
        }
    }
}

/// The thread support a progress mode needs of an MPI cantus initializes.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Level {
    /// One thread (the MPI thread) makes every call.
    Funneled,
    /// Any thread, one at a time (inline progress).
    Serialized,
}

/// Initializes MPI (or adopts a program's own, if it allows calls from
/// any thread), duplicates `MPI_COMM_WORLD`, finds this process's place
/// and its node (making or opening the node's region, `node.rs`) and
/// takes rank 0's `trace_job` (every rank calls the broadcast, traced or
/// not, so that none waits for another).
fn init(
    frame_bytes: usize,
    trace_job: u64,
    level: Level,
    setup: &NodeSetup,
) -> Result<(Placement, Progress, Arc<Shared>), Error> {
    let (initialized, finalized) = sys::init_state()?;
    if finalized {
        return Err(Error::new(
            ErrorKind::Locale,
            "cantus: MPI was already finalized in this process, and MPI cannot be initialized \
             again",
        ));
    }
    let (funneled, multiple) = sys::funneled_and_multiple();
    let owns_mpi = !initialized;
    if owns_mpi {
        let (required, why) = match level {
            Level::Funneled => (
                funneled,
                "MPI_THREAD_FUNNELED (one thread of its own makes every MPI call: \
                 CANTUS_MPI_PROGRESS=thread)",
            ),
            Level::Serialized => (
                sys::serialized(),
                "MPI_THREAD_SERIALIZED (the threads that need progress make the MPI calls, \
                 one at a time: CANTUS_MPI_PROGRESS=inline, or auto with fewer than 16 CPUs \
                 per rank; CANTUS_MPI_PROGRESS=thread needs only MPI_THREAD_FUNNELED)",
            ),
        };
        let provided = sys::init_thread(required)?;
        if provided < required {
            let _ = sys::finalize();
            return Err(Error::new(
                ErrorKind::Locale,
                format!(
                    "cantus: this MPI provides only {}, and cantus needs {why}; use an MPI built \
                     with thread support",
                    sys::thread_level_name(provided)
                ),
            ));
        }
    } else {
        let provided = sys::query_thread()?;
        if provided != multiple {
            return Err(Error::new(
                ErrorKind::Locale,
                format!(
                    "cantus: the program initialized MPI itself with {}; cantus makes its MPI \
                     calls from threads of its own, beside the program's, which needs \
                     MPI_THREAD_MULTIPLE: initialize MPI with MPI_Init_thread(..., \
                     MPI_THREAD_MULTIPLE, ...), or let cantus initialize it",
                    sys::thread_level_name(provided)
                ),
            ));
        }
    }
    let comm = sys::dup_returning_errors(sys::world())?;
    let collective_comm = sys::dup_returning_errors(comm)?;
    let (rank, size) = sys::rank_and_size(comm)?;
    let node = node::join(comm, rank, setup)?;
    let trace_job = sys::broadcast_from_0(trace_job, comm)?;
    let shared = Arc::new(Shared::new(
        rank,
        size,
        frame_bytes,
        large_frame(setup.rendezvous_bytes),
    ));
    Ok((
        Placement {
            rank,
            size,
            node,
            trace_job,
        },
        Progress::new(shared.clone(), comm, collective_comm, owns_mpi),
        shared,
    ))
}

/// Initializes MPI as a program of its own would, at `multiple` or
/// funneled thread support (tests of a program that initialized MPI
/// before cantus).
#[doc(hidden)]
pub fn init_mpi_for_test(multiple: bool) {
    let (funneled, multi) = sys::funneled_and_multiple();
    sys::init_thread(if multiple { multi } else { funneled }).expect("MPI_Init_thread");
}

/// Finalizes an MPI that [`init_mpi_for_test`] initialized.
#[doc(hidden)]
pub fn finalize_mpi_for_test() {
    sys::finalize().expect("MPI_Finalize");
}

impl MpiJob {
    /// Lets the MPI thread finish (complete, drain, finalize) and waits
    /// for it; inline, stops the helper and finishes on this thread.
    fn end_quietly(&self) {
        self.shared.finishing.store(true, Ordering::Release);
        self.shared.mpi_bell.ring();
        if let Some(inline) = &self.inline {
            inline.stop_helper();
        }
        if let Some(t) = self.thread.lock().unwrap().take() {
            let _ = t.join();
        }
        if let Some(inline) = &self.inline {
            if let Err(e) = inline.finish() {
                inline.abort(
                    &format!(
                        "cantus: locale {}: {e}; aborting the MPI job",
                        self.shared.here
                    ),
                    ABORT_GRACE,
                );
            }
        }
    }
}

impl Job for MpiJob {
    fn transport(&self) -> Arc<dyn Transport> {
        match &self.routing {
            Some(routing) => routing.clone(),
            None => self.transport.clone(),
        }
    }

    fn shared_memory(&self) -> Option<Arc<dyn SymmetricAreas>> {
        // A node that is the whole job: every locale maps every area, as
        // in a shared-memory job (members are ranks 0..n, in order).
        let (shm, members) = self.routing.as_ref()?.node();
        (members.len() == self.shared.locales).then(|| shm.clone() as Arc<dyn SymmetricAreas>)
    }

    fn node_memory(&self) -> Option<NodeAreas> {
        let (shm, members) = self.routing.as_ref()?.node();
        (members.len() < self.shared.locales).then(|| NodeAreas {
            areas: shm.clone(),
            members: members.to_vec(),
        })
    }

    fn collectives(&self) -> Option<Arc<dyn crate::comm::collective::Collectives>> {
        // Only where MPI carries the job's traffic (it is not polled where
        // the node is the whole job, which then has memory every locale
        // maps) and there is a job to gather.
        (self.shared_memory().is_none() && self.shared.locales > 1).then(|| {
            Arc::new(collective::MpiCollectives {
                shared: self.shared.clone(),
                inline: self.inline.clone(),
            }) as Arc<dyn crate::comm::collective::Collectives>
        })
    }

    fn clocks_may_differ(&self) -> bool {
        true
    }

    fn shutdown_ordered(&self) {}

    fn finish(self: Box<Self>) {
        self.end_quietly();
    }

    fn abandon(self: Box<Self>, why: &Error) {
        // The other ranks may wait for this one (locale 0 for its hello):
        // end them all, saying why.
        self.abort(&format!(
            "cantus: locale {} could not start: {why}; aborting the MPI job",
            self.shared.here
        ));
    }

    fn abort(&self, message: &str) -> ! {
        if let Some(inline) = &self.inline {
            inline.abort(message, ABORT_GRACE);
        }
        self.shared.request_abort(message.to_string());
        // The MPI thread prints the message and calls MPI_Abort; if it
        // cannot (it is gone or stuck), this thread does, as a last
        // resort.
        std::thread::sleep(ABORT_GRACE);
        eprintln!("{message}");
        sys::abort(1)
    }
}

/// The largest frame MPI carries as a message of its own beside the
/// batched ones: the largest rendezvous block of the shared-memory
/// transport (a quarter of `CANTUS_RENDEZVOUS_BYTES`, less its header),
/// so that a route over both (`route.rs`) carries the same frames on
/// each; 0 when rendezvous is off (frames then stop at `frame_bytes`).
fn large_frame(rendezvous_bytes: usize) -> usize {
    if rendezvous_bytes == 0 {
        0
    } else {
        crate::comm::shm::rendezvous::max_payload(rendezvous_bytes)
    }
}
