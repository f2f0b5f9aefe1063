//! The active-message engine of one locale: sends requests and replies,
//! dispatches what arrives (requests become handler tasks, replies fill
//! the caller's slot, control frames drive start-up and termination), and
//! keeps the counts that termination detection needs. A file per role:
//! this one the engine's state and its place as the driver's dispatcher;
//! `engine/send.rs` sending (frames, fragments, room, the outbox);
//! `engine/dispatch.rs` what arrives (requests served, replies
//! delivered, fragments reassembled); `engine/control.rs` hellos,
//! termination waves and shutdown; `engine/deadlock.rs` the job-wide
//! deadlock check.

use super::encode::Encoding;
use super::fragment::{Reassembly, StreamLocks};
use super::handlers::{Handler, Outcome, Table};
use super::replies::{Delivered, ReplySlots};
use super::serve::Served;
use super::wire::{
    self, Control, FRAGMENT_PREFIX, HEADER_LEN, Header, Kind, MAX_PAYLOAD, Status, TAG_LEN,
};
use crate::comm::driver::{Dispatch, poll_transport};
use crate::comm::transport::{Arrival, Lent, Nets, Network, SendError, Transport};
use crate::error::{Error, ErrorKind};
use crate::sched::driver::{DriverContext, poll_with};
use crate::sched::no_wait::NoWait;
use crate::sched::{Registry, WorkerLocal};
use std::cell::Cell;
use std::collections::VecDeque;
use std::sync::atomic::{AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, OnceLock, Weak};
use std::time::{Duration, Instant};

mod control;
mod deadlock;
mod dispatch;
mod send;

pub(crate) use send::InFlight;

/// Handler tasks a locale lets run (or wait) at once before it stops
/// taking requests off the transport: requests then stay in the
/// transport's queues, whose senders poll and retry (bounded memory under
/// a flood).
pub(crate) const MAX_HANDLERS: usize = 4096;

thread_local! {
    /// The result buffer of inline calls (`Engine::serve_inline`), kept
    /// from call to call on each polling thread.
    static INLINE_RESULT: Cell<Encoding> = const { Cell::new(Encoding::new()) };
}

/// The largest inline result buffer kept for the next call.
const INLINE_RESULT_KEPT: usize = 4 << 10;

/// How long locale 0 waits for the others to say hello at start-up.
const HELLO_TIMEOUT: Duration = Duration::from_secs(60);

/// A frame's payload as the engine hands it on: still in the transport's
/// buffer (copied once, where it is kept), already the engine's own (a
/// frame reassembled from fragments: moved, never copied again), or lent
/// by the transport (a block of shared memory: kept and read in place
/// where its reader takes it at once, else copied and given back).
pub(crate) enum Body<'a> {
    /// Valid during the poll that delivered it.
    Borrowed(&'a [u8]),
    /// Reassembled.
    Owned(Vec<u8>),
    /// The frame the transport lent, whose payload starts at the offset.
    Lent(Lent, usize),
}

impl Body<'_> {
    pub(crate) fn as_slice(&self) -> &[u8] {
        match self {
            Body::Borrowed(b) => b,
            Body::Owned(v) => v,
            Body::Lent(l, start) => &l[*start..],
        }
    }

    pub(crate) fn into_vec(self) -> Vec<u8> {
        match self {
            Body::Borrowed(b) => crate::copy::to_vec(b),
            Body::Owned(v) => v,
            Body::Lent(l, start) => crate::copy::to_vec(&l[start..]),
        }
    }
}

