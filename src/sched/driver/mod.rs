//! The communication seam: a *driver* the workers poll, and how it counts
//! in termination. Transports (the shared-memory rings, MPI) implement
//! [`Driver`]; the scheduler knows nothing else about them. The protocol,
//! its invariants and memory orderings are in `README.md` beside this
//! file (seed 000, section 5: a communication progress engine beside the
//! tasking layer; tokio's park/driver split is the model for parking in
//! the driver).

use super::new_task::Task;
use super::outside_wait::StuckSample;
use super::registry::Registry;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Weak};
use std::time::Duration;

/// A communication engine that the workers make progress on.
///
/// Contract, checked by `tests.rs` beside this file:
/// - `poll` is never called by two threads at once (the registry holds a
///   poll token); the workers call it between tasks or in their idle
///   loop. A task or outside thread that cannot go on until the driver
///   makes progress (a sender that finds no room) may poll too, through
///   [`poll_with`], under the same token.
/// - Whatever a producer publishes *before* calling [`DriverWaker::wake`]
///   must be seen by the next `ready`/`poll` (use Release/Acquire, or a
///   lock): `ready` is the re-check of the sleep protocol (S2).
/// - `in_flight` counts work the driver holds that will still become
///   runtime work (accepted messages not yet turned into tasks, requests
///   sent and awaiting replies). While it is non-zero the runtime is not
///   quiescent, does not shut down, and is never reported deadlocked.
///   It must not drop to zero before the work it counted is visible to
///   the runtime (a task pushed through [`DriverContext::spawn`] is
///   counted by the runtime from the moment it is pushed).
/// - `park` (optional) blocks the calling worker until something arrives,
///   `unpark` is called, or the timeout passes. An `unpark` that comes
///   before the `park` it is meant for makes that `park` return at once
///   (a token, like `std::thread::park`).
pub(crate) trait Driver: Send + Sync + 'static {
    /// Takes what arrived and hands it to the runtime through `cx`.
    /// Returns how many items of program work it handled (0: nothing, or
    /// only runtime control traffic that makes no work: such items must
    /// not end an idle worker's idle loop, or each wave of the job-wide
    /// deadlock check would look like progress).
    fn poll(&self, cx: &DriverContext<'_>) -> usize;

    /// Whether `poll` would find something now (cheap: idle workers ask
    /// it before every poll, and poll only when it says yes, so it must
    /// never say no while `poll` has something to do).
    fn ready(&self) -> bool;

    /// Work held by the driver that will still become runtime work.
    fn in_flight(&self) -> u64;

    /// Whether something outside this process may still send work that
    /// this runtime cannot see coming (another locale of the job, busy or
    /// waiting on a timer). While it is true, the deadlock check does not
    /// conclude from this process's samples: this process alone cannot
    /// tell a deadlock from waiting for another locale. It asks
    /// [`job_stuck_sample`](Self::job_stuck_sample) instead.
    fn others_may_send(&self) -> bool {
        false
    }

    /// One wave of the job-wide deadlock check (`sched/deadlock_wave.rs`), run by
    /// a blocked outside thread of this process: `Some` verdict when no
    /// process of the job is busy, one is stuck and no message is in
    /// flight; two equal `Some` verdicts of consecutive waves are a
    /// deadlock. `None` where this process cannot gather the job's state
    /// (only locale 0 runs waves).
    fn job_stuck_sample(&self) -> StuckSample {
        None
    }

    /// For the report of a deadlock across processes: every other
    /// process's waiters, by locale (`deadlock::waiter_lines` there).
    fn job_waiters(&self) -> Vec<(usize, Vec<String>)> {
        Vec::new()
    }

    /// Whether the driver moves its messages on a thread of its own,
    /// which may share a core with the workers (an MPI thread): an idle
    /// worker then gives the core away (`sched_yield`) between its polls
    /// instead of spinning, or that thread could not run.
    fn progress_thread(&self) -> bool {
        false
    }

    /// Whether this driver can block the last idle worker (`park`).
    fn can_park(&self) -> bool {
        false
    }

    /// Blocks until something arrives, `unpark`, or `timeout`.
    fn park(&self, _timeout: Option<Duration>) {}

    /// Ends a `park` (now, or the next one if none is in progress).
    fn unpark(&self) {}
}

/// What `Driver::poll` may do with what arrived.
pub(crate) struct DriverContext<'a> {
    registry: &'a Registry,
}

impl DriverContext<'_> {
    /// Workers inside their idle loop now (for tests of the seam).
    #[cfg(test)]
    pub(crate) fn idle_workers(&self) -> usize {
        self.registry.idle.idle()
    }

    /// Runs `f` as a detached task (a handler: it may block on sync
    /// variables). Pushed on the polling worker's own deque, from where
    /// idle workers steal it.
    pub(crate) fn spawn<F: FnOnce() + Send + 'static>(&self, f: F) {
        // SAFETY: `f` is 'static and detached tasks have no group.
        let task = unsafe {
            Task::from_closure(
                move || {
                    crate::trace::label(crate::trace::task_kind::REMOTE);
                    f()
                },
                std::ptr::null(),
            )
        };
        match super::WorkerLocal::current() {
            Some(local) if std::ptr::eq(&*local.registry, self.registry) => local.push(task),
            _ => self.registry.inject(task),
        }
    }
}

