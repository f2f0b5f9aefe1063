//! The active-message engine of one locale: sends requests and replies,
//! dispatches what arrives (requests become handler tasks, replies fill
//! the caller's slot, control frames drive start-up and termination), and
//! keeps the counts that termination detection needs.

use super::fragment::{Reassembly, StreamLocks};
use super::handlers::{Handler, Outcome, Table};
use super::replies::{Delivered, ReplySlots};
use super::serve::Served;
use super::wire::{
    self, Control, FRAGMENT_PREFIX, HEADER_LEN, Header, Kind, MAX_PAYLOAD, Status, TAG_LEN,
};
use crate::comm::driver::{Dispatch, poll_transport};
use crate::comm::transport::{Arrival, Nets, Network, SendError, Transport};
use crate::error::{Error, ErrorKind};
use crate::sched::driver::{DriverContext, poll_with};
use crate::sched::no_wait::NoWait;
use crate::sched::{Registry, WorkerLocal};
use std::cell::Cell;
use std::collections::VecDeque;
use std::sync::atomic::{AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, OnceLock, Weak};
use std::time::{Duration, Instant};

mod deadlock;

/// Handler tasks a locale lets run (or wait) at once before it stops
/// taking requests off the transport: requests then stay in the
/// transport's queues, whose senders poll and retry (bounded memory under
/// a flood).
pub(crate) const MAX_HANDLERS: usize = 4096;

thread_local! {
    /// The result buffer of inline calls (`Engine::serve_inline`), kept
    /// from call to call on each polling thread.
    static INLINE_RESULT: Cell<Vec<u8>> = const { Cell::new(Vec::new()) };
}

/// The largest inline result buffer kept for the next call.
const INLINE_RESULT_KEPT: usize = 4 << 10;

/// How long locale 0 waits for the others to say hello at start-up.
const HELLO_TIMEOUT: Duration = Duration::from_secs(60);

/// A frame's payload as the engine hands it on: still in the transport's
/// buffer (copied once, where it is kept), or already the engine's own (a
/// frame reassembled from fragments: moved, never copied again).
pub(crate) enum Body<'a> {
    /// Valid during the poll that delivered it.
    Borrowed(&'a [u8]),
    /// Reassembled.
    Owned(Vec<u8>),
}

