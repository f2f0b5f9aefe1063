//! Landings: messages received straight into a place their receiver
//! chose (`Transport::expect_landing`), such as a get's bytes into the
//! caller's slice, with no buffer of the transport's and no copy out of
//! one. `README.md` beside this file, "Landings", states the protocol.
//!
//! The receiver names a landing by a key it picks, free among its own
//! landings from that source; the sender sends the bytes as one MPI
//! message with tag [`TAG_LANDING`] + key. Whoever passes first, after
//! the message's matched probe, takes the landing out of the table
//! (under its lock) and receives the message into its place; a
//! withdrawal takes it out the same way, so exactly one of the two has
//! it.

use crate::comm::transport::{LANDED, LANDING_REFUSED, LANDING_WAITING, Landing};
use std::collections::HashMap;
use std::os::raw::c_int;
use std::sync::atomic::{AtomicU8, AtomicU32, Ordering};
use std::sync::{Arc, Mutex};

/// The first tag of landing messages (below: the networks' and credit's).
pub(super) const TAG_LANDING: c_int = 16;
/// Keys per source: tags stay below 32767, the least `MPI_TAG_UB` the
/// standard allows. A key is reused only once its landing ended (and the
/// counter went round: 16 Ki landings later).
pub(super) const KEYS: u32 = 1 << 14;
/// Keys tried before giving up (every key busy: frames carry the bytes).
const TRIES: u32 = 64;

/// Where a landing's message goes.
struct Place {
    at: usize,
    len: usize,
    state: Arc<AtomicU8>,
}

/// A taken landing: where its message goes, for the pass that receives
/// it.
pub(super) struct Taken {
    pub(super) at: *mut u8,
    pub(super) len: usize,
    state: Arc<AtomicU8>,
}

impl Taken {
    /// Its message is in its place (Release: the bytes were written
    /// before).
    pub(super) fn landed(self) {
        self.state.store(LANDED, Ordering::Release);
    }

    /// A message of another length came for it: dropped.
    pub(super) fn refused(self) {
        self.state.store(LANDING_REFUSED, Ordering::Release);
    }
}

/// The landings a locale expects, by (source, key).
#[derive(Default)]
pub(super) struct Landings {
    next: AtomicU32,
    expected: Mutex<HashMap<(usize, u32), Place>>,
}

impl Landings {
    /// Expects a message from `src` into `len` bytes at `at`; `None` if
    /// no key is free.
    pub(super) fn expect(&self, src: usize, at: *mut u8, len: usize) -> Option<Landing> {
        let mut expected = self.expected.lock().unwrap();
        for _ in 0..TRIES {
            let key = self.next.fetch_add(1, Ordering::Relaxed) % KEYS;
            if let std::collections::hash_map::Entry::Vacant(v) = expected.entry((src, key)) {
                let state = Arc::new(AtomicU8::new(LANDING_WAITING));
                v.insert(Place {
                    at: at as usize,
                    len,
                    state: state.clone(),
                });
                return Some(Landing::new(src, key, state));
            }
        }
        None
    }

    /// Takes the landing a message from `src` with `tag` is for, if it is
    /// expected (for the pass that receives it).
    pub(super) fn take(&self, src: usize, tag: c_int) -> Option<Taken> {
        let key = u32::try_from(tag - TAG_LANDING).ok()?;
        let p = self.expected.lock().unwrap().remove(&(src, key))?;
        Some(Taken {
            at: p.at as *mut u8,
            len: p.len,
            state: p.state,
        })
    }

    /// Takes `landing` out of the table; `false` if a pass took it first
    /// (its message is being received, or was).
    pub(super) fn withdraw(&self, landing: &Landing) -> bool {
        self.expected
            .lock()
            .unwrap()
            .remove(&(landing.src, landing.key))
            .is_some()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_landing_is_taken_once_by_its_source_and_key() {
        let l = Landings::default();
        let mut place = [0u8; 4];
        let a = l.expect(1, place.as_mut_ptr(), 4).unwrap();
        let b = l.expect(1, place.as_mut_ptr(), 4).unwrap();
        assert_ne!(a.key, b.key, "two landings from one source");
        let tag = TAG_LANDING + a.key as c_int;
        assert!(l.take(2, tag).is_none(), "another source's message");
        assert!(l.take(1, TAG_LANDING - 1).is_none(), "not a landing tag");
        let t = l.take(1, tag).expect("expected");
        assert_eq!((t.at, t.len), (place.as_mut_ptr(), 4));
        assert!(l.take(1, tag).is_none(), "taken once");
        assert!(!l.withdraw(&a), "a pass took it first");
        assert_eq!(a.state(), LANDING_WAITING);
        t.landed();
        assert_eq!(a.state(), LANDED);
        assert!(l.withdraw(&b), "withdrawn before its message came");
        assert!(l.take(1, TAG_LANDING + b.key as c_int).is_none());
    }

    #[test]
    fn keys_stay_below_the_least_tag_bound_and_busy_ones_are_skipped() {
        let l = Landings::default();
        let mut place = [0u8; 1];
        let first = l.expect(0, place.as_mut_ptr(), 1).unwrap();
        l.next.store(first.key, Ordering::Relaxed);
        let next = l.expect(0, place.as_mut_ptr(), 1).unwrap();
        assert_ne!(next.key, first.key, "the busy key is skipped");
        l.next.store(u32::MAX, Ordering::Relaxed);
        let wrapped = l.expect(0, place.as_mut_ptr(), 1).unwrap();
        assert!(wrapped.key < KEYS);
        assert!(TAG_LANDING + KEYS as c_int - 1 <= 32767);
    }
}
