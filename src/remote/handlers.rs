//! Remote calls and the table of handlers: what a request may run.
//!
//! A remote call is a type implementing [`Remote`]; [`remote!`] registers
//! it at link time (the `inventory` crate: no table kept by hand) under a
//! name made of the module path where it is registered and the type as
//! written, and an id that is a hash of that name. Every locale runs the
//! same binary, so every locale has the same table; start-up checks that
//! they agree, and building the table checks that no two handlers share
//! an id.
//!
//! [`remote!`]: crate::remote

use super::encode::Encoding;
use super::engine::Body;
use super::wire::Status;
use crate::error::{Error, ErrorKind};
use serde::Serialize;
use serde::de::DeserializeOwned;
use std::any::Any;
use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};
use std::panic::{self, AssertUnwindSafe};
use std::sync::OnceLock;

/// A call that can run on another locale: its fields are the arguments,
/// `run` the body, `Output` the result. Register it with
/// [`remote!`](crate::remote!), then run it with [`on`](crate::on) or
/// [`begin_on`](crate::begin_on).
///
/// Every locale runs the same program (the same binary), so a call
/// registered in one is registered in all.
///
/// Arguments and results of any size travel (up to 4 GiB encoded; past
/// half a ring, in pieces). A `Vec` (or slice) of `u8`, `i8`, `f32` or
/// `f64` travels as its bytes, one copy each way more than the transport's;
/// serde encodes any other `Vec<T>` element by element, which caps a
/// large one well under a memory copy's speed. Give large arrays of
/// plain data the type [`Bulk<T>`](crate::Bulk): they travel as their
/// bytes, whatever the plain type, with the fewest copies and received
/// in place (`BENCHMARKS.md`, issue 28). A debug build says so when it
/// sees an array go element by element.
///
/// ```
/// use serde::{Deserialize, Serialize};
///
/// #[derive(Serialize, Deserialize)]
/// struct Square(u64);
///
/// impl cantus::Remote for Square {
///     type Output = u64;
///     fn run(self) -> u64 {
///         self.0 * self.0
///     }
/// }
/// cantus::remote!(Square);
///
/// let rt = cantus::Runtime::builder().workers(2).build().unwrap();
/// let here = cantus::here();
/// assert_eq!(rt.block_on(|| cantus::on(here, Square(7)).join()).unwrap(), 49);
/// ```
///
/// A call that was never registered is a compile-time error:
///
/// ```compile_fail
/// # use serde::{Deserialize, Serialize};
/// #[derive(Serialize, Deserialize)]
/// struct Unregistered;
/// impl cantus::Remote for Unregistered {
///     type Output = ();
///     fn run(self) {}
/// }
/// let _ = cantus::on(0, Unregistered).join();
/// ```
///
/// So is a closure: its code and what it captures cannot travel to
/// another locale (use [`remote_fn!`](crate::remote_fn) instead):
///
/// ```compile_fail
/// let _ = cantus::on(1, || 6 * 7).join();
/// ```
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not a remote call: it does not implement `cantus::Remote`",
    label = "not a remote call",
    note = "a remote call is a value of a type that implements `cantus::Remote` (a serde type \
            whose fields are the call's arguments), registered with `cantus::remote!`",
    note = "to run a plain function on another locale, declare it inside `cantus::remote_fn! \
            {{ ... }}`: then `f(args)` builds the call instead of running `f` here; a closure \
            cannot be a remote call (its code and what it captures cannot travel)"
)]
pub trait Remote: Serialize + DeserializeOwned + Send + 'static {
    /// What the call returns to its caller.
    type Output: Serialize + DeserializeOwned + Send + 'static;
    /// Declares that [`run`](Self::run) never waits and never talks to
    /// another locale, so that the locale that receives the call may run
    /// it inside the poll that found it, on whatever thread polled, and
    /// send its result back at once, with no task in between (a short
    /// lookup, an update, a counter: GASNet's rule for active-message
    /// handlers). The round trip is then shorter by a task's start
    /// (`BENCHMARKS.md`, issue 15).
    ///
    /// Such a call may compute, read and write memory, use atomics and
    /// PGAS puts and gets, and spawn tasks (`cantus::begin`), which may do
    /// anything. It must not block on a sync variable, join, sleep, yield,
    /// or send to another locale (a remote call, a Chant message): it
    /// would hold up every other arrival of its locale meanwhile. Any of
    /// those panics inside it, naming the call and the operation, and the
    /// caller's `join` returns that panic as its error. A long
    /// computation is allowed but delays the locale's other arrivals by as
    /// long. The default, `false`, runs the call as a task, which may do
    /// all of the above.
    ///
    /// ```
    /// use serde::{Deserialize, Serialize};
    /// use std::sync::atomic::{AtomicU64, Ordering};
    ///
    /// static HITS: AtomicU64 = AtomicU64::new(0);
    ///
    /// /// Counts a hit where it runs; never waits.
    /// #[derive(Serialize, Deserialize)]
    /// struct Hit;
    /// impl cantus::Remote for Hit {
    ///     type Output = u64;
    ///     const INLINE: bool = true;
    ///     fn run(self) -> u64 {
    ///         HITS.fetch_add(1, Ordering::Relaxed) + 1
    ///     }
    /// }
    /// cantus::remote!(Hit);
    ///
    /// let rt = cantus::Runtime::builder().workers(2).build().unwrap();
    /// assert_eq!(rt.block_on(|| cantus::on(cantus::here(), Hit).join()).unwrap(), 1);
    /// ```
    const INLINE: bool = false;
    /// The body, run as a task on the target locale (it may block on sync
    /// variables, spawn tasks, and make remote calls of its own), or, for
    /// a call declared [`INLINE`](Self::INLINE), inside the poll that
    /// received it.
    fn run(self) -> Self::Output;
}

