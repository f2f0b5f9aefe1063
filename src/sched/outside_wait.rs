//! Outside threads (`main`, any OS thread) that block on a cantus
//! variable: accounting, spinning then parking, and the deadlock check
//! they run while parked.
//!
//! Deadlock detection is a closed protocol (`sleep/README.md`, "Deadlock
//! detection"): a deadlock, as cantus can see one, always includes an
//! outside thread blocked in cantus, so every blocked outside thread parks
//! with a timeout of one grace period and, on each timeout, samples the
//! runtime. Two agreeing "stuck" samples one grace period apart are a
//! deadlock. No worker has to decide it is the last one awake.

use super::block::BlockKind;
use super::registry::{CURRENT, Registry};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Wake-ups of blocked outside threads (progress the deadlock check sees).
pub(crate) static OUTSIDE_WAKES: AtomicU64 = AtomicU64::new(0);

/// Outside threads blocked in cantus while no runtime runs.
static BLOCKED_WITHOUT_RUNTIME: AtomicUsize = AtomicUsize::new(0);

/// Busy-wait iterations of an outside thread before it starts yielding.
const OUTSIDE_SPIN: u32 = 200;
/// `sched_yield` calls of an outside thread before it parks (each lets a
/// worker on the same core run; about 0.2 us each when nothing else runs).
const OUTSIDE_YIELDS: u32 = 1_000;

/// A blocked outside thread, as the deadlock report lists it.
#[derive(Clone)]
pub(crate) struct OutsideWaiter {
    pub(crate) thread: String,
    pub(crate) kind: BlockKind,
    pub(crate) addr: usize,
}

/// Every outside thread blocked in cantus now (slot per waiter; `None`
/// marks a free slot). Only touched on the slow path of blocking.
static WAITERS: Mutex<Vec<Option<OutsideWaiter>>> = Mutex::new(Vec::new());

/// The blocked outside threads, for the deadlock report.
pub(crate) fn outside_waiters() -> Vec<OutsideWaiter> {
    WAITERS
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .iter()
        .flatten()
        .cloned()
        .collect()
}