/// One locale's engine.
pub(crate) struct Engine {
    /// This engine, for the handler tasks it spawns.
    me: Weak<Engine>,
    transport: Arc<dyn Transport>,
    /// The transport moves frames on a thread of its own (`pause`).
    progress_thread: bool,
    table: &'static Table,
    here: usize,
    locales: usize,
    /// The runtime whose workers poll this engine (set once it started).
    registry: OnceLock<Weak<Registry>>,
    /// Where requests sent wait for their replies (`replies.rs`).
    pub(crate) replies: ReplySlots,
    /// Requests sent whose reply was not yet written into its slot (or
    /// discarded): counted in `in_flight`.
    pending_count: AtomicU64,
    /// Control frames sent (`sent` is every frame the transport took but
    /// these): termination detection counts program messages only.
    control_sent: AtomicU64,
    /// Program messages (requests, replies, Chant messages, fragments)
    /// received: termination detection's other counter.
    received: AtomicU64,
    /// Handler tasks spawned and not finished.
    handlers: AtomicUsize,
    /// With tracing on: the next trace sequence number per destination
    /// (`Header::trace`).
    trace_seq: Box<[AtomicU32]>,
    /// Control frames (and rejections) that found no room in a poll:
    /// retried at the start of the next poll, never waited for there.
    outbox: Mutex<VecDeque<(usize, Network, Vec<u8>)>>,
    /// `outbox.len()`, readable without the lock: every poll checks it.
    outbox_len: AtomicUsize,
    /// Frames larger than the transport carries go as streams of
    /// fragments (`fragment.rs`): one stream at a time per destination
    /// and network, ids from `next_stream`, partial frames received.
    streams: StreamLocks,
    next_stream: AtomicU64,
    reassembly: Reassembly,
    /// The largest payload this engine sends: [`MAX_PAYLOAD`], lowered
    /// only by tests (`__test::limit_message_bytes`) to reach the paths
    /// taken when a payload is too large.
    max_message: AtomicUsize,
    /// Locale 0's view of start-up, termination waves and shutdown.
    control: Mutex<ControlState>,
    control_changed: Condvar,
    /// Control frames delivered (`Dispatch::control_frames`).
    control_frames: AtomicU64,
    /// Held while locale 0 runs a deadlock wave: one at a time.
    deadlock_waves: Mutex<()>,
}

#[derive(Default)]
struct ControlState {
    /// Locales that said hello, with the error their handler table gave.
    hellos: usize,
    hello_error: Option<Error>,
    /// The current termination wave and the answers to it.
    wave: u64,
    answers: Vec<[u64; 3]>,
    /// Shutdown was ordered (locales other than 0).
    shutdown: bool,
    /// The current deadlock wave and the answers to it (`deadlock.rs`).
    deadlock_wave: u64,
    deadlock_answers: Vec<crate::sched::deadlock_wave::Answer>,
    /// Waiters sent for a deadlock report, by locale.
    waiters: Vec<(usize, Vec<String>)>,
}

impl Engine {
    pub(crate) fn new(transport: Arc<dyn Transport>, table: &'static Table) -> Arc<Engine> {
        let locales = transport.locales();
        Arc::new_cyclic(|me| Engine {
            me: me.clone(),
            here: transport.here(),
            locales,
            progress_thread: transport.has_progress_thread(),
            transport,
            table,
            registry: OnceLock::new(),
            replies: ReplySlots::new(),
            pending_count: AtomicU64::new(0),
            control_sent: AtomicU64::new(0),
            received: AtomicU64::new(0),
            handlers: AtomicUsize::new(0),
            trace_seq: (0..locales).map(|_| AtomicU32::new(0)).collect(),
            outbox: Mutex::new(VecDeque::new()),
            outbox_len: AtomicUsize::new(0),
            streams: StreamLocks::new(locales),
            next_stream: AtomicU64::new(1),
            reassembly: Reassembly::new(locales),
            max_message: AtomicUsize::new(MAX_PAYLOAD),
            control: Mutex::new(ControlState::default()),
            control_changed: Condvar::new(),
            control_frames: AtomicU64::new(0),
            deadlock_waves: Mutex::new(()),
        })
    }

    /// Connects the engine to the runtime that polls it.
    pub(crate) fn attach(&self, registry: &Arc<Registry>) {
        let _ = self.registry.set(Arc::downgrade(registry));
    }

    pub(crate) fn here(&self) -> usize {
        self.here
    }

    /// Room for a frame to `dest` of `need` to `want` bytes that its
    /// sender writes in place before sending it (`Transport::stage`), if
    /// the transport has it to give.
    pub(crate) fn stage(
        &self,
        dest: usize,
        need: usize,
        want: usize,
    ) -> Option<crate::comm::transport::Staged> {
        self.transport.stage(dest, need, want)
    }

    pub(crate) fn locales(&self) -> usize {
        self.locales
    }

    /// Lowers the largest payload this engine sends (tests).
    pub(crate) fn limit_message_bytes(&self, max: usize) {
        self.max_message
            .store(max.min(MAX_PAYLOAD), Ordering::Relaxed);
    }

    /// The largest payload one frame of the transport carries (the
    /// transport's limit less the header); larger ones go in fragments.
    pub(crate) fn max_payload(&self) -> usize {
        self.transport.max_frame() - HEADER_LEN
    }

    /// The largest payload of an eager frame (`Transport::eager_frame`,
    /// less the header): one that never waits for the memory a receiver
    /// may keep (`SendError::NoLargeRoom`).
    pub(crate) fn eager_payload(&self) -> usize {
        self.transport.eager_frame() - HEADER_LEN
    }

