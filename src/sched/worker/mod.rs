//! Worker threads: a worker's private state, the task operations a
//! running task calls (spawn, block, yield, sleep), and the worker loop.
//! By role: `carrier.rs` (carriers and their stacks), `steal.rs` (finding
//! work), `idle_loop.rs` (spinning and sleeping when there is none).
//!
//! A worker runs tasks on *carriers*: coroutines on pooled task stacks. A
//! carrier runs tasks one after another, as plain calls, until one blocks;
//! only then does the worker need another carrier. So a task that never
//! blocks costs a function call, and a stack is bound to a task when it
//! first runs. A blocked task keeps its carrier (its stack) and is resumed
//! by its own worker only: see `sched/README.md` for why.

pub(crate) mod blocking_call;
mod carrier;
mod deferred;
pub(crate) use deferred::FinishMany;
pub(crate) mod host;
mod idle_loop;
pub(crate) mod migrate;
mod steal;

use super::deque::Worker;
use super::new_task::{Queued, Task};
use super::registry::{Registry, WorkerShared, bump, drop_by};
use crate::config::WaitPolicy;
use crate::fiber::guard;
use crate::fiber::stack::TaskStack;
use crate::sched::block::{BLOCK_KINDS, BlockKind};
use crate::sched::task_storage::{self, TaskStorage};
use corosensei::{Coroutine, CoroutineResult, Yielder};
use std::cell::{Cell, RefCell};
use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Instant;

/// Input to a carrier when resumed.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Resume {
    Run,
    Exit,
}

/// Why a carrier gave control back to its worker.
pub(crate) enum Suspend {
    /// Out of tasks (or a woken task should run first).
    Idle,
    /// Its task blocked on a wait queue.
    Blocked,
    /// Its task yielded.
    Yielded,
    /// Its task sleeps until the instant.
    Sleep(Instant),
    /// Its task leaves for a blocking-call thread (`blocking_call.rs`), carrying
    /// its `errno`.
    Offload(i32),
    /// On a blocking-call thread: its task goes home (`blocking_call.rs`).
    Home,
    /// Its task moves to the worker of that index, for good (`migrate.rs`).
    Migrate(usize),
}

pub(crate) type Carrier = Coroutine<Resume, Suspend, (), TaskStack>;

struct Slot {
    carrier: Option<Carrier>,
    guard: (usize, usize),
    /// The carrier runs on a root stack (`ROOT_STACK_SIZE`).
    root: bool,
    /// While its task is blocked: the task id, the variable's address and
    /// why (for the deadlock report).
    waiting: Option<(u64, usize, BlockKind)>,
}

/// Idle carriers kept per worker; more are retired to the stack pool.
const IDLE_CARRIERS: usize = 16;
/// Stacks kept per worker beyond those held by carriers.
const POOLED_STACKS: usize = 16;
/// Idle-loop iterations of a hybrid worker while an outside thread waits.
const OUTSIDE_WAIT_SPIN: u32 = 16;
/// Most `spin_loop` hints between two polls of an idle worker.
const IDLE_BACKOFF: u32 = 64;
/// A busy worker polls the driver once every this many tasks it runs (an
/// idle one on every idle-loop iteration).
const POLL_EVERY: u32 = 64;
/// `current_slot` while the worker runs its own loop, not a carrier.
const NO_SLOT: u32 = u32::MAX;
/// Usable size of the stack that root tasks (the closure of `block_on` or
/// `run`, and calls such as `join` or `forall` made from outside threads)
/// run on: as large as a main thread's, so serial code that recurses
/// deeply in `main` still does under `cantus::run`. Pages commit only when
/// touched, and a worker keeps at most one such stack.
pub(crate) const ROOT_STACK_SIZE: usize = 8 << 20;

thread_local! {
    static WORKER: Cell<*const WorkerLocal> = const { Cell::new(std::ptr::null()) };
}

