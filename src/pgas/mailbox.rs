//! Messages between the SPMD bodies of a group, addressed by locale
//! number: [`send`], [`recv`], [`recv_into`]. A body sends plain data to
//! locale `l`'s body, with a tag; `l`'s body receives the messages of
//! one (sender, tag) in the order sent, as a `Vec<T>` (aligned for `T`)
//! or into a slice of its own. No task id is published by hand: the
//! group's epoch and the locale numbers say where a message goes.
//!
//! A message is a detached inline remote call (`Message`): it runs in
//! the receiving locale's poll and files its bytes under (epoch, sender,
//! channel, tag). A message that comes before its receiver's body
//! started waits for it; a message of an earlier group is dropped. A
//! receive that has waited a while asks the sender (`Status`, inline)
//! whether its body ended and how many messages it sent here; once it
//! ended and all of them arrived, a message that is not there never
//! will be, and the receive ends with an error naming the locale instead
//! of waiting forever. Nothing is sent when a body ends, so an SPMD
//! group that sends no message pays nothing. The collectives of
//! `exchange.rs` travel here too, on a channel of their own.
//! `README.md` beside this file, "Messages between bodies".

use super::memory::wait_promptly;
use super::space::{Space, space};
use crate::comm::collective::AlignedBytes;
use crate::error::{Error, ErrorKind, Locales};
use crate::remote::Handler;
use crate::remote::handlers::{Outcome, id_of};
use bytemuck::Pod;
use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, LazyLock, Mutex};
use std::time::{Duration, Instant};

const MESSAGE: &str = "cantus::pgas::mailbox::Message";
const STATUS: &str = "cantus::pgas::mailbox::Status";

inventory::submit! { Handler::raw(MESSAGE, serve_message, true) }
inventory::submit! { Handler::raw(STATUS, serve_status, true) }

/// The words before a piece's data: the group's epoch, the tag, the
/// sender (bits 0-31) and channel (32-39), the message's number among
/// those this sender sent this receiver in the epoch, its length, this
/// piece's offset in it, the alignment of its elements, and three words
/// of signature (an exchange's; zero for a program's message).
const HEAD_WORDS: usize = 10;
const HEAD: usize = 8 * HEAD_WORDS;

/// How long a receive waits before it first asks the sender whether its
/// body ended, and the longest it waits between two questions (the
/// pause doubles).
const FIRST_ASK: Duration = Duration::from_millis(2);
const MAX_ASK: Duration = Duration::from_millis(100);

/// Which messages a receive takes: the program's own ([`Channel::User`],
/// tags its own) or a collective's ([`Channel::Collective`], the tag
/// its number in the group).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum Channel {
    User = 0,
    Collective = 1,
}

/// Where a message is filed: (epoch, sender, channel, tag).
type Key = (u64, u32, u8, u64);

/// A message's bytes, in memory allocated with the alignment of the
/// sender's elements, so that a receiver of that type takes it as its
/// `Vec<T>` without a copy.
pub(crate) struct Buffer {
    /// The allocation (its pointer, length and alignment).
    bytes: AlignedBytes,
    /// Bytes written from the start (a message is whole at its length).
    written: usize,
}

impl Buffer {
    /// Room for `len` bytes aligned to `align` (a power of two; checked
    /// by the caller), not yet written: `written` counts what was.
    /// `None` if no such allocation can be made (a length from a bad
    /// message: refused, not an abort).
    fn new(len: usize, align: usize) -> Option<Buffer> {
        Some(Buffer {
            bytes: AlignedBytes::for_receiving(len, align)?,
            written: 0,
        })
    }

    /// The bytes a transport's exchange received (whole).
    pub(crate) fn adopt(bytes: AlignedBytes) -> Buffer {
        let written = bytes.len();
        Buffer { bytes, written }
    }

    /// A copy of `bytes` aligned to `align`.
    pub(crate) fn from_bytes(bytes: &[u8], align: usize) -> Option<Buffer> {
        let mut b = Buffer::new(bytes.len(), align)?;
        b.append(bytes);
        Some(b)
    }

