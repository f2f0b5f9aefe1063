//! Full/empty synchronization, native to the tasking layer (seed 000,
//! section 6): [`Sync`] (full/empty variables), [`Single`] (write once)
//! and end counts. All are built on one wait word (`word.rs`) whose
//! protocol and orderings `README.md` states.

pub(crate) mod end_count;
mod fe;
mod single;
pub(crate) mod wait;
pub(crate) mod word;

pub use fe::Sync;
pub use single::Single;

#[cfg(all(test, loom))]
mod loom_tests;
