//! What reaches a locale for the message memory's collectives: parcels
//! (one step of a collective: a part of a gather, a broadcast's data, a
//! verdict), and what this locale knows of the running SPMD group (its
//! handler and epoch, and which bodies ended, after how many
//! collectives). Remote calls run inside the poll post here; the task of
//! the collective takes what it waits for, polling while it waits.
//!
//! A parcel is keyed by (collective, phase, sender) within its group's
//! epoch: the collective is the number of collectives its body entered
//! before it (every locale calls the same ones in the same order), the
//! phase the step within the collective. A parcel of another epoch is
//! left over from a group that ended early, and is dropped.

use super::super::memory::{MAX_PAUSE, MIN_PAUSE, body_gone, wait_until};
use std::collections::HashMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// Which parcel: collective `seq` of the group, step `phase`, from `from`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) struct Key {
    pub(crate) seq: u64,
    pub(crate) phase: u32,
    pub(crate) from: u32,
}

/// A body of the group ended: after completing `done` collectives, by a
/// panic or by returning.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Ended {
    pub(crate) done: u64,
    pub(crate) panicked: bool,
}

impl Ended {
    /// Whether collective `seq` can still complete with this body gone:
    /// only if the body completed it (it sent every parcel of it before
    /// it ended, and the collectives come in the same order everywhere).
    fn blocks(&self, seq: u64) -> bool {
        self.done <= seq
    }
}

/// The group as this locale knows it, and the parcels of its epoch.
#[derive(Default)]
struct State {
    /// The current group's epoch (0: none began yet), handler, and
    /// whether one runs.
    epoch: u64,
    id: u64,
    running: bool,
    /// Which bodies of the group ended, by locale.
    ended: Vec<Option<Ended>>,
    parcels: HashMap<Key, Vec<u8>>,
}

impl State {
    /// A body whose end means collective `seq` can never complete: the
    /// lowest locale whose body panicked, else the lowest that returned.
    fn blocker(&self, seq: u64) -> Option<(usize, bool)> {
        let gone = |panicked: bool| {
            self.ended
                .iter()
                .enumerate()
                .find(|(_, e)| e.is_some_and(|e| e.panicked == panicked && e.blocks(seq)))
                .map(|(l, _)| (l, panicked))
        };
        gone(true).or_else(|| gone(false))
    }
}

/// A locale's post (see the module docs).
#[derive(Default)]
pub(crate) struct Post {
    state: Mutex<State>,
    /// Bumped after anything was posted: a waiter looks under the lock
    /// only when it changed.
    arrivals: AtomicU64,
}

impl Post {
    /// Group `epoch` of handler `id` began, in a job of `locales`: drops
    /// whatever the earlier groups left.
    pub(crate) fn begin(&self, epoch: u64, id: u64, locales: usize) {
        let mut s = self.state.lock().unwrap();
        s.epoch = epoch;
        s.id = id;
        s.running = true;
        s.ended = vec![None; locales];
        s.parcels.clear();
    }

    /// The group this locale knows to run: (handler id, epoch).
    pub(crate) fn group(&self) -> Option<(u64, u64)> {
        let s = self.state.lock().unwrap();
        s.running.then_some((s.id, s.epoch))
    }

    /// The epoch of the latest group this locale knows of.
    pub(crate) fn epoch(&self) -> u64 {
        self.state.lock().unwrap().epoch
    }

    /// Posts a parcel of group `epoch` (dropped if that group is over).
    pub(crate) fn deliver(&self, epoch: u64, key: Key, bytes: &[u8]) {
        let mut s = self.state.lock().unwrap();
        if epoch == s.epoch {
            s.parcels.insert(key, bytes.to_vec());
            self.arrived();
        }
    }

    /// Records that `locale`'s body of group `epoch` ended; whether that
    /// group is the current one (else the notice is stale and ignored).
    pub(crate) fn ended(&self, epoch: u64, locale: usize, ended: Ended) -> bool {
        let mut s = self.state.lock().unwrap();
        let current = epoch == s.epoch && locale < s.ended.len();
        if current {
            s.ended[locale] = Some(ended);
            self.arrived();
        }
        current
    }

    fn arrived(&self) {
        // Release: pairs with the Acquire load in `take` (the lock orders
        // the parcel itself; this only says where to look).
        self.arrivals.fetch_add(1, Ordering::Release);
    }

    /// Waits for the parcel `key` of the current group and takes it,
    /// polling for it (`progress`) while it spins. Panics, naming the
    /// locale, if a body ended such that collective `key.seq` can never
    /// complete (`here` is this locale, for the message).
    pub(crate) fn take(&self, key: Key, here: usize, progress: impl Fn() -> bool) -> Vec<u8> {
        let mut seen = None;
        let mut got = None;
        wait_until(
            || {
                // Acquire: pairs with `arrived`'s Release.
                let now = self.arrivals.load(Ordering::Acquire);
                if seen == Some(now) {
                    return false;
                }
                seen = Some(now);
                let mut s = self.state.lock().unwrap();
                got = match s.parcels.remove(&key) {
                    Some(bytes) => Some(Ok(bytes)),
                    None => s.blocker(key.seq).map(Err),
                };
                got.is_some()
            },
            progress,
        );
        match got.expect("wait_until returns once a parcel or an end came") {
            Ok(bytes) => bytes,
            Err((locale, panicked)) => body_gone(locale, panicked, here, "collective"),
        }
    }
}

