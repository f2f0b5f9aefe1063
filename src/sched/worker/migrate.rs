//! Work aimed at one worker: a new task placed on it (Qthreads'
//! `qthread_fork_to`), and a started task that moves to it (Qthreads'
//! `qthread_migrate_to`), both through the worker's *inbox*, which only
//! that worker takes from (no other worker steals what it holds).
//!
//! Started tasks stay on their worker (`sched/README.md`); the one
//! exception asked for by name besides blocking calls is a migration,
//! which the C ABI offers to tasks it made (whose C code asked for it).
//! A migrating task suspends its carrier with `Suspend::Migrate(to)`; its
//! worker gives up the carrier's slot and sends the carrier (with its
//! stack and guard) to worker `to`'s inbox; that worker gives it a slot
//! of its own and resumes it, and the task goes on there, for good. The
//! frames below the task on the carrier's stack (`carrier_main`,
//! `run_task`, `body_may_go_away`) notice the move by the thread pointer
//! and look their worker up again (never through an address computed
//! before the move: compiled code may cache a thread-local's address
//! within one function, which is why every look-up after the move is a
//! call that cannot be inlined).

use super::blocking_call::thread_pointer;
use super::*;

/// A carrier on its way to another worker, with what its slot held.
pub(crate) struct Migrant {
    carrier: Carrier,
    guard: (usize, usize),
    root: bool,
}

// SAFETY: a `Migrant` moves a suspended carrier from one worker's thread
// to another's, for good. While in transit nothing runs on its stack;
// once adopted, the task's frames look up the worker they run on afresh
// (`arrived`, and the thread-pointer checks in `carrier_main`, `run_task`
// and `body_may_go_away`), so no frame keeps using the first worker's
// thread-local state.
unsafe impl Send for Migrant {}

/// What a worker's inbox holds.
pub(crate) enum Inbound {
    /// A new task placed on this worker.
    Task(Task),
    /// A started task moving to this worker.
    Migrant(Migrant),
}

/// Queues `task` on worker `w` of `reg` (it runs there, unless `w` is
/// disabled when it is taken, then it is handed on); wakes `w`.
pub(crate) fn place_on(reg: &Registry, w: usize, task: Task) {
    // Counted as injected: any thread may place (a read-modify-write).
    reg.outside.injected.fetch_add(1, Ordering::Relaxed);
    reg.workers[w].inbox.push(Inbound::Task(task));
    reg.sleep.notify_worker(w);
}

/// Why a task could not move.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Unmoved {
    /// The caller is no task running on a worker (an outside thread, a
    /// task away in a blocking call, an inline remote call).
    NotATask,
    /// No such worker.
    NoWorker,
}

/// Moves the running task to worker `to` of its runtime; returns there.
/// Moving to its own worker does nothing.
pub(crate) fn migrate_current(to: usize) -> Result<(), Unmoved> {
    let Some(local) = WorkerLocal::current().filter(|l| l.in_task()) else {
        return Err(Unmoved::NotATask);
    };
    if local.no_wait.get().is_some() {
        return Err(Unmoved::NotATask);
    }
    if to >= local.registry.workers.len() {
        return Err(Unmoved::NoWorker);
    }
    if to == local.index {
        return Ok(());
    }
    let y = local.yielder.get();
    let id = local.task_id.get();
    let storage = local.storage.get();
    crate::trace::task_end(id, crate::trace::why::YIELDED);
    // This worker goes on without the task: held finishes first
    // (`deferred.rs`).
    local.finish_deferred_now();
    // SAFETY: `yielder` is this carrier's (set on its latest resume), live
    // on this stack; we are the task it runs.
    let r = unsafe { (*y).suspend(Suspend::Migrate(to)) };
    debug_assert!(r == Resume::Run);
    arrived(y, id, storage);
    Ok(())
}

/// On the new worker's thread: its view of the running task (the slot it
/// gave the carrier, set by `resume`).
#[inline(never)]
fn arrived(y: *const Yielder<Resume, Suspend>, id: u64, storage: *mut TaskStorage) {
    let local = current_afresh().expect("a migrated task resumes on a worker");
    let slot = local.current_slot.get();
    debug_assert!(slot != NO_SLOT);
    local.resumed(y, slot, id, storage);
}

/// The calling thread's worker, looked up by a call that is never
/// inlined (so never from an address computed before a migration).
#[inline(never)]
pub(super) fn current_afresh() -> Option<&'static WorkerLocal> {
    WorkerLocal::current()
}

/// Whether the calling thread is another than the one whose thread
/// pointer is `home` (the task migrated, or is away in a blocking call).
#[inline]
pub(super) fn moved_from(home: usize) -> bool {
    thread_pointer() != home
}

/// The thread pointer, to compare with after a call that may migrate.
#[inline]
pub(super) fn here() -> usize {
    thread_pointer()
}

impl WorkerLocal {
    /// `resume`'s part for a carrier that suspended with `Migrate`: give
    /// up its slot and send it to worker `to`.
    pub(super) fn send_migrant(&self, carrier: Carrier, slot: u32, to: usize) {
        let (guard, root) = {
            let mut slots = self.slots.borrow_mut();
            let s = &mut slots[slot as usize];
            s.waiting = None;
            (s.guard, std::mem::replace(&mut s.root, false))
        };
        self.free_slots.borrow_mut().push(slot);
        let reg = &self.registry;
        reg.workers[to].inbox.push(Inbound::Migrant(Migrant {
            carrier,
            guard,
            root,
        }));
        reg.sleep.notify_worker(to);
    }

    /// Takes one thing from this worker's inbox and runs it: a placed
    /// task (handed on if this worker is disabled), or a migrant given a
    /// slot here and resumed. `false` if the inbox was empty.
    #[inline]
    pub(super) fn take_inbound(&self, disabled: bool) -> bool {
        // `is_empty` first: two loads, where a pop that finds the queue
        // empty pays a full fence (crossbeam's `SegQueue::pop`); the loop
        // checks the inbox on every round. A push it misses wakes this
        // worker (`notify_worker`) or is seen by the next round, or by the
        // idle loop's checks before it sleeps.
        let inbox = &self.shared().inbox;
        if inbox.is_empty() {
            return false;
        }
        let Some(inbound) = inbox.pop() else {
            return false;
        };
        match inbound {
            Inbound::Task(t) if disabled => self.registry.hand_on(t),
            Inbound::Task(t) => self.start(t),
            Inbound::Migrant(m) => {
                let slot = self.adopt(m);
                self.resume(slot);
            }
        }
        true
    }

    /// Gives a migrant a slot of this worker.
    fn adopt(&self, m: Migrant) -> u32 {
        let slot = Slot {
            carrier: Some(m.carrier),
            guard: m.guard,
            root: m.root,
            waiting: None,
        };
        match self.free_slots.borrow_mut().pop() {
            Some(s) => {
                self.slots.borrow_mut()[s as usize] = slot;
                s
            }
            None => {
                let mut slots = self.slots.borrow_mut();
                slots.push(slot);
                (slots.len() - 1) as u32
            }
        }
    }
}