thread_local! {
    /// Set while this outside thread waits for the whole program (the
    /// root task of `block_on`/`run`, or shutdown): such a wait is long,
    /// and idle workers need not make room for it.
    static LONG_WAIT: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Runs `f` with this thread's waits marked long (see `LONG_WAIT`).
pub(crate) fn long_wait<R>(f: impl FnOnce() -> R) -> R {
    let prev = LONG_WAIT.with(|l| l.replace(true));
    let r = f();
    LONG_WAIT.with(|l| l.set(prev));
    r
}

/// Marks an outside thread blocked in cantus for as long as it lives: the
/// runtime's counters, and the list the deadlock report prints.
pub(crate) struct OutsideBlocked {
    registry: Option<Arc<Registry>>,
    kind: BlockKind,
    prompt: bool,
    slot: usize,
}

impl OutsideBlocked {
    pub(crate) fn enter(kind: BlockKind, addr: usize) -> OutsideBlocked {
        let prompt = !LONG_WAIT.with(|l| l.get());
        Self::enter_as(kind, addr, prompt)
    }

    /// As [`enter`](Self::enter), saying whether the wait is prompt (see
    /// `OutsideCounters::prompt`).
    pub(crate) fn enter_as(kind: BlockKind, addr: usize, prompt: bool) -> OutsideBlocked {
        let registry = CURRENT.lock().unwrap_or_else(|e| e.into_inner()).clone();
        match &registry {
            Some(r) => {
                r.outside.blocked[kind as usize].fetch_add(1, Ordering::SeqCst);
                if prompt {
                    r.outside.prompt.fetch_add(1, Ordering::SeqCst);
                }
            }
            None => {
                BLOCKED_WITHOUT_RUNTIME.fetch_add(1, Ordering::SeqCst);
            }
        }
        let me = OutsideWaiter {
            thread: if super::worker::host::is_host_thread() {
                // Its wait runs that worker's loop (`worker/host.rs`).
                format!("{} (the thread that runs worker 0)", thread_label())
            } else {
                thread_label()
            },
            kind,
            addr,
        };
        let slot = {
            let mut w = WAITERS.lock().unwrap_or_else(|e| e.into_inner());
            match w.iter().position(Option::is_none) {
                Some(i) => {
                    w[i] = Some(me);
                    i
                }
                None => {
                    w.push(Some(me));
                    w.len() - 1
                }
            }
        };
        OutsideBlocked {
            registry,
            kind,
            prompt,
            slot,
        }
    }

    pub(crate) fn registry(&self) -> Option<&Arc<Registry>> {
        self.registry.as_ref()
    }
}

impl Drop for OutsideBlocked {
    fn drop(&mut self) {
        WAITERS.lock().unwrap_or_else(|e| e.into_inner())[self.slot] = None;
        match &self.registry {
            Some(r) => {
                r.outside.blocked[self.kind as usize].fetch_sub(1, Ordering::SeqCst);
                if self.prompt {
                    r.outside.prompt.fetch_sub(1, Ordering::SeqCst);
                }
            }
            None => {
                BLOCKED_WITHOUT_RUNTIME.fetch_sub(1, Ordering::SeqCst);
            }
        }
    }
}

fn thread_label() -> String {
    let t = std::thread::current();
    match t.name() {
        Some(n) => format!("\"{n}\""),
        None => format!("{:?}", t.id()),
    }
}

/// Counts a wake-up of a blocked outside thread.
pub(crate) fn note_outside_wake() {
    OUTSIDE_WAKES.fetch_add(1, Ordering::AcqRel);
}

/// Blocks the calling outside thread on a wait-queue node until `woken`:
/// spins briefly, then yields, then parks, checking for a deadlock once
/// per grace period while parked. `what` names the variable's address.
pub(crate) fn block_outside(kind: BlockKind, addr: usize, woken: &AtomicBool) {
    let accounting = OutsideBlocked::enter(kind, addr);
    // Read before the first spin, so that a bad setting is said whether or
    // not this wait gets as far as parking.
    let grace = match accounting.registry() {
        Some(r) => r.config.deadlock,
        None => grace_without_runtime(),
    };
    // Spin briefly, then yield, then park: an outside thread should notice
    // a quick hand-off without a wake-up system call, but never hold a
    // core the workers need.
    for i in 0..OUTSIDE_SPIN + OUTSIDE_YIELDS {
        // Acquire pairs with the Release store in WakeList::wake_all.
        if woken.load(Ordering::Acquire) {
            return;
        }
        if i < OUTSIDE_SPIN {
            std::hint::spin_loop();
        } else {
            std::thread::yield_now();
        }
    }
    let Some(grace) = grace else {
        while !woken.load(Ordering::Acquire) {
            std::thread::park();
        }
        return;
    };
    let sample = || match accounting.registry() {
        Some(r) => super::deadlock::stuck_sample(r),
        None => stuck_without_runtime(),
    };
    let mut prev = sample();
    let mut since = Instant::now();
    loop {
        if woken.load(Ordering::Acquire) {
            return;
        }
        let left = grace.saturating_sub(since.elapsed());
        if !left.is_zero() {
            std::thread::park_timeout(left);
            continue;
        }
        let now = sample();
        if now.is_some() && now == prev && !woken.load(Ordering::Acquire) {
            match accounting.registry() {
                Some(r) => super::deadlock::report(r, grace),
                None => super::deadlock::report_without_runtime(grace),
            }
        }
        prev = now;
        since = Instant::now();
    }
}

/// The grace period when no runtime runs: `CANTUS_DEADLOCK_MS` if set,
/// else the default. No runtime's start checked the variable, and this
/// thread's wait node is queued on its variable (it cannot unwind now):
/// a bad value is said once, naming the variable, and the default holds.
fn grace_without_runtime() -> Option<Duration> {
    static SAID: std::sync::Once = std::sync::Once::new();
    let ms = match std::env::var("CANTUS_DEADLOCK_MS") {
        Err(_) => crate::config::DEFAULT_DEADLOCK_MS,
        Ok(v) => crate::config::parse_deadlock_ms(&v).unwrap_or_else(|e| {
            SAID.call_once(|| {
                eprintln!(
                    "cantus: {e}; with no runtime running, deadlock detection for threads \
                     blocked on cantus variables uses the default {} ms",
                    crate::config::DEFAULT_DEADLOCK_MS
                )
            });
            crate::config::DEFAULT_DEADLOCK_MS
        }),
    };
    (ms > 0).then(|| Duration::from_millis(ms))
}

/// With no runtime, the process is stuck when every one of its threads
/// is blocked on a cantus variable: nothing is left to fill one.
fn stuck_without_runtime() -> StuckSample {
    let blocked = BLOCKED_WITHOUT_RUNTIME.load(Ordering::SeqCst);
    (process_threads() == Some(blocked)).then(|| (OUTSIDE_WAKES.load(Ordering::Acquire), 0, 0))
}

/// Threads of this process (Linux: field 20 of /proc/self/stat).
pub(crate) fn process_threads() -> Option<usize> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    // The command name (field 2) may hold spaces and parentheses: the
    // fields after it start after the last ')'.
    let rest = &stat[stat.rfind(')')? + 1..];
    rest.split_whitespace().nth(17)?.parse().ok()
}

/// Called before an outside thread blocks: with no runtime running and
/// no other thread in the process, nothing could ever wake it, so this
/// panics with a clear message instead of hanging.
#[track_caller]
pub(crate) fn check_outside_block_can_end(op: &str) {
    if CURRENT.lock().unwrap_or_else(|e| e.into_inner()).is_none() && process_threads() == Some(1) {
        panic!(
            "cantus: {op} would block forever: no cantus runtime is running and this is the \
             only thread of the process, so nothing can fill or empty the variable. Run the \
             code that uses it inside cantus::run(|| ...) (or a cantus::Runtime's block_on), \
             where tasks can fill it, or fill it from another thread."
        );
    }
}

/// `Some` with a sample if the runtime (or, with no runtime, the
/// process) looks stuck now; two equal `Some` samples one grace period
/// apart are a deadlock. See `deadlock::stuck_sample`.
pub(crate) type StuckSample = Option<(u64, u64, u64)>;
