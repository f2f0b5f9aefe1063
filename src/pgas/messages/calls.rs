//! The message memory's remote calls, every one declared inline (it runs
//! inside the poll of the locale that receives it, never waits, never
//! sends: `remote/README.md`, "Serving a request", rule 1), and what sends
//! them. They are registered in every program that links cantus, whether
//! or not it uses this memory, so every locale's handler table is the
//! same.
//!
//! | call | arguments | runs on the target | answers |
//! |---|---|---|---|
//! | `Put` (raw) | offset (u64), bytes | copies the bytes into its segment | nothing (the reply is the acknowledgement) |
//! | `PutSignal` (raw) | offset, signal offset, operation, operand (u64), bytes | copies the bytes, then applies the operation to the signal word | nothing |
//! | `Get` (raw) | offset, length (u64) | | the bytes |
//! | `PutAt` (raw, a task) | offset, length, landing key, caller, signal offset, operation (0 none), operand (u64) | claims the bytes the caller sent before it (a landing) into its segment, waits until they landed, applies the signal | nothing |
//! | `GetTo` (raw, a task) | offset, length, landing key, caller (u64) | sends the bytes to the caller's landing | nothing, after the bytes |
//! | `AtomicCall` (pod) | offset, operation, two operands | the atomic on its segment's word | value, and whether a CAS failed |
//! | `Parcel` (raw, detached) | epoch, collective (u64), phase, sender (u32), bytes | posts them (`post.rs`) | (no reply) |
//! | `GroupClaim` (pod, to 0) | | claims the group word | the new epoch, or that a group runs |
//! | `GroupBegin` (pod) | epoch, handler id | starts the group in its post | (acknowledgement) |
//! | `BodyEnded` (pod) | epoch, locale, collectives done, panicked | records it; locale 0 poisons on the first panic | (acknowledgement) |
//! | `GroupEnd` (pod, to 0) | | frees the group word | the poison |
//!
//! A raw call's arguments are framed here by hand, little-endian, so that
//! a put's bytes are copied once into the frame and once out of it, with
//! no encoding; a target never trusts them (it checks every offset
//! against its own segment).

use super::MessageMemory;
use super::post::{Ended, Key};
use crate::error::{Error, ErrorKind};
use crate::pgas::memory::{Answers, AtomicOp};
use crate::pgas::nonblocking::{Gets, InFlight};
use crate::pgas::space::if_installed;
use crate::remote::handlers::{Outcome, id_of, panic_message};
use crate::remote::{Handler, RemotePod};
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::atomic::AtomicU64;

const PUT: &str = "cantus::pgas::messages::Put";
const PUT_SIGNAL: &str = "cantus::pgas::messages::PutSignal";
const GET: &str = "cantus::pgas::messages::Get";
const GET_TO: &str = "cantus::pgas::messages::GetTo";
const PUT_AT: &str = "cantus::pgas::messages::PutAt";
const PARCEL: &str = "cantus::pgas::messages::Parcel";

inventory::submit! { Handler::raw(PUT, serve_put, true) }
inventory::submit! { Handler::raw(PUT_SIGNAL, serve_put_signal, true) }
inventory::submit! { Handler::raw(GET, serve_get, true) }
// Tasks: one waits until its bytes were sent from the segment, the other
// until they landed in it.
inventory::submit! { Handler::raw(GET_TO, serve_get_to, false) }
inventory::submit! { Handler::raw(PUT_AT, serve_put_at, false) }
inventory::submit! { Handler::raw(PARCEL, serve_parcel, true) }

/// Bytes before a put's data: the offset.
const PUT_HEAD: usize = 8;
/// Bytes before a signalling put's data: the offset, the signal word's
/// offset, the operation (1 store, 2 fetch_add) and its operand.
const PUT_SIGNAL_HEAD: usize = 32;
/// Bytes before a parcel's data: epoch, collective, phase, sender.
const PARCEL_HEAD: usize = 24;

