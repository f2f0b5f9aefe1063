//! The engine's receiving side: handing on each frame by its kind,
//! reassembling fragments, running requests (as tasks, or inline inside
//! the poll) and sending their replies, delivering replies to their
//! slots.

use super::*;

impl Engine {
    // ---- receiving ----

    pub(super) fn deliver_request(
        &self,
        src: usize,
        h: Header,
        args: Body<'_>,
        cx: &DriverContext<'_>,
    ) {
        let Some(handler) = self.table.get(h.word) else {
            let why = format!(
                "locale {} has no remote handler with id {:#x} (sent by locale {src})",
                self.here, h.word
            );
            if h.token != 0 {
                let reply = self.stamp(
                    src,
                    Header::reply(h.token, Status::Rejected),
                    why.len().min(self.eager_payload()),
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
    pub(super) fn serve(&self, mut call: Box<Served>) {
        let Served {
            src,
            token,
            handler,
            ref args,
            ref mut lent,
            ref mut out,
        } = *call;
        let args = match lent.take() {
            Some((lent, start)) => Body::Lent(lent, start),
            None => Body::Borrowed(args),
        };
        if token != 0 {
            // The result goes back to `src` as soon as it is made.
            out.stage_for(src);
        }
        let outcome = handler.run(args, out);
        self.report(src, token, handler, &outcome);
        if token != 0 {
            self.reply(src, token, handler.name, outcome, out);
        }
        self.handlers.fetch_sub(1, Ordering::Relaxed);
        call.give_back();
    }

    /// Says on this locale's standard error that a call panicked, or that
    /// a detached one was refused (a caller that waits gets either back).
    pub(super) fn report(&self, src: usize, token: u64, handler: &Handler, outcome: &Outcome) {
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
    /// result longer than an eager frame goes from a task, which may wait
    /// for room (also for the large room a receiver may keep,
    /// `SendError::NoLargeRoom`) or stream it; so does one the transport
    /// would send from where it lies (`Transport::sends_borrowed`: a
    /// large one over MPI, a get's bytes sent from the segment), which
    /// the poll would copy.
    pub(super) fn serve_inline(
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
            handler.run(Body::Borrowed(args.as_slice()), &mut out)
        };
        self.report(src, token, handler, &outcome);
        if token != 0 {
            let status = outcome.status();
            let len = outcome.payload_len(&out);
            // A result its transport would send from where it lies (over
            // MPI, a large one: `Transport::sends_borrowed`) goes from a
            // task, which may wait for that send; a poll would copy it.
            if len <= self.eager_payload() && !self.transport.sends_borrowed(src, HEADER_LEN + len)
            {
                let header = self.stamp(src, Header::reply(token, status), len);
                let h = header.encode(len);
                let offered = outcome
                    .with_payload(&out, &[&h], |parts| self.offer(src, Network::Reply, parts));
                match offered {
                    Ok(()) => {}
                    // An eager frame never lacks large room.
                    Err(SendError::Full | SendError::NoLargeRoom) => {
                        let payload = outcome.with_payload(&out, &[], crate::copy::concat);
                        self.send_from_poll(src, Network::Reply, header, &payload)
                    }
                    Err(SendError::Failed(e)) => eprintln!(
                        "cantus: remote call {} from locale {src} ran on locale {}, but its reply \
                         could not be sent: {e}",
                        handler.name, self.here
                    ),
                }
            } else {
                // Only a result can be this long (a message is cut by
                // `send_from_poll`, with a note): hand it to a task, which
                // sends it from `out` or from where the handler lent it
                // (lent for as long as the runtime runs: `Outcome::Lent`).
                let said = outcome.said();
                let mut call = Served::take(src, token, handler, Body::Borrowed(&[]));
                std::mem::swap(&mut call.out, &mut out);
                let me = self
                    .me
                    .upgrade()
                    .expect("the engine is alive while it polls");
                cx.spawn(move || {
                    me.reply(src, token, handler.name, said.outcome(), &mut call.out);
                    call.give_back();
                });
            }
        }
        out.clear();
        if out.bytes.capacity() <= INLINE_RESULT_KEPT {
            INLINE_RESULT.set(out);
        }
    }

    /// Sends the reply to request `token` from `src`. No accepted call is
    /// left without an answer: if the reply cannot be sent (its payload is
    /// too large for any message), a short `Lost` reply saying why takes
    /// its place, and only if that fails too (`src` is gone, and the job
    /// with it) is the failure just reported here.
    /// `result` holds the encoded result if the handler was done.
    pub(super) fn reply(
        &self,
        src: usize,
        token: u64,
        name: &str,
        outcome: Outcome,
        result: &mut Encoding,
    ) {
        let status = outcome.status();
        let in_block = match outcome {
            Outcome::Done => self.reply_in_block(src, token, result),
            _ => None,
        };
        let sent = in_block.unwrap_or_else(|| {
            outcome.with_payload(result, &[], |parts| {
                self.send_parts(src, Network::Reply, Header::reply(token, status), parts)
            })
        });
        let Err(e) = sent else {
            return;
        };
        let why = format!(
            "its {}-byte {} could not be sent back from locale {} to locale {src}: {e}",
            outcome.payload_len(result),
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

    /// Sends a result whose one large array lies in place in the frame
    /// its request came in, which nothing else holds any more (a `Bulk`
    /// argument changed in place and returned), back in that frame
    /// ([`send_in_block`](Self::send_in_block): `comm/shm/README.md`,
    /// "Rendezvous", rule R). `None` if the result is not such a one (it
    /// goes as any reply).
    fn reply_in_block(
        &self,
        src: usize,
        token: u64,
        result: &mut Encoding,
    ) -> Option<Result<(), Error>> {
        self.send_in_block(
            src,
            Network::Reply,
            Header::reply(token, Status::Done),
            &[],
            result,
        )
    }

    pub(super) fn deliver_reply(&self, src: usize, h: Header, payload: Body<'_>) {
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
    /// Hands on a whole frame (as it came, or reassembled) from `src` by
    /// its kind; `tag` is a message's tag (empty for other kinds), `body`
    /// the rest of the payload.
    pub(super) fn hand_on(
        &self,
        src: usize,
        h: Header,
        tag: &[u8],
        body: Body<'_>,
        cx: &DriverContext<'_>,
    ) {
        if matches!(h.kind, Kind::Request | Kind::Reply | Kind::Message) {
            crate::remote::count_message_received();
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
                crate::remote::chant::deliver_remote(src, self.here, h, tag, body);
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
    pub(super) fn take_fragment(
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
    pub(super) fn count_received(&self) {
        let n = self.received.load(Ordering::Relaxed);
        self.received.store(n + 1, Ordering::Relaxed);
    }
}
