//! Inline progress (`CANTUS_MPI_PROGRESS=inline`): no MPI thread on the
//! message path. Whichever thread of the locale sends, polls, waits or
//! parks makes the MPI calls itself, under one try-lock (GASNet-EX's
//! MPI conduit and HPX's MPI parcelport work this way), with MPI
//! initialized at `MPI_THREAD_SERIALIZED`. A thread that finds the lock
//! taken leaves its frame queued: the holder looks at the queue again
//! after it releases the lock, so no frame is stranded and nobody waits
//! for the lock. A helper thread sleeps beside the workers and makes a
//! pass, and hands what arrived to the engine, only when no one else made
//! one for a whole period (every worker in a long task that never polls).
//! `README.md` beside this file, "Progress modes", states the rules and
//! the deadlock argument for this mode.

use super::progress::Progress;
use super::sys;
use super::transport::{Shared, Sleep};
use crate::comm::pass::PassLock;
use crate::comm::wake_bell::Bell;
use crate::sched::driver::DriverPoller;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

/// How long the helper lets pass without a pass by anyone before it
/// makes one itself: an arrival at a locale whose every worker computes
/// without polling waits at most about two of these (one period to see
/// that no one polled, one in which it arrived).
pub(super) const HELPER_PERIOD: Duration = Duration::from_millis(1);

/// The lock, the MPI state it guards, and who else needs to know.
pub(super) struct Inline {
    shared: Arc<Shared>,
    /// The MPI state (`None` once finished): whoever holds the lock may
    /// make MPI calls, and only through it.
    progress: PassLock<Option<Progress>>,
    /// Passes made so far, by anyone: the helper's sign of life of the
    /// others.
    passes: AtomicU64,
    /// The engine's poll, for the helper (set once the runtime started).
    poller: OnceLock<DriverPoller>,
    /// Wakes the helper (the end).
    helper_bell: Bell,
}

impl Inline {
    pub(super) fn new(shared: Arc<Shared>, progress: Progress) -> Inline {
        Inline {
            shared,
            progress: PassLock::new(Some(progress)),
            passes: AtomicU64::new(0),
            poller: OnceLock::new(),
            helper_bell: Bell::new(),
        }
    }

    /// Makes a pass if no other thread is making one; afterwards, if
    /// frames or credit were queued meanwhile and the lock is free, another
    /// (the pass lock's rule, `comm/pass.rs`: nothing queued is stranded).
    /// Returns whether a pass did anything. Never waits for the lock.
    pub(super) fn progress(&self) -> bool {
        self.pass_with(Progress::pass)
    }

    /// A pass for a task that waits in a collective (`collective.rs`):
    /// starts and tests the collectives alone (one `MPI_Test`), or makes
    /// a whole pass where frames or credit wait to be sent (the lock's
    /// rule: nothing queued is stranded). Never waits for the lock.
    pub(super) fn progress_collectives(&self) -> bool {
        let s = &*self.shared;
        self.pass_with(|p| {
            if s.sends_waiting() {
                p.pass()
            } else {
                p.collectives()
            }
        })
    }

    /// Makes the pass `pass` under the lock (see [`Inline::progress`]).
    fn pass_with(&self, pass: impl Fn(&mut Progress) -> Result<bool, crate::error::Error>) -> bool {
        let s = &*self.shared;
        // An MPI error during a pass (reported once the lock is let go;
        // `pending` then ends the passes).
        let failed = std::cell::RefCell::new(None);
        // The state is gone (finished): nothing more to pass.
        let ended = std::cell::Cell::new(false);
        let passed = self.progress.pass(
            |state| {
                let Some(p) = state.as_mut() else {
                    ended.set(true); // finished: nothing may call MPI any more
                    return false;
                };
                self.passes.fetch_add(1, Ordering::Relaxed);
                pass(p).unwrap_or_else(|e| {
                    *failed.borrow_mut() = Some(e);
                    false
                })
            },
            || {
                failed.borrow().is_none()
                    && !ended.get()
                    && (s.sends_waiting() || s.collectives.has_queued())
            },
        );
        if let Some(e) = failed.into_inner() {
            self.fatal(&e.to_string());
        }
        match passed {
            Ok(worked) => worked,
            Err(_) => self.fatal(
                "a thread panicked while it made MPI calls, so the MPI state cannot be trusted",
            ),
        }
    }

    /// Passes made so far by anyone.
    pub(super) fn passes(&self) -> u64 {
        self.passes.load(Ordering::Relaxed)
    }

