//! The registry: state shared by all workers of a runtime (stealers,
//! resume queues, the injector for outside threads, sleep state,
//! counters), and the process-wide "current runtime".

use super::block::BLOCK_KINDS;
use super::deque::Stealer;
use super::driver::{Driver, DriverSlot};
use super::idle::IdleWatch;
use super::new_task::{Queued, Task};
use super::sleep::Parker;
use super::sleep::Sleep;
use super::worker::blocking_call::BlockingCalls;
use crate::config::Config;
use crate::error::Error;
use crossbeam_deque::Injector;
use crossbeam_queue::SegQueue;
use crossbeam_utils::CachePadded;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

/// Per-worker counters. Each is written only by its own worker (a
/// relaxed load and store, no read-modify-write), and summed by queries.
#[derive(Default)]
pub(crate) struct Counters {
    pub(crate) spawned: AtomicU64,
    pub(crate) started: AtomicU64,
    pub(crate) finished: AtomicU64,
    pub(crate) blocked: [AtomicU64; BLOCK_KINDS],
    pub(crate) sleeping: AtomicU64,
    pub(crate) steals: AtomicU64,
    /// Steal rounds (every victim probed) that found nothing.
    pub(crate) failed_steal_rounds: AtomicU64,
    /// Steal attempts that lost a race (`Steal::Retry`).
    pub(crate) steal_retries: AtomicU64,
    /// Times this worker was woken from sleep by a notifier.
    pub(crate) woken: AtomicU64,
    pub(crate) parks: AtomicU64,
    pub(crate) carriers: AtomicU64,
    pub(crate) stacks: AtomicU64,
    pub(crate) detached_panics: AtomicU64,
    pub(crate) max_stack_resident: AtomicU64,
    pub(crate) idle: AtomicBool,
}

/// Adds to an owner-written counter.
#[inline(always)]
pub(crate) fn bump(c: &AtomicU64, by: u64) {
    c.store(
        c.load(Ordering::Relaxed).wrapping_add(by),
        Ordering::Relaxed,
    );
}

/// Subtracts from an owner-written counter.
#[inline(always)]
pub(crate) fn drop_by(c: &AtomicU64, by: u64) {
    c.store(
        c.load(Ordering::Relaxed).wrapping_sub(by),
        Ordering::Relaxed,
    );
}

pub(crate) struct WorkerShared {
    pub(crate) stealer: Stealer<Queued>,
    /// Slots of this worker's carriers whose task was woken; only this
    /// worker resumes them (see `sched/README.md`).
    pub(crate) resume: SegQueue<u32>,
    /// Tasks placed on this worker and started tasks moving to it
    /// (`worker/migrate.rs`): only this worker takes them.
    pub(crate) inbox: SegQueue<super::worker::migrate::Inbound>,
    pub(crate) counters: Counters,
}

/// Counters for outside threads (any thread may update: RMW).
#[derive(Default)]
pub(crate) struct OutsideCounters {
    pub(crate) injected: AtomicU64,
    pub(crate) blocked: [AtomicUsize; BLOCK_KINDS],
    /// Blocked outside threads that want to notice the end of their wait
    /// promptly: all but the root wait of `block_on`/`run` and shutdown.
    pub(crate) prompt: AtomicUsize,
    pub(crate) active: AtomicUsize,
}

/// A runtime with a driver was built in this process (`sched::has_driver`).
pub(crate) static DRIVER_BUILT: AtomicBool = AtomicBool::new(false);