/// A worker's private state; lives on its thread's stack.
pub(crate) struct WorkerLocal {
    pub(crate) index: usize,
    pub(crate) registry: Arc<Registry>,
    deque: Worker<Queued>,
    slots: RefCell<Vec<Slot>>,
    free_slots: RefCell<Vec<u32>>,
    idle: RefCell<Vec<u32>>,
    stacks: RefCell<Vec<TaskStack>>,
    yielded: RefCell<VecDeque<u32>>,
    /// An idle carrier on a root stack, kept for the next root task.
    idle_root: Cell<Option<u32>>,
    /// A root stack kept for reuse.
    root_stack: RefCell<Option<TaskStack>>,
    /// The last deadlock-report request this worker answered.
    report_seen: Cell<u64>,
    /// Tasks until this busy worker next polls the driver.
    poll_countdown: Cell<u32>,
    timers: RefCell<BinaryHeap<Reverse<(Instant, u32)>>>,
    handoff: Cell<Option<Task>>,
    current_slot: Cell<u32>,
    yielder: Cell<*const Yielder<Resume, Suspend>>,
    task_id: Cell<u64>,
    /// The running task's storage (`task_storage.rs`), null until it asks.
    pub(crate) storage: Cell<*mut TaskStorage>,
    task_seq: Cell<u64>,
    rng: Cell<u64>,
    max_resident: Cell<usize>,
    /// With tracing on: how the next task `run_task` runs came to this
    /// worker, and from which worker (`trace::how`).
    trace_how: Cell<(u16, u64)>,
    /// The inline remote call this worker runs, if any (`no_wait.rs`):
    /// kept here, beside what a task operation reads anyway, so that the
    /// check on `yield_now` costs no thread-local lookup of its own.
    pub(crate) no_wait: Cell<Option<&'static str>>,
    /// The running task counted itself blocked before a wait that others
    /// can see it enter (`sched::count_blocked_early`): its next
    /// `block_current` of this kind does not count it again.
    blocked_early: Cell<Option<BlockKind>>,
    /// When the worker loop returns to the thread that hosts this worker
    /// (`host.rs`); `Until::Terminate` for a worker thread's own loop.
    until: Cell<host::Until>,
    /// `until` is not `Until::Terminate`: a host runs this loop (one
    /// byte for the hot paths to test).
    hosted: Cell<bool>,
    /// In a host's round (`Until::Idle`, `Until::Ready`): the yielded
    /// tasks it may still resume, those that had yielded before it began.
    round_yielded: Cell<usize>,
    /// Finishes held back while tasks of their group run (`deferred.rs`).
    deferred: deferred::Deferred,
}

/// Whether `id` may be a task id that a worker of `reg` has handed out
/// (to a task running, finished or blocked). `false` means it never was,
/// so far: ids are `seq * workers + index + 1` with `seq >= 1` counting
/// the tasks that worker ran (`run_task`), and `started` counts at least
/// those. A caller that learnt `id` through a chain of synchronization
/// from the task that read it sees that `started` (the bump precedes
/// the task's run on the same thread).
pub(crate) fn task_id_issued(reg: &Registry, id: u64) -> bool {
    let n = reg.workers.len() as u64;
    if id <= n {
        return false;
    }
    let (seq, index) = ((id - 1) / n, ((id - 1) % n) as usize);
    seq <= reg.workers[index].counters.started.load(Ordering::Relaxed)
}

