//! Remote calls (active messages): run a registered call on another
//! locale, as a task there, and get its result or its panic back.
//!
//! - [`Remote`] is a call (a serde type whose fields are its arguments);
//!   [`remote!`](crate::remote!) registers it, [`remote_fn!`](crate::remote_fn)
//!   makes a plain function one.
//! - [`on`] runs it on a locale and returns a [`RemoteHandle`];
//!   [`begin_on`] runs it detached; [`coforall_locales`] runs one call per
//!   locale and waits for all.
//! - [`RemotePod`], [`on_pod`] and [`begin_on_pod`]: calls of plain data
//!   (`bytemuck::Pod`), which travel as their bytes.
//! - [`Bulk<T>`](Bulk): an array of plain data that travels as its bytes,
//!   as a field of any call, result, Chant message or balanced piece.
//! - [`here`] and [`num_locales`] say where a task runs.
//! - [`chant`]: tasks that talk, by global id and tag (send, recv, irecv).
//!
//! The everyday names ([`on`], [`begin_on`], [`Remote`],
//! [`coforall_locales`], [`here`], [`num_locales`], [`chant`]) are also
//! at the crate's root.
//!
//! Arguments and results travel encoded by serde, in postcard's format
//! (`codec/`). A call to
//! the caller's own locale runs as a local task, without encoding.

// A file per role: `wire.rs` the frame format (`README.md` beside this
// file), `engine.rs` and `engine/` the per-locale engine, `handlers.rs`
// the table, `handle.rs` a call's handle and how `join` waits, `spmd.rs`
// SPMD groups and `coforall_locales`, `macros.rs` the registering
// macros; this file the engine's installation and the calls themselves
// (`on`, `begin_on`).

pub(crate) mod bulk;
pub mod chant;
#[cfg(not(loom))]
pub(crate) mod clock;
pub(crate) mod codec;
pub(crate) mod encode;
pub(crate) mod engine;
pub(crate) mod fragment;
pub(crate) mod handle;
pub(crate) mod handlers;
mod macros;
pub(crate) mod replies;
pub(crate) mod serve;
mod spmd;
pub(crate) mod wire;

pub use bulk::Bulk;
pub use handle::RemoteHandle;
use handle::{Pending, Ticket};
pub(crate) use handlers::Handler;
pub use handlers::{RegisteredCall, RegisteredPodCall, Remote, RemotePod};
pub use spmd::coforall_locales;
pub(crate) use spmd::{SpmdHooks, run_handler, set_spmd_hooks, spmd_group};

use crate::error::{Error, ErrorKind, Locales};
use crate::sched::block::{Purpose, WaitPurpose};
use crate::sync::SyncVar;
use engine::Engine;
use std::cell::RefCell;
use std::marker::PhantomData;
use std::panic::{self, AssertUnwindSafe};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock, RwLock};
use wire::Status;

/// The engine of this process's locale, while a multi-locale runtime runs.
static ENGINE: RwLock<Option<Arc<Engine>>> = RwLock::new(None);

/// Changed (Release) after every change of `ENGINE`: a thread whose copy
/// of the engine is of the current epoch uses it without the lock.
static ENGINE_EPOCH: AtomicU64 = AtomicU64::new(0);

thread_local! {
    /// This thread's copy of `ENGINE`, and the epoch it was taken at
    /// (`u64::MAX`: none yet). A remote call finds its engine here with
    /// one load of the epoch: no lock, no reference count on a line every
    /// caller shares.
    static ENGINE_HERE: RefCell<(u64, Option<Arc<Engine>>)> =
        const { RefCell::new((u64::MAX, None)) };
}

/// Program messages (requests, replies, Chant messages; whole, however
/// many fragments carried them) this process sent and received to and
/// from other locales: `CANTUS_STATS` prints them.
static MESSAGES_SENT: AtomicU64 = AtomicU64::new(0);
static MESSAGES_RECEIVED: AtomicU64 = AtomicU64::new(0);

