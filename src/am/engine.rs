//! The active-message engine of one locale: sends requests and replies,
//! dispatches what arrives (requests become handler tasks, replies fill
//! the caller's slot, control frames drive start-up and termination), and
//! keeps the counts that termination detection needs.

use super::handlers::{Outcome, Table};
use super::wire::{self, Control, HEADER_LEN, Header, Kind, Status};
use crate::comm::driver::{Dispatch, poll_transport};
use crate::comm::transport::{Arrival, Nets, Network, SendError, Transport};
use crate::error::{Error, ErrorKind};
use crate::sched::driver::{DriverContext, poll_with};
use crate::sched::{Registry, WorkerLocal};
use crate::sync::SyncVar;
use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, OnceLock, Weak};
use std::time::{Duration, Instant};

mod deadlock;

/// Handler tasks a locale lets run (or wait) at once before it stops
/// taking requests off the transport: requests then stay in the
/// transport's queues, whose senders poll and retry (bounded memory under
/// a flood).
const MAX_HANDLERS: usize = 4096;

/// How long locale 0 waits for the others to say hello at start-up.
const HELLO_TIMEOUT: Duration = Duration::from_secs(60);

/// A reply as it arrives: how the request ended, and the payload.
pub(crate) type Reply = (Status, Vec<u8>);

/// One locale's engine.
pub(crate) struct Engine {
    /// This engine, for the handler tasks it spawns.
    me: Weak<Engine>,
    transport: Arc<dyn Transport>,
    table: &'static Table,
    here: usize,
    locales: usize,
    /// The runtime whose workers poll this engine (set once it started).
    registry: OnceLock<Weak<Registry>>,
    /// Requests sent that wait for their reply, by token.
    pending: Mutex<HashMap<u64, Arc<SyncVar<Reply>>>>,
    /// `pending.len()`, readable without the lock (`in_flight`).
    pending_count: AtomicU64,
    next_token: AtomicU64,
    /// Program messages (requests and replies) sent and received: the
    /// counters of termination detection.
    sent: AtomicU64,
    received: AtomicU64,
    /// Handler tasks spawned and not finished.
    handlers: AtomicUsize,
    /// Control frames (and rejections) that found no room in a poll:
    /// retried at the start of the next poll, never waited for there.
    outbox: Mutex<VecDeque<(usize, Network, Vec<u8>)>>,
    /// `outbox.len()`, readable without the lock: every poll checks it.
    outbox_len: AtomicUsize,
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
    deadlock_answers: Vec<crate::sched::stuck::Answer>,
    /// Waiters sent for a deadlock report, by locale.
    waiters: Vec<(usize, Vec<String>)>,
}

