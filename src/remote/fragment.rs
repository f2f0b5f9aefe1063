//! Frames larger than the transport carries: the sender cuts one into a
//! *stream* of fragments, the receiver puts it back together, and the
//! engine then handles it as if it had come whole. It lives here, above
//! the transport, so every transport (shared memory, MPI) gets messages
//! of any size for the price of a `max_frame`.
//!
//! The rules (`README.md` beside this file, "Fragmentation"):
//!
//! 1. **One stream at a time per ring.** A sender holds its locale's
//!    stream lock for (destination, network) from the first fragment of a
//!    frame to the last ([`StreamLocks`]), so fragments of two frames
//!    never interleave on one ring. Whole frames may pass between them:
//!    reassembly looks at fragments only. A receiver therefore holds at
//!    most one partial frame per (source, network): reassembly memory is
//!    bounded by `2 * (locales - 1)` frames in transit, each of which is
//!    the message its receiver gets anyway.
//! 2. **In order, checked.** The transport keeps a ring's frames in order,
//!    so a stream's pieces arrive at offsets 0, n, 2n, ...; every fragment
//!    repeats the whole frame's length, and its stream id must match the
//!    open one. Anything else is reported naming the sender, and the
//!    partial frame is dropped.
//! 3. **Counted as frames.** Termination counts transport frames: each
//!    fragment is counted as sent when the transport takes it and as
//!    received when a poll takes it, like any whole frame; the frame they
//!    make up is not counted again. So the counts balance whatever a
//!    faulty peer sends, and a fragment still in a ring keeps sent above
//!    received.
//! 4. **Work in flight.** An open partial frame counts in the engine's
//!    `in_flight`, so a locale that holds one is not quiescent; the count
//!    drops (Release) only after the whole frame was handed on.
//! 5. **No extra copy.** The receiver copies each piece out of the ring
//!    once, into the buffer that becomes the request's arguments, the
//!    reply's payload or the Chant message's bytes: the header (and a
//!    message's tag) are kept apart, so the buffer holds only the bytes
//!    the user gets.

use super::wire::{HEADER_LEN, Header, Kind, MAX_PAYLOAD, TAG_LEN};
use crate::comm::transport::Network;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

/// The longest prefix kept apart from the body: the header, and a Chant
/// message's tag.
pub(crate) const HEAD_MAX: usize = HEADER_LEN + TAG_LEN;

/// The stream locks of one locale: one per destination and network.
pub(crate) struct StreamLocks {
    locks: Vec<[AtomicBool; 2]>,
}

/// A held stream lock; released when dropped.
pub(crate) struct StreamGuard<'a> {
    lock: &'a AtomicBool,
}

impl StreamLocks {
    pub(crate) fn new(locales: usize) -> StreamLocks {
        StreamLocks {
            locks: (0..locales)
                .map(|_| [AtomicBool::new(false), AtomicBool::new(false)])
                .collect(),
        }
    }

    /// Takes the lock for streams to `dest` on `net`, if it is free.
    pub(crate) fn try_lock(&self, dest: usize, net: Network) -> Option<StreamGuard<'_>> {
        let lock = &self.locks[dest][net as usize];
        // Acquire: pairs with the Release in `StreamGuard::drop`, so the
        // previous holder's sends (and its ring writes) happen before ours.
        lock.compare_exchange(false, true, Ordering::Acquire, Ordering::Relaxed)
            .ok()
            .map(|_| StreamGuard { lock })
    }
}

impl Drop for StreamGuard<'_> {
    fn drop(&mut self) {
        // Release: pairs with the Acquire in `try_lock`.
        self.lock.store(false, Ordering::Release);
    }
}

/// Appends to `out` the slices of the concatenation of `parts` that cover
/// bytes `at..at + n` (no copying).
pub(crate) fn slices<'a>(parts: &[&'a [u8]], mut at: usize, mut n: usize, out: &mut Vec<&'a [u8]>) {
    for p in parts {
        if n == 0 {
            return;
        }
        if at >= p.len() {
            at -= p.len();
            continue;
        }
        let take = n.min(p.len() - at);
        out.push(&p[at..at + take]);
        n -= take;
        at = 0;
    }
    debug_assert_eq!(n, 0, "the parts cover the range");
}

