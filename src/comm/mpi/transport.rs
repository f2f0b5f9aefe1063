//! The MPI transport's side that the locale's threads see: `try_send`
//! queues a frame (after taking a credit), `poll` hands on the frames
//! received. In `thread` mode the MPI thread (`progress.rs`) sends and
//! receives them and no other thread calls MPI; inline (`inline.rs`)
//! `try_send`, `poll`, `ready` and `park` make a pass of MPI calls
//! themselves, under the try-lock. `README.md` beside this file states
//! the protocols (credits, batches, waking each side) and why no locale
//! can deadlock.

pub(super) use super::batch::Batch;
use super::inline::Inline;
use super::landing;
use crate::comm::transport::{
    Arrival, LANDING_WAITING, Landing, LandingKey, Nets, Network, SendError, Transport,
};
use crate::comm::wake_bell::Bell;
use crate::error::{Error, ErrorKind, Locales};
use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

/// Bytes in front of each frame in a batch: its length (u32, LE).
pub(super) const FRAME_PREFIX: usize = 4;

/// A frame waiting to be sent (by the MPI thread, or inline).
pub(super) struct Outgoing {
    pub(super) dest: usize,
    pub(super) net: Network,
    /// The frame as a batch carries it: its length prefix, then its bytes
    /// (only the prefix, where the bytes are `borrowed`).
    pub(super) bytes: Vec<u8>,
    /// The frame's bytes where its sender keeps them, sent from there as
    /// a message of its own after `bytes` (`Transport::try_send_borrowed`).
    pub(super) borrowed: Option<Borrowed>,
    /// A landing's message (`landing.rs`): the borrowed parts alone, with
    /// this tag, outside the networks' batches (`bytes` is empty).
    pub(super) landing_tag: Option<std::os::raw::c_int>,
}

/// A frame's parts that its sender keeps valid and unchanged until `done`
/// is set (after the send that reads them completed).
pub(super) struct Borrowed {
    /// (address, length) of each part, in order.
    pub(super) parts: Vec<(usize, usize)>,
    pub(super) done: Arc<AtomicBool>,
}

/// The largest frame MPI carries whole, as a message of its own (with
/// rendezvous on, its default): 1 GiB. Larger messages are cut into
/// fragments of this size. MPI counts a message's bytes in a C `int`, so
/// a message must stay under 2 GiB; above a few MiB a fragment's
/// reassembly copy no longer matters beside its transfer. Before, frames
/// over MPI stopped at the node's rendezvous block (2 MiB by default),
/// and a 16 MiB Chant message, received in eight pieces and copied back
/// together, took about twice as long (BENCHMARKS.md, "Large frames whole
/// over MPI").
pub(super) const LARGEST_FRAME: usize = 1 << 30;

/// The least frame sent from its sender's parts rather than copied into
/// the queue: one that travels alone anyway (larger than a batch).
const BORROW_FROM: usize = super::progress::BATCH_BYTES;

/// Frames queued before a held frame (`Transport::try_send_held`) asks
/// for a pass itself: 64 small ones make one MPI message of 64.
const HELD_FRAMES: usize = 64;

/// Bytes queued before a held frame asks for a pass itself, however few
/// the frames: a batch that size is received without holding the
/// receiver's pass (`progress.rs`, `STARTED_FROM`), so the receiver takes
/// one while the sender copies the next, where 64 frames of 1 KiB (a
/// whole batch) left both sides waiting on each other in turn. Measured
/// over MPI (BENCHMARKS.md, stop 51): a window of 1 KiB messages 0.61-0.68
/// us a message with 16 KiB, 0.68-0.77 with 64 frames, 0.77-0.95 with 8
/// KiB (a batch received by a blocking receive).
const HELD_BYTES: usize = 16 << 10;

/// The longest frame copied straight onto the queue's last entry
/// (`queue_copied`); a longer one is copied into a buffer of its own
/// outside the queue's lock, so that the lock is never held for long.
const COALESCED_UP_TO: usize = 4 << 10;

/// Appends a frame of `parts` (`len` bytes in all) to `bytes`: its length
/// prefix, then the parts.
fn write_frame(bytes: &mut Vec<u8>, len: usize, parts: &[&[u8]]) {
    bytes.extend_from_slice(&(len as u32).to_le_bytes());
    for p in parts {
        crate::copy::extend(bytes, p);
    }
}

/// The frames queued for the next pass.
#[derive(Default)]
pub(super) struct Outbox {
    /// In the order `try_send` took them.
    pub(super) frames: Vec<Outgoing>,
    /// Bytes queued in `frames` (copied frames' bytes and prefixes).
    pub(super) bytes: usize,
    /// Frames queued in `frames` (an entry may hold several copied ones:
    /// `queue_copied`).
    pub(super) count: usize,
    /// Frames taken in all (`frames_taken`).
    pub(super) taken: u64,
}

