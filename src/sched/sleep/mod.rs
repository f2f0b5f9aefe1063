//! How idle workers fall asleep and are woken without losing a wake-up.
//! The protocol, its states and the fence pairs are in `README.md` beside
//! this file; `tests/loom_sleep.rs` model-checks it.

use crate::loom::sync::atomic::{AtomicBool, AtomicU32, AtomicUsize, Ordering};
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
    /// Set (by its own worker, before S3) while it sleeps parked in the
    /// driver instead of on `wake`: a notifier must also unpark the driver.
    in_driver: AtomicBool,
    /// The worker is disabled (`set_disabled`): it takes no work that any
    /// worker may take, so `notify_one` never picks it.
    disabled: AtomicBool,
}

/// Blocks a worker in the driver (see `sleep_in`): `park(timeout)`, and
/// `unpark()` to end a park (a token: an early unpark ends the next park).
pub(crate) trait Parker: core::marker::Sync {
    fn park(&self, timeout: Option<Duration>);
    fn unpark(&self);
}

/// Sleep state of all workers.
pub(crate) struct Sleep {
    /// Workers in SLEEPY or SLEEPING.
    sleepers: AtomicUsize,
    workers: Box<[CachePadded<WorkerSleep>]>,
    /// The driver's parker, if a worker may park in it (set once, before
    /// any worker runs).
    parker: Option<Box<dyn Parker + Send>>,
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
                        in_driver: AtomicBool::new(false),
                        disabled: AtomicBool::new(false),
                    })
                })
                .collect(),
            parker: None,
        }
    }

    /// Sleep state whose workers may park in `parker` (`sleep_in`).
    pub(crate) fn with_parker(workers: usize, parker: Box<dyn Parker + Send>) -> Sleep {
        let mut s = Sleep::new(workers);
        s.parker = Some(parker);
        s
    }

    /// Like [`sleep`](Self::sleep), but S4 blocks in the driver's parker
    /// instead of on the condition variable: a message arriving wakes the
    /// worker directly. Returns `Woke::Work` when the parker returned on
    /// its own (something may have arrived, or the timeout passed).
    pub(crate) fn sleep_in(
        &self,
        w: usize,
        has_work: impl Fn() -> bool,
        timeout: Option<Duration>,
    ) -> Woke {
        let Some(parker) = &self.parker else {
            return self.sleep(w, has_work, timeout);
        };
        let me = &self.workers[w];
        // Relaxed: published by the AcqRel RMWs of S1/S3 below, which a
        // notifier's N2 swap reads.
        me.in_driver.store(true, Ordering::Relaxed);
        me.state.swap(SLEEPY, Ordering::AcqRel);
        self.sleepers.fetch_add(1, Ordering::AcqRel);
        let woke = 'out: {
            if has_work() {
                me.state.swap(AWAKE, Ordering::AcqRel);
                break 'out Woke::Work;
            }
            // S3 under the lock, as in `sleep`.
            let committed = {
                let _g = me.lock.lock().unwrap();
                me.state
                    .compare_exchange(SLEEPY, SLEEPING, Ordering::AcqRel, Ordering::Acquire)
                    .is_ok()
            };
            if !committed {
                break 'out Woke::Notified;
            }
            // S4': park in the driver. A notifier that swapped us to AWAKE
            // after our CAS saw `in_driver` (it read the CAS's write) and
            // unparks; the parker's token keeps an unpark that comes before
            // our park.
            parker.park(timeout);
            if me
                .state
                .compare_exchange(SLEEPING, AWAKE, Ordering::AcqRel, Ordering::Acquire)
                .is_ok()
            {
                Woke::Work
            } else {
                Woke::Notified
            }
        };
        me.in_driver.store(false, Ordering::Relaxed);
        self.sleepers.fetch_sub(1, Ordering::AcqRel);
        woke
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

    /// Disables worker `w` (or enables it again): a disabled worker takes
    /// only work that is its own (its resume queue, its timers), so
    /// `notify_one` passes it by and wakes an enabled one. Enabling wakes
    /// it, to take shared work again.
    pub(crate) fn set_disabled(&self, w: usize, disabled: bool) {
        // Relaxed: a scheduling policy read by the worker's own loop; the
        // notification below (an RMW pair, N1/S1) orders what matters.
        self.workers[w].disabled.store(disabled, Ordering::Relaxed);
        if !disabled {
            self.notify_worker(w);
        }
    }

    /// Whether worker `w` is disabled (`set_disabled`).
    #[inline]
    pub(crate) fn is_disabled(&self, w: usize) -> bool {
        self.workers[w].disabled.load(Ordering::Relaxed)
    }

    fn wake_any(&self) {
        for ws in self.workers.iter() {
            // A disabled worker would not take the work: skipping it
            // leaves the wake-up to an enabled one, which is either awake
            // (and its S2 re-check sees the work) or found here.
            if ws.disabled.load(Ordering::Relaxed) {
                continue;
            }
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
                // Acquire by the swap above: a worker parked in the driver
                // set `in_driver` before its SLEEPING CAS, which we read.
                if ws.in_driver.load(Ordering::Relaxed) {
                    if let Some(p) = &self.parker {
                        p.unpark();
                    }
                }
                true
            }
        }
    }
}

#[cfg(all(test, loom))]
mod loom_tests;
