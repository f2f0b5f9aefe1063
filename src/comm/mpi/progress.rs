//! The MPI calls of a locale, made in passes: by the MPI thread (`thread`
//! mode, `MPI_THREAD_FUNNELED`, seed 001's probe/send loop: `run`), or by
//! whichever thread holds the inline mode's lock (`inline.rs`: `pass`,
//! `finish`). A pass sends the
//! frames the locale's threads queued, in batches per (destination,
//! network), returns credit for the frames its locale handed on, completes
//! its sends, and receives what arrived, with a matched probe and receive;
//! every call returns at once. The MPI thread sleeps only after a while
//! with nothing to do. `README.md` beside this file states the protocol.

use super::collective::Active;
use super::landing::{self, Arrived};
use super::sys::{self, MPI_Comm, MPI_Request};
use super::transport::{Batch, FRAME_PREFIX, Outgoing, Shared, count_frames};
use crate::comm::transport::Network;
use crate::error::Error;
use std::collections::VecDeque;
use std::os::raw::c_int;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// Message tags on our communicator: a batch of frames per network, and
/// credit returned.
pub(super) const TAG_REQUESTS: c_int = 0;
pub(super) const TAG_REPLIES: c_int = 1;
pub(super) const TAG_CREDIT: c_int = 2;

/// A batch is closed and sent once it would grow past this (a frame
/// larger than it travels alone).
pub(super) const BATCH_BYTES: usize = 64 << 10;
/// Messages taken per receiving pass, so that sends are not starved.
const RECEIVE_BUDGET: usize = 64;
/// Batches longer than this are received without waiting for them
/// (`MPI_Imrecv`): past MPI's eager sizes (4 KiB in Open MPI's
/// shared-memory transport, 64 KiB over TCP) a message comes by
/// rendezvous, and a blocking receive would hold the pass until its
/// sender's progress brought all of it.
const STARTED_FROM: usize = 16 << 10;
/// Bytes of batches being received from one source at once (one is always
/// let in), or [`OPEN_MESSAGES`] messages where that is more: several
/// rendezvous overlap their handshakes, each message's with the copies of
/// those before it.
const OPEN_BYTES: usize = 512 << 10;
/// Messages being received from one source at once, however large
/// ([`OPEN_BYTES`]). Measured with 1 MiB messages over MPI (BENCHMARKS.md,
/// "Large receives in recycled buffers"): four at once 12% faster per
/// message than one, two no faster. (Before their buffers were recycled,
/// `spare.rs`, three or more at once made each 1.5-4x slower: the blocks
/// freed together were given back to the system and faulted in again.)
const OPEN_MESSAGES: usize = 4;
/// The most bytes being received from one source at once however many
/// messages that is (one is always let in): a frame may be as large as
/// `transport::LARGEST_FRAME`, and four of those at once would hold 4 GiB
/// of receive buffers. Four 16 MiB messages still come in together.
const OPEN_MOST: usize = 64 << 20;
/// Bytes of a credit message: network, frames, bytes.
const CREDIT_BYTES: usize = 24;

/// Idle passes spent spinning before the thread starts yielding the core.
const SPIN_PASSES: u32 = 16;
/// How long the thread yields between passes after its last work before
/// it starts sleeping.
const YIELD_FOR: Duration = Duration::from_millis(2);
/// The first and the longest sleep of an idle MPI thread: an arrival
/// while it sleeps waits at most this long (a send or credit to return
/// wakes it at once).
const FIRST_NAP: Duration = Duration::from_micros(50);
const LONGEST_NAP: Duration = Duration::from_millis(1);

fn tag_of(net: Network) -> c_int {
    match net {
        Network::Request => TAG_REQUESTS,
        Network::Reply => TAG_REPLIES,
    }
}