impl WorkerLocal {
    /// The calling thread's worker, if it is one.
    #[inline]
    pub(crate) fn current() -> Option<&'static WorkerLocal> {
        let p = WORKER.with(|w| w.get());
        // SAFETY: WORKER is set only by worker_main to a WorkerLocal on its
        // own stack and cleared before that frame ends; code that reads it
        // runs on that thread inside that frame.
        (!p.is_null()).then(|| unsafe { &*p })
    }

    #[inline]
    fn shared(&self) -> &WorkerShared {
        &self.registry.workers[self.index]
    }

    /// Whether the caller is running inside a task (on a carrier).
    #[inline]
    pub(crate) fn in_task(&self) -> bool {
        self.current_slot.get() != NO_SLOT
    }

    pub(crate) fn current_task_id(&self) -> Option<u64> {
        self.in_task().then(|| self.task_id.get())
    }

    pub(crate) fn current_slot(&self) -> u32 {
        self.current_slot.get()
    }

    /// The running task's usable stack `[lowest, highest)` address, just
    /// above its guard page; `None` outside a task.
    pub(crate) fn task_stack(&self) -> Option<(usize, usize)> {
        let slot = self.current_slot.get();
        if slot == NO_SLOT {
            return None;
        }
        let lo = self.slots.borrow()[slot as usize].guard.1;
        Some((lo, lo + self.stack_size_of(slot)))
    }

    /// How many tasks wait in this worker's deque (a moment's view).
    pub(crate) fn queued_here(&self) -> usize {
        self.deque.len()
    }

    /// Whether fewer than `n` tasks are queued on this worker's deque
    /// (its owner's call; reads the deque's top only now and then).
    #[inline]
    pub(crate) fn queued_fewer_than(&self, n: usize) -> bool {
        self.deque.fewer_than(n)
    }

    /// Pushes a task on this worker's deque.
    #[inline]
    pub(crate) fn push(&self, task: Task) {
        bump(&self.shared().counters.spawned, 1);
        self.deque.push(task.into_queued());
        self.registry.sleep.notify_one_unfenced();
    }

    /// Pops the newest task of this worker's deque if it belongs to
    /// `group`; otherwise leaves the deque as it was.
    #[inline]
    pub(crate) fn pop_if_group(&self, group: *const ()) -> Option<Task> {
        let t = self.deque.pop_if(|t| t.group() == group)?;
        // SAFETY: popped from our deque, where `push` put it: this is the
        // one Task made from it.
        Some(unsafe { t.into_task() })
    }

    /// Pops the newest task of this worker's deque.
    #[inline]
    fn pop(&self) -> Option<Task> {
        // SAFETY: popped from our deque, where `push` put it: this is the
        // one Task made from it.
        self.deque.pop().map(|t| unsafe { t.into_task() })
    }

    /// Runs a task on the current carrier as a nested call.
    #[inline]
    pub(crate) fn run_task(&self, task: Task) {
        let seq = self.task_seq.get() + 1;
        self.task_seq.set(seq);
        // Ids are worker-interleaved sequence numbers (`task_id_issued`
        // inverts this).
        let id = seq * self.registry.workers.len() as u64 + self.index as u64 + 1;
        let prev = self.task_id.replace(id);
        let prev_storage = self.storage.replace(std::ptr::null_mut());
        guard::set_running_task(id);
        let c = &self.shared().counters;
        bump(&c.started, 1);
        let traced = crate::trace::on();
        if traced {
            let (how, from) = self.trace_how.replace((crate::trace::how::OWN, 0));
            crate::trace::record(crate::trace::kind::TASK_BEGIN, how, 0, id, from);
        }
        let home = migrate::here();
        task.run();
        if migrate::moved_from(home) {
            // The task moved to another worker (`migrate.rs`): finish it
            // there, as that worker's.
            return Self::task_ran_elsewhere(id, prev, prev_storage, traced);
        }
        self.task_ran(id, prev, prev_storage, traced);
    }

    /// `run_task`'s end for a task that migrated: the worker it ended on,
    /// looked up afresh.
    #[cold]
    #[inline(never)]
    fn task_ran_elsewhere(id: u64, prev: u64, prev_storage: *mut TaskStorage, traced: bool) {
        migrate::current_afresh()
            .expect("a migrated task ends on a worker")
            .task_ran(id, prev, prev_storage, traced);
    }

    /// The bookkeeping after a task's body returned on this worker.
    #[inline]
    fn task_ran(&self, id: u64, prev: u64, prev_storage: *mut TaskStorage, traced: bool) {
        if traced {
            crate::trace::task_end(id, crate::trace::why::DONE);
        }
        task_storage::release(self.storage.replace(prev_storage));
        let c = &self.shared().counters;
        // Release: pairs with the Acquire loads in Registry::quiescent.
        c.finished
            .store(c.finished.load(Ordering::Relaxed) + 1, Ordering::Release);
        self.task_id.set(prev);
        guard::set_running_task(prev);
        self.poll_driver_now_and_then();
    }

    /// After each task (run by a carrier, or inline by a waiting join or
    /// scope): polls the driver every `POLL_EVERY` tasks, so
    /// that arrivals are served at a bounded rate while every worker is
    /// busy. Without a driver, one predictable branch.
    #[inline]
    pub(crate) fn poll_driver_now_and_then(&self) {
        if self.registry.driver.is_none() {
            return;
        }
        let left = self.poll_countdown.get();
        if left > 1 {
            self.poll_countdown.set(left - 1);
            return;
        }
        self.poll_countdown.set(POLL_EVERY);
        crate::sched::driver::poll(&self.registry);
    }

    /// Counts a pushed task that its owner took back and called directly.
    #[inline]
    pub(crate) fn count_inline_run(&self) {
        let c = &self.shared().counters;
        bump(&c.started, 1);
        // Release: pairs with the Acquire loads in Registry::quiescent.
        c.finished
            .store(c.finished.load(Ordering::Relaxed) + 1, Ordering::Release);
        self.poll_driver_now_and_then();
    }

    pub(crate) fn note_detached_panic(&self) {
        bump(&self.shared().counters.detached_panics, 1);
    }

    /// Suspends the running task's carrier; returns when it is resumed.
    pub(crate) fn suspend_current(&self, why: Suspend) {
        debug_assert!(self.in_task());
        let y = self.yielder.get();
        let slot = self.current_slot.get();
        let id = self.task_id.get();
        let storage = self.storage.get();
        // The task stops here (blocked, yielded, asleep): finishes held
        // while this carrier ran tasks are made before its worker goes on
        // to other work (`deferred.rs`).
        self.finish_deferred_now();
        if crate::trace::on() {
            let why = match why {
                Suspend::Blocked => crate::trace::why::BLOCKED,
                Suspend::Yielded => crate::trace::why::YIELDED,
                _ => crate::trace::why::SLEPT,
            };
            crate::trace::task_end(id, why);
        }
        // SAFETY: `yielder` was set by this carrier's body (carrier_main) on
        // its latest resume and the carrier is the one running now, so the
        // pointer is to its live Yielder on this very stack.
        let r = unsafe { (*y).suspend(why) };
        debug_assert!(
            r == Resume::Run,
            "a suspended task is only ever resumed to run"
        );
        self.resumed(y, slot, id, storage);
    }

    /// After a switch back into a task (`suspend_current`, or a task home
    /// from a blocking call): this worker's view of the running task again
    /// (its carrier's yielder and slot, its id and storage word).
    pub(super) fn resumed(
        &self,
        y: *const Yielder<Resume, Suspend>,
        slot: u32,
        id: u64,
        storage: *mut TaskStorage,
    ) {
        self.yielder.set(y);
        self.current_slot.set(slot);
        self.task_id.set(id);
        self.storage.set(storage);
        guard::set_running_task(id);
        crate::trace::record(
            crate::trace::kind::TASK_BEGIN,
            crate::trace::how::RESUMED,
            0,
            id,
            (self.index as u64) << 32 | u64::from(slot),
        );
    }

    /// Blocks the running task until its handle is woken; `addr` names
    /// what it waits on (for the deadlock report).
    pub(crate) fn block_current(&self, kind: BlockKind, addr: usize) {
        let c = &self.shared().counters;
        match self.blocked_early.take() {
            Some(k) if k == kind => {}
            early => {
                if let Some(k) = early {
                    drop_by(&c.blocked[k as usize], 1);
                }
                bump(&c.blocked[kind as usize], 1);
            }
        }
        let slot = self.current_slot.get() as usize;
        self.slots.borrow_mut()[slot].waiting = Some((self.task_id.get(), addr, kind));
        crate::trace::record(crate::trace::kind::BLOCK, kind as u16, 0, addr as u64, 0);
        self.suspend_current(Suspend::Blocked);
        self.slots.borrow_mut()[slot].waiting = None;
        drop_by(&c.blocked[kind as usize], 1);
    }

    /// Counts the running task blocked (`kind`) from now on, ahead of a
    /// wait it is about to enter; see [`crate::sched::count_blocked_early`].
    pub(crate) fn count_blocked_early(&self, kind: BlockKind) {
        let c = &self.shared().counters;
        if let Some(k) = self.blocked_early.replace(Some(kind)) {
            drop_by(&c.blocked[k as usize], 1);
        }
        bump(&c.blocked[kind as usize], 1);
    }

    /// Undoes [`count_blocked_early`](Self::count_blocked_early) if no
    /// block took it over.
    pub(crate) fn uncount_blocked_early(&self, kind: BlockKind) {
        if self.blocked_early.get() == Some(kind) {
            self.blocked_early.set(None);
            drop_by(&self.shared().counters.blocked[kind as usize], 1);
        }
    }

    /// Lets other tasks of this worker run, then continues: those in its
    /// own queues, and those outside threads queued for any worker (the
    /// loop takes them before it resumes a yielded task). With nothing
    /// else to run here, returns at once (no switch).
    pub(crate) fn yield_current(&self) {
        // On a hosted worker, the host's own code is something else to
        // run (`host.rs`): the task yields to the loop, which returns to
        // the host if its wait is over or its round done.
        let reg = &*self.registry;
        if self.nothing_else_here()
            && reg.injector.is_empty()
            && reg.roots.is_empty()
            && !self.hosted.get()
        {
            return;
        }
        self.suspend_current(Suspend::Yielded);
    }

    /// No other task of this worker is ready: nothing queued, woken,
    /// yielded or due. A task about to block may then spin for a while
    /// first: blocking would only leave the worker idle.
    #[inline]
    pub(crate) fn nothing_else_here(&self) -> bool {
        self.deque.is_empty()
            && self.shared().resume.is_empty()
            && self.shared().inbox.is_empty()
            && self.yielded.borrow().is_empty()
            && self
                .timers
                .borrow()
                .peek()
                .is_none_or(|Reverse((d, _))| *d > Instant::now())
    }

    /// Suspends the running task until `deadline`.
    pub(crate) fn sleep_current(&self, deadline: Instant) {
        let c = &self.shared().counters;
        bump(&c.sleeping, 1);
        self.suspend_current(Suspend::Sleep(deadline));
        drop_by(&c.sleeping, 1);
    }

    /// Something is waiting that the worker loop (not a carrier) handles:
    /// a woken task, a due timer, or its inbox (`migrate.rs`).
    #[inline]
    fn resumable_pending(&self) -> bool {
        self.until_met()
            || !self.shared().resume.is_empty()
            || !self.shared().inbox.is_empty()
            || self
                .timers
                .borrow()
                .peek()
                .is_some_and(|Reverse((d, _))| *d <= Instant::now())
    }

    fn timer_due(&self, now: impl Fn() -> Instant) -> Option<u32> {
        let mut timers = self.timers.borrow_mut();
        let &Reverse((deadline, slot)) = timers.peek()?;
        (deadline <= now()).then(|| {
            timers.pop();
            slot
        })
    }

    /// The worker loop. A worker thread's runs until the runtime stops; a
    /// hosted worker's until its host's wait ends (`host.rs`).
    fn run(&self) {
        let reg = &*self.registry;
        loop {
            if self.until_met() {
                return;
            }
            if let Some(slot) = self.shared().resume.pop() {
                self.resume(slot);
                continue;
            }
            if !self.timers.borrow().is_empty() {
                if let Some(slot) = self.timer_due(Instant::now) {
                    self.resume(slot);
                    continue;
                }
            }
            let disabled = self.disabled();
            if self.take_inbound(disabled) {
                continue;
            }
            if let Some(t) = self.pop() {
                if disabled {
                    // A disabled worker hands its queued tasks to the
                    // enabled ones (Qthreads' inactive shepherd).
                    reg.hand_on(t);
                } else {
                    self.start(t);
                }
                continue;
            }
            // A host's round resumes only the tasks that had yielded
            // before it began, once each; then it returns to the host,
            // taking no root task and stealing nothing (`host.rs`).
            if self.returns_when_idle() {
                let left = self.round_yielded.get();
                if left == 0 {
                    return;
                }
                self.round_yielded.set(left - 1);
            } else if !disabled && !self.yielded.borrow().is_empty() {
                // A task that yielded goes behind the tasks outside threads
                // queued (the injector, other threads' `block_on`s), which
                // it may be waiting for: a request handed on by a
                // transport's helper thread, say. Resumed first, a task
                // that yields in a loop would keep them from this worker
                // for ever (`yield_current` counts them as work to let
                // run).
                if let Some(t) = self.take_injected() {
                    self.start(t);
                    continue;
                }
                if self.start_root_task() {
                    continue;
                }
            }
            let yielded = self.yielded.borrow_mut().pop_front();
            if let Some(slot) = yielded {
                self.resume(slot);
                continue;
            }
            // A disabled worker takes no root task and steals nothing.
            if !disabled {
                if self.start_root_task() {
                    continue;
                }
                if let Some(t) = self.steal() {
                    self.start(t);
                    continue;
                }
            }
            if reg.terminate.load(Ordering::Acquire)
                && self.timers.borrow().is_empty()
                && self.blocked_here() == 0
            {
                break;
            }
            if self.returns_when_idle() {
                return;
            }
            self.idle_wait();
        }
    }

    fn blocked_here(&self) -> u64 {
        let c = &self.shared().counters;
        (0..BLOCK_KINDS)
            .map(|k| c.blocked[k].load(Ordering::Relaxed))
            .sum()
    }
}

