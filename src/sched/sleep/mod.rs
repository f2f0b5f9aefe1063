//! How idle workers fall asleep and are woken without losing a wake-up.
//! The protocol, its states and the fence pairs are in `README.md` beside
//! this file; `tests/loom_sleep.rs` model-checks it.

use crate::loom::sync::atomic::{AtomicU32, AtomicUsize, Ordering};
use crate::loom::sync::{Condvar, Mutex};
use crossbeam_utils::CachePadded;
use std::time::Duration;

const AWAKE: u32 = 0;
const SLEEPY: u32 = 1;
const SLEEPING: u32 = 2;

struct WorkerSleep {
    state: AtomicU32,
    lock: Mutex<()>,
    wake: Condvar,
}

/// Sleep state of all workers.
pub(crate) struct Sleep {
    /// Workers in SLEEPY or SLEEPING.
    sleepers: AtomicUsize,
    workers: Box<[CachePadded<WorkerSleep>]>,
}

/// Why `sleep` returned.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Woke {
    /// The re-check after announcing found something to do.
    Work,
    /// Another thread woke us.
    Notified,
    /// The timeout passed.
    TimedOut,
}

impl Sleep {
    pub(crate) fn new(workers: usize) -> Sleep {
        Sleep {
            sleepers: AtomicUsize::new(0),
            workers: (0..workers)
                .map(|_| {
                    CachePadded::new(WorkerSleep {
                        state: AtomicU32::new(AWAKE),
                        lock: Mutex::new(()),
                        wake: Condvar::new(),
                    })
                })
                .collect(),
        }
    }

    /// Puts worker `w` to sleep unless `has_work` finds something after the
    /// announcement. Steps S1-S4 of the README.
    pub(crate) fn sleep(
        &self,
        w: usize,
        has_work: impl Fn() -> bool,
        timeout: Option<Duration>,
    ) -> Woke {
        let me = &self.workers[w];
        // S1: announce, with read-modify-writes on the words the notifiers
        // read-modify-write (N1): whichever RMW comes second in the word's
        // modification order reads the first one's write, and its Acquire
        // makes the other side's earlier writes visible. So either our
        // re-check (S2) sees their work, or their N1 sees our announcement.
        me.state.swap(SLEEPY, Ordering::AcqRel);
        self.sleepers.fetch_add(1, Ordering::AcqRel);
        // S2: re-check.
        if has_work() {
            me.state.swap(AWAKE, Ordering::AcqRel);
            self.sleepers.fetch_sub(1, Ordering::AcqRel);
            return Woke::Work;
        }
        // S3: commit under the lock, unless a notifier already swapped us
        // to AWAKE.
        let mut guard = me.lock.lock().unwrap();
        let woke = if me
            .state
            .compare_exchange(SLEEPY, SLEEPING, Ordering::AcqRel, Ordering::Acquire)
            .is_err()
        {
            Woke::Notified
        } else {
            // S4: wait until a notifier (holding the lock, so the
            // notification cannot fall between our check and our wait)
            // stores AWAKE.
            loop {
                guard = match timeout {
                    None => me.wake.wait(guard).unwrap(),
                    #[cfg(not(loom))]
                    Some(t) => {
                        let (g, res) = me.wake.wait_timeout(guard, t).unwrap();
                        if res.timed_out()
                            && me
                                .state
                                .compare_exchange(
                                    SLEEPING,
                                    AWAKE,
                                    Ordering::AcqRel,
                                    Ordering::Acquire,
                                )
                                .is_ok()
                        {
                            drop(g);
                            self.sleepers.fetch_sub(1, Ordering::AcqRel);
                            return Woke::TimedOut;
                        }
                        g
                    }
                    #[cfg(loom)]
                    Some(_) => me.wake.wait(guard).unwrap(),
                };
                if me.state.load(Ordering::Acquire) != SLEEPING {
                    break Woke::Notified;
                }
            }
        };
        drop(guard);
        self.sleepers.fetch_sub(1, Ordering::AcqRel);
        woke
    }

    /// Wakes worker `w` after something was published that only it will
    /// take (its resume queue). Steps N1-N3 of the README.
    pub(crate) fn notify_worker(&self, w: usize) {
        let ws = &self.workers[w];
        // N1: an RMW read of the state (pairs with S1's swap).
        if ws.state.fetch_or(0, Ordering::AcqRel) != AWAKE {
            self.wake(ws);
        }
    }

    /// Wakes one sleepy or sleeping worker after publishing work any worker
    /// may take (the injector). Steps N1-N3 of the README.
    pub(crate) fn notify_one(&self) {
        // N1: an RMW read of the sleeper count (pairs with S1's fetch_add).
        if self.sleepers.fetch_add(0, Ordering::AcqRel) != 0 {
            self.wake_any();
        }
    }

    /// Like `notify_one` but with a plain load: for work pushed on the
    /// pushing worker's own deque. The pushing worker is awake and will run
    /// the work itself, so a missed wake-up costs parallelism, never
    /// progress; the plain load keeps spawn cheap.
    #[inline]
    pub(crate) fn notify_one_unfenced(&self) {
        if self.sleepers.load(Ordering::Relaxed) != 0 {
            self.wake_any();
        }
    }

    /// Wakes every worker (shutdown).
    pub(crate) fn notify_all(&self) {
        for ws in self.workers.iter() {
            self.wake(ws);
        }
    }

    fn wake_any(&self) {
        for ws in self.workers.iter() {
            if ws.state.fetch_or(0, Ordering::AcqRel) != AWAKE && self.wake(ws) {
                return;
            }
        }
    }

    /// N2/N3: swap to AWAKE; if it was SLEEPING, signal under its lock.
    /// Returns whether we moved it out of SLEEPY or SLEEPING.
    fn wake(&self, ws: &WorkerSleep) -> bool {
        match ws.state.swap(AWAKE, Ordering::AcqRel) {
            AWAKE => false,
            SLEEPY => true,
            _ => {
                let _g = ws.lock.lock().unwrap();
                ws.wake.notify_one();
                drop(_g);
                true
            }
        }
    }
}

#[cfg(all(test, loom))]
mod loom_tests;