/// The MPI thread's state; every MPI handle lives here, on its thread.
pub(super) struct Progress {
    shared: Arc<Shared>,
    comm: MPI_Comm,
    /// Whether this process initialized MPI (and so finalizes it).
    owns_mpi: bool,
    /// Sends in flight and the buffers they read (same index), with the
    /// flag to set when a send from a frame's borrowed parts completed.
    requests: Vec<MPI_Request>,
    buffers: Vec<(Vec<u8>, Option<Arc<AtomicBool>>)>,
    completed: Vec<c_int>,
    /// Open batches per (destination, network) during a sending pass.
    open: Vec<[Vec<u8>; 2]>,
    /// The queue taken from the locale's threads, kept for its capacity.
    taken: Vec<Outgoing>,
    /// MPI messages sent to / received from each locale (all tags): the
    /// shutdown's drain counts them.
    sent_to: Vec<u64>,
    received_from: Vec<u64>,
    /// The last pass handed frames to the locale's threads.
    delivered: bool,
    /// Per source, what came from it that waits behind a batch still being
    /// received ([`STARTED_FROM`]), in the order it came, so that batches
    /// are handed on in their sender's order; `incoming` counts them.
    behind: Vec<VecDeque<Incoming>>,
    incoming: usize,
    /// Per source, the bytes of its batches being received
    /// ([`OPEN_BYTES`]), and how many of its messages wait matched, their
    /// receives not started: while one does, what comes after it from that
    /// source waits matched behind it, so that receives start in the order
    /// sent (MPI may send a later message's bytes only after an earlier
    /// one's: a receive started past one not started could wait for ever).
    open_bytes: Vec<usize>,
    matched: Vec<usize>,
    /// The last receiving pass found a batch: batches come in a stream,
    /// so a pass takes all that arrived (up to the budget); otherwise it
    /// ends at the first, which the engine's poll then hands on at once
    /// instead of after one more probe ([`Progress::receive`]).
    streaming: bool,
    /// The communicator of the job's collectives (`collective.rs`), apart
    /// from the frames' so that neither can match the other's traffic,
    /// and the collectives in flight on it.
    collective_comm: MPI_Comm,
    collectives: Vec<Active>,
}

// SAFETY: a `Progress` holds MPI handles (raw pointers in Open MPI) and
// buffers that pending requests read. It is used by one thread at a time:
// owned by the MPI thread (`thread` mode, MPI_THREAD_FUNNELED: it is
// made, used and finished on that thread), or kept under the inline
// mode's pass lock (`inline.rs`, `comm/pass.rs`; MPI_THREAD_SERIALIZED or
// MULTIPLE, which let any thread call MPI while no two calls overlap: the
// lock's Acquire/Release flag orders them).
// Nothing in it is tied to a thread by Rust (no thread-locals, no `Rc`).
unsafe impl Send for Progress {}

impl Progress {
    pub(super) fn new(
        shared: Arc<Shared>,
        comm: MPI_Comm,
        collective_comm: MPI_Comm,
        owns_mpi: bool,
    ) -> Progress {
        let n = shared.locales;
        Progress {
            shared,
            comm,
            owns_mpi,
            requests: Vec::new(),
            buffers: Vec::new(),
            completed: Vec::new(),
            open: (0..n).map(|_| [Vec::new(), Vec::new()]).collect(),
            taken: Vec::new(),
            sent_to: vec![0; n],
            received_from: vec![0; n],
            delivered: false,
            behind: (0..n).map(|_| VecDeque::new()).collect(),
            incoming: 0,
            open_bytes: vec![0; n],
            matched: vec![0; n],
            streaming: false,
            collective_comm,
            collectives: Vec::new(),
        }
    }

    /// This locale.
    pub(super) fn here(&self) -> usize {
        self.shared.here
    }

    /// Runs until the locale finishes; then completes every send, drains
    /// what the others sent, frees the communicator and finalizes MPI.
    pub(super) fn run(mut self) -> Result<(), Error> {
        let mut idle = 0u32;
        let mut last_work = Instant::now();
        let mut nap = FIRST_NAP;
        loop {
            if let Some(why) = self.shared.abort_request() {
                eprintln!("{why}");
                sys::abort(1);
            }
            let worked = self.pass()?;
            if self.shared.finishing.load(Ordering::Acquire)
                && self.shared.outgoing_len.load(Ordering::Acquire) == 0
            {
                return self.finish();
            }
            if worked {
                idle = 0;
                nap = FIRST_NAP;
                last_work = Instant::now();
                if self.delivered {
                    // A worker may share this core: let it take what
                    // arrived now rather than after a spin.
                    self.delivered = false;
                    std::thread::yield_now();
                }
                continue;
            }
            idle = idle.saturating_add(1);
            if idle < SPIN_PASSES {
                std::hint::spin_loop();
            } else if !self.requests.is_empty()
                || self.incoming > 0
                || !self.collectives.is_empty()
                || last_work.elapsed() < YIELD_FOR
                || self.shared.expecting.load(Ordering::Relaxed) > 0
            {
                // Sends in flight need MPI calls to progress; a quiet
                // spell shorter than YIELD_FOR is likely to end soon; and
                // a locale that expects arrivals at any moment (a
                // balanced computation) must not hold one up by a nap.
                std::thread::yield_now();
            } else {
                let s = &*self.shared;
                s.mpi_bell.sleep(Some(nap), || {
                    s.outgoing_len.load(Ordering::Acquire) > 0
                        || s.owing.load(Ordering::Acquire)
                        || s.landings.has_ready()
                        || s.collectives.has_queued()
                        || s.finishing.load(Ordering::Acquire)
                        || s.abort_request().is_some()
                });
                nap = (nap * 2).min(LONGEST_NAP);
            }
        }
    }

