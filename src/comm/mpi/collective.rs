//! The job's collectives as MPI's non-blocking collectives
//! (`comm::collective`): a task queues one (`MpiCollectives`), whoever
//! makes MPI calls starts it on the job's collective communicator and
//! tests it on every pass (`Progress::collectives`: the MPI thread, or
//! inline the holder of the pass lock), and the task polls for the result
//! meanwhile (`README.md`, "Collectives").
//!
//! MPI matches collectives by the order each process starts them on a
//! communicator: a locale starts its collectives in the order its tasks
//! queued them, and only its SPMD body queues them, one at a time, in the
//! order every locale's body calls them (`pgas`'s rule).

use super::sys::{self, MPI_Comm, MPI_Request};
use super::transport::Shared;
use crate::comm::collective::{AlignedBytes, Collectives, Pending, SendParts};
use crate::error::Error;
use std::collections::VecDeque;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

/// Which collective.
enum Kind {
    AllGather,
    Broadcast {
        root: usize,
    },
    /// An all-to-all: the part to each locale, and the allocations each
    /// locale's part lands in.
    Exchange {
        send: SendParts,
        recv: Vec<AlignedBytes>,
    },
}

/// A collective a task queued, not yet started.
pub(super) struct Queued {
    kind: Kind,
    buf: Vec<u8>,
    pending: Arc<Pending>,
}

/// Collectives queued by the locale's tasks, for whoever makes the MPI
/// calls to start.
#[derive(Default)]
pub(super) struct Queue {
    ops: Mutex<VecDeque<Queued>>,
    /// How many `ops` holds (a load for the pass's quick check).
    len: AtomicUsize,
}

impl Queue {
    fn push(&self, op: Queued) {
        let mut ops = self.ops.lock().unwrap();
        ops.push_back(op);
        // Release: pairs with the Acquire in `has_queued` (the mutex orders
        // the op itself; this only says to look).
        self.len.store(ops.len(), Ordering::Release);
    }

    /// Whether a collective waits to be started.
    pub(super) fn has_queued(&self) -> bool {
        // Acquire: pairs with `push`'s Release.
        self.len.load(Ordering::Acquire) > 0
    }

    /// Takes every queued collective, in order.
    pub(super) fn take_all(&self) -> VecDeque<Queued> {
        let mut ops = self.ops.lock().unwrap();
        self.len.store(0, Ordering::Relaxed);
        std::mem::take(&mut *ops)
    }
}

/// A collective MPI runs: its request and the buffers it reads and
/// writes (moved here, so they stay put until the request completes).
pub(super) struct Active {
    req: MPI_Request,
    send: Vec<u8>,
    recv: Vec<u8>,
    /// An exchange's parts (empty for the others).
    parts: Vec<AlignedBytes>,
    /// The arrays an exchange was started with (MPI reads them until it
    /// completes).
    args: Option<sys::ExchangeArgs>,
    kind: Kind,
    pending: Arc<Pending>,
}

/// The job's collectives, for `pgas` (`Job::collectives`).
pub(super) struct MpiCollectives {
    pub(super) shared: Arc<Shared>,
    /// The inline mode's lock (`None` in `thread` mode, where the MPI
    /// thread moves collectives on).
    pub(super) inline: Option<Arc<super::inline::Inline>>,
}

impl MpiCollectives {
    fn queue(&self, kind: Kind, buf: Vec<u8>) -> Arc<Pending> {
        assert!(
            buf.len() <= i32::MAX as usize / self.shared.locales.max(1),
            "cantus: a collective's part of {} bytes is beyond what one MPI call moves",
            buf.len()
        );
        let pending = Pending::new();
        self.shared.collectives.push(Queued {
            kind,
            buf,
            pending: pending.clone(),
        });
        // The MPI thread may sleep: wake it (inline, the waiting task's
        // polls make the passes).
        self.shared.mpi_bell.ring_if_sleeping();
        pending
    }
}

impl Collectives for MpiCollectives {
    fn all_gather(&self, mine: Vec<u8>) -> Arc<Pending> {
        self.queue(Kind::AllGather, mine)
    }

    fn broadcast(&self, root: usize, buf: Vec<u8>) -> Arc<Pending> {
        self.queue(Kind::Broadcast { root }, buf)
    }

    unsafe fn exchange(&self, send: SendParts, recv: Vec<AlignedBytes>) -> Arc<Pending> {
        assert!(
            send.0.len() == self.shared.locales && recv.len() == self.shared.locales,
            "an exchange has a part each way per locale"
        );
        self.queue(Kind::Exchange { send, recv }, Vec::new())
    }

    fn progress(&self) -> bool {
        self.inline
            .as_ref()
            .is_some_and(|inline| inline.progress_collectives())
    }
}

impl Queued {
    /// Starts this collective on `comm`, of `locales` processes.
    pub(super) fn start(self, locales: usize, comm: MPI_Comm) -> Result<Active, Error> {
        let Queued {
            mut kind,
            buf,
            pending,
        } = self;
        let (mut send, mut recv) = match kind {
            Kind::AllGather => {
                let len = buf.len();
                (buf, vec![0u8; len * locales])
            }
            Kind::Broadcast { .. } | Kind::Exchange { .. } => (buf, Vec::new()),
        };
        let mut parts = match &mut kind {
            Kind::Exchange { recv, .. } => std::mem::take(recv),
            _ => Vec::new(),
        };
        // SAFETY: the buffers move into `Active` with the request (moving a
        // Vec does not move its heap buffer, nor an `AlignedBytes` its
        // allocation) and stay there, untouched, until `test` reports it
        // complete (an `Active` never completed is leaked, never freed:
        // `Progress::finish`); `recv` holds `send.len()` bytes per locale;
        // an exchange's send parts stay valid until it completes (the
        // contract of `Collectives::exchange`) and its allocations have the
        // lengths every locale agreed on.
        let (req, args) = unsafe {
            match &kind {
                Kind::AllGather => (sys::iall_gather(&send, &mut recv, comm)?, None),
                Kind::Broadcast { root } => (sys::ibroadcast(&mut send, *root, comm)?, None),
                Kind::Exchange { send: from, .. } => {
                    let into: Vec<(*mut u8, usize)> = parts
                        .iter_mut()
                        .map(|p| (p.as_mut_ptr(), p.len()))
                        .collect();
                    let (req, args) = sys::iall_to_all(&from.0, &into, comm)?;
                    (req, Some(args))
                }
            }
        };
        Ok(Active {
            req,
            send,
            recv,
            parts,
            args,
            kind,
            pending,
        })
    }
}

impl Active {
    /// Tests the request; once it completed, hands the result to the
    /// waiting task and returns `true` (the `Active` is then spent).
    pub(super) fn test(&mut self) -> Result<bool, Error> {
        if !sys::test(&mut self.req)? {
            return Ok(false);
        }
        if let Some(args) = &mut self.args {
            args.free();
        }
        match self.kind {
            Kind::AllGather => self.pending.complete(std::mem::take(&mut self.recv)),
            Kind::Broadcast { .. } => self.pending.complete(std::mem::take(&mut self.send)),
            Kind::Exchange { .. } => self.pending.complete_parts(std::mem::take(&mut self.parts)),
        }
        Ok(true)
    }
}
