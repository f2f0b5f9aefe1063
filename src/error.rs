//! The error type of every fallible cantus call.

use std::fmt;

/// What went wrong, for callers that want to branch on it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum ErrorKind {
    /// A configuration value (builder setting or environment variable) is
    /// not one the runtime accepts.
    InvalidConfig,
    /// The configuration asks for more threads than `CANTUS_MAX_THREADS`
    /// allows. This is checked before any thread starts, so a refused
    /// configuration leaves no threads behind.
    // (The thread limit as in Chapel's tasking layer: seed 000, section 4.2.)
    TooManyThreads,
    /// A tasking call was made while no runtime is running.
    NoRuntime,
    /// A runtime is already running in this process; cantus runs one at a
    /// time, as Chapel's tasking layer does. (On a test thread of `cargo
    /// test`, starting one waits for its turn instead, where waiting can
    /// help: `runtime/process_turn.rs`.)
    AlreadyRunning,
    /// The operating system refused a resource (a thread, memory).
    Os,
    /// A write-once variable was written a second time.
    AlreadyWritten,
    /// The job's locales could not start or work together: a locale could
    /// not be started, died, ran another binary, or sent something
    /// malformed. The message names the locale and what happened.
    Locale,
    /// A remote call panicked on the locale that ran it; the message is
    /// the panic's.
    RemotePanic,
    /// A locale refused a remote call (its arguments could not be
    /// decoded, or it knows no such handler); the message says why.
    RemoteRejected,
    /// A Chant message (`cantus::chant`) could not be sent or read: it is
    /// longer than a message between locales can carry, its destination
    /// task never existed, or its bytes do not decode as the type asked
    /// for. The message says which.
    Message,
    /// Memory shared between locales is not what this process expected: an
    /// inherited shared-memory region failed validation (wrong magic,
    /// version, job or size), or a ring in it holds a corrupt frame. It
    /// points at a mismatched binary, an environment inherited from another
    /// job, or shared memory overwritten by a bug.
    SharedMemory,
    /// The symmetric heap ([`pgas`](crate::pgas)) has no room for an
    /// allocation; the message says how many bytes were asked for, how
    /// many are left, and which setting raises the limit.
    HeapFull,
    /// A global-memory access ([`GlobalPtr`](crate::pgas::GlobalPtr)) falls
    /// outside its allocation, its locale's heap segment, or the job.
    OutOfBounds,
    /// A balanced computation ([`balance`](crate::balance)) failed: a
    /// piece of its work panicked (in `run`, `split` or `merge`), or a
    /// piece or result could not be decoded. The message names the locale
    /// and what happened; the computation's other pieces ran to their end
    /// and its result is lost.
    WorkFailed,
}

/// A count of locales as a message says it: "1 locale", "3 locales".
pub(crate) struct Locales(pub(crate) usize);

impl fmt::Display for Locales {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            1 => f.write_str("1 locale"),
            n => write!(f, "{n} locales"),
        }
    }
}

/// An error with a message a user can act on.
///
/// `{}` (Display) prints the message, a sentence saying what went wrong
/// and what to do about it; `{:?}` (Debug, which `unwrap` and `expect`
/// print) prints the same sentence after the [`ErrorKind`]:
///
/// ```
/// let e = cantus::Runtime::builder().ignore_environment().workers(0).build().err().unwrap();
/// assert_eq!(e.kind(), cantus::ErrorKind::InvalidConfig);
/// assert_eq!(
///     e.to_string(),
///     "the worker count 0 (Builder::workers) is not valid: cantus accepts a positive integer"
/// );
/// assert_eq!(
///     format!("{e:?}"),
///     "Error(InvalidConfig): the worker count 0 (Builder::workers) is not valid: \
///      cantus accepts a positive integer"
/// );
/// ```
#[derive(Clone)]
pub struct Error {
    kind: ErrorKind,
    message: String,
}

impl Error {
    pub(crate) fn new(kind: ErrorKind, message: impl Into<String>) -> Error {
        Error {
            kind,
            message: message.into(),
        }
    }

    pub(crate) fn no_runtime(call: &str) -> Error {
        Error::new(
            ErrorKind::NoRuntime,
            format!(
                "cantus::{call} called with no runtime running: wrap your program in \
                 cantus::run(|| ...) or start a cantus::Runtime first"
            ),
        )
    }

    /// What kind of error this is.
    pub fn kind(&self) -> ErrorKind {
        self.kind
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

/// The kind, then the message: `unwrap()` on a failed call prints a
/// sentence, not a struct dump.
impl fmt::Debug for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Error({:?}): {}", self.kind, self.message)
    }
}

impl std::error::Error for Error {}

/// The text of a panic payload (`panic!` with a literal or a format
/// string), if it has one.
pub(crate) fn panic_text(payload: &(dyn std::any::Any + Send)) -> Option<&str> {
    payload
        .downcast_ref::<&str>()
        .copied()
        .or_else(|| payload.downcast_ref::<String>().map(String::as_str))
}
