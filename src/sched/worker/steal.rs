//! Finding work: the hand-off slot, the own deque, the root queue and
//! injector, then other workers' deques (oldest first, random victim).

use super::*;

impl WorkerLocal {
    /// Finds a task: the hand-off slot, own deque, injector, then a victim.
    pub(super) fn find_task(&self) -> Option<Task> {
        if let Some(t) = self.handoff.take() {
            return Some(t);
        }
        if let Some(t) = self.deque.pop() {
            return Some(t);
        }
        self.steal()
    }

    pub(super) fn steal(&self) -> Option<Task> {
        let reg = &*self.registry;
        loop {
            match reg.injector.steal_batch_and_pop(&self.deque) {
                Steal::Success(t) => return Some(t),
                Steal::Empty => break,
                Steal::Retry => {}
            }
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
                        bump(&self.shared().counters.steals, 1);
                        return Some(t);
                    }
                    Steal::Empty => break,
                    Steal::Retry => bump(&self.shared().counters.steal_retries, 1),
                }
            }
        }
        bump(&self.shared().counters.failed_steal_rounds, 1);
        None
    }

    /// Could anything be done right now? Looks at every other worker's
    /// deque: for the re-check before sleeping (S2), once per sleep.
    pub(super) fn has_work(&self) -> bool {
        self.has_work_here() || self.registry.workers.iter().any(|w| !w.stealer.is_empty())
    }

    /// Like [`has_work`](Self::has_work), but looks at one other worker's
    /// deque (`victim`) instead of all: the spinning idle loop probes a
    /// different victim each round, so an idle worker reads O(1) deque
    /// ends per round, not O(workers). Every idle worker polling every
    /// deque nonstop makes each busy owner's push and pop miss in its
    /// cache at 16 workers.
    pub(super) fn has_work_probing(&self, victim: usize) -> bool {
        self.has_work_here() || !self.registry.workers[victim].stealer.is_empty()
    }

    /// Work that is not in another worker's deque.
    fn has_work_here(&self) -> bool {
        let reg = &*self.registry;
        !self.shared().resume.is_empty()
            || !self.deque.is_empty()
            || !self.yielded.borrow().is_empty()
            || !reg.injector.is_empty()
            || !reg.roots.is_empty()
            || crate::sched::driver::ready(reg)
            || self
                .timers
                .borrow()
                .peek()
                .is_some_and(|Reverse((d, _))| *d <= Instant::now())
    }
}
