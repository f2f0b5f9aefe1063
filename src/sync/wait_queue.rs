//! The intrusive FIFO of blocked operations: one per full/empty location,
//! touched only by the holder of the location's lock. Nodes live on the
//! blocked parties' stacks; a node carries the operation (and its value)
//! until a waker completes it, then the result until its owner wakes.

use super::wait::{BlockKind, Waiter};
use crate::loom::UnsafeCell;
use std::any::Any;
use std::cell::Cell;
use std::ptr;

/// A caught panic's payload.
pub(crate) type Panic = Box<dyn Any + Send + 'static>;

/// A full/empty operation on a location holding a `V`.
pub(crate) enum Op<V> {
    /// Wait for full, take the value, leave empty.
    ReadFE,
    /// Wait for full, copy the value with the function, leave full.
    ReadFF(fn(&V) -> V),
    /// Wait for full and move nothing (`SingleVar` reads; an end count
    /// waiting for zero, whose "full" is a count of zero).
    Await,
    /// Wait for empty, store the value, leave full.
    WriteEF(V),
    /// Wait for full, replace the value, leave full.
    WriteFF(V),
}

impl<V> Op<V> {
    /// Whether the operation waits for full (else for empty).
    #[inline]
    pub(crate) fn wants_full(&self) -> bool {
        !matches!(self, Op::WriteEF(_))
    }

    /// Whether completing it changes the state (readFE, writeEF).
    #[inline]
    pub(crate) fn changes_state(&self) -> bool {
        matches!(self, Op::ReadFE | Op::WriteEF(_))
    }
}

/// What a completed operation gives its caller: the value read (readFE,
/// readFF) or replaced (writeFF), `None` for the others; `Err` with the
/// payload when a readFF's copy panicked (the caller resumes the panic).
pub(crate) type Done<V> = Result<Option<V>, Panic>;

/// A node's payload: the operation until a waker completes it, then its
/// result.
enum Slot<V> {
    Op(Op<V>),
    Done(Done<V>),
    /// Between a waker's taking the operation and storing the result.
    Taken,
}

/// A blocked operation in a location's queue, on its owner's stack from
/// `Node::new` until its [`block`](Node::block) returns.
pub(crate) struct Node<V> {
    /// Next node in the queue, then in the wake list. Only the lock holder
    /// touches it while queued; only the waker, while in its wake list.
    next: Cell<*const Node<V>>,
    /// Whether the operation waits for full (read by wakers under the lock).
    wants_full: bool,
    /// Written by the waker under the lock, read by the owner after its
    /// wake (ordered by the wake: the resume queue, or the `woken`
    /// Release/Acquire pair).
    slot: UnsafeCell<Slot<V>>,
    waiter: Waiter,
}

impl<V> Node<V> {
    /// A node for the caller (see [`Waiter::current`]; may panic when an
    /// outside thread would block forever).
    pub(crate) fn new(op: Op<V>, addr: usize, what: &str) -> Node<V> {
        Node {
            next: Cell::new(ptr::null()),
            wants_full: op.wants_full(),
            slot: UnsafeCell::new(Slot::Op(op)),
            waiter: Waiter::current(addr, what),
        }
    }

    /// Whether the node's operation waits for full.
    #[inline]
    pub(crate) fn wants_full(&self) -> bool {
        self.wants_full
    }

    /// The waker's side: takes the operation out to complete it.
    ///
    /// # Safety
    /// The caller holds the lock of the location whose queue the node was
    /// in and unlinked it; the operation was not taken before.
    pub(crate) unsafe fn take_op(&self) -> Op<V> {
        // SAFETY: per the contract, the node is ours until we wake it.
        self.slot.with_mut(
            |s| match unsafe { std::mem::replace(&mut *s, Slot::Taken) } {
                Slot::Op(op) => op,
                _ => unreachable!("a queued node's operation is taken once"),
            },
        )
    }

    /// The waker's side: stores the result of the operation it took.
    ///
    /// # Safety
    /// As for [`take_op`](Self::take_op), which the caller called.
    pub(crate) unsafe fn set_done(&self, done: Done<V>) {
        // SAFETY: per the contract, the node is ours until we wake it.
        self.slot.with_mut(|s| unsafe { *s = Slot::Done(done) });
    }

    /// The owner's side: blocks until a waker has completed and woken the
    /// node, then returns the result. The node must have been linked and
    /// the lock released.
    pub(crate) fn block(&self, kind: BlockKind) -> Done<V> {
        self.waiter.block(kind);
        // SAFETY: woken, so the waker is done with the node and its writes
        // happen-before this read (the wake orders them).
        self.slot.with_mut(
            |s| match unsafe { std::mem::replace(&mut *s, Slot::Taken) } {
                Slot::Done(d) => d,
                _ => unreachable!("a woken node was completed"),
            },
        )
    }