/// Whether messages are counted: only when someone reads the counts
/// (`CANTUS_STATS`, a trace), since a shared counter's read-modify-write
/// on every message cost a round trip 5%.
static COUNTING: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Counts messages from now on (or not).
pub(crate) fn count_messages(on: bool) {
    COUNTING.store(on, Ordering::Relaxed);
}

#[inline]
pub(crate) fn count_message_sent() {
    if COUNTING.load(Ordering::Relaxed) {
        MESSAGES_SENT.fetch_add(1, Ordering::Relaxed);
    }
}

#[inline]
pub(crate) fn count_message_received() {
    if COUNTING.load(Ordering::Relaxed) {
        MESSAGES_RECEIVED.fetch_add(1, Ordering::Relaxed);
    }
}

/// (sent, received) program messages since this process's engine was
/// installed.
pub(crate) fn message_counts() -> (u64, u64) {
    (
        MESSAGES_SENT.load(Ordering::Relaxed),
        MESSAGES_RECEIVED.load(Ordering::Relaxed),
    )
}

pub(crate) fn install(engine: Arc<Engine>) {
    MESSAGES_SENT.store(0, Ordering::Relaxed);
    MESSAGES_RECEIVED.store(0, Ordering::Relaxed);
    *ENGINE.write().unwrap() = Some(engine);
    ENGINE_EPOCH.fetch_add(1, Ordering::Release);
}

pub(crate) fn uninstall() {
    *ENGINE.write().unwrap() = None;
    ENGINE_EPOCH.fetch_add(1, Ordering::Release);
}

/// Runs `f` with this locale's engine (`None` outside a job of several
/// locales). `f` only reads the engine (a field, or a clone of the
/// `Arc`): it must run no user code, and so no handler, since the
/// thread's copy is borrowed meanwhile. Whatever may run a handler (a
/// poll) clones the engine first and calls it outside (`engine()`), so
/// that a handler's own `here()` or remote call finds the copy free.
/// Should a lookup happen under another anyway, it still answers: the
/// copy is only ever borrowed shared while `f` runs, and renewed (the
/// one mutable borrow, which runs nothing but the renewal) only when no
/// other borrow is out; a lookup that finds it out and stale asks the
/// lock. A thread that reads the epoch just before a change uses the
/// engine of before, as it would had it looked a moment earlier: an
/// engine that was removed fails its sends with an error.
fn with_engine<R>(f: impl FnOnce(Option<&Arc<Engine>>) -> R) -> R {
    // Acquire: pairs with the Release bump after a change, so the copy
    // taken below is at least as new as the epoch.
    let epoch = ENGINE_EPOCH.load(Ordering::Acquire);
    let mut f = Some(f);
    let here = ENGINE_HERE.try_with(|c| {
        let stale = !matches!(c.try_borrow(), Ok(c) if c.0 == epoch);
        if stale {
            match c.try_borrow_mut() {
                Ok(mut c) => *c = (epoch, ENGINE.read().unwrap().clone()),
                // Borrowed by a lookup this one runs under: the copy
                // must outlive it, so this one reads the lock.
                Err(_) => {
                    return (f.take().expect("called once"))(ENGINE.read().unwrap().as_ref());
                }
            }
        }
        (f.take().expect("called once"))(c.borrow().1.as_ref())
    });
    match here {
        Ok(r) => r,
        // This thread's locals are being torn down: ask the lock.
        Err(_) => (f.take().expect("called once"))(ENGINE.read().unwrap().as_ref()),
    }
}

/// Runs `f` with the thread-local `key` set to `value`, and puts the value
/// it had back after, also on a panic: for the state of a run that a run
/// of the same code nested inside it must not see (an encoding, a decoding
/// in place, a caller's poll).
pub(crate) fn with_local<T: 'static, R>(
    key: &'static std::thread::LocalKey<std::cell::Cell<T>>,
    value: T,
    f: impl FnOnce() -> R,
) -> R {
    struct Restore<T: 'static>(
        &'static std::thread::LocalKey<std::cell::Cell<T>>,
        Option<T>,
    );
    impl<T: 'static> Drop for Restore<T> {
        fn drop(&mut self) {
            if let Some(before) = self.1.take() {
                // `try_with`: at thread exit the local may be gone.
                let _ = self.0.try_with(|c| c.set(before));
            }
        }
    }
    let _restore = Restore(key, Some(key.with(|c| c.replace(value))));
    f()
}

