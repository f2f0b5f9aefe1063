//! Which workers sit in their idle loop, and a count of how often each
//! entered it: the deadlock check compares both across a grace period
//! (`sleep/README.md`, "Deadlock detection"), and loops that split work on
//! demand (forall's adaptive schedule) read the idle count as "someone is
//! hungry".

use crate::loom::sync::atomic::{AtomicU64, Ordering};
use crossbeam_utils::CachePadded;

pub(crate) struct IdleWatch {
    /// Low bits: workers inside their idle loop (spinning or asleep).
    /// Bits from `SAMPLE` up: how many deadlock-check samples were taken
    /// (they wrap harmlessly).
    idle: CachePadded<AtomicU64>,
    /// Per worker: how many times it entered its idle loop. Written only
    /// by its own worker.
    entries: Box<[CachePadded<AtomicU64>]>,
}

/// One deadlock-check sample, counted in the high bits of `idle`.
const SAMPLE: u64 = 1 << 40;
const COUNT: u64 = SAMPLE - 1;

impl IdleWatch {
    pub(crate) fn new(workers: usize) -> IdleWatch {
        IdleWatch {
            idle: CachePadded::new(AtomicU64::new(0)),
            entries: (0..workers)
                .map(|_| CachePadded::new(AtomicU64::new(0)))
                .collect(),
        }
    }

    /// Worker `w` enters its idle loop. I1: the entry count is bumped
    /// *before* the idle count's RMW.
    #[inline]
    pub(crate) fn enter(&self, w: usize) {
        let e = &self.entries[w];
        // Owner-written: a plain load and store.
        e.store(e.load(Ordering::Relaxed).wrapping_add(1), Ordering::Relaxed);
        // Release: a sampler whose RMW of `idle` reads this RMW or any later
        // one (every write of `idle` is an RMW, so they all continue this
        // release sequence) also sees the bump above.
        self.idle.fetch_add(1, Ordering::AcqRel);
    }

    /// Worker leaves its idle loop (it found work, or was woken). Returns
    /// the word as it was (the model checks read the sample count in it).
    #[inline]
    pub(crate) fn leave(&self) -> u64 {
        self.idle.fetch_sub(1, Ordering::AcqRel)
    }

    /// Workers in their idle loop now: a hint (relaxed).
    #[inline]
    pub(crate) fn idle(&self) -> usize {
        (self.idle.load(Ordering::Relaxed) & COUNT) as usize
    }

    /// If every worker is in its idle loop right now, the total number of
    /// idle-loop entries so far. Two equal `Some` results mean no worker
    /// left its idle loop in between: a worker that left and came back
    /// bumped its entry count before its RMW brought `idle` back to n, and
    /// the RMW below reads the latest value of `idle` (an RMW always does),
    /// which is that RMW's or a later one in its release sequence.
    pub(crate) fn all_idle(&self) -> Option<u64> {
        let word = self.idle.fetch_add(SAMPLE, Ordering::AcqRel);
        if (word & COUNT) as usize != self.entries.len() {
            return None;
        }
        Some(
            self.entries
                .iter()
                .map(|e| e.load(Ordering::Relaxed))
                .fold(0, u64::wrapping_add),
        )
    }
}

#[cfg(all(test, loom))]
mod loom_tests {
    use super::{IdleWatch, SAMPLE};
    use crate::loom::sync::Arc;
    use crate::loom::thread;

    /// Workers leave their idle loop (to run something) and come back
    /// while a checker samples twice. If the two samples agree and say
    /// "all idle since entry k" (the checker would call the program
    /// deadlocked), no worker may have left between them: its `leave`
    /// must come after both samples in `idle`'s modification order, which
    /// `leave` reads back as the sample count.
    fn excursion_model(workers: usize, excursions: usize) {
        loom::model(move || {
            let watch = Arc::new(IdleWatch::new(workers));
            for w in 0..workers {
                watch.enter(w);
            }
            let initial = watch.all_idle().expect("all idle at the start");
            let w2 = watch.clone();
            let worker = thread::spawn(move || {
                let mut samples_before_first_leave = None;
                for _ in 0..excursions {
                    let word = w2.leave();
                    samples_before_first_leave.get_or_insert(word / SAMPLE);
                    w2.enter(workers - 1);
                }
                samples_before_first_leave.unwrap()
            });
            let first = watch.all_idle();
            let second = watch.all_idle();
            let before_leave = worker.join().unwrap();
            // Samples are counted from 1 (the initial one above).
            if first == Some(initial) && second == Some(initial) {
                assert_eq!(
                    before_leave, 3,
                    "two agreeing samples straddled a worker's excursion"
                );
            }
            assert_eq!(
                watch.all_idle(),
                Some(initial + excursions as u64),
                "every entry is counted once everything settled"
            );
        });
    }

    #[test]
    fn agreeing_samples_mean_no_worker_ran_in_between() {
        excursion_model(1, 1);
    }

    #[test]
    fn two_workers_two_excursions() {
        excursion_model(2, 2);
    }
}
