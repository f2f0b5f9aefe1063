//! Talking tasks: point-to-point messages between tasks named by global
//! ids, after Chant (seed 004: Haines, Cronk, Mehrotra, "On the Design of
//! Chant: A Talking Threads Package", ICASE 94-25, section 3.1).
//!
//! - [`me`] is the calling task's [`TaskId`]: its locale and its task id
//!   there ([`query::current_task_id`](crate::query::current_task_id)).
//! - [`send`] (and [`send_value`]) sends bytes with a tag to a task;
//!   [`window`] sends several that may be in flight together (MPI's
//!   `MPI_Isend`s before an `MPI_Waitall`);
//!   [`recv`] waits for a message matching a [`Source`] and a [`Tag`]
//!   (either may be `Any`); [`irecv`] posts the receive and returns a
//!   [`RecvHandle`] to [`test`](RecvHandle::test),
//!   [`try_take`](RecvHandle::try_take) or [`wait`](RecvHandle::wait) on
//!   (Chant's `irecv`, `msgtest`, `msgwait`).
//! - [`set_policy`] picks who polls for a waiting receive ([`Policy`],
//!   Chant's section 4.2).
//!
//! ```
//! use cantus::chant::{self, Source, Tag};
//! let (from, text) = cantus::run(|| {
//!     let parent = chant::me();
//!     cantus::begin(move || chant::send(parent, 7, b"hello").unwrap());
//!     let m = chant::recv(Source::Any, Tag::Is(7));
//!     (m.source(), String::from_utf8(m.into_bytes()).unwrap())
//! })
//! .unwrap();
//! assert_eq!(text, "hello");
//! assert_eq!(from.locale, 0);
//! ```
//!
//! # Rules
//!
//! - **Only tasks talk.** Every call here needs a task ([`me`] panics on an
//!   outside thread, such as `main` outside `block_on`): a message's source
//!   is a task, and a receive suspends a task, never a worker.
//! - **Order.** Messages from one task to one task with one tag are
//!   received in the order they were sent (local sends are delivered in the
//!   call; remote ones travel on one network of one locale pair, which the
//!   transport keeps in order). Matching is MPI's: a message goes to the
//!   oldest posted receive of its task that matches it, a receive takes the
//!   oldest queued message that matches it.
//! - **Unexpected messages** (no matching receive posted yet) wait in the
//!   destination task's mailbox, without limit. Those still there when the
//!   runtime shuts down (the task ended, or never asked) are dropped then,
//!   with a note on standard error naming each.
//! - **Unknown tasks.** A message to a task id this locale never handed out
//!   is an error: [`send`] returns it for a task of its own locale; a
//!   remote locale reports it on its standard error, naming the sending
//!   locale and task, and drops the message.
//! - **Size.** A remote message carries up to [`max_message_len`] bytes
//!   (4 GiB less the 4-byte tag); one larger than the transport's frames
//!   (half a ring, `CANTUS_RING_BYTES`) travels in fragments and arrives
//!   whole. Local messages have no limit.
//!
//! `README.md` beside this file describes the message frame and the
//! mailbox rules (how receives count as work in flight).

use super::engine::{Body, InFlight};
use super::wire::{Header, MAX_PAYLOAD, TAG_LEN};
use crate::comm::transport::{Lent, Network};
use crate::error::{Error, ErrorKind, Locales};
use crate::sched::Registry;
use crate::sync::SyncVar;
use serde::{Deserialize, Serialize};
use std::collections::hash_map::Entry;
use std::collections::{HashMap, VecDeque};
use std::fmt;
use std::hash::{BuildHasherDefault, Hasher};
use std::sync::atomic::{AtomicBool, AtomicU8, AtomicU64, Ordering};
use std::sync::{Arc, LazyLock, Mutex};

/// A task's global name: the locale it runs on and its task id there
/// (unique within that locale's runtime; never 0).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct TaskId {
    /// The locale, `0..num_locales()`.
    pub locale: usize,
    /// The task's id on that locale.
    pub task: u64,
}

impl fmt::Display for TaskId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "task {} on locale {}", self.task, self.locale)
    }
}

/// Whose messages a receive takes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Source {
    /// Any task's.
    Any,
    /// This task's only.
    Task(TaskId),
}

/// Which tags a receive takes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Tag {
    /// Any tag.
    Any,
    /// This tag only.
    Is(u32),
}

/// A received message: who sent it, its tag, its bytes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Message {
    from: TaskId,
    tag: u32,
    bytes: Bytes,
}

/// A message's bytes: a buffer of its own, or the memory the transport
/// received it into, lent: a large message over MPI, read where MPI put
/// it, or on shared memory where its sender wrote it, a block of the
/// sender's area, kept until the message is dropped (a block kept holds up
/// its area, and the sender's later large frames go in eager pieces:
/// `comm/shm/README.md`, "Rendezvous", rule L).
enum Bytes {
    Own(Vec<u8>),
    Lent(Lent, usize),
}

impl Bytes {
    fn as_slice(&self) -> &[u8] {
        match self {
            Bytes::Own(v) => v,
            Bytes::Lent(l, start) => &l[*start..],
        }
    }

    fn into_vec(self) -> Vec<u8> {
        match self {
            Bytes::Own(v) => v,
            Bytes::Lent(l, start) => crate::copy::to_vec(&l[start..]),
        }
    }
}

impl From<Vec<u8>> for Bytes {
    fn from(v: Vec<u8>) -> Bytes {
        Bytes::Own(v)
    }
}

impl Clone for Bytes {
    fn clone(&self) -> Bytes {
        Bytes::Own(self.as_slice().to_vec())
    }
}

impl PartialEq for Bytes {
    fn eq(&self, other: &Bytes) -> bool {
        self.as_slice() == other.as_slice()
    }
}

impl Eq for Bytes {}

impl fmt::Debug for Bytes {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.as_slice().fmt(f)
    }
}