    /// One pass: sends what is queued, returns the credit owed, completes
    /// sends, receives what arrived (into the arrival queues), starts and
    /// tests the job's collectives. Every call returns at once (D1).
    /// Returns whether it did anything.
    pub(super) fn pass(&mut self) -> Result<bool, Error> {
        let mut worked = self.send_queued()?;
        worked |= self.return_credit()?;
        worked |= self.complete_sends()?;
        worked |= self.receive(true)?;
        worked |= self.collectives()?;
        Ok(worked)
    }

    /// A pass that receives all that arrived (up to the budget), a lone
    /// batch or not: the inline helper's, whose passes are far apart
    /// (`inline.rs`), so the rest of a burst would wait a period more.
    pub(super) fn pass_all(&mut self) -> Result<bool, Error> {
        self.streaming = true;
        self.pass()
    }

    /// Starts the collectives queued since the last pass, in their order
    /// (the order MPI matches them by), and tests those in flight.
    pub(super) fn collectives(&mut self) -> Result<bool, Error> {
        let mut worked = false;
        if self.shared.collectives.has_queued() {
            for op in self.shared.collectives.take_all() {
                let active = op.start(self.shared.locales, self.collective_comm)?;
                self.collectives.push(active);
                worked = true;
            }
        }
        let before = self.collectives.len();
        let mut failed = None;
        self.collectives.retain_mut(|c| match c.test() {
            Ok(done) => !done,
            Err(e) => {
                failed.get_or_insert(e);
                true
            }
        });
        if let Some(e) = failed {
            return Err(e);
        }
        Ok(worked || self.collectives.len() < before)
    }

    /// Sends what the locale's threads queued, in batches per
    /// (destination, network), in the order they queued it.
    fn send_queued(&mut self) -> Result<bool, Error> {
        let s = self.shared.clone();
        if s.outgoing_len.load(Ordering::Acquire) == 0 {
            return Ok(false);
        }
        {
            let mut out = s.outgoing.lock().unwrap();
            std::mem::swap(&mut out.frames, &mut self.taken);
            out.bytes = 0;
            out.count = 0;
            s.outgoing_len.store(0, Ordering::Release);
        }
        let mut frames = std::mem::take(&mut self.taken);
        for f in frames.drain(..) {
            if let Some(borrowed) = f.borrowed {
                let (parts, tag) = match f.landing_tag {
                    // A landing's message: its parts alone, in no network's
                    // order (`landing.rs`).
                    Some(tag) => (borrowed.parts, tag),
                    None => {
                        // Alone, after the open batch (order), from where
                        // its sender keeps it: the prefix, then the frame's
                        // parts.
                        if !self.open[f.dest][f.net as usize].is_empty() {
                            self.close(f.dest, f.net)?;
                        }
                        let mut parts = Vec::with_capacity(borrowed.parts.len() + 1);
                        parts.push((f.bytes.as_ptr() as usize, f.bytes.len()));
                        parts.extend_from_slice(&borrowed.parts);
                        (parts, tag_of(f.net))
                    }
                };
                // SAFETY: the prefix's heap block is kept in
                // `self.buffers` until the send completes (moving a Vec
                // does not move it); the sender keeps the other parts
                // valid and unchanged until `done` is set, which
                // `complete_sends` does only once MPI reports the send
                // complete (`Transport::try_send_borrowed`'s contract).
                let req = unsafe { sys::isend_parts(&parts, f.dest, tag, self.comm)? };
                self.requests.push(req);
                self.buffers.push((f.bytes, Some(borrowed.done)));
                self.sent_to[f.dest] += 1;
                continue;
            }
            // A frame comes with its length prefix: alone in its batch it
            // is sent as it is (no copy); others are appended to it.
            let batch = &mut self.open[f.dest][f.net as usize];
            if !batch.is_empty() && batch.len() + f.bytes.len() > BATCH_BYTES {
                self.close(f.dest, f.net)?;
            }
            let batch = &mut self.open[f.dest][f.net as usize];
            if batch.is_empty() {
                *batch = f.bytes;
            } else {
                crate::copy::extend(batch, &f.bytes);
            }
        }
        self.taken = frames;
        for dest in 0..s.locales {
            for net in Network::ALL {
                if !self.open[dest][net as usize].is_empty() {
                    self.close(dest, net)?;
                }
            }
        }
        Ok(true)
    }

