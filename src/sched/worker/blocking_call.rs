//! Blocking calls: a task that is about to block its thread in a system
//! call (Qthreads' `qt_begin_blocking_action`) leaves its worker for a
//! *blocking-call thread* and comes back when the call is done
//! (`qt_end_blocking_action`), so its worker runs other tasks meanwhile.
//! The protocol and why it is sound are in `sched/README.md`, "Blocking
//! calls"; in short:
//!
//! 1. Leaving (`go_away`, on the worker): the task suspends its carrier
//!    with `Suspend::Offload`. The worker's `resume` hands the carrier
//!    (its stack, with the task's frames on it) to a blocking-call
//!    thread it reserved for it, and counts it as outside activity, so
//!    no deadlock or stall is reported while the call blocks.
//! 2. Away: the blocking-call thread resumes the carrier. The task runs
//!    there as an outside thread does: `WorkerLocal::current()` is none
//!    on that thread, so a full/empty wait blocks the thread, and
//!    nothing of the worker is touched.
//! 3. Coming home (`come_home`, on the blocking-call thread): the task
//!    suspends with `Suspend::Home`; the thread puts the carrier in its
//!    worker's homecoming list and wakes the worker, which resumes it as
//!    it resumes any woken task. The task restores its worker's view of
//!    it (`arrived_home`), as after any switch.
//!
//! A task only leaves when its body is a C function run under
//! [`body_may_go_away`] (marked in its task word), which brings it home
//! should the function return while away: the frames of the worker below
//! the task must only ever run on the worker's thread. Other tasks, and
//! outside threads, make the call where they are ("in place"): declared
//! as outside activity, and their worker blocks in it.
//!
//! Thread-local variables: a function that spans a switch must not read
//! a thread-local both before and after it (the compiler may keep its
//! address), so every access here is in a function of its own that does
//! not span one. `errno` goes with the task both ways.

use super::{Carrier, NO_SLOT, Resume, Suspend, WorkerLocal};
use crate::fiber::guard;
use crate::sched::Registry;
use crate::sched::task_storage::{self, TaskStorage};
use corosensei::{CoroutineResult, Yielder};
use std::cell::Cell;
use std::collections::VecDeque;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;

/// A carrier away from its worker, with what is needed to run it there
/// and to bring it back.
pub(crate) struct Away {
    carrier: Carrier,
    home: usize,
    slot: u32,
    guard: (usize, usize),
    stack_size: usize,
    task_id: u64,
    storage: *mut TaskStorage,
    yielder: *const Yielder<Resume, Suspend>,
    errno: i32,
}

// SAFETY: an `Away` moves a suspended carrier between its worker's thread
// and one blocking-call thread. While away, the only code that runs on
// the carrier's stack is the task's own, from `go_away` to `come_home`,
// which touches no state of the worker's thread (`WorkerLocal` is found
// through the running thread's TLS, none on a blocking-call thread), and
// the worker's frames below the task (carrier_main, run_task) run again
// only after the carrier came home (`body_may_go_away` brings home a body
// that returns while away). The raw pointers are the task's storage (the
// task's, wherever it runs) and the carrier's own yielder (on its stack).
unsafe impl Send for Away {}

/// The blocking-call threads of a runtime, and the carriers on their way
/// back to each worker.
pub(crate) struct BlockingCalls {
    state: Mutex<PoolState>,
    ready: Condvar,
    /// Per worker: carriers back from a blocking call, taken by `resume`.
    homes: Box<[Mutex<Vec<Away>>]>,
    /// Most blocking-call threads (the runtime's thread limit, less its
    /// workers; at least one).
    limit: usize,
}

#[derive(Default)]
struct PoolState {
    /// Carriers waiting for their reserved thread.
    queue: VecDeque<Away>,
    /// Threads waiting for a carrier, not reserved.
    idle: usize,
    threads: Vec<JoinHandle<()>>,
    shutdown: bool,
}

