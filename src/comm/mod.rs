//! The communication layer: how locales (processes of one job) talk.
//!
//! Transports live here and plug into the scheduler through the seam in
//! `sched/driver/` (a `Driver` the workers poll). A `Transport` trait
//! common to them will come; for now this holds the low layer of the
//! shared-memory transport ([`shm`]): the job's shared region, futex
//! words and single-producer single-consumer frame rings, on which the
//! request and reply networks of active messages will sit.

pub(crate) mod shm;