    /// Sends the open batch for (`dest`, `net`).
    fn close(&mut self, dest: usize, net: Network) -> Result<(), Error> {
        let batch = std::mem::take(&mut self.open[dest][net as usize]);
        self.start_send(batch, dest, tag_of(net))
    }

    /// Starts sending `buf`, which is kept until the send completes.
    fn start_send(&mut self, buf: Vec<u8>, dest: usize, tag: c_int) -> Result<(), Error> {
        // SAFETY: `buf`'s heap block is moved into `self.buffers` below
        // and neither written nor freed before `complete_sends` sees the
        // request complete (moving a Vec does not move its block).
        let req = unsafe { sys::isend(&buf, dest, tag, self.comm)? };
        self.requests.push(req);
        self.buffers.push((buf, None));
        self.sent_to[dest] += 1;
        Ok(())
    }

    /// Returns the credit owed for frames the locale handed on.
    fn return_credit(&mut self) -> Result<bool, Error> {
        let s = self.shared.clone();
        if !s.owing.swap(false, Ordering::AcqRel) {
            return Ok(false);
        }
        for src in 0..s.locales {
            for net in Network::ALL {
                let owed = &s.owed[src][net as usize];
                let frames = owed.frames.swap(0, Ordering::AcqRel);
                let bytes = owed.bytes.swap(0, Ordering::AcqRel);
                if frames == 0 && bytes == 0 {
                    continue;
                }
                let mut m = Vec::with_capacity(CREDIT_BYTES);
                m.extend_from_slice(&(net as u64).to_le_bytes());
                m.extend_from_slice(&frames.to_le_bytes());
                m.extend_from_slice(&bytes.to_le_bytes());
                self.start_send(m, src, TAG_CREDIT)?;
            }
        }
        Ok(true)
    }

    /// Frees the buffers of sends that completed.
    fn complete_sends(&mut self) -> Result<bool, Error> {
        if self.requests.is_empty() {
            return Ok(false);
        }
        sys::test_some(&mut self.requests, &mut self.completed)?;
        if self.completed.is_empty() {
            return Ok(false);
        }
        self.completed.sort_unstable_by(|a, b| b.cmp(a));
        for &i in &self.completed {
            let i = i as usize;
            self.requests.swap_remove(i);
            if let (_, Some(done)) = self.buffers.swap_remove(i) {
                // Release: MPI read the borrowed parts before this; the
                // sender's Acquire load that sees it may reuse them.
                done.store(true, Ordering::Release);
            }
        }
        Ok(true)
    }

