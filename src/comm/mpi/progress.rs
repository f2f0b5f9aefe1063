//! The MPI calls of a locale, made in passes: by the MPI thread (`thread`
//! mode, `MPI_THREAD_FUNNELED`, seed 001's probe/send loop: `run`), or by
//! whichever thread holds the inline mode's lock (`inline.rs`: `pass`,
//! `finish`). A pass sends the
//! frames the locale's threads queued, in batches per (destination,
//! network), returns credit for the frames its locale handed on, completes
//! its sends, and receives what arrived, with a matched probe and receive;
//! every call returns at once. The MPI thread sleeps only after a while
//! with nothing to do. `README.md` beside this file states the protocol.

use super::sys::{self, MPI_Comm, MPI_Request};
use super::transport::{Batch, Outgoing, Shared, count_frames};
use crate::comm::transport::Network;
use crate::error::Error;
use std::os::raw::c_int;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

/// Message tags on our communicator: a batch of frames per network, and
/// credit returned, for messages of up to `SMALL_MESSAGE` bytes (received
/// by receives posted in advance); larger batches on tags of their own
/// (taken by matched probes).
pub(super) const TAG_REQUESTS: c_int = 0;
pub(super) const TAG_REPLIES: c_int = 1;
pub(super) const TAG_CREDIT: c_int = 2;
pub(super) const TAG_LARGE_REQUESTS: c_int = 3;
pub(super) const TAG_LARGE_REPLIES: c_int = 4;

/// The largest message a posted receive takes: Open MPI's shared-memory
/// eager limit, above which a matched probe's extra cost is small beside
/// the copy.
const SMALL_MESSAGE: usize = 4096;
/// Receives kept posted per small tag (requests, replies, credit): more
/// messages arriving between two passes than this wait for a probe.
const POSTED: [(c_int, usize); 3] = [(TAG_REQUESTS, 8), (TAG_REPLIES, 8), (TAG_CREDIT, 2)];
/// Bytes in front of every batch: its sequence number per (source,
/// network), so that the receiver hands batches on in order although
/// small and large ones travel on different tags.
pub(super) const BATCH_HEADER: usize = 8;

/// A batch is closed and sent once it would grow past this (a frame
/// larger than it travels alone).
const BATCH_BYTES: usize = 64 << 10;
/// Messages taken per receiving pass, so that sends are not starved.
const RECEIVE_BUDGET: usize = 64;
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

/// The tag of a batch of `len` bytes on `net`.
fn tag_of(net: Network, len: usize) -> c_int {
    match (net, len <= SMALL_MESSAGE) {
        (Network::Request, true) => TAG_REQUESTS,
        (Network::Reply, true) => TAG_REPLIES,
        (Network::Request, false) => TAG_LARGE_REQUESTS,
        (Network::Reply, false) => TAG_LARGE_REPLIES,
    }
}

/// The MPI thread's state; every MPI handle lives here, on its thread.
pub(super) struct Progress {
    shared: Arc<Shared>,
    comm: MPI_Comm,
    /// Whether this process initialized MPI (and so finalizes it).
    owns_mpi: bool,
    /// Sends in flight and the buffers they read (same index).
    requests: Vec<MPI_Request>,
    buffers: Vec<Vec<u8>>,
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
    /// Receives posted in advance for small messages: their requests,
    /// buffers (capacity `SMALL_MESSAGE`, written by MPI) and tags.
    posted: Vec<MPI_Request>,
    posted_buffers: Vec<Vec<u8>>,
    posted_tags: Vec<c_int>,
    posted_indices: Vec<c_int>,
    posted_statuses: Vec<sys::MPI_Status>,
    posted_done: Vec<sys::Completed>,
    /// Sequence numbers: the next batch to send per (destination,
    /// network), the next to hand on per (source, network), and batches
    /// that came before their turn.
    next_out: Vec<[u64; 2]>,
    next_in: Vec<[InOrder; 2]>,
}

/// The batches of one (source, network), handed on in the order of their
/// sequence numbers whatever order they arrive in.
#[derive(Default)]
struct InOrder {
    /// The number of the next batch to hand on.
    next: u64,
    /// Batches that came before their turn.
    early: std::collections::BTreeMap<u64, Vec<u8>>,
}

impl InOrder {
    /// Takes batch `seq`: hands it and every batch it made due to
    /// `due`, in order, or keeps it until its turn. `false` if that number
    /// was seen before (the batch is dropped).
    fn take(&mut self, seq: u64, bytes: Vec<u8>, mut due: impl FnMut(Vec<u8>)) -> bool {
        if seq != self.next {
            return seq > self.next && self.early.insert(seq, bytes).is_none();
        }
        due(bytes);
        self.next += 1;
        while let Some(b) = self.early.remove(&self.next) {
            due(b);
            self.next += 1;
        }
        true
    }
}

