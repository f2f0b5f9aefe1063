//! A bell: how a thread that sleeps is woken by one that publishes
//! something for it, without the publisher taking a lock when nobody
//! sleeps (the MPI transport's two sleepers: its MPI thread, woken by
//! senders, and a worker parked in the transport, woken by arrivals).
//!
//! The store-buffer pattern: the waker publishes, then a SeqCst fence,
//! then reads the sleeper's flag; the sleeper sets its flag, then a SeqCst
//! fence, then re-checks for what is published. Of the two fenced
//! sequences one is first: if the sleeper's fence is, the waker reads the
//! flag set and rings; if the waker's is, the sleeper's re-check sees the
//! publication and does not wait. A ring is a token under the mutex, so
//! a ring between the re-check and the wait is not lost either. Checked
//! by loom (`loom_tests` below).

use crate::loom::sync::atomic::{AtomicBool, Ordering, fence};
use crate::loom::sync::{Condvar, Mutex};
use std::time::Duration;

/// A sleeper's flag, a token and a condition variable.
#[cfg_attr(not(feature = "mpi"), allow(dead_code))]
pub(crate) struct Bell {
    sleeping: AtomicBool,
    rung: Mutex<bool>,
    cv: Condvar,
}

#[cfg_attr(not(feature = "mpi"), allow(dead_code))]
impl Bell {
    pub(crate) fn new() -> Bell {
        Bell {
            sleeping: AtomicBool::new(false),
            rung: Mutex::new(false),
            cv: Condvar::new(),
        }
    }

    /// Wakes the sleeper, if it sleeps (or is about to: it re-checks
    /// after announcing itself). Call after publishing what it should see.
    pub(crate) fn ring_if_sleeping(&self) {
        // SeqCst fence: pairs with the sleeper's fence between its
        // announcement and its re-check; one of the two sees the other's
        // write (the publication, or the flag).
        fence(Ordering::SeqCst);
        if self.sleeping.load(Ordering::Relaxed) {
            self.ring();
        }
    }

    /// Wakes the current or next `sleep` (a token).
    pub(crate) fn ring(&self) {
        *self.rung.lock().unwrap() = true;
        self.cv.notify_all();
    }

    /// Sleeps until rung, `timeout`, or `ready()` (re-checked after the
    /// announcement, so a publication before it is never missed).
    pub(crate) fn sleep(&self, timeout: Option<Duration>, ready: impl Fn() -> bool) {
        self.sleeping.store(true, Ordering::Relaxed);
        // SeqCst: pairs with `ring_if_sleeping`'s fence.
        fence(Ordering::SeqCst);
        let mut rung = self.rung.lock().unwrap();
        if !*rung && !ready() {
            rung = match timeout {
                Some(t) => self.cv.wait_timeout(rung, t).unwrap().0,
                None => self.cv.wait(rung).unwrap(),
            };
        }
        *rung = false;
        drop(rung);
        self.sleeping.store(false, Ordering::Relaxed);
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn a_bell_rung_before_the_sleep_is_not_lost() {
        let b = Bell::new();
        b.ring();
        let t = std::time::Instant::now();
        b.sleep(Some(Duration::from_secs(60)), || false);
        // A lost ring sleeps the whole minute; a kept one returns at once
        // (far below this bound, however loaded the machine).
        assert!(t.elapsed() < Duration::from_secs(20));
    }
}

#[cfg(all(test, loom))]
mod loom_tests {
    use super::*;
    use loom::sync::Arc;

    /// A publication and `ring_if_sleeping` against a `sleep` with no
    /// timeout: the sleeper always returns (loom reports a deadlock if it
    /// could wait forever), and when it returns on its own re-check it saw
    /// the publication.
    #[test]
    fn loom_bell_never_loses_a_wake_up() {
        loom::model(|| {
            let bell = Arc::new(Bell::new());
            let item = Arc::new(AtomicBool::new(false));
            let (b, i) = (bell.clone(), item.clone());
            let waker = loom::thread::spawn(move || {
                i.store(true, Ordering::Relaxed);
                b.ring_if_sleeping();
            });
            bell.sleep(None, || item.load(Ordering::Relaxed));
            waker.join().unwrap();
        });
    }

    /// Mutation check: without the waker's fence loom finds the lost
    /// wake-up (the sleeper blocked forever), so the model above would
    /// catch a protocol that lost one.
    #[test]
    #[should_panic(expected = "deadlock")]
    fn loom_bell_without_the_fence_loses_a_wake_up() {
        loom::model(|| {
            let bell = Arc::new(Bell::new());
            let item = Arc::new(AtomicBool::new(false));
            let (b, i) = (bell.clone(), item.clone());
            let waker = loom::thread::spawn(move || {
                i.store(true, Ordering::Relaxed);
                if b.sleeping.load(Ordering::Relaxed) {
                    b.ring();
                }
            });
            bell.sleep(None, || item.load(Ordering::Relaxed));
            waker.join().unwrap();
        });
    }
}