/// What a sender may still put in flight towards one (destination,
/// network): frames and bytes its receiver has not yet handed on, in one
/// word, so that a frame takes both with one compare-exchange (a locked
/// instruction on every frame sent; two, when they were two words). The
/// MPI thread adds back what the receiver reports handed on.
pub(super) struct Credit {
    /// Frames `<< FRAMES_AT`, plus bytes.
    left: AtomicU64,
    /// The window: the most `left` holds, in the same form.
    window: u64,
}

/// Where a credit word's frame count starts: 48 bits of bytes below it
/// (256 TiB), 16 of frames above (the window is 4096).
const FRAMES_AT: u32 = 48;
/// The bytes of a credit word.
const BYTES: u64 = (1 << FRAMES_AT) - 1;

impl Credit {
    fn new(frames: u64, bytes: u64) -> Credit {
        assert!(
            frames < 1 << (64 - FRAMES_AT) && bytes <= BYTES,
            "a credit window of {frames} frames and {bytes} bytes does not fit its word"
        );
        let window = frames << FRAMES_AT | bytes;
        Credit {
            left: AtomicU64::new(window),
            window,
        }
    }

    /// Takes one frame of `len` bytes, if there is credit for both; never
    /// overdraws either, and takes nothing if it cannot take both.
    fn take(&self, len: u64) -> bool {
        let one = 1 << FRAMES_AT | len;
        len <= BYTES
            && self
                .left
                .fetch_update(Ordering::AcqRel, Ordering::Acquire, |v| {
                    (v >> FRAMES_AT >= 1 && v & BYTES >= len).then(|| v - one)
                })
                .is_ok()
    }

    /// Returns `frames` frames of `bytes` bytes (the receiver handed them
    /// on). Refuses, returning false and adding nothing, what would fill
    /// the window past its size: more than was ever taken, which only a
    /// malformed credit message says.
    pub(super) fn give(&self, frames: u64, bytes: u64) -> bool {
        let (most_frames, most_bytes) = (self.window >> FRAMES_AT, self.window & BYTES);
        if frames > most_frames || bytes > most_bytes {
            return false;
        }
        self.left
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |v| {
                ((v >> FRAMES_AT) + frames <= most_frames && (v & BYTES) + bytes <= most_bytes)
                    .then(|| v + (frames << FRAMES_AT | bytes))
            })
            .is_ok()
    }
}

/// Frames and bytes this locale handed on from one (source, network) and
/// has not yet told the source about: its credit to return. Written by
/// the poller (one at a time), taken by the MPI thread.
pub(super) struct Owed {
    pub(super) frames: AtomicU64,
    pub(super) bytes: AtomicU64,
}

/// Where a parked worker sleeps: `sleep(t, ready)` sleeps up to `t`
/// (for ever: `None`) unless `ready()`, and returns whether it took an
/// unpark's token (`MpiTransport::park_on`).
pub(super) type Sleep<'a> = dyn FnMut(Option<Duration>, &dyn Fn() -> bool) -> bool + 'a;

/// The node's side of a job whose node shares memory, as the MPI side
/// needs it (`route.rs` sets them).
pub(super) struct NodeHooks {
    /// Wakes this locale's parked worker if it sleeps (after frames were
    /// published to `arrived`).
    pub(super) wake: Box<dyn Fn() + Send + Sync>,
    /// Whether the node's rings hold frames for this locale.
    pub(super) ready: Box<dyn Fn() -> bool + Send + Sync>,
}