fn engine() -> Option<Arc<Engine>> {
    with_engine(|e| e.cloned())
}

/// Sends a raw frame to `dest` (tests that play a faulty peer); `reply`
/// picks the reply network.
#[doc(hidden)]
pub fn send_raw_frame(dest: usize, reply: bool, frame: &[u8]) -> Result<(), Error> {
    let e = engine()
        .ok_or_else(|| Error::new(ErrorKind::Locale, "cantus: no job of several locales runs"))?;
    let net = if reply {
        crate::comm::transport::Network::Reply
    } else {
        crate::comm::transport::Network::Request
    };
    e.send_raw(dest, net, frame)
}

/// Lowers the largest payload this locale sends to `max` bytes (tests of
/// what happens to a message too large to send; the real limit is 4 GiB).
#[doc(hidden)]
pub fn limit_message_bytes(max: usize) {
    if let Some(e) = engine() {
        e.limit_message_bytes(max);
    }
}

/// The locale this task (or thread) runs on: `0..num_locales()`.
pub fn here() -> usize {
    with_engine(|e| e.map_or(0, |e| e.here()))
}

/// The number of locales in the job (1 unless started with
/// `CANTUS_LOCALES` or [`Builder::locales`](crate::Builder::locales)).
pub fn num_locales() -> usize {
    with_engine(|e| e.map_or(1, |e| e.locales()))
}

/// Sends a raw call: its arguments the bytes of `args` one after another
/// (sent as one frame without being copied together first), to the
/// handler `id` (named `name`, registered with [`Handler::raw`]) on
/// another locale; its reply is read in place with
/// [`RemoteHandle::join_with`]. For the crate's own calls whose arguments
/// are framed by hand (pgas's memory over messages), so that nothing is
/// encoded. A call to this locale itself is an error (the caller does
/// such work in place).
///
/// Panics if `locale` is not `0..num_locales()`, or if no runtime runs.
#[track_caller]
pub(crate) fn on_raw(
    locale: usize,
    id: u64,
    name: &'static str,
    args: &[&[u8]],
) -> RemoteHandle<()> {
    let who = (locale, id, name);
    match engine_for("on", locale) {
        Some(e) => send_request(e, who, Ok(args), |_| Ok(())),
        None => RemoteHandle {
            inner: Pending::Failed(Error::new(
                ErrorKind::Locale,
                format!("cantus: {name} is a raw call and cannot run on its own locale {locale}"),
            )),
            locale,
            name,
            decode: |_| Ok(()),
        },
    }
}

/// [`on_raw`], detached: nothing waits for it (a raw call whose handler
/// answers nothing); its arguments are `args` one after another (sent
/// as one frame without being copied together). Returns an error if it
/// could not be sent, or if `locale` is this locale.
///
/// Panics if `locale` is not `0..num_locales()`, or if no runtime runs.
#[track_caller]
pub(crate) fn begin_on_raw(locale: usize, id: u64, args: &[&[u8]]) -> Result<(), Error> {
    match engine_for("begin_on", locale) {
        Some(e) => e.request(locale, id, args, false).map(|_| ()),
        None => Err(Error::new(
            ErrorKind::Locale,
            format!("cantus: a raw call cannot run on its own locale {locale}"),
        )),
    }
}

