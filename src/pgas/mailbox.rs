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

use super::memory::wait_until;
use super::space::{Space, space};
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

/// Bytes before a message's data: the group's epoch, the tag, and a
/// word of the sender (bits 0-31) and the channel (32-39).
const HEAD: usize = 24;

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

#[derive(Default)]
struct Boxes {
    /// The latest epoch whose body started here: messages of earlier
    /// epochs are dropped.
    latest: u64,
    queues: HashMap<Key, VecDeque<Vec<u8>>>,
    /// Messages filed, by (epoch, sender), and sent, by (epoch,
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

fn file(key: Key, bytes: Vec<u8>) {
    let mut b = BOXES.lock().unwrap();
    if key.0 >= b.latest {
        b.queues.entry(key).or_default().push_back(bytes);
        *b.received.entry((key.0, key.1)).or_default() += 1;
        drop(b);
        arrived();
    }
}

fn word(args: &[u8], at: usize) -> Option<u64> {
    Some(u64::from_le_bytes(args.get(at..at + 8)?.try_into().ok()?))
}

fn serve_message(args: &[u8], _: &mut Vec<u8>) -> Outcome {
    let (Some(epoch), Some(tag), Some(who)) = (word(args, 0), word(args, 8), word(args, 16)) else {
        return Outcome::Rejected(format!("a {}-byte body message is too short", args.len()));
    };
    file(
        (epoch, who as u32, (who >> 32) as u8, tag),
        args[HEAD..].to_vec(),
    );
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
    let answer = crate::remote::on_raw(from, id_of(STATUS), STATUS, args.as_flattened())
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

/// Sends `parts` (one after another, as one message) to `to`'s body of
/// group `epoch` on `channel` with `tag`; to this locale itself, files
/// them at once.
pub(crate) fn send_parts(
    s: &Space,
    epoch: u64,
    to: usize,
    channel: Channel,
    tag: u64,
    parts: &[&[u8]],
) -> Result<(), Error> {
    if to == s.here {
        file((epoch, to as u32, channel as u8, tag), parts.concat());
        return Ok(());
    }
    let who = s.here as u64 | (channel as u64) << 32;
    let head = [epoch, tag, who].map(u64::to_le_bytes);
    let mut args = Vec::with_capacity(parts.len() + 1);
    args.push(head.as_flattened());
    args.extend_from_slice(parts);
    // Counted before it leaves: a receiver that asks sees it as sent, and
    // waits for it, whichever comes first.
    *BOXES
        .lock()
        .unwrap()
        .sent
        .entry((epoch, to as u32))
        .or_default() += 1;
    crate::remote::begin_on_raw(to, id_of(MESSAGE), &args)
}

/// Why a receive can never complete: the sender's body of the group
/// ended (by a panic or not) before it sent the message.
pub(crate) struct Gone {
    pub(crate) locale: usize,
    pub(crate) panicked: bool,
}

/// Waits for the oldest message from `from` on `channel` with `tag` in
/// group `epoch` and hands it to `take`, which may refuse it (`Err`: the
/// message stays where it was); `Err(Gone)` once `from`'s body ended
/// with no such message left (asked of `from` after [`FIRST_ASK`] of
/// waiting, then at doubling intervals up to [`MAX_ASK`]). `here` is
/// this locale.
pub(crate) fn take<R>(
    here: usize,
    epoch: u64,
    from: usize,
    channel: Channel,
    tag: u64,
    mut take: impl FnMut(&[u8]) -> Result<R, Error>,
) -> Result<Result<R, Error>, Gone> {
    let key = (epoch, from as u32, channel as u8, tag);
    let mut seen = None;
    let mut got = None;
    let mut ask_in = FIRST_ASK;
    let mut ask_at = Instant::now() + ask_in;
    wait_until(
        || {
            // Acquire: pairs with `arrived`'s Release.
            let now = ARRIVALS.load(Ordering::Acquire);
            if seen != Some(now) {
                seen = Some(now);
                let mut b = BOXES.lock().unwrap();
                if let Some(q) = b.queues.get_mut(&key)
                    && let Some(bytes) = q.front()
                {
                    let r = take(bytes);
                    if r.is_ok() {
                        q.pop_front();
                        if q.is_empty() {
                            b.queues.remove(&key);
                        }
                    }
                    got = Some(Ok(r));
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
    got.expect("wait_until returns once a message came or its sender is gone")
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
    send_parts(
        &s,
        epoch,
        to,
        Channel::User,
        tag,
        &[bytemuck::cast_slice(data)],
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
    received("pgas::recv", from, tag, |bytes| {
        let n = whole::<T>(bytes, from, tag)?;
        let mut v = vec![T::zeroed(); n];
        crate::copy::copy(bytemuck::cast_slice_mut(&mut v), bytes);
        Ok(v)
    })
}

/// [`recv`] into `buf`: returns how many elements the message had (the
/// rest of `buf` is left as it was), without allocating.
///
/// # Errors
///
/// As [`recv`]; [`ErrorKind::Message`] also if the message has more
/// elements than `buf` holds (it stays to be received).
pub fn recv_into<T: Pod>(from: usize, tag: u64, buf: &mut [T]) -> Result<usize, Error> {
    received("pgas::recv_into", from, tag, |bytes| {
        let n = whole::<T>(bytes, from, tag)?;
        if n > buf.len() {
            return Err(Error::new(
                ErrorKind::Message,
                format!(
                    "cantus::pgas::recv_into: the message from locale {from} with tag {tag} has \
                     {n} elements, more than the {} of the buffer",
                    buf.len()
                ),
            ));
        }
        crate::copy::copy(bytemuck::cast_slice_mut(&mut buf[..n]), bytes);
        Ok(n)
    })
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

fn received<R>(
    call: &str,
    from: usize,
    tag: u64,
    read: impl FnMut(&[u8]) -> Result<R, Error>,
) -> Result<R, Error> {
    let (s, epoch) = in_body(call)?;
    check_locale(&s, call, from)?;
    match take(s.here, epoch, from, Channel::User, tag, read) {
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