impl std::ops::Deref for Bytes {
    type Target = [u8];

    fn deref(&self) -> &[u8] {
        self.as_slice()
    }
}

impl Message {
    /// The task that sent it.
    pub fn source(&self) -> TaskId {
        self.from
    }

    /// Its tag.
    pub fn tag(&self) -> u32 {
        self.tag
    }

    /// Its bytes.
    pub fn bytes(&self) -> &[u8] {
        &self.bytes
    }

    /// Its bytes, owned.
    pub fn into_bytes(self) -> Vec<u8> {
        self.bytes.into_vec()
    }

    /// Decodes a value sent with [`send_value`].
    pub fn decode<T: serde::de::DeserializeOwned>(&self) -> Result<T, Error> {
        super::codec::from_bytes(&self.bytes)
            .map_err(|e| undecodable::<T>(self.from, self.tag, self.bytes.len(), e))
    }

    /// Decodes a value sent with [`send_value`], as [`decode`](Self::decode)
    /// does, consuming the message: a large [`Bulk`](crate::Bulk) in it is
    /// read where the message arrived (a rendezvous block, or the buffer
    /// MPI received it into), without a copy
    /// ([`Bulk::is_in_place`](crate::Bulk::is_in_place)), and holds that
    /// memory until it is dropped.
    pub fn into_decoded<T: serde::de::DeserializeOwned>(self) -> Result<T, Error> {
        let (from, tag, len) = (self.from, self.tag, self.bytes.len());
        let decoded = match self.bytes {
            Bytes::Lent(frame, start) => {
                super::bulk::decode_in_place(frame, start, |b| super::codec::from_bytes(b))
            }
            Bytes::Own(v) => super::codec::from_bytes(&v),
        };
        decoded.map_err(|e| undecodable::<T>(from, tag, len, e))
    }
}

/// The error of a message that does not decode as a `T`.
fn undecodable<T>(from: TaskId, tag: u32, len: usize, e: super::codec::Error) -> Error {
    Error::new(
        ErrorKind::Message,
        format!(
            "cantus::chant: the message from {from} (tag {tag}, {len} bytes) does not decode as \
             {}: {e}",
            std::any::type_name::<T>()
        ),
    )
}

/// Who polls for a receive that must wait (Chant, section 4.2). Set per
/// locale with [`set_policy`], or for every locale of a job with
/// `CANTUS_CHANT_POLL=scheduler|task` (checked when the runtime starts,
/// with the other settings).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Policy {
    /// The waiting task blocks (as on a [`SyncVar`]); the workers' driver
    /// polls deliver the message and wake it. The default.
    SchedulerPolls,
    /// The waiting task stays ready: it polls the transport itself, then
    /// yields to the other tasks of its worker, until its message is
    /// there (Chant's "thread polls"). Never blocks the worker.
    TaskPolls,
}

/// 0: the default (`SchedulerPolls`); 1, 2: the policy.
static POLICY: AtomicU8 = AtomicU8::new(0);

/// Whether [`set_policy`] chose the policy (then the environment does
/// not change it at the next start).
static POLICY_SET: AtomicBool = AtomicBool::new(false);

/// Sets this locale's polling policy (other locales keep theirs; set it in
/// each, or use `CANTUS_CHANT_POLL`). Takes effect at the next wait, and
/// wins over `CANTUS_CHANT_POLL`.
pub fn set_policy(policy: Policy) {
    POLICY_SET.store(true, Ordering::Relaxed);
    POLICY.store(policy as u8 + 1, Ordering::Relaxed);
}

/// At a runtime's start: the policy its configuration names
/// (`CANTUS_CHANT_POLL`, validated there: `Some(true)` is `task`), unless
/// the program chose one with [`set_policy`].
pub(crate) fn configure(task_polls: Option<bool>) {
    if !POLICY_SET.load(Ordering::Relaxed) {
        let p = match task_polls {
            None => 0,
            Some(false) => Policy::SchedulerPolls as u8 + 1,
            Some(true) => Policy::TaskPolls as u8 + 1,
        };
        POLICY.store(p, Ordering::Relaxed);
    }
}

/// This locale's polling policy.
pub fn policy() -> Policy {
    if POLICY.load(Ordering::Relaxed) == Policy::TaskPolls as u8 + 1 {
        Policy::TaskPolls
    } else {
        Policy::SchedulerPolls
    }
}

/// The calling task's global id.
///
/// Panics outside a task (an outside thread has no id: run the code in a
/// task, e.g. under [`Runtime::block_on`](crate::Runtime::block_on)).
#[track_caller]
pub fn me() -> TaskId {
    match try_me() {
        Some(id) => id,
        None => {
            crate::sched::no_wait::check_task("cantus::chant::me");
            panic!(
                "cantus::chant::me: called outside a task; only tasks send and receive Chant \
                 messages (run this code in a task: cantus::run, Runtime::block_on, begin)"
            )
        }
    }
}

/// The calling task's global id, or `None` outside tasks (and in a remote
/// call declared inline, which runs in no task, whatever task's poll ran
/// it).
pub fn try_me() -> Option<TaskId> {
    if crate::sched::no_wait::inline_call().is_some() {
        return None;
    }
    crate::query::current_task_id().map(|task| TaskId {
        locale: super::here(),
        task,
    })
}

/// The longest message to another locale: a frame's payload, less the tag.
const MAX_REMOTE_MESSAGE: usize = MAX_PAYLOAD - TAG_LEN;

/// The longest message [`send`] can send to another locale (local
/// messages have no limit).
pub fn max_message_len() -> usize {
    if super::engine().is_some() {
        MAX_REMOTE_MESSAGE
    } else {
        usize::MAX
    }
}

