//! The engine's sending side: stamping headers, frames and fragments,
//! waiting for room by polling (the engine rules of `comm/shm/README.md`),
//! sends from inside a poll through the outbox, and the polls a sender
//! or a waiting caller makes itself.

use super::*;

impl Engine {
    // ---- sending ----

    /// Sends one frame, polling while there is no room (seed 003: a sender
    /// that waits without polling can deadlock with a peer doing the same).
    pub(super) fn send(
        &self,
        dest: usize,
        net: Network,
        header: Header,
        payload: &[u8],
    ) -> Result<(), Error> {
        self.send_parts(dest, net, header, &[payload])
    }

    /// [`send`](Self::send) with the payload in pieces (sent as one frame,
    /// without copying them together). A payload of any size up to
    /// [`MAX_PAYLOAD`] goes: one too large for the transport travels in
    /// fragments.
    pub(crate) fn send_parts(
        &self,
        dest: usize,
        net: Network,
        header: Header,
        payload: &[&[u8]],
    ) -> Result<(), Error> {
        // A remote call declared inline must not send (a send may wait
        // for room): this panics inside one.
        crate::sched::no_wait::check_send(dest);
        let len: usize = payload.iter().map(|p| p.len()).sum();
        let max = self.max_message.load(Ordering::Relaxed);
        if len > max {
            return Err(Error::new(
                ErrorKind::Message,
                format!(
                    "cantus: a {len}-byte payload for locale {dest} is larger than the \
                     {max} bytes one message between locales can carry"
                ),
            ));
        }
        let h = self.stamp(dest, header, len).encode(len);
        crate::remote::encode::with_head(&[&h], payload, |parts| self.send_frame(dest, net, parts))
    }

    /// Sends `header`, `prefix` and `encoding` as one frame to `dest` in
    /// the frame that `encoding`'s one large array lies in, when that is
    /// a frame `dest` sent here and nothing else holds it any more (a
    /// `Bulk` received in place, changed there or not, given back by
    /// value): on shared memory the frame's head and tail are written
    /// around the array in `dest`'s own rendezvous block, which goes back
    /// to `dest` without the array being copied
    /// (`Transport::try_send_returning`; `comm/shm/README.md`,
    /// "Rendezvous", rule R). `None` if `encoding` has no such array, or
    /// is too large for one message (`send_parts` refuses it, as any
    /// frame): it goes the usual way. If the transport cannot return the
    /// frame, it is sent from where the array lies, as any frame.
    pub(crate) fn send_in_block(
        &self,
        dest: usize,
        net: Network,
        header: Header,
        prefix: &[&[u8]],
        encoding: &mut Encoding,
    ) -> Option<Result<(), Error>> {
        let prefix_len: usize = prefix.iter().map(|p| p.len()).sum();
        if prefix_len + encoding.len() > self.max_message.load(Ordering::Relaxed) {
            return None;
        }
        let (lent, array, at) = encoding.take_lent_pin()?;
        crate::sched::no_wait::check_send(dest);
        let len = prefix_len + encoding.bytes.len() + array.len();
        let h = self.stamp(dest, header, len).encode(len);
        let (before, after) = encoding.bytes.split_at(at);
        let sent = crate::remote::encode::with_head(&[&h], prefix, |head| {
            crate::remote::encode::with_head(head, &[before], |head| {
                self.transport
                    .try_send_returning(dest, net, head, lent, array.clone(), &[after])
            })
        });
        Some(match sent {
            Ok(()) => Ok(()),
            Err(lent) => {
                // Stamped once, sent as any frame (in fragments if it
                // must), from where the array lies.
                encoding.put_back(lent, array, at);
                let encoding = &*encoding;
                crate::remote::encode::with_head(&[&h], prefix, |head| {
                    encoding.with_parts(head, |parts| self.send_frame(dest, net, parts))
                })
            }
        })
    }