// SAFETY: a `Progress` holds MPI handles (raw pointers in Open MPI) and
// buffers that pending requests read. It is used by one thread at a time:
// owned by the MPI thread (`thread` mode, MPI_THREAD_FUNNELED: it is
// made, used and finished on that thread), or kept under the inline
// mode's mutex (`inline.rs`, MPI_THREAD_SERIALIZED or MULTIPLE, which let
// any thread call MPI while no two calls overlap: the mutex orders them).
// Nothing in it is tied to a thread by Rust (no thread-locals, no `Rc`).
unsafe impl Send for Progress {}

impl Progress {
    /// The locale's MPI state, with its receives posted.
    pub(super) fn new(
        shared: Arc<Shared>,
        comm: MPI_Comm,
        owns_mpi: bool,
    ) -> Result<Progress, Error> {
        let n = shared.locales;
        let mut p = Progress {
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
            posted: Vec::new(),
            posted_buffers: Vec::new(),
            posted_tags: Vec::new(),
            posted_indices: Vec::new(),
            posted_statuses: Vec::new(),
            posted_done: Vec::new(),
            next_out: vec![[0; 2]; n],
            next_in: (0..n).map(|_| Default::default()).collect(),
        };
        for (tag, count) in POSTED {
            for _ in 0..count {
                p.posted_tags.push(tag);
                p.posted_buffers.push(Vec::new());
                p.posted.push(sys::request_null());
                p.post(p.posted.len() - 1)?;
            }
        }
        Ok(p)
    }