    /// Passes on `Transport::expect_arrivals`.
    pub(crate) fn expect_arrivals(&self, on: bool) {
        self.transport.expect_arrivals(on);
    }

    fn outbox_len(&self) -> u64 {
        self.outbox_len.load(Ordering::Acquire) as u64
    }
}

/// Chant messages kept where the transport received them, lent out of a
/// batch of several frames (`Arrival::lendable`).
static LENT_FROM_BATCHES: AtomicU64 = AtomicU64::new(0);

/// How many messages this process kept lent out of a batch (a test's
/// count: `cantus::__test::frames_lent_from_batches`).
#[cfg(not(loom))]
pub(crate) fn frames_lent_from_batches() -> u64 {
    LENT_FROM_BATCHES.load(Ordering::Relaxed)
}

/// The engine as the driver's dispatcher.
impl Dispatch for Engine {
    fn deliver(&self, frame: Arrival<'_>, cx: &DriverContext<'_>) {
        let Arrival {
            src,
            net,
            bytes,
            lent,
            lendable,
        } = frame;
        let (h, start) = {
            let whole = lent.as_deref().unwrap_or(bytes);
            match Header::decode(whole) {
                Ok((h, payload)) => (h, whole.len() - payload.len()),
                Err(err) => {
                    self.count_received();
                    eprintln!(
                        "cantus: locale {} rejected a malformed frame from locale {src}: {err}",
                        self.here
                    );
                    return;
                }
            }
        };
        // Every frame the transport carries counts once (fragments too),
        // as its sender counted it; a frame reassembled from fragments is
        // not counted again.
        if h.kind != Kind::Control {
            self.count_received();
        }
        // A lent frame travels on as itself where it may be kept: a
        // request's arguments and a reply (kept as rule L says,
        // `serve.rs`, `replies.rs`), and a message, which waits in its
        // mailbox, lent, until received (a block of the sender's area it
        // holds up makes the sender's later large frames go in eager
        // pieces: rule L). Everything else is read during this call.
        // A message that the transport can lend (a short frame of an MPI
        // batch, `Arrival::lendable`) is kept lent too, instead of being
        // copied into a buffer of its own.
        let lent = match (h.kind, lent, lendable) {
            (Kind::Message, None, Some(l)) => {
                // Only the poll token's holder delivers: one writer at a
                // time, so a load and a store (as `count_received`), not a
                // read-modify-write on every message.
                LENT_FROM_BATCHES.store(
                    LENT_FROM_BATCHES.load(Ordering::Relaxed) + 1,
                    Ordering::Relaxed,
                );
                // `bytes` is not read after this (`Lendable::lend`).
                Some(l.lend())
            }
            (_, lent, _) => lent,
        };
        let lent = match (h.kind, lent) {
            (Kind::Request | Kind::Reply, Some(l)) => {
                return self.hand_on(src, h, &[], Body::Lent(l, start), cx);
            }
            (Kind::Message, Some(l)) => {
                let mut tag = [0u8; TAG_LEN];
                tag.copy_from_slice(&l[start..start + TAG_LEN]);
                return self.hand_on(src, h, &tag, Body::Lent(l, start + TAG_LEN), cx);
            }
            (_, lent) => lent,
        };
        let payload = &lent.as_deref().unwrap_or(bytes)[start..];
        match h.kind {
            Kind::Fragment => self.take_fragment(src, net, h, payload, cx),
            Kind::Message => {
                let (tag, bytes) = payload.split_at(TAG_LEN);
                self.hand_on(src, h, tag, Body::Borrowed(bytes), cx);
            }
            _ => self.hand_on(src, h, &[], Body::Borrowed(payload), cx),
        }
    }

    fn before_poll(&self) {
        self.flush_outbox();
    }

    fn sends_waiting(&self) -> bool {
        self.outbox_len() > 0
    }

    fn accepting(&self) -> Nets {
        if self.handlers.load(Ordering::Relaxed) >= MAX_HANDLERS {
            Nets::Replies
        } else {
            Nets::Both
        }
    }

    fn in_flight(&self) -> u64 {
        // Acquire: pairs with the Release decrement after a reply was
        // written (see `deliver_reply`).
        self.pending_count.load(Ordering::Acquire)
            + self.outbox_len()
            + self.reassembly.open()
            + super::chant::in_flight()
    }

    fn control_frames(&self) -> u64 {
        self.control_frames.load(Ordering::Relaxed)
    }

    fn job_stuck_sample(&self) -> crate::sched::outside_wait::StuckSample {
        self.deadlock_wave()
    }

    fn job_waiters(&self) -> Vec<(usize, Vec<String>)> {
        self.gather_waiters()
    }
}
