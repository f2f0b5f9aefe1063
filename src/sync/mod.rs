//! Full/empty synchronization, native to the tasking layer (seed 000,
//! section 6): [`SyncVar`] (full/empty variables), [`SingleVar`] (write once)
//! and end counts, and the engine the C full/empty calls (`ffi/feb/`) use
//! too. Everything is built on one lock bit (`lock.rs`), one intrusive
//! waiter queue (`wait_queue.rs`), one wake path (`wait.rs`) and one set of
//! hand-off rules (`full_empty.rs`); `README.md` states the protocol and its
//! orderings.

pub(crate) mod end_count;
pub(crate) mod fast_empty;
mod fe;
pub(crate) mod full_empty;
pub(crate) mod lock;
mod single;
mod var;
pub(crate) mod wait;
pub(crate) mod wait_queue;
pub(crate) mod word;

pub use fe::SyncVar;
pub use single::SingleVar;

#[cfg(all(test, loom))]
mod loom_tests;
