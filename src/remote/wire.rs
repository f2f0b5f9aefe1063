//! The active-message wire format: a fixed 24-byte header, then the
//! payload. `README.md` beside this file describes every field.
//!
//! Decoding never trusts the sender: every field is checked, and a frame
//! that fails a check is an error saying what was wrong (the caller adds
//! which locale sent it). `cargo fuzz` drives [`Header::decode`]
//! (`fuzz/fuzz_targets/am_header.rs`).

use std::fmt;

/// Size of the header in bytes.
pub(crate) const HEADER_LEN: usize = 24;

/// What a frame is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub(crate) enum Kind {
    /// Run a handler; `word` is its id, `token` the reply token (0: no
    /// reply wanted).
    Request = 1,
    /// The result of a request; `token` is the request's token, `status`
    /// says how it ended.
    Reply = 2,
    /// Runtime traffic (start-up, termination waves, shutdown); `word` is
    /// the [`Control`] operation. Not counted as a message of the program.
    Control = 3,
    /// A Chant message between tasks (`chant.rs`): `word` is the
    /// destination task id, `token` the source task id (both never 0); the
    /// payload starts with the tag ([`TAG_LEN`] bytes).
    Message = 4,
    /// A piece of a frame too large for the transport (`fragment.rs`):
    /// `word` is the stream id (never 0), `token` the offset of this
    /// piece in the whole frame; the payload is the whole frame's length
    /// ([`FRAGMENT_PREFIX`] bytes), then the piece.
    Fragment = 5,
}

/// Bytes before the piece in a [`Kind::Fragment`] payload: the whole
/// frame's length (u64).
pub(crate) const FRAGMENT_PREFIX: usize = 8;

/// The largest payload one frame (whole, or reassembled from fragments)
/// may announce: its length travels as a u32.
pub(crate) const MAX_PAYLOAD: usize = u32::MAX as usize;

/// Bytes of the tag at the start of a [`Kind::Message`] payload.
pub(crate) const TAG_LEN: usize = 4;

/// How a request ended, in its reply.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub(crate) enum Status {
    /// The payload is the handler's result.
    Done = 0,
    /// The handler panicked; the payload is the panic message (UTF-8).
    Panicked = 1,
    /// The request was rejected (unknown handler, undecodable arguments);
    /// the payload says why (UTF-8).
    Rejected = 2,
    /// The handler ran, but its result (or its error) could not be sent
    /// back; the payload says why (UTF-8).
    Lost = 3,
}

/// Control operations.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u64)]
pub(crate) enum Control {
    /// Locale `src` is up; the payload lists its handlers (start-up check).
    Hello = 1,
    /// Termination wave `token`: report your counters.
    Probe = 2,
    /// Answer to a probe: the payload is `sent, received, active` (three
    /// little-endian u64).
    ProbeReply = 3,
    /// The job is over: shut down and exit.
    Shutdown = 4,
    /// Deadlock wave `token` (the job-wide deadlock check): answer with
    /// your state and counters.
    DeadlockProbe = 5,
    /// Answer to a deadlock probe: `state, sent, received, progress`
    /// (four little-endian u64; state 0 busy, 1 stuck, 2 quiescent).
    DeadlockReply = 6,
    /// The job is deadlocked: send your waiters (`Waiters`).
    ListWaiters = 7,
    /// A locale's waiters for the deadlock report: UTF-8 lines.
    Waiters = 8,
}

/// The highest control operation.
const LAST_CONTROL: u64 = Control::Waiters as u64;

/// A decoded header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Header {
    pub(crate) kind: Kind,
    pub(crate) status: Status,
    /// Handler id (requests) or control operation (control frames).
    pub(crate) word: u64,
    pub(crate) token: u64,
    /// The message's trace sequence number (bytes 2..4): 0 unless the
    /// sender records a trace (`trace/README.md`), which pairs each send
    /// with its receive by it.
    pub(crate) trace: u16,
}

/// What was wrong with a frame.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct WireError(String);

impl fmt::Display for WireError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

fn u64_at(b: &[u8], at: usize) -> u64 {
    let mut w = [0u8; 8];
    w.copy_from_slice(&b[at..at + 8]);
    u64::from_le_bytes(w)
}

impl Header {
    /// A request for handler `id`; `token` 0 wants no reply.
    pub(crate) fn request(id: u64, token: u64) -> Header {
        Header {
            kind: Kind::Request,
            status: Status::Done,
            word: id,
            token,
            trace: 0,
        }
    }

    /// The reply to request `token`.
    pub(crate) fn reply(token: u64, status: Status) -> Header {
        Header {
            kind: Kind::Reply,
            status,
            word: 0,
            token,
            trace: 0,
        }
    }

    /// A Chant message from task `from` to task `to` (their local ids).
    pub(crate) fn message(to: u64, from: u64) -> Header {
        Header {
            kind: Kind::Message,
            status: Status::Done,
            word: to,
            token: from,
            trace: 0,
        }
    }