/// What the arguments and the result of a remote call must be: values
/// that travel to another locale encoded (serde) and are used by a task
/// there (`Send + 'static`). Every such type has it; `remote_fn!` asks
/// for it of each argument and of the result, so that a type that is not
/// one is named with what to do.
#[doc(hidden)]
#[diagnostic::on_unimplemented(
    message = "`{Self}` cannot be an argument or the result of a remote call: it is not \
               `Serialize + DeserializeOwned + Send + 'static`",
    label = "cannot travel to another locale",
    note = "derive `serde::Serialize` and `serde::Deserialize` for it (the calling crate needs \
            `serde` with its `derive` feature), or pass a serde type that carries what it holds: \
            a remote call's arguments and result travel encoded to the locale that runs it"
)]
pub trait RemoteData: Serialize + DeserializeOwned + Send + 'static {}

impl<T: Serialize + DeserializeOwned + Send + 'static> RemoteData for T {}

/// A remote call of plain data: the call and its result are
/// `bytemuck::Pod`, so they travel as their bytes, copied into the ring
/// and out of it, with no encoding (a fixed-size call with no pointers).
/// Register it with [`remote_pod!`](crate::remote_pod), run it with
/// [`on_pod`](crate::on_pod) or [`begin_on_pod`](crate::begin_on_pod).
///
/// ```
/// #[derive(Clone, Copy, bytemuck::Pod, bytemuck::Zeroable)]
/// #[repr(C)]
/// struct Axpy { a: f64, x: f64, y: f64 }
///
/// impl cantus::remote::RemotePod for Axpy {
///     type Output = f64;
///     fn run(self) -> f64 {
///         self.a * self.x + self.y
///     }
/// }
/// cantus::remote_pod!(Axpy);
///
/// let rt = cantus::Runtime::builder().workers(2).build().unwrap();
/// let call = Axpy { a: 2.0, x: 3.0, y: 1.0 };
/// assert_eq!(rt.block_on(|| cantus::remote::on_pod(cantus::here(), call).join()).unwrap(), 7.0);
/// ```
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not a plain-data remote call: it does not implement `cantus::remote::RemotePod`",
    label = "not a plain-data remote call",
    note = "implement `cantus::remote::RemotePod` for a `bytemuck::Pod` type and register it with \
            `cantus::remote_pod!`; for a call whose arguments are serde types, use \
            `cantus::on` with `cantus::remote_fn!`"
)]
pub trait RemotePod: bytemuck::Pod + Send {
    /// What the call returns to its caller.
    type Output: bytemuck::Pod + Send;
    /// As [`Remote::INLINE`]: the call never waits nor talks to another
    /// locale, and runs inside the poll that received it.
    const INLINE: bool = false;
    /// The body, run as a task on the target locale (or inside the poll,
    /// if [`INLINE`](Self::INLINE)).
    fn run(self) -> Self::Output;
}