    /// Takes what arrived: batches go to the locale's threads (if
    /// `deliver`; at shutdown they are only counted), credit to its
    /// senders' windows. A long batch is received without waiting for it
    /// ([`STARTED_FROM`]), and what comes after it from the same source
    /// waits behind it; a later pass hands them on, in order, once it is
    /// all there.
    fn receive(&mut self, deliver: bool) -> Result<bool, Error> {
        let s = self.shared.clone();
        let mut any = self.hand_on_behind(deliver)?;
        // Parked landing messages claimed (or refused) since the last pass.
        for a in s.landings.take_ready() {
            any = true;
            self.on_landing(a)?;
        }
        // Batches found by this pass, and whether it stops after the first:
        // a batch that comes alone (the last pass found none) goes on to
        // the engine now, not after a probe that finds nothing more (one
        // MPI call, 60-90 ns here, on a lone message's way: 8% of a
        // 1-byte Chant message one way over MPI); in a stream the next
        // pass, which finds one again, takes all that arrived.
        let mut batches = 0;
        for _ in 0..RECEIVE_BUDGET {
            if batches > 0 && !self.streaming {
                break;
            }
            let Some(p) = sys::probe_any(self.comm)? else {
                break;
            };
            any = true;
            if p.src < s.locales {
                self.received_from[p.src] += 1;
            }
            if landing::is_landing(p.tag) && p.src < s.locales {
                self.on_landing(s.landings.arrived(p))?;
                continue;
            }
            if p.src < s.locales && matches!(p.tag, TAG_REQUESTS | TAG_REPLIES) {
                let (src, len) = (p.src, p.len);
                let open = self.open_bytes[src];
                if self.matched[src] > 0 || (len > STARTED_FROM && !may_open(open, len)) {
                    // After its source's messages (receives start in order).
                    self.put_behind(src, Incoming::Matched(Some(p)));
                    batches += 1;
                    continue;
                }
                if len > STARTED_FROM {
                    let e = start(p, &mut self.open_bytes[src])?;
                    self.put_behind(src, e);
                    batches += 1;
                    continue;
                }
            }
            let m = sys::receive_probed(p, FRAME_PREFIX)?;
            if m.src >= s.locales {
                eprintln!(
                    "cantus: locale {}: a message from rank {}, outside the job; dropped",
                    s.here, m.src
                );
                continue;
            }
            if matches!(m.tag, TAG_REQUESTS | TAG_REPLIES) && !self.behind[m.src].is_empty() {
                // Behind a batch of its sender still being received.
                self.put_behind(m.src, Incoming::Received(m));
                batches += 1;
                continue;
            }
            if self.take(m, deliver) {
                batches += 1;
            }
        }
        self.streaming = batches > 0;
        self.publish_receiving();
        Ok(any)
    }

    /// Hands on, in their order, what waits behind batches still being
    /// received, up to the first of each source that is not all there.
    fn hand_on_behind(&mut self, deliver: bool) -> Result<bool, Error> {
        if self.incoming == 0 {
            return Ok(false);
        }
        let mut any = false;
        for src in 0..self.behind.len() {
            self.start_matched(src, false)?;
            while let Some(front) = self.behind[src].front_mut() {
                match front {
                    Incoming::Receiving(r) => {
                        if !r.test()? {
                            break;
                        }
                        self.open_bytes[src] -= r.len();
                    }
                    // Its turn came as the receives before it ended: it
                    // starts now (nothing before it is open).
                    Incoming::Matched(p) => {
                        let p = p.take().expect("a matched message");
                        *front = start(p, &mut self.open_bytes[src])?;
                        self.matched[src] -= 1;
                        continue;
                    }
                    Incoming::Received(_) => {}
                }
                let m = match self.behind[src].pop_front().expect("a front") {
                    Incoming::Receiving(r) => r.take(),
                    Incoming::Received(m) => m,
                    Incoming::Matched(_) => unreachable!("a matched message at the front"),
                };
                self.incoming -= 1;
                any = true;
                self.take(m, deliver);
            }
        }
        self.publish_receiving();
        Ok(any)
    }

    /// Queues `e` behind what came from `src` before it.
    fn put_behind(&mut self, src: usize, e: Incoming) {
        if matches!(e, Incoming::Matched(_)) {
            self.matched[src] += 1;
        }
        self.behind[src].push_back(e);
        self.incoming += 1;
    }

    /// Starts the receives of `src`'s matched messages, in order, as far
    /// as the open bytes allow (all of them if `all`: before a landing of
    /// `src` is received, whose bytes MPI may send only after theirs); a
    /// short one is received at once, everything before it being started.
    fn start_matched(&mut self, src: usize, all: bool) -> Result<(), Error> {
        if self.matched[src] == 0 {
            return Ok(());
        }
        for e in self.behind[src].iter_mut() {
            let Incoming::Matched(p) = e else {
                continue;
            };
            let len = p.as_ref().expect("a matched message").len;
            if len > STARTED_FROM && !all && !may_open(self.open_bytes[src], len) {
                break;
            }
            let p = p.take().expect("a matched message");
            *e = start(p, &mut self.open_bytes[src])?;
            self.matched[src] -= 1;
        }
        Ok(())
    }