    /// Writes `bytes` next (pieces come in order, each once).
    ///
    /// # Panics
    ///
    /// If they pass the end (the caller checked they do not).
    fn append(&mut self, bytes: &[u8]) {
        assert!(
            bytes.len() <= self.bytes.len() - self.written,
            "a piece past its message's end"
        );
        // SAFETY: `written + bytes.len() <= len` bytes of our allocation;
        // `bytes` is a frame's, elsewhere. Written through the pointer:
        // no reference to the unwritten part is ever made.
        unsafe {
            std::ptr::copy_nonoverlapping(
                bytes.as_ptr(),
                self.bytes.as_mut_ptr().add(self.written),
                bytes.len(),
            )
        };
        self.written += bytes.len();
    }

    /// Whether every byte was written (then `bytes` may be read).
    fn is_whole(&self) -> bool {
        self.written == self.bytes.len()
    }

    pub(crate) fn bytes(&self) -> &[u8] {
        assert!(self.is_whole(), "a message is read only once whole");
        // SAFETY: every byte of the allocation was written (checked).
        unsafe { self.bytes.filled() }
    }

    /// The bytes as a `Vec<T>`: the allocation itself if it was made
    /// for `T` (its alignment, a whole number of `T`), else a copy.
    /// `None` if they are not a whole number of `T`.
    pub(crate) fn into_vec<T: Pod>(self) -> Option<Vec<T>> {
        let size = size_of::<T>();
        let len = self.bytes.len();
        if size == 0 || len % size != 0 {
            return None;
        }
        let n = len / size;
        if self.bytes.align() != align_of::<T>() || n == 0 {
            let mut v = vec![T::zeroed(); n];
            crate::copy::copy(bytemuck::cast_slice_mut(&mut v), self.bytes());
            return Some(v);
        }
        assert!(self.is_whole(), "a message is taken only once whole");
        let (ptr, _, _) = self.bytes.into_raw();
        // SAFETY: the allocation was made by the global allocator with
        // the layout (n * size_of::<T>(), align_of::<T>()), which is
        // `Layout::array::<T>(n)`; its bytes are all written and any
        // bytes are a valid `T` (Pod); ownership passes to the Vec.
        Some(unsafe { Vec::from_raw_parts(ptr.as_ptr().cast::<T>(), n, n) })
    }
}

/// A message received whole.
pub(crate) struct Message {
    /// Its signature (an exchange's; zero for a program's message).
    pub(crate) signature: [u64; 3],
    pub(crate) buffer: Buffer,
}

/// A message whose pieces are arriving (in order: one sender's pieces
/// of one message travel on one network of one pair, one after another).
struct Partial {
    key: Key,
    signature: [u64; 3],
    buffer: Buffer,
}

#[derive(Default)]
struct Boxes {
    /// The latest epoch whose body started here: messages of earlier
    /// epochs are dropped.
    latest: u64,
    queues: HashMap<Key, VecDeque<Message>>,
    /// Messages arriving in pieces, by (epoch, sender, number).
    partial: HashMap<(u64, u32, u64), Partial>,
    /// Messages filed whole, by (epoch, sender), and sent, by (epoch,
    /// receiver): a sender's count and a receiver's agree once all
    /// arrived.
    received: HashMap<(u64, u32), u64>,
    sent: HashMap<(u64, u32), u64>,
    /// The latest body of this locale that ended: (epoch, panicked).
    ended: Option<(u64, bool)>,
}

static BOXES: LazyLock<Mutex<Boxes>> = LazyLock::new(Mutex::default);
/// Bumped after anything was filed: a waiter looks under the lock only
/// when it changed.
static ARRIVALS: AtomicU64 = AtomicU64::new(0);

fn arrived() {
    // Release: pairs with the Acquire load in `take` (the lock orders the
    // message itself; this only says when to look).
    ARRIVALS.fetch_add(1, Ordering::Release);
}

