//! Full/empty synchronization, native to the tasking layer (seed 000,
//! section 6): [`SyncVar`] (full/empty variables), [`SingleVar`] (write once)
//! and end counts. All are built on one wait word (`word.rs`) whose
//! protocol and orderings `README.md` states.

pub(crate) mod end_count;
mod fe;
mod single;
pub(crate) mod wait;
pub(crate) mod word;

pub use fe::SyncVar;
pub use single::SingleVar;

#[cfg(all(test, loom))]
mod loom_tests;