fn locked<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // Nothing under these locks panics (queue and counter updates), so a
    // poisoned lock still holds consistent state.
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl BlockingCalls {
    pub(crate) fn new(workers: usize, max_threads: usize) -> BlockingCalls {
        BlockingCalls {
            state: Mutex::new(PoolState::default()),
            ready: Condvar::new(),
            homes: (0..workers).map(|_| Mutex::new(Vec::new())).collect(),
            limit: max_threads.saturating_sub(workers).max(1),
        }
    }

    /// Reserves a thread for one carrier: an idle one, or a new one.
    /// `false` if none can be had (the limit, or the system refused).
    fn reserve(&self, reg: &Arc<Registry>) -> bool {
        let mut st = locked(&self.state);
        if st.shutdown {
            return false;
        }
        if st.idle > 0 {
            st.idle -= 1;
            return true;
        }
        if st.threads.len() >= self.limit {
            return false;
        }
        let reg = reg.clone();
        match std::thread::Builder::new()
            .name("cantus-blocking".into())
            .spawn(move || blocking_thread(reg))
        {
            Ok(h) => {
                st.threads.push(h);
                true
            }
            Err(_) => false,
        }
    }

    fn send(&self, away: Away) {
        locked(&self.state).queue.push_back(away);
        self.ready.notify_one();
    }

    /// The carrier of `slot` back from its blocking call (`resume`).
    pub(super) fn take_home(&self, worker: usize, slot: u32) -> Carrier {
        let mut home = locked(&self.homes[worker]);
        let i = home
            .iter()
            .position(|a| a.slot == slot)
            .expect("a woken carrier is in its slot or back from a blocking call");
        home.swap_remove(i).carrier
    }

    /// Stops the blocking-call threads (at shutdown: no task is away).
    pub(crate) fn shutdown(&self) {
        let threads = {
            let mut st = locked(&self.state);
            st.shutdown = true;
            std::mem::take(&mut st.threads)
        };
        self.ready.notify_all();
        for t in threads {
            let _ = t.join();
        }
    }
}

thread_local! {
    /// On a blocking-call thread, while a task runs there: what it needs
    /// to go home.
    static AWAY: Cell<*const AwayHere> = const { Cell::new(std::ptr::null()) };
    /// Blocking actions made in place on this thread (`begin_in_place`),
    /// with or without a runtime.
    static IN_PLACE: Cell<u32> = const { Cell::new(0) };
    /// Which of them (bit `depth - 1`, for the first 64) counted as
    /// outside activity of a runtime (one ran at their begin).
    static IN_PLACE_COUNTED: Cell<u64> = const { Cell::new(0) };
}

/// The task running on this blocking-call thread.
struct AwayHere {
    yielder: *const Yielder<Resume, Suspend>,
    /// Nested blocking actions: it goes home when the outermost ends.
    depth: Cell<u32>,
    slot: u32,
    task_id: u64,
    /// The task's storage word: its task-local storage and team stay
    /// reachable while it is away (the task may even make or grow its
    /// storage here), and the word goes home with it.
    storage: Cell<*mut TaskStorage>,
}

/// While a task runs on this blocking-call thread: its id and its
/// storage word (valid until it goes home; only this thread runs the
/// task meanwhile, so the caller may use the cell within its call).
#[inline(never)]
pub(crate) fn away_task() -> Option<(u64, &'static Cell<*mut TaskStorage>)> {
    let here = away_here();
    // SAFETY: set by `run_away` on this thread to its live frame, which
    // lives until the task comes home; a caller on this thread runs as
    // part of the away task, before that.
    unsafe { here.as_ref() }.map(|h| (h.task_id, &h.storage))
}

/// A blocking-call thread: runs carriers until the runtime stops.
fn blocking_thread(reg: Arc<Registry>) {
    let _alt = guard::AltStack::ensure();
    loop {
        let away = {
            let mut st = locked(&reg.blocking.state);
            loop {
                if let Some(a) = st.queue.pop_front() {
                    break a;
                }
                if st.shutdown {
                    return;
                }
                st = reg
                    .blocking
                    .ready
                    .wait(st)
                    .unwrap_or_else(|p| p.into_inner());
            }
        };
        run_away(&reg, away);
        locked(&reg.blocking.state).idle += 1;
    }
}