impl DriverContext<'_> {
    /// Whether the runtime has no task queued, running, blocked or
    /// sleeping and the driver holds nothing in flight (what shutdown
    /// waits for), as seen from inside a poll.
    pub(crate) fn quiescent(&self) -> bool {
        self.registry.quiescent()
    }

    /// This locale's answer to a wave of the job-wide deadlock check,
    /// taken inside the poll (so under the poll token).
    pub(crate) fn locale_answer(
        &self,
        messages: impl FnOnce() -> (u64, u64),
        unsent: bool,
    ) -> super::deadlock_wave::Answer {
        super::deadlock::locale_answer(self.registry, messages, unsent)
    }
}

/// Lets a producer (a thread or process feeding the driver) wake the
/// runtime after publishing something for `poll` to find.
#[derive(Clone)]
#[allow(dead_code)] // for in-process producers (an MPI progress thread); tests use it now
pub(crate) struct DriverWaker {
    registry: Weak<Registry>,
}

#[allow(dead_code)] // as above
impl DriverWaker {
    pub(crate) fn new(registry: &Arc<Registry>) -> DriverWaker {
        DriverWaker {
            registry: Arc::downgrade(registry),
        }
    }

    /// Wakes one sleeping worker (or the one parked in the driver) so
    /// that someone polls soon. Call after publishing.
    pub(crate) fn wake(&self) {
        if let Some(r) = self.registry.upgrade() {
            r.sleep.notify_one();
            if r.driver_parked.load(Ordering::Acquire) {
                if let Some(d) = &r.driver {
                    d.unpark();
                }
            }
        }
    }
}

/// Lets a thread beside the workers (the MPI transport's helper in its
/// inline mode) poll the driver when no worker has for a while: the same
/// poll, under the same token, as a worker's ([`poll`]); handler tasks it
/// makes go to the injector.
#[derive(Clone)]
#[cfg_attr(not(feature = "mpi"), allow(dead_code))]
pub(crate) struct DriverPoller {
    registry: Weak<Registry>,
}

#[cfg_attr(not(feature = "mpi"), allow(dead_code))]
impl DriverPoller {
    pub(crate) fn new(registry: &Arc<Registry>) -> DriverPoller {
        DriverPoller {
            registry: Arc::downgrade(registry),
        }
    }

    /// Polls the driver if no one else is polling it (nothing once the
    /// runtime is gone). Returns the items handled.
    pub(crate) fn poll(&self) -> usize {
        self.registry.upgrade().map_or(0, |r| poll(&r))
    }
}

/// The registry's side of the seam.
pub(crate) struct DriverSlot {
    /// The poll token: set while one thread polls.
    polling: AtomicBool,
    /// Items handled by all polls (progress the deadlock check sees).
    pub(crate) handled: AtomicU64,
}

impl DriverSlot {
    pub(crate) fn new() -> DriverSlot {
        DriverSlot {
            polling: AtomicBool::new(false),
            handled: AtomicU64::new(0),
        }
    }
}

/// Polls the registry's driver if no one else is polling it. Returns how
/// many items were handled.
pub(crate) fn poll(reg: &Registry) -> usize {
    let Some(driver) = &reg.driver else { return 0 };
    poll_with(reg, |cx| driver.poll(cx))
}

/// Runs `f` (a poll of the registry's driver, or a narrower one that the
/// driver's owner knows how to make) under the poll token, if no one else
/// holds it; returns what `f` returned (items handled), or 0 if the token
/// was taken.
pub(crate) fn poll_with(reg: &Registry, f: impl FnOnce(&DriverContext<'_>) -> usize) -> usize {
    let slot = &reg.driver_slot;
    // Cheap test first: a contended token is a busy cache line.
    if slot.polling.load(Ordering::Relaxed)
        || slot
            .polling
            .compare_exchange(false, true, Ordering::Acquire, Ordering::Relaxed)
            .is_err()
    {
        return 0;
    }
    let n = f(&DriverContext { registry: reg });
    if n > 0 {
        crate::trace::record(crate::trace::kind::POLL, 0, n as u32, 0, 0);
        // Only the token's holder writes it: a load and a store, no
        // read-modify-write. Release: readers (the deadlock samples) that
        // see the new count see what this poll did.
        let h = slot.handled.load(Ordering::Relaxed);
        slot.handled.store(h + n as u64, Ordering::Release);
    }
    // Release: the next poller sees this poll's effects on the driver.
    slot.polling.store(false, Ordering::Release);
    n
}

/// Whether the driver has something for `poll` (false without a driver).
#[inline]
pub(crate) fn ready(reg: &Registry) -> bool {
    reg.driver.as_ref().is_some_and(|d| d.ready())
}

/// Whether the driver says another process may still send work (false
/// without a driver).
#[inline]
pub(crate) fn others_may_send(reg: &Registry) -> bool {
    reg.driver.as_ref().is_some_and(|d| d.others_may_send())
}

/// One wave of the job-wide deadlock check (`None` without a driver).
pub(crate) fn job_stuck_sample(reg: &Registry) -> StuckSample {
    reg.driver.as_ref().and_then(|d| d.job_stuck_sample())
}

/// The other processes' waiters, for a deadlock report (none without a
/// driver).
pub(crate) fn job_waiters(reg: &Registry) -> Vec<(usize, Vec<String>)> {
    reg.driver
        .as_ref()
        .map_or_else(Vec::new, |d| d.job_waiters())
}

/// Work the driver holds (0 without a driver).
#[inline]
pub(crate) fn in_flight(reg: &Registry) -> u64 {
    reg.driver.as_ref().map_or(0, |d| d.in_flight())
}
