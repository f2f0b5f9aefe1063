//! Parallel constructs over the scheduler: `begin`, `join`, `cobegin`,
//! task lists, `coforall`, scopes and task groups.

mod begin;
mod cobegin;
mod coforall;
mod group;
pub(crate) mod job;
mod join;
mod scope;

pub use begin::{begin, try_begin};
pub use cobegin::TaskList;
pub use coforall::coforall;
pub use group::TaskGroup;
pub use join::join;
pub use scope::{Scope, scope};