/// What the locale's threads and its MPI thread share.
pub(super) struct Shared {
    pub(super) here: usize,
    pub(super) locales: usize,
    /// The largest frame every transport of the job takes (a frame of
    /// `frame_bytes`, or a rendezvous block of the node's shared memory),
    /// and the most bytes a frame takes from its credit window ([`charge`]).
    ///
    /// [`charge`]: Shared::charge
    pub(super) max_frame: usize,
    /// The largest frame MPI carries whole, as a message of its own
    /// ([`LARGEST_FRAME`], or `max_frame` with rendezvous off).
    pub(super) largest_frame: usize,
    /// Credit windows per (destination, network), and their sizes.
    pub(super) credit: Vec<[Credit; 2]>,
    pub(super) window_frames: u64,
    pub(super) window_bytes: u64,
    /// Frames to send, in the order `try_send` took them.
    pub(super) outgoing: Mutex<Outbox>,
    /// Whether `outgoing` holds anything (a load for the MPI thread).
    pub(super) outgoing_len: AtomicUsize,
    /// Batches received, per network (index `Network as usize`).
    pub(super) arrived: [Mutex<VecDeque<Batch>>; 2],
    /// Frames in `arrived`, per network.
    pub(super) arrived_frames: [AtomicUsize; 2],
    /// Credit this locale owes, per (source, network).
    pub(super) owed: Vec<[Owed; 2]>,
    /// Whether `owed` holds credit worth returning now.
    pub(super) owing: AtomicBool,
    /// Wakes the MPI thread (a frame to send, credit to return, the end).
    pub(super) mpi_bell: Bell,
    /// Wakes a worker parked in the transport (`park`).
    pub(super) park_bell: Bell,
    /// Set by `unpark`, taken by `park` (a token, as `Transport::park`
    /// asks).
    pub(super) unparked: AtomicBool,
    /// In a job whose node shares memory (`route.rs`): how an arrival
    /// wakes this locale's parked worker, which sleeps on the node's
    /// doorbell instead of `park_bell`, and whether the node's rings hold
    /// frames (for the helper); set once, before the runtime starts.
    pub(super) node: OnceLock<NodeHooks>,
    /// Polls of the routing transport that handed frames on (`route.rs`):
    /// with MPI passes, the helper's sign that someone polls
    /// (`Inline::helper`).
    pub(super) node_polls: AtomicU64,
    /// Collectives the locale's tasks queued (`collective.rs`), for the
    /// next pass to start.
    pub(super) collectives: super::collective::Queue,
    /// Set to make the MPI thread finish (`finish`).
    pub(super) finishing: AtomicBool,
    /// The landings this locale expects (`landing.rs`).
    pub(super) landings: super::landing::Landings<super::sys::Probed>,
    /// Callers that expect arrivals at any moment
    /// (`Transport::expect_arrivals`): while above zero, the MPI thread
    /// yields instead of sleeping when idle.
    pub(super) expecting: AtomicUsize,
    /// Batches being received, and what waits behind them
    /// (`Progress::receive`), as the last pass left them: while above
    /// zero, inline, the locale's idle threads go on passing instead of
    /// napping (the receive needs MPI calls to progress).
    pub(super) receiving: AtomicUsize,
    /// A fatal error's message, for the MPI thread to print before it
    /// aborts the job (`MPI_Abort` is an MPI call: the MPI thread's).
    aborting: AtomicBool,
    abort_message: Mutex<Option<String>>,
}

impl Shared {
    /// The bytes a frame of `len` bytes takes from its credit window (C1)
    /// and gives back once handed on (C2): all of them, up to
    /// `max_frame`. A larger frame (up to `largest_frame`) is charged
    /// `max_frame`, as the largest the window is sized for: it travels
    /// alone by MPI's own rendezvous, far past any eager size, so its
    /// bytes stay with its sender until the receiver starts its receive,
    /// which the receiver bounds itself (`progress.rs`, `OPEN_MOST`;
    /// README.md, "Credit").
    pub(super) fn charge(&self, len: usize) -> u64 {
        len.min(self.max_frame) as u64
    }

    pub(super) fn new(
        here: usize,
        locales: usize,
        frame_bytes: usize,
        large_frame: usize,
    ) -> Shared {
        // A frame up to `frame_bytes` goes in batches; a larger one, up to
        // `LARGEST_FRAME` (`large_frame` is the node's largest rendezvous
        // block, 0 with rendezvous off), as a message of its own
        // (README.md, "Messages"). A window of 8 batch-sized frames (and
        // at least two of `max_frame`, the most a frame is charged, so a
        // large frame finds credit once those before it are handed on),
        // or 4096 frames, per (peer, network): enough that credit returns
        // (a quarter window at a time) stay off a stream's path.
        let max_frame = frame_bytes.max(large_frame);
        let window_bytes = ((8 * frame_bytes).max(2 * max_frame) as u64).min(BYTES);
        let window_frames = 4096;
        Shared {
            here,
            locales,
            max_frame,
            largest_frame: if large_frame > 0 {
                LARGEST_FRAME.max(max_frame)
            } else {
                max_frame
            },
            credit: (0..locales)
                .map(|_| {
                    [
                        Credit::new(window_frames, window_bytes),
                        Credit::new(window_frames, window_bytes),
                    ]
                })
                .collect(),
            window_frames,
            window_bytes,
            outgoing: Mutex::new(Outbox::default()),
            outgoing_len: AtomicUsize::new(0),
            arrived: [Mutex::new(VecDeque::new()), Mutex::new(VecDeque::new())],
            arrived_frames: [AtomicUsize::new(0), AtomicUsize::new(0)],
            owed: (0..locales)
                .map(|_| {
                    [
                        Owed {
                            frames: AtomicU64::new(0),
                            bytes: AtomicU64::new(0),
                        },
                        Owed {
                            frames: AtomicU64::new(0),
                            bytes: AtomicU64::new(0),
                        },
                    ]
                })
                .collect(),
            owing: AtomicBool::new(false),
            mpi_bell: Bell::new(),
            park_bell: Bell::new(),
            unparked: AtomicBool::new(false),
            node: OnceLock::new(),
            node_polls: AtomicU64::new(0),
            collectives: Default::default(),
            landings: Default::default(),
            finishing: AtomicBool::new(false),
            expecting: AtomicUsize::new(0),
            receiving: AtomicUsize::new(0),
            aborting: AtomicBool::new(false),
            abort_message: Mutex::new(None),
        }
    }