pub(crate) struct Registry {
    pub(crate) config: Config,
    pub(crate) workers: Box<[CachePadded<WorkerShared>]>,
    pub(crate) injector: Injector<Task>,
    pub(crate) sleep: Sleep,
    pub(crate) terminate: AtomicBool,
    pub(crate) outside: CachePadded<OutsideCounters>,
    /// Workers in their idle loop (spinning or asleep): they would take
    /// work if someone split some off (seed 001's "task request"); the
    /// deadlock check samples it.
    pub(crate) idle: IdleWatch,
    /// Root tasks of `block_on`/`run` and calls from outside threads: run
    /// on a carrier with a main-thread-sized stack (`ROOT_STACK_SIZE`).
    pub(crate) roots: SegQueue<Task>,
    /// Bumped to ask idle workers to list their blocked tasks.
    pub(crate) report_gen: CachePadded<AtomicU64>,
    pub(crate) report: Mutex<DeadlockReport>,
    /// The communication engine the workers poll (`driver/README.md`);
    /// `None` for a runtime that talks to no one: then nothing polls.
    pub(crate) driver: Option<Arc<dyn Driver>>,
    pub(crate) driver_slot: DriverSlot,
    /// Set while a worker sleeps parked in the driver.
    pub(crate) driver_parked: CachePadded<AtomicBool>,
    /// The driver moves its messages on a thread of its own that may
    /// share a core with the workers (`Driver::progress_thread`): waiting
    /// by spinning gives the core away instead.
    pub(crate) progress_thread: bool,
    pub(crate) page: usize,
    /// Blocking-call threads (`worker/blocking_call.rs`).
    pub(crate) blocking: BlockingCalls,
}

/// Blocked tasks as the workers describe them for a deadlock report.
#[derive(Default)]
pub(crate) struct DeadlockReport {
    pub(crate) lines: Vec<String>,
    pub(crate) answered: usize,
}

/// The process's running runtime. Padded: outside threads lock it on
/// every spawn (`push_task`), and a neighbouring static read by every
/// task (the trace's switch) would make each lock a cache miss for all
/// workers.
pub(crate) static CURRENT: CachePadded<Mutex<Option<Arc<Registry>>>> =
    CachePadded::new(Mutex::new(None));

impl Registry {
    pub(crate) fn new(
        config: Config,
        stealers: Vec<Stealer<Queued>>,
        driver: Option<Arc<dyn Driver>>,
    ) -> Registry {
        if driver.is_some() {
            DRIVER_BUILT.store(true, Ordering::Relaxed);
        }
        let n = config.workers;
        let sleep = match &driver {
            Some(d) if d.can_park() => Sleep::with_parker(n, Box::new(DriverParker(d.clone()))),
            _ => Sleep::new(n),
        };
        Registry {
            workers: stealers
                .into_iter()
                .map(|stealer| {
                    CachePadded::new(WorkerShared {
                        stealer,
                        resume: SegQueue::new(),
                        inbox: SegQueue::new(),
                        counters: Counters::default(),
                    })
                })
                .collect(),
            injector: Injector::new(),
            sleep,
            terminate: AtomicBool::new(false),
            outside: CachePadded::new(OutsideCounters::default()),
            idle: IdleWatch::new(n),
            roots: SegQueue::new(),
            report_gen: CachePadded::new(AtomicU64::new(0)),
            report: Mutex::new(DeadlockReport::default()),
            progress_thread: driver.as_ref().is_some_and(|d| d.progress_thread()),
            driver,
            driver_slot: DriverSlot::new(),
            driver_parked: CachePadded::new(AtomicBool::new(false)),
            page: crate::config::page_size(),
            blocking: BlockingCalls::new(n, config.max_threads),
            config,
        }
    }

    /// Makes `reg` the process's running runtime, unless one is running.
    pub(crate) fn install(reg: &Arc<Registry>) -> Result<(), Error> {
        let mut cur = CURRENT.lock().unwrap_or_else(|e| e.into_inner());
        if cur.is_some() {
            return Err(Error::new(
                crate::error::ErrorKind::AlreadyRunning,
                "a cantus runtime is already running in this process; shut it down first \
                 (cantus runs one runtime at a time)",
            ));
        }
        *cur = Some(reg.clone());
        Ok(())
    }

    pub(crate) fn uninstall() {
        CURRENT.lock().unwrap_or_else(|e| e.into_inner()).take();
    }