    /// Piece `offset` of stream `stream` (a frame sent in fragments).
    pub(crate) fn fragment(stream: u64, offset: u64) -> Header {
        Header {
            kind: Kind::Fragment,
            status: Status::Done,
            word: stream,
            token: offset,
            trace: 0,
        }
    }

    /// A control frame.
    pub(crate) fn control(op: Control, token: u64) -> Header {
        Header {
            kind: Kind::Control,
            status: Status::Done,
            word: op as u64,
            token,
            trace: 0,
        }
    }

    /// The header's bytes, for a payload of `payload_len` bytes (at most
    /// [`MAX_PAYLOAD`]: senders check it first).
    pub(crate) fn encode(&self, payload_len: usize) -> [u8; HEADER_LEN] {
        let len = u32::try_from(payload_len).expect("senders check MAX_PAYLOAD");
        let mut b = [0u8; HEADER_LEN];
        b[0] = self.kind as u8;
        b[1] = self.status as u8;
        b[2..4].copy_from_slice(&self.trace.to_le_bytes());
        b[4..8].copy_from_slice(&len.to_le_bytes());
        b[8..16].copy_from_slice(&self.word.to_le_bytes());
        b[16..24].copy_from_slice(&self.token.to_le_bytes());
        b
    }

    /// Splits a frame into its header and payload, checking every field.
    pub(crate) fn decode(frame: &[u8]) -> Result<(Header, &[u8]), WireError> {
        if frame.len() < HEADER_LEN {
            return Err(WireError(format!(
                "a {}-byte frame is shorter than the {HEADER_LEN}-byte header",
                frame.len()
            )));
        }
        let (head, payload) = frame.split_at(HEADER_LEN);
        let h = Header::check(head, payload.len())?;
        Ok((h, payload))
    }

    /// Checks the header `head` (its first [`HEADER_LEN`] bytes) of a
    /// frame whose payload is `payload_len` bytes long: every field, as
    /// [`decode`](Self::decode) does. A reassembled frame is checked so.
    pub(crate) fn check(head: &[u8], payload_len: usize) -> Result<Header, WireError> {
        debug_assert!(head.len() >= HEADER_LEN);
        let kind = match head[0] {
            1 => Kind::Request,
            2 => Kind::Reply,
            3 => Kind::Control,
            4 => Kind::Message,
            5 => Kind::Fragment,
            k => return Err(WireError(format!("unknown frame kind {k}"))),
        };
        let status = match head[1] {
            0 => Status::Done,
            1 if kind == Kind::Reply => Status::Panicked,
            2 if kind == Kind::Reply => Status::Rejected,
            3 if kind == Kind::Reply => Status::Lost,
            s => {
                return Err(WireError(format!(
                    "status {s} is invalid for a {kind:?} frame"
                )));
            }
        };
        let trace = u16::from_le_bytes([head[2], head[3]]);
        let mut l = [0u8; 4];
        l.copy_from_slice(&head[4..8]);
        let len = u32::from_le_bytes(l) as usize;
        if len != payload_len {
            return Err(WireError(format!(
                "the header announces {len} payload bytes but the frame carries {payload_len}"
            )));
        }
        let word = u64_at(head, 8);
        let token = u64_at(head, 16);
        match kind {
            Kind::Reply if word != 0 => {
                return Err(WireError(format!("a reply carries handler word {word:#x}")));
            }
            Kind::Reply if token == 0 => return Err(WireError("a reply has token 0".into())),
            Kind::Control if !(1..=LAST_CONTROL).contains(&word) => {
                return Err(WireError(format!("unknown control operation {word}")));
            }
            Kind::Message if word == 0 || token == 0 => {
                return Err(WireError("a message names task 0".into()));
            }
            Kind::Message if payload_len < TAG_LEN => {
                return Err(WireError(format!(
                    "a message of {payload_len} bytes has no room for its {TAG_LEN}-byte tag"
                )));
            }
            Kind::Fragment if word == 0 => {
                return Err(WireError("a fragment names stream 0".into()));
            }
            Kind::Fragment if payload_len <= FRAGMENT_PREFIX => {
                return Err(WireError(format!(
                    "a fragment of {payload_len} bytes carries no piece after its \
                     {FRAGMENT_PREFIX}-byte length"
                )));
            }
            _ => {}
        }
        Ok(Header {
            kind,
            status,
            word,
            token,
            trace,
        })
    }

    /// The control operation of a control frame (checked by `decode`).
    pub(crate) fn control_op(&self) -> Control {
        match self.word {
            1 => Control::Hello,
            2 => Control::Probe,
            3 => Control::ProbeReply,
            4 => Control::Shutdown,
            5 => Control::DeadlockProbe,
            6 => Control::DeadlockReply,
            7 => Control::ListWaiters,
            _ => Control::Waiters,
        }
    }
}

/// Little-endian u64s, for small control payloads.
pub(crate) fn words(ws: &[u64]) -> Vec<u8> {
    ws.iter().flat_map(|w| w.to_le_bytes()).collect()
}