impl Boxes {
    /// Files a whole message (of a current epoch).
    fn file(&mut self, key: Key, message: Message) {
        self.queues.entry(key).or_default().push_back(message);
        *self.received.entry((key.0, key.1)).or_default() += 1;
    }
}

/// Files a copy of `data`, a whole message, unless its group ended here;
/// `None` if there is no memory for it.
fn file_copy(key: Key, signature: [u64; 3], data: &[u8], align: usize) -> Option<()> {
    let buffer = Buffer::from_bytes(data, align)?;
    let mut b = BOXES.lock().unwrap();
    if key.0 >= b.latest {
        b.file(key, Message { signature, buffer });
    }
    drop(b);
    arrived();
    Some(())
}

fn word(args: &[u8], at: usize) -> Option<u64> {
    Some(u64::from_le_bytes(args.get(at..at + 8)?.try_into().ok()?))
}

fn serve_message(args: &[u8], _: &mut Vec<u8>) -> Outcome {
    let mut w = [0u64; HEAD_WORDS];
    for (i, v) in w.iter_mut().enumerate() {
        match word(args, 8 * i) {
            Some(x) => *v = x,
            None => {
                return Outcome::Rejected(format!(
                    "a {}-byte body message is too short",
                    args.len()
                ));
            }
        }
    }
    let [epoch, tag, who, number, len, offset, align, s0, s1, s2] = w;
    let data = &args[HEAD..];
    let key = (epoch, who as u32, (who >> 32) as u8, tag);
    let (len, offset) = (len as usize, offset as usize);
    if !align.is_power_of_two()
        || align > 4096
        || offset.checked_add(data.len()).is_none_or(|end| end > len)
    {
        return Outcome::Rejected(format!(
            "a body message piece of {} bytes at {offset} of {len}, aligned to {align}, does \
             not fit",
            data.len()
        ));
    }
    let signature = [s0, s1, s2];
    let no_room = || {
        Outcome::Rejected(format!(
            "no memory for a {len}-byte body message from locale {}",
            key.1
        ))
    };
    if offset == 0 && data.len() == len {
        return file_copy(key, signature, data, align as usize)
            .map_or_else(no_room, |()| Outcome::Done);
    }
    let mut b = BOXES.lock().unwrap();
    if epoch < b.latest {
        return Outcome::Done; // of a group that ended
    }
    let at = (epoch, key.1, number);
    let p = match b.partial.entry(at) {
        std::collections::hash_map::Entry::Occupied(e) => e.into_mut(),
        std::collections::hash_map::Entry::Vacant(e) => {
            let Some(buffer) = Buffer::new(len, align as usize) else {
                return no_room();
            };
            e.insert(Partial {
                key,
                signature,
                buffer,
            })
        }
    };
    if p.buffer.bytes.len() != len || p.key != key || offset != p.buffer.written {
        let why = format!(
            "a piece of body message {number} from locale {} at {offset} disagrees with \
             the {} bytes of it before",
            key.1, p.buffer.written
        );
        b.partial.remove(&at);
        return Outcome::Rejected(why);
    }
    p.buffer.append(data);
    if !p.buffer.is_whole() {
        return Outcome::Done;
    }
    let p = b.partial.remove(&at).expect("just filled");
    b.file(
        p.key,
        Message {
            signature: p.signature,
            buffer: p.buffer,
        },
    );
    drop(b);
    arrived();
    Outcome::Done
}

/// Answers a receiver that waits: whether this locale's body of the
/// epoch asked ended, by a panic, and how many messages it sent the
/// asker in that epoch (three words).
fn serve_status(args: &[u8], out: &mut Vec<u8>) -> Outcome {
    let (Some(epoch), Some(asker)) = (word(args, 0), word(args, 8)) else {
        return Outcome::Rejected(format!("a {}-byte status call is too short", args.len()));
    };
    let b = BOXES.lock().unwrap();
    let (ended, panicked) = match b.ended {
        Some((e, p)) if e == epoch => (1u64, u64::from(p)),
        _ => (0, 0),
    };
    let sent = b.sent.get(&(epoch, asker as u32)).copied().unwrap_or(0);
    for w in [ended, panicked, sent] {
        out.extend_from_slice(&w.to_le_bytes());
    }
    Outcome::Done
}

