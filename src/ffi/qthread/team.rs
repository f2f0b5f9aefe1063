//! Qthreads teams, as far as a Chapel-style shim and Qthreads programs
//! use them: `QTHREAD_SPAWN_NEW_TEAM` / `QTHREAD_SPAWN_NEW_SUBTEAM` (the
//! `qthread_fork_new_team*` / `*_new_subteam` macros), `qt_team_id`,
//! `qt_team_parent_id`, and the team's end.
//!
//! Every task is in a team: the default team (id 1, parent 0) unless it
//! was forked into a new team or subteam, or forked (by any qthread_fork
//! or qthread_spawn) by a task of another team, whose team it joins. A
//! new team's first task is its leader. As in Qthreads, the leader's
//! result is delivered only when every task of its team has finished,
//! and every subteam of it: a subteam counts as one member of its
//! parent team until its own leader's result is delivered. So reading a
//! team leader's return word waits for the whole team.
//!
//! A team task carries its team in the scheduler's per-task storage
//! (`sched::task_storage::attach`); tasks of the default team carry
//! nothing, and their forks pay one load to learn so.

use std::ffi::c_uint;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicUsize, Ordering};

use crate::sync::SingleVar;

/// `QTHREAD_DEFAULT_TEAM_ID`.
pub(crate) const DEFAULT_TEAM: u32 = 1;
/// `QTHREAD_NON_TEAM_ID`: no team (the default team's parent).
pub(crate) const NON_TEAM: u32 = 0;

/// The next team id (ids 0 and 1 are Qthreads' non-team and default).
static NEXT_ID: AtomicU32 = AtomicU32::new(2);

/// Whether any team was ever made in this process: until one is, every
/// task is in the default team and a fork needs no lookup.
static TEAMS_MADE: AtomicBool = AtomicBool::new(false);

/// A team made by `QTHREAD_SPAWN_NEW_TEAM` or `_NEW_SUBTEAM`.
pub(crate) struct Team {
    id: u32,
    parent_id: u32,
    /// The parent team, for a subteam of a team other than the default.
    parent: Option<Arc<Team>>,
    /// Members not yet finished: the leader, every other task forked
    /// into the team, and each live subteam.
    live: AtomicUsize,
    /// Written when `live` reaches 0; the leader waits on it.
    ended: SingleVar<()>,
}

impl Team {
    fn new(parent_id: u32, parent: Option<Arc<Team>>) -> Arc<Team> {
        if let Some(p) = &parent {
            p.join();
        }
        // Relaxed: a task of this team runs after this store on a path
        // that synchronizes (its fork), and only its forks read the flag
        // to find it.
        TEAMS_MADE.store(true, Ordering::Relaxed);
        // Relaxed: ids only need to be distinct. They wrap after 2^32 - 2
        // teams, skipping 0 and 1.
        let mut id = NEXT_ID.fetch_add(1, Ordering::Relaxed);
        while id <= DEFAULT_TEAM {
            id = NEXT_ID.fetch_add(1, Ordering::Relaxed);
        }
        Arc::new(Team {
            id,
            parent_id,
            parent,
            live: AtomicUsize::new(1), // the leader
            ended: SingleVar::new(),
        })
    }

    /// A member joins (counted when it is forked, so the team cannot end
    /// before it runs).
    fn join(&self) {
        // Relaxed: the forking member is itself counted, so `live` cannot
        // reach 0 meanwhile; `leave`'s AcqRel orders the end.
        self.live.fetch_add(1, Ordering::Relaxed);
    }

    /// A member has finished (its result delivered).
    fn leave(&self) {
        // AcqRel: the last leaver sees every member's writes before it
        // ends the team, and the leader's wait (on `ended`) sees them.
        if self.live.fetch_sub(1, Ordering::AcqRel) == 1 {
            let _ = self.ended.try_write(());
        }
    }
}

/// What a forked task is in its team.
pub(crate) enum Membership {
    /// The default team: nothing to track.
    Default,
    /// A member of a team (counted in it at the fork).
    Member(Arc<Team>),
    /// The first task of a new team or subteam.
    Leader(Arc<Team>),
}