/// Expects `len` bytes from `locale` straight into `place`: a landing
/// (`Transport::expect_landing`, over MPI only), whose key goes to
/// `locale` in a request whose handler answers with [`send_to_landing`].
/// `None` where there is no such path (or no job of several locales):
/// frames carry the bytes.
///
/// # Safety
///
/// As `Transport::expect_landing`: `place` stays valid for writes of
/// `len` bytes that nothing else touches until the landing is no longer
/// waiting or [`withdraw_landing`] returned.
pub(crate) unsafe fn expect_landing(
    locale: usize,
    place: *mut u8,
    len: usize,
) -> Option<crate::comm::transport::Landing> {
    // SAFETY: the caller's contract, passed on.
    engine().and_then(|e| unsafe { e.landing_transport().expect_landing(locale, place, len) })
}

/// Withdraws a landing: on return, nothing writes its place any more.
pub(crate) fn withdraw_landing(landing: &crate::comm::transport::Landing) {
    if let Some(e) = engine() {
        e.landing_transport().withdraw_landing(landing);
    }
}

/// Sends `bytes` to expected landing `key` of `locale` from where they
/// lie, and returns once they were sent (a task: it polls while it waits).
pub(crate) fn send_to_landing(locale: usize, key: u32, bytes: &[u8]) -> Result<(), Error> {
    let e = engine()
        .ok_or_else(|| Error::new(ErrorKind::Locale, "cantus: no job of several locales runs"))?;
    e.send_to_landing(
        locale,
        crate::comm::transport::LandingKey::Expected(key),
        &[bytes],
        || (),
    )
}

/// Sends `bytes` to `locale` as a claimed landing's message, from where
/// they lie, then runs `request(key)` (which sends the request that names
/// the key, so that `locale` claims them: `claim_landing`), and returns
/// its result once the bytes were sent. `None` where there is no such
/// path to `locale` (or no key is free): frames carry the bytes. The key
/// is the caller's until [`release_claim_key`].
pub(crate) fn send_claimed<R>(
    locale: usize,
    bytes: &[u8],
    request: impl FnOnce(u32) -> R,
) -> Option<Result<(u32, R), Error>> {
    let e = engine()?;
    let key = e.landing_transport().claim_key(locale)?;
    let sent = e.send_to_landing(
        locale,
        crate::comm::transport::LandingKey::Claimed(key),
        &[bytes],
        || request(key),
    );
    if sent.is_err() {
        e.landing_transport().release_claim_key(locale, key);
    }
    Some(sent.map(|r| (key, r)))
}

/// Frees a key of [`send_claimed`] once the request that named it was
/// answered (its bytes were claimed or refused).
pub(crate) fn release_claim_key(locale: usize, key: u32) {
    if let Some(e) = engine() {
        e.landing_transport().release_claim_key(locale, key);
    }
}

/// Claims the bytes `src` sent under claimed `key` into `len` bytes at
/// `place` (`Transport::claim_landing`); `None` where there are no
/// landings from `src`.
///
/// # Safety
///
/// As `Transport::claim_landing`: `place` stays valid for writes of
/// `len` bytes that nothing else touches until the landing is no longer
/// waiting.
pub(crate) unsafe fn claim_landing(
    src: usize,
    key: u32,
    place: *mut u8,
    len: usize,
) -> Option<crate::comm::transport::Landing> {
    // SAFETY: the caller's contract, passed on.
    engine().and_then(|e| unsafe { e.landing_transport().claim_landing(src, key, place, len) })
}

/// Refuses the bytes `src` sent under claimed `key`: they are dropped.
pub(crate) fn refuse_landing(src: usize, key: u32) {
    if let Some(e) = engine() {
        e.landing_transport().refuse_landing(src, key);
    }
}

/// Waits, polling, until `landing` is no longer waiting (a task: its
/// worker's other tasks and the transport's passes go on meanwhile).
pub(crate) fn wait_for_landing(landing: &crate::comm::transport::Landing) {
    let Some(e) = engine() else { return };
    e.wait_for_landing(landing);
}

/// Polls this locale's transport once, if a frame waits (under the
/// driver's poll token; nothing if another thread holds it). For a task
/// that waits for frames that are no reply of its own (pgas's
/// collectives over messages): a task that spins keeps its worker from
/// polling, so it polls itself, as [`await_reply`] does. Returns whether
/// it handled a frame; `false` outside a job of several locales.
pub(crate) fn poll_once() -> bool {
    // The poll runs handlers (inline calls: user code that may itself ask
    // `here()` or send), so it runs on a clone, outside `with_engine`.
    let Some(e) = with_engine(|e| e.filter(|e| e.ready()).cloned()) else {
        return false;
    };
    e.poll_now() > 0
}

