//! The full/empty engine: one set of rules for every full/empty location
//! in cantus: `SyncVar`, `SingleVar` (`var.rs`), the C `cantus_sync_t` and
//! the caller-owned words, `syncvar_t`s and keyed states of the C side
//! table (`ffi/feb/`). A location is seen, with its lock held, as a
//! [`Place`] reached through a [`Site`]; the rules and their proof are in
//! `README.md` ("The engine").
//!
//! Blocked operations are completed by the party that changes the state
//! (direct hand-off, as Qthreads' FEB queues do): a writer that fills a
//! location performs the queued readers' reads itself, then wakes them, so
//! a woken waiter never retries and nobody can overtake it.

use super::wait::BlockKind;
use super::wait_queue::{Done, Node, Op, Queue, WakeList};
use std::panic::{AssertUnwindSafe, catch_unwind};

/// A full/empty location, seen with its lock held.
///
/// Invariant **I** between critical sections: full ⇒ no queued operation
/// waits for full, and empty ⇒ none waits for empty. So every queued node
/// waits for the state the place is *not* in.
pub(crate) trait Place {
    /// What the location holds.
    type Value;

    fn is_full(&self) -> bool;
    fn set_full(&mut self, full: bool);
    fn queue(&mut self) -> &mut Queue<Self::Value>;

    /// Moves the value out.
    ///
    /// # Safety
    /// The place holds a value: it is full (a C location always holds
    /// one, and taking leaves it there).
    unsafe fn take(&mut self) -> Self::Value;

    /// Moves `v` in. The place holds no value (it is empty, or its value
    /// was just taken); a C location simply overwrites.
    fn put(&mut self, v: Self::Value);
}

/// How to reach a location's [`Place`] with its lock held.
pub(crate) trait Site {
    /// What the location holds.
    type Value;

    /// Runs `f` with the lock held; releases it when `f` returns or
    /// unwinds. `f` must not block. (A trait object: the table's places
    /// borrow an entry for less than the site; calls are devirtualised
    /// where the site's type is known.)
    fn locked<R>(&self, f: impl FnOnce(&mut dyn Place<Value = Self::Value>) -> R) -> R;

    /// The address deadlock reports show for a party waiting here.
    fn addr(&self) -> usize;

    /// The state without taking the lock, where the location can tell
    /// cheaply (its state is in a word of its own); lets a task spin
    /// briefly before it blocks.
    fn peek_full(&self) -> Option<bool> {
        None
    }
}

/// Performs `op` on `p`, whose state admits it (`p.is_full() ==
/// op.wants_full()`), without settling. A readFF's copy runs under
/// `catch_unwind`: if it panics, the value is put back and the payload is
/// the result, for the reader to resume.
fn complete<P: Place + ?Sized>(p: &mut P, op: Op<P::Value>) -> Done<P::Value> {
    debug_assert_eq!(p.is_full(), op.wants_full());
    match op {
        Op::ReadFE => {
            // SAFETY: full (the state admits a readFE).
            let v = unsafe { p.take() };
            p.set_full(false);
            Ok(Some(v))
        }
        Op::ReadFF(copy) => {
            // SAFETY: full (the state admits a readFF).
            let v = unsafe { p.take() };
            let c = catch_unwind(AssertUnwindSafe(|| copy(&v)));
            p.put(v);
            c.map(Some)
        }
        Op::Await => Ok(None),
        Op::WriteEF(v) => {
            p.put(v);
            p.set_full(true);
            Ok(None)
        }
        Op::WriteFF(v) => {
            // SAFETY: full (the state admits a writeFF).
            let old = unsafe { p.take() };
            p.put(v);
            Ok(Some(old))
        }
    }
}

/// Restores invariant I after a state change: completes the queued
/// operations the current state admits, front first, moving each to
/// `wake`, until the front one waits for the other state (or the queue is
/// empty). By I all queued nodes wait for the same state, so looking at
/// the front is enough; each round removes a node, so it ends.
pub(crate) fn settle<P: Place + ?Sized>(p: &mut P, wake: &mut WakeList<P::Value>) {
    loop {
        let full = p.is_full();
        let n = p.queue().front();
        // SAFETY: queued nodes are live (`Queue::push_back`'s contract).
        if n.is_null() || unsafe { (*n).wants_full() } != full {
            return;
        }
        p.queue().pop_front();
        // SAFETY: unlinked by us under the lock; its owner stays blocked
        // until we wake it, after the lock is released.
        unsafe {
            let op = (*n).take_op();
            let done = complete(p, op);
            (*n).set_done(done);
            wake.push(n);
        }
    }
}

/// Sets the state and completes what the change admits (fill, empty,
/// writeXF, reset: the caller moved any value in or out first).
pub(crate) fn change_state<P: Place + ?Sized>(
    p: &mut P,
    full: bool,
    wake: &mut WakeList<P::Value>,
) {
    p.set_full(full);
    settle(p, wake);
}

/// Performs `op` now if the state admits it (then settles, if it changed
/// the state); otherwise hands `op` back. By I nobody queued waits for the
/// state the place is in, so performing at once overtakes no one.
pub(crate) fn attempt<P: Place + ?Sized>(
    p: &mut P,
    op: Op<P::Value>,
    wake: &mut WakeList<P::Value>,
) -> Result<Done<P::Value>, Op<P::Value>> {
    if p.is_full() != op.wants_full() {
        return Err(op);
    }
    let changes = op.changes_state();
    let done = complete(p, op);
    if changes {
        settle(p, wake);
    }
    Ok(done)
}