/// A worker thread's body.
pub(crate) fn worker_main(registry: Arc<Registry>, index: usize, deque: Worker<Queued>) {
    let _alt = guard::AltStack::ensure();
    let local = WorkerLocal::new(registry, index, deque);
    WORKER.with(|w| w.set(&local));
    guard::set_running((0, 0), 0, 0);
    crate::trace::enter_worker(index);
    local.run();
    local.finish();
    WORKER.with(|w| w.set(std::ptr::null()));
}

impl WorkerLocal {
    /// Worker `index`'s private state, before its loop first runs.
    fn new(registry: Arc<Registry>, index: usize, deque: Worker<Queued>) -> WorkerLocal {
        WorkerLocal {
            index,
            registry,
            deque,
            slots: RefCell::new(Vec::new()),
            free_slots: RefCell::new(Vec::new()),
            idle: RefCell::new(Vec::new()),
            stacks: RefCell::new(Vec::new()),
            yielded: RefCell::new(VecDeque::new()),
            idle_root: Cell::new(None),
            root_stack: RefCell::new(None),
            report_seen: Cell::new(0),
            poll_countdown: Cell::new(POLL_EVERY),
            timers: RefCell::new(BinaryHeap::new()),
            handoff: Cell::new(None),
            current_slot: Cell::new(NO_SLOT),
            yielder: Cell::new(std::ptr::null()),
            task_id: Cell::new(0),
            storage: Cell::new(std::ptr::null_mut()),
            task_seq: Cell::new(0),
            rng: Cell::new(
                0x9E37_79B9_7F4A_7C15 ^ (index as u64 + 1).wrapping_mul(0xBF58_476D_1CE4_E5B9),
            ),
            max_resident: Cell::new(0),
            no_wait: Cell::new(None),
            trace_how: Cell::new((crate::trace::how::OWN, 0)),
            blocked_early: Cell::new(None),
            until: Cell::new(host::Until::Terminate),
            hosted: Cell::new(false),
            round_yielded: Cell::new(0),
            deferred: deferred::Deferred::new(),
        }
    }