    /// Asks the MPI thread to print `message` and abort the job.
    pub(super) fn request_abort(&self, message: String) {
        self.abort_message.lock().unwrap().get_or_insert(message);
        self.aborting.store(true, Ordering::Release);
        self.mpi_bell.ring();
    }

    /// The message of an abort asked for, if any (a load, then the lock).
    pub(super) fn abort_request(&self) -> Option<String> {
        if !self.aborting.load(Ordering::Acquire) {
            return None;
        }
        self.abort_message.lock().unwrap().clone()
    }

    /// The MPI thread: a batch of `frames` frames from `src` on `net`.
    pub(super) fn arrive(&self, net: Network, frames: usize, batch: Batch) {
        self.arrived[net as usize].lock().unwrap().push_back(batch);
        // Release: pairs with the Acquire loads of `ready`; the batch was
        // queued under the lock before.
        self.arrived_frames[net as usize].fetch_add(frames, Ordering::Release);
        self.wake_parked();
    }

    /// Wakes this locale's parked worker, if it sleeps, after frames were
    /// published to `arrived` (each sleeping place makes the fence of the
    /// store-buffer pattern: `Bell::ring_if_sleeping`, the node's
    /// `ShmTransport::wake_own_if_sleeping`).
    pub(super) fn wake_parked(&self) {
        match self.node.get() {
            Some(node) => (node.wake)(),
            None => self.park_bell.ring_if_sleeping(),
        }
    }

    /// Whether the node's rings hold frames for this locale (`false`
    /// where it shares no memory).
    pub(super) fn node_ready(&self) -> bool {
        self.node.get().is_some_and(|node| (node.ready)())
    }

    /// Whether frames or credit wait to be sent by a pass.
    pub(super) fn sends_waiting(&self) -> bool {
        // Relaxed: a hint for whoever holds the pass lock (the lock's
        // second look, `comm/pass.rs`, orders what it then takes).
        self.outgoing_len.load(Ordering::Relaxed) > 0
            || self.owing.load(Ordering::Relaxed)
            || self.landings.has_ready()
    }

    /// Whether frames wait to be handed on.
    pub(super) fn has_arrivals(&self) -> bool {
        self.arrived_frames
            .iter()
            .any(|n| n.load(Ordering::Acquire) > 0)
    }
}

/// The transport: the locale's threads' end of [`Shared`].
pub(crate) struct MpiTransport {
    pub(super) shared: std::sync::Arc<Shared>,
    /// Inline progress (`inline.rs`): the threads that send, poll and
    /// park make the MPI calls; `None` in `thread` mode (an MPI thread
    /// makes them).
    pub(super) inline: Option<std::sync::Arc<Inline>>,
}

impl MpiTransport {
    /// Checks a frame of `len` bytes for `dest` (a locale of the job, not
    /// this one; at most `largest_frame`) and takes its credit (C1): `Failed`
    /// saying why it can never go, `Full` if the window has no room now.
    fn admit(&self, dest: usize, net: Network, len: usize) -> Result<(), SendError> {
        let s = &*self.shared;
        if dest >= s.locales || dest == s.here {
            return Err(SendError::Failed(Error::new(
                ErrorKind::Locale,
                format!(
                    "cantus: locale {} cannot send to locale {dest} (the job has {})",
                    s.here,
                    Locales(s.locales)
                ),
            )));
        }
        if len > s.largest_frame {
            return Err(SendError::Failed(Error::new(
                ErrorKind::InvalidConfig,
                format!(
                    "cantus: a {len}-byte frame is larger than the MPI transport's {} bytes",
                    s.largest_frame
                ),
            )));
        }
        if !s.credit[dest][net as usize].take(s.charge(len)) {
            return Err(SendError::Full);
        }
        Ok(())
    }

    /// Queues a frame whose credit was taken, and sends it now (inline, if
    /// no other thread is making a pass) or wakes the MPI thread.
    fn queue(&self, frame: Outgoing) {
        self.push(frame);
        self.ask_for_pass();
    }

    /// Queues `frame` for the next pass, without asking for one; returns
    /// how many frames are queued now.
    fn push(&self, frame: Outgoing) -> (usize, usize) {
        let s = &*self.shared;
        let mut out = s.outgoing.lock().unwrap();
        // A landing's message is not a frame (`landing.rs`).
        let frames = u64::from(frame.landing_tag.is_none());
        out.taken += frames;
        out.count += frames as usize;
        out.bytes += frame.bytes.len();
        out.frames.push(frame);
        // Release (under the lock as well): the MPI thread's Acquire
        // load that sees it finds the frame when it takes the lock.
        s.outgoing_len.store(out.frames.len(), Ordering::Release);
        (out.count, out.bytes)
    }