/// Runs a carrier from its `go_away` to its `come_home`, then sends it
/// home and wakes its worker.
fn run_away(reg: &Registry, mut away: Away) {
    let here = AwayHere {
        yielder: away.yielder,
        depth: Cell::new(1),
        slot: away.slot,
        task_id: away.task_id,
        storage: Cell::new(away.storage),
    };
    guard::set_running(away.guard, away.task_id, away.stack_size);
    crate::trace::record(crate::trace::kind::AWAY_BEGIN, 0, 0, away.task_id, 0);
    set_away(&here);
    set_errno(away.errno);
    let r = away.carrier.resume(Resume::Run);
    set_away(std::ptr::null());
    guard::set_running((0, 0), 0, 0);
    crate::trace::record(crate::trace::kind::AWAY_END, 0, 0, away.task_id, 0);
    match r {
        CoroutineResult::Yield(Suspend::Home) => {}
        _ => {
            // `go_away`'s callers come home before their body returns, and
            // nothing else on a blocking-call thread suspends a carrier.
            eprintln!("cantus: internal error: a task left its blocking-call thread unexpectedly");
            std::process::abort();
        }
    }
    let (home, slot) = (away.home, away.slot);
    locked(&reg.blocking.homes[home]).push(away);
    reg.workers[home].resume.push(slot);
    reg.sleep.notify_worker(home);
}

#[inline(never)]
fn set_away(p: *const AwayHere) {
    AWAY.with(|a| a.set(p));
}

#[inline(never)]
fn away_here() -> *const AwayHere {
    AWAY.with(|a| a.get())
}

/// The calling thread's `errno` (in a function of its own: see the
/// module's note on thread-locals).
#[inline(never)]
pub(crate) fn errno() -> i32 {
    // SAFETY: the calling thread's errno location, always valid.
    unsafe { *libc::__errno_location() }
}

/// Sets the calling thread's `errno` (as [`errno`]).
#[inline(never)]
pub(crate) fn set_errno(v: i32) {
    // SAFETY: as in `errno`.
    unsafe { *libc::__errno_location() = v };
}

impl WorkerLocal {
    /// `resume`'s part for a carrier that suspended with `Offload`: hand
    /// it to its reserved blocking-call thread.
    pub(super) fn send_away(&self, carrier: Carrier, slot: u32, errno: i32) {
        let reg = &self.registry;
        // Until it runs here again (`arrived_home`), the task is outside
        // activity: it may still wake tasks that wait for it.
        reg.outside.active.fetch_add(1, Ordering::SeqCst);
        let guard = self.slots.borrow()[slot as usize].guard;
        reg.blocking.send(Away {
            carrier,
            home: self.index,
            slot,
            guard,
            stack_size: self.stack_size_of(slot),
            task_id: self.task_id.get(),
            storage: self.storage.get(),
            yielder: self.yielder.get(),
            errno,
        });
    }
}

/// Begins a blocking action for the caller. A task whose body may go away
/// leaves its worker for a blocking-call thread (returning there);
/// anything else makes it in place. Nested in a blocking action, it only
/// counts.
pub(crate) fn begin() {
    let here = away_here();
    if !here.is_null() {
        // SAFETY: set by `run_away` on this thread to its live frame.
        let h = unsafe { &*here };
        h.depth.set(h.depth.get() + 1);
        return;
    }
    if !go_away() {
        begin_in_place();
    }
}

/// Ends the caller's innermost blocking action: a task away from its
/// worker goes home when its outermost one ends. `false` if the caller
/// is in no blocking action.
pub(crate) fn end() -> bool {
    let here = away_here();
    if here.is_null() {
        return end_in_place();
    }
    // SAFETY: as in `begin`.
    let h = unsafe { &*here };
    let depth = h.depth.get() - 1;
    h.depth.set(depth);
    if depth == 0 {
        come_home(here);
    }
    true
}