/// Sends `bytes` with `tag` to task `to`. Returns once the message is
/// delivered (same locale) or handed to the transport (another locale);
/// while the transport has no room the caller polls and yields.
///
/// Errors: `to` never existed on this locale, a remote message is longer
/// than [`max_message_len`], or `to`'s locale is gone.
///
/// Panics outside a task, or if `to.locale` is not `0..num_locales()`.
#[track_caller]
pub fn send(to: TaskId, tag: u32, bytes: &[u8]) -> Result<(), Error> {
    send_parts(to, tag, &[bytes])
}

/// [`send`] of the concatenation of `parts`, copied once (into the
/// transport, or into the message of a task of this locale).
#[track_caller]
fn send_parts(to: TaskId, tag: u32, parts: &[&[u8]]) -> Result<(), Error> {
    // SAFETY: no frame is left in flight (`None`): the call returns once
    // the transport is done with `parts`.
    unsafe { send_parts_from(to, tag, parts, None) }
}

/// [`send_parts`], or, with `in_flight`, leaving a frame that the transport
/// sends from `parts` in flight, its flag pushed on `in_flight`
/// (`Engine::send_parts_in_flight`; [`window`]).
///
/// # Safety
///
/// With `in_flight`, `parts` stay valid and unwritten until the engine's
/// `wait_sent` returned for what this call pushed on it.
#[track_caller]
unsafe fn send_parts_from(
    to: TaskId,
    tag: u32,
    parts: &[&[u8]],
    in_flight: Option<&mut VecDeque<InFlight>>,
) -> Result<(), Error> {
    // Not from a remote call declared inline: it is no task to send from
    // (whatever task's poll runs it), and a send may wait for room.
    crate::sched::no_wait::check_task("cantus::chant::send");
    let from = me();
    // The engine looked up once for the send (an `Arc` cloned, not
    // borrowed: the send may poll, which runs handlers, and may yield):
    // a short message's send is a few hundred nanoseconds, and each
    // clone and drop two locked instructions on a line every sender
    // shares.
    let engine = super::engine();
    let n = engine.as_ref().map_or(1, |e| e.locales());
    assert!(
        to.locale < n,
        "cantus::chant::send: locale {} does not exist (the job has {})",
        to.locale,
        Locales(n)
    );
    let len: usize = parts.iter().map(|p| p.len()).sum();
    match engine.as_deref() {
        Some(e) if to.locale != e.here() => {
            let max = MAX_REMOTE_MESSAGE;
            if len > max {
                return Err(Error::new(
                    ErrorKind::Message,
                    format!(
                        "cantus::chant::send: a {len}-byte message (tag {tag}, to {to}) is longer \
                         than the {max} bytes (4 GiB less the tag) a message between locales can \
                         carry; split it"
                    ),
                ));
            }
            let header = Header::message(to.task, from.task);
            match in_flight {
                None => super::encode::with_head(&[&tag.to_le_bytes()], parts, |frame| {
                    e.send_parts(to.locale, Network::Reply, header, frame)
                }),
                // SAFETY: passed on from this function's contract.
                Some(in_flight) => unsafe {
                    e.send_parts_in_flight(
                        to.locale,
                        Network::Reply,
                        header,
                        &[&tag.to_le_bytes()],
                        parts,
                        in_flight,
                    )
                },
            }
        }
        _ => {
            if !issued(to.task) {
                return Err(Error::new(
                    ErrorKind::Message,
                    format!("cantus::chant::send: {to} never existed (sent by {from}, tag {tag})"),
                ));
            }
            deliver(
                to.task,
                Message {
                    from,
                    tag,
                    bytes: crate::copy::concat(parts).into(),
                },
            );
            Ok(())
        }
    }
}

/// Sends that may be in flight together, like MPI's `MPI_Isend`s before
/// an `MPI_Waitall`: runs `f` with a [`Window`], whose
/// [`send`](Window::send)s may return before the transport is done with
/// their bytes, and returns once it is done with all of them (also when
/// `f` panics). The bytes are borrowed for the whole call, so they cannot
/// change or go before then.
///
/// Where it pays, over MPI:
/// - A message longer than a batch (64 KiB) is sent from where it lies, so
///   a plain [`send`] returns only once MPI completed it (about once its
///   receiver took it): one such message in flight at a time. In a window,
///   the next one is sent while the first travels, to the same task or to
///   others (a halo to each neighbour at once), up to 512 KiB of them in
///   flight, or four messages where that is more (a send that would pass
///   that first waits for the oldest). They leave together, with the
///   window's next wait (that send's, or the window's end) or the next
///   pass that sends (the calling task waiting for anything makes one).
/// - Shorter messages are copied, and may wait to travel together in one
///   MPI message with the window's next ones: they leave with the next
///   pass that sends (the calling task waiting for anything makes one),
///   once 64 (or 16 KiB of them) wait, or when the window ends.
///
/// On shared memory, and to a task of this locale, a window's sends are
/// [`send`]s. A message longer than one frame (fragments) is sent as
/// [`send`] sends it. Order and matching are [`send`]'s.
///
/// ```
/// use cantus::chant::{self, Source, Tag};
/// let total = cantus::run(|| {
///     let me = chant::me();
///     let left = vec![1u8; 1 << 17];
///     let right = vec![2u8; 1 << 17];
///     chant::window(|w| {
///         w.send(me, 1, &left).unwrap();
///         w.send(me, 2, &right).unwrap();
///     });
///     let a = chant::recv(Source::Any, Tag::Is(1)).into_bytes();
///     let b = chant::recv(Source::Any, Tag::Is(2)).into_bytes();
///     a.iter().chain(&b).map(|&x| x as usize).sum::<usize>()
/// })
/// .unwrap();
/// assert_eq!(total, 3 << 17);
/// ```
///
/// A buffer made inside the window would go before its send is done, and
/// does not compile:
///
/// ```compile_fail
/// cantus::run(|| {
///     let me = cantus::chant::me();
///     cantus::chant::window(|w| {
///         let bytes = vec![0u8; 1 << 20];
///         w.send(me, 1, &bytes).unwrap();
///     });
/// })
/// .unwrap();
/// ```
///
/// nor does one changed while it is sent:
///
/// ```compile_fail
/// cantus::run(|| {
///     let me = cantus::chant::me();
///     let mut bytes = vec![0u8; 1 << 20];
///     cantus::chant::window(|w| {
///         w.send(me, 1, &bytes).unwrap();
///         bytes[0] = 1;
///     });
/// })
/// .unwrap();
/// ```
///
/// Panics outside a task. A panic while waiting for the sends aborts the
/// process (unwinding would free bytes the transport may still read).
pub fn window<'env, R>(f: impl FnOnce(&Window<'env>) -> R) -> R {
    let window = Window {
        in_flight: std::cell::RefCell::new(VecDeque::new()),
        _env: std::marker::PhantomData,
    };
    // A panic in `f` is caught, the sends waited for, and the panic
    // resumed: waiting while unwinding would poison the locks a wait
    // takes (a lock released during a panic counts as poisoned).
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| f(&window)));
    let mut in_flight = window.in_flight.into_inner();
    if let Some(e) = super::engine() {
        // The frames held back to go together go now.
        e.flush();
        e.wait_sent(&mut in_flight, 0);
    }
    debug_assert!(in_flight.is_empty(), "sends in flight without an engine");
    r.unwrap_or_else(|panic| std::panic::resume_unwind(panic))
}