/// Runs a raw handler's body: its error is the caller's `Rejected`, and a
/// panic (none is expected: the bodies check what they read) is caught
/// here, since an inline call runs inside the poll with no catch of its
/// own.
fn guarded(body: impl FnOnce() -> Result<(), String>) -> Outcome {
    match catch_unwind(AssertUnwindSafe(body)) {
        Ok(Ok(())) => Outcome::Done,
        Ok(Err(why)) => Outcome::Rejected(why),
        Err(p) => Outcome::Panicked(panic_message(&*p)),
    }
}

/// The little-endian u64 at `at` of `args`.
fn word(args: &[u8], at: usize) -> Result<u64, String> {
    args.get(at..at + 8)
        .map(|b| u64::from_le_bytes(b.try_into().expect("8 bytes")))
        .ok_or_else(|| format!("a {}-byte call is too short", args.len()))
}

/// Runs `f` on this locale's segment (its start and length), checking
/// that `len` bytes at `offset` lie in it.
fn in_segment<R>(offset: u64, len: usize, f: impl FnOnce(*mut u8) -> R) -> Result<R, String> {
    if_installed(|s| {
        let bytes = s.heap_bytes() as u64;
        if offset > bytes || len as u64 > bytes - offset {
            return Err(format!(
                "{len} bytes at offset {offset} run outside locale {}'s {bytes}-byte heap segment",
                s.here
            ));
        }
        // SAFETY: offset + len <= heap_bytes (checked), so the address
        // lies within this locale's segment.
        Ok(f(unsafe {
            s.local_segment().as_ptr().add(offset as usize)
        }))
    })
    .unwrap_or_else(|| Err("this locale has no global memory (its runtime stopped)".into()))
}

/// A signal's operation as it goes on the wire (`PutSignal`, `PutAt`):
/// its code (1 store, 2 fetch_add, as `AtomicCall`'s) and operand.
fn signal_words(op: AtomicOp) -> (u64, u64) {
    match op {
        AtomicOp::Store(v) => (1, v),
        AtomicOp::FetchAdd(v) => (2, v),
        op => unreachable!("a signal is a store or an add, not {op:?}"),
    }
}

/// The signal operation of wire code `code` and operand `v`.
fn signal_op(code: u64, v: u64) -> Result<AtomicOp, String> {
    match code {
        1 => Ok(AtomicOp::Store(v)),
        2 => Ok(AtomicOp::FetchAdd(v)),
        op => Err(format!("no signal operation {op}")),
    }
}

/// Checks that a signal word at `signal` is 8-aligned and lies in the
/// segment (before anything of its put is touched).
fn check_signal(signal: u64) -> Result<(), String> {
    if signal % 8 != 0 {
        return Err(format!("a signal word at the unaligned offset {signal}"));
    }
    in_segment(signal, 8, drop)
}

/// Applies `op` to the signal word at `signal` (checked by
/// `check_signal`), after the put's bytes: the operation releases them
/// (Release or AcqRel), so a task that sees the signal with an Acquire
/// load sees the bytes. (A compare-exchange's failure is no error: a
/// signal is a store or an add.)
fn apply_signal(signal: u64, op: AtomicOp) -> Result<(), String> {
    in_segment(signal, 8, |p| {
        // SAFETY: 8 bytes at an 8-aligned offset (checked) of a
        // page-aligned segment, as in `AtomicCall::run`.
        op.apply(unsafe { &*p.cast::<AtomicU64>() })
    })
    .map(drop)
}

fn serve_put(args: &[u8], _: &mut Vec<u8>) -> Outcome {
    guarded(|| {
        let offset = word(args, 0)?;
        let data = &args[PUT_HEAD..];
        in_segment(offset, data.len(), |dst| {
            // SAFETY: `dst` is valid for `data.len()` bytes of the segment
            // (checked); `data` lies in the frame, not in the segment. A
            // concurrent access to the same bytes is the race `GlobalPtr`
            // documents (plain data, values unspecified).
            unsafe { std::ptr::copy_nonoverlapping(data.as_ptr(), dst, data.len()) }
        })
    })
}

fn serve_put_signal(args: &[u8], _: &mut Vec<u8>) -> Outcome {
    guarded(|| {
        let (offset, signal) = (word(args, 0)?, word(args, 8)?);
        let op = signal_op(word(args, 16)?, word(args, 24)?)?;
        // Both places are checked before either is touched.
        check_signal(signal)?;
        let data = &args[PUT_SIGNAL_HEAD..];
        in_segment(offset, data.len(), |dst| {
            // SAFETY: as in `serve_put`.
            unsafe { std::ptr::copy_nonoverlapping(data.as_ptr(), dst, data.len()) }
        })?;
        // The copy comes before the signal in this thread.
        apply_signal(signal, op)
    })
}