/// A registered plain-data call (implemented by
/// [`remote_pod!`](crate::remote_pod)): what [`on_pod`](super::on_pod)
/// and [`begin_on_pod`](super::begin_on_pod) take.
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not a registered plain-data remote call",
    label = "not registered",
    note = "register it with `cantus::remote_pod!`, at module level, after implementing \
            `cantus::remote::RemotePod` for it"
)]
pub trait RegisteredPodCall: RemotePod {
    /// As [`RegisteredCall::NAME`].
    const NAME: &'static str;
    /// As [`RegisteredCall::ID`].
    const ID: u64 = id_of(Self::NAME);
}

/// A registered remote call (implemented by [`remote!`](crate::remote!)
/// and [`remote_fn!`](crate::remote_fn)): what [`on`](super::on),
/// [`begin_on`](super::begin_on) and
/// [`coforall_locales`](super::coforall_locales) take.
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not a registered remote call",
    label = "not a registered remote call",
    note = "a remote call is a value of a type that implements `cantus::Remote` (a serde type \
            whose fields are the call's arguments), registered with `cantus::remote!` at module \
            level",
    note = "to run a plain function on another locale, declare it inside `cantus::remote_fn! \
            {{ ... }}`: then `f(args)` builds the call instead of running `f` here; a closure \
            cannot be a remote call (its code and what it captures cannot travel)"
)]
pub trait RegisteredCall: Remote {
    /// The handler's name: the module where it was registered, and the
    /// type as written there.
    const NAME: &'static str;
    /// The handler's id: a hash of its name.
    const ID: u64 = id_of(Self::NAME);
}

/// FNV-1a, 64 bits: the id of a handler name (const, so ids are fixed at
/// compile time).
pub(crate) const fn id_of(name: &str) -> u64 {
    let b = name.as_bytes();
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    let mut i = 0;
    while i < b.len() {
        h ^= b[i] as u64;
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
        i += 1;
    }
    h
}

/// How a handler's run ended.
pub(crate) enum Outcome {
    /// Done: the encoded result is in the buffer the run was given.
    Done,
    /// Done: the result is the `len` bytes at `at`, which the handler lends
    /// (a raw handler's, such as a get's bytes in the global memory's
    /// segment) until its reply was sent, for as long as the runtime runs:
    /// whoever ran it sends the reply from them, at once or (a result
    /// longer than a poll sends) from a task. Saves the copy into the
    /// result buffer, and for a long one the copy a task would need.
    Lent { at: *const u8, len: usize },
    /// The handler panicked: its message.
    Panicked(String),
    /// The arguments could not be decoded (or the result encoded): why.
    Rejected(String),
}

impl Outcome {
    /// The reply's status.
    pub(crate) fn status(&self) -> Status {
        match self {
            Outcome::Done | Outcome::Lent { .. } => Status::Done,
            Outcome::Panicked(_) => Status::Panicked,
            Outcome::Rejected(_) => Status::Rejected,
        }
    }

    /// The reply's payload: `result` (the encoded result) if the run was
    /// done, the bytes lent if it lent them, else the message saying why
    /// not; handed to `f` after `prefix`, as the parts of one frame.
    pub(crate) fn with_payload<R>(
        &self,
        result: &Encoding,
        prefix: &[&[u8]],
        f: impl FnOnce(&[&[u8]]) -> R,
    ) -> R {
        let bytes: &[u8] = match self {
            Outcome::Done => return result.with_parts(prefix, f),
            // SAFETY: the handler lends `len` bytes at `at` until the reply
            // is sent, which is what the caller does with this slice (the
            // contract of `Lent`).
            Outcome::Lent { at, len } => unsafe { std::slice::from_raw_parts(*at, *len) },
            Outcome::Panicked(msg) | Outcome::Rejected(msg) => msg.as_bytes(),
        };
        super::encode::with_head(prefix, &[bytes], f)
    }