    /// Posts receive `i` again, into a fresh buffer.
    fn post(&mut self, i: usize) -> Result<(), Error> {
        let mut buf = Vec::with_capacity(SMALL_MESSAGE);
        // SAFETY: `buf`'s heap block (SMALL_MESSAGE bytes) is kept in
        // `posted_buffers[i]` and neither read, written nor freed until
        // the request completes (`receive`) or is cancelled (`finish`);
        // moving the Vec does not move its block.
        let req = unsafe {
            sys::irecv(
                buf.as_mut_ptr(),
                SMALL_MESSAGE,
                self.posted_tags[i],
                self.comm,
            )?
        };
        self.posted[i] = req;
        self.posted_buffers[i] = buf;
        Ok(())
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
                        || s.finishing.load(Ordering::Acquire)
                        || s.abort_request().is_some()
                });
                nap = (nap * 2).min(LONGEST_NAP);
            }
        }
    }

    /// One pass: sends what is queued, returns the credit owed, completes
    /// sends, receives what arrived (into the arrival queues). Every call
    /// returns at once (D1). Returns whether it did anything.
    pub(super) fn pass(&mut self) -> Result<bool, Error> {
        let mut worked = self.send_queued()?;
        worked |= self.return_credit()?;
        worked |= self.complete_sends()?;
        worked |= self.receive(true)?;
        Ok(worked)
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
            std::mem::swap(&mut out.0, &mut self.taken);
            s.outgoing_len.store(0, Ordering::Release);
        }
        let mut frames = std::mem::take(&mut self.taken);
        for f in frames.drain(..) {
            // A frame comes with its length prefix: alone in its batch it
            // is sent as it is (no copy); others are appended to it.
            // (It comes with room for the batch's header in front.)
            let batch = &mut self.open[f.dest][f.net as usize];
            if !batch.is_empty() && batch.len() + f.bytes.len() - BATCH_HEADER > BATCH_BYTES {
                self.close(f.dest, f.net)?;
            }
            let batch = &mut self.open[f.dest][f.net as usize];
            if batch.is_empty() {
                *batch = f.bytes;
            } else {
                batch.extend_from_slice(&f.bytes[BATCH_HEADER..]);
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
        let mut batch = std::mem::take(&mut self.open[dest][net as usize]);
        let seq = &mut self.next_out[dest][net as usize];
        batch[..BATCH_HEADER].copy_from_slice(&seq.to_le_bytes());
        *seq += 1;
        let tag = tag_of(net, batch.len());
        self.start_send(batch, dest, tag)
    }

    /// Starts sending `buf`, which is kept until the send completes.
    fn start_send(&mut self, buf: Vec<u8>, dest: usize, tag: c_int) -> Result<(), Error> {
        // SAFETY: `buf`'s heap block is moved into `self.buffers` below
        // and neither written nor freed before `complete_sends` sees the
        // request complete (moving a Vec does not move its block).
        let req = unsafe { sys::isend(&buf, dest, tag, self.comm)? };
        self.requests.push(req);
        self.buffers.push(buf);
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
            self.buffers.swap_remove(i);
        }
        Ok(true)
    }

    /// Takes what arrived: batches go to the locale's threads (if
    /// `deliver`; at shutdown they are only counted), credit to its
    /// senders' windows.
    fn receive(&mut self, deliver: bool) -> Result<bool, Error> {
        let mut any = false;
        // Small messages, into the receives posted for them.
        sys::test_some_received(
            &mut self.posted,
            &mut self.posted_indices,
            &mut self.posted_statuses,
            &mut self.posted_done,
        )?;
        let done = std::mem::take(&mut self.posted_done);
        for c in &done {
            let mut bytes = std::mem::take(&mut self.posted_buffers[c.index]);
            // SAFETY: the receive completed: MPI wrote its `c.bytes`
            // bytes (at most the capacity it was given) at the start of
            // the buffer.
            unsafe { bytes.set_len(c.bytes.min(bytes.capacity())) };
            let tag = self.posted_tags[c.index];
            self.post(c.index)?;
            self.accept(c.src, tag, bytes, deliver);
            any = true;
        }
        self.posted_done = done;
        // Large messages (and small ones that found no receive posted).
        for _ in 0..RECEIVE_BUDGET {
            let Some(m) = sys::receive_any(self.comm)? else {
                break;
            };
            any = true;
            self.accept(m.src, m.tag, m.bytes, deliver);
        }
        Ok(any)
    }

    /// A message received from `src` with `tag`: batches are handed on in
    /// their sequence's order (if `deliver`; at shutdown they are only
    /// counted), credit goes to its sender's window.
    fn accept(&mut self, src: usize, tag: c_int, bytes: Vec<u8>, deliver: bool) {
        let s = self.shared.clone();
        if src >= s.locales {
            eprintln!(
                "cantus: locale {}: a message from rank {src}, outside the job; dropped",
                s.here
            );
            return;
        }
        self.received_from[src] += 1;
        let net = match tag {
            TAG_REQUESTS | TAG_LARGE_REQUESTS => Network::Request,
            TAG_REPLIES | TAG_LARGE_REPLIES => Network::Reply,
            TAG_CREDIT => {
                match parse_credit(&bytes) {
                    Some((net, frames, b)) => s.credit[src][net as usize].give(frames, b),
                    None => eprintln!(
                        "cantus: locale {}: a malformed credit message from locale {src} was \
                         dropped",
                        s.here
                    ),
                }
                return;
            }
            tag => {
                eprintln!(
                    "cantus: locale {}: a message with tag {tag} from locale {src} was dropped",
                    s.here
                );
                return;
            }
        };
        if !deliver {
            return;
        }
        let Some(seq) = bytes.get(..BATCH_HEADER) else {
            eprintln!(
                "cantus: locale {}: a batch of {} bytes from locale {src}, shorter than its \
                 header, was dropped",
                s.here,
                bytes.len()
            );
            return;
        };
        let seq = u64::from_le_bytes(seq.try_into().expect("eight bytes"));
        let mut order = std::mem::take(&mut self.next_in[src][net as usize]);
        if !order.take(seq, bytes, |b| self.hand_on(src, net, b)) {
            eprintln!(
                "cantus: locale {}: batch {seq} from locale {src} came twice; dropped",
                s.here
            );
        }
        self.next_in[src][net as usize] = order;
    }

    /// Hands a batch's frames to the locale's threads, checked whole
    /// first.
    fn hand_on(&mut self, src: usize, net: Network, bytes: Vec<u8>) {
        let s = &*self.shared;
        match count_frames(&bytes[BATCH_HEADER..]) {
            Ok(0) => {}
            Ok(n) => {
                self.delivered = true;
                s.arrive(
                    net,
                    n,
                    Batch {
                        src,
                        bytes,
                        at: BATCH_HEADER,
                    },
                )
            }
            Err(why) => eprintln!(
                "cantus: locale {}: a malformed batch from locale {src} was dropped: {why}",
                s.here
            ),
        }
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
        for req in &mut self.posted {
            sys::cancel(req)?;
        }
        sys::free(&mut self.comm)?;
        if self.owns_mpi {
            sys::finalize()?;
        }
        Ok(())
    }
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
    fn batches_are_handed_on_in_their_numbers_order() {
        let mut order = InOrder::default();
        let mut got = Vec::new();
        for seq in [1u64, 0, 3, 4, 2] {
            assert!(order.take(seq, vec![seq as u8], |b| got.push(b[0])));
        }
        assert_eq!(got, vec![0, 1, 2, 3, 4]);
        assert!(!order.take(3, vec![3], |_| panic!("a duplicate")));
        assert!(order.take(6, vec![6], |_| panic!("early")));
        assert!(!order.take(6, vec![6], |_| panic!("a duplicate")));
        assert!(order.take(5, vec![5], |b| got.push(b[0])));
        assert_eq!(got, vec![0, 1, 2, 3, 4, 5, 6]);
    }

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
}