/// Answers with the bytes where they lie in the segment (lent until the
/// reply is sent: the transport copies them from there, not first into a
/// result buffer). The segment stays mapped while the memory is
/// installed, past every poll and task of the runtime; any bytes are fine
/// to send (the race of a concurrent put is `GlobalPtr`'s documented
/// one).
fn serve_get(args: &[u8], _: &mut Vec<u8>) -> Outcome {
    let at = std::cell::Cell::new(None);
    match guarded(|| {
        let (offset, len) = (word(args, 0)?, word(args, 8)? as usize);
        in_segment(offset, len, |src| at.set(Some((src.cast_const(), len))))
    }) {
        Outcome::Done => {
            let (at, len) = at.get().expect("in_segment ran its closure");
            Outcome::Lent { at, len }
        }
        other => other,
    }
}

/// Sends the bytes, from where they lie in the segment, as the message
/// the caller expects for its landing (`Transport::expect_landing`:
/// received straight into the caller's slice), and answers once they were
/// sent; the answer itself is empty, and comes after the bytes (over MPI,
/// one sender's messages are matched in the order sent, and the caller's
/// progress receives the landing's message whole before it looks at the
/// next).
fn serve_get_to(args: &[u8], _: &mut Vec<u8>) -> Outcome {
    guarded(|| {
        let (offset, len) = (word(args, 0)?, word(args, 8)? as usize);
        let key = u32::try_from(word(args, 16)?).map_err(|_| "a landing key above 32 bits")?;
        let caller = word(args, 24)? as usize;
        let at = in_segment(offset, len, |src| src.cast_const())?;
        // SAFETY: `len` bytes at `at` lie in this locale's segment
        // (checked), which stays mapped while the memory is installed,
        // past every task of the runtime (this is one); a concurrent put
        // to them is `GlobalPtr`'s documented race.
        let bytes = unsafe { std::slice::from_raw_parts(at, len) };
        crate::remote::send_to_landing(caller, key, bytes).map_err(|e| e.to_string())
    })
}

/// Claims the bytes the caller sent before this call (a claimed
/// landing's message) straight into the segment, waits until they landed,
/// applies the signal if there is one, and answers; refuses them (they
/// are dropped) if the place or the signal word lies outside the segment.
fn serve_put_at(args: &[u8], _: &mut Vec<u8>) -> Outcome {
    let claim = (word(args, 16), word(args, 24));
    let claimed = std::cell::Cell::new(false);
    let outcome = guarded(|| {
        let (offset, len) = (word(args, 0)?, word(args, 8)? as usize);
        let (key, caller) = (word(args, 16)?, word(args, 24)? as usize);
        let key = u32::try_from(key).map_err(|_| "a landing key above 32 bits")?;
        let op = match (word(args, 32)?, word(args, 40)?, word(args, 48)?) {
            (_, 0, _) => None,
            (signal, code, v) => Some((signal, signal_op(code, v)?)),
        };
        if let Some((signal, _)) = op {
            check_signal(signal)?;
        }
        let place = in_segment(offset, len, |dst| dst)?;
        // SAFETY: `len` bytes at `place` lie in this locale's segment
        // (checked), mapped while the memory is installed, past every
        // task (this one waits for the landing below). Only the landing
        // writes them meanwhile; a concurrent access by others is
        // `GlobalPtr`'s documented race.
        let landing = unsafe { crate::remote::claim_landing(caller, key, place, len) }
            .ok_or_else(|| format!("no landings from locale {caller}"))?;
        claimed.set(true);
        crate::remote::wait_for_landing(&landing);
        if landing.state() != crate::comm::transport::LANDED {
            return Err(format!(
                "no {len} bytes from locale {caller} under landing key {key} came before this \
                 request, or they did not fit (see this locale's error, if any)"
            ));
        }
        // The bytes landed before (the landing's Acquire).
        match op {
            Some((signal, op)) => apply_signal(signal, op),
            None => Ok(()),
        }
    });
    if !matches!(outcome, Outcome::Done)
        && !claimed.get()
        && let (Ok(key), Ok(caller)) = claim
        && let Ok(key) = u32::try_from(key)
    {
        // Refused before its claim: its bytes are dropped.
        crate::remote::refuse_landing(caller as usize, key);
    }
    outcome
}