    /// Blocks the last idle worker until `ready()` (frames arrived),
    /// an unpark (`sleep` took its token), or `timeout`, making passes
    /// meanwhile: an arrival over MPI cannot wake a thread (MPI has no
    /// wait on "a message or a local event"), so it naps in `sleep`
    /// between passes, 50 us at first, growing to 1 ms (the MPI thread's
    /// ladder in `thread` mode); the helper's arrivals, and in a node
    /// that shares memory its ranks' frames, wake it.
    pub(super) fn park_on(
        &self,
        timeout: Option<Duration>,
        ready: &dyn Fn() -> bool,
        sleep: &mut Sleep<'_>,
    ) {
        const FIRST_NAP: Duration = Duration::from_micros(50);
        const LONGEST_NAP: Duration = Duration::from_millis(1);
        let s = &*self.shared;
        let deadline = timeout.map(|t| Instant::now() + t);
        let mut nap = FIRST_NAP;
        loop {
            self.progress();
            if ready() || s.finishing.load(Ordering::Acquire) {
                return;
            }
            let mut this_nap = nap;
            if let Some(d) = deadline {
                let left = d.saturating_duration_since(Instant::now());
                if left.is_zero() {
                    return;
                }
                this_nap = this_nap.min(left);
            }
            if sleep(Some(this_nap), ready) {
                return;
            }
            nap = (nap * 2).min(LONGEST_NAP);
        }
    }

    /// Lets the helper hand arrivals to the engine.
    pub(super) fn attach(&self, poller: DriverPoller) {
        let _ = self.poller.set(poller);
    }

    /// The helper thread's body: every `HELPER_PERIOD`, if nobody made a
    /// pass since its last look, it makes one, and polls the engine if
    /// frames wait to be handed on; it ends when the locale finishes.
    /// After it handed frames on it looks again sooner (from 50 us,
    /// doubling back to the period): a locale whose workers compute is
    /// likely to be called again soon (a caller's next call, a stream of
    /// requests for work).
    pub(super) fn helper(&self) {
        const SOON: Duration = Duration::from_micros(50);
        let s = &*self.shared;
        // Signs of life: MPI passes, and polls that handed frames on (in
        // a job of one node nobody else makes passes).
        let life = || self.passes() + s.node_polls.load(Ordering::Relaxed);
        let mut seen = life();
        let mut period = HELPER_PERIOD;
        loop {
            self.helper_bell
                .sleep(Some(period), || s.finishing.load(Ordering::Acquire));
            if s.finishing.load(Ordering::Acquire) {
                return;
            }
            period = (period * 2).min(HELPER_PERIOD);
            if life() == seen {
                self.pass_with(Progress::pass_all);
                if s.receiving.load(Ordering::Relaxed) > 0 {
                    // A batch being received needs passes to come in.
                    period = SOON;
                }
                // MPI's arrivals, or the node's rings' (which no MPI pass
                // shows: in a job of one node nobody else makes passes).
                if s.has_arrivals() || s.node_ready() {
                    match self.poller.get() {
                        // The engine's poll: handlers run (inline ones
                        // here, the others as tasks queued for the
                        // workers), replies complete their waits.
                        Some(p) => {
                            p.poll();
                            period = SOON;
                        }
                        // Before the engine is attached: a parked worker
                        // takes them.
                        None => s.wake_parked(),
                    }
                }
            }
            seen = life();
        }
    }

    /// Stops the helper's loop (it exits at its next look).
    pub(super) fn stop_helper(&self) {
        self.helper_bell.ring();
    }

    /// The end: waits for any pass in progress, then completes, drains
    /// and finalizes (`Progress::finish`). Once it returns no thread
    /// makes an MPI call through this locale.
    pub(super) fn finish(&self) -> Result<(), crate::error::Error> {
        let p = self.progress.with_lock(|state| state.take());
        match p {
            Some(p) => p.finish(),
            None => Ok(()),
        }
    }

    /// Ends the job from any thread: prints `message` and calls
    /// `MPI_Abort`, once no pass is in progress (or after a grace period,
    /// as a last resort, if a pass is stuck).
    pub(super) fn abort(&self, message: &str, grace: Duration) -> ! {
        eprintln!("{message}");
        let until = Instant::now() + grace;
        loop {
            // Under the flag, so that no pass's MPI call overlaps it.
            self.progress.try_with(|| {
                sys::abort(1);
            });
            if Instant::now() >= until {
                sys::abort(1);
            }
            std::thread::sleep(Duration::from_micros(100));
        }
    }

    /// A fatal MPI error or a broken state during a pass: the job cannot
    /// go on.
    fn fatal(&self, why: &str) -> ! {
        self.abort(
            &format!(
                "cantus: locale {}: {why}; aborting the MPI job",
                self.shared.here
            ),
            Duration::from_secs(3),
        )
    }
}