/// This locale's body of group `epoch` starts: what earlier groups left
/// is dropped.
pub(crate) fn body_starts(epoch: u64) {
    let mut b = BOXES.lock().unwrap();
    b.latest = b.latest.max(epoch);
    let latest = b.latest;
    b.queues.retain(|k, _| k.0 >= latest);
    b.partial.retain(|k, _| k.0 >= latest);
    b.received.retain(|k, _| k.0 >= latest);
    b.sent.retain(|k, _| k.0 >= latest);
}

/// This locale's body of group `epoch` ended (by a panic or not): what
/// a receiver that waits for it is told when it asks (after everything
/// the body sent, which the count says). Called after the memory
/// recorded the end (`Memory::body_ended`), so a panic of this body
/// poisons the group before any panic it causes elsewhere can.
pub(crate) fn body_ends(epoch: Option<u64>, panicked: bool) {
    if let Some(epoch) = epoch {
        BOXES.lock().unwrap().ended = Some((epoch, panicked));
    }
}

/// Asks `from` whether its body of `epoch` ended and, if it did and
/// every message it sent here was filed, whether by a panic.
fn gone(here: usize, epoch: u64, from: usize) -> Option<bool> {
    let args = [epoch, here as u64].map(u64::to_le_bytes);
    let answer = crate::remote::on_raw(from, id_of(STATUS), STATUS, &[args.as_flattened()])
        .join_with(|r| (word(r, 0), word(r, 8), word(r, 16)));
    let (Some(ended), Some(panicked), Some(sent)) = answer.ok()? else {
        return None;
    };
    let received = BOXES
        .lock()
        .unwrap()
        .received
        .get(&(epoch, from as u32))
        .copied()
        .unwrap_or(0);
    (ended == 1 && received >= sent).then_some(panicked == 1)
}

/// The space and the running group's epoch, for a call made inside this
/// locale's SPMD body (else the error naming `call`).
pub(crate) fn in_body(call: &str) -> Result<(Arc<Space>, u64), Error> {
    let s = space(call)?;
    // Relaxed: as in `Collective::enter`.
    let group = s
        .in_body
        .load(Ordering::Relaxed)
        .then(|| s.memory.running_group())
        .flatten();
    match group {
        Some((_, epoch)) => Ok((s, epoch)),
        None => Err(Error::new(
            ErrorKind::Locale,
            format!(
                "cantus::{call}: called outside an SPMD body (locale {}); messages by locale \
                 number go between the bodies that pgas::spmd (or cantus::coforall_locales) runs \
                 on every locale",
                s.here
            ),
        )),
    }
}

fn check_locale(s: &Space, call: &str, l: usize) -> Result<(), Error> {
    if l < s.locales {
        return Ok(());
    }
    Err(Error::new(
        ErrorKind::Locale,
        format!(
            "cantus::{call}: locale {l} does not exist (the job has {})",
            Locales(s.locales)
        ),
    ))
}

/// Sends `data` (elements aligned to `align`) to `to`'s body of group
/// `epoch` on `channel` with `tag` and `signature`: in pieces that each
/// fit a frame (the engine never cuts them into fragments, so the
/// receiver copies each once, into the message's buffer). To this
/// locale itself, files it at once.
pub(crate) fn send_message(
    s: &Space,
    epoch: u64,
    to: usize,
    (channel, tag, signature): (Channel, u64, [u64; 3]),
    data: &[u8],
    align: usize,
) -> Result<(), Error> {
    if to == s.here {
        let key = (epoch, to as u32, channel as u8, tag);
        return file_copy(key, signature, data, align).ok_or_else(|| {
            Error::new(
                ErrorKind::Os,
                format!("cantus::pgas: no memory for a {}-byte message", data.len()),
            )
        });
    }
    let number = {
        // Counted before it leaves: a receiver that asks sees it as
        // sent, and waits for it, whichever comes first.
        let mut b = BOXES.lock().unwrap();
        let sent = b.sent.entry((epoch, to as u32)).or_default();
        *sent += 1;
        *sent
    };
    let who = s.here as u64 | (channel as u64) << 32;
    let piece = crate::remote::frame_payload()
        .map_or(usize::MAX, |p| p.saturating_sub(HEAD))
        .max(4096);
    let mut offset = 0;
    loop {
        let end = (offset + piece).min(data.len());
        let head = [
            epoch,
            tag,
            who,
            number,
            data.len() as u64,
            offset as u64,
            align as u64,
            signature[0],
            signature[1],
            signature[2],
        ]
        .map(u64::to_le_bytes);
        let args = [head.as_flattened(), &data[offset..end]];
        crate::remote::begin_on_raw(to, id_of(MESSAGE), &args)?;
        offset = end;
        if offset >= data.len() {
            return Ok(());
        }
    }
}