    /// Queues a frame of `parts`, copied with its length prefix, its
    /// credit taken (C1), without asking for a pass; returns how many
    /// frames and bytes are queued now. A short frame is copied straight
    /// onto the queue's last entry when that is copied frames to the same
    /// (destination, network) with room left in a batch: the pass would
    /// append it to the same batch next anyway (in the same order), and
    /// so the frame needs no buffer of its own, nor a second copy into the
    /// batch. `held` (a window's frame, more to come) starts such an
    /// entry with room for a held batch.
    fn queue_copied(
        &self,
        dest: usize,
        net: Network,
        parts: &[&[u8]],
        held: bool,
    ) -> Result<(usize, usize), SendError> {
        let len: usize = parts.iter().map(|p| p.len()).sum();
        if len > COALESCED_UP_TO {
            let frame = self.copied(dest, net, parts)?;
            return Ok(self.push(frame));
        }
        self.admit(dest, net, len)?;
        let s = &*self.shared;
        let mut out = s.outgoing.lock().unwrap();
        let onto_last = out.frames.last().is_some_and(|f| {
            f.dest == dest
                && f.net == net
                && f.borrowed.is_none()
                && f.landing_tag.is_none()
                && f.bytes.len() + FRAME_PREFIX + len <= super::progress::BATCH_BYTES
        });
        if !onto_last {
            let room = if held {
                HELD_BYTES + COALESCED_UP_TO + FRAME_PREFIX
            } else {
                FRAME_PREFIX + len
            };
            out.frames.push(Outgoing {
                dest,
                net,
                bytes: Vec::with_capacity(room),
                borrowed: None,
                landing_tag: None,
            });
        }
        write_frame(
            &mut out.frames.last_mut().expect("pushed above").bytes,
            len,
            parts,
        );
        out.taken += 1;
        out.count += 1;
        out.bytes += FRAME_PREFIX + len;
        // Release (under the lock as well), as in `push`.
        s.outgoing_len.store(out.frames.len(), Ordering::Release);
        Ok((out.count, out.bytes))
    }

    /// A frame of `parts` copied with its length prefix, its credit taken
    /// (C1).
    fn copied(&self, dest: usize, net: Network, parts: &[&[u8]]) -> Result<Outgoing, SendError> {
        let len: usize = parts.iter().map(|p| p.len()).sum();
        self.admit(dest, net, len)?;
        let mut bytes = Vec::with_capacity(FRAME_PREFIX + len);
        write_frame(&mut bytes, len, parts);
        Ok(Outgoing {
            dest,
            net,
            bytes,
            borrowed: None,
            landing_tag: None,
        })
    }

    /// Has what was queued for a pass done: now (inline, unless another
    /// thread is making a pass, which then does it before it lets go:
    /// `Inline::progress`), or by the MPI thread, woken.
    fn ask_for_pass(&self) {
        match &self.inline {
            Some(inline) => {
                inline.progress();
            }
            None => self.shared.mpi_bell.ring_if_sleeping(),
        }
    }

    /// Counts `frames` frames of `bytes` bytes from `src` on `net` as
    /// handed on; asks the MPI thread to return the credit once a quarter
    /// window is owed. Only the poller calls it.
    fn handed_on(&self, src: usize, net: Network, frames: u64, bytes: u64) {
        let s = &*self.shared;
        let owed = &s.owed[src][net as usize];
        // Written by the poller only, taken (swapped) by the MPI thread:
        // read-modify-writes, since both change it.
        let frames = owed.frames.fetch_add(frames, Ordering::AcqRel) + frames;
        let bytes = owed.bytes.fetch_add(bytes, Ordering::AcqRel) + bytes;
        if (frames >= s.window_frames / 4 || bytes >= s.window_bytes / 4)
            && !s.owing.swap(true, Ordering::AcqRel)
        {
            s.mpi_bell.ring_if_sleeping();
        }
    }
}

/// The frames of one batch a poll handed on, counted once the poll is
/// done with the batch (or unwinds out of a delivery): as arrivals no
/// longer waiting (`arrived_frames`) and as credit owed to their sender,
/// three read-modify-writes a batch instead of three a frame.
struct HandedOn<'a> {
    transport: &'a MpiTransport,
    src: usize,
    net: Network,
    frames: u64,
    bytes: u64,
}

impl Drop for HandedOn<'_> {
    fn drop(&mut self) {
        if self.frames == 0 {
            return;
        }
        self.transport.shared.arrived_frames[self.net as usize]
            .fetch_sub(self.frames as usize, Ordering::AcqRel);
        self.transport
            .handed_on(self.src, self.net, self.frames, self.bytes);
    }
}

impl Transport for MpiTransport {
    fn here(&self) -> usize {
        self.shared.here
    }

    fn locales(&self) -> usize {
        self.shared.locales
    }

    fn max_frame(&self) -> usize {
        self.shared.max_frame
    }

    fn max_frame_to(&self, _dest: usize) -> usize {
        self.shared.largest_frame
    }

    fn try_send(&self, dest: usize, net: Network, parts: &[&[u8]]) -> Result<(), SendError> {
        self.queue_copied(dest, net, parts, false)?;
        self.ask_for_pass();
        Ok(())
    }