/// Bytes of a window's messages in flight at once, the next one's
/// included, or [`WINDOW_MESSAGES`] messages where that is more: a send
/// that would pass it first waits for the oldest. Measured over MPI
/// (`cantus-bench comm --only chant_window`, BENCHMARKS.md, "Large
/// receives in recycled buffers"): 64 KiB messages gain from several in
/// flight; 1 MiB messages went 12% faster with four in flight than with
/// one, two gained nothing, three nearly as much as four (the receiver
/// takes as many at once: `comm/mpi/progress.rs`, `OPEN_MESSAGES`).
const WINDOW_BYTES: usize = 512 << 10;
/// Messages of a window in flight at once, however large
/// ([`WINDOW_BYTES`]).
const WINDOW_MESSAGES: usize = 4;

/// Sends in flight together ([`window`]). `'env` is the window's whole
/// call: every byte sent through it is borrowed for that long.
pub struct Window<'env> {
    /// The frames the transport may still read, with their flags.
    in_flight: std::cell::RefCell<VecDeque<InFlight>>,
    /// Invariant in `'env`, so that a `&Window<'env>` cannot pass for a
    /// window of a shorter call and take bytes that go first.
    _env: std::marker::PhantomData<std::cell::Cell<&'env ()>>,
}

impl<'env> Window<'env> {
    /// [`send`], without waiting for the transport to be done with
    /// `bytes`: the window waits, when its call ends. Errors and panics
    /// as [`send`]'s.
    #[track_caller]
    pub fn send(&self, to: TaskId, tag: u32, bytes: &'env [u8]) -> Result<(), Error> {
        let mut in_flight = self.in_flight.borrow_mut();
        // Only with frames in flight (a large message's, over MPI) is there
        // a limit to wait for: the engine is looked up then alone.
        if !in_flight.is_empty()
            && let Some(e) = super::engine()
        {
            // At most WINDOW_BYTES in flight with this one, or
            // WINDOW_MESSAGES of its size where that is more.
            let limit = WINDOW_BYTES.max(WINDOW_MESSAGES.saturating_mul(bytes.len()));
            e.wait_sent(&mut in_flight, limit - bytes.len());
        }
        // SAFETY: `bytes` is borrowed (shared) for `'env`, the whole call
        // of `window`, which waits for every frame pushed on `in_flight`
        // before it returns or unwinds (a panic in its closure is caught
        // first), its wait aborting on a panic of its own; `Window` is
        // invariant in `'env`, so no shorter borrow passes for it.
        unsafe { send_parts_from(to, tag, &[bytes], Some(&mut in_flight)) }
    }
}

/// Sends `value`, encoded by the codec (serde); the receiver decodes it
/// with [`Message::decode`]. Errors as [`send`], or if `value` does not
/// encode.
///
/// `value` is a reference (`&x`: `x` stays the caller's) or a value given
/// up. Given up, a large [`Bulk`](crate::Bulk) in it that was received in
/// place from the destination's locale ([`Message::into_decoded`]) and
/// that nothing else holds goes back in the very memory it came in, on
/// shared memory (the sender's rendezvous block, handed back with the new
/// message written around the array; `comm/shm/README.md`, "Rendezvous",
/// rule R): an array received, changed in place and sent back to its
/// sender is not copied. Anything else is copied once into the transport,
/// as a reference's is.
///
/// ```no_run
/// use cantus::{Bulk, chant};
/// # fn worker() -> Result<(), cantus::Error> {
/// let m = chant::recv(chant::Source::Any, chant::Tag::Is(1));
/// let from = m.source();
/// let mut v: Bulk<f64> = m.into_decoded()?;
/// v.iter_mut().for_each(|x| *x *= 2.0);
/// chant::send_value(from, 2, v)?; // given up: back in its own block
/// # Ok(()) }
/// ```
#[track_caller]
pub fn send_value<T: Serialize>(to: TaskId, tag: u32, value: T) -> Result<(), Error> {
    // Encoded where it starts in its frame: after the header and the tag.
    let at = super::wire::HEADER_LEN + super::wire::TAG_LEN;
    // Sent at once: its large plain arrays may be written straight into
    // the room the transport reserves for the frame.
    let mut bytes = super::encode::encode_for(&value, at, to.locale).map_err(|e| {
        Error::new(
            ErrorKind::Message,
            format!(
                "cantus::chant::send_value: a {} could not be encoded: {e}",
                std::any::type_name::<T>()
            ),
        )
    })?;
    // Given up, the value's arrays are held by the encoding alone (a
    // reference's stay the caller's too).
    drop(value);
    if let Some(sent) = send_in_block(to, tag, &mut bytes) {
        return sent;
    }
    bytes.with_parts(&[], |parts| send_parts(to, tag, parts))
}

