//! The engine's control frames: hellos at start, termination waves
//! (locale 0 asks, every locale answers with its counts), the order to
//! shut down, and the waits for them.

use super::*;

impl Engine {
    pub(super) fn deliver_control(
        &self,
        src: usize,
        h: Header,
        payload: &[u8],
        cx: &DriverContext<'_>,
    ) {
        // Only the poll token's holder delivers: a plain load and store.
        let n = self.control_frames.load(Ordering::Relaxed);
        self.control_frames.store(n + 1, Ordering::Relaxed);
        match h.control_op() {
            Control::Hello => {
                let result = match crate::remote::codec::from_bytes::<Vec<String>>(payload) {
                    Ok(names) => {
                        crate::remote::handlers::check_same(&self.table.names(), &names, src)
                    }
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
        let payload =
            crate::remote::encode::encode_to_vec(&names).expect("a list of names encodes");
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
    pub(super) fn wait_control(
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
    pub(super) fn tell_others(&self, net: Network, op: Control, token: u64) -> Vec<(usize, Error)> {
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
    pub(super) fn wave(&self) -> Vec<[u64; 3]> {
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