/// Tells this locale's transport that frames may come from other
/// locales at any moment (`true`), or no longer (`false`; one for each
/// `true`), so that a messaging thread does not sleep meanwhile
/// (`Transport::expect_arrivals`). Nothing outside a job of several
/// locales.
pub(crate) fn expect_arrivals(on: bool) {
    with_engine(|e| {
        if let Some(e) = e {
            e.expect_arrivals(on)
        }
    })
}

/// The largest payload (a call's arguments or its result) that travels
/// in one frame of the transport, not cut into fragments; `None` outside
/// a job of several locales.
pub(crate) fn frame_payload() -> Option<usize> {
    with_engine(|e| e.map(|e| e.max_payload()))
}

/// How to start a job of several locales, for messages.
const SEVERAL_LOCALES: &str = "start a job of several locales with cantus::Runtime::builder().locales(n) \
     or CANTUS_LOCALES=n";

/// The engine, if `locale` is another locale of a running job (else the
/// call runs here, as a local task). Panics naming `call` if no runtime
/// runs or the locale does not exist.
#[track_caller]
fn engine_for(call: &str, locale: usize) -> Option<Arc<Engine>> {
    let e = engine();
    if e.is_none() {
        require_runtime(call, locale);
    }
    let n = e.as_ref().map_or(1, |e| e.locales());
    if locale >= n {
        let hint = if n == 1 {
            format!("; {SEVERAL_LOCALES}")
        } else {
            String::new()
        };
        panic!(
            "cantus::{call}: locale {locale} does not exist (the job has {}){hint}",
            Locales(n)
        );
    }
    e.filter(|e| e.here() != locale)
}

/// Panics, naming `call` and how to start a runtime, if none runs (a call
/// to `locale` could not run anywhere).
#[track_caller]
fn require_runtime(call: &str, locale: usize) {
    if crate::sched::Registry::current().is_some() {
        return;
    }
    let hint = if locale > 0 {
        format!(" (locale {locale} exists only in a job of several locales: {SEVERAL_LOCALES})")
    } else {
        String::new()
    };
    panic!("{}{hint}", Error::no_runtime(call));
}

/// The error for arguments that could not be encoded.
fn unencodable(name: &str, err: impl std::fmt::Display) -> Error {
    Error::new(
        ErrorKind::RemoteRejected,
        format!("cantus: the arguments of {name} could not be encoded: {err}"),
    )
}

