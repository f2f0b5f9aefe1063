//! Landings: messages received straight into a place their receiver
//! chose, with no buffer of the transport's and no copy out of one.
//! `README.md` beside this file, "Messages", 6, states the protocol.
//!
//! Two kinds, told apart by their tag:
//!
//! - **Expected** (`Transport::expect_landing`): the receiver enters the
//!   place first, under a key it picks, and sends the key in a request
//!   (a large get's bytes into the caller's slice). Tag
//!   [`TAG_EXPECTED`] + key.
//! - **Claimed** (`Transport::claim_landing`): the sender picks the key
//!   and sends the bytes before the request that names them (a large
//!   put); the pass that probes them *parks* the matched message until
//!   the request's handler claims it with a place (or refuses it). A
//!   claim that finds nothing parked fails at once. Tag [`TAG_CLAIMED`]
//!   + key.
//!
//! Every entry is taken out of the table under its lock, by exactly one
//! of: the pass that probes the message (an expected place), the claim
//! (a parked message, handed to the next pass in `ready`), or a
//! withdrawal. Only a pass calls MPI.

use crate::comm::transport::{LANDED, LANDING_REFUSED, LANDING_WAITING, Landing};
use std::collections::{HashMap, HashSet};
use std::os::raw::c_int;
use std::sync::atomic::{AtomicU8, AtomicU32, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

/// Keys per kind and source: tags stay below 32767, the least
/// `MPI_TAG_UB` the standard allows.
pub(super) const KEYS: u32 = 1 << 13;
/// The first tag of expected landings' messages (below: the networks'
/// and credit's), and of claimed ones'.
pub(super) const TAG_EXPECTED: c_int = 16;
pub(super) const TAG_CLAIMED: c_int = TAG_EXPECTED + KEYS as c_int;
/// Keys tried before giving up (every key busy: frames carry the bytes).
const TRIES: u32 = 64;

/// A matched message as the table sees it (`sys::Probed`; a stand-in in
/// tests).
pub(super) trait Probe {
    /// (source, tag, length in bytes).
    fn header(&self) -> (usize, c_int, usize);
}

/// Whether `tag` is a landing's.
pub(super) fn is_landing(tag: c_int) -> bool {
    (TAG_EXPECTED..TAG_CLAIMED + KEYS as c_int).contains(&tag)
}

/// Where a landing's message goes.
pub(super) struct Place {
    at: usize,
    len: usize,
    state: Arc<AtomicU8>,
}

impl Place {
    fn new(at: *mut u8, len: usize) -> (Place, Arc<AtomicU8>) {
        let state = Arc::new(AtomicU8::new(LANDING_WAITING));
        let p = Place {
            at: at as usize,
            len,
            state: state.clone(),
        };
        (p, state)
    }

    /// The place's address and length.
    pub(super) fn at(&self) -> (*mut u8, usize) {
        (self.at as *mut u8, self.len)
    }

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

/// A table entry.
enum Entry<M> {
    /// A place waiting for its message.
    Place(Place),
    /// A claimed landing's message that came before its claim.
    Parked(M),
    /// A claimed landing refused before its message came: drop it.
    Refused,
}

/// What a pass does with a landing's message it probed.
pub(super) enum Arrived<M> {
    /// Receives it into this place.
    Land(M, Place),
    /// Receives it into a buffer and drops it, saying why.
    Drop(M, String),
    /// Receives it into a buffer and drops it, quietly: its request's
    /// handler refused it, and said why.
    Discard(M),
    /// Nothing now: it is parked for its claim.
    Parked,
}

/// What a pass does with message `p` for `place`: lands it there if its
/// length is the place's, else refuses the place and drops the message.
fn land_or_drop<M: Probe>(p: M, place: Place) -> Arrived<M> {
    let len = p.header().2;
    if place.len == len {
        return Arrived::Land(p, place);
    }
    let why = format!("{len} bytes where {} were expected", place.len);
    place.refused();
    Arrived::Drop(p, why)
}

/// The landings of a locale.
pub(super) struct Landings<M> {
    next: AtomicU32,
    /// By (source, tag).
    table: Mutex<HashMap<(usize, c_int), Entry<M>>>,
    /// Parked messages claimed (with a place) or refused (`None`), for the
    /// next pass to receive, and how many.
    ready: Mutex<Vec<(M, Option<Place>)>>,
    ready_len: AtomicUsize,
    /// Claimed landings' keys this locale sends under, per destination.
    sending: Mutex<HashSet<(usize, u32)>>,
    next_send: AtomicU32,
}

impl<M> Default for Landings<M> {
    fn default() -> Landings<M> {
        Landings {
            next: AtomicU32::new(0),
            table: Mutex::new(HashMap::new()),
            ready: Mutex::new(Vec::new()),
            ready_len: AtomicUsize::new(0),
            sending: Mutex::new(HashSet::new()),
            next_send: AtomicU32::new(0),
        }
    }
}

impl<M: Probe> Landings<M> {
    /// Expects a message from `src` into `len` bytes at `at`; `None` if
    /// no key is free.
    pub(super) fn expect(&self, src: usize, at: *mut u8, len: usize) -> Option<Landing> {
        let mut table = self.table.lock().unwrap();
        for _ in 0..TRIES {
            let key = self.next.fetch_add(1, Ordering::Relaxed) % KEYS;
            if let std::collections::hash_map::Entry::Vacant(v) =
                table.entry((src, TAG_EXPECTED + key as c_int))
            {
                let (place, state) = Place::new(at, len);
                v.insert(Entry::Place(place));
                return Some(Landing::new(src, key, TAG_EXPECTED as u32 + key, state));
            }
        }
        None
    }

    /// Claims the message `src` sent under `key` (a claimed landing) for
    /// `len` bytes at `at`: it goes to the next pass (`true`: ask for
    /// one). Its sender sends it before the request that names it, and a
    /// pass probes one sender's messages in order, so a claim always finds
    /// it parked; one that does not (a forged or stale request, or bytes
    /// whose send failed) is refused at once rather than left waiting.
    pub(super) fn claim(&self, src: usize, key: u32, at: *mut u8, len: usize) -> (Landing, bool) {
        let tag = TAG_CLAIMED + key as c_int;
        let (place, state) = Place::new(at, len);
        let landing = Landing::new(src, key, tag as u32, state);
        let mut table = self.table.lock().unwrap();
        match table.remove(&(src, tag)) {
            Some(Entry::Parked(p)) => {
                drop(table);
                self.make_ready(p, Some(place));
                (landing, true)
            }
            // A second claim of one key (a forged or repeated request):
            // the first keeps it; this one fails at once.
            Some(other) => {
                table.insert((src, tag), other);
                place.refused();
                (landing, false)
            }
            None => {
                place.refused();
                (landing, false)
            }
        }
    }

    /// Refuses the message `src` sends under `key`: dropped when it comes,
    /// or by the next pass if it came (`true`: ask for one).
    pub(super) fn refuse(&self, src: usize, key: u32) -> bool {
        let tag = TAG_CLAIMED + key as c_int;
        let mut table = self.table.lock().unwrap();
        match table.remove(&(src, tag)) {
            Some(Entry::Parked(p)) => {
                drop(table);
                self.make_ready(p, None);
                true
            }
            Some(other) => {
                table.insert((src, tag), other);
                false
            }
            None => {
                table.insert((src, tag), Entry::Refused);
                false
            }
        }
    }

    fn make_ready(&self, p: M, place: Option<Place>) {
        let mut ready = self.ready.lock().unwrap();
        ready.push((p, place));
        // Release: a pass that sees the count finds the entry under the
        // lock.
        self.ready_len.store(ready.len(), Ordering::Release);
    }

    /// Whether claimed messages wait for a pass to receive them.
    pub(super) fn has_ready(&self) -> bool {
        self.ready_len.load(Ordering::Acquire) > 0
    }

    /// What the pass does with each claimed (or refused) message waiting
    /// for it.
    pub(super) fn take_ready(&self) -> Vec<Arrived<M>> {
        if !self.has_ready() {
            return Vec::new();
        }
        let ready = {
            let mut ready = self.ready.lock().unwrap();
            self.ready_len.store(0, Ordering::Release);
            std::mem::take(&mut *ready)
        };
        ready
            .into_iter()
            .map(|(p, place)| match place {
                Some(place) => land_or_drop(p, place),
                None => Arrived::Discard(p),
            })
            .collect()
    }

    /// What the pass that probed landing message `p` does with it.
    pub(super) fn arrived(&self, p: M) -> Arrived<M> {
        let (src, tag, _) = p.header();
        let key = (src, tag);
        let mut table = self.table.lock().unwrap();
        match table.remove(&key) {
            Some(Entry::Place(place)) => land_or_drop(p, place),
            Some(Entry::Refused) => Arrived::Drop(p, "its request was refused".into()),
            Some(Entry::Parked(earlier)) => {
                // The sender reused a key whose message waits unclaimed:
                // the earlier one stays, this one goes.
                table.insert(key, Entry::Parked(earlier));
                Arrived::Drop(p, "a key already in use".into())
            }
            None if tag >= TAG_CLAIMED => {
                table.insert(key, Entry::Parked(p));
                Arrived::Parked
            }
            None => Arrived::Drop(p, "a landing nobody expects (withdrawn)".into()),
        }
    }

    /// Takes `landing` out of the table; `false` if a pass or its claim
    /// took it first (its message is being received, or was).
    pub(super) fn withdraw(&self, landing: &Landing) -> bool {
        let mut table = self.table.lock().unwrap();
        let at = (landing.src, landing.id as c_int);
        match table.remove(&at) {
            Some(Entry::Place(_)) => true,
            // Not this landing's place: left as it was.
            Some(other) => {
                table.insert(at, other);
                false
            }
            None => false,
        }
    }

    /// A key to send a claimed landing's message to `dest` under, free
    /// among this locale's (until [`release`](Self::release)).
    pub(super) fn send_key(&self, dest: usize) -> Option<u32> {
        let mut sending = self.sending.lock().unwrap();
        for _ in 0..TRIES {
            let key = self.next_send.fetch_add(1, Ordering::Relaxed) % KEYS;
            if sending.insert((dest, key)) {
                return Some(key);
            }
        }
        None
    }

    /// Frees a key [`send_key`](Self::send_key) gave, once its landing
    /// ended.
    pub(super) fn release(&self, dest: usize, key: u32) {
        self.sending.lock().unwrap().remove(&(dest, key));
    }
}

#[cfg(test)]
mod tests;