/// Links a node for the caller, waiting to perform `op`, at the back of
/// `p`'s queue; the node is built in `slot`. The state must not admit `op`
/// (so I holds). May panic before linking (see `Node::new`).
///
/// # Safety
/// `*slot` is neither moved nor dropped before the node's `block`
/// returned (the caller blocks on it right after releasing the lock).
pub(crate) unsafe fn enqueue<'n, P: Place + ?Sized>(
    p: &mut P,
    slot: &'n mut Option<Node<P::Value>>,
    op: Op<P::Value>,
    addr: usize,
    what: &str,
) -> &'n Node<P::Value> {
    debug_assert_ne!(
        p.is_full(),
        op.wants_full(),
        "enqueue: the state admits the operation"
    );
    let n = slot.insert(Node::new(op, addr, what));
    // SAFETY: per the contract, the node stays put until woken.
    unsafe { p.queue().push_back(n) };
    n
}

/// Performs `op` on the location, blocking the calling task (or outside
/// thread) until a state change completes it; returns its result. `kind`
/// and `what` describe the wait (deadlock reports; the panic of an outside
/// thread that would block forever).
pub(crate) fn perform<S: Site>(
    site: &S,
    op: Op<S::Value>,
    kind: BlockKind,
    what: &str,
) -> Done<S::Value> {
    spin_before_blocking(site, op.wants_full());
    let mut slot = None;
    let mut wake = WakeList::new();
    let done = site.locked(|p| match attempt(p, op, &mut wake) {
        Ok(done) => Some(done),
        Err(op) => {
            // SAFETY: `slot` lives on this frame, untouched, until `block`
            // below returns.
            unsafe { enqueue(p, &mut slot, op, site.addr(), what) };
            None
        }
    });
    wake.wake_all();
    match (done, &slot) {
        (Some(done), _) => done,
        (None, Some(node)) => node.block(kind),
        (None, None) => unreachable!("a waiting operation is queued"),
    }
}

/// A task whose worker has nothing else to run probes the location's
/// state a bounded number of times (the scheduler's policy:
/// `sched::may_spin_before_blocking`, `sched::SPIN_BEFORE_BLOCKING`)
/// while it does not admit the operation: a quick hand-off from another
/// worker then costs no suspension and wake-up. This is not a lock and
/// never yields the thread, so it is a fixed count of `spin_loop` hints,
/// not a `Backoff` (whose later steps yield the worker's thread).
#[inline]
fn spin_before_blocking<S: Site>(
    #[cfg_attr(loom, allow(unused_variables))] site: &S,
    #[cfg_attr(loom, allow(unused_variables))] wants_full: bool,
) {
    #[cfg(not(loom))]
    if site.peek_full().is_some_and(|f| f != wants_full) && crate::sched::may_spin_before_blocking()
    {
        let driver = crate::sched::has_driver();
        for i in 0..crate::sched::SPIN_BEFORE_BLOCKING {
            if site.peek_full() == Some(wants_full) {
                break;
            }
            // The worker cannot poll its driver while this task spins, and
            // what the task waits for may come through it (a message from
            // another locale): poll as soon as the driver has something
            // (its `ready` is a few loads, so a message is taken the
            // moment it lands, not up to 16 spins later), and now and then
            // anyway; if that brought work for this worker, stop spinning
            // and let it run.
            if (i % 16 == 15 || (driver && crate::sched::driver_ready_from_task()))
                && crate::sched::poll_driver_from_task() > 0
                && !crate::sched::may_spin_before_blocking()
            {
                break;
            }
            std::hint::spin_loop();
        }
    }
}

/// Runs `f` with the location's lock held; `f` changes the state only
/// through [`change_state`] (which keeps invariant I). What it completed
/// is woken after the lock is released. `f` must not block.
pub(crate) fn with_place<S: Site, R>(
    site: &S,
    f: impl FnOnce(&mut dyn Place<Value = S::Value>, &mut WakeList<S::Value>) -> R,
) -> R {
    let mut wake = WakeList::new();
    let r = site.locked(|p| f(p, &mut wake));
    wake.wake_all();
    r
}

/// Runs `f` as [`with_place`] does; if it returns true, the caller's `op`
/// is queued in the same critical section and the caller blocks until a
/// state change completes it. `f` must return true only when the state
/// does not admit `op` (so invariant I holds). Returns the result of `op`
/// if the caller waited. The building block of barriers: the last arrival
/// changes the state, everyone else waits for it.
pub(crate) fn wait_if<S: Site>(
    site: &S,
    op: Op<S::Value>,
    kind: BlockKind,
    what: &str,
    f: impl FnOnce(&mut dyn Place<Value = S::Value>, &mut WakeList<S::Value>) -> bool,
) -> Option<Done<S::Value>> {
    let mut slot = None;
    let mut wake = WakeList::new();
    site.locked(|p| {
        if f(p, &mut wake) {
            // SAFETY: `slot` lives on this frame, untouched, until `block`
            // below returns.
            unsafe { enqueue(p, &mut slot, op, site.addr(), what) };
        }
    });
    wake.wake_all();
    slot.as_ref().map(|node| node.block(kind))
}

/// A result's value, resuming the panic of a readFF's copy in the caller.
pub(crate) fn unwrap_done<V>(done: Done<V>) -> Option<V> {
    done.unwrap_or_else(|payload| std::panic::resume_unwind(payload))
}