/// Sends an encoded message to a task of another locale in the frame
/// its one large array lies in, if that frame came from there and nothing
/// else holds it (`Engine::send_in_block`); `None` if not, or if the
/// message is not one for another locale, or is too long: the usual path
/// sends or refuses it.
fn send_in_block(
    to: TaskId,
    tag: u32,
    encoding: &mut super::encode::Encoding,
) -> Option<Result<(), Error>> {
    let e = super::engine()?;
    if to.locale == e.here() || to.locale >= super::num_locales() {
        return None;
    }
    // As `send_parts_from`: only from a task (a send may wait for room).
    crate::sched::no_wait::check_task("cantus::chant::send");
    let header = Header::message(to.task, me().task);
    e.send_in_block(
        to.locale,
        Network::Reply,
        header,
        &[&tag.to_le_bytes()],
        encoding,
    )
}

/// Waits for a message from `from` with `tag` and returns it. Only the
/// calling task waits (how depends on [`policy`]); its worker runs other
/// tasks meanwhile.
///
/// Panics outside a task.
#[track_caller]
pub fn recv(from: Source, tag: Tag) -> Message {
    irecv(from, tag).wait()
}

/// Posts a receive for a message from `from` with `tag` and returns at
/// once; the handle tells whether it arrived and waits for it. Receives
/// are matched in the order they were posted. Dropping the handle cancels
/// the receive (a message it had already taken goes back to the mailbox).
///
/// Panics outside a task.
#[track_caller]
pub fn irecv(from: Source, tag: Tag) -> RecvHandle {
    let owner = me();
    let remote = super::num_locales() > 1
        && match from {
            Source::Any => true,
            Source::Task(t) => t.locale != owner.locale,
        };
    // A message already there is the handle's at once: no receive to post,
    // nothing to allocate (a stream's receiver mostly finds its next
    // message queued).
    let receive = TABLE
        .lock()
        .unwrap()
        .with(owner.task, |mailbox| match mailbox.take(from, tag) {
            Some(m) => Receive::Ready(m),
            None => {
                let p = Arc::new(Posted {
                    slot: SyncVar::new(),
                    remote,
                });
                mailbox.post(from, tag, p.clone());
                if remote {
                    // Release: pairs with the Acquire load in `in_flight`.
                    WAITING_REMOTE.fetch_add(1, Ordering::Release);
                }
                Receive::Posted(p)
            }
        });
    RecvHandle {
        owner: owner.task,
        receive,
    }
}

/// A posted receive ([`irecv`]): Chant's `msgtest` is
/// [`test`](Self::test), its `msgwait` [`wait`](Self::wait).
#[must_use = "dropping a receive handle cancels the receive"]
pub struct RecvHandle {
    /// The receiving task's local id (its mailbox).
    owner: u64,
    receive: Receive,
}

/// Where a [`RecvHandle`]'s receive stands.
enum Receive {
    /// Its message was queued when it was posted: the handle holds it.
    Ready(Message),
    /// Posted in the mailbox; its slot is filled when a message matches.
    Posted(Arc<Posted>),
    /// Its message was taken.
    Taken,
}

impl RecvHandle {
    /// Whether the message is there (then [`wait`](Self::wait) returns at
    /// once). Never waits; if the message is not there yet, polls the
    /// transport once (unless a worker is polling it now), so a loop of
    /// `test` and [`yield_now`](crate::yield_now) makes progress even
    /// while its worker has nothing else to do.
    pub fn test(&self) -> bool {
        match &self.receive {
            Receive::Ready(_) => true,
            Receive::Posted(p) => {
                p.slot.is_full() || {
                    poll_once();
                    p.slot.is_full()
                }
            }
            Receive::Taken => false,
        }
    }

    /// The message if it is there, else the handle back. Polls as
    /// [`test`](Self::test) does.
    pub fn try_take(mut self) -> Result<Message, RecvHandle> {
        if let Some(m) = self.take_ready() {
            return Ok(m);
        }
        let p = self.posted();
        // The receive stays the handle's while it polls (a panic there
        // drops the handle, which cancels it).
        if !p.slot.is_full() {
            poll_once();
        }
        match p.slot.try_read_fe() {
            Some(m) => {
                self.receive = Receive::Taken;
                Ok(m)
            }
            None => Err(self),
        }
    }

    /// Waits for the message (only the calling task waits; see
    /// [`Policy`]) and returns it.
    pub fn wait(mut self) -> Message {
        // The receive stays the handle's until its message is in hand:
        // should the wait unwind (a panic in a poll, a deadlock abort's
        // unwinding), `Drop` cancels it and lowers `WAITING_REMOTE`, so
        // that shutdown's count of receives from other locales is not
        // left raised by a receive nobody waits in.
        if let Some(m) = self.take_ready() {
            return m;
        }
        let p = self.posted().clone();
        let m = match p.slot.is_full().then(|| p.slot.try_read_fe()).flatten() {
            Some(m) => m,
            None => match policy() {
                Policy::SchedulerPolls => p.slot.read_fe(),
                Policy::TaskPolls => loop {
                    poll_once();
                    if p.slot.is_full() {
                        if let Some(m) = p.slot.try_read_fe() {
                            break m;
                        }
                    }
                    crate::task::yield_now();
                },
            },
        };
        self.receive = Receive::Taken;
        m
    }
}

impl RecvHandle {
    /// The message, if the receive found it queued (the handle is then
    /// done).
    fn take_ready(&mut self) -> Option<Message> {
        match std::mem::replace(&mut self.receive, Receive::Taken) {
            Receive::Ready(m) => Some(m),
            other => {
                self.receive = other;
                None
            }
        }
    }

    /// The posted receive (the handle's message was not there when it
    /// was posted, and is not taken yet).
    fn posted(&self) -> &Arc<Posted> {
        match &self.receive {
            Receive::Posted(p) => p,
            _ => unreachable!("a handle holds its receive until its message is taken"),
        }
    }
}