fn serve_parcel(args: &[u8], _: &mut Vec<u8>) -> Outcome {
    guarded(|| {
        let epoch = word(args, 0)?;
        let seq = word(args, 8)?;
        let kind = word(args, 16)?;
        let key = Key {
            seq,
            phase: kind as u32,
            from: (kind >> 32) as u32,
        };
        with_messages(|m| m.post.deliver(epoch, key, &args[PARCEL_HEAD..]))
    })
}

/// Runs `f` on the installed message memory.
fn with_messages<R>(f: impl FnOnce(&MessageMemory) -> R) -> Result<R, String> {
    if_installed(|s| s.memory.as_any().downcast_ref::<MessageMemory>().map(f))
        .flatten()
        .ok_or_else(|| "this locale's global memory is not the message memory".to_string())
}

/// As [`with_messages`], for the plain-data calls, whose panic is the
/// caller's error.
fn messages<R>(f: impl FnOnce(&MessageMemory) -> R) -> R {
    with_messages(f).unwrap_or_else(|why| panic!("cantus::pgas: {why}"))
}

/// An atomic on a word of the target's segment.
#[derive(Clone, Copy, bytemuck::Pod, bytemuck::Zeroable)]
#[repr(C)]
pub(crate) struct AtomicCall {
    offset: u64,
    /// 0 load, 1 store, 2 fetch_add, 3 swap, 4 compare_exchange.
    op: u64,
    a: u64,
    b: u64,
}

impl RemotePod for AtomicCall {
    /// The value, and 1 if a compare-exchange failed (then the value is
    /// the one seen).
    type Output = [u64; 2];
    const INLINE: bool = true;
    fn run(self) -> [u64; 2] {
        let op = match self.op {
            0 => AtomicOp::Load,
            1 => AtomicOp::Store(self.a),
            2 => AtomicOp::FetchAdd(self.a),
            3 => AtomicOp::Swap(self.a),
            4 => AtomicOp::CompareExchange(self.a, self.b),
            op => panic!("cantus::pgas: no atomic operation {op}"),
        };
        assert!(
            self.offset % 8 == 0,
            "cantus::pgas: an atomic at an unaligned offset"
        );
        let r = in_segment(self.offset, 8, |p| {
            // SAFETY: 8 bytes at an 8-aligned offset (checked) of a
            // page-aligned segment: an aligned word, valid while the
            // memory is installed (we hold it); any bits are a valid
            // AtomicU64.
            op.apply(unsafe { &*p.cast::<AtomicU64>() })
        });
        match r.unwrap_or_else(|why| panic!("cantus::pgas: {why}")) {
            Ok(v) => [v, 0],
            Err(v) => [v, 1],
        }
    }
}

/// Claims the group word on locale 0.
#[derive(Clone, Copy, bytemuck::Pod, bytemuck::Zeroable)]
#[repr(C)]
pub(crate) struct GroupClaim {
    unused: u64,
}

impl RemotePod for GroupClaim {
    /// [1, the group's epoch], or [0, 0] if a group runs.
    type Output = [u64; 2];
    const INLINE: bool = true;
    fn run(self) -> [u64; 2] {
        messages(MessageMemory::claim).map_or([0, 0], |epoch| [1, epoch])
    }
}

/// Starts a group in the target's post.
#[derive(Clone, Copy, bytemuck::Pod, bytemuck::Zeroable)]
#[repr(C)]
pub(crate) struct GroupBegin {
    epoch: u64,
    id: u64,
}

impl RemotePod for GroupBegin {
    type Output = u64;
    const INLINE: bool = true;
    fn run(self) -> u64 {
        messages(|m| m.post.begin(self.epoch, self.id, m.locales));
        0
    }
}

