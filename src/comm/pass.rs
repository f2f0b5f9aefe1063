//! A pass lock: state that one thread at a time works on in *passes*,
//! and that any thread may give work to without waiting (the MPI
//! transport's inline progress, `mpi/inline.rs`: GASNet-EX's MPI conduit
//! and HPX's MPI parcelport work this way). Nobody waits for the lock: a
//! thread that publishes work and finds the lock taken goes on, and the
//! holder looks for published work again after it lets go.
//!
//! Why nothing published is stranded (`mpi/README.md`, I2): a publisher
//! publishes, then a SeqCst fence, then tries the lock; the holder
//! releases the lock, then a SeqCst fence, then asks `pending`. Of the two
//! fences one is first in their single total order: if the publisher's
//! is, the holder's `pending` sees the work and it passes again (or, if
//! another thread took the lock meanwhile, that thread does, under the
//! same rule); if the holder's is, the publisher's try sees the lock
//! released, so it takes it and passes itself, or a later holder took it
//! first and passes. Checked by loom below, with two mutations that loom
//! catches (no second look; no fences).

use crate::loom::UnsafeCell;
use crate::loom::sync::atomic::{AtomicBool, Ordering, fence};

/// State worked on in passes, one thread at a time: a flag that grants
/// the state (taken with Acquire, given back with Release), not a mutex,
/// so that loom models a failed try as the weak-memory load it is.
#[cfg_attr(not(feature = "mpi"), allow(dead_code))]
pub(crate) struct PassLock<T> {
    held: AtomicBool,
    /// A pass panicked: the state cannot be trusted.
    poisoned: AtomicBool,
    state: UnsafeCell<T>,
}

// SAFETY: the state is reached only by the thread that holds the flag
// (taken by a compare-exchange from false, Acquire; given back with a
// Release store), so one thread at a time; what it passes between
// threads is `T` itself, hence `T: Send`.
unsafe impl<T: Send> Sync for PassLock<T> {}
// SAFETY: as above; moving the lock moves a `T`.
unsafe impl<T: Send> Send for PassLock<T> {}

/// A thread panicked during a pass: the state cannot be trusted.
#[derive(Debug)]
#[cfg_attr(not(feature = "mpi"), allow(dead_code))]
pub(crate) struct Poisoned;

/// Gives the flag back when a pass ends, even by a panic (then the lock
/// is poisoned).
struct Holding<'a, T>(&'a PassLock<T>);

impl<T> Drop for Holding<'_, T> {
    fn drop(&mut self) {
        if std::thread::panicking() {
            self.0.poisoned.store(true, Ordering::Relaxed);
        }
        // Release: the next holder sees this pass's writes to the state.
        self.0.held.store(false, Ordering::Release);
    }
}

#[cfg_attr(not(feature = "mpi"), allow(dead_code))]
impl<T> PassLock<T> {
    pub(crate) fn new(state: T) -> PassLock<T> {
        PassLock {
            held: AtomicBool::new(false),
            poisoned: AtomicBool::new(false),
            state: UnsafeCell::new(state),
        }
    }

    /// Takes the flag if it is free now.
    fn try_hold(&self) -> Option<Holding<'_, T>> {
        // The load first: a taken flag is a busy cache line; no write then.
        if self.held.load(Ordering::Relaxed)
            || self
                .held
                .compare_exchange(false, true, Ordering::Acquire, Ordering::Relaxed)
                .is_err()
        {
            return None;
        }
        Some(Holding(self))
    }

    /// Runs `f` on the state, the flag held.
    fn with_state<R>(&self, _held: &Holding<'_, T>, f: impl FnOnce(&mut T) -> R) -> R {
        // SAFETY: `_held` proves this thread holds the flag, so no other
        // thread reaches the state until it is given back (after `f`).
        self.state.with_mut(|p| f(unsafe { &mut *p }))
    }

    /// Call after publishing work: makes a pass (`pass` on the state) if
    /// no other thread is making one, and again while `pending` says
    /// work was published meanwhile and the lock is free. Returns
    /// whether a pass said it did anything. Never waits for the lock.
    pub(crate) fn pass(
        &self,
        mut pass: impl FnMut(&mut T) -> bool,
        pending: impl Fn() -> bool,
    ) -> Result<bool, Poisoned> {
        let mut worked = false;
        loop {
            // SeqCst: the publisher's fence, between its publication
            // (before this call) and its try.
            fence(Ordering::SeqCst);
            let Some(held) = self.try_hold() else {
                return Ok(worked);
            };
            if self.poisoned.load(Ordering::Relaxed) {
                return Err(Poisoned);
            }
            worked |= self.with_state(&held, &mut pass);
            drop(held);
            // SeqCst: the holder's fence, between its release and its
            // look at what was published.
            fence(Ordering::SeqCst);
            if !pending() {
                return Ok(worked);
            }
        }
    }

    /// Runs `f` on the state once no pass runs, waiting for the flag (the
    /// end, when nothing may be skipped; never on the message path). A
    /// poisoned lock gives its state all the same.
    #[cfg(not(loom))]
    pub(crate) fn with_lock<R>(&self, f: impl FnOnce(&mut T) -> R) -> R {
        let backoff = crate::loom::Backoff::new();
        loop {
            if let Some(held) = self.try_hold() {
                return self.with_state(&held, f);
            }
            if backoff.is_completed() {
                std::thread::sleep(std::time::Duration::from_micros(50));
            } else {
                backoff.snooze();
            }
        }
    }

    /// Runs `f` (with the flag held, so no pass runs meanwhile) if the
    /// flag is free now.
    #[cfg(not(loom))]
    pub(crate) fn try_with<R>(&self, f: impl FnOnce() -> R) -> Option<R> {
        let held = self.try_hold()?;
        let r = f();
        drop(held);
        Some(r)
    }
}