    /// [`send_parts`](Self::send_parts) of the payload `head` then `body`,
    /// for a Chant window (`chant::window`): a frame the transport sends
    /// from where its parts lie (MPI, a frame sent alone:
    /// `Transport::sends_borrowed`) is not waited for: its flag goes onto
    /// `in_flight`, with a copy of the frame's head (the engine's header
    /// and `head`), and the caller waits for it with
    /// [`wait_sent`](Self::wait_sent); any other frame is offered to be
    /// held back (`Transport::try_send_held`), to go with the window's
    /// next ones, and the caller [`flush`](Self::flush)es them. One too
    /// large for a frame goes in fragments, as `send_parts` sends it.
    ///
    /// # Safety
    ///
    /// Every byte of `body` stays valid, unmoved and unwritten until
    /// `wait_sent` returned for every entry this call pushed on
    /// `in_flight`, and nothing unwinds past the call that owns them
    /// before it did.
    pub(crate) unsafe fn send_parts_in_flight(
        &self,
        dest: usize,
        net: Network,
        header: Header,
        head: &[&[u8]],
        body: &[&[u8]],
        in_flight: &mut VecDeque<InFlight>,
    ) -> Result<(), Error> {
        use crate::remote::encode::with_head;
        let len: usize = head.iter().chain(body).map(|p| p.len()).sum();
        if len > self.max_message.load(Ordering::Relaxed)
            || HEADER_LEN + len > self.transport.max_frame_to(dest)
        {
            return with_head(head, body, |payload| {
                self.send_parts(dest, net, header, payload)
            });
        }
        crate::sched::no_wait::check_send(dest);
        let h = self.stamp(dest, header, len).encode(len);
        if !self.transport.sends_borrowed(dest, HEADER_LEN + len) {
            // Copied by the transport: the head may stay on this stack.
            return with_head(&[&h], head, |frame_head| {
                with_head(frame_head, body, |parts| {
                    match self.offer_until_taken(dest, net, parts, true)? {
                        Offered::Taken(_) => Ok(()),
                        Offered::NoLargeRoom => {
                            self.send_fragments(dest, net, parts, HEADER_LEN + len)
                        }
                    }
                })
            });
        }
        let mut frame_head = Vec::with_capacity(HEADER_LEN + 8);
        frame_head.extend_from_slice(&h);
        for p in head {
            frame_head.extend_from_slice(p);
        }
        let offered = with_head(&[&frame_head], body, |parts| {
            match self.offer_until_taken(dest, net, parts, false)? {
                // Not said by a transport that sends from the parts; as
                // `send_until_taken` does if it were.
                Offered::NoLargeRoom => {
                    self.send_fragments(dest, net, parts, HEADER_LEN + len)?;
                    Ok(None)
                }
                Offered::Taken(done) => Ok(done),
            }
        })?;
        if let Some(done) = offered {
            // The frame's first part points into `frame_head`'s block,
            // which moves here unmoved (moving a Vec does not move it).
            in_flight.push_back(InFlight {
                done,
                net,
                bytes: HEADER_LEN + len,
                _head: frame_head,
            });
        }
        Ok(())
    }

    /// Sends the frames held back by
    /// [`send_parts_in_flight`](Self::send_parts_in_flight)
    /// (`Transport::flush`).
    pub(crate) fn flush(&self) {
        self.transport.flush();
    }

    /// Waits, polling, until the transport is done with the oldest frames
    /// of `in_flight` ([`send_parts_in_flight`](Self::send_parts_in_flight))
    /// and takes them out, until those left hold `keep` bytes or fewer (0:
    /// all of them). A panic in the wait aborts the process.
    pub(crate) fn wait_sent(&self, in_flight: &mut VecDeque<InFlight>, keep: usize) {
        while in_flight.iter().map(|f| f.bytes).sum::<usize>() > keep {
            let f = in_flight.pop_front().expect("a frame in flight");
            self.wait_until_sent(f.net, &f.done);
        }
    }

    /// Counts a program message (not a control frame) about to be sent to
    /// `dest` with `len` payload bytes, and with tracing on gives it its
    /// trace sequence number and records it. Every program message is
    /// stamped exactly once, by whoever encodes its header.
    pub(super) fn stamp(&self, dest: usize, mut header: Header, len: usize) -> Header {
        if header.kind != Kind::Control {
            crate::remote::count_message_sent();
            if crate::trace::on() {
                header.trace = self.trace_seq[dest].fetch_add(1, Ordering::Relaxed) as u16;
                crate::trace::record(
                    crate::trace::kind::MSG_SEND,
                    header.kind as u16,
                    dest as u32,
                    u64::from(header.trace),
                    len as u64,
                );
            }
        }
        header
    }