/// A body of the group ended.
#[derive(Clone, Copy, bytemuck::Pod, bytemuck::Zeroable)]
#[repr(C)]
pub(crate) struct BodyEnded {
    epoch: u64,
    locale: u64,
    done: u64,
    panicked: u64,
}

impl RemotePod for BodyEnded {
    type Output = u64;
    const INLINE: bool = true;
    fn run(self) -> u64 {
        let ended = Ended {
            done: self.done,
            panicked: self.panicked != 0,
        };
        messages(|m| m.note_ended(self.epoch, self.locale as usize, ended));
        0
    }
}

/// Ends the group on locale 0.
#[derive(Clone, Copy, bytemuck::Pod, bytemuck::Zeroable)]
#[repr(C)]
pub(crate) struct GroupEnd {
    unused: u64,
}

impl RemotePod for GroupEnd {
    /// 0, or 1 + the locale whose body panicked first.
    type Output = u64;
    const INLINE: bool = true;
    fn run(self) -> u64 {
        messages(|m| m.finish_group()).map_or(0, |l| l as u64 + 1)
    }
}

crate::remote_pod!(AtomicCall, GroupClaim, GroupBegin, BodyEnded, GroupEnd);

/// The largest argument or result that travels in one frame; sends
/// larger ones in pieces of this (less their header).
fn frame_payload() -> Result<usize, Error> {
    crate::remote::frame_payload().ok_or_else(|| {
        Error::new(
            ErrorKind::Locale,
            "cantus::pgas: no job of several locales runs (global memory of another locale \
             is out of reach)",
        )
    })
}

/// Sends the calls that copy `src` to `offset` of `locale`'s segment, one
/// per piece that fits a frame, all before the first reply is awaited,
/// and returns them unanswered (the bytes were framed: `src` may be
/// reused; each reply acknowledges its piece's bytes in place). With a `signal` (the signal word's
/// offset, a store or fetch_add), the last piece applies it after its
/// copy; the owner runs one sender's calls in the order sent (one
/// network of one pair, handlers inline in its poll), so every piece is
/// in place by then.
pub(crate) fn put_nb(
    locale: usize,
    offset: usize,
    src: &[u8],
    signal: Option<(usize, AtomicOp)>,
    answers: Answers,
) -> Result<InFlight, Error> {
    if answers == Answers::Unwanted {
        // Calls nobody answers (`begin_on_raw`): in order with the
        // caller's other calls to `locale`, so the signal still comes
        // after every piece; a refused one is reported there only.
        put_pieces(offset, src, signal, |id, _, args| {
            crate::remote::begin_on_raw(locale, id, args)
        })?
        .into_iter()
        .collect::<Result<(), Error>>()?;
        return Ok(InFlight::new(Vec::new()));
    }
    if (LAND_FROM..=LANDING_PIECE).contains(&src.len())
        && let Some(put) = put_landing(locale, offset, src, signal)
    {
        // Complete before it returns: its owner claims the bytes in a
        // task, which may run after the owner took this task's later calls
        // to it (inline, in its poll), and puts of one task to one locale
        // land in the order made (`pgas/README.md`, "Non-blocking and
        // signalling operations", rule 3).
        return put?.finish().map(|()| InFlight::new(Vec::new()));
    }
    let calls = put_pieces(offset, src, signal, |id, name, args| {
        crate::remote::on_raw(locale, id, name, args)
    })?;
    Ok(InFlight::new(calls))
}

/// A put whose bytes go as a claimed landing's message (over MPI, to
/// another node: `remote::send_claimed`), sent from `src` itself, and a
/// `PutAt` call after them that names them, whose handler claims them
/// into the segment: no frame, no copy but MPI's. Returns once `src` may
/// be reused (its bytes were sent), the call unanswered. `None` where
/// there is no such path.
fn put_landing(
    locale: usize,
    offset: usize,
    src: &[u8],
    signal: Option<(usize, AtomicOp)>,
) -> Option<Result<InFlight, Error>> {
    let (word, (code, v)) = match signal {
        None => (0, (0, 0)),
        Some((word, op)) => (word as u64, signal_words(op)),
    };
    let here = crate::remote::here() as u64;
    let sent = crate::remote::send_claimed(locale, src, |key| {
        let args = [
            offset as u64,
            src.len() as u64,
            u64::from(key),
            here,
            word,
            code,
            v,
        ]
        .map(u64::to_le_bytes);
        crate::remote::on_raw(locale, id_of(PUT_AT), PUT_AT, &[args.as_flattened()])
    })?;
    Some(sent.map(|(key, call)| InFlight {
        calls: vec![call],
        claimed: vec![(locale, key)],
    }))
}