    /// The running runtime: the worker's own, or the process's current.
    pub(crate) fn current() -> Option<Arc<Registry>> {
        if let Some(local) = super::worker::WorkerLocal::current() {
            return Some(local.registry.clone());
        }
        CURRENT.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Runs `f` with the running runtime (the worker's own, or the
    /// process's current, whose lock is held while `f` runs: `f` must not
    /// block or start or stop a runtime).
    pub(crate) fn with_current<R>(f: impl FnOnce(Option<&Registry>) -> R) -> R {
        if let Some(local) = super::worker::WorkerLocal::current() {
            return f(Some(&local.registry));
        }
        f(CURRENT.lock().unwrap_or_else(|e| e.into_inner()).as_deref())
    }

    /// Pushes a task from an outside thread.
    pub(crate) fn inject(&self, task: Task) {
        self.outside.injected.fetch_add(1, Ordering::Relaxed);
        self.injector.push(task);
        self.sleep.notify_one();
    }

    /// Puts a task that a worker had queued (and counted as spawned) on
    /// the injector for the other workers: a disabled worker's hand-on.
    pub(crate) fn hand_on(&self, task: Task) {
        self.injector.push(task);
        self.sleep.notify_one();
    }

    /// Pushes the root task of an outside thread's call (`block_on`, a
    /// `join` or `forall` called from `main`): a worker runs it on a
    /// main-thread-sized stack.
    pub(crate) fn inject_root(&self, task: Task) {
        self.outside.injected.fetch_add(1, Ordering::Relaxed);
        self.roots.push(task);
        self.sleep.notify_one();
    }

    fn sum(&self, f: impl Fn(&Counters) -> u64) -> u64 {
        self.workers
            .iter()
            .map(|w| f(&w.counters))
            .fold(0, u64::wrapping_add)
    }

    pub(crate) fn blocked_tasks(&self) -> u64 {
        self.sum(|c| {
            c.blocked
                .iter()
                .map(|b| b.load(Ordering::Relaxed))
                .fold(0, u64::wrapping_add)
        })
    }

    pub(crate) fn blocked_tasks_of(&self, kind: usize) -> u64 {
        self.sum(|c| c.blocked[kind].load(Ordering::Relaxed))
    }

    pub(crate) fn sleeping_tasks(&self) -> u64 {
        self.sum(|c| c.sleeping.load(Ordering::Relaxed))
    }

    pub(crate) fn outside_blocked(&self) -> usize {
        self.outside
            .blocked
            .iter()
            .map(|b| b.load(Ordering::Relaxed))
            .sum()
    }

    /// Tasks pushed but not yet started.
    pub(crate) fn queued_tasks(&self) -> u64 {
        let started = self.sum(|c| c.started.load(Ordering::Acquire));
        let spawned = self.sum(|c| c.spawned.load(Ordering::Acquire))
            + self.outside.injected.load(Ordering::Acquire);
        spawned.saturating_sub(started)
    }

    /// Tasks started and not finished, blocked or sleeping.
    pub(crate) fn running_tasks(&self) -> u64 {
        let finished = self.sum(|c| c.finished.load(Ordering::Acquire));
        let started = self.sum(|c| c.started.load(Ordering::Acquire));
        started
            .saturating_sub(finished)
            .saturating_sub(self.blocked_tasks())
            .saturating_sub(self.sleeping_tasks())
    }

    pub(crate) fn idle_workers(&self) -> usize {
        self.workers
            .iter()
            .filter(|w| w.counters.idle.load(Ordering::Relaxed))
            .count()
    }

    /// Every task ever pushed has finished. Reads `finished` before
    /// `spawned`: a task's spawn happens-before its finish, and a parent's
    /// spawns happen-before its own finish, so equality means quiescence.
    pub(crate) fn quiescent(&self) -> bool {
        // The driver first: a handler task it spawned is counted in
        // `spawned` before the driver stops counting it in `in_flight`
        // (contract of `Driver`), so once we read 0 here (Acquire), the
        // reads below see that spawn.
        if super::driver::in_flight(self) != 0 {
            return false;
        }
        let finished = self.sum(|c| c.finished.load(Ordering::Acquire));
        let spawned = self.sum(|c| c.spawned.load(Ordering::Acquire))
            + self.outside.injected.load(Ordering::Acquire);
        finished == spawned
    }
}

/// The driver as the sleep protocol's parker.
struct DriverParker(Arc<dyn Driver>);

impl Parker for DriverParker {
    fn park(&self, timeout: Option<std::time::Duration>) {
        self.0.park(timeout)
    }
    fn unpark(&self) {
        self.0.unpark()
    }
}