/// The calling task's team, if it is not the default team.
fn current() -> Option<Arc<Team>> {
    crate::sched::task_storage::attached()?
        .downcast::<Team>()
        .ok()
}

/// Whether a fork made now, without a new team, joins no team: at once
/// while no team was ever made (no task can be in one), else when the
/// forker is in none.
pub(crate) fn forks_join_no_team() -> bool {
    // Relaxed: a task in a team was started after the team was made,
    // which its start orders after the store of TEAMS_MADE.
    !TEAMS_MADE.load(Ordering::Relaxed) || current().is_none()
}

/// The membership of a task forked now by the caller: in a new team
/// (`new_team`), a new subteam of the caller's team (`new_subteam`), or
/// the caller's own team.
pub(crate) fn for_fork(new_team: bool, new_subteam: bool) -> Membership {
    if new_team {
        return Membership::Leader(Team::new(NON_TEAM, None));
    }
    let here = current();
    if new_subteam {
        let parent_id = here.as_ref().map_or(DEFAULT_TEAM, |t| t.id);
        return Membership::Leader(Team::new(parent_id, here));
    }
    match here {
        Some(t) => {
            t.join();
            Membership::Member(t)
        }
        None => Membership::Default,
    }
}

impl Membership {
    /// Runs a task's body in its team: `body` computes the result and
    /// `deliver` hands it over. A leader delivers once its whole team has
    /// finished; a member when it has, and then leaves (on drop).
    pub(crate) fn run(self, body: impl FnOnce() -> u64, deliver: impl FnOnce(u64)) {
        match &self {
            Membership::Default => deliver(body()),
            Membership::Member(team) => {
                crate::sched::task_storage::attach(team.clone());
                deliver(body());
            }
            Membership::Leader(team) => {
                crate::sched::task_storage::attach(team.clone());
                let v = body();
                lead_out(team);
                deliver(v);
            }
        }
    }
}

/// A leader's end: it leaves its team and waits for the team to end. Never
/// inlined into `run`: the task may have moved to another worker during
/// its body (`qthread_migrate_to`), and the wait looks its worker up
/// afresh.
#[inline(never)]
fn lead_out(team: &Team) {
    team.leave();
    team.ended.read();
}

/// A membership ends when its task has finished, or was never forked
/// (the fork failed) or unwound: a member leaves its team, and a
/// subteam's leader leaves the parent team (after its own team ended
/// and its result was delivered, in `run`).
impl Drop for Membership {
    fn drop(&mut self) {
        match self {
            Membership::Default => {}
            Membership::Member(team) => team.leave(),
            Membership::Leader(team) => {
                if let Some(parent) = &team.parent {
                    parent.leave();
                }
            }
        }
    }
}

/// qt_team_id: the calling task's team id: 1 (the default team) unless
/// it is in a team made by `QTHREAD_SPAWN_NEW_TEAM` / `_NEW_SUBTEAM`; 1 in
/// the thread that started the runtime, 0 (no team) in other threads.
#[unsafe(no_mangle)]
pub extern "C" fn qt_team_id() -> c_uint {
    crate::ffi::error::guarded(NON_TEAM, team_id)
}

/// qt_team_parent_id: the id of the calling task's team's parent team: 0
/// for the default team and for teams made by `QTHREAD_SPAWN_NEW_TEAM`,
/// the forking task's team for a subteam.
#[unsafe(no_mangle)]
pub extern "C" fn qt_team_parent_id() -> c_uint {
    crate::ffi::error::guarded(NON_TEAM, parent_team_id)
}

/// `qt_team_id` (and `readstate(CURRENT_TEAM)`).
pub(crate) fn team_id() -> u32 {
    match current() {
        Some(t) => t.id,
        None if crate::query::current_worker().is_some()
            || crate::ffi::lifecycle::is_starter_thread() =>
        {
            DEFAULT_TEAM
        }
        None => NON_TEAM,
    }
}

/// `qt_team_parent_id` (and `readstate(PARENT_TEAM)`).
pub(crate) fn parent_team_id() -> u32 {
    current().map_or(NON_TEAM, |t| t.parent_id)
}