/// Cuts a put of `src` at `offset` into calls that each fit a frame, the
/// last one carrying `signal`, and makes each with `call(id, name,
/// argument parts)`, in order.
fn put_pieces<R>(
    offset: usize,
    src: &[u8],
    signal: Option<(usize, AtomicOp)>,
    mut call: impl FnMut(u64, &'static str, &[&[u8]]) -> R,
) -> Result<Vec<R>, Error> {
    let head = if signal.is_some() {
        PUT_SIGNAL_HEAD
    } else {
        PUT_HEAD
    };
    let piece = frame_payload()?.saturating_sub(head).max(1);
    let pieces = src.len().div_ceil(piece).max(1);
    Ok((0..pieces)
        .map(|i| {
            let at = i * piece;
            let data = &src[at..(at + piece).min(src.len())];
            let to = ((offset + at) as u64).to_le_bytes();
            match signal {
                Some((word, op)) if i + 1 == pieces => {
                    let (code, v) = signal_words(op);
                    let head = [
                        to,
                        (word as u64).to_le_bytes(),
                        code.to_le_bytes(),
                        v.to_le_bytes(),
                    ];
                    call(id_of(PUT_SIGNAL), PUT_SIGNAL, &[head.as_flattened(), data])
                }
                _ => call(id_of(PUT), PUT, &[&to, data]),
            }
        })
        .collect())
}

/// Sends the calls that fetch `len` bytes from `offset` of `locale`'s
/// segment, one per piece whose reply fits a frame, all before the first
/// reply is awaited, and returns them unanswered.
pub(crate) fn get_nb(locale: usize, offset: usize, len: usize) -> Result<Gets, Error> {
    let piece = frame_payload()?.max(1);
    let pieces = (0..len)
        .step_by(piece)
        .map(|at| {
            let n = piece.min(len - at);
            let args = [
                ((offset + at) as u64).to_le_bytes(),
                (n as u64).to_le_bytes(),
            ];
            (
                at,
                n,
                crate::remote::on_raw(locale, id_of(GET), GET, &[args.as_flattened()]),
            )
        })
        .collect();
    Ok(Gets { locale, pieces })
}

/// The least get whose bytes are received straight into the caller's
/// slice where the transport can (a landing, over MPI): below it, a reply
/// copied out costs less than the landing's extra step.
const LAND_FROM: usize = 64 << 10;
/// The most bytes one landing receives (an MPI count is an `int`).
const LANDING_PIECE: usize = 1 << 30;

/// Fetches `dst.len()` bytes from `offset` of `locale`'s segment into
/// `dst`. A large get lands straight in `dst` where the transport can
/// (over MPI, from a locale of another node: `Transport::expect_landing`),
/// in pieces whose calls are all sent before the first is awaited; else
/// it is [`get_nb`]'s calls, their replies copied out.
pub(crate) fn get_into(locale: usize, offset: usize, dst: &mut [u8]) -> Result<(), Error> {
    if dst.len() < LAND_FROM {
        return get_nb(locale, offset, dst.len())?.finish(dst);
    }
    let here = crate::remote::here() as u64;
    // Withdrawn on every way out, so nothing writes `dst` once this
    // returns (a landing that already came is withdrawn at no cost).
    type Call = Option<crate::remote::RemoteHandle<()>>;
    struct Expected(Vec<(crate::comm::transport::Landing, Call)>);
    impl Drop for Expected {
        fn drop(&mut self) {
            for (landing, _) in &self.0 {
                crate::remote::withdraw_landing(landing);
            }
        }
    }
    let mut expected = Expected(Vec::new());
    let mut copied = None;
    let base = dst.as_mut_ptr();
    for at in (0..dst.len()).step_by(LANDING_PIECE) {
        let n = LANDING_PIECE.min(dst.len() - at);
        // SAFETY: `at + n <= dst.len()`: the pieces are disjoint ranges
        // of `dst`, which this call borrows mutably and does not touch
        // while they may land; every landing is withdrawn (`Expected`)
        // before the borrow ends.
        let landing = unsafe { crate::remote::expect_landing(locale, base.add(at), n) };
        let Some(landing) = landing else {
            // No landing (another path, or no key free): the rest in
            // replies.
            copied = Some((at, get_nb(locale, offset + at, dst.len() - at)?));
            break;
        };
        let args =
            [(offset + at) as u64, n as u64, u64::from(landing.key), here].map(u64::to_le_bytes);
        let call = crate::remote::on_raw(locale, id_of(GET_TO), GET_TO, &[args.as_flattened()]);
        expected.0.push((landing, Some(call)));
    }
    let mut result = Ok(());
    for (landing, call) in &mut expected.0 {
        let call = call.take().expect("each call is awaited once");
        let answered = call.join().and_then(|()| {
            // The answer comes after the bytes landed, or were refused.
            if landing.state() == crate::comm::transport::LANDED {
                Ok(())
            } else {
                Err(Error::new(
                    ErrorKind::Locale,
                    format!("cantus::pgas: locale {locale} answered a get without its bytes"),
                ))
            }
        });
        result = result.and(answered);
    }
    // Every landing ended: nothing writes `dst` any more.
    drop(expected);
    if let Some((at, gets)) = copied {
        result = result.and(gets.finish(&mut dst[at..]));
    }
    result
}

/// Applies `op` to the word at `offset` of `locale`'s segment, there.
pub(crate) fn atomic(
    locale: usize,
    offset: usize,
    op: AtomicOp,
) -> Result<Result<u64, u64>, Error> {
    let (code, a, b) = match op {
        AtomicOp::Load => (0, 0, 0),
        AtomicOp::Store(v) => (1, v, 0),
        AtomicOp::FetchAdd(v) => (2, v, 0),
        AtomicOp::Swap(v) => (3, v, 0),
        AtomicOp::CompareExchange(c, n) => (4, c, n),
    };
    let call = AtomicCall {
        offset: offset as u64,
        op: code,
        a,
        b,
    };
    let [value, failed] = crate::remote::on_pod(locale, call).join()?;
    Ok(if failed == 0 { Ok(value) } else { Err(value) })
}

/// Sends a parcel (`key`, of group `epoch`) to `locale`, detached.
pub(crate) fn send_parcel(locale: usize, epoch: u64, key: Key, bytes: &[u8]) -> Result<(), Error> {
    let kind = u64::from(key.phase) | u64::from(key.from) << 32;
    let head = [epoch, key.seq, kind].map(u64::to_le_bytes);
    crate::remote::begin_on_raw(locale, id_of(PARCEL), &[head.as_flattened(), bytes])
}

/// Asks locale 0 for the group word: the new epoch, or `None` if a group
/// runs.
pub(crate) fn claim() -> Result<Option<u64>, Error> {
    let [ok, epoch] = crate::remote::on_pod(0, GroupClaim { unused: 0 }).join()?;
    Ok((ok == 1).then_some(epoch))
}

/// Starts group `epoch` of handler `id` in `locale`'s post; the handle is
/// its acknowledgement.
pub(crate) fn begin(locale: usize, epoch: u64, id: u64) -> crate::remote::RemoteHandle<u64> {
    crate::remote::on_pod(locale, GroupBegin { epoch, id })
}

/// Tells `locale` that `who`'s body of group `epoch` ended; the handle is
/// the acknowledgement.
pub(crate) fn ended(
    locale: usize,
    epoch: u64,
    who: usize,
    ended: Ended,
) -> crate::remote::RemoteHandle<u64> {
    let call = BodyEnded {
        epoch,
        locale: who as u64,
        done: ended.done,
        panicked: u64::from(ended.panicked),
    };
    crate::remote::on_pod(locale, call)
}

/// Ends the group on locale 0: the locale whose body panicked first.
pub(crate) fn end() -> Result<Option<usize>, Error> {
    let p = crate::remote::on_pod(0, GroupEnd { unused: 0 }).join()?;
    Ok((p as usize).checked_sub(1))
}
