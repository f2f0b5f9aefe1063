//! Fibers: the stacks tasks run on and the guard that catches overflows.
//! Switching itself is corosensei's (a few nanoseconds per switch); the
//! carriers that switch live in `sched/worker.rs`. `README.md` beside this
//! file states the stack rules.

pub(crate) mod guard;
pub(crate) mod stack;