/// A frame put back together.
pub(crate) struct Whole {
    /// The frame's header (and, for a message, its tag after it).
    pub(crate) head: [u8; HEAD_MAX],
    /// How many bytes of the frame `head` holds: `HEADER_LEN`, or up to
    /// `HEAD_MAX` for a message.
    pub(crate) kept: usize,
    /// The payload after what `head` holds.
    pub(crate) body: Vec<u8>,
}

impl Whole {
    /// The header's bytes.
    pub(crate) fn header(&self) -> &[u8] {
        &self.head[..HEADER_LEN]
    }

    /// The payload bytes kept in `head` (a message's tag; else none).
    pub(crate) fn tag(&self) -> &[u8] {
        &self.head[HEADER_LEN..self.kept]
    }

    /// The whole payload's length.
    pub(crate) fn payload_len(&self) -> usize {
        self.kept - HEADER_LEN + self.body.len()
    }
}

/// Why a partial frame (or a stray fragment) was dropped.
pub(crate) struct Broken {
    pub(crate) why: String,
}

/// What one fragment did: it may close a broken partial frame (a new
/// stream began before the old one ended), and may complete a frame or
/// break the stream it belongs to.
#[derive(Default)]
pub(crate) struct Taken {
    pub(crate) broken: Option<Broken>,
    pub(crate) whole: Option<Whole>,
}

/// One partial frame.
struct Partial {
    stream: u64,
    /// The whole frame's length (header included).
    total: usize,
    /// Bytes of it received.
    got: usize,
    head: [u8; HEAD_MAX],
    /// How much of the frame `head` holds: `HEADER_LEN`, or `HEAD_MAX`
    /// for a message (known once its kind byte arrived).
    head_len: usize,
    body: Vec<u8>,
}

impl Partial {
    fn append(&mut self, mut piece: &[u8]) {
        while !piece.is_empty() && self.got < self.head_len {
            let n = piece.len().min(self.head_len - self.got);
            self.head[self.got..self.got + n].copy_from_slice(&piece[..n]);
            self.got += n;
            piece = &piece[n..];
            if self.got >= 1 && self.head[0] == Kind::Message as u8 {
                self.head_len = HEAD_MAX.min(self.total);
            }
        }
        crate::copy::extend(&mut self.body, piece);
        self.got += piece.len();
    }
}

/// The partial frames of one locale, by (source, network).
pub(crate) struct Reassembly {
    partial: Mutex<Vec<Option<Partial>>>,
    /// Partial frames held: work in flight.
    open: AtomicU64,
}

impl Reassembly {
    pub(crate) fn new(locales: usize) -> Reassembly {
        Reassembly {
            partial: Mutex::new((0..2 * locales).map(|_| None).collect()),
            open: AtomicU64::new(0),
        }
    }

    /// Partial frames held now (Acquire: pairs with the Release decrement
    /// after a whole frame was handed on).
    pub(crate) fn open(&self) -> u64 {
        self.open.load(Ordering::Acquire)
    }