    /// Sends the frame made of `parts` (header first), polling while there
    /// is no room; one larger than the transport's frames, in fragments.
    pub(super) fn send_frame(
        &self,
        dest: usize,
        net: Network,
        parts: &[&[u8]],
    ) -> Result<(), Error> {
        let len: usize = parts.iter().map(|p| p.len()).sum();
        if len > self.transport.max_frame_to(dest) {
            return self.send_fragments(dest, net, parts, len);
        }
        self.send_until_taken(dest, net, parts)
    }

    /// Offers a frame until the transport takes it, polling (and, after a
    /// while, yielding) while there is no room. A frame that finds no
    /// large room (`SendError::NoLargeRoom`) is sent in eager pieces
    /// instead, by [`send_frame`](Self::send_frame).
    pub(super) fn send_until_taken(
        &self,
        dest: usize,
        net: Network,
        parts: &[&[u8]],
    ) -> Result<(), Error> {
        match self.offer_until_taken(dest, net, parts, false)? {
            Offered::Taken(done) => {
                if let Some(done) = done {
                    self.wait_until_sent(net, &done);
                }
                Ok(())
            }
            // Its receiver keeps the memory of large frames (rule L of
            // `comm/shm/README.md`): the frame goes in eager pieces.
            Offered::NoLargeRoom => {
                let len = parts.iter().map(|p| p.len()).sum();
                self.send_fragments(dest, net, parts, len)
            }
        }
    }

    /// Offers a frame until the transport takes it, polling while there is
    /// no room; gives up with `NoLargeRoom` once the transport said so
    /// [`LARGE_ROOM_TRIES`] times (its receiver keeps the memory such a
    /// frame needs: waiting longer could wait forever). A frame the
    /// transport sends from `parts` comes back with its flag
    /// (`Offered::Taken(Some(done))`), which the caller waits for
    /// ([`wait_until_sent`](Self::wait_until_sent)) before `parts` may
    /// change or go: every caller does, and never unwinds before it does
    /// (it aborts instead). `held`: offered with `Transport::try_send_held`
    /// (copied, maybe held back until the caller flushes), not from
    /// `parts`.
    fn offer_until_taken(
        &self,
        dest: usize,
        net: Network,
        parts: &[&[u8]],
        held: bool,
    ) -> Result<Offered, Error> {
        let mut tries = 0u32;
        let mut no_large_room = 0u32;
        loop {
            let offered = if held {
                self.transport
                    .try_send_held(dest, net, parts)
                    .map(|()| None)
            } else {
                // SAFETY: every caller keeps `parts` valid and unchanged
                // until the flag returned reads true (this function's
                // contract, above).
                unsafe { self.transport.try_send_borrowed(dest, net, parts) }
            };
            match offered {
                Ok(done) => {
                    self.offered(parts);
                    return Ok(Offered::Taken(done));
                }
                Err(SendError::Failed(e)) => return Err(e),
                Err(SendError::Full) => {}
                Err(SendError::NoLargeRoom) => {
                    no_large_room += 1;
                    if no_large_room >= LARGE_ROOM_TRIES {
                        return Ok(Offered::NoLargeRoom);
                    }
                }
            }
            self.wait_for_room(net, &mut tries);
        }
    }

    /// Sends `parts` to landing `key` of `dest` from where they lie, runs
    /// `meanwhile` once the send is queued (a request naming a claimed
    /// landing, sent after its bytes), and returns once the transport is
    /// done with the parts.
    pub(crate) fn send_to_landing<R>(
        &self,
        dest: usize,
        key: crate::comm::transport::LandingKey,
        parts: &[&[u8]],
        meanwhile: impl FnOnce() -> R,
    ) -> Result<R, Error> {
        // SAFETY: `parts` are borrowed for this call, which returns only
        // after the transport is done with them (`wait_until_sent`, also
        // after `meanwhile`: a panic there aborts rather than unwinds
        // past the wait).
        match unsafe { self.transport.try_send_landing(dest, key, parts) } {
            Ok(done) => {
                let r = abort_on_unwind(meanwhile);
                // A claimed landing's bytes are taken once its receiver ran
                // the request that names them: a sender that waits runs
                // requests too (both sides may put to each other at once).
                // An expected one's need only the receiver's passes.
                let net = match key {
                    crate::comm::transport::LandingKey::Claimed(_) => Network::Request,
                    crate::comm::transport::LandingKey::Expected(_) => Network::Reply,
                };
                self.wait_until_sent(net, &done);
                Ok(r)
            }
            Err(SendError::Failed(e)) => Err(e),
            // Outside credit: never said; as a failure if it were.
            Err(e) => Err(Error::new(
                ErrorKind::Locale,
                format!("cantus: a landing's message to locale {dest} was refused: {e:?}"),
            )),
        }
    }