    fn try_send_held(&self, dest: usize, net: Network, parts: &[&[u8]]) -> Result<(), SendError> {
        // A pass now only once a batch's worth waits: the frames held
        // before it go with it.
        let (frames, bytes) = self.queue_copied(dest, net, parts, true)?;
        if frames >= HELD_FRAMES || bytes >= HELD_BYTES {
            self.ask_for_pass();
        }
        Ok(())
    }

    fn flush(&self) {
        // Acquire: pairs with the Release store of `push`; a frame held by
        // another thread that this misses is that thread's to flush.
        if self.shared.outgoing_len.load(Ordering::Acquire) > 0 {
            self.ask_for_pass();
        }
    }

    fn sends_borrowed(&self, _dest: usize, len: usize) -> bool {
        len > BORROW_FROM
    }

    unsafe fn try_send_borrowed(
        &self,
        dest: usize,
        net: Network,
        parts: &[&[u8]],
    ) -> Result<Option<Arc<AtomicBool>>, SendError> {
        let len: usize = parts.iter().map(|p| p.len()).sum();
        if !self.sends_borrowed(dest, len) {
            return self.try_send(dest, net, parts).map(|()| None);
        }
        self.admit(dest, net, len)?;
        let done = Arc::new(AtomicBool::new(false));
        // Queued without a pass of its own (README, I3): its sender waits
        // for `done` polling, and a poll passes while frames are queued.
        // A Chant window's frames so leave together, at the window's next
        // wait, each saving a pass.
        self.push(Outgoing {
            dest,
            net,
            bytes: (len as u32).to_le_bytes().to_vec(),
            borrowed: Some(Borrowed {
                parts: parts
                    .iter()
                    .filter(|p| !p.is_empty())
                    .map(|p| (p.as_ptr() as usize, p.len()))
                    .collect(),
                done: done.clone(),
            }),
            landing_tag: None,
        });
        if self.inline.is_none() {
            // The MPI thread passes: woken if it sleeps.
            self.ask_for_pass();
        }
        Ok(Some(done))
    }

    unsafe fn expect_landing(&self, src: usize, place: *mut u8, len: usize) -> Option<Landing> {
        let s = &*self.shared;
        if src >= s.locales || src == s.here || len == 0 {
            return None;
        }
        s.landings.expect(src, place, len)
    }

    fn withdraw_landing(&self, landing: &Landing) {
        if self.shared.landings.withdraw(landing) {
            return;
        }
        // A pass took it: it receives the message into the place, then
        // says so, within that pass (never waiting on anything but MPI).
        while landing.state() == LANDING_WAITING {
            std::thread::yield_now();
        }
    }

    fn claim_key(&self, dest: usize) -> Option<u32> {
        let s = &*self.shared;
        if dest >= s.locales || dest == s.here {
            return None;
        }
        s.landings.send_key(dest)
    }

    fn release_claim_key(&self, dest: usize, key: u32) {
        self.shared.landings.release(dest, key);
    }

    unsafe fn claim_landing(
        &self,
        src: usize,
        key: u32,
        place: *mut u8,
        len: usize,
    ) -> Option<Landing> {
        let s = &*self.shared;
        if src >= s.locales || src == s.here || key >= landing::KEYS {
            return None;
        }
        let (landing, ask) = s.landings.claim(src, key, place, len);
        if ask {
            self.ask_for_pass();
        }
        Some(landing)
    }

    fn refuse_landing(&self, src: usize, key: u32) {
        let s = &*self.shared;
        if src < s.locales && key < landing::KEYS && s.landings.refuse(src, key) {
            self.ask_for_pass();
        }
    }

    unsafe fn try_send_landing(
        &self,
        dest: usize,
        key: LandingKey,
        parts: &[&[u8]],
    ) -> Result<Arc<AtomicBool>, SendError> {
        let (key, first) = match key {
            LandingKey::Expected(k) => (k, landing::TAG_EXPECTED),
            LandingKey::Claimed(k) => (k, landing::TAG_CLAIMED),
        };
        let s = &*self.shared;
        let parts: Vec<(usize, usize)> = parts
            .iter()
            .filter(|p| !p.is_empty())
            .map(|p| (p.as_ptr() as usize, p.len()))
            .collect();
        if dest >= s.locales || dest == s.here || parts.is_empty() || key >= landing::KEYS {
            return Err(SendError::Failed(Error::new(
                ErrorKind::Locale,
                format!(
                    "cantus: locale {} cannot send a landing's {} bytes to locale {dest} with key \
                     {key} (the job has {}; keys are below {})",
                    s.here,
                    parts.iter().map(|p| p.1).sum::<usize>(),
                    Locales(s.locales),
                    landing::KEYS
                ),
            )));
        }
        let done = Arc::new(AtomicBool::new(false));
        self.queue(Outgoing {
            dest,
            net: Network::Reply,
            bytes: Vec::new(),
            borrowed: Some(Borrowed {
                parts,
                done: done.clone(),
            }),
            landing_tag: Some(first + key as std::os::raw::c_int),
        });
        Ok(done)
    }