    /// The length of the reply's payload ([`with_payload`](Self::with_payload)).
    pub(crate) fn payload_len(&self, result: &Encoding) -> usize {
        match self {
            Outcome::Done => result.len(),
            Outcome::Lent { len, .. } => *len,
            Outcome::Panicked(msg) | Outcome::Rejected(msg) => msg.len(),
        }
    }

    /// What the outcome says, as plain values that may go to another
    /// thread (an `Outcome` may name lent bytes, so it is not `Send`);
    /// [`Said::outcome`] makes it again.
    pub(crate) fn said(self) -> Said {
        match self {
            Outcome::Done => Said::Done,
            Outcome::Lent { at, len } => Said::Lent(at as usize, len),
            Outcome::Panicked(msg) => Said::Panicked(msg),
            Outcome::Rejected(msg) => Said::Rejected(msg),
        }
    }
}

/// An [`Outcome`] as plain values ([`Outcome::said`]), to reply from
/// another thread: lent bytes stay lent for as long as the runtime runs
/// (the contract of `Outcome::Lent`).
pub(crate) enum Said {
    Done,
    Lent(usize, usize),
    Panicked(String),
    Rejected(String),
}

impl Said {
    pub(crate) fn outcome(self) -> Outcome {
        match self {
            Said::Done => Outcome::Done,
            Said::Lent(at, len) => Outcome::Lent {
                at: at as *const u8,
                len,
            },
            Said::Panicked(msg) => Outcome::Panicked(msg),
            Said::Rejected(msg) => Outcome::Rejected(msg),
        }
    }
}

/// A handler in the link-time table.
#[doc(hidden)]
pub struct Handler {
    pub(crate) name: &'static str,
    pub(crate) id: u64,
    /// Runs the call whose arguments it is given; writes the encoded
    /// result into the buffer (empty on entry), which the engine reuses
    /// from call to call.
    pub(crate) run: Run,
    /// Declared never to wait ([`Remote::INLINE`]): runs inside the poll.
    pub(crate) inline: bool,
}

impl Handler {
    /// The handler of `R`.
    pub const fn of<R: RegisteredCall>() -> Handler {
        Handler {
            name: R::NAME,
            id: R::ID,
            run: Run::Decoding(run_encoded::<R>),
            inline: R::INLINE,
        }
    }
}

impl Handler {
    /// A handler whose arguments and result are framed by hand (the
    /// crate's own calls, sent with `remote::on_raw`): `run` reads the
    /// arguments and writes the result's bytes. It must not panic (a
    /// malformed call is `Outcome::Rejected`): an inline one runs inside
    /// the poll, outside any panic catch of its own.
    pub(crate) const fn raw(
        name: &'static str,
        run: fn(&[u8], &mut Vec<u8>) -> Outcome,
        inline: bool,
    ) -> Handler {
        Handler {
            name,
            id: id_of(name),
            run: Run::Bytes(run),
            inline,
        }
    }

    /// The handler of the plain-data call `R`.
    pub const fn of_pod<R: RegisteredPodCall>() -> Handler {
        Handler {
            name: R::NAME,
            id: R::ID,
            run: Run::Decoding(run_pod::<R>),
            inline: R::INLINE,
        }
    }
}

inventory::collect!(Handler);