    /// Takes fragment `h` (its payload: the whole length, then the piece)
    /// from `src` on `net`. Called only by the poller. A completed frame
    /// is returned; the caller hands it on, then calls [`closed`].
    ///
    /// [`closed`]: Self::closed
    pub(crate) fn take(&self, src: usize, net: Network, h: Header, payload: &[u8]) -> Taken {
        let (len, piece) = payload.split_at(super::wire::FRAGMENT_PREFIX);
        let total = u64::from_le_bytes(len.try_into().expect("FRAGMENT_PREFIX is 8")) as usize;
        let offset = h.token as usize;
        let mut taken = Taken::default();
        let mut table = self.partial.lock().unwrap();
        let slot = &mut table[2 * src + net as usize];
        if offset == 0 {
            if let Some(old) = slot.take() {
                self.drop_partial();
                taken.broken = Some(Broken {
                    why: format!(
                        "stream {} ended after {} of its {} bytes, when stream {} began",
                        old.stream, old.got, old.total, h.word
                    ),
                });
            }
            if !(HEADER_LEN..=HEADER_LEN + MAX_PAYLOAD).contains(&total) {
                let why = format!("stream {} announces a {total}-byte frame", h.word);
                return Taken {
                    broken: Some(merge(taken.broken, Broken { why })),
                    whole: None,
                };
            }
            // Release: the increment is visible before the ring slot this
            // piece came in is freed (pairs with `open`'s Acquire).
            self.open.fetch_add(1, Ordering::Release);
            *slot = Some(Partial {
                stream: h.word,
                total,
                got: 0,
                head: [0; HEAD_MAX],
                head_len: HEADER_LEN,
                body: Vec::with_capacity(total - HEADER_LEN),
            });
        }
        let Some(p) = slot.as_mut() else {
            let why = format!(
                "a piece at offset {offset} of stream {} came with no stream open",
                h.word
            );
            return Taken {
                broken: Some(merge(taken.broken, Broken { why })),
                whole: None,
            };
        };
        let why = if p.stream != h.word {
            Some(format!(
                "a piece of stream {} came while stream {} was open",
                h.word, p.stream
            ))
        } else if p.total != total {
            Some(format!(
                "a piece of stream {} announces {total} bytes where the stream began with {}",
                h.word, p.total
            ))
        } else if offset != p.got {
            Some(format!(
                "stream {} skipped from byte {} to byte {offset}",
                h.word, p.got
            ))
        } else if piece.len() > p.total - p.got {
            Some(format!(
                "a piece of stream {} runs {} bytes past the frame's {} bytes",
                h.word,
                piece.len() - (p.total - p.got),
                p.total
            ))
        } else {
            None
        };
        if let Some(why) = why {
            let old = slot.take().expect("a stream is open");
            drop(old);
            self.drop_partial();
            taken.broken = Some(merge(taken.broken, Broken { why }));
            return taken;
        }
        p.append(piece);
        if p.got == p.total {
            let p = slot.take().expect("a stream is open");
            taken.whole = Some(Whole {
                head: p.head,
                kept: p.head_len,
                body: p.body,
            });
        }
        taken
    }

    /// A whole frame that [`take`](Self::take) returned was handed on.
    pub(crate) fn closed(&self) {
        // Release: after the frame became runtime work (a task, a filled
        // slot): `in_flight` reaching 0 is seen only once that work is.
        self.open.fetch_sub(1, Ordering::Release);
    }

    /// A partial frame was dropped (nothing will come of it).
    fn drop_partial(&self) {
        self.open.fetch_sub(1, Ordering::Release);
    }
}

/// Two breaks from one fragment, reported as one.
fn merge(first: Option<Broken>, second: Broken) -> Broken {
    match first {
        None => second,
        Some(f) => Broken {
            why: format!("{}; then {}", f.why, second.why),
        },
    }
}