    fn poll(
        &self,
        nets: Nets,
        budget: usize,
        deliver: &mut dyn FnMut(Arrival<'_>),
    ) -> Result<usize, Error> {
        let s = &*self.shared;
        if let Some(inline) = &self.inline {
            // Frames already received go first (`ready` just passed);
            // else a pass may find some. Frames queued to be sent always
            // get a pass: a sender waiting for its frame to leave polls
            // (`try_send_borrowed`), maybe only for replies, with
            // requests waiting here.
            if !s.has_arrivals() || s.outgoing_len.load(Ordering::Relaxed) > 0 {
                inline.progress();
            }
        }
        let mut handled = 0;
        // Replies first: they complete work that already waits.
        for net in [Network::Reply, Network::Request] {
            if !nets.includes(net) || s.arrived_frames[net as usize].load(Ordering::Acquire) == 0 {
                continue;
            }
            while handled < budget {
                // One frame at a time out of the front batch, the lock not
                // held while it is delivered (delivery may send, and the
                // MPI thread must be able to queue arrivals meanwhile).
                let Some(mut batch) = s.arrived[net as usize].lock().unwrap().pop_front() else {
                    break;
                };
                let src = batch.src;
                let mut counted = HandedOn {
                    transport: self,
                    src,
                    net,
                    frames: 0,
                    bytes: 0,
                };
                while handled < budget && !batch.is_done() {
                    let frame = batch.next_frame().map_err(|why| {
                        Error::new(
                            ErrorKind::Locale,
                            format!(
                                "cantus: locale {}: a malformed batch from locale {}: {why}",
                                s.here, batch.src
                            ),
                        )
                    })?;
                    // Alone in its batch (a large frame travels so): lent
                    // whole, so that whoever keeps it reads it where MPI
                    // received it, without a copy. One of several: lendable
                    // if a large enough share of the batch (Messages, 7),
                    // else read during the callback.
                    let lent = batch
                        .is_alone(&frame)
                        .then(|| batch.take_alone(frame.clone(), super::spare::give_back));
                    let lendable = lent.is_none() && batch.share(&frame);
                    deliver(Arrival {
                        src,
                        net,
                        bytes: if lent.is_some() {
                            &[]
                        } else {
                            batch.frame(frame.clone())
                        },
                        lent,
                        lendable: if lendable {
                            batch.lendable(frame.clone())
                        } else {
                            None
                        },
                    });
                    counted.frames += 1;
                    counted.bytes += s.charge(frame.len());
                    handled += 1;
                }
                drop(counted);
                if !batch.is_done() {
                    // Budget spent: the rest first next time.
                    s.arrived[net as usize].lock().unwrap().push_front(batch);
                }
            }
        }
        Ok(handled)
    }

    fn ready(&self) -> bool {
        if self.shared.has_arrivals() {
            return true;
        }
        // Inline: the asker (an idle worker between its backoffs, a busy
        // one between tasks) looks at MPI itself.
        match &self.inline {
            Some(inline) => {
                inline.progress();
                // A batch being received needs passes: polls make them.
                self.shared.has_arrivals() || self.shared.receiving.load(Ordering::Relaxed) > 0
            }
            None => false,
        }
    }

    fn expect_arrivals(&self, on: bool) {
        if on {
            self.shared.expecting.fetch_add(1, Ordering::Relaxed);
        } else {
            self.shared.expecting.fetch_sub(1, Ordering::Relaxed);
        }
    }

    fn has_progress_thread(&self) -> bool {
        self.inline.is_none()
    }

    fn attach_poller(&self, poller: crate::sched::driver::DriverPoller) {
        if let Some(inline) = &self.inline {
            inline.attach(poller);
        }
    }

    fn frames_taken(&self) -> u64 {
        self.shared.outgoing.lock().unwrap().taken
    }

    fn park(&self, timeout: Option<Duration>) {
        let s = &*self.shared;
        self.park_on(timeout, &|| false, &mut |t, ready| {
            if s.unparked.swap(false, Ordering::AcqRel) {
                return true;
            }
            s.park_bell
                .sleep(t, || ready() || s.unparked.load(Ordering::Acquire));
            s.unparked.swap(false, Ordering::AcqRel)
        });
    }

    fn unpark(&self) {
        self.shared.unparked.store(true, Ordering::Release);
        self.shared.park_bell.ring();
    }
}

impl MpiTransport {
    /// Parks the last idle worker until frames arrived (here, or what
    /// `also_ready` reads), an unpark, or `timeout`. `sleep(t, ready)` is
    /// the sleeping place: it sleeps up to `t` unless `ready()`, and
    /// returns whether it took an unpark's token; whoever publishes
    /// arrivals wakes it (`Shared::wake_parked`). In `thread` mode the
    /// worker sleeps once (the MPI thread wakes it); inline it makes
    /// passes between naps (`Inline::park_on`).
    pub(super) fn park_on(
        &self,
        timeout: Option<Duration>,
        also_ready: &dyn Fn() -> bool,
        sleep: &mut Sleep<'_>,
    ) {
        let s = &*self.shared;
        let ready = || s.has_arrivals() || also_ready();
        match &self.inline {
            // Inline, a batch being received needs passes: no nap (the
            // worker's idle loop passes again at once).
            Some(_) if s.receiving.load(Ordering::Relaxed) > 0 => {}
            Some(inline) => inline.park_on(timeout, &ready, sleep),
            None => {
                sleep(timeout, &ready);
            }
        }
    }
}

/// The frame whose length prefix starts at byte `at` of `bytes`: its
/// byte range, checked to lie inside `bytes`.
pub(super) fn frame_at(bytes: &[u8], at: usize) -> Result<std::ops::Range<usize>, String> {
    let Some(prefix) = bytes.get(at..at + FRAME_PREFIX) else {
        return Err(format!("a length prefix cut at byte {at}"));
    };
    let len = u32::from_le_bytes(prefix.try_into().expect("four bytes")) as usize;
    let start = at + FRAME_PREFIX;
    let end = start
        .checked_add(len)
        .filter(|&e| e <= bytes.len())
        .ok_or_else(|| format!("a {len}-byte frame at byte {at} runs past the batch's end"))?;
    Ok(start..end)
}

/// Counts the frames of a received batch, checking its structure, so that
/// a malformed batch from a faulty peer is refused whole, before any of
/// it is handed on.
pub(super) fn count_frames(bytes: &[u8]) -> Result<usize, String> {
    let (mut at, mut n) = (0, 0);
    while at < bytes.len() {
        at = frame_at(bytes, at)?.end;
        n += 1;
    }
    Ok(n)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn credit_is_never_overdrawn_nor_created() {
        let c = Credit::new(2, 100);
        assert!(c.take(60));
        assert!(!c.take(60), "bytes short: refused, nothing taken");
        assert!(c.take(40));
        assert!(!c.take(0), "frames short");
        assert!(c.give(2, 100));
        assert!(!c.take(101));
        assert!(c.take(100));
        assert_eq!(c.left.load(Ordering::Relaxed), 1 << FRAMES_AT);
        // More back than was taken (a malformed credit message): refused,
        // nothing added.
        assert!(!c.give(2, 0), "a frame more than the window");
        assert!(!c.give(0, 101), "bytes past the window");
        assert!(!c.give(u64::MAX, u64::MAX));
        assert_eq!(c.left.load(Ordering::Relaxed), 1 << FRAMES_AT);
        assert!(c.give(1, 100));
        assert_eq!(c.left.load(Ordering::Relaxed), c.window);
        assert!(!c.take(u64::MAX), "more bytes than a word holds");
    }

    #[test]
    fn credit_taken_by_many_threads_adds_up() {
        let c = Credit::new(4096, 1 << 20);
        let taken = AtomicU64::new(0);
        std::thread::scope(|t| {
            for k in 0..4u64 {
                let (c, taken) = (&c, &taken);
                t.spawn(move || {
                    for i in 0..2000u64 {
                        let len = 1 + (i * 7 + k) % 900;
                        if c.take(len) {
                            taken.fetch_add(1 << FRAMES_AT | len, Ordering::Relaxed);
                        }
                    }
                });
            }
        });
        let taken = taken.load(Ordering::Relaxed);
        assert_eq!(c.left.load(Ordering::Relaxed) + taken, c.window);
        assert!(c.give(taken >> FRAMES_AT, taken & BYTES));
        assert_eq!(c.left.load(Ordering::Relaxed), c.window);
    }

    #[test]
    fn frames_past_the_window_size_go_whole_charged_as_its_largest() {
        // Rendezvous on: 32 KiB batch frames, 2 MiB blocks.
        let s = Shared::new(0, 2, 32 << 10, 2 << 20);
        assert_eq!((s.max_frame, s.largest_frame), (2 << 20, LARGEST_FRAME));
        assert_eq!(s.window_bytes, 4 << 20);
        assert_eq!(s.charge(1000), 1000);
        assert_eq!(s.charge(2 << 20), 2 << 20);
        assert_eq!(s.charge(16 << 20), 2 << 20);
        // Two such frames fill a window; handed on, they give back what
        // they took.
        let c = &s.credit[1][0];
        assert!(c.take(s.charge(16 << 20)) && c.take(s.charge(LARGEST_FRAME)));
        assert!(!c.take(s.charge(1)));
        assert!(c.give(2, s.charge(16 << 20) + s.charge(LARGEST_FRAME)));
        assert!(c.take(s.window_bytes));
        // Rendezvous off: frames stop at the batch frame.
        let s = Shared::new(0, 2, 32 << 10, 0);
        assert_eq!((s.max_frame, s.largest_frame), (32 << 10, 32 << 10));
    }
}
