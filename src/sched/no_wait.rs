//! Code that must not wait.
//!
//! A remote call declared inline (`Remote::INLINE`) runs inside the poll
//! that received it, on whatever thread polls, holding the driver's poll
//! token (GASNet's rule for active-message handlers). Were it to wait (on
//! a sync variable, a join, a reply, a sleep, a yield, a full ring), it
//! would keep every other thread of its locale from polling, and so
//! possibly from delivering the very thing it waits for. So its run is a
//! *no-wait region*: every place where cantus would make the caller wait
//! asks [`check_wait`] (or [`check_send`]) first, and in such a region that panics with a message
//! naming the call and what it tried, before anything was changed. The
//! handler's own panic catch turns that into the caller's error.
//!
//! The check costs a load, and only on paths that are about to wait (or
//! to send to another locale), or that give the core away (`yield_now`,
//! where it reads the worker state the yield reads anyway).

use super::WorkerLocal;
use std::cell::Cell;

thread_local! {
    /// The inline call running on this thread, if it is no worker (a
    /// worker keeps it in its `WorkerLocal`).
    static NO_WAIT: Cell<Option<&'static str>> = const { Cell::new(None) };
}

/// Where the calling thread keeps its inline call: its worker's state, or
/// this module's thread-local.
fn with_cell<R>(f: impl FnOnce(&Cell<Option<&'static str>>) -> R) -> Option<R> {
    match WorkerLocal::current() {
        Some(l) => Some(f(&l.no_wait)),
        None => NO_WAIT.try_with(f).ok(),
    }
}

/// While alive, the calling thread runs the inline call `name`: anything
/// that would wait panics instead.
pub(crate) struct NoWait {
    outer: Option<&'static str>,
}

impl NoWait {
    /// Enters a no-wait region for the inline call `name`.
    pub(crate) fn enter(name: &'static str) -> NoWait {
        NoWait {
            outer: with_cell(|c| c.replace(Some(name))).flatten(),
        }
    }
}

impl Drop for NoWait {
    fn drop(&mut self) {
        with_cell(|c| c.set(self.outer));
    }
}

/// The inline call whose no-wait region the calling thread is in.
pub(crate) fn inline_call() -> Option<&'static str> {
    with_cell(Cell::get).flatten()
}

/// Panics if the calling thread is in a no-wait region; `op` names the
/// operation that was about to wait (`SyncVar::read_fe`, `yield_now`).
#[track_caller]
pub(crate) fn check_wait(op: &str) {
    if let Some(name) = inline_call() {
        refuse_wait(name, op);
    }
}

/// Panics: the inline call `name` was about to wait in `op` (for a caller
/// that found `name` itself, `yield_now` in a worker's state).
#[cold]
#[track_caller]
pub(crate) fn refuse_wait(name: &str, op: &str) -> ! {
    refuse(name, format_args!("it would have waited in {op}"))
}

/// Panics if the calling thread is in a no-wait region: it was about to
/// send a frame to locale `dest` (a send may wait for room).
#[track_caller]
pub(crate) fn check_send(dest: usize) {
    if let Some(name) = inline_call() {
        refuse(name, format_args!("it tried to send to locale {dest}"));
    }
}

/// Panics if the calling thread is in a no-wait region: `op` is a call
/// that only a task may make (a Chant send names the task that sent it,
/// and an inline call runs in none, whatever task's poll ran it).
#[track_caller]
pub(crate) fn check_task(op: &str) {
    if let Some(name) = inline_call() {
        refuse(
            name,
            format_args!(
                "it called {op}, which only a task may call (a Chant message names the task \
                 that sent it), and an inline call runs in no task (it may start one with \
                 cantus::begin)"
            ),
        );
    }
}

#[cold]
#[inline(never)]
#[track_caller]
fn refuse(name: &str, what: std::fmt::Arguments<'_>) -> ! {
    panic!(
        "cantus: remote call {name} is declared inline (`const INLINE: bool = true`: it runs \
         inside the poll that received it), so it must neither wait nor talk to other locales, \
         but {what}; without INLINE it runs as a task and may do both"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn regions_nest_and_end() {
        check_wait("wait");
        {
            let _outer = NoWait::enter("m::A");
            assert_eq!(inline_call(), Some("m::A"));
            {
                let _inner = NoWait::enter("m::B");
                assert_eq!(inline_call(), Some("m::B"));
            }
            assert_eq!(inline_call(), Some("m::A"));
            let e = std::panic::catch_unwind(|| check_wait("SyncVar::read_fe")).unwrap_err();
            let msg = crate::error::panic_text(&*e).unwrap().to_string();
            assert!(
                msg.contains("m::A") && msg.contains("waited in SyncVar::read_fe"),
                "{msg}"
            );
            let e = std::panic::catch_unwind(|| check_send(3)).unwrap_err();
            let msg = crate::error::panic_text(&*e).unwrap().to_string();
            assert!(
                msg.contains("m::A") && msg.contains("send to locale 3"),
                "{msg}"
            );
            let e = std::panic::catch_unwind(|| check_task("chant::send")).unwrap_err();
            let msg = crate::error::panic_text(&*e).unwrap().to_string();
            assert!(
                msg.contains("m::A") && msg.contains("called chant::send, which only a task"),
                "{msg}"
            );
        }
        assert_eq!(inline_call(), None);
        check_wait("wait");
        check_send(1);
        check_task("chant::send");
    }
}
