//! How a waiter blocks and is woken: the one wake path of the full/empty
//! engine.
//!
//! A `Waiter` is part of a queue node (`wait_queue.rs`) on the blocked party's
//! own stack: a task's stack (kept alive while the task is suspended) or an
//! outside OS thread's stack. It says how to wake that party: a task handle
//! (waking pushes the task's carrier slot on its own worker's resume queue,
//! `sched::TaskHandle::wake`), or a thread (a flag, then `unpark`). A waker
//! wakes a node only after unlinking it under the variable's lock and
//! releasing the lock (`WakeList::wake_all`), and reads everything it needs
//! from the node *before* waking it: the woken party may return and pop the
//! node's frame at once.

use crate::loom::sync::atomic::{AtomicBool, Ordering};
use crate::loom::thread::{self, Thread};
pub(crate) use crate::sched::block::BlockKind;

enum Target {
    Thread {
        woken: AtomicBool,
        thread: Thread,
    },
    /// A thread that hosts a worker (`sched/worker/host.rs`): it waits in
    /// that worker's loop, and is woken as the worker.
    #[cfg(not(loom))]
    Host {
        woken: AtomicBool,
        waker: crate::sched::worker::host::HostWaker,
    },
    #[cfg(not(loom))]
    Task(crate::sched::TaskHandle),
    #[cfg(loom)]
    Task(loom_task::Task),
}

/// How to wake one blocked task or thread, and what it waits on.
pub(crate) struct Waiter {
    /// The variable waited on (for deadlock reports).
    addr: usize,
    target: Target,
}

impl Waiter {
    /// A waiter for the calling task, or the calling thread outside tasks,
    /// waiting on the variable at `addr`. `what` names the operation in
    /// the panic of an outside thread that would block forever (no
    /// runtime and no other thread: nothing could wake it).
    pub(crate) fn current(
        addr: usize,
        #[cfg_attr(loom, allow(unused_variables))] what: &str,
    ) -> Waiter {
        // An inline remote call (running inside a poll) must not wait:
        // this panics before anything is linked (`Node::new`).
        #[cfg(not(loom))]
        crate::sched::no_wait::check_wait(what);
        #[cfg(not(loom))]
        if let Some(handle) = crate::sched::TaskHandle::current() {
            return Waiter {
                addr,
                target: Target::Task(handle),
            };
        }
        #[cfg(loom)]
        if let Some(task) = loom_task::current() {
            return Waiter {
                addr,
                target: Target::Task(task),
            };
        }
        #[cfg(not(loom))]
        if let Some(waker) = crate::sched::worker::host::waker() {
            return Waiter {
                addr,
                target: Target::Host {
                    woken: AtomicBool::new(false),
                    waker,
                },
            };
        }
        #[cfg(not(loom))]
        crate::sched::check_outside_block_can_end(what);
        Waiter {
            addr,
            target: Target::Thread {
                woken: AtomicBool::new(false),
                thread: thread::current(),
            },
        }
    }

    /// Blocks until [`wake`](Self::wake) has run. Must be called after the
    /// node holding this waiter was linked and the lock released.
    pub(crate) fn block(&self, #[cfg_attr(loom, allow(unused_variables))] kind: BlockKind) {
        match &self.target {
            #[cfg(not(loom))]
            Target::Task(_) => crate::sched::block_current_task(kind, self.addr),
            #[cfg(loom)]
            Target::Task(task) => task.suspend(),
            #[cfg(not(loom))]
            Target::Host { woken, .. } => crate::sched::worker::host::wait(kind, self.addr, woken),
            Target::Thread { woken, .. } => {
                #[cfg(not(loom))]
                crate::sched::block_outside(kind, self.addr, woken);
                // Acquire pairs with the Release store in `wake`.
                #[cfg(loom)]
                while !woken.load(Ordering::Acquire) {
                    thread::park();
                }
            }
        }
    }

    /// Wakes the blocked party.
    ///
    /// # Safety
    /// `w` points at a live waiter whose node was unlinked from its queue
    /// under the lock. `*w` may be freed as soon as the party is woken, so
    /// this reads everything first and never touches `*w` after.
    pub(crate) unsafe fn wake(w: *const Waiter) {
        // SAFETY: live until woken, per the contract.
        match unsafe { &(*w).target } {
            #[cfg(not(loom))]
            Target::Task(handle) => {
                let handle = *handle;
                handle.wake();
            }
            #[cfg(loom)]
            Target::Task(task) => task.clone().wake(),
            #[cfg(not(loom))]
            Target::Host { woken, waker } => {
                let host = *waker;
                // Release as below; then the RMW of the host worker's
                // sleep state, which its idle loop's re-check pairs with
                // (`sched/worker/host.rs`).
                woken.store(true, Ordering::Release);
                host.notify();
                crate::sched::note_outside_wake();
            }
            Target::Thread { woken, thread } => {
                let thread = thread.clone();
                // Release pairs with the Acquire loads of the blocked
                // thread (`block`, `sched::block_outside`): what the waker
                // wrote into the node happens-before the thread reads it.
                woken.store(true, Ordering::Release);
                thread.unpark();
                #[cfg(not(loom))]
                crate::sched::note_outside_wake();
            }
        }
    }
}

/// Under loom, a stand-in for a task handle with the properties the
/// engine relies on (`sched/README.md`): a wake may come before the task
/// has suspended, and it pushes the task on its worker's resume queue
/// (here a mutex-protected list with a condition variable as the
/// worker's notification), which only that worker drains, after the task
/// has suspended. A loom thread becomes such a task with
/// [`run_as_task`](loom_task::run_as_task).
#[cfg(loom)]
pub(crate) mod loom_task {
    use loom::sync::{Arc, Condvar, Mutex};
    use std::cell::RefCell;

    struct Worker {
        resume: Mutex<Vec<usize>>,
        notify: Condvar,
    }

    #[derive(Clone)]
    pub(crate) struct Task {
        worker: Arc<Worker>,
        slot: usize,
    }

    loom::thread_local! {
        static CURRENT: RefCell<Option<Task>> = RefCell::new(None);
    }

    /// The task the calling loom thread runs, if it runs one.
    pub(crate) fn current() -> Option<Task> {
        CURRENT.with(|c| c.borrow().clone())
    }

    /// Runs `f` as task `slot` of a worker of its own.
    pub(crate) fn run_as_task<R>(slot: usize, f: impl FnOnce() -> R) -> R {
        let task = Task {
            worker: Arc::new(Worker {
                resume: Mutex::new(Vec::new()),
                notify: Condvar::new(),
            }),
            slot,
        };
        CURRENT.with(|c| *c.borrow_mut() = Some(task));
        let r = f();
        CURRENT.with(|c| *c.borrow_mut() = None);
        r
    }

    impl Task {
        /// The waker's side: push on the resume queue, notify the worker.
        pub(crate) fn wake(self) {
            self.worker.resume.lock().unwrap().push(self.slot);
            self.worker.notify.notify_one();
        }

        /// The worker's side after the task suspended: wait until the
        /// task's slot is on the resume queue, then resume it.
        pub(crate) fn suspend(&self) {
            let mut q = self.worker.resume.lock().unwrap();
            loop {
                if let Some(i) = q.iter().position(|&s| s == self.slot) {
                    q.swap_remove(i);
                    return;
                }
                q = self.worker.notify.wait(q).unwrap();
            }
        }
    }
}