impl Body<'_> {
    pub(crate) fn as_slice(&self) -> &[u8] {
        match self {
            Body::Borrowed(b) => b,
            Body::Owned(v) => v,
        }
    }

    pub(crate) fn into_vec(self) -> Vec<u8> {
        match self {
            Body::Borrowed(b) => b.to_vec(),
            Body::Owned(v) => v,
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

    pub(crate) fn locales(&self) -> usize {
        self.locales
    }

    // ---- sending ----

    /// Sends one frame, polling while there is no room (seed 003: a sender
    /// that waits without polling can deadlock with a peer doing the same).
    fn send(&self, dest: usize, net: Network, header: Header, payload: &[u8]) -> Result<(), Error> {
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
        // The frame's parts: on the stack for the usual one or two pieces
        // of payload (no allocation per message), else in a vector.
        const ON_STACK: usize = 4;
        if payload.len() < ON_STACK {
            let mut parts: [&[u8]; ON_STACK] = [&[]; ON_STACK];
            parts[0] = &h;
            parts[1..=payload.len()].copy_from_slice(payload);
            return self.send_frame(dest, net, &parts[..=payload.len()]);
        }
        let mut parts = Vec::with_capacity(payload.len() + 1);
        parts.push(&h[..]);
        parts.extend_from_slice(payload);
        self.send_frame(dest, net, &parts)
    }

    /// Counts a program message (not a control frame) about to be sent to
    /// `dest` with `len` payload bytes, and with tracing on gives it its
    /// trace sequence number and records it. Every program message is
    /// stamped exactly once, by whoever encodes its header.
    fn stamp(&self, dest: usize, mut header: Header, len: usize) -> Header {
        if header.kind != Kind::Control {
            super::count_message_sent();
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
    fn send_frame(&self, dest: usize, net: Network, parts: &[&[u8]]) -> Result<(), Error> {
        let len: usize = parts.iter().map(|p| p.len()).sum();
        if len > self.transport.max_frame() {
            return self.send_fragments(dest, net, parts, len);
        }
        self.send_until_taken(dest, net, parts)
    }

    /// Offers a frame until the transport takes it, polling (and, after a
    /// while, yielding) while there is no room.
    fn send_until_taken(&self, dest: usize, net: Network, parts: &[&[u8]]) -> Result<(), Error> {
        let mut tries = 0u32;
        loop {
            match self.offer(dest, net, parts) {
                Ok(()) => return Ok(()),
                Err(SendError::Failed(e)) => return Err(e),
                Err(SendError::Full) => self.wait_for_room(net, &mut tries),
            }
        }
    }

    /// One step of waiting to send on `net`: polls (seed 003), and after
    /// 16 tries also lets other tasks or threads run.
    fn wait_for_room(&self, net: Network, tries: &mut u32) {
        *tries += 1;
        self.poll_while_blocked(net);
        if *tries > 16 {
            back_off();
        }
    }

    /// Sends the `len`-byte frame made of `parts` as a stream of
    /// fragments (`fragment.rs`): holds the stream lock for `dest` and
    /// `net` throughout, so no other stream interleaves on that ring.
    fn send_fragments(
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
        let piece = self.transport.max_frame() - HEADER_LEN - FRAGMENT_PREFIX;
        let total = (len as u64).to_le_bytes();
        let mut at = 0;
        while at < len {
            let n = piece.min(len - at);
            let h = Header::fragment(stream, at as u64).encode(FRAGMENT_PREFIX + n);
            let mut frame: Vec<&[u8]> = Vec::with_capacity(parts.len() + 2);
            frame.push(&h);
            frame.push(&total);
            super::fragment::slices(parts, at, n, &mut frame);
            self.send_until_taken(dest, net, &frame)?;
            at += n;
        }
        Ok(())
    }

    /// Offers the frame made of `parts` to the transport once. A frame it
    /// takes counts as a program message (termination detection) unless
    /// its kind byte says control, as the receiver counts it; each
    /// fragment of a stream counts, as a frame of its own.
    fn offer(&self, dest: usize, net: Network, parts: &[&[u8]]) -> Result<(), SendError> {
        self.transport.try_send(dest, net, parts)?;
        if !counted(parts) {
            // Release: pairs with the Acquire load in `sent`.
            self.control_sent.fetch_add(1, Ordering::Release);
        }
        Ok(())
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
    fn poll_nets(&self, nets: Nets) -> usize {
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
        args: &[u8],
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
        if let Err(e) = self.send(dest, Network::Request, header, args) {
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
    /// frame carries is cut, with a note saying so.
    fn send_from_poll(&self, dest: usize, net: Network, header: Header, payload: &[u8]) {
        let max = self.max_payload();
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

    fn flush_outbox(&self) {
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
                Err(SendError::Full) => return,
                Err(SendError::Failed(e)) => eprintln!("cantus: locale {}: {e}", self.here),
            }
            outbox.pop_front();
            // Release: after the send (and the `sent` count) it reports.
            self.outbox_len.store(outbox.len(), Ordering::Release);
        }
    }

    // ---- receiving ----

    fn deliver_request(&self, src: usize, h: Header, args: Body<'_>, cx: &DriverContext<'_>) {
        let Some(handler) = self.table.get(h.word) else {
            let why = format!(
                "locale {} has no remote handler with id {:#x} (sent by locale {src})",
                self.here, h.word
            );
            if h.token != 0 {
                let reply = self.stamp(
                    src,
                    Header::reply(h.token, Status::Rejected),
                    why.len().min(self.max_payload()),
                );
                self.send_from_poll(src, Network::Reply, reply, why.as_bytes());
            } else {
                eprintln!("cantus: {why}; the request was dropped");
            }
            return;
        };
        if handler.inline {
            self.serve_inline(src, h.token, handler, args, cx);
            return;
        }
        let call = Served::take(src, h.token, handler, args);
        let me = self
            .me
            .upgrade()
            .expect("the engine is alive while it polls");
        self.handlers.fetch_add(1, Ordering::Relaxed);
        // Two words (the record and the engine): stored in the task itself.
        cx.spawn(move || me.serve(call));
    }

    /// Runs a request's handler (as its task), replies if a reply is
    /// wanted, and gives the record back for the next request.
    fn serve(&self, mut call: Box<Served>) {
        let Served {
            src,
            token,
            handler,
            ref args,
            ref mut out,
        } = *call;
        let outcome = (handler.run)(args, out);
        self.report(src, token, handler, &outcome);
        if token != 0 {
            self.reply(src, token, handler.name, outcome, out);
        }
        self.handlers.fetch_sub(1, Ordering::Relaxed);
        call.give_back();
    }

    /// Says on this locale's standard error that a call panicked, or that
    /// a detached one was refused (a caller that waits gets either back).
    fn report(&self, src: usize, token: u64, handler: &Handler, outcome: &Outcome) {
        match outcome {
            Outcome::Panicked(msg) => eprintln!(
                "cantus: remote call {} from locale {src} panicked on locale {}: {msg}",
                handler.name, self.here
            ),
            Outcome::Rejected(msg) if token == 0 => eprintln!(
                "cantus: locale {} refused remote call {} from locale {src}: {msg}",
                self.here, handler.name
            ),
            _ => {}
        }
    }

    /// Runs a call declared inline (`Remote::INLINE`) here, inside the
    /// poll that took its request, with its arguments read in place (from
    /// the ring, or the reassembled frame), in a no-wait region
    /// (`sched::no_wait`: anything that would wait panics), and sends the
    /// reply without waiting: now if the ring has room, else through the
    /// outbox (a poll never waits, serving rule 1 in `README.md`). A
    /// result too large for one frame goes from a task, which may wait
    /// to stream it.
    fn serve_inline(
        &self,
        src: usize,
        token: u64,
        handler: &'static Handler,
        args: Body<'_>,
        cx: &DriverContext<'_>,
    ) {
        let mut out = INLINE_RESULT.take();
        let outcome = {
            let _region = NoWait::enter(handler.name);
            (handler.run)(args.as_slice(), &mut out)
        };
        self.report(src, token, handler, &outcome);
        if token != 0 {
            let (status, payload) = outcome.reply(&out);
            let header = Header::reply(token, status);
            if payload.len() <= self.max_payload() {
                let header = self.stamp(src, header, payload.len());
                let h = header.encode(payload.len());
                match self.offer(src, Network::Reply, &[&h, payload]) {
                    Ok(()) => {}
                    Err(SendError::Full) => {
                        self.send_from_poll(src, Network::Reply, header, payload)
                    }
                    Err(SendError::Failed(e)) => eprintln!(
                        "cantus: remote call {} from locale {src} ran on locale {}, but its reply \
                         could not be sent: {e}",
                        handler.name, self.here
                    ),
                }
            } else {
                // Only a result can be this long (a message is cut by
                // `send_from_poll`, with a note): hand it to a task.
                let mut call = Served::take(src, token, handler, Body::Borrowed(&[]));
                std::mem::swap(&mut call.out, &mut out);
                let me = self
                    .me
                    .upgrade()
                    .expect("the engine is alive while it polls");
                cx.spawn(move || {
                    me.reply(src, token, handler.name, Outcome::Done, &call.out);
                    call.give_back();
                });
            }
        }
        out.clear();
        if out.capacity() <= INLINE_RESULT_KEPT {
            INLINE_RESULT.set(out);
        }
    }

    /// Sends the reply to request `token` from `src`. No accepted call is
    /// left without an answer: if the reply cannot be sent (its payload is
    /// too large for any message), a short `Lost` reply saying why takes
    /// its place, and only if that fails too (`src` is gone, and the job
    /// with it) is the failure just reported here.
    /// `result` holds the encoded result if the handler was done.
    fn reply(&self, src: usize, token: u64, name: &str, outcome: Outcome, result: &[u8]) {
        let (status, payload) = outcome.reply(result);
        let Err(e) = self.send(src, Network::Reply, Header::reply(token, status), payload) else {
            return;
        };
        let why = format!(
            "its {}-byte {} could not be sent back from locale {} to locale {src}: {e}",
            payload.len(),
            if status == Status::Done {
                "result"
            } else {
                "error"
            },
            self.here
        );
        if let Err(e2) = self.send(
            src,
            Network::Reply,
            Header::reply(token, Status::Lost),
            why.as_bytes(),
        ) {
            eprintln!(
                "cantus: remote call {name} from locale {src} ran on locale {}, but {why}; \
                 nor could that be reported: {e2}",
                self.here
            );
        }
    }

    fn deliver_reply(&self, src: usize, h: Header, payload: Body<'_>) {
        match self.replies.deliver(h.token, h.status, payload) {
            Delivered::Filled | Delivered::Discarded => {
                // Release, after the reply was written (or dropped, its
                // caller gone): `in_flight` reaching 0 is seen only once
                // the waiter can see its reply (T1).
                self.pending_count.fetch_sub(1, Ordering::Release);
            }
            Delivered::Stale => eprintln!(
                "cantus: locale {src} sent locale {} a reply to request {}, which it never sent or already had; dropped",
                self.here, h.token
            ),
        }
    }

    fn deliver_control(&self, src: usize, h: Header, payload: &[u8], cx: &DriverContext<'_>) {
        // Only the poll token's holder delivers: a plain load and store.
        let n = self.control_frames.load(Ordering::Relaxed);
        self.control_frames.store(n + 1, Ordering::Relaxed);
        match h.control_op() {
            Control::Hello => {
                let result = match postcard::from_bytes::<Vec<String>>(payload) {
                    Ok(names) => super::handlers::check_same(&self.table.names(), &names, src),
                    Err(e) => Err(Error::new(
                        ErrorKind::Locale,
                        format!("cantus: locale {src} sent an undecodable hello: {e}"),
                    )),
                };
                let mut c = self.control.lock().unwrap();
                c.hellos += 1;
                if let Err(e) = result {
                    c.hello_error.get_or_insert(e);
                }
                self.control_changed.notify_all();
            }
            Control::Probe => {
                let active = !cx.quiescent() as u64;
                let counts =
                    wire::words(&[self.sent(), self.received.load(Ordering::Relaxed), active]);
                self.send_from_poll(
                    src,
                    Network::Reply,
                    Header::control(Control::ProbeReply, h.token),
                    &counts,
                );
            }
            Control::ProbeReply => match wire::read_words(payload, 3) {
                Ok(w) => {
                    let mut c = self.control.lock().unwrap();
                    if h.token == c.wave {
                        c.answers.push([w[0], w[1], w[2]]);
                        self.control_changed.notify_all();
                    }
                }
                Err(e) => eprintln!("cantus: locale {src} sent a malformed probe reply: {e}"),
            },
            Control::Shutdown => {
                self.control.lock().unwrap().shutdown = true;
                self.control_changed.notify_all();
            }
            Control::DeadlockProbe => self.answer_deadlock_probe(src, h.token, cx),
            Control::DeadlockReply => self.take_deadlock_answer(src, h.token, payload),
            Control::ListWaiters => self.send_waiters(src),
            Control::Waiters => self.take_waiters(src, payload),
        }
    }

    // ---- start-up and termination ----

    /// A locale other than 0: tells locale 0 it is up, with its handlers.
    pub(crate) fn say_hello(&self) -> Result<(), Error> {
        let names: Vec<&str> = self.table.names();
        let payload = postcard::to_allocvec(&names).expect("a list of names encodes");
        self.send(
            0,
            Network::Reply,
            Header::control(Control::Hello, 0),
            &payload,
        )
    }

    /// Locale 0: waits until every other locale said hello, with the
    /// same handlers.
    pub(crate) fn await_hellos(&self) -> Result<(), Error> {
        let others = self.locales - 1;
        let mut c = self.wait_control(Some(Instant::now() + HELLO_TIMEOUT), |c| {
            c.hellos >= others || c.hello_error.is_some()
        });
        match c.hello_error.take() {
            Some(e) => Err(e),
            None if c.hellos < others => Err(Error::new(
                ErrorKind::Locale,
                format!(
                    "cantus: only {} of {} locales started within {} s",
                    c.hellos + 1,
                    self.locales,
                    HELLO_TIMEOUT.as_secs()
                ),
            )),
            None => Ok(()),
        }
    }

    /// A locale other than 0: blocks until locale 0 orders shutdown.
    pub(crate) fn await_shutdown(&self) {
        drop(self.wait_control(None, |c| c.shutdown));
    }

    /// Waits on the control state until `done` holds or `deadline` passes
    /// (`None`: no deadline); returns the state, locked, for the caller to
    /// read what came (and to tell a timeout by `done` still false).
    fn wait_control(
        &self,
        deadline: Option<Instant>,
        done: impl Fn(&ControlState) -> bool,
    ) -> MutexGuard<'_, ControlState> {
        let mut c = self.control.lock().unwrap();
        while !done(&c) {
            c = match deadline {
                None => self.control_changed.wait(c).unwrap(),
                Some(d) => {
                    let now = Instant::now();
                    if now >= d {
                        break;
                    }
                    self.control_changed.wait_timeout(c, d - now).unwrap().0
                }
            };
        }
        c
    }

    /// Sends control frame `op` (with `token`, no payload) on `net` to
    /// every other locale; returns the locales it could not reach, and why.
    fn tell_others(&self, net: Network, op: Control, token: u64) -> Vec<(usize, Error)> {
        (0..self.locales)
            .filter(|&d| d != self.here)
            .filter_map(|d| {
                self.send(d, net, Header::control(op, token), &[])
                    .err()
                    .map(|e| (d, e))
            })
            .collect()
    }

    /// Locale 0: detects global termination, then orders every other
    /// locale to shut down. Termination is Mattern's four-counter method
    /// ("Algorithms for distributed termination detection", Distributed
    /// Computing 2(3), 1987): waves collect every locale's messages sent
    /// and received and whether it is busy; two consecutive waves that
    /// find every locale idle and the same totals, with as many received
    /// as sent, prove that no message is in flight and none can come.
    ///
    /// A job that can never end (a handler blocked for good) is a
    /// deadlock: the deadlock waves run here too, once per grace period.
    pub(crate) fn terminate(&self, registry: &Registry) {
        let mut last: Option<(u64, u64)> = None;
        let mut pause = Duration::from_micros(20);
        let mut deadlock = deadlock::ShutdownWatch::new(registry);
        loop {
            while !registry.quiescent() {
                std::thread::sleep(pause);
                pause = (pause * 2).min(Duration::from_millis(2));
                deadlock.check(self, registry);
            }
            let answers = self.wave();
            let mut sent = self.sent();
            let mut received = self.received.load(Ordering::Relaxed);
            let mut active = !registry.quiescent();
            for [s, r, a] in answers {
                sent += s;
                received += r;
                active |= a != 0;
            }
            let now = (!active && sent == received).then_some((sent, received));
            if now.is_some() && now == last {
                break;
            }
            last = now;
            deadlock.check(self, registry);
            std::thread::sleep(pause);
        }
        for (dest, e) in self.tell_others(Network::Reply, Control::Shutdown, 0) {
            eprintln!("cantus: could not tell locale {dest} to shut down: {e}");
        }
    }

    /// One termination wave: probes every other locale and returns their
    /// answers.
    fn wave(&self) -> Vec<[u64; 3]> {
        let wave = {
            let mut c = self.control.lock().unwrap();
            c.wave += 1;
            c.answers.clear();
            c.wave
        };
        for (dest, e) in self.tell_others(Network::Request, Control::Probe, wave) {
            eprintln!("cantus: could not probe locale {dest}: {e}");
        }
        let others = self.locales - 1;
        std::mem::take(
            &mut self
                .wait_control(None, |c| c.answers.len() >= others)
                .answers,
        )
    }
}

/// Whether the frame made of `parts` counts as a program message: every
/// kind but control frames (the receiver counts the same way).
fn counted(parts: &[&[u8]]) -> bool {
    parts.iter().find(|p| !p.is_empty()).and_then(|p| p.first()) != Some(&(Kind::Control as u8))
}

/// Lets other tasks (or threads) run while a send waits for room.
fn back_off() {
    if WorkerLocal::current().is_some_and(|l| l.in_task()) {
        crate::query::yield_now();
    } else {
        std::thread::yield_now();
    }
}

/// The engine as the driver's dispatcher.
impl Dispatch for Engine {
    fn deliver(&self, frame: Arrival<'_>, cx: &DriverContext<'_>) {
        let (h, payload) = match Header::decode(frame.bytes) {
            Ok(v) => v,
            Err(err) => {
                self.count_received();
                eprintln!(
                    "cantus: locale {} rejected a malformed frame from locale {}: {err}",
                    self.here, frame.src
                );
                return;
            }
        };
        // Every frame the transport carries counts once (fragments too),
        // as its sender counted it; a frame reassembled from fragments is
        // not counted again.
        if h.kind != Kind::Control {
            self.count_received();
        }
        match h.kind {
            Kind::Fragment => self.take_fragment(frame.src, frame.net, h, payload, cx),
            Kind::Message => {
                let (tag, bytes) = payload.split_at(TAG_LEN);
                self.hand_on(frame.src, h, tag, Body::Borrowed(bytes), cx);
            }
            _ => self.hand_on(frame.src, h, &[], Body::Borrowed(payload), cx),
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

impl Engine {
    /// Hands on a whole frame (as it came, or reassembled) from `src` by
    /// its kind; `tag` is a message's tag (empty for other kinds), `body`
    /// the rest of the payload.
    fn hand_on(&self, src: usize, h: Header, tag: &[u8], body: Body<'_>, cx: &DriverContext<'_>) {
        if matches!(h.kind, Kind::Request | Kind::Reply | Kind::Message) {
            super::count_message_received();
            if crate::trace::on() {
                crate::trace::record(
                    crate::trace::kind::MSG_RECV,
                    h.kind as u16,
                    src as u32,
                    u64::from(h.trace),
                    (tag.len() + body.as_slice().len()) as u64,
                );
            }
        }
        match h.kind {
            Kind::Request => self.deliver_request(src, h, body, cx),
            Kind::Reply => self.deliver_reply(src, h, body),
            Kind::Control => self.deliver_control(src, h, body.as_slice(), cx),
            Kind::Message => {
                let tag = u32::from_le_bytes(tag.try_into().expect("a message has its tag"));
                super::chant::deliver_remote(src, self.here, h, tag, body);
            }
            Kind::Fragment => {
                // Only a reassembled frame can get here: its sender cut a
                // fragment into fragments, which no engine does.
                eprintln!(
                    "cantus: locale {} rejected a reassembled frame from locale {src}: it is \
                     itself a fragment",
                    self.here
                );
            }
        }
    }

    /// A fragment from `src` (`fragment.rs`): adds it to the partial frame
    /// of its ring, and hands the frame on once it is whole.
    fn take_fragment(
        &self,
        src: usize,
        net: Network,
        h: Header,
        payload: &[u8],
        cx: &DriverContext<'_>,
    ) {
        let taken = self.reassembly.take(src, net, h, payload);
        if let Some(b) = taken.broken {
            eprintln!(
                "cantus: locale {} dropped a frame that locale {src} sent in fragments: {}",
                self.here, b.why
            );
        }
        if let Some(whole) = taken.whole {
            match Header::check(whole.header(), whole.payload_len()) {
                Ok(inner) => {
                    let tag = whole.tag().to_owned();
                    self.hand_on(src, inner, &tag, Body::Owned(whole.body), cx);
                }
                Err(err) => {
                    eprintln!(
                        "cantus: locale {} rejected a malformed frame that locale {src} sent in \
                         fragments: {err}",
                        self.here
                    );
                }
            }
            // After the frame became work (rule 4).
            self.reassembly.closed();
        }
    }

    /// Counts a frame received. Only the poll token's holder delivers
    /// frames, so there is one writer at a time: a plain load and store
    /// (the token's Acquire and Release order one holder's after the
    /// last's), not a read-modify-write on every frame.
    fn count_received(&self) {
        let n = self.received.load(Ordering::Relaxed);
        self.received.store(n + 1, Ordering::Relaxed);
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

    /// Passes on `Transport::expect_arrivals`.
    pub(crate) fn expect_arrivals(&self, on: bool) {
        self.transport.expect_arrivals(on);
    }

    fn outbox_len(&self) -> u64 {
        self.outbox_len.load(Ordering::Acquire) as u64
    }
}
