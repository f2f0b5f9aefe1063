//! Collectives a transport makes itself (MPI's non-blocking collectives),
//! offered to the global address space's memories beside messages
//! (`Job::collectives`). Named by no transport: the MPI transport
//! implements [`Collectives`]; `pgas`'s message memory uses it where the
//! job has it (`pgas/README.md`, "Collectives over MPI").
//!
//! A collective is started by one task per locale, in the same order on
//! every locale (the SPMD rule), and completes on its own: the task polls
//! [`Pending::take`] while it makes progress (`remote::poll_once`), so no
//! thread waits inside the transport.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

/// A transport's own collectives over every locale of the job.
pub(crate) trait Collectives: Send + Sync {
    /// Starts an all-gather: every locale passes `mine`, of the same
    /// length on every locale; the result is every locale's bytes,
    /// concatenated in locale order.
    fn all_gather(&self, mine: Vec<u8>) -> Arc<Pending>;

    /// Starts a broadcast of `buf` from locale `root`: every locale passes
    /// a buffer of the same length (the root's holds the data); the result
    /// is the root's bytes.
    fn broadcast(&self, root: usize, buf: Vec<u8>) -> Arc<Pending>;

    /// Moves the collectives in flight on, where the waiting task's own
    /// calls do that (MPI inline: a try of the lock and an `MPI_Test`);
    /// cheaper than a poll of the transport, which a waiting task still
    /// makes now and then to serve what arrives. Returns whether it did
    /// anything.
    fn progress(&self) -> bool {
        false
    }
}

/// A collective in flight: its result once every locale took part.
#[derive(Default)]
pub(crate) struct Pending {
    done: AtomicBool,
    result: Mutex<Option<Vec<u8>>>,
}

impl Pending {
    /// A collective not yet complete.
    #[cfg_attr(not(feature = "mpi"), allow(dead_code))]
    pub(crate) fn new() -> Arc<Pending> {
        Arc::new(Pending::default())
    }

    /// The transport completed it with `result`.
    #[cfg_attr(not(feature = "mpi"), allow(dead_code))]
    pub(crate) fn complete(&self, result: Vec<u8>) {
        *self.result.lock().unwrap() = Some(result);
        // Release: pairs with the Acquire in `take` (the mutex orders the
        // result itself; the flag only says it is there, for a cheap poll).
        self.done.store(true, Ordering::Release);
    }

    /// The result, once complete (then `None` ever after).
    pub(crate) fn take(&self) -> Option<Vec<u8>> {
        // Acquire: pairs with `complete`'s Release.
        if !self.done.load(Ordering::Acquire) {
            return None;
        }
        self.result.lock().unwrap().take()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_result_is_taken_once_and_only_when_complete() {
        let p = Pending::new();
        assert_eq!(p.take(), None);
        p.complete(vec![1, 2, 3]);
        assert_eq!(p.take(), Some(vec![1, 2, 3]));
        assert_eq!(p.take(), None);
    }

    #[test]
    fn another_thread_sees_the_result() {
        let p = Pending::new();
        let q = p.clone();
        let t = std::thread::spawn(move || q.complete(vec![7; 64]));
        let got = loop {
            if let Some(r) = p.take() {
                break r;
            }
            std::hint::spin_loop();
        };
        t.join().unwrap();
        assert_eq!(got, vec![7; 64]);
    }
}