    /// After the loop's last round (the runtime stops): finishes the idle
    /// carriers and records the stacks' use.
    fn finish(&self) {
        // The loop ends only after its own pop found the deque empty, and
        // only this worker pushes on it. Should anything be left, drop it
        // as a task (its completion runs), since the deque never drops
        // elements.
        while let Some(t) = self.pop() {
            debug_assert!(false, "a worker's deque is empty when it exits");
            drop(t);
        }
        // Shutdown: finish idle carriers; measure the stacks they used.
        let mut idle: Vec<u32> = self.idle.borrow_mut().drain(..).collect();
        idle.extend(self.idle_root.take());
        for slot in idle {
            let carrier = self.slots.borrow_mut()[slot as usize]
                .carrier
                .take()
                .expect("idle carrier");
            self.retire(carrier, slot);
        }
        for s in self.stacks.borrow().iter() {
            self.max_resident.set(
                self.max_resident
                    .get()
                    .max(s.resident_bytes(self.registry.page)),
            );
        }
        self.shared()
            .counters
            .max_stack_resident
            .store(self.max_resident.get() as u64, Ordering::Relaxed);
        // Carriers still parked would hold blocked tasks; shutdown waits
        // for quiescence, so there are none. Never unwind a blocked
        // carrier: its waiter node may still be linked into a wait queue.
        for s in self.slots.borrow_mut().drain(..) {
            if let Some(c) = s.carrier {
                std::mem::forget(c);
            }
        }
    }
}

/// Pins the calling thread to one CPU.
pub(crate) fn pin_to(cpu: usize) {
    // SAFETY: cpu_set_t is plain data; zeroed is the empty set.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: CPU_SET writes within the set for cpu < CPU_SETSIZE.
    unsafe { libc::CPU_SET(cpu % libc::CPU_SETSIZE as usize, &mut set) };
    // SAFETY: valid set of the size we pass; 0 means the calling thread.
    unsafe { libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) };
}