    /// The result if the node was completed (`Some(value)`), `None` if it
    /// still waits; for single-threaded tests of the hand-off order.
    #[cfg(test)]
    pub(crate) fn peek_done(&self) -> Option<Option<V>>
    where
        V: Copy,
    {
        // SAFETY: single-threaded tests: nobody else touches the node.
        self.slot.with(|s| match unsafe { &*s } {
            Slot::Done(Ok(v)) => Some(*v),
            _ => None,
        })
    }

    /// The owner's side for waits completed by someone else's state change
    /// and not by a waker's `set_done` (end counts): blocks until woken.
    pub(crate) fn block_until_woken(&self, kind: BlockKind) {
        self.waiter.block(kind);
    }
}

/// A FIFO of nodes, linked through their `next`.
pub(crate) struct Queue<V> {
    head: *const Node<V>,
    tail: *const Node<V>,
}

// SAFETY: the raw pointers are only followed by the holder of the owning
// location's lock, and point at nodes whose owners are blocked.
unsafe impl<V: Send> Send for Queue<V> {}

impl<V> Queue<V> {
    /// An empty queue.
    pub(crate) const EMPTY: Queue<V> = Queue {
        head: ptr::null(),
        tail: ptr::null(),
    };

    /// Whether no node is queued.
    #[inline]
    pub(crate) fn is_empty(&self) -> bool {
        self.head.is_null()
    }

    /// Nodes queued (for the loom models).
    #[cfg(all(test, loom))]
    pub(crate) fn len(&self) -> usize {
        let mut n = 0;
        let mut cur = self.head;
        while !cur.is_null() {
            n += 1;
            // SAFETY: nodes in the queue are live (push_back's contract).
            cur = unsafe { (*cur).next.get() };
        }
        n
    }

    /// The front node, still linked; null if empty.
    #[inline]
    pub(crate) fn front(&self) -> *const Node<V> {
        self.head
    }

    /// Appends `n`.
    ///
    /// # Safety
    /// `n` is live and stays so, unmoved, until it is unlinked and woken;
    /// it is in no queue.
    pub(crate) unsafe fn push_back(&mut self, n: *const Node<V>) {
        // SAFETY: `n` is live by the contract; the tail, if any, is a live
        // node of this queue.
        unsafe {
            (*n).next.set(ptr::null());
            if self.tail.is_null() {
                self.head = n;
            } else {
                (*self.tail).next.set(n);
            }
        }
        self.tail = n;
    }

    /// The front node, unlinked; null if empty.
    pub(crate) fn pop_front(&mut self) -> *const Node<V> {
        let n = self.head;
        if !n.is_null() {
            // SAFETY: nodes in the queue are live (push_back's contract).
            self.head = unsafe { (*n).next.get() };
            if self.head.is_null() {
                self.tail = ptr::null();
            }
        }
        n
    }

    /// Unlinks `n` if it is queued (a waiter that need not wait after
    /// all); returns whether it was.
    pub(crate) fn remove(&mut self, n: *const Node<V>) -> bool {
        let mut prev: *const Node<V> = ptr::null();
        let mut cur = self.head;
        while !cur.is_null() {
            // SAFETY: nodes in the queue are live (push_back's contract).
            let next = unsafe { (*cur).next.get() };
            if cur == n {
                if prev.is_null() {
                    self.head = next;
                } else {
                    // SAFETY: as above.
                    unsafe { (*prev).next.set(next) };
                }
                if self.tail == cur {
                    self.tail = prev;
                }
                return true;
            }
            prev = cur;
            cur = next;
        }
        false
    }

    /// Moves every node to `wake`, in queue order.
    pub(crate) fn drain_into(&mut self, wake: &mut WakeList<V>) {
        loop {
            let n = self.pop_front();
            if n.is_null() {
                return;
            }
            // SAFETY: just unlinked under the lock (the caller holds it);
            // its owner is blocked until woken.
            unsafe { wake.push(n) };
        }
    }
}

/// Nodes unlinked under a lock, to wake (in order) after it is released:
/// a queue of its own, linked through the same `next`.
pub(crate) struct WakeList<V>(Queue<V>);

impl<V> Default for WakeList<V> {
    fn default() -> Self {
        WakeList::new()
    }
}

impl<V> WakeList<V> {
    pub(crate) const fn new() -> WakeList<V> {
        WakeList(Queue::EMPTY)
    }

    /// Appends an unlinked node (its `next` is overwritten).
    ///
    /// # Safety
    /// `n` points at a live node that is blocked (or about to block) and
    /// was unlinked from its queue by the caller under the lock.
    pub(crate) unsafe fn push(&mut self, n: *const Node<V>) {
        // SAFETY: per the contract, `n` is live, in no queue, and stays
        // put until it is woken.
        unsafe { self.0.push_back(n) };
    }

    /// Wakes every node, front first. Call after releasing the lock.
    pub(crate) fn wake_all(mut self) {
        loop {
            // `pop_front` reads the node's `next` before we wake it; we
            // never touch the node after.
            let n = self.0.pop_front();
            if n.is_null() {
                return;
            }
            // SAFETY: nodes in the list are live until woken.
            unsafe { Waiter::wake(&(*n).waiter) };
        }
    }
}