/// How a handler runs.
#[derive(Clone, Copy)]
pub(crate) enum Run {
    /// Reads the arguments' bytes as it runs (a hand-framed call).
    Bytes(fn(&[u8], &mut Vec<u8>) -> Outcome),
    /// Decodes the arguments first, and lets them go before the body
    /// runs: they may be a frame the transport lent (`Body::Lent`, a
    /// block of shared memory), and a body may wait for more from the
    /// same sender, whose large frames this one, kept, would slow down
    /// (`comm/shm/README.md`, "Rendezvous", rule L). Only the large
    /// `Bulk`s among them keep the frame, decoded in place (`bulk.rs`).
    Decoding(fn(Body<'_>, &mut Encoding) -> Outcome),
}

impl Handler {
    /// Runs the call with `args`, its result into `out`.
    pub(crate) fn run(&self, args: Body<'_>, out: &mut Encoding) -> Outcome {
        match self.run {
            Run::Bytes(run) => run(args.as_slice(), &mut out.bytes),
            Run::Decoding(run) => run(args, out),
        }
    }
}

/// Reads `R` from its bytes, runs it, writes its output's bytes to `out`.
fn run_pod<R: RegisteredPodCall>(args: Body<'_>, out: &mut Encoding) -> Outcome {
    let bytes = args.as_slice();
    if bytes.len() != std::mem::size_of::<R>() {
        return Outcome::Rejected(format!(
            "the arguments of {} are {} bytes, not the {} of the call",
            R::NAME,
            bytes.len(),
            std::mem::size_of::<R>()
        ));
    }
    let call: R = bytemuck::pod_read_unaligned(bytes);
    drop(args);
    // Not through `run_handler`: a plain-data call is never an SPMD body
    // (`coforall_locales` runs `Remote` calls), so it skips the hooks.
    match panic::catch_unwind(AssertUnwindSafe(|| call.run())) {
        Ok(result) => {
            out.bytes.extend_from_slice(bytemuck::bytes_of(&result));
            Outcome::Done
        }
        Err(p) => Outcome::Panicked(panic_message(&*p)),
    }
}

/// Decodes `R`, runs it, encodes its output into `out`.
fn run_encoded<R: RegisteredCall>(args: Body<'_>, out: &mut Encoding) -> Outcome {
    // In a lent frame, large `Bulk`s are decoded in place (and keep the
    // frame; the rest of it goes back once decoded).
    let decoded = match args {
        Body::Lent(frame, start) => {
            super::bulk::decode_in_place(frame, start, |b| super::codec::from_bytes::<R>(b))
        }
        args => super::codec::from_bytes(args.as_slice()),
    };
    let call: R = match decoded {
        Ok(c) => c,
        Err(e) => {
            return Outcome::Rejected(format!(
                "the arguments of {} could not be decoded: {e}",
                R::NAME
            ));
        }
    };
    match super::run_handler(R::ID, || call.run()) {
        Ok(result) => match super::encode::encode_into(&result, out, super::wire::HEADER_LEN) {
            Ok(()) => Outcome::Done,
            Err(e) => Outcome::Rejected(format!(
                "the result of {} could not be encoded: {e}",
                R::NAME
            )),
        },
        Err(p) => Outcome::Panicked(panic_message(&*p)),
    }
}

/// The text of a panic payload, for a remote caller.
pub(crate) fn panic_message(p: &(dyn Any + Send)) -> String {
    crate::error::panic_text(p)
        .unwrap_or("a panic with a non-string payload")
        .to_string()
}

/// The handlers of this program, by id.
pub(crate) struct Table {
    by_id: HashMap<u64, &'static Handler, BuildHasherDefault<IdHasher>>,
}

/// Hashes a handler id to itself: ids are already FNV-1a hashes of the
/// handlers' names (and the table refuses two with one id), so hashing
/// them again (SipHash, the default) would only cost every request's
/// lookup time.
#[derive(Default)]
pub(crate) struct IdHasher(u64);

impl Hasher for IdHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        // Only `write_u64` is used (the key is a u64); any other input is
        // folded in byte by byte, as FNV-1a does.
        for &b in bytes {
            self.0 = (self.0 ^ b as u64).wrapping_mul(0x0000_0100_0000_01b3);
        }
    }

    fn write_u64(&mut self, id: u64) {
        self.0 = id;
    }
}

