//! A request being served: what its handler task carries (who asked,
//! which handler, the arguments, the buffer its result is encoded into),
//! in a record each thread keeps for reuse, so that a locale serving
//! calls in a steady state allocates nothing: the record, its arguments
//! and its result reuse the memory of the calls before.
//!
//! The record is boxed so that the handler task's closure is two words
//! (this record and the engine), which the scheduler stores inline in
//! the task (`sched/new_task.rs`): spawning the handler allocates nothing
//! either. Records are taken on the thread that polls and given back on
//! the thread that ran the handler. With one worker per locale, or while
//! handler tasks are not stolen, that is the same thread and nothing is
//! allocated. Where one worker polls and others steal its handlers, the
//! poller makes new records and the thieves keep theirs until their
//! pools are full, then free them: such a locale still allocates a
//! record per stolen call (measured only for one worker per locale,
//! `tests/remote_call_allocations.rs`).

use super::encode::Encoding;
use super::engine::Body;
use super::handlers::Handler;
use crate::comm::transport::Lent;
use std::cell::RefCell;

/// Records a thread keeps for the next requests: as many as handler
/// tasks a locale lets wait at once (`engine::MAX_HANDLERS`), so that
/// even a flood of small detached calls, whose handler tasks queue up
/// faster than they run, reuses records once the backlog reached its
/// peak. Only memory that was in use at that peak stays kept.
const KEPT: usize = super::engine::MAX_HANDLERS;
/// The largest buffer the first `KEPT_LARGE` kept records hold on to
/// (`KEEP_SMALL` for the rest); a larger one (a large argument or result,
/// whose copy costs more than its allocation) is freed when its call is
/// done. At most 64 * 2 * 4 KiB + 4032 * (72 + 2 * 256) bytes (2.9 MiB)
/// stay kept per thread.
const KEPT_LARGE: usize = 64;
const KEEP_LARGE: usize = 4 << 10;
const KEEP_SMALL: usize = 256;

/// A request being served.
pub(crate) struct Served {
    /// The locale that sent it.
    pub(crate) src: usize,
    /// Its reply token (0: no reply wanted).
    pub(crate) token: u64,
    pub(crate) handler: &'static Handler,
    /// The encoded arguments, unless they are `lent`.
    pub(crate) args: Vec<u8>,
    /// The encoded arguments in a frame the transport lent, from the
    /// offset on (read in place; let go once decoded).
    pub(crate) lent: Option<(Lent, usize)>,
    /// The encoded result, written by the handler.
    pub(crate) out: Encoding,
}

thread_local! {
    // Boxes, not records: a handler task holds its record by one pointer
    // (the two-word closure), and a kept record goes back into a task as
    // that same box, so moving it in and out of the pool moves no bytes
    // of the record.
    #[allow(clippy::vec_box)]
    static KEPT_RECORDS: RefCell<Vec<Box<Served>>> = const { RefCell::new(Vec::new()) };
}

impl Served {
    /// A record for the request of `handler` from `src` with arguments
    /// `args`: one this thread kept, or a new one. Arguments still in the
    /// transport's buffer are copied into the record's buffer; arguments
    /// reassembled from fragments are moved in.
    pub(crate) fn take(
        src: usize,
        token: u64,
        handler: &'static Handler,
        args: Body<'_>,
    ) -> Box<Served> {
        let kept = KEPT_RECORDS
            .try_with(|k| k.borrow_mut().pop())
            .ok()
            .flatten();
        let mut s = kept.unwrap_or_else(|| {
            Box::new(Served {
                src,
                token,
                handler,
                args: Vec::new(),
                lent: None,
                out: Encoding::new(),
            })
        });
        s.src = src;
        s.token = token;
        s.handler = handler;
        match args {
            Body::Borrowed(b) => crate::copy::extend(&mut s.args, b),
            Body::Owned(v) => s.args = v,
            // Kept: the handler reads its arguments in place and lets the
            // frame go once it decoded them (`handlers::Run::Decoding`).
            Body::Lent(l, start) => s.lent = Some((l, start)),
        }
        s
    }

    /// The call is done (its reply sent): keeps the record for the next
    /// request of this thread, emptied, or frees it.
    pub(crate) fn give_back(mut self: Box<Served>) {
        // `try_with`: at thread exit the pool may be gone; then just free.
        // A lent frame not taken by the run goes back now.
        self.lent = None;
        let _ = KEPT_RECORDS.try_with(|k| {
            let mut k = k.borrow_mut();
            if k.len() >= KEPT {
                return;
            }
            let keep = if k.len() < KEPT_LARGE {
                KEEP_LARGE
            } else {
                KEEP_SMALL
            };
            self.out.clear();
            for buf in [&mut self.args, &mut self.out.bytes] {
                if buf.capacity() > keep {
                    *buf = Vec::new();
                } else {
                    buf.clear();
                }
            }
            k.push(self);
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::remote::handlers::Outcome;

    static H: Handler = Handler {
        name: "test::H",
        id: 1,
        run: crate::remote::handlers::Run::Bytes(|_, _| Outcome::Done),
        inline: false,
    };

    #[test]
    fn records_are_reused_emptied_and_large_buffers_freed() {
        let a = Served::take(1, 7, &H, Body::Borrowed(b"abc"));
        assert_eq!((a.src, a.token, &a.args[..]), (1, 7, &b"abc"[..]));
        let at: *const Served = &*a;
        a.give_back();
        let mut b = Served::take(2, 0, &H, Body::Owned(vec![9; 10]));
        assert_eq!(&*b as *const Served, at, "the record was kept");
        assert_eq!((b.src, b.token, &b.args[..]), (2, 0, &[9u8; 10][..]));
        assert!(b.out.bytes.is_empty());
        b.out.bytes = vec![0; KEEP_LARGE + 1];
        b.give_back();
        let c = Served::take(3, 1, &H, Body::Borrowed(b""));
        assert!(c.args.is_empty() && c.out.bytes.capacity() == 0);
        c.give_back();
    }
}
