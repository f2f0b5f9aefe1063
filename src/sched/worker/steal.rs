//! Finding work: the hand-off slot, the own deque, the root queue and
//! injector, then other workers' deques (oldest first, random victim;
//! plain Qthreads forks in batches of up to half a deque).

use super::*;
use crate::sched::deque::Steal;
use crossbeam_deque::Injector;

/// Most tasks a worker takes from the injector at once.
const INJECT_BATCH: usize = 16;
/// Most tasks a worker takes from another's deque at once, when they are
/// of the kind taken in batches (`Queued::stolen_in_batches`: plain
/// Qthreads forks): the one it steals, then half of what is left there,
/// rounded up, up to this many in all. The first it runs, the others go
/// onto its own deque, where other idle workers can steal them. A worker
/// that forks a task at a time (`qthread_fork` in a loop) is then drained
/// by a few batches that spread from thief to thief, not by one contended
/// steal per task from every idle worker.
const STEAL_BATCH: usize = 16;

/// One task from the injector, retrying lost races.
fn steal_injected(injector: &Injector<Task>) -> Option<Task> {
    loop {
        match injector.steal() {
            crossbeam_deque::Steal::Success(t) => return Some(t),
            crossbeam_deque::Steal::Empty => return None,
            crossbeam_deque::Steal::Retry => {}
        }
    }
}

impl WorkerLocal {
    /// Finds a task: the hand-off slot, own deque, injector, then a victim.
    pub(super) fn find_task(&self) -> Option<Task> {
        if let Some(t) = self.handoff.take() {
            return Some(t);
        }
        if self.disabled() {
            // Its queued tasks go to enabled workers (`run`).
            return None;
        }
        if let Some(t) = self.pop() {
            return Some(t);
        }
        self.steal()
    }

    pub(super) fn steal(&self) -> Option<Task> {
        let reg = &*self.registry;
        if let Some(t) = self.take_injected() {
            return Some(t);
        }
        let n = reg.workers.len();
        if n == 1 {
            return None;
        }
        // xorshift for the first victim, then round robin.
        let mut x = self.rng.get();
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.rng.set(x);
        let start = (x % n as u64) as usize;
        for k in 0..n {
            let v = (start + k) % n;
            if v == self.index {
                continue;
            }
            loop {
                match reg.workers[v].stealer.steal() {
                    Steal::Success(t) => {
                        // A task of the kind taken in batches: more of
                        // them after it go onto our deque. Not on a hosted
                        // worker, whose deque only steals drain while its
                        // host runs its own code (`host.rs`).
                        let moved = if t.stolen_in_batches() && !self.hosted.get() {
                            self.steal_more(v)
                        } else {
                            0
                        };
                        bump(&self.shared().counters.steals, 1 + moved);
                        if crate::trace::on() {
                            crate::trace::record(crate::trace::kind::STEAL, 0, 0, v as u64, 0);
                            self.trace_how.set((crate::trace::how::STOLEN, v as u64));
                        }
                        // SAFETY: our CAS took this element: no other
                        // Task is made from its push.
                        return Some(unsafe { t.into_task() });
                    }
                    Steal::Empty => break,
                    Steal::Retry => bump(&self.shared().counters.steal_retries, 1),
                }
            }
        }
        bump(&self.shared().counters.failed_steal_rounds, 1);
        None
    }

    /// The rest of a batch steal from worker `victim` (its first task
    /// taken): up to `STEAL_BATCH - 1` more plain forks onto our deque;
    /// how many. Out of line, so that the single steal's loop stays as
    /// small as before.
    #[inline(never)]
    fn steal_more(&self, victim: usize) -> u64 {
        self.registry.workers[victim].stealer.steal_into(
            &self.deque,
            STEAL_BATCH - 1,
            Queued::stolen_in_batches,
        ) as u64
    }

    /// Takes a task from the injector, and up to `INJECT_BATCH - 1` more
    /// onto the own deque (where other idle workers can steal them), so a
    /// burst of tasks from outside threads costs each worker one trip to
    /// the shared queue per batch, not per task. The first is traced as
    /// injected.
    pub(super) fn take_injected(&self) -> Option<Task> {
        let reg = &*self.registry;
        let first = steal_injected(&reg.injector)?;
        for _ in 1..INJECT_BATCH {
            match steal_injected(&reg.injector) {
                Some(t) => self.deque.push(t.into_queued()),
                None => break,
            }
        }
        if crate::trace::on() {
            self.trace_how.set((crate::trace::how::INJECTED, 0));
        }
        Some(first)
    }

    /// Starts a root task (another thread's `block_on`) if one waits;
    /// whether it did.
    pub(super) fn start_root_task(&self) -> bool {
        let Some(t) = self.registry.roots.pop() else {
            return false;
        };
        if crate::trace::on() {
            self.trace_how.set((crate::trace::how::ROOT, 0));
        }
        self.start_root(t);
        true
    }

    /// Could anything be done right now? Looks at every other worker's
    /// deque: for the re-check before sleeping (S2), once per sleep.
    pub(super) fn has_work(&self) -> bool {
        self.has_task_work() || crate::sched::driver::ready(&self.registry)
    }

    /// Like [`has_work`](Self::has_work), without the driver: work the
    /// worker loop takes (a frame in the driver is taken by the idle
    /// loop's own poll, which leaves the loop only for program work).
    pub(super) fn has_task_work(&self) -> bool {
        self.has_work_here() || self.registry.workers.iter().any(|w| !w.stealer.is_empty())
    }

    /// Like [`has_task_work`](Self::has_task_work), but looks at one other
    /// worker's deque (`victim`) instead of all: the spinning idle loop
    /// probes a different victim each round, so an idle worker reads O(1)
    /// deque ends per round, not O(workers). Every idle worker polling
    /// every deque nonstop makes each busy owner's push and pop miss in
    /// its cache at 16 workers.
    pub(super) fn has_work_probing(&self, victim: usize) -> bool {
        self.has_work_here() || !self.registry.workers[victim].stealer.is_empty()
    }

    /// Whether this worker is disabled (`Sleep::set_disabled`): it then
    /// resumes only its own started tasks, and hands its queued ones to
    /// the enabled workers.
    #[inline]
    pub(super) fn disabled(&self) -> bool {
        self.registry.sleep.is_disabled(self.index)
    }

    /// The work a disabled worker takes: its own started tasks (woken,
    /// yielded or due), and queued tasks to hand on.
    pub(super) fn has_own_work(&self) -> bool {
        !self.shared().resume.is_empty()
            || !self.shared().inbox.is_empty()
            || !self.deque.is_empty()
            || !self.yielded.borrow().is_empty()
            || self
                .timers
                .borrow()
                .peek()
                .is_some_and(|Reverse((d, _))| *d <= Instant::now())
    }

    /// Work that is not in another worker's deque, nor in the driver.
    fn has_work_here(&self) -> bool {
        let reg = &*self.registry;
        !self.shared().resume.is_empty()
            || !self.shared().inbox.is_empty()
            || !self.deque.is_empty()
            || !self.yielded.borrow().is_empty()
            || !reg.injector.is_empty()
            || !reg.roots.is_empty()
            || self
                .timers
                .borrow()
                .peek()
                .is_some_and(|Reverse((d, _))| *d <= Instant::now())
    }
}