/// The `n` little-endian u64s of a control payload, or an error.
pub(crate) fn read_words(payload: &[u8], n: usize) -> Result<Vec<u64>, WireError> {
    if payload.len() != 8 * n {
        return Err(WireError(format!(
            "a control payload of {} bytes where {n} words were expected",
            payload.len()
        )));
    }
    Ok((0..n).map(|i| u64_at(payload, 8 * i)).collect())
}

/// The fuzz target's body (`fuzz/fuzz_targets/am_frame.rs`): decoding
/// arbitrary bytes never panics, and a frame that decodes re-encodes to
/// the same bytes.
pub(crate) fn fuzz_frame(frame: &[u8]) {
    if let Ok((h, payload)) = Header::decode(frame) {
        let mut again = h.encode(payload.len()).to_vec();
        again.extend_from_slice(payload);
        assert_eq!(again, frame, "a decoded frame re-encodes to its bytes");
        if h.kind == Kind::Control {
            let _ = h.control_op();
            let _ = read_words(payload, 3);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(h: Header, payload: &[u8]) -> Vec<u8> {
        let mut f = h.encode(payload.len()).to_vec();
        f.extend_from_slice(payload);
        f
    }

    #[test]
    fn headers_round_trip() {
        for (h, p) in [
            (Header::request(0xdead_beef, 0), &b""[..]),
            (Header::request(7, 99), &b"args"[..]),
            (Header::reply(99, Status::Panicked), &b"boom"[..]),
            (Header::reply(5, Status::Rejected), &b"why"[..]),
            (Header::reply(6, Status::Lost), &b"too big"[..]),
            (Header::control(Control::Probe, 3), &b""[..]),
            (Header::message(17, 9), &b"\x07\0\0\0hello"[..]),
            (Header::fragment(3, 65_000), &b"\x10\0\0\0\0\0\0\0piece"[..]),
        ] {
            let f = frame(h, p);
            let (d, payload) = Header::decode(&f).unwrap();
            assert_eq!(d, h);
            assert_eq!(payload, p);
        }
    }

    #[test]
    fn a_trace_sequence_number_travels_in_bytes_2_and_3() {
        let mut h = Header::message(5, 6);
        h.trace = 0xbeef;
        let f = frame(h, b"tag!");
        assert_eq!(&f[2..4], &0xbeef_u16.to_le_bytes());
        assert_eq!(Header::decode(&f).unwrap().0, h);
        assert_eq!(
            Header::decode(&frame(Header::message(5, 6), b"tag!"))
                .unwrap()
                .0
                .trace,
            0
        );
    }

    #[test]
    fn every_bad_field_is_an_error_saying_what() {
        let good = frame(Header::request(7, 1), b"abc");
        let cases: Vec<(Vec<u8>, &str)> = vec![
            (good[..10].to_vec(), "shorter than"),
            (
                {
                    let mut f = good.clone();
                    f[0] = 9;
                    f
                },
                "unknown frame kind 9",
            ),
            (
                {
                    let mut f = good.clone();
                    f[1] = 1;
                    f
                },
                "status 1 is invalid for a Request",
            ),
            (good[..good.len() - 1].to_vec(), "announces 3 payload bytes"),
            (frame(Header::reply(0, Status::Done), b""), "token 0"),
            (
                {
                    let mut f = frame(Header::control(Control::Hello, 0), b"");
                    f[8] = 77;
                    f
                },
                "unknown control operation 77",
            ),
            (frame(Header::message(0, 9), b"tag!"), "task 0"),
            (frame(Header::message(5, 0), b"tag!"), "task 0"),
            (
                frame(Header::message(5, 9), b"ta"),
                "no room for its 4-byte tag",
            ),
            (frame(Header::fragment(0, 0), b"12345678p"), "stream 0"),
            (
                frame(Header::fragment(4, 0), b"12345678"),
                "carries no piece",
            ),
        ];
        for (f, want) in cases {
            let e = Header::decode(&f).unwrap_err().to_string();
            assert!(e.contains(want), "{e:?} should say {want:?}");
        }
    }

    #[test]
    fn every_control_operation_decodes_as_itself() {
        for op in [
            Control::Hello,
            Control::Probe,
            Control::ProbeReply,
            Control::Shutdown,
            Control::DeadlockProbe,
            Control::DeadlockReply,
            Control::ListWaiters,
            Control::Waiters,
        ] {
            let f = frame(Header::control(op, 2), b"");
            assert_eq!(Header::decode(&f).unwrap().0.control_op(), op);
        }
        let mut f = frame(Header::control(Control::Waiters, 0), b"");
        f[8] = LAST_CONTROL as u8 + 1;
        assert!(Header::decode(&f).is_err());
    }

    #[test]
    fn control_words_round_trip_and_check_length() {
        assert_eq!(read_words(&words(&[1, 2, 3]), 3).unwrap(), vec![1, 2, 3]);
        assert!(read_words(&words(&[1, 2]), 3).is_err());
    }
}