#[cfg(all(test, loom))]
mod loom_tests {
    use super::*;
    use crate::loom::sync::atomic::AtomicUsize;
    use crate::loom::sync::{Arc, Mutex};

    /// Work published by any thread: a queue and its length, both written
    /// under the queue's lock, the length read without it (`pending`), as
    /// the MPI transport's outgoing frames are.
    struct Published {
        queue: Mutex<Vec<u32>>,
        len: AtomicUsize,
    }

    impl Published {
        fn publish(&self, x: u32) {
            let mut q = self.queue.lock().unwrap();
            q.push(x);
            self.len.store(q.len(), Ordering::Release);
        }

        fn take(&self, into: &mut Vec<u32>) -> bool {
            let mut q = self.queue.lock().unwrap();
            self.len.store(0, Ordering::Release);
            let any = !q.is_empty();
            into.append(&mut q);
            any
        }

        fn pending(&self) -> bool {
            self.len.load(Ordering::Relaxed) > 0
        }
    }

    fn model(f: impl Fn() + Sync + Send + 'static) {
        crate::loom::model(Some(3), f)
    }

    /// Two threads each publish an item, then run `then` (a way of
    /// passing); once both returned, nothing may be left published.
    /// Returns what the passes took.
    fn two_publishers(then: fn(&PassLock<Vec<u32>>, &Published)) -> Vec<u32> {
        let lock = Arc::new(PassLock::new(Vec::new()));
        let work = Arc::new(Published {
            queue: Mutex::new(Vec::new()),
            len: AtomicUsize::new(0),
        });
        let threads: Vec<_> = (0..2)
            .map(|i| {
                let (lock, work) = (lock.clone(), work.clone());
                loom::thread::spawn(move || {
                    work.publish(i);
                    then(&lock, &work);
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        assert!(
            work.queue.lock().unwrap().is_empty(),
            "an item was stranded"
        );
        // SAFETY: both threads were joined: no pass runs.
        lock.state.with(|p| unsafe { (*p).clone() })
    }

    /// Two threads publish and pass: whatever the interleaving, once both
    /// returned every item was taken by a pass (none left published).
    #[test]
    fn loom_nothing_published_is_stranded() {
        model(|| {
            let mut sent = two_publishers(|lock, work| {
                lock.pass(|sent| work.take(sent), || work.pending())
                    .unwrap();
            });
            sent.sort();
            assert_eq!(sent, vec![0, 1]);
        });
    }

    /// Mutation check: without the holder's second look (`pending` after
    /// it lets go) loom finds an item stranded, so the model above would
    /// catch a protocol that lost one.
    #[test]
    #[should_panic(expected = "stranded")]
    fn loom_without_the_second_look_an_item_is_stranded() {
        model(|| {
            two_publishers(|lock, work| {
                lock.pass(|sent| work.take(sent), || false).unwrap();
            });
        });
    }

    /// Mutation check: with the second look but without the two SeqCst
    /// fences, a failed try and the holder's look form a store-buffering
    /// pair, and loom finds an item stranded.
    #[test]
    #[should_panic(expected = "stranded")]
    fn loom_without_the_fences_an_item_is_stranded() {
        model(|| {
            two_publishers(|lock, work| {
                loop {
                    let Some(held) = lock.try_hold() else { return };
                    lock.with_state(&held, |sent| work.take(sent));
                    drop(held);
                    if !work.pending() {
                        return;
                    }
                }
            });
        });
    }
}