impl Drop for RecvHandle {
    fn drop(&mut self) {
        let m = match std::mem::replace(&mut self.receive, Receive::Taken) {
            Receive::Taken => return,
            Receive::Ready(m) => m,
            Receive::Posted(p) => {
                let cancelled = TABLE
                    .lock()
                    .unwrap()
                    .with(self.owner, |mb| mb.cancel(|q| Arc::ptr_eq(q, &p)));
                if cancelled {
                    if p.remote {
                        WAITING_REMOTE.fetch_sub(1, Ordering::Release);
                    }
                    return;
                }
                // It was matched: its message is in the slot (or about to
                // be, by the deliverer that matched it).
                p.slot.read_fe()
            }
        };
        // Its message goes back, for other receives.
        let hit = TABLE.lock().unwrap().with(self.owner, |mb| mb.put_back(m));
        complete(hit);
    }
}

/// Polls both networks of the transport once, under the driver's poll
/// token (nothing if a worker holds it now, or on a job of one locale).
fn poll_once() {
    if let Some(e) = super::engine() {
        e.poll_while_blocked(Network::Request);
    }
}

/// A posted receive as its mailbox holds it.
struct Posted {
    /// Filled with the matching message.
    slot: SyncVar<Message>,
    /// Counted in `WAITING_REMOTE` (a remote task may satisfy it).
    remote: bool,
}

/// Mailboxes by task id.
type Mailboxes = HashMap<u64, Mailbox<Arc<Posted>>, BuildHasherDefault<TaskIdHasher>>;

/// Every mailbox of this locale, by task id, and emptied ones kept for
/// reuse.
static TABLE: LazyLock<Mutex<Table>> = LazyLock::new(|| Mutex::new(Table::default()));

/// Emptied mailboxes kept, with their queues' buffers, for the next task
/// that needs one: a mailbox leaves the table once empty (a task's last
/// message must not keep it there for ever), and a stream's receiver
/// empties its own at every message, which would otherwise allocate and
/// free its queue each time.
const SPARE_MAILBOXES: usize = 64;

/// The longest queue a spare mailbox keeps its buffer for (in entries).
const SPARE_QUEUE: usize = 64;

/// The mailbox table.
#[derive(Default)]
struct Table {
    /// The mailboxes that hold a message or a receive.
    boxes: Mailboxes,
    /// Empty ones, at most [`SPARE_MAILBOXES`].
    spare: Vec<Mailbox<Arc<Posted>>>,
}

impl Table {
    /// Runs `f` on task `task`'s mailbox, made (or reused) if it had none,
    /// and removes the mailbox if `f` left it empty, keeping it as a
    /// spare. One look-up of the task in the table: a stream's receiver
    /// empties its mailbox at every message, and a message that finds its
    /// receive posted empties it again, so most messages make and remove
    /// a mailbox once each.
    fn with<R>(&mut self, task: u64, f: impl FnOnce(&mut Mailbox<Arc<Posted>>) -> R) -> R {
        match self.boxes.entry(task) {
            Entry::Occupied(mut e) => {
                let r = f(e.get_mut());
                if e.get().is_empty() {
                    keep_spare(&mut self.spare, e.remove());
                }
                r
            }
            Entry::Vacant(e) => {
                let mut mb = self.spare.pop().unwrap_or_default();
                let r = f(&mut mb);
                if mb.is_empty() {
                    keep_spare(&mut self.spare, mb);
                } else {
                    e.insert(mb);
                }
                r
            }
        }
    }
}

/// Keeps an emptied mailbox for the next one made, with its queues'
/// buffers up to [`SPARE_QUEUE`] entries, if fewer than
/// [`SPARE_MAILBOXES`] are kept.
fn keep_spare(spare: &mut Vec<Mailbox<Arc<Posted>>>, mut mb: Mailbox<Arc<Posted>>) {
    if spare.len() < SPARE_MAILBOXES {
        mb.queued.shrink_to(SPARE_QUEUE);
        mb.posted.shrink_to(SPARE_QUEUE);
        spare.push(mb);
    }
}

/// Hashes a task id for the mailbox table: one multiplication by an odd
/// constant (Knuth's multiplicative hashing: a bijection on the low bits,
/// which pick the bucket, that also fills the high bits, which tag the
/// probe), not SipHash: every message looks its mailbox up twice (its
/// delivery and its receive, `Table::with`), and task ids are this
/// locale's own sequence numbers (a peer's message reaches the table only
/// for an id this locale issued).
#[derive(Default)]
struct TaskIdHasher(u64);

impl Hasher for TaskIdHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.write_u64(self.0 ^ b as u64);
        }
    }

    fn write_u64(&mut self, id: u64) {
        self.0 = id.wrapping_mul(0x9E37_79B9_7F4A_7C15);
    }
}

/// Posted receives, not yet matched, that a task of another locale may
/// satisfy: work in flight for the driver seam (`Engine::in_flight`), so
/// a locale whose tasks all wait for messages from elsewhere is neither
/// quiescent nor reported deadlocked.
static WAITING_REMOTE: AtomicU64 = AtomicU64::new(0);

/// Receives waiting for a message from another locale (the engine's
/// `in_flight`).
pub(crate) fn in_flight() -> u64 {
    // Acquire: pairs with the Release decrement after the slot was filled
    // (`complete`), as the engine's pending count does.
    WAITING_REMOTE.load(Ordering::Acquire)
}

/// Puts `m` into task `to`'s mailbox (the task exists).
fn deliver(to: u64, m: Message) {
    let hit = TABLE.lock().unwrap().with(to, |mb| mb.arrive(m));
    complete(hit);
}

