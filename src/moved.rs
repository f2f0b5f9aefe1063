//! The old paths of names that moved when the API was grouped by concept
//! (issue 27; README, "Moved"): each still works, hidden from the docs,
//! and warns as deprecated where Rust allows it (functions, constants
//! and type aliases; a trait can only be re-exported, without a warning).
//! The crate root re-exports this file's items; nothing inside the crate
//! uses them.
//!
//! An old path warns; a program that denies warnings sees it:
//!
//! ```compile_fail
//! #![deny(deprecated)]
//! cantus::yield_now();
//! ```
//!
//! and the new path is clean:
//!
//! ```
//! #![deny(deprecated)]
//! cantus::task::yield_now();
//! ```

#![allow(deprecated)]

/// Moved to [`crate::config::Builder`].
#[deprecated(note = "moved to cantus::config::Builder")]
pub type Builder = crate::config::Builder;

/// Moved to [`crate::config::WaitPolicy`].
#[deprecated(note = "moved to cantus::config::WaitPolicy")]
pub type WaitPolicy = crate::config::WaitPolicy;

/// Moved to [`crate::config::DEFAULT_SPIN`].
#[deprecated(note = "moved to cantus::config::DEFAULT_SPIN")]
pub const DEFAULT_SPIN: u32 = crate::config::DEFAULT_SPIN;

/// Moved to [`crate::config::DEFAULT_STACK_SIZE`].
#[deprecated(note = "moved to cantus::config::DEFAULT_STACK_SIZE")]
pub const DEFAULT_STACK_SIZE: usize = crate::config::DEFAULT_STACK_SIZE;

/// Moved to [`crate::config::MIN_STACK_SIZE`].
#[deprecated(note = "moved to cantus::config::MIN_STACK_SIZE")]
pub const MIN_STACK_SIZE: usize = crate::config::MIN_STACK_SIZE;

/// Moved to [`crate::config::MAX_STACK_SIZE`].
#[deprecated(note = "moved to cantus::config::MAX_STACK_SIZE")]
pub const MAX_STACK_SIZE: usize = crate::config::MAX_STACK_SIZE;

/// Moved to [`crate::config::DEFAULT_MAX_THREADS`].
#[deprecated(note = "moved to cantus::config::DEFAULT_MAX_THREADS")]
pub const DEFAULT_MAX_THREADS: usize = crate::config::DEFAULT_MAX_THREADS;

/// Moved to [`crate::config::DEFAULT_DEADLOCK_MS`].
#[deprecated(note = "moved to cantus::config::DEFAULT_DEADLOCK_MS")]
pub const DEFAULT_DEADLOCK_MS: u64 = crate::config::DEFAULT_DEADLOCK_MS;

/// Moved to [`crate::config::DEFAULT_TRACE_EVENTS`].
#[deprecated(note = "moved to cantus::config::DEFAULT_TRACE_EVENTS")]
pub const DEFAULT_TRACE_EVENTS: usize = crate::config::DEFAULT_TRACE_EVENTS;

/// Moved to [`crate::config::DEFAULT_RING_BYTES`].
#[deprecated(note = "moved to cantus::config::DEFAULT_RING_BYTES")]
pub const DEFAULT_RING_BYTES: usize = crate::config::DEFAULT_RING_BYTES;

/// Moved to [`crate::config::DEFAULT_HEAP_BYTES`].
#[deprecated(note = "moved to cantus::config::DEFAULT_HEAP_BYTES")]
pub const DEFAULT_HEAP_BYTES: usize = crate::config::DEFAULT_HEAP_BYTES;

/// Moved to [`crate::config::DEFAULT_GRAIN`].
#[deprecated(note = "moved to cantus::config::DEFAULT_GRAIN")]
pub const DEFAULT_GRAIN: usize = crate::config::DEFAULT_GRAIN;

// The old task-control functions, hidden and deprecated at their other
// old path too (`cantus::query::yield_now`, ...).
pub use crate::query::{blocking, sleep, yield_now};

/// Moved to [`crate::task::OutsideActivity`].
#[deprecated(note = "moved to cantus::task::OutsideActivity")]
pub type OutsideActivity = crate::task::OutsideActivity;

/// Moved to [`crate::chant::TaskId`].
#[deprecated(note = "moved to cantus::chant::TaskId")]
pub type TaskId = crate::remote::chant::TaskId;

/// Moved to [`crate::remote::RemoteHandle`].
#[deprecated(note = "moved to cantus::remote::RemoteHandle")]
pub type RemoteHandle<T> = crate::remote::RemoteHandle<T>;

/// Moved to [`crate::remote::on_pod`].
#[deprecated(note = "moved to cantus::remote::on_pod")]
#[track_caller]
pub fn on_pod<R: crate::remote::RegisteredPodCall>(
    locale: usize,
    call: R,
) -> crate::remote::RemoteHandle<R::Output> {
    crate::remote::on_pod(locale, call)
}

/// Moved to [`crate::remote::begin_on_pod`].
#[deprecated(note = "moved to cantus::remote::begin_on_pod")]
#[track_caller]
pub fn begin_on_pod<R: crate::remote::RegisteredPodCall>(
    locale: usize,
    call: R,
) -> Result<(), crate::error::Error> {
    crate::remote::begin_on_pod(locale, call)
}

// Traits cannot be deprecated through a re-export: these only keep the
// old paths working.
pub use crate::remote::RegisteredCall as Registered;
pub use crate::remote::RegisteredPodCall as RegisteredPod;
pub use crate::remote::RemotePod;
/// The machinery behind [`remote!`](crate::remote!), not for users.
pub use crate::remote::handlers::Handler;