impl Engine {
    pub(crate) fn new(transport: Arc<dyn Transport>, table: &'static Table) -> Arc<Engine> {
        Arc::new_cyclic(|me| Engine {
            me: me.clone(),
            here: transport.here(),
            locales: transport.locales(),
            transport,
            table,
            registry: OnceLock::new(),
            pending: Mutex::new(HashMap::new()),
            pending_count: AtomicU64::new(0),
            next_token: AtomicU64::new(1),
            sent: AtomicU64::new(0),
            received: AtomicU64::new(0),
            handlers: AtomicUsize::new(0),
            outbox: Mutex::new(VecDeque::new()),
            outbox_len: AtomicUsize::new(0),
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
    /// without copying them together).
    pub(crate) fn send_parts(
        &self,
        dest: usize,
        net: Network,
        header: Header,
        payload: &[&[u8]],
    ) -> Result<(), Error> {
        let h = header.encode(payload.iter().map(|p| p.len()).sum());
        let mut parts = Vec::with_capacity(payload.len() + 1);
        parts.push(&h[..]);
        parts.extend_from_slice(payload);
        self.send_frame(dest, net, &parts)
    }

    /// Sends the frame made of `parts` (header first), polling while there
    /// is no room.
    fn send_frame(&self, dest: usize, net: Network, parts: &[&[u8]]) -> Result<(), Error> {
        let mut tries = 0u32;
        loop {
            match self.offer(dest, net, parts) {
                Ok(()) => return Ok(()),
                Err(SendError::Failed(e)) => return Err(e),
                Err(SendError::Full) => {
                    tries += 1;
                    self.poll_while_blocked(net);
                    if tries > 16 {
                        back_off();
                    }
                }
            }
        }
    }

    /// Offers the frame made of `parts` to the transport once. A frame it
    /// takes counts as a program message (termination detection) unless
    /// its kind byte says control, as the receiver counts it.
    fn offer(&self, dest: usize, net: Network, parts: &[&[u8]]) -> Result<(), SendError> {
        self.transport.try_send(dest, net, parts)?;
        if parts.first().and_then(|p| p.first()) != Some(&(Kind::Control as u8)) {
            self.sent.fetch_add(1, Ordering::Relaxed);
        }
        Ok(())
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

    /// Polls the transport now, under the driver's poll token if it is
    /// free (from a task waiting for a reply: its worker would not poll
    /// while the task spins). Returns how many frames it handled.
    pub(crate) fn poll_now(&self) -> usize {
        self.poll_nets(Nets::Both)
    }

    /// One poll of `nets` under the driver's poll token (0 if another
    /// thread holds it, or the runtime is gone).
    fn poll_nets(&self, nets: Nets) -> usize {
        let Some(reg) = self.registry.get().and_then(Weak::upgrade) else {
            return 0;
        };
        poll_with(&reg, |cx| poll_transport(&*self.transport, self, nets, cx))
    }

    /// Sends a request for handler `id` with encoded arguments; returns
    /// the slot its reply will fill (`None` if no reply is wanted).
    pub(crate) fn request(
        &self,
        dest: usize,
        id: u64,
        args: &[u8],
        wants_reply: bool,
    ) -> Result<Option<Arc<SyncVar<Reply>>>, Error> {
        let (token, slot) = if wants_reply {
            let token = self.next_token.fetch_add(1, Ordering::Relaxed);
            let slot = Arc::new(SyncVar::new());
            self.pending.lock().unwrap().insert(token, slot.clone());
            self.pending_count.fetch_add(1, Ordering::Release);
            (token, Some(slot))
        } else {
            (0, None)
        };
        if let Err(e) = self.send(dest, Network::Request, Header::request(id, token), args) {
            if wants_reply {
                self.pending.lock().unwrap().remove(&token);
                self.pending_count.fetch_sub(1, Ordering::Release);
            }
            return Err(e);
        }
        Ok(slot)
    }

    /// Sends `frame` as it is, without checking it (for tests that play a
    /// faulty peer). Counted as a program message, as the receiver
    /// counts whatever non-control frame it gets.
    pub(crate) fn send_raw(&self, dest: usize, net: Network, frame: &[u8]) -> Result<(), Error> {
        self.send_frame(dest, net, &[frame])
    }

    /// Sends `frame` now if there is room, else leaves it for the next
    /// poll: for frames sent from inside a poll, which must not wait.
    fn send_from_poll(&self, dest: usize, net: Network, header: Header, payload: &[u8]) {
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

    fn deliver_request(&self, src: usize, h: Header, args: &[u8], cx: &DriverContext<'_>) {
        let Some(handler) = self.table.get(h.word) else {
            let why = format!(
                "locale {} has no remote handler with id {:#x} (sent by locale {src})",
                self.here, h.word
            );
            if h.token != 0 {
                self.send_from_poll(
                    src,
                    Network::Reply,
                    Header::reply(h.token, Status::Rejected),
                    why.as_bytes(),
                );
            } else {
                eprintln!("cantus: {why}; the request was dropped");
            }
            return;
        };
        let args = args.to_vec();
        let me = self
            .me
            .upgrade()
            .expect("the engine is alive while it polls");
        self.handlers.fetch_add(1, Ordering::Relaxed);
        cx.spawn(move || {
            let outcome = (handler.run)(&args);
            if h.token != 0 {
                let (status, payload) = match outcome {
                    Outcome::Done(bytes) => (Status::Done, bytes),
                    Outcome::Panicked(msg) => (Status::Panicked, msg.into_bytes()),
                    Outcome::Rejected(msg) => (Status::Rejected, msg.into_bytes()),
                };
                if let Err(e) = me.send(
                    src,
                    Network::Reply,
                    Header::reply(h.token, status),
                    &payload,
                ) {
                    eprintln!(
                        "cantus: locale {}: the reply to locale {src} was lost: {e}",
                        me.here
                    );
                }
            } else if let Outcome::Panicked(msg) | Outcome::Rejected(msg) = outcome {
                eprintln!(
                    "cantus: a remote call ({}) from locale {src} failed on locale {}: {msg}",
                    handler.name, me.here
                );
            }
            me.handlers.fetch_sub(1, Ordering::Relaxed);
        });
    }

    fn deliver_reply(&self, src: usize, h: Header, payload: &[u8]) {
        let slot = self.pending.lock().unwrap().remove(&h.token);
        match slot {
            Some(slot) => {
                slot.write_ef((h.status, payload.to_vec()));
                // Release, after the write: `in_flight` reaching 0 is seen
                // only once the waiter can see its reply (T1).
                self.pending_count.fetch_sub(1, Ordering::Release);
            }
            None => eprintln!(
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
                let counts = wire::words(&[
                    self.sent.load(Ordering::Relaxed),
                    self.received.load(Ordering::Relaxed),
                    active,
                ]);
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
        let deadline = Instant::now() + HELLO_TIMEOUT;
        let mut c = self.control.lock().unwrap();
        while c.hellos < self.locales - 1 && c.hello_error.is_none() {
            let now = Instant::now();
            if now >= deadline {
                return Err(Error::new(
                    ErrorKind::Locale,
                    format!(
                        "cantus: only {} of {} locales started within {} s",
                        c.hellos + 1,
                        self.locales,
                        HELLO_TIMEOUT.as_secs()
                    ),
                ));
            }
            c = self
                .control_changed
                .wait_timeout(c, deadline - now)
                .unwrap()
                .0;
        }
        match c.hello_error.take() {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }

    /// A locale other than 0: blocks until locale 0 orders shutdown.
    pub(crate) fn await_shutdown(&self) {
        let mut c = self.control.lock().unwrap();
        while !c.shutdown {
            c = self.control_changed.wait(c).unwrap();
        }
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
            let mut sent = self.sent.load(Ordering::Relaxed);
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
        for dest in (0..self.locales).filter(|&d| d != self.here) {
            if let Err(e) = self.send(
                dest,
                Network::Reply,
                Header::control(Control::Shutdown, 0),
                &[],
            ) {
                eprintln!("cantus: could not tell locale {dest} to shut down: {e}");
            }
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
        for dest in (0..self.locales).filter(|&d| d != self.here) {
            if let Err(e) = self.send(
                dest,
                Network::Request,
                Header::control(Control::Probe, wave),
                &[],
            ) {
                eprintln!("cantus: could not probe locale {dest}: {e}");
            }
        }
        let mut c = self.control.lock().unwrap();
        while c.answers.len() < self.locales - 1 {
            c = self
                .control_changed
                .wait_timeout(c, Duration::from_millis(100))
                .unwrap()
                .0;
        }
        std::mem::take(&mut c.answers)
    }
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
        let e = self;
        let (h, payload) = match Header::decode(frame.bytes) {
            Ok(v) => v,
            Err(err) => {
                e.received.fetch_add(1, Ordering::Relaxed);
                eprintln!(
                    "cantus: locale {} rejected a malformed frame from locale {}: {err}",
                    e.here, frame.src
                );
                return;
            }
        };
        match h.kind {
            Kind::Request => {
                e.received.fetch_add(1, Ordering::Relaxed);
                e.deliver_request(frame.src, h, payload, cx);
            }
            Kind::Reply => {
                e.received.fetch_add(1, Ordering::Relaxed);
                e.deliver_reply(frame.src, h, payload);
            }
            Kind::Control => e.deliver_control(frame.src, h, payload, cx),
            Kind::Message => {
                e.received.fetch_add(1, Ordering::Relaxed);
                super::chant::deliver_remote(frame.src, e.here, h, payload);
            }
        }
        debug_assert!(HEADER_LEN <= frame.bytes.len());
    }

    fn before_poll(&self) {
        self.flush_outbox();
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
        self.pending_count.load(Ordering::Acquire) + self.outbox_len() + super::chant::in_flight()
    }

    fn control_frames(&self) -> u64 {
        self.control_frames.load(Ordering::Relaxed)
    }

    fn job_stuck_sample(&self) -> crate::sched::outside::StuckSample {
        self.deadlock_wave()
    }

    fn job_waiters(&self) -> Vec<(usize, Vec<String>)> {
        self.gather_waiters()
    }
}

impl Engine {
    /// The largest payload a frame can carry (the transport's limit less
    /// the header).
    pub(crate) fn max_payload(&self) -> usize {
        self.transport.max_frame() - HEADER_LEN
    }

    fn outbox_len(&self) -> u64 {
        self.outbox_len.load(Ordering::Acquire) as u64
    }
}