/// Why a receive can never complete: the sender's body of the group
/// ended (by a panic or not) before it sent the message.
pub(crate) struct Gone {
    pub(crate) locale: usize,
    pub(crate) panicked: bool,
}

/// Waits for the oldest message from `from` on `channel` with `tag` in
/// group `epoch` and returns it once `accept` takes it (`Err`: the
/// message stays where it was, and the error is returned); `Err(Gone)`
/// once `from`'s body ended with no such message left (asked of `from`
/// after [`FIRST_ASK`] of waiting, then at doubling intervals up to
/// [`MAX_ASK`]). `here` is this locale.
pub(crate) fn take(
    here: usize,
    epoch: u64,
    from: usize,
    (channel, tag): (Channel, u64),
    mut accept: impl FnMut(&Message) -> Result<(), Error>,
) -> Result<Result<Message, Error>, Gone> {
    let key = (epoch, from as u32, channel as u8, tag);
    let mut seen = None;
    let mut got = None;
    let mut ask_in = FIRST_ASK;
    let mut ask_at = Instant::now() + ask_in;
    wait_promptly(
        || {
            // Acquire: pairs with `arrived`'s Release.
            let now = ARRIVALS.load(Ordering::Acquire);
            if seen != Some(now) {
                seen = Some(now);
                let mut b = BOXES.lock().unwrap();
                if let Some(q) = b.queues.get_mut(&key)
                    && let Some(m) = q.front()
                {
                    got = Some(Ok(match accept(m) {
                        Ok(()) => {
                            let m = q.pop_front().expect("looked at");
                            if q.is_empty() {
                                b.queues.remove(&key);
                            }
                            Ok(m)
                        }
                        Err(e) => Err(e),
                    }));
                    return true;
                }
            }
            if from != here && Instant::now() >= ask_at {
                if let Some(panicked) = gone(here, epoch, from) {
                    // Everything it sent was filed: look once more.
                    let b = BOXES.lock().unwrap();
                    if b.queues.get(&key).is_none_or(VecDeque::is_empty) {
                        got = Some(Err(Gone {
                            locale: from,
                            panicked,
                        }));
                        return true;
                    }
                    seen = None;
                }
                ask_in = (ask_in * 2).min(MAX_ASK);
                ask_at = Instant::now() + ask_in;
            }
            false
        },
        crate::remote::poll_once,
    );
    got.expect("wait_promptly returns once a message came or its sender is gone")
}