/// Fills a matched receive (outside the table's lock: it may wake a task).
fn complete(hit: Option<(Arc<Posted>, Message)>) {
    if let Some((p, m)) = hit {
        p.slot.write_ef(m);
        if p.remote {
            // Release, after the write: `in_flight` reaching 0 is seen only
            // once the waiter can see its message (T1 of the driver seam).
            WAITING_REMOTE.fetch_sub(1, Ordering::Release);
        }
    }
}

/// Whether this locale's runtime ever handed out task id `id`.
fn issued(id: u64) -> bool {
    match crate::sched::WorkerLocal::current() {
        Some(l) => crate::sched::worker::task_id_issued(&l.registry, id),
        None => Registry::current().is_some_and(|r| crate::sched::worker::task_id_issued(&r, id)),
    }
}

/// A message frame from locale `src`, inside a driver poll (never waits).
/// The header was checked by `Header::decode` (ids non-zero, room for the
/// tag).
pub(crate) fn deliver_remote(src: usize, here: usize, h: Header, tag: u32, bytes: Body<'_>) {
    let from = TaskId {
        locale: src,
        task: h.token,
    };
    if !issued(h.word) {
        eprintln!(
            "cantus: locale {src} sent a message (tag {tag}, {} bytes, from its task {}) to task {} \
             on locale {here}, which never existed; dropped",
            bytes.as_slice().len(),
            h.token,
            h.word
        );
        return;
    }
    deliver(
        h.word,
        Message {
            from,
            tag,
            bytes: match bytes {
                Body::Lent(lent, start) => Bytes::Lent(lent, start),
                other => Bytes::Own(other.into_vec()),
            },
        },
    );
}

/// Messages no task received, listed one by one in the shutdown note.
const LISTED: usize = 8;

/// At shutdown, once no task runs: drops the messages no task received,
/// with a note saying which, and empties the table (a later runtime in
/// this process starts afresh).
pub(crate) fn at_shutdown(here: usize) {
    let table = std::mem::take(&mut *TABLE.lock().unwrap_or_else(|e| e.into_inner()));
    WAITING_REMOTE.store(0, Ordering::Relaxed);
    let mut lost: Vec<(u64, Message)> = table
        .boxes
        .into_iter()
        .flat_map(|(task, mb)| mb.queued.into_iter().map(move |m| (task, m)))
        .collect();
    if lost.is_empty() {
        return;
    }
    lost.sort_by_key(|(task, m)| (*task, m.from));
    let mut note = format!(
        "cantus: locale {here}: {} Chant message(s) were never received; dropped at shutdown:",
        lost.len()
    );
    for (task, m) in lost.iter().take(LISTED) {
        note.push_str(&format!(
            "\n  to task {task}: tag {}, {} bytes, from {}",
            m.tag,
            m.bytes.len(),
            m.from
        ));
    }
    if lost.len() > LISTED {
        note.push_str(&format!("\n  ... and {} more", lost.len() - LISTED));
    }
    eprintln!("{note}");
}

/// Whether a receive for `from`, `tag` takes message `m`.
fn matches(from: Source, tag: Tag, m: &Message) -> bool {
    (match from {
        Source::Any => true,
        Source::Task(t) => t == m.from,
    }) && match tag {
        Tag::Any => true,
        Tag::Is(t) => t == m.tag,
    }
}

/// One task's mailbox: messages that came before a receive asked for
/// them (arrival order), and receives posted before their message came
/// (post order). Never both a queued message and a posted receive that
/// match each other. `P` is what a posted receive is filled through.
struct Mailbox<P> {
    queued: VecDeque<Message>,
    posted: VecDeque<(Source, Tag, P)>,
}

impl<P> Default for Mailbox<P> {
    fn default() -> Self {
        Mailbox {
            queued: VecDeque::new(),
            posted: VecDeque::new(),
        }
    }
}

impl<P> Mailbox<P> {
    fn is_empty(&self) -> bool {
        self.queued.is_empty() && self.posted.is_empty()
    }

    /// Takes the oldest queued message that a receive for `from`, `tag`
    /// matches.
    fn take(&mut self, from: Source, tag: Tag) -> Option<Message> {
        let i = self.queued.iter().position(|m| matches(from, tag, m))?;
        self.queued.remove(i)
    }

    /// Posts a receive (after `take` found nothing).
    fn post(&mut self, from: Source, tag: Tag, p: P) {
        self.posted.push_back((from, tag, p));
    }

    /// A message arrives: the oldest posted receive that matches it takes
    /// it (returned, to be filled), or it is queued.
    fn arrive(&mut self, m: Message) -> Option<(P, Message)> {
        match self.matching_receive(&m) {
            Some(p) => Some((p, m)),
            None => {
                self.queued.push_back(m);
                None
            }
        }
    }

    /// A message taken by a cancelled receive comes back: as `arrive`, but
    /// queued first. No queued message shares its source and tag (the
    /// receive would have taken that one first), so the order per source
    /// and tag holds.
    fn put_back(&mut self, m: Message) -> Option<(P, Message)> {
        match self.matching_receive(&m) {
            Some(p) => Some((p, m)),
            None => {
                self.queued.push_front(m);
                None
            }
        }
    }

    fn matching_receive(&mut self, m: &Message) -> Option<P> {
        let i = self
            .posted
            .iter()
            .position(|(from, tag, _)| matches(*from, *tag, m))?;
        self.posted.remove(i).map(|(_, _, p)| p)
    }

