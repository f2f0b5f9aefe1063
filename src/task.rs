//! Task control: what a task (or an outside thread) does to let others
//! run, to wait without holding its worker, and to tell the runtime an
//! outside thread is still at work: [`yield_now`], [`sleep`],
//! [`blocking`] and [`OutsideActivity`].

// Chapel's tasking interface (seed 000, section 3) and Qthreads'
// blocking actions; `docs/references.md` names the papers.

use crate::sched::WorkerLocal;
use crate::sched::registry::Registry;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

/// Lets other tasks run, then continues. In a task, the task goes to the
/// back of its worker's ready list; in an outside thread, the OS thread
/// yields.
pub fn yield_now() {
    const WHAT: &str = "cantus::task::yield_now";
    match WorkerLocal::current() {
        Some(local) => {
            if let Some(name) = local.no_wait.get() {
                crate::sched::no_wait::refuse_wait(name, WHAT);
            }
            if local.in_task() {
                // A driver's progress thread (MPI) may share this core and
                // be what the task waits for (room to send, a message):
                // give the core away too, or a task that yields in a loop
                // would keep it until the kernel's time slice ends.
                if local.registry.progress_thread {
                    std::thread::yield_now();
                }
                local.yield_current()
            } else {
                std::thread::yield_now()
            }
        }
        None => {
            crate::sched::no_wait::check_wait(WHAT);
            outside_yield();
        }
    }
}

/// `yield_now` in an outside thread: the thread that hosts a worker runs
/// that worker's ready tasks (`sched/worker/host.rs`), another yields its
/// CPU. Out of line: the task's path stays small.
#[inline(never)]
fn outside_yield() {
    match crate::sched::worker::host::hosted() {
        Some(local) => crate::sched::worker::host::yield_round(local),
        None => std::thread::yield_now(),
    }
}

/// Sleeps for `duration`. In a task, only the task sleeps: its worker runs
/// other tasks meanwhile. In an outside thread, the OS thread sleeps.
pub fn sleep(duration: Duration) {
    crate::sched::no_wait::check_wait("cantus::task::sleep");
    match WorkerLocal::current().filter(|l| l.in_task()) {
        Some(local) => local.sleep_current(Instant::now() + duration),
        None => match crate::sched::worker::host::hosted() {
            // The thread that hosts a worker runs its tasks meanwhile.
            Some(local) => {
                crate::sched::worker::host::sleep_until(local, Instant::now() + duration)
            }
            None => std::thread::sleep(duration),
        },
    }
}

/// Runs `call`, which blocks its thread (a system call: a read from a
/// pipe or socket, a wait for a child process), without holding up the
/// task's worker: in a task, the task moves to a blocking-call thread of
/// the runtime for the length of `call` and then comes back, and its
/// worker runs other tasks meanwhile (Qthreads' `qt_begin_blocking_action`
/// and `qt_end_blocking_action`). So a task may wait for I/O that another
/// task of the same worker is to produce.
///
/// While it runs there, `call` is on another OS thread, as in an outside
/// thread: cantus's waits (a `SyncVar` read, a join) block that thread,
/// and queries answer as for an outside thread. Hence `call` and its
/// result must be `Send`. A panic in `call` comes home and continues in
/// the task.
///
/// Also counted as outside activity while it runs, so a deadlock is not
/// reported while every other task waits for what `call` will bring. In
/// an outside thread (or in an inline remote call, which may not leave
/// its worker) `call` simply runs where it is, declared as activity.
///
/// ```
/// let rt = cantus::Runtime::new().unwrap();
/// let got = rt.block_on(|| {
///     cantus::task::blocking(|| {
///         // A blocking system call, off the worker.
///         std::fs::read_to_string("/proc/self/status").map(|s| !s.is_empty())
///     })
/// });
/// assert!(got.unwrap());
/// ```
///
/// The call runs on another thread, so what it captures must be `Send`
/// (an `Rc` is refused):
///
/// ```compile_fail
/// fn read(shared: std::rc::Rc<String>) -> usize {
///     cantus::task::blocking(move || shared.len())
/// }
/// ```
///
/// and so must what it returns:
///
/// ```compile_fail
/// fn open() -> std::rc::Rc<u32> {
///     cantus::task::blocking(|| std::rc::Rc::new(1))
/// }
/// ```
pub fn blocking<F, R>(call: F) -> R
where
    F: FnOnce() -> R + Send,
    R: Send,
{
    crate::sched::body_may_go_away(|| away_and_back(call))
        .unwrap_or_else(|p| std::panic::resume_unwind(p))
}

/// `blocking`'s switch and back, in a frame of its own: `call` runs away
/// and nothing else of this frame runs after the switch but returning,
/// so no thread-local address computed on one thread is used on the
/// other (`sched/README.md`, "Blocking calls"). A panic comes home as a
/// value, to continue on the task's own thread.
#[inline(never)]
fn away_and_back<F, R>(call: F) -> std::thread::Result<R>
where
    F: FnOnce() -> R + Send,
    R: Send,
{
    crate::sched::begin_blocking();
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(call));
    crate::sched::end_blocking();
    r
}

/// Declares, for as long as it lives, that the calling outside thread is
/// busy and may still wake blocked tasks, so the deadlock detector must not
/// fire while every worker is idle. Hold one in an OS thread that will fill
/// sync variables that tasks wait on, when it does not block in cantus
/// itself.
pub struct OutsideActivity {
    registry: Arc<Registry>,
}

impl OutsideActivity {
    /// Starts declaring activity; `None` if no runtime is running.
    pub fn begin() -> Option<OutsideActivity> {
        let registry = Registry::current()?;
        registry.outside.active.fetch_add(1, Ordering::SeqCst);
        Some(OutsideActivity { registry })
    }
}

impl Drop for OutsideActivity {
    fn drop(&mut self) {
        self.registry.outside.active.fetch_sub(1, Ordering::SeqCst);
    }
}