    /// Waits, polling, until `landing` is no longer waiting.
    pub(crate) fn wait_for_landing(&self, landing: &crate::comm::transport::Landing) {
        let mut tries = 0u32;
        while landing.state() == crate::comm::transport::LANDING_WAITING {
            self.wait_for_room(Network::Request, &mut tries);
        }
    }

    /// The transport's landings (`Transport::expect_landing`,
    /// `claim_landing` and the rest), for the global memory's gets and
    /// puts.
    pub(crate) fn landing_transport(&self) -> &dyn Transport {
        &*self.transport
    }

    /// Waits, polling as a sender with no room does, until the transport
    /// is done with a frame it sends from its sender's parts
    /// (`Transport::try_send_borrowed`). A panic in the wait aborts the
    /// process: unwinding would free the parts while the transport may
    /// still read them.
    fn wait_until_sent(&self, net: Network, done: &std::sync::atomic::AtomicBool) {
        abort_on_unwind(|| {
            let mut tries = 0u32;
            // Acquire: pairs with the transport's Release store once its
            // send completed: it read the parts before.
            while !done.load(Ordering::Acquire) {
                self.wait_for_room(net, &mut tries);
            }
        })
    }

    /// One step of waiting to send on `net`: polls (seed 003), and after
    /// 16 tries also lets other tasks or threads run.
    pub(super) fn wait_for_room(&self, net: Network, tries: &mut u32) {
        *tries += 1;
        self.poll_while_blocked(net);
        if *tries > 16 {
            back_off();
        }
    }

    /// Sends the `len`-byte frame made of `parts` as a stream of
    /// fragments (`fragment.rs`): holds the stream lock for `dest` and
    /// `net` throughout, so no other stream interleaves on that ring.
    /// Pieces are as large as the transport's frames; from the first
    /// piece that finds no large room on, eager frames
    /// ([`Transport::eager_frame`]).
    pub(super) fn send_fragments(
        &self,
        dest: usize,
        net: Network,
        parts: &[&[u8]],
        len: usize,
    ) -> Result<(), Error> {
        if dest >= self.locales {
            // As the transport would say for a whole frame.
            return self.send_until_taken(dest, net, parts);
        }
        let mut tries = 0u32;
        let _stream = loop {
            match self.streams.try_lock(dest, net) {
                Some(g) => break g,
                None => self.wait_for_room(net, &mut tries),
            }
        };
        let stream = self.next_stream.fetch_add(1, Ordering::Relaxed);
        let room = HEADER_LEN + FRAGMENT_PREFIX;
        let mut piece = self.transport.max_frame_to(dest) - room;
        let eager = self.transport.eager_frame() - room;
        let total = (len as u64).to_le_bytes();
        let mut at = 0;
        while at < len {
            let n = piece.min(len - at);
            let h = Header::fragment(stream, at as u64).encode(FRAGMENT_PREFIX + n);
            let mut frame: Vec<&[u8]> = Vec::with_capacity(parts.len() + 2);
            frame.push(&h);
            frame.push(&total);
            crate::remote::fragment::slices(parts, at, n, &mut frame);
            match self.offer_until_taken(dest, net, &frame, false)? {
                Offered::Taken(done) => {
                    // The piece's head lies on this stack frame: sent
                    // before the next.
                    if let Some(done) = done {
                        self.wait_until_sent(net, &done);
                    }
                    at += n
                }
                // The same bytes again, in eager pieces from here on (the
                // receiver takes pieces of any size, in order).
                Offered::NoLargeRoom => piece = eager,
            }
        }
        Ok(())
    }

    /// Offers the frame made of `parts` to the transport once. A frame it
    /// takes counts as a program message (termination detection) unless
    /// its kind byte says control, as the receiver counts it; each
    /// fragment of a stream counts, as a frame of its own.
    pub(super) fn offer(
        &self,
        dest: usize,
        net: Network,
        parts: &[&[u8]],
    ) -> Result<(), SendError> {
        self.transport.try_send(dest, net, parts)?;
        self.offered(parts);
        Ok(())
    }