/// How long a wait in a collective the transport makes (`wait_for`)
/// polls and yields before it naps: the latency of a collective whose
/// locales arrive together is never a nap. For the first `SPIN_FOR` it
/// yields only to the locale's other tasks; after that to other
/// processes too (a rank that shares its core with another must not
/// keep it from arriving).
const SPIN_FOR: Duration = Duration::from_micros(50);
const YIELD_FOR: Duration = Duration::from_millis(10);

impl Post {
    /// Waits in collective `seq` until `ready` gives its result (a
    /// collective the transport makes, `native.rs`), polling the
    /// transport and letting the locale's other tasks (after [`SPIN_FOR`],
    /// other threads) run between looks: for [`YIELD_FOR`] without a
    /// pause, then napping as a tree step's wait does (`wait_until`'s
    /// 5-200 us) where a poll brought nothing (a long wait is the other
    /// locales' work, not latency). Panics, naming the locale, if a body ended such that the
    /// collective can never complete (`here` is this locale).
    pub(crate) fn wait_for<T>(
        &self,
        seq: u64,
        here: usize,
        mut ready: impl FnMut() -> Option<T>,
        progress: impl Fn() -> bool,
    ) -> T {
        let start = Instant::now();
        let mut seen = None;
        let mut nap = MIN_PAUSE;
        loop {
            if let Some(v) = ready() {
                return v;
            }
            // Acquire: pairs with `arrived`'s Release (a notice of an end).
            let now = self.arrivals.load(Ordering::Acquire);
            if seen != Some(now) {
                seen = Some(now);
                // The lock is let go before the panic (it would poison it).
                let blocker = self.state.lock().unwrap().blocker(seq);
                if let Some((locale, panicked)) = blocker {
                    body_gone(locale, panicked, here, "collective");
                }
            }
            let progressed = progress();
            let waited = start.elapsed();
            if waited < YIELD_FOR {
                // What the poll brought may be tasks of this worker.
                crate::task::yield_now();
                if waited > SPIN_FOR {
                    std::thread::yield_now();
                }
            } else if !progressed {
                crate::task::sleep(nap);
                nap = (nap * 2).min(MAX_PAUSE);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(seq: u64, phase: u32, from: u32) -> Key {
        Key { seq, phase, from }
    }

    #[test]
    fn parcels_are_taken_by_key_and_stale_ones_dropped() {
        let p = Post::default();
        p.begin(3, 77, 2);
        assert_eq!(p.group(), Some((77, 3)));
        p.deliver(3, key(0, 1, 1), b"b");
        p.deliver(3, key(0, 0, 1), b"a");
        p.deliver(2, key(1, 0, 1), b"stale");
        assert_eq!(p.take(key(0, 0, 1), 0, || false), b"a");
        assert_eq!(p.take(key(0, 1, 1), 0, || false), b"b");
        p.begin(4, 77, 2);
        assert!(p.state.lock().unwrap().parcels.is_empty());
    }

    #[test]
    fn a_body_that_ended_before_a_collective_ends_the_wait() {
        let p = Post::default();
        p.begin(1, 5, 3);
        // Locale 2 completed collectives 0 and 1, then returned: a wait in
        // collective 1 goes on (its parcel comes), one in 2 cannot.
        assert!(p.ended(
            1,
            2,
            Ended {
                done: 2,
                panicked: false
            }
        ));
        assert!(
            !p.ended(
                0,
                1,
                Ended {
                    done: 0,
                    panicked: true
                }
            ),
            "stale"
        );
        p.deliver(1, key(1, 0, 2), b"x");
        assert_eq!(p.take(key(1, 0, 2), 0, || false), b"x");
        let e = std::panic::catch_unwind(|| p.take(key(2, 0, 1), 0, || false)).unwrap_err();
        let msg = crate::error::panic_text(&*e).unwrap().to_string();
        assert!(msg.contains("SPMD body of locale 2 returned"), "{msg}");
        // A panic is named before a return.
        assert!(p.ended(
            1,
            1,
            Ended {
                done: 2,
                panicked: true
            }
        ));
        let e = std::panic::catch_unwind(|| p.take(key(2, 0, 0), 0, || false)).unwrap_err();
        let msg = crate::error::panic_text(&*e).unwrap().to_string();
        assert!(msg.contains("locale 1 panicked"), "{msg}");
    }

    #[test]
    fn a_waiter_sees_a_parcel_posted_by_another_thread() {
        let p = std::sync::Arc::new(Post::default());
        p.begin(1, 1, 2);
        let q = p.clone();
        let t = std::thread::spawn(move || {
            std::thread::sleep(std::time::Duration::from_millis(5));
            q.deliver(1, key(7, 2, 1), &[9; 100]);
        });
        assert_eq!(p.take(key(7, 2, 1), 0, || false), vec![9; 100]);
        t.join().unwrap();
    }
}