/// Sends `data` to locale `to`'s SPMD body, with `tag`: `to`'s body
/// receives it with [`recv`] or [`recv_into`] (`from` this locale, the
/// same `tag`). Messages from one locale to one locale with one tag are
/// received in the order sent. Returns once the bytes are on their way
/// (copied out of `data`); a message to this locale itself is filed at
/// once.
///
/// Call it from the SPMD body (or a task it started), on any locale, as
/// often as needed: unlike a collective, the other locales need not
/// call it. A message nobody receives is dropped when the next SPMD
/// group starts.
///
/// ```
/// use cantus::pgas;
///
/// cantus::remote_fn! {
///     /// Every locale passes a vector to its right neighbour.
///     fn pass_right(len: usize) -> Vec<f64> {
///         let (me, n) = (cantus::here(), cantus::num_locales());
///         let row: Vec<f64> = (0..len).map(|k| (me * 1000 + k) as f64).collect();
///         pgas::send((me + 1) % n, 7, &row).unwrap();
///         pgas::recv::<f64>((me + n - 1) % n, 7).unwrap()
///     }
/// }
///
/// let got = cantus::run(|| pgas::spmd(pass_right(4)).unwrap()).unwrap();
/// let n = got.len();
/// for (me, row) in got.iter().enumerate() {
///     assert_eq!(row[3], (((me + n - 1) % n) * 1000 + 3) as f64);
/// }
/// ```
///
/// # Errors
///
/// [`ErrorKind::Locale`] if called outside an SPMD body or `to` is not
/// a locale of the job; the transport's error if it could not be sent
/// (the locale is gone); [`ErrorKind::Message`] if it is larger than a
/// message can be (4 GiB).
pub fn send<T: Pod>(to: usize, tag: u64, data: &[T]) -> Result<(), Error> {
    let (s, epoch) = in_body("pgas::send")?;
    check_locale(&s, "pgas::send", to)?;
    send_message(
        &s,
        epoch,
        to,
        (Channel::User, tag, [0; 3]),
        bytemuck::cast_slice(data),
        align_of::<T>(),
    )
}

/// Waits for the next message from locale `from`'s SPMD body with `tag`
/// ([`send`]) and returns its elements (a task runs others meanwhile).
///
/// # Errors
///
/// [`ErrorKind::Locale`] if called outside an SPMD body, if `from` is
/// not a locale, or if `from`'s body ended (returned or panicked) without
/// sending such a message (the message says which); [`ErrorKind::Message`]
/// if the message is not a whole number of `T` (it stays to be received
/// as another type).
pub fn recv<T: Pod>(from: usize, tag: u64) -> Result<Vec<T>, Error> {
    let m = received("pgas::recv", from, tag, |m| {
        whole::<T>(m.buffer.bytes(), from, tag).map(drop)
    })?;
    Ok(m.buffer.into_vec().expect("a whole number of T (checked)"))
}

/// [`recv`] into `buf`: returns how many elements the message had (the
/// rest of `buf` is left as it was).
///
/// # Errors
///
/// As [`recv`]; [`ErrorKind::Message`] also if the message has more
/// elements than `buf` holds (it stays to be received).
pub fn recv_into<T: Pod>(from: usize, tag: u64, buf: &mut [T]) -> Result<usize, Error> {
    let room = buf.len();
    let m = received("pgas::recv_into", from, tag, |m| {
        let n = whole::<T>(m.buffer.bytes(), from, tag)?;
        if n > room {
            return Err(Error::new(
                ErrorKind::Message,
                format!(
                    "cantus::pgas::recv_into: the message from locale {from} with tag {tag} has \
                     {n} elements, more than the {room} of the buffer"
                ),
            ));
        }
        Ok(())
    })?;
    let bytes = m.buffer.bytes();
    let n = bytes.len() / size_of::<T>();
    crate::copy::copy(bytemuck::cast_slice_mut(&mut buf[..n]), bytes);
    Ok(n)
}

/// How many `T` `bytes` hold, or the error if not a whole number.
fn whole<T: Pod>(bytes: &[u8], from: usize, tag: u64) -> Result<usize, Error> {
    let size = size_of::<T>();
    if size == 0 || bytes.len() % size != 0 {
        return Err(Error::new(
            ErrorKind::Message,
            format!(
                "cantus::pgas: the {}-byte message from locale {from} with tag {tag} is not a \
                 whole number of {} ({size} bytes each)",
                bytes.len(),
                std::any::type_name::<T>()
            ),
        ));
    }
    Ok(bytes.len() / size)
}