/// Whether the running task may leave, and a thread reserved for it.
#[inline(never)]
fn may_go_away() -> Option<&'static WorkerLocal> {
    let local = WorkerLocal::current()?;
    // An inline remote call (`no_wait`) holds its worker's state: it
    // stays.
    if !local.in_task()
        || !task_storage::may_go_away(local.storage.get())
        || local.no_wait.get().is_some()
    {
        return None;
    }
    local
        .registry
        .blocking
        .reserve(&local.registry)
        .then_some(local)
}

/// Moves the running task to a blocking-call thread; returns there.
/// `false` (nothing moved) if it may not leave.
#[inline(never)]
fn go_away() -> bool {
    let Some(local) = may_go_away() else {
        return false;
    };
    let y = local.yielder.get();
    crate::trace::task_end(local.task_id.get(), crate::trace::why::AWAY);
    // The worker goes on without the task: held finishes first
    // (`deferred.rs`).
    local.finish_deferred_now();
    let errno = errno();
    // SAFETY: `yielder` is this carrier's (set by carrier_main on its
    // latest resume; we are the task it runs), live on this stack.
    let r = unsafe { (*y).suspend(Suspend::Offload(errno)) };
    debug_assert!(r == Resume::Run);
    // Now on the blocking-call thread: nothing of the worker is touched
    // (`run_away` set errno).
    true
}

/// Brings the task home from the blocking-call thread it runs on.
#[inline(never)]
fn come_home(here: *const AwayHere) {
    // SAFETY: `here` is this thread's live `AwayHere` (see `begin`);
    // copied out before the switch, after which its frame moves on.
    let (y, slot, id, storage) = unsafe {
        let h = &*here;
        (h.yielder, h.slot, h.task_id, h.storage.get())
    };
    let errno = errno();
    // SAFETY: the yielder of the carrier running on this thread (see
    // `Away`), on this very stack.
    let r = unsafe { (*y).suspend(Suspend::Home) };
    debug_assert!(r == Resume::Run);
    arrived_home(y, slot, id, storage, errno);
}

/// On the worker again: restore its view of the running task (as
/// `suspend_current` does after any switch) and end the outside activity.
#[inline(never)]
fn arrived_home(
    y: *const Yielder<Resume, Suspend>,
    slot: u32,
    id: u64,
    storage: *mut TaskStorage,
    errno: i32,
) {
    let local = WorkerLocal::current().expect("a task comes home to its worker");
    debug_assert!(slot != NO_SLOT);
    local.resumed(y, slot, id, storage);
    local.registry.outside.active.fetch_sub(1, Ordering::SeqCst);
    set_errno(errno);
}

/// A blocking action where the caller is: declared outside activity of
/// the runtime that runs, if one does. Counted on the thread either way,
/// so that its end matches (Qthreads lets a program call both before
/// `qthread_initialize`).
#[inline(never)]
fn begin_in_place() {
    let depth = IN_PLACE.with(|n| {
        n.set(n.get() + 1);
        n.get()
    });
    if depth > 64 {
        // Deeper than the mask records: never counted (nor uncounted at
        // its end); the outer ones keep the runtime's count up anyway.
        return;
    }
    let counted = Registry::current().is_some_and(|reg| {
        reg.outside.active.fetch_add(1, Ordering::SeqCst);
        true
    });
    let bit = 1u64 << (depth - 1);
    IN_PLACE_COUNTED.with(|c| {
        c.set(if counted {
            c.get() | bit
        } else {
            c.get() & !bit
        })
    });
}

#[inline(never)]
fn end_in_place() -> bool {
    let depth = IN_PLACE.with(|n| n.get());
    if depth == 0 {
        return false;
    }
    IN_PLACE.with(|n| n.set(depth - 1));
    let counted = depth <= 64 && IN_PLACE_COUNTED.with(|c| c.get() >> (depth - 1) & 1 == 1);
    if counted {
        if let Some(reg) = Registry::current() {
            reg.outside.active.fetch_sub(1, Ordering::SeqCst);
        }
    }
    true
}

