//! Parallel constructs over the scheduler: `begin`, `join`, `cobegin`,
//! task lists, `coforall`, scopes and task groups.

mod begin;
mod cobegin;
mod coforall;
mod completion;
mod forall;
mod group;
mod join;
mod outside_call;
mod scope;
pub(crate) mod stack_job;

pub use begin::{begin, try_begin};
pub use cobegin::TaskList;
pub use coforall::coforall;
pub use forall::{Forall, Schedule, forall, forall_chunks_mut, forall_mut};
pub use group::TaskGroup;
pub use join::join;
pub use scope::{Scope, scope};

pub(crate) use outside_call::{on_worker, run_as_task};
