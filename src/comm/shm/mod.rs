//! The shared-memory substrate for locales on one node: one anonymous
//! shared region per job ([`region`]), futex words in it ([`futex`]), and
//! single-producer single-consumer rings of variable-length frames
//! ([`ring`]); on them, the transport ([`transport`]: two rings per
//! ordered pair of locales, a doorbell per locale, and an area per pair
//! for large frames, [`rendezvous`]) and the start of a
//! job's locales ([`launch`]; what they run: [`program`]). `README.md` beside this file draws the region's layout and
//! states the ring's protocol: invariants, frame format, wrap rule,
//! validation and memory orderings.

#[cfg(not(loom))]
pub(crate) mod bench;
pub(crate) mod futex;
#[cfg(not(loom))]
pub(crate) mod launch;
#[cfg(not(loom))]
pub(crate) mod program;
pub(crate) mod region;
pub(crate) mod rendezvous;
pub(crate) mod ring;
#[cfg(not(loom))]
pub(crate) mod transport;