    /// Tells the locale's threads how many receives are open
    /// (`Shared::receiving`), writing only a change: the word is read on
    /// every idle poll, and a pass that wrote it each time would take its
    /// cache line from them.
    fn publish_receiving(&self) {
        let r = &self.shared.receiving;
        if r.load(Ordering::Relaxed) != self.incoming {
            r.store(self.incoming, Ordering::Relaxed);
        }
    }

    /// Takes one message received from a locale of the job: a batch goes
    /// to the locale's threads (if `deliver`), credit to its sender's
    /// window. Returns whether it handed on a batch.
    fn take(&mut self, m: sys::Received, deliver: bool) -> bool {
        let s = &*self.shared;
        match m.tag {
            TAG_REQUESTS | TAG_REPLIES => {
                if !deliver {
                    return false;
                }
                let net = if m.tag == TAG_REQUESTS {
                    Network::Request
                } else {
                    Network::Reply
                };
                match count_frames(&m.bytes[m.start..]) {
                    Ok(0) => false,
                    Ok(n) => {
                        self.delivered = true;
                        s.arrive(net, n, Batch::new(m.src, m.bytes, m.start));
                        true
                    }
                    Err(why) => {
                        eprintln!(
                            "cantus: locale {}: a malformed batch from locale {} was dropped: {why}",
                            s.here, m.src
                        );
                        false
                    }
                }
            }
            TAG_CREDIT => {
                let given =
                    parse_credit(&m.bytes[m.start..]).is_some_and(|(net, frames, bytes)| {
                        s.credit[m.src][net as usize].give(frames, bytes)
                    });
                if !given {
                    // Unreadable, or more than the window ever lent.
                    eprintln!(
                        "cantus: locale {}: a malformed credit message from locale {} was dropped",
                        s.here, m.src
                    );
                }
                false
            }
            tag => {
                eprintln!(
                    "cantus: locale {}: a message with tag {tag} from locale {} was dropped",
                    s.here, m.src
                );
                false
            }
        }
    }

    /// Does what the landings' table says with a landing's message
    /// (`landing.rs`): receives it into its place and says it landed, or
    /// into a buffer it drops (with a note where nobody said why), or
    /// leaves it parked.
    fn on_landing(&mut self, a: Arrived<sys::Probed>) -> Result<(), Error> {
        // Every earlier message of its sender is received or being
        // received before a landing's blocking receive.
        if let Arrived::Land(p, _) | Arrived::Drop(p, _) | Arrived::Discard(p) = &a
            && p.src < self.matched.len()
        {
            self.start_matched(p.src, true)?;
        }
        match a {
            Arrived::Land(p, place) => {
                let (at, len) = place.at();
                debug_assert_eq!(len, p.len);
                // SAFETY: the place is valid for `len` bytes (the message's
                // own length, checked by the table) that nothing else
                // touches until the landing's state leaves WAITING
                // (`Transport::expect_landing`'s and `claim_landing`'s
                // contracts), which `landed` sets only after the receive
                // returned.
                unsafe { sys::receive_probed_into(p, at)? };
                place.landed();
            }
            Arrived::Drop(p, why) => {
                let (src, tag) = (p.src, p.tag);
                drop(sys::receive_probed(p, 0)?);
                eprintln!(
                    "cantus: locale {}: a message for landing tag {tag} from locale {src} was \
                     dropped: {why}",
                    self.shared.here
                );
            }
            Arrived::Discard(p) => drop(sys::receive_probed(p, 0)?),
            Arrived::Parked => {}
        }
        Ok(())
    }