/// The fuzz target's body (`fuzz/fuzz_targets/am_fragments.rs`):
/// arbitrary fragments from three sources on two networks never panic the
/// reassembly, the count of open partial frames always equals the frames
/// held, and a frame that completes has exactly the length its stream
/// announced.
pub(crate) fn fuzz_fragments(data: &[u8]) {
    let r = Reassembly::new(3);
    let mut rest = data;
    // Each record: source/network (1), stream (1), offset (2), total (2),
    // piece length (1), then the piece.
    while rest.len() >= 7 {
        let (rec, tail) = rest.split_at(7);
        let src = rec[0] as usize % 3;
        let net = if rec[0] & 0x80 != 0 {
            Network::Reply
        } else {
            Network::Request
        };
        let stream = rec[1] as u64;
        let offset = u16::from_le_bytes([rec[2], rec[3]]) as u64;
        let total = u16::from_le_bytes([rec[4], rec[5]]) as u64;
        let n = (rec[6] as usize).min(tail.len());
        let (piece, tail) = tail.split_at(n);
        rest = tail;
        let mut payload = total.to_le_bytes().to_vec();
        payload.extend_from_slice(piece);
        let h = Header::fragment(stream.max(1), offset);
        let taken = r.take(src, net, h, &payload);
        if let Some(w) = taken.whole {
            let kept = if w.head[0] == Kind::Message as u8 {
                HEAD_MAX.min(total as usize)
            } else {
                HEADER_LEN
            };
            assert_eq!(w.kept, kept, "a message's tag, and only it, is kept apart");
            assert_eq!(
                kept + w.body.len(),
                total as usize,
                "a whole frame has its length"
            );
            r.closed();
        }
        let held = r
            .partial
            .lock()
            .unwrap()
            .iter()
            .filter(|p| p.is_some())
            .count();
        assert_eq!(
            r.open() as usize,
            held,
            "open counts the partial frames held"
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::remote::wire::Status;

    /// Cuts `frame` into fragments of at most `piece` bytes, as the
    /// engine's sender does.
    fn cut(stream: u64, frame: &[u8], piece: usize) -> Vec<(Header, Vec<u8>)> {
        let total = (frame.len() as u64).to_le_bytes();
        frame
            .chunks(piece)
            .enumerate()
            .map(|(i, c)| {
                let mut p = total.to_vec();
                p.extend_from_slice(c);
                (Header::fragment(stream, (i * piece) as u64), p)
            })
            .collect()
    }

    fn frame(h: Header, payload: &[u8]) -> Vec<u8> {
        let mut f = h.encode(payload.len()).to_vec();
        f.extend_from_slice(payload);
        f
    }

    #[test]
    fn the_fuzz_body_holds_on_simple_and_pseudo_random_input() {
        // A whole 30-byte reply in two pieces, then noise.
        let mut data = vec![0x81, 4, 0, 0, 30, 0, 20];
        data.extend_from_slice(&[2; 20]);
        data.extend_from_slice(&[0x81, 4, 20, 0, 30, 0, 10]);
        data.extend_from_slice(&[0; 10]);
        fuzz_fragments(&data);
        let mut x = 0x2545_f491_4f6c_dd1du64;
        for _ in 0..200 {
            let bytes: Vec<u8> = (0..400)
                .map(|_| {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    (x % 7) as u8 * 9
                })
                .collect();
            fuzz_fragments(&bytes);
        }
    }

    #[test]
    fn slices_cover_any_range_of_the_parts() {
        let parts: [&[u8]; 3] = [b"abc", b"", b"defgh"];
        for at in 0..8 {
            for n in 0..=8 - at {
                let mut out = Vec::new();
                slices(&parts, at, n, &mut out);
                let got: Vec<u8> = out.concat();
                assert_eq!(got, b"abcdefgh"[at..at + n].to_vec(), "at {at} n {n}");
            }
        }
    }

    #[test]
    fn a_message_comes_back_whole_with_its_tag_apart() {
        let r = Reassembly::new(2);
        let bytes: Vec<u8> = (0..10_000u32).map(|i| i as u8).collect();
        let mut payload = 7u32.to_le_bytes().to_vec();
        payload.extend_from_slice(&bytes);
        let f = frame(Header::message(5, 9), &payload);
        let pieces = cut(1, &f, 999);
        let mut whole = None;
        for (i, (h, p)) in pieces.iter().enumerate() {
            assert_eq!(r.open(), (i > 0) as u64);
            let t = r.take(1, Network::Reply, *h, p);
            assert!(t.broken.is_none());
            whole = t.whole.or(whole);
        }
        let w = whole.expect("the last piece completes it");
        r.closed();
        assert_eq!(r.open(), 0);
        let h = Header::check(&w.head[..HEADER_LEN], f.len() - HEADER_LEN).unwrap();
        assert_eq!(h, Header::message(5, 9));
        assert_eq!(&w.head[HEADER_LEN..], &7u32.to_le_bytes());
        assert_eq!(w.body, bytes);
    }

    #[test]
    fn a_reply_keeps_only_its_header_apart_even_in_tiny_pieces() {
        let r = Reassembly::new(3);
        let f = frame(Header::reply(4, Status::Done), b"0123456789");
        let mut whole = None;
        for (h, p) in cut(2, &f, 1) {
            let t = r.take(2, Network::Reply, h, &p);
            assert!(t.broken.is_none());
            whole = t.whole.or(whole);
        }
        let w = whole.unwrap();
        assert_eq!(&w.head[..HEADER_LEN], &f[..HEADER_LEN]);
        assert_eq!(w.body, b"0123456789");
    }

    #[test]
    fn streams_of_two_sources_and_networks_do_not_mix() {
        let r = Reassembly::new(3);
        let a = frame(Header::request(1, 2), &[1u8; 3000]);
        let b = frame(Header::request(1, 3), &[2u8; 3000]);
        let c = frame(Header::reply(3, Status::Done), &[3u8; 3000]);
        let (pa, pb, pc) = (cut(1, &a, 700), cut(1, &b, 700), cut(2, &c, 700));
        let mut done = Vec::new();
        for i in 0..pa.len() {
            for (src, net, (h, p)) in [
                (1, Network::Request, &pa[i]),
                (2, Network::Request, &pb[i]),
                (1, Network::Reply, &pc[i]),
            ] {
                let t = r.take(src, net, *h, p);
                assert!(t.broken.is_none());
                if let Some(w) = t.whole {
                    done.push(w.body[0]);
                    r.closed();
                }
            }
        }
        assert_eq!(done, vec![1, 2, 3]);
        assert_eq!(r.open(), 0);
    }

    #[test]
    fn every_broken_stream_is_reported_and_closed() {
        let f = frame(Header::request(1, 2), &[0u8; 100]);
        let p = cut(6, &f, 40);
        // A skipped piece.
        let r = Reassembly::new(2);
        assert!(
            r.take(1, Network::Request, p[0].0, &p[0].1)
                .broken
                .is_none()
        );
        let t = r.take(1, Network::Request, p[2].0, &p[2].1);
        let b = t.broken.expect("skipped");
        assert!(
            b.why.contains("skipped from byte 40 to byte 80"),
            "{}",
            b.why
        );
        assert_eq!(r.open(), 0);
        // A piece with no stream open.
        let b = r.take(1, Network::Request, p[1].0, &p[1].1).broken.unwrap();
        assert!(b.why.contains("no stream open"), "{}", b.why);
        // A new stream before the old one ended: the old one is dropped,
        // the new one goes on.
        assert!(
            r.take(1, Network::Request, p[0].0, &p[0].1)
                .broken
                .is_none()
        );
        let q = cut(7, &f, 40);
        let t = r.take(1, Network::Request, q[0].0, &q[0].1);
        assert!(t.broken.unwrap().why.contains("when stream 7 began"));
        assert_eq!(r.open(), 1);
        assert_eq!(q.len(), 4, "124 bytes in pieces of 40");
        assert!(
            r.take(1, Network::Request, q[1].0, &q[1].1)
                .broken
                .is_none()
        );
        assert!(r.take(1, Network::Request, q[2].0, &q[2].1).whole.is_none());
        assert!(r.take(1, Network::Request, q[3].0, &q[3].1).whole.is_some());
        r.closed();
        // Another stream's id, another length, a piece past the end.
        for bad in [
            (
                Header::fragment(8, 40),
                q[1].1.clone(),
                "while stream 6 was open",
            ),
            (
                Header::fragment(6, 40),
                {
                    let mut x = q[1].1.clone();
                    x[0] ^= 1;
                    x
                },
                "announces",
            ),
            (
                Header::fragment(6, 40),
                {
                    let mut x = q[1].1.clone();
                    x.extend_from_slice(&[0; 200]);
                    x
                },
                "past the frame",
            ),
        ] {
            assert!(
                r.take(1, Network::Request, p[0].0, &p[0].1)
                    .broken
                    .is_none()
            );
            let b = r.take(1, Network::Request, bad.0, &bad.1).broken.unwrap();
            assert!(b.why.contains(bad.2), "{} should say {}", b.why, bad.2);
            assert_eq!(r.open(), 0);
        }
        // A length no frame can have.
        let mut tiny = 3u64.to_le_bytes().to_vec();
        tiny.push(1);
        let b = r
            .take(1, Network::Request, Header::fragment(9, 0), &tiny)
            .broken
            .unwrap();
        assert!(b.why.contains("announces a 3-byte frame"), "{}", b.why);
        assert_eq!(r.open(), 0);
    }
}