    /// Counts a frame the transport took: a control frame as such.
    fn offered(&self, parts: &[&[u8]]) {
        if !counted(parts) {
            // Release: pairs with the Acquire load in `sent`.
            self.control_sent.fetch_add(1, Ordering::Release);
        }
    }

    /// Program messages sent (termination detection's counter): every
    /// frame the transport took but control frames. Control first: a
    /// control frame is counted here only after the transport counted it
    /// (Acquire, pairing with the Release increment in `offer`), so a
    /// read between the two can only count one frame too many, which
    /// delays termination by a wave and never ends a job early.
    pub(crate) fn sent(&self) -> u64 {
        let control = self.control_sent.load(Ordering::Acquire);
        self.transport.frames_taken() - control
    }

    /// Polls on behalf of a sender that found no room: replies only when
    /// it is sending a reply (handling requests then would only make more
    /// replies to send). Chant's `TaskPolls` waiters call it with
    /// `Network::Request` (both networks).
    pub(crate) fn poll_while_blocked(&self, sending: Network) {
        self.poll_nets(match sending {
            Network::Request => Nets::Both,
            Network::Reply => Nets::Replies,
        });
    }

    /// One step of a task's wait by spinning: a `spin_loop` hint, or, if
    /// the transport moves frames on a thread of its own (MPI), the core
    /// given away, so that thread can run (it may share the core).
    pub(crate) fn pause(&self) {
        if self.progress_thread {
            std::thread::yield_now();
        } else {
            std::hint::spin_loop();
        }
    }

    /// Whether a poll would find something: a frame in the transport, or
    /// one in the outbox (a few loads, no lock).
    pub(crate) fn ready(&self) -> bool {
        self.transport.ready() || self.sends_waiting()
    }

    /// Polls the transport now, under the driver's poll token if it is
    /// free (from a task waiting for a reply: its worker would not poll
    /// while the task spins). Returns how many frames it handled.
    pub(crate) fn poll_now(&self) -> usize {
        self.poll_nets(Nets::Both)
    }

    /// One poll of `nets` under the driver's poll token (0 if another
    /// thread holds it, or the runtime is gone).
    pub(super) fn poll_nets(&self, nets: Nets) -> usize {
        let Some(weak) = self.registry.get() else {
            return 0;
        };
        let poll =
            |reg: &Registry| poll_with(reg, |cx| poll_transport(&*self.transport, self, nets, cx));
        // A worker of this engine's runtime (a waiting caller's task, a
        // sender with no room) borrows the registry its worker holds: no
        // reference count to take and drop on every poll of a wait loop.
        match crate::sched::WorkerLocal::current() {
            Some(l) if std::ptr::eq(Arc::as_ptr(&l.registry), weak.as_ptr()) => poll(&l.registry),
            _ => weak.upgrade().map_or(0, |reg| poll(&reg)),
        }
    }

    /// Sends a request for handler `id` with encoded arguments; returns
    /// the token of the reply slot its reply will fill (`None` if no
    /// reply is wanted).
    pub(crate) fn request(
        &self,
        dest: usize,
        id: u64,
        args: &[&[u8]],
        wants_reply: bool,
    ) -> Result<Option<u64>, Error> {
        // Before a reply slot is taken: a panic here leaves nothing behind.
        crate::sched::no_wait::check_send(dest);
        let token = if wants_reply {
            let token = self.replies.issue();
            // Release: pairs with the Acquire load in `in_flight`.
            self.pending_count.fetch_add(1, Ordering::Release);
            Some(token)
        } else {
            None
        };
        let header = Header::request(id, token.unwrap_or(0));
        if let Err(e) = self.send_parts(dest, Network::Request, header, args) {
            if let Some(t) = token {
                self.replies.cancel(t);
                self.pending_count.fetch_sub(1, Ordering::Release);
            }
            return Err(e);
        }
        Ok(token)
    }

    /// Sends `frame` as it is, without checking it (for tests that play a
    /// faulty peer). Counted as a program message, as the receiver
    /// counts whatever non-control frame it gets.
    pub(crate) fn send_raw(&self, dest: usize, net: Network, frame: &[u8]) -> Result<(), Error> {
        self.send_until_taken(dest, net, &[frame])
    }