    /// The end, once the locale stopped (nothing more will be queued):
    /// every send completes; every locale tells every other how many
    /// messages it sent it (`MPI_Alltoall`), and receives until it has
    /// them all, so no message is left in flight; then the communicator
    /// is freed and MPI finalized (in that order: rsmpi issue 142).
    pub(super) fn finish(mut self) -> Result<(), Error> {
        self.send_queued()?;
        while !self.requests.is_empty() {
            if !self.complete_sends()? {
                self.receive(false)?;
                std::thread::yield_now();
            }
        }
        let expected = sys::all_to_all(&self.sent_to, self.comm)?;
        loop {
            let missing = expected
                .iter()
                .zip(&self.received_from)
                .any(|(want, got)| got < want);
            if !missing {
                break;
            }
            if !self.receive(false)? {
                std::thread::yield_now();
            }
        }
        // Batches still being received: all there before the
        // communicator goes (their buffers are MPI's until then).
        while self.incoming > 0 {
            if !self.receive(false)? {
                std::thread::yield_now();
            }
        }
        sys::free(&mut self.comm)?;
        // No more receives: the spare blocks go (one lent now and given
        // back later is kept, within the same bounds, until the process
        // ends).
        super::spare::clear();
        if self.collectives.is_empty() {
            sys::free(&mut self.collective_comm)?;
        } else {
            // A collective some locale never joined (its SPMD body panicked
            // first, and the waiting task gave up): MPI still owns its
            // request and buffers, and the communicator cannot be freed
            // under it. Both are left to MPI_Finalize, the buffers leaked
            // rather than freed under MPI.
            std::mem::forget(std::mem::take(&mut self.collectives));
        }
        if self.owns_mpi {
            sys::finalize()?;
        }
        Ok(())
    }
}

/// What came from a source and waits to be handed on in its order
/// ([`Progress::receive`]).
enum Incoming {
    /// A batch matched by a probe, its receive not started yet (`None`
    /// only while it starts).
    Matched(Option<sys::Probed>),
    /// A batch still being received.
    Receiving(sys::Receiving),
    /// One received, behind such a batch.
    Received(sys::Received),
}

/// Whether a batch of `len` bytes may start being received from a source
/// with `open` bytes being received ([`OPEN_BYTES`], [`OPEN_MESSAGES`],
/// [`OPEN_MOST`]: one always may).
fn may_open(open: usize, len: usize) -> bool {
    open == 0 || open + len <= OPEN_BYTES.max(OPEN_MESSAGES * len).min(OPEN_MOST)
}

/// Starts receiving a matched batch, its turn come: a long one without
/// waiting (its bytes counted in `open_bytes`), a short one at once.
fn start(p: sys::Probed, open_bytes: &mut usize) -> Result<Incoming, Error> {
    Ok(if p.len > STARTED_FROM {
        *open_bytes += p.len;
        // A large frame's first byte (after its length prefix) is placed
        // at a multiple of 64 bytes.
        Incoming::Receiving(sys::start_receive_probed(p, FRAME_PREFIX)?)
    } else {
        Incoming::Received(sys::receive_probed(p, FRAME_PREFIX)?)
    })
}

/// A credit message: (network, frames, bytes).
fn parse_credit(b: &[u8]) -> Option<(Network, u64, u64)> {
    if b.len() != CREDIT_BYTES {
        return None;
    }
    let word = |i: usize| u64::from_le_bytes(b[8 * i..8 * i + 8].try_into().expect("eight bytes"));
    let net = match word(0) {
        0 => Network::Request,
        1 => Network::Reply,
        _ => return None,
    };
    Some((net, word(1), word(2)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn credit_messages_read_back_and_bad_ones_are_refused() {
        let mut m = Vec::new();
        for w in [Network::Reply as u64, 7, 4096] {
            m.extend_from_slice(&w.to_le_bytes());
        }
        assert_eq!(parse_credit(&m), Some((Network::Reply, 7, 4096)));
        assert_eq!(parse_credit(&m[..23]), None);
        m[0] = 9;
        assert_eq!(parse_credit(&m), None);
    }

    #[test]
    fn receives_open_together_within_bounds() {
        // One always may.
        assert!(may_open(0, 1 << 30));
        // 512 KiB of batches, or four messages where that is more.
        assert!(may_open(448 << 10, 64 << 10));
        assert!(!may_open(480 << 10, 64 << 10));
        assert!(may_open(3 << 20, 1 << 20));
        assert!(!may_open(4 << 20, 1 << 20));
        // Four of 16 MiB, but no more than 64 MiB however large.
        assert!(may_open(48 << 20, 16 << 20));
        assert!(!may_open(64 << 20, 16 << 20));
        assert!(!may_open(32 << 20, 64 << 20));
    }
}