impl Table {
    /// The handler with this id.
    #[inline]
    pub(crate) fn get(&self, id: u64) -> Option<&'static Handler> {
        self.by_id.get(&id).copied()
    }

    /// Every handler's name, sorted: what locales compare at start-up.
    pub(crate) fn names(&self) -> Vec<&'static str> {
        let mut v: Vec<_> = self.by_id.values().map(|h| h.name).collect();
        v.sort_unstable();
        v
    }

    /// Builds the table from `handlers`; two with one id are an error
    /// naming both.
    pub(crate) fn build(
        handlers: impl IntoIterator<Item = &'static Handler>,
    ) -> Result<Table, Error> {
        let mut by_id: HashMap<u64, &'static Handler, BuildHasherDefault<IdHasher>> =
            HashMap::default();
        for h in handlers {
            if let Some(other) = by_id.insert(h.id, h) {
                let what = if other.name == h.name {
                    format!(
                        "{} is registered twice (remove one of the cantus::remote! lines)",
                        h.name
                    )
                } else {
                    format!(
                        "{} and {} have the same handler id {:#x} (rename one of them)",
                        other.name, h.name, h.id
                    )
                };
                return Err(Error::new(
                    ErrorKind::InvalidConfig,
                    format!("cantus: {what}"),
                ));
            }
        }
        Ok(Table { by_id })
    }
}

/// The program's table, built once.
pub(crate) fn table() -> Result<&'static Table, Error> {
    static TABLE: OnceLock<Result<Table, Error>> = OnceLock::new();
    TABLE
        .get_or_init(|| Table::build(inventory::iter::<Handler>))
        .as_ref()
        .map_err(Clone::clone)
}

/// Compares another locale's handler names with ours; a difference is an
/// error naming the handlers that differ.
pub(crate) fn check_same(ours: &[&str], theirs: &[String], locale: usize) -> Result<(), Error> {
    let only_ours: Vec<&str> = ours
        .iter()
        .copied()
        .filter(|n| !theirs.iter().any(|t| t == n))
        .collect();
    let only_theirs: Vec<&str> = theirs
        .iter()
        .map(String::as_str)
        .filter(|t| !ours.contains(t))
        .collect();
    if only_ours.is_empty() && only_theirs.is_empty() {
        return Ok(());
    }
    Err(Error::new(
        ErrorKind::InvalidConfig,
        format!(
            "cantus: locale {locale} has other remote handlers than locale 0 \
             (only on locale 0: [{}]; only on locale {locale}: [{}]); \
             every locale must run the same binary",
            only_ours.join(", "),
            only_theirs.join(", ")
        ),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fake(name: &'static str, id: u64) -> &'static Handler {
        fn run(_: &[u8], _: &mut Vec<u8>) -> Outcome {
            Outcome::Done
        }
        Box::leak(Box::new(Handler {
            name,
            id,
            run: Run::Bytes(run),
            inline: false,
        }))
    }

    #[test]
    fn ids_are_fnv1a_of_the_name() {
        assert_eq!(id_of(""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(id_of("a"), 0xaf63_dc4c_8601_ec8c);
        assert_ne!(id_of("m::A"), id_of("m::B"));
    }

    #[test]
    fn duplicate_ids_are_errors_naming_both() {
        let e = Table::build([fake("m::A", 1), fake("m::B", 1)])
            .err()
            .unwrap();
        let msg = e.to_string();
        assert!(msg.contains("m::A") && msg.contains("m::B"), "{msg}");
        let e = Table::build([fake("m::A", 1), fake("m::A", 1)])
            .err()
            .unwrap();
        assert!(e.to_string().contains("registered twice"), "{e}");
        assert!(Table::build([fake("m::A", 1), fake("m::B", 2)]).is_ok());
    }

    #[test]
    fn a_different_table_is_an_error_naming_the_difference() {
        let ours = ["m::A", "m::B"];
        assert!(check_same(&ours, &["m::A".into(), "m::B".into()], 1).is_ok());
        let e = check_same(&ours, &["m::A".into(), "m::C".into()], 2).unwrap_err();
        let msg = e.to_string();
        assert!(
            msg.contains("[m::B]") && msg.contains("[m::C]") && msg.contains("locale 2"),
            "{msg}"
        );
    }
}
