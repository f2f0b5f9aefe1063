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
    /// allows; detected before any thread starts (seed 000, section 4.2).
    TooManyThreads,
    /// A tasking call was made while no runtime is running.
    NoRuntime,
    /// A runtime is already running in this process; cantus runs one at a
    /// time, as Chapel's tasking layer does.
    AlreadyRunning,
    /// The operating system refused a resource (a thread, memory).
    Os,
    /// A write-once variable was written a second time.
    AlreadyWritten,
}

/// An error with a message a user can act on.
#[derive(Clone, Debug)]
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
                "cantus::{call} called with no runtime running: start one with \
                 cantus::Runtime::new() or cantus::Runtime::builder().build() first"
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

impl std::error::Error for Error {}