/// Sends a request whose reply `decode` will read; the engine goes into
/// the call's ticket.
fn send_request<T>(
    e: Arc<Engine>,
    (locale, id, name): (usize, u64, &'static str),
    args: Result<&[&[u8]], Error>,
    decode: fn(&[u8]) -> Result<T, String>,
) -> RemoteHandle<T> {
    let inner = match args.and_then(|a| e.request(locale, id, a, true)) {
        Ok(token) => Pending::Remote(
            Ticket {
                engine: e,
                token: token.expect("a reply slot was asked for"),
                answered: false,
            },
            PhantomData,
        ),
        Err(err) => Pending::Failed(err),
    };
    RemoteHandle {
        inner,
        locale,
        name,
        decode,
    }
}

/// Runs `body` as a task here, as a remote call to this locale would.
fn run_here<T: Send + 'static>(
    (locale, id, name): (usize, u64, &'static str),
    body: impl FnOnce() -> T + Send + 'static,
    decode: fn(&[u8]) -> Result<T, String>,
) -> RemoteHandle<T> {
    let slot = Arc::new(SyncVar::new());
    let s = slot.clone();
    crate::par::begin(move || {
        let r = run_handler(id, body).map_err(|p| {
            Error::new(
                ErrorKind::RemotePanic,
                format!(
                    "cantus: remote call {name} panicked on locale {locale}: {}",
                    handlers::panic_message(&*p)
                ),
            )
        });
        s.write_ef(r);
    });
    RemoteHandle {
        inner: Pending::Local(slot),
        locale,
        name,
        decode,
    }
}

fn decode_serde<T: serde::de::DeserializeOwned>(bytes: &[u8]) -> Result<T, String> {
    codec::from_bytes(bytes).map_err(|e| e.to_string())
}

fn decode_pod<T: bytemuck::Pod>(bytes: &[u8]) -> Result<T, String> {
    if bytes.len() != std::mem::size_of::<T>() {
        return Err(format!(
            "{} bytes where a {}-byte value was expected",
            bytes.len(),
            std::mem::size_of::<T>()
        ));
    }
    Ok(bytemuck::pod_read_unaligned(bytes))
}

/// Runs `call` as a task on `locale` and returns a handle to its result.
/// Blocks only while the transport has no room (and then it polls).
///
/// Panics if `locale` is not `0..num_locales()`, or if no runtime runs.
#[track_caller]
pub fn on<R: RegisteredCall>(locale: usize, call: R) -> RemoteHandle<R::Output> {
    let who = (locale, R::ID, R::NAME);
    match engine_for("on", locale) {
        Some(e) => match encode::encode_for(&call, wire::HEADER_LEN, locale) {
            Ok(args) => args.with_parts(&[], |parts| {
                send_request(e, who, Ok(parts), decode_serde::<R::Output>)
            }),
            Err(err) => send_request(
                e,
                who,
                Err(unencodable(R::NAME, err)),
                decode_serde::<R::Output>,
            ),
        },
        None => run_here(who, move || call.run(), decode_serde::<R::Output>),
    }
}

/// Runs a plain-data call as a task on `locale`: like [`on`], but the
/// call and its result travel as their bytes (`bytemuck::Pod`), copied
/// into the transport's ring and out of it, with no encoding.
///
/// Panics if `locale` is not `0..num_locales()`, or if no runtime runs.
#[track_caller]
pub fn on_pod<R: RegisteredPodCall>(locale: usize, call: R) -> RemoteHandle<R::Output> {
    let who = (locale, R::ID, R::NAME);
    match engine_for("on_pod", locale) {
        Some(e) => send_request(
            e,
            who,
            Ok(&[bytemuck::bytes_of(&call)]),
            decode_pod::<R::Output>,
        ),
        None => run_here(who, move || call.run(), decode_pod::<R::Output>),
    }
}

/// Runs `call` as a task on `locale`, detached: nothing waits for it, and
/// a panic there is reported on that locale's standard error. The job
/// does not end before it ran.
///
/// Returns an error if the request could not be sent (the locale is gone).
///
/// Panics if `locale` is not `0..num_locales()`, or if no runtime runs.
#[track_caller]
pub fn begin_on<R: RegisteredCall>(locale: usize, call: R) -> Result<(), Error> {
    match engine_for("begin_on", locale) {
        Some(e) => {
            let args = encode::encode_for(&call, wire::HEADER_LEN, locale)
                .map_err(|err| unencodable(R::NAME, err))?;
            args.with_parts(&[], |parts| e.request(locale, R::ID, parts, false))
                .map(|_| ())
        }
        None => {
            crate::par::begin(move || {
                call.run();
            });
            Ok(())
        }
    }
}

/// [`begin_on`] for a plain-data call (see [`on_pod`]).
///
/// Panics if `locale` is not `0..num_locales()`, or if no runtime runs.
#[track_caller]
pub fn begin_on_pod<R: RegisteredPodCall>(locale: usize, call: R) -> Result<(), Error> {
    match engine_for("begin_on_pod", locale) {
        Some(e) => e
            .request(locale, R::ID, &[bytemuck::bytes_of(&call)], false)
            .map(|_| ()),
        None => {
            crate::par::begin(move || {
                call.run();
            });
            Ok(())
        }
    }
}
