//! Waiter nodes and how a waiter blocks and is woken.
//!
//! A `Waiter` lives on the blocked party's own stack: a task's stack (kept
//! alive while the task is suspended) or an outside OS thread's stack. It is
//! linked into the wait queue of the variable it waits on, under that
//! variable's lock bit (see `word.rs`). A waker unlinks it under the lock,
//! and after unlocking calls [`WakeList::wake_all`], which reads everything
//! it needs from a node *before* waking it, since the woken party may return
//! and pop the node's stack frame at once.

use crate::loom::sync::atomic::{AtomicBool, Ordering};
use crate::loom::thread::{self, Thread};
pub(crate) use crate::sched::block::BlockKind;
use std::cell::Cell;
use std::ptr;

/// What a waiter waits for; decides whom a state change wakes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Want {
    /// Full, and leaves it full (readFF, writeFF, SingleVar reads).
    Full,
    /// Full, and empties it (readFE).
    FullConsume,
    /// Empty (writeEF).
    Empty,
    /// A count of zero (end counts).
    Zero,
}

enum Target {
    Thread {
        woken: AtomicBool,
        thread: Thread,
    },
    #[cfg(not(loom))]
    Task(crate::sched::TaskHandle),
}

/// A node in a wait queue.
pub(crate) struct Waiter {
    /// Next node; only touched under the owning word's lock.
    pub(crate) next: Cell<*const Waiter>,
    pub(crate) want: Want,
    /// The variable waited on (for deadlock reports).
    addr: Cell<usize>,
    target: Target,
}

impl Waiter {
    /// A waiter for the calling task, or the calling thread outside tasks.
    pub(crate) fn current(want: Want) -> Waiter {
        #[cfg(not(loom))]
        if let Some(handle) = crate::sched::TaskHandle::current() {
            return Waiter {
                next: Cell::new(ptr::null()),
                want,
                addr: Cell::new(0),
                target: Target::Task(handle),
            };
        }
        // With no runtime and no other thread, nothing could wake us.
        #[cfg(not(loom))]
        crate::sched::check_outside_block_can_end(match want {
            Want::Full => "reading a SyncVar or SingleVar (readFF)",
            Want::FullConsume => "SyncVar::read_fe",
            Want::Empty => "SyncVar::write_ef",
            Want::Zero => "waiting for tasks",
        });
        Waiter {
            next: Cell::new(ptr::null()),
            want,
            addr: Cell::new(0),
            target: Target::Thread {
                woken: AtomicBool::new(false),
                thread: thread::current(),
            },
        }
    }

    /// Records the address of the variable this node waits on (shown in
    /// deadlock reports).
    #[inline]
    pub(crate) fn set_addr(&self, addr: usize) {
        self.addr.set(addr);
    }

    /// Blocks until [`WakeList::wake_all`] has woken this node. Must be
    /// called after the node was linked and the lock released.
    pub(crate) fn block(&self, #[cfg_attr(loom, allow(unused_variables))] kind: BlockKind) {
        match &self.target {
            #[cfg(not(loom))]
            Target::Task(_) => crate::sched::block_current_task(kind, self.addr.get()),
            Target::Thread { woken, .. } => {
                #[cfg(not(loom))]
                crate::sched::block_outside(kind, self.addr.get(), woken);
                // Acquire pairs with the Release store in wake_all.
                #[cfg(loom)]
                while !woken.load(Ordering::Acquire) {
                    thread::park();
                }
            }
        }
    }
}

/// Waiters unlinked under a lock, to wake after the lock is released.
pub(crate) struct WakeList {
    head: *const Waiter,
}

impl WakeList {
    pub(crate) const fn new() -> WakeList {
        WakeList { head: ptr::null() }
    }

    /// Adds an unlinked node (its `next` is overwritten).
    ///
    /// # Safety
    /// `w` must point at a live waiter that is blocked (or about to block)
    /// and was unlinked from its queue by the caller under the lock.
    pub(crate) unsafe fn push(&mut self, w: *const Waiter) {
        // SAFETY: per the contract, `w` is live and owned by this list now.
        unsafe { (*w).next.set(self.head) };
        self.head = w;
    }

    /// Wakes every node.
    pub(crate) fn wake_all(self) {
        let mut cur = self.head;
        while !cur.is_null() {
            // SAFETY: nodes in the list are live until woken; we read `next`
            // and the target before waking, and never touch the node after.
            let w = unsafe { &*cur };
            cur = w.next.get();
            match &w.target {
                #[cfg(not(loom))]
                Target::Task(handle) => {
                    let handle = *handle;
                    handle.wake();
                }
                Target::Thread { woken, thread } => {
                    let thread = thread.clone();
                    // Release pairs with the Acquire loads in Waiter::block.
                    woken.store(true, Ordering::Release);
                    thread.unpark();
                    #[cfg(not(loom))]
                    crate::sched::note_outside_wake();
                }
            }
        }
    }
}