fn received(
    call: &str,
    from: usize,
    tag: u64,
    accept: impl FnMut(&Message) -> Result<(), Error>,
) -> Result<Message, Error> {
    let (s, epoch) = in_body(call)?;
    check_locale(&s, call, from)?;
    match take(s.here, epoch, from, (Channel::User, tag), accept) {
        Ok(r) => r,
        Err(Gone { locale, panicked }) => Err(Error::new(
            ErrorKind::Locale,
            format!(
                "cantus::{call}: locale {}'s SPMD body waits for a message from locale {locale} \
                 with tag {tag}, but that body {} without sending it",
                s.here,
                if panicked { "panicked" } else { "returned" }
            ),
        )),
    }
}

/// The mailbox of a runtime that stopped is emptied (a test process
/// starts several).
pub(crate) fn clear() {
    *BOXES.lock().unwrap() = Boxes::default();
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A piece's arguments as `send_message` frames them.
    fn piece(head: [u64; HEAD_WORDS], data: &[u8]) -> Vec<u8> {
        let mut v: Vec<u8> = head.iter().flat_map(|w| w.to_le_bytes()).collect();
        v.extend_from_slice(data);
        v
    }

    fn serve(args: &[u8]) -> Outcome {
        serve_message(args, &mut Vec::new())
    }

    #[test]
    fn a_buffer_made_for_t_becomes_its_vec_without_a_copy() {
        let words = [1u64, 2, 3];
        let b = Buffer::from_bytes(bytemuck::cast_slice(&words), 8).unwrap();
        let at = b.bytes().as_ptr();
        let v: Vec<u64> = b.into_vec().unwrap();
        assert_eq!(v, words);
        assert_eq!(v.as_ptr().cast::<u8>(), at, "the allocation itself");
        // Another alignment (u8s received as u64s) is copied; a length
        // that is not whole is refused.
        let b = Buffer::from_bytes(bytemuck::cast_slice(&words), 1).unwrap();
        assert_eq!(b.into_vec::<u64>().unwrap(), words);
        let b = Buffer::from_bytes(&[1, 2, 3], 1).unwrap();
        assert!(b.into_vec::<u16>().is_none());
        assert!(
            Buffer::new(usize::MAX - 8, 8).is_none(),
            "refused, no abort"
        );
        assert_eq!(Buffer::new(0, 16).unwrap().into_vec::<u128>().unwrap(), []);
    }

    #[test]
    fn pieces_assemble_in_order_and_bad_ones_are_refused() {
        // An epoch no other test uses (the boxes are the process's).
        let (epoch, from, tag) = (1 << 40, 7u64, 99);
        let head = |number: u64, len: u64, offset: u64, align: u64| {
            [epoch, tag, from, number, len, offset, align, 0, 0, 0]
        };
        assert!(matches!(serve(&[0; 16]), Outcome::Rejected(_)));
        for bad in [head(1, 4, 2, 8), head(1, 4, 0, 3), head(1, 4, 0, 8192)] {
            assert!(
                matches!(serve(&piece(bad, &[1, 2, 3])), Outcome::Rejected(_)),
                "{bad:?}"
            );
        }
        let done = |h, d: &[u8]| matches!(serve(&piece(h, d)), Outcome::Done);
        assert!(
            !done(head(2, 16, 8, 8), &[2; 8]),
            "a piece before its first"
        );
        assert!(done(head(3, 16, 0, 8), &[1; 8]));
        assert!(
            !done(head(3, 24, 8, 8), &[2; 8]),
            "a piece whose message length disagrees (the message is dropped)"
        );
        assert!(done(head(4, 16, 0, 8), &[1; 8]));
        assert!(done(head(4, 16, 8, 8), &[2; 8]));
        let key = (epoch, from as u32, Channel::User as u8, tag);
        let m = BOXES
            .lock()
            .unwrap()
            .queues
            .get_mut(&key)
            .and_then(VecDeque::pop_front)
            .expect("filed once whole");
        assert_eq!(m.buffer.bytes(), [[1; 8], [2; 8]].concat());
        assert_eq!(
            m.buffer.into_vec::<u64>().unwrap(),
            [0x0101_0101_0101_0101, 0x0202_0202_0202_0202]
        );
    }
}
