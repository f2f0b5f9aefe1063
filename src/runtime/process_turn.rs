//! The process's turn to run a runtime: cantus runs one runtime per
//! process (one set of workers, one job of locales, one symmetric heap),
//! and whoever starts one holds the turn from the first step of `build`
//! until the last step of shutdown.
//!
//! The rule when `build` finds the turn held:
//!
//! 1. A test thread of Rust's test harness (`test_harness.rs`) waits for
//!    its turn: `cargo test` runs tests on parallel threads, and two tests
//!    that each start a runtime then run one after the other, not fail.
//! 2. Waiting cannot help, so `build` fails at once with
//!    [`ErrorKind::AlreadyRunning`], when the caller is a worker of the
//!    running runtime (it would wait for itself), when the caller's own
//!    thread started the running runtime (same), or when the thread that
//!    started it has ended (a runtime kept in a static, or leaked, runs
//!    until the process ends).
//! 3. Any other thread fails at once too, as before: outside tests, two
//!    runtimes at a time are a mistake to report, and a program whose
//!    runtime holder waits for the thread that waits for the turn would
//!    hang.
//!
//! A waiting test re-checks rule 2 every [`RECHECK`] (the holder's thread
//! may end without shutting its runtime down).

use crate::error::{Error, ErrorKind};
use crate::sched::WorkerLocal;
use std::sync::{Arc, Condvar, Mutex, Weak};
use std::thread::ThreadId;
use std::time::Duration;

/// How often a waiting test looks again at the holder's thread.
const RECHECK: Duration = Duration::from_millis(50);

/// Who holds the turn.
struct Holder {
    thread: ThreadId,
    /// Dies with the holder's thread (its `ALIVE` token).
    alive: Weak<()>,
}

static HOLDER: Mutex<Option<Holder>> = Mutex::new(None);
/// Notified when the turn is given back.
static GIVEN_BACK: Condvar = Condvar::new();

thread_local! {
    /// Dropped when this thread ends: the holder's liveness.
    static ALIVE: Arc<()> = Arc::new(());
}

/// The turn, held by a starting or running runtime; dropping it gives it
/// back and wakes the tests waiting for it.
pub(crate) struct Turn(());

impl Turn {
    /// Takes the turn for the calling thread, waiting for it where the
    /// rule above says so.
    pub(crate) fn take() -> Result<Turn, Error> {
        let mut holder = HOLDER.lock().unwrap_or_else(|e| e.into_inner());
        // Computed once, and only when the turn is held: it costs a backtrace.
        let mut waits: Option<bool> = None;
        while let Some(h) = holder.as_ref() {
            if let Some(why) = cannot_wait(h) {
                return Err(already_running(why));
            }
            if !*waits.get_or_insert_with(|| crate::test_harness::current_test().is_some()) {
                return Err(already_running(""));
            }
            holder = GIVEN_BACK
                .wait_timeout(holder, RECHECK)
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
        *holder = Some(Holder {
            thread: std::thread::current().id(),
            alive: ALIVE.with(Arc::downgrade),
        });
        Ok(Turn(()))
    }
}

impl Drop for Turn {
    fn drop(&mut self) {
        HOLDER.lock().unwrap_or_else(|e| e.into_inner()).take();
        GIVEN_BACK.notify_all();
    }
}

/// Why waiting for `holder` to give the turn back cannot help, if it
/// cannot (rule 2).
fn cannot_wait(holder: &Holder) -> Option<&'static str> {
    if WorkerLocal::current().is_some() {
        Some(" (this call comes from one of its own workers)")
    } else if holder.thread == std::thread::current().id() {
        Some(" (this thread started it)")
    } else if holder.alive.strong_count() == 0 {
        Some(" (the thread that started it has ended, so it runs until the process ends)")
    } else {
        None
    }
}

fn already_running(why: &str) -> Error {
    Error::new(
        ErrorKind::AlreadyRunning,
        format!(
            "a cantus runtime is already running in this process{why}; shut it down first \
             (cantus runs one runtime at a time; tests of one binary take turns)"
        ),
    )
}