    /// Sends `frame` now if there is room, else leaves it for the next
    /// poll: for frames sent from inside a poll, which must not wait. They
    /// are short (control frames, rejections): a payload longer than one
    /// eager frame carries (`Transport::eager_frame`, which never waits
    /// for large room) is cut, with a note saying so.
    pub(super) fn send_from_poll(&self, dest: usize, net: Network, header: Header, payload: &[u8]) {
        let max = self.eager_payload();
        let payload = if payload.len() > max {
            eprintln!(
                "cantus: locale {}: a {}-byte {:?} frame for locale {dest}, sent from a poll, \
                 was cut to {max} bytes",
                self.here,
                payload.len(),
                header.kind
            );
            &payload[..max]
        } else {
            payload
        };
        let mut frame = header.encode(payload.len()).to_vec();
        frame.extend_from_slice(payload);
        {
            let mut outbox = self.outbox.lock().unwrap();
            outbox.push_back((dest, net, frame));
            self.outbox_len.store(outbox.len(), Ordering::Release);
        }
        self.flush_outbox();
    }

    pub(super) fn flush_outbox(&self) {
        // Acquire: pairs with the Release stores under the lock. A frame
        // queued by another thread that this load misses is flushed by
        // that thread's own call, or by the next poll.
        if self.outbox_len.load(Ordering::Acquire) == 0 {
            return;
        }
        let mut outbox = self.outbox.lock().unwrap();
        while let Some((dest, net, frame)) = outbox.front() {
            match self.offer(*dest, *net, &[frame]) {
                Ok(()) => {}
                // Frames from a poll are short: a large one waits for
                // room like any other.
                Err(SendError::Full | SendError::NoLargeRoom) => return,
                Err(SendError::Failed(e)) => eprintln!("cantus: locale {}: {e}", self.here),
            }
            outbox.pop_front();
            // Release: after the send (and the `sent` count) it reports.
            self.outbox_len.store(outbox.len(), Ordering::Release);
        }
    }
}

/// Runs `f` while a frame is sent from its sender's memory: a panic in it
/// aborts the process, since unwinding would free the parts while the
/// transport may still read them.
fn abort_on_unwind<R>(f: impl FnOnce() -> R) -> R {
    struct AbortOnUnwind;
    impl Drop for AbortOnUnwind {
        fn drop(&mut self) {
            eprintln!(
                "cantus: a panic while a frame was being sent from its sender's memory, which \
                 the transport may still read; aborting"
            );
            std::process::abort();
        }
    }
    let unwinding = AbortOnUnwind;
    let r = f();
    std::mem::forget(unwinding);
    r
}

/// How many times a sender offers a frame that finds no large room
/// (`SendError::NoLargeRoom`), polling between, before it sends the
/// frame in eager pieces: blocks in flight are taken within a few polls
/// of their receiver; a block its receiver keeps (a Chant message in a
/// mailbox) may stay for as long as the program likes.
const LARGE_ROOM_TRIES: u32 = 64;

/// A frame the transport may still read from its sender's parts
/// ([`Engine::send_parts_in_flight`]), until its flag reads true.
pub(crate) struct InFlight {
    done: Arc<std::sync::atomic::AtomicBool>,
    /// What its wait polls.
    net: Network,
    /// The frame's length.
    bytes: usize,
    /// The frame's head: one of its parts points into this block.
    _head: Vec<u8>,
}

/// What became of a frame offered until the transport took it.
enum Offered {
    /// Taken; with the flag to wait for where it is sent from its parts.
    Taken(Option<Arc<std::sync::atomic::AtomicBool>>),
    /// The transport said `NoLargeRoom` [`LARGE_ROOM_TRIES`] times.
    NoLargeRoom,
}

/// Whether the frame made of `parts` counts as a program message: every
/// kind but control frames (the receiver counts the same way).
pub(super) fn counted(parts: &[&[u8]]) -> bool {
    parts.iter().find(|p| !p.is_empty()).and_then(|p| p.first()) != Some(&(Kind::Control as u8))
}

/// Lets other tasks (or threads) run while a send waits for room.
pub(super) fn back_off() {
    if WorkerLocal::current().is_some_and(|l| l.in_task()) {
        crate::task::yield_now();
    } else {
        std::thread::yield_now();
    }
}