    /// Removes the posted receive `is` picks; whether it was there.
    fn cancel(&mut self, is: impl Fn(&P) -> bool) -> bool {
        match self.posted.iter().position(|(_, _, p)| is(p)) {
            Some(i) => {
                self.posted.remove(i);
                true
            }
            None => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn task(locale: usize, task: u64) -> TaskId {
        TaskId { locale, task }
    }

    fn msg(from: TaskId, tag: u32, b: u8) -> Message {
        Message {
            from,
            tag,
            bytes: vec![b].into(),
        }
    }

    #[test]
    fn matching_by_source_and_tag() {
        let a = task(0, 5);
        let m = msg(a, 3, 0);
        assert!(matches(Source::Any, Tag::Any, &m));
        assert!(matches(Source::Task(a), Tag::Is(3), &m));
        assert!(!matches(Source::Task(task(1, 5)), Tag::Any, &m));
        assert!(!matches(Source::Task(task(0, 6)), Tag::Any, &m));
        assert!(!matches(Source::Any, Tag::Is(4), &m));
    }

    #[test]
    fn a_receive_takes_the_oldest_matching_queued_message() {
        let (a, b) = (task(0, 5), task(1, 9));
        let mut mb = Mailbox::<u32>::default();
        for (from, tag, v) in [(a, 1, 10), (b, 1, 20), (a, 2, 30), (a, 1, 40)] {
            assert!(mb.arrive(msg(from, tag, v)).is_none());
        }
        assert_eq!(mb.take(Source::Task(b), Tag::Any).unwrap().bytes(), [20]);
        assert_eq!(mb.take(Source::Any, Tag::Is(2)).unwrap().bytes(), [30]);
        assert!(mb.take(Source::Task(b), Tag::Any).is_none());
        assert_eq!(mb.take(Source::Task(a), Tag::Is(1)).unwrap().bytes(), [10]);
        assert_eq!(mb.take(Source::Any, Tag::Any).unwrap().bytes(), [40]);
        assert!(mb.is_empty());
    }

    #[test]
    fn a_message_goes_to_the_oldest_matching_posted_receive() {
        let (a, b) = (task(0, 5), task(1, 9));
        let mut mb = Mailbox::default();
        mb.post(Source::Task(b), Tag::Any, 1);
        mb.post(Source::Any, Tag::Is(7), 2);
        mb.post(Source::Any, Tag::Any, 3);
        // From a with tag 7: receive 1 wants b; receive 2 takes it.
        assert_eq!(mb.arrive(msg(a, 7, 0)).unwrap().0, 2);
        // From a with tag 8: only receive 3.
        assert_eq!(mb.arrive(msg(a, 8, 0)).unwrap().0, 3);
        // Nothing matches now: queued.
        assert!(mb.arrive(msg(a, 9, 0)).is_none());
        assert_eq!(mb.arrive(msg(b, 9, 0)).unwrap().0, 1);
        assert_eq!(mb.queued.len(), 1);
        assert!(mb.posted.is_empty());
    }

    #[test]
    fn cancelled_receives_and_put_back_messages_keep_the_order() {
        let a = task(0, 5);
        let mut mb = Mailbox::default();
        mb.post(Source::Any, Tag::Is(1), 1);
        assert!(mb.cancel(|&p| p == 1));
        assert!(!mb.cancel(|&p| p == 1));
        assert!(mb.is_empty());
        // A receive took the first message; two more came; it is cancelled
        // and gives the first back, which must stay first.
        mb.post(Source::Any, Tag::Is(1), 2);
        let (_, first) = mb.arrive(msg(a, 1, 1)).unwrap();
        assert!(mb.arrive(msg(a, 1, 2)).is_none());
        assert!(mb.arrive(msg(a, 1, 3)).is_none());
        assert!(mb.put_back(first).is_none());
        let order: Vec<u8> = std::iter::from_fn(|| mb.take(Source::Any, Tag::Any))
            .map(|m| m.bytes[0])
            .collect();
        assert_eq!(order, [1, 2, 3]);
        // Put back while another receive waits: that one takes it.
        mb.post(Source::Task(a), Tag::Any, 9);
        assert_eq!(mb.put_back(msg(a, 4, 4)).unwrap().0, 9);
    }

    #[test]
    fn emptied_mailboxes_are_kept_as_spares_and_reused() {
        let mut t = Table::default();
        t.with(5, |mb| mb.queued.push_back(msg(task(1, 2), 0, 1)));
        assert!(
            t.boxes.contains_key(&5),
            "a mailbox holding a message stays"
        );
        let m = t.with(5, |mb| mb.queued.pop_front()).unwrap();
        assert_eq!(m.bytes(), [1]);
        assert!(t.boxes.is_empty(), "an empty mailbox leaves the table");
        assert_eq!(t.spare.len(), 1);
        let kept = t.spare[0].queued.capacity();
        assert!(kept >= 1, "a spare keeps its queue's buffer");
        // The next task's mailbox is the spare; left empty, it is kept
        // again rather than entered in the table.
        assert_eq!(t.with(9, |mb| mb.queued.capacity()), kept);
        assert!(t.boxes.is_empty());
        assert_eq!(t.spare.len(), 1);
        t.with(9, |mb| mb.post(Source::Any, Tag::Any, Arc::new(posted())));
        assert!(t.spare.is_empty(), "a mailbox with a posted receive stays");
        assert!(t.with(9, |mb| mb.cancel(|_| true)));
        assert!(t.boxes.is_empty());
        assert_eq!(t.spare.len(), 1);
        // At most SPARE_MAILBOXES are kept, each with a bounded queue.
        for id in 100..100 + 2 * SPARE_MAILBOXES as u64 {
            t.with(id, |mb| {
                for b in 0..200 {
                    mb.queued.push_back(msg(task(1, 2), 0, b as u8));
                }
            });
        }
        assert_eq!(t.boxes.len(), 2 * SPARE_MAILBOXES);
        for id in 100..100 + 2 * SPARE_MAILBOXES as u64 {
            t.with(id, |mb| mb.queued.clear());
        }
        assert!(t.boxes.is_empty());
        assert_eq!(t.spare.len(), SPARE_MAILBOXES);
        assert!(t.spare.iter().all(|mb| mb.queued.capacity() < 200));
    }

    fn posted() -> Posted {
        Posted {
            slot: SyncVar::new(),
            remote: false,
        }
    }

    #[test]
    fn task_ids_print_as_task_and_locale() {
        assert_eq!(task(2, 17).to_string(), "task 17 on locale 2");
    }
}
