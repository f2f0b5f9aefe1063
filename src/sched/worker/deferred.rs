//! Deferred finishes: the last act of a task that reports to a count
//! shared by many tasks (a Qthreads sinc that each spawned task submits
//! to) is held back on its worker while the worker goes straight on to
//! start another task of the same group, and made once for all of them
//! when it does anything else.
//!
//! Why: such a count is one cache line that every worker's tasks
//! decrement. With two workers running a group's tasks, each decrement
//! takes the line from the other worker (a transfer of 50-100 ns on the
//! project's VM), where a worker that runs a run of the group's tasks in
//! a row now reports the run with one.
//!
//! Rules (what makes holding a finish back harmless):
//!
//! - A finish is held only while its worker runs tasks of the same
//!   group back to back: a carrier makes it before starting a task of
//!   another group (`carrier_main`), and before it hands control back to
//!   the worker loop, whatever for: it found nothing to run
//!   (`carrier_main`), or its task blocks, yields or sleeps
//!   (`suspend_current`), migrates (`migrate.rs`) or leaves for a
//!   blocking call (`blocking_call.rs`). (Made there, on the task's side
//!   of the switch, rather than once in `resume` after it: that check
//!   cost `spawn_join_scope` 3 ns.) So while a finish is held, its worker
//!   is running a task of the same group that has yet to report (and
//!   whatever that task runs inline, as a join does); no other task and
//!   no wait of this worker runs behind it.
//! - The task running meanwhile belongs to the same group, so it reports
//!   to the same count later: a count that expects it cannot reach zero
//!   before it finishes, held finishes or not. Holding a finish is then
//!   the same as its task having finished later, which the program could
//!   not tell from a slower machine. (The one case where it could: a
//!   group whose count expects fewer tasks than it holds, whose extra
//!   task spins, without yielding, on what the count's waiter does next.
//!   `src/ffi/README.md` says so for sincs.)
//! - The memory a held finish names stays valid until it is made: the
//!   count it will decrement cannot have reached zero without it.

use super::WorkerLocal;
use std::cell::Cell;

/// Makes `n` finishes of `group` at once.
///
/// # Safety
/// Called with the `group` given to [`WorkerLocal::defer_finish`]
/// alongside this function, and the number of finishes deferred.
pub(crate) type FinishMany = unsafe fn(group: *const (), n: u64);

/// A worker's held finishes: one group's, `n` of them (0: none).
pub(super) struct Deferred {
    group: Cell<*const ()>,
    finish: Cell<Option<FinishMany>>,
    n: Cell<u64>,
}

impl Deferred {
    pub(super) const fn new() -> Deferred {
        Deferred {
            group: Cell::new(std::ptr::null()),
            finish: Cell::new(None),
            n: Cell::new(0),
        }
    }
}

impl WorkerLocal {
    /// Holds one finish of `group` back (see the module): `finish(group,
    /// n)` makes it, with the others of that group this worker holds.
    ///
    /// # Safety
    /// `finish(group, n)` may run on this worker at any later point (on
    /// its thread, inside or outside a task) and must then do what `n`
    /// finishes of the group's tasks would; `group` stays valid until
    /// then. The finish stays held while the tasks this worker starts
    /// next have `group` as their group word (`Task::group`).
    pub(crate) unsafe fn defer_finish(&self, group: *const (), finish: FinishMany) {
        let d = &self.deferred;
        // A function's address may differ between codegen units: a
        // mismatch only makes the held finishes early, never wrong.
        let same = d.group.get() == group
            && d.finish
                .get()
                .is_some_and(|f| std::ptr::fn_addr_eq(f, finish));
        if d.n.get() != 0 && !same {
            self.finish_deferred();
        }
        d.group.set(group);
        d.finish.set(Some(finish));
        d.n.set(d.n.get() + 1);
    }

    /// Before a task of `group` starts: makes the held finishes of
    /// another group.
    #[inline(always)]
    pub(super) fn finish_deferred_unless(&self, group: *const ()) {
        let d = &self.deferred;
        if d.n.get() != 0 && d.group.get() != group {
            self.finish_deferred();
        }
    }

    /// Makes every held finish now.
    #[inline(always)]
    pub(super) fn finish_deferred_now(&self) {
        if self.deferred.n.get() != 0 {
            self.finish_deferred();
        }
    }

    #[cold]
    #[inline(never)]
    fn finish_deferred(&self) {
        let d = &self.deferred;
        let n = d.n.replace(0);
        let group = d.group.get();
        if let Some(finish) = d.finish.take() {
            // SAFETY: `defer_finish`'s caller promised that `finish` takes
            // this group and count at any later point; the count is
            // cleared first, so a finish that defers again (or panics)
            // never makes these twice.
            unsafe { finish(group, n) };
        }
    }
}