/// Whether the calling thread (not a task) is inside a blocking action
/// made in place.
pub(crate) fn in_place_action() -> bool {
    IN_PLACE.with(|n| n.get()) > 0
}

/// Runs a task body that may leave its worker in a blocking action (a C
/// function): marks the running task so, and brings it home (with a
/// message) should `body` return while away. Costs one thread-local
/// lookup and two reads of the thread pointer per body.
pub(crate) fn body_may_go_away<R>(body: impl FnOnce() -> R) -> R {
    let Some((local, prev)) = mark() else {
        return body();
    };
    let home = thread_pointer();
    let r = body();
    if thread_pointer() != home {
        unmark_elsewhere(prev);
        return r;
    }
    // On the worker's thread (home), so `local` is this thread's.
    let word = local.storage.get();
    local
        .storage
        .set(task_storage::with_may_go_away(word, prev));
    r
}

/// A body returned on another thread than it started on: away in a
/// blocking action (ended and brought home, with a message), or moved to
/// another worker (`migrate.rs`). Then restores the mark on the worker it
/// is on now, looked up afresh.
#[cold]
#[inline(never)]
fn unmark_elsewhere(prev: bool) {
    if !away_here().is_null() {
        returned_away();
    }
    let local = WorkerLocal::current().expect("a task body ends on a worker");
    let word = local.storage.get();
    local
        .storage
        .set(task_storage::with_may_go_away(word, prev));
}

/// Marks the running task as one that may leave; its worker and the
/// previous mark, `None` outside a task.
#[inline(never)]
fn mark() -> Option<(&'static WorkerLocal, bool)> {
    let local = WorkerLocal::current().filter(|l| l.in_task())?;
    let word = local.storage.get();
    local
        .storage
        .set(task_storage::with_may_go_away(word, true));
    Some((local, task_storage::may_go_away(word)))
}

/// A body returned on a blocking-call thread: end its blocking actions
/// and bring it home.
#[cold]
#[inline(never)]
fn returned_away() {
    let here = away_here();
    debug_assert!(!here.is_null(), "returned_away off a blocking-call thread");
    eprintln!(
        "cantus: a task returned inside a blocking action (qt_begin_blocking_action \
         without qt_end_blocking_action); cantus ended it for the task"
    );
    come_home(here);
}

/// The calling thread's thread pointer (its TLS block): distinct for
/// every live thread, read without a thread-local lookup. Not `pure`:
/// two reads around a switch must not be merged.
#[inline(always)]
pub(super) fn thread_pointer() -> usize {
    #[cfg(all(target_arch = "x86_64", target_os = "linux"))]
    {
        let tp: usize;
        // SAFETY: on x86-64 Linux, fs:0 holds the thread control block's
        // pointer to itself (the ABI's TLS layout); reading it has no
        // other effect.
        unsafe {
            std::arch::asm!(
                "mov {}, qword ptr fs:[0]",
                out(reg) tp,
                options(nostack, preserves_flags, readonly)
            )
        };
        tp
    }
    #[cfg(all(target_arch = "aarch64", target_os = "linux"))]
    {
        let tp: usize;
        // SAFETY: reads the thread pointer register; no other effect.
        unsafe {
            std::arch::asm!(
                "mrs {}, tpidr_el0",
                out(reg) tp,
                options(nomem, nostack, preserves_flags)
            )
        };
        tp
    }
    #[cfg(not(any(
        all(target_arch = "x86_64", target_os = "linux"),
        all(target_arch = "aarch64", target_os = "linux")
    )))]
    {
        thread_marker()
    }
}

/// Elsewhere: the address of a thread-local, looked up afresh.
#[cfg(not(any(
    all(target_arch = "x86_64", target_os = "linux"),
    all(target_arch = "aarch64", target_os = "linux")
)))]
#[inline(never)]
fn thread_marker() -> usize {
    thread_local!(static MARK: u8 = const { 0 });
    MARK.with(|m| m as *const u8 as usize)
}
