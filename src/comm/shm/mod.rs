//! The shared-memory substrate for locales on one node: one anonymous
//! shared region per job ([`region`]), futex words in it ([`futex`]), and
//! single-producer single-consumer rings of variable-length frames
//! ([`ring`]). `README.md` beside this file draws the region's layout and
//! states the ring's protocol: invariants, frame format, wrap rule,
//! validation and memory orderings.

// The transport that will use this layer is not written yet.
#![allow(dead_code)]

pub(crate) mod futex;
pub(crate) mod region;
pub(crate) mod ring;
