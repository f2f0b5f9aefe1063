//! Reply slots: where a remote call's reply waits for its caller.
//!
//! A caller takes a slot before it sends a request; the request carries
//! the slot's *token* (its index and the generation it has for this call),
//! and the reply, which repeats the token, is written into the slot by the
//! poll that takes it. No table is locked and nothing is allocated per
//! call: slots live in chunks that are never freed while the engine lives,
//! are reused through a lock-free free list, and keep their reply buffer
//! from one call to the next. A token is never used as a pointer: its
//! index is checked against the slots that exist and its generation
//! against the slot's, so a stale or forged one is detected and reported.
//!
//! The protocol (states, who moves between them, orderings) is in
//! `README.md` beside this file, "Reply slots"; `loom` checks it
//! (`loom_tests` below).

use super::engine::Body;
use super::wire::Status;
use crate::comm::transport::Lent;
use crate::loom::UnsafeCell;
use crate::loom::sync::Mutex;
use crate::loom::sync::atomic::{AtomicPtr, AtomicU32, AtomicU64, Ordering};
use crate::sched::block::{Purpose, WaitPurpose};
use crate::sync::SyncVar;

/// Slots in the first chunk; chunk `k` has `FIRST << k`.
#[cfg(not(loom))]
const FIRST: usize = 64;
#[cfg(loom)]
const FIRST: usize = 1;

/// Chunks at most: `FIRST * (2^CHUNKS - 1)` slots, which keeps every
/// index below 2^32.
const CHUNKS: usize = 26;

/// A slot's buffer larger than this is freed when the slot is, rather than
/// kept for the next call.
const KEEP_AT_MOST: usize = 64 << 10;

// The phases of a slot (the low 8 bits of its state word; the generation
// is the rest). See README.md, "Reply slots".
/// On the free list.
const FREE: u64 = 0;
/// Taken by a caller; no reply yet; the caller is not blocked.
const WAITING: u64 = 1;
/// As `WAITING`, and the caller is blocked on the slot's `wake`.
const BLOCKED: u64 = 2;
/// The caller dropped its handle before the reply came.
const ABANDONED: u64 = 3;
/// A poll is writing the reply.
const FILLING: u64 = 4;
/// The reply is there for the caller to take.
const FULL: u64 = 5;

const PHASE_BITS: u32 = 8;

fn word(generation: u32, phase: u64) -> u64 {
    ((generation as u64) << PHASE_BITS) | phase
}

fn phase(word: u64) -> u64 {
    word & ((1 << PHASE_BITS) - 1)
}

fn generation(word: u64) -> u32 {
    (word >> PHASE_BITS) as u32
}

/// A token: the slot's generation (never 0, so no token is 0) and index.
fn token(generation: u32, index: u32) -> u64 {
    ((generation as u64) << 32) | index as u64
}

fn split(token: u64) -> (u32, u32) {
    ((token >> 32) as u32, token as u32)
}

thread_local! {
    /// The reply token whose caller is polling on this thread for it
    /// (`polling_for`; 0: none, no token is 0).
    static POLLING_FOR: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
}

/// Runs `poll` on behalf of the caller waiting for reply `token`, which
/// takes the reply as soon as the poll returns: a reply the poll delivers
/// to it may stay lent.
pub(crate) fn polling_for<R>(token: u64, poll: impl FnOnce() -> R) -> R {
    // The outer caller's token is put back after (a poll may run a task
    // that waits for a reply of its own).
    super::with_local(&POLLING_FOR, token, poll)
}

/// A reply's payload in a frame the transport lent, from the offset on.
type LentPayload = Option<(Lent, usize)>;

/// One reply slot.
struct Slot {
    /// Generation (bits 8..40) and phase (bits 0..8).
    state: AtomicU64,
    /// The next free slot's index + 1 (0: none), while this one is free.
    next_free: AtomicU32,
    /// The reply: written by the poll that moved the slot to `FILLING`,
    /// read by the caller once it saw `FULL` (Acquire). Its payload is the
    /// buffer, or the lent frame from the offset on when one is there.
    reply: UnsafeCell<(Status, Vec<u8>, LentPayload)>,
    /// Where a `BLOCKED` caller waits: the poll that fills the slot writes
    /// it (after `FULL`), the caller reads it (and so empties it again).
    wake: SyncVar<()>,
}

// SAFETY: `reply` is accessed by one thread at a time, as the state word's
// phases hand it on (README.md, "Reply slots"): the filling poll between
// its claiming CAS and its Release store of FULL (or its free), the caller
// after its Acquire load of FULL and before it frees the slot.
unsafe impl Sync for Slot {}

impl Slot {
    fn new() -> Slot {
        Slot {
            state: AtomicU64::new(word(0, FREE)),
            next_free: AtomicU32::new(0),
            reply: UnsafeCell::new((Status::Done, Vec::new(), None)),
            wake: SyncVar::new(),
        }
    }
}

/// What a reply delivery found.
#[must_use]
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Delivered {
    /// Written into its caller's slot.
    Filled,
    /// Its caller no longer waits (it dropped its handle): the reply was
    /// dropped and the slot freed.
    Discarded,
    /// The token names no call that waits for a reply (never issued,
    /// already answered, or forged): nothing was touched.
    Stale,
}

/// The reply slots of one engine.
pub(crate) struct ReplySlots {
    /// Chunk `k`: `FIRST << k` slots, allocated when first needed, freed
    /// only when this is dropped.
    chunks: [AtomicPtr<Slot>; CHUNKS],
    /// How many slots exist (every index below it has its chunk).
    created: AtomicU32,
    /// The free list: a Treiber stack, the head's index + 1 in the low 32
    /// bits (0: empty) and a tag in the high 32 bits that every change
    /// bumps, so a pop that read a stale `next_free` fails its CAS (ABA).
    free: AtomicU64,
    /// Held to add a chunk (only when the free list is empty).
    grow: Mutex<()>,
}

// SAFETY: the chunks are only read through shared references to `Slot`s,
// which are `Sync`; the raw pointers are owned by this value.
unsafe impl Send for ReplySlots {}
// SAFETY: as above.
unsafe impl Sync for ReplySlots {}

impl ReplySlots {
    pub(crate) fn new() -> ReplySlots {
        ReplySlots {
            chunks: std::array::from_fn(|_| AtomicPtr::new(std::ptr::null_mut())),
            created: AtomicU32::new(0),
            free: AtomicU64::new(0),
            grow: Mutex::new(()),
        }
    }

    /// The chunk and the offset in it of slot `index`.
    fn place(index: u32) -> (usize, usize) {
        let i = index as usize + FIRST;
        let k = (usize::BITS - 1 - i.leading_zeros()) as usize - FIRST.trailing_zeros() as usize;
        (k, i - (FIRST << k))
    }

    /// The slot with this index, if it exists.
    fn slot(&self, index: u32) -> Option<&Slot> {
        // Acquire: pairs with the Release store in `add_chunk`, after the
        // chunk's pointer was published.
        if index >= self.created.load(Ordering::Acquire) {
            return None;
        }
        let (k, at) = Self::place(index);
        // Acquire: pairs with the Release store of the pointer in
        // `add_chunk` (the slots it points to were initialized before).
        let chunk = self.chunks[k].load(Ordering::Acquire);
        debug_assert!(!chunk.is_null());
        // SAFETY: every index below `created` lies in a chunk that was
        // allocated with `FIRST << k` slots (at < FIRST << k by `place`)
        // and is freed only when `self` is dropped.
        Some(unsafe { &*chunk.add(at) })
    }

    /// Takes a free slot for a call and returns its token (never 0).
    pub(crate) fn issue(&self) -> u64 {
        let index = match self.pop() {
            Some(i) => i,
            None => self.add_chunk(),
        };
        let slot = self.slot(index).expect("a slot just taken exists");
        let old = slot.state.load(Ordering::Relaxed);
        debug_assert_eq!(phase(old), FREE);
        let generation = match generation(old).wrapping_add(1) {
            0 => 1,
            g => g,
        };
        // Relaxed: the slot is this caller's alone until the token it
        // returns leaves in a request; sending the request (the transport's
        // Release publication of the frame) orders this store before the
        // reply's poll reads it.
        slot.state
            .store(word(generation, WAITING), Ordering::Relaxed);
        token(generation, index)
    }

    /// Pops the free list.
    fn pop(&self) -> Option<u32> {
        // Acquire: pairs with the Release CAS in `push`, so the slot's
        // `next_free` and everything its last owner did are visible.
        let mut head = self.free.load(Ordering::Acquire);
        loop {
            let top = head as u32;
            if top == 0 {
                return None;
            }
            let slot = self.slot(top - 1).expect("a free slot exists");
            let next = slot.next_free.load(Ordering::Relaxed);
            let new = ((head >> 32).wrapping_add(1) << 32) | next as u64;
            // Acquire on success: as the load above; the tag makes a
            // `next` read from a slot that was popped and pushed again in
            // between fail here.
            match self
                .free
                .compare_exchange_weak(head, new, Ordering::Acquire, Ordering::Acquire)
            {
                Ok(_) => return Some(top - 1),
                Err(h) => head = h,
            }
        }
    }

    /// Pushes slot `index` (in phase FREE) on the free list.
    fn push(&self, index: u32) {
        let slot = self.slot(index).expect("a slot being freed exists");
        let mut head = self.free.load(Ordering::Relaxed);
        loop {
            slot.next_free.store(head as u32, Ordering::Relaxed);
            let new = ((head >> 32).wrapping_add(1) << 32) | (index as u64 + 1);
            // Release: pairs with the Acquire in `pop`: the next owner
            // sees `next_free` and this owner's last use of the slot.
            match self
                .free
                .compare_exchange_weak(head, new, Ordering::Release, Ordering::Relaxed)
            {
                Ok(_) => return,
                Err(h) => head = h,
            }
        }
    }

    /// Adds a chunk of slots, keeps its first for the caller and frees the
    /// rest (or takes a slot another thread freed meanwhile).
    fn add_chunk(&self) -> u32 {
        let _grow = self.grow.lock().unwrap();
        if let Some(i) = self.pop() {
            return i;
        }
        let first = self.created.load(Ordering::Relaxed);
        let (k, at) = Self::place(first);
        debug_assert_eq!(at, 0);
        assert!(
            k < CHUNKS,
            "cantus: more than {} remote calls wait for their replies at once",
            FIRST * ((1 << CHUNKS) - 1)
        );
        let len = FIRST << k;
        let chunk: Box<[Slot]> = (0..len).map(|_| Slot::new()).collect();
        // Release: pairs with the Acquire load in `slot` (the slots are
        // initialized before the pointer is seen).
        self.chunks[k].store(Box::into_raw(chunk).cast::<Slot>(), Ordering::Release);
        // Release: pairs with the Acquire load in `slot`.
        self.created.store(first + len as u32, Ordering::Release);
        for i in (first + 1..first + len as u32).rev() {
            self.push(i);
        }
        first
    }

    /// The slot of a token this engine issued, and the token's generation.
    fn issued(&self, token: u64) -> (&Slot, u32) {
        let (generation, index) = split(token);
        let slot = self.slot(index).expect("a token this engine issued");
        (slot, generation)
    }

    /// Writes the reply to `token` into its slot (a poll, for a reply
    /// that arrived). A token that no call waits on is `Stale`, and
    /// nothing is touched.
    pub(crate) fn deliver(&self, token: u64, status: Status, body: Body<'_>) -> Delivered {
        let (generation, index) = split(token);
        let Some(slot) = self.slot(index) else {
            return Delivered::Stale;
        };
        // Claim the slot: WAITING, BLOCKED or ABANDONED of this
        // generation -> FILLING. Acquire: pairs with the caller's Release
        // CAS to BLOCKED or ABANDONED (and so with everything before it).
        let mut old = slot.state.load(Ordering::Relaxed);
        let was = loop {
            let p = phase(old);
            if self::generation(old) != generation || !matches!(p, WAITING | BLOCKED | ABANDONED) {
                return Delivered::Stale;
            }
            match slot.state.compare_exchange_weak(
                old,
                word(generation, FILLING),
                Ordering::Acquire,
                Ordering::Relaxed,
            ) {
                Ok(_) => break p,
                Err(now) => old = now,
            }
        };
        if was == ABANDONED {
            drop(body);
            self.free_slot(index, slot, generation);
            return Delivered::Discarded;
        }
        // SAFETY: FILLING gives this poll the reply cell: the caller
        // touches it only after it saw FULL, and no other poll can claim a
        // slot that is not WAITING/BLOCKED/ABANDONED.
        slot.reply.with_mut(|r| unsafe {
            (*r).0 = status;
            match body {
                Body::Owned(v) => (*r).1 = v,
                // Kept, to be read in place, only for a caller blocked on
                // this reply, or polling for it (this very poll is its):
                // it takes it as soon as it runs, or the poll returns,
                // whatever else arrives. A caller not yet waiting (a handle
                // kept for later) gets a copy, and the block goes back now:
                // kept, it would slow down the replies the caller waits for
                // first (`comm/shm/README.md`, "Rendezvous", rule L).
                Body::Lent(l, start) if was == BLOCKED || POLLING_FOR.get() == token => {
                    (*r).2 = Some((l, start))
                }
                body => {
                    (*r).1.clear();
                    crate::copy::extend(&mut (*r).1, body.as_slice());
                }
            }
        });
        // Release: pairs with the caller's Acquire load (`is_full`,
        // `wait`, `take`): the reply written above is visible to it.
        slot.state.store(word(generation, FULL), Ordering::Release);
        if was == BLOCKED {
            // The caller waits on `wake` (it moved the slot to BLOCKED
            // before it blocked); the SyncVar's hand-off orders the FULL
            // store above before its wake-up.
            slot.wake.write_ef(());
        }
        Delivered::Filled
    }

    /// Whether the reply to `token` is there.
    pub(crate) fn is_full(&self, token: u64) -> bool {
        let (slot, generation) = self.issued(token);
        // Acquire: pairs with the Release store of FULL in `deliver`.
        slot.state.load(Ordering::Acquire) == word(generation, FULL)
    }

    /// Blocks the calling task (or thread) until the reply to `token` is
    /// there; while blocked, a deadlock report lists it as `what` says.
    pub(crate) fn wait(&self, token: u64, what: Option<Purpose>) {
        let (slot, generation) = self.issued(token);
        let mut backoff = 0u32;
        loop {
            // Release on success: pairs with the Acquire claim in
            // `deliver`. Acquire on failure: a FULL seen here makes the
            // reply visible (pairs with the Release store of FULL).
            match slot.state.compare_exchange(
                word(generation, WAITING),
                word(generation, BLOCKED),
                Ordering::Release,
                Ordering::Acquire,
            ) {
                Ok(_) => {
                    // The poll that fills the slot will see BLOCKED (its
                    // claim reads this CAS's write) and write `wake`.
                    let _named = what.map(|w| WaitPurpose::name(slot.wake.wait_addr(), w));
                    slot.wake.read_fe();
                    debug_assert!(self.is_full(token));
                    return;
                }
                Err(now) if phase(now) == FULL => return,
                Err(now) => {
                    // FILLING: a poll is copying the reply in; it does not
                    // wait for anything, so this is short.
                    debug_assert_eq!(now, word(generation, FILLING));
                    backoff += 1;
                    if backoff > 64 {
                        crate::loom::thread::yield_now();
                    } else {
                        std::hint::spin_loop();
                    }
                    #[cfg(loom)]
                    crate::loom::thread::yield_now();
                }
            }
        }
    }

    /// Reads the reply to `token` (which must be there: after `is_full`
    /// or `wait`) with `f`, then frees the slot.
    pub(crate) fn take<R>(&self, token: u64, f: impl FnOnce(Status, &[u8]) -> R) -> R {
        let (generation, index) = split(token);
        let (slot, _) = self.issued(token);
        // Acquire: pairs with the Release store of FULL in `deliver`.
        assert_eq!(
            slot.state.load(Ordering::Acquire),
            word(generation, FULL),
            "a reply is taken only once it is there"
        );
        // SAFETY: FULL of this generation gives the reply cell to the
        // caller, the only holder of this token, until it frees the slot.
        // A lent reply is decoded in place: large `Bulk`s in it keep its
        // frame (`bulk.rs`), the rest goes back once read.
        let r = slot.reply.with_mut(|r| unsafe {
            match (*r).2.take() {
                Some((lent, start)) => {
                    let status = (*r).0;
                    super::bulk::decode_in_place(lent, start, |b| f(status, b))
                }
                None => f((*r).0, &(*r).1),
            }
        });
        self.free_slot(index, slot, generation);
        r
    }

    /// The caller gives up on `token` without its reply (its handle was
    /// dropped, or its request was never sent: `sent` false). Returns
    /// whether the slot was freed here, so that no reply is still counted
    /// as awaited for it; otherwise the poll that takes the reply frees
    /// it (and says `Discarded`).
    pub(crate) fn abandon(&self, token: u64) -> bool {
        let (generation, index) = split(token);
        let (slot, _) = self.issued(token);
        loop {
            // Release on success: pairs with the Acquire claim in
            // `deliver`. Acquire on failure: as in `wait`.
            match slot.state.compare_exchange(
                word(generation, WAITING),
                word(generation, ABANDONED),
                Ordering::Release,
                Ordering::Acquire,
            ) {
                Ok(_) => return false,
                Err(now) if phase(now) == FULL => {
                    self.free_slot(index, slot, generation);
                    return true;
                }
                Err(_) => {
                    // FILLING: as in `wait`.
                    std::hint::spin_loop();
                    #[cfg(loom)]
                    crate::loom::thread::yield_now();
                }
            }
        }
    }

    /// Frees the slot of a call whose request was never sent (no reply
    /// can come for it).
    pub(crate) fn cancel(&self, token: u64) {
        let (generation, index) = split(token);
        let (slot, _) = self.issued(token);
        debug_assert_eq!(
            slot.state.load(Ordering::Relaxed),
            word(generation, WAITING)
        );
        self.free_slot(index, slot, generation);
    }

    /// Frees a slot that holds no awaited call (its reply taken, or
    /// discarded): a large buffer goes, a small one stays for the next.
    fn free_slot(&self, index: u32, slot: &Slot, generation: u32) {
        // SAFETY: the caller of `free_slot` holds the slot (FULL or
        // FILLING of its generation) and gives it up here.
        slot.reply.with_mut(|r| unsafe {
            // A lent reply goes back to its transport here.
            (*r).2 = None;
            if (*r).1.capacity() > KEEP_AT_MOST {
                (*r).1 = Vec::new();
            }
        });
        // Relaxed: the push's Release CAS publishes it to the next owner.
        slot.state.store(word(generation, FREE), Ordering::Relaxed);
        self.push(index);
    }
}

impl Drop for ReplySlots {
    fn drop(&mut self) {
        for (k, c) in self.chunks.iter().enumerate() {
            let p = c.load(Ordering::Relaxed);
            if !p.is_null() {
                let len = FIRST << k;
                // SAFETY: `p` came from `Box::into_raw` of a boxed slice of
                // `len` slots in `add_chunk`, and is dropped once, here.
                drop(unsafe { Box::from_raw(std::ptr::slice_from_raw_parts_mut(p, len)) });
            }
        }
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn places_cover_the_chunks_in_order() {
        let mut expect = (0usize, 0usize);
        for i in 0..(FIRST * 15) as u32 {
            assert_eq!(ReplySlots::place(i), expect, "index {i}");
            expect.1 += 1;
            if expect.1 == FIRST << expect.0 {
                expect = (expect.0 + 1, 0);
            }
        }
    }

    #[test]
    fn a_reply_reaches_its_caller_and_the_slot_is_reused() {
        let s = ReplySlots::new();
        let t = s.issue();
        assert_ne!(t, 0);
        assert!(!s.is_full(t));
        assert_eq!(
            s.deliver(t, Status::Done, Body::Borrowed(b"abc")),
            Delivered::Filled
        );
        assert!(s.is_full(t));
        s.wait(t, None);
        assert_eq!(
            s.take(t, |st, b| (st, b.to_vec())),
            (Status::Done, b"abc".to_vec())
        );
        // The same slot, a new generation: the old token is stale now.
        let t2 = s.issue();
        assert_eq!(t2 as u32, t as u32);
        assert_ne!(t2, t);
        assert_eq!(
            s.deliver(t, Status::Done, Body::Borrowed(b"x")),
            Delivered::Stale
        );
        assert!(!s.is_full(t2));
    }

    #[test]
    fn a_lent_reply_stays_lent_only_for_a_caller_polling_for_it_or_blocked() {
        let s = ReplySlots::new();
        let frame = || Lent::recycled(vec![7u8; 64], 0..64, drop);
        // Delivered by the caller's own poll: kept where it was lent.
        let mine = s.issue();
        let other = s.issue();
        polling_for(mine, || {
            assert_eq!(
                s.deliver(mine, Status::Done, Body::Lent(frame(), 8)),
                Delivered::Filled
            );
            // A reply for another call, in the same poll: copied.
            assert_eq!(
                s.deliver(other, Status::Done, Body::Lent(frame(), 8)),
                Delivered::Filled
            );
        });
        let kept = |t| {
            s.slot(split(t).1).unwrap().reply.with(|r| {
                // SAFETY: the slot is FULL and this test is its caller
                // (the only holder of the token): no poll touches it.
                unsafe { (*r).2.is_some() }
            })
        };
        assert!(kept(mine), "the reply its caller polls for stays lent");
        assert!(!kept(other), "a reply nobody waits for yet is copied");
        for t in [mine, other] {
            assert_eq!(s.take(t, |_, b| b.to_vec()), vec![7u8; 56]);
        }
        // Outside the poll, the token is forgotten.
        let later = s.issue();
        assert_eq!(
            s.deliver(later, Status::Done, Body::Lent(frame(), 0)),
            Delivered::Filled
        );
        assert!(!kept(later));
        s.take(later, |_, _| ());
    }

    #[test]
    fn stale_forged_and_repeated_tokens_touch_nothing() {
        let s = ReplySlots::new();
        let t = s.issue();
        // An index no slot has, a generation never issued, a token 0.
        for bad in [token(1, 1 << 30), t + (1 << 32), 0, t | 0xff] {
            if bad != t {
                assert_eq!(
                    s.deliver(bad, Status::Done, Body::Borrowed(b"")),
                    Delivered::Stale
                );
            }
        }
        assert!(!s.is_full(t));
        assert_eq!(
            s.deliver(t, Status::Panicked, Body::Owned(b"p".to_vec())),
            Delivered::Filled
        );
        // A second reply to the same call.
        assert_eq!(
            s.deliver(t, Status::Done, Body::Borrowed(b"")),
            Delivered::Stale
        );
        assert_eq!(
            s.take(t, |st, b| (st, b.to_vec())),
            (Status::Panicked, b"p".to_vec())
        );
    }

    #[test]
    fn an_abandoned_call_frees_its_slot_when_the_reply_comes() {
        let s = ReplySlots::new();
        let t = s.issue();
        assert!(!s.abandon(t));
        assert_eq!(
            s.deliver(t, Status::Done, Body::Borrowed(b"late")),
            Delivered::Discarded
        );
        let t2 = s.issue();
        assert_eq!(t2 as u32, t as u32, "the slot was freed and is reused");
        assert_eq!(
            s.deliver(t2, Status::Done, Body::Borrowed(b"")),
            Delivered::Filled
        );
        assert!(s.abandon(t2), "a full slot is freed by the caller");
        assert_eq!(
            s.deliver(t2, Status::Done, Body::Borrowed(b"")),
            Delivered::Stale
        );
    }

    #[test]
    fn many_calls_in_flight_grow_the_slots() {
        let s = ReplySlots::new();
        let tokens: Vec<u64> = (0..1000).map(|_| s.issue()).collect();
        let mut indices: Vec<u32> = tokens.iter().map(|&t| t as u32).collect();
        indices.sort_unstable();
        indices.dedup();
        assert_eq!(indices.len(), 1000, "every call has its own slot");
        for (i, &t) in tokens.iter().enumerate().rev() {
            let b = (i as u64).to_le_bytes();
            assert_eq!(
                s.deliver(t, Status::Done, Body::Borrowed(&b)),
                Delivered::Filled
            );
        }
        for (i, &t) in tokens.iter().enumerate() {
            assert_eq!(s.take(t, |_, b| b.to_vec()), (i as u64).to_le_bytes());
        }
    }

    #[test]
    fn a_blocked_caller_is_woken_by_the_reply() {
        let s = std::sync::Arc::new(ReplySlots::new());
        let t = s.issue();
        let filler = {
            let s = s.clone();
            std::thread::spawn(move || {
                std::thread::sleep(std::time::Duration::from_millis(20));
                assert_eq!(
                    s.deliver(t, Status::Done, Body::Borrowed(b"w")),
                    Delivered::Filled
                );
            })
        };
        s.wait(t, None);
        assert_eq!(s.take(t, |_, b| b.to_vec()), b"w");
        filler.join().unwrap();
    }
}

#[cfg(all(test, loom))]
mod loom_tests {
    use super::*;
    use crate::loom::sync::Arc;
    use crate::loom::thread;

    fn model(f: impl Fn() + Sync + Send + 'static) {
        crate::loom::model(Some(3), f)
    }

    /// A caller that polls and then blocks, a poll that fills the slot:
    /// the caller always gets the reply (no lost wake-up: loom reports a
    /// deadlock if it is never woken), and the slot is free afterwards.
    #[test]
    fn loom_reply_reaches_a_polling_or_blocked_caller() {
        model(|| {
            let s = Arc::new(ReplySlots::new());
            let t = s.issue();
            let p = s.clone();
            let poll = thread::spawn(move || {
                assert_eq!(
                    p.deliver(t, Status::Done, Body::Borrowed(&[7])),
                    Delivered::Filled
                );
            });
            if !s.is_full(t) {
                s.wait(t, None);
            }
            assert_eq!(s.take(t, |st, b| (st, b.to_vec())), (Status::Done, vec![7]));
            poll.join().unwrap();
            // Freed: the next call gets the same slot, a new generation.
            let t2 = s.issue();
            assert_eq!(t2 as u32, t as u32);
            assert_ne!(t2, t);
        });
    }

    /// A caller that drops its handle while the reply arrives: exactly one
    /// side frees the slot, whatever the order.
    #[test]
    fn loom_abandoned_call_is_freed_once() {
        model(|| {
            let s = Arc::new(ReplySlots::new());
            let t = s.issue();
            let p = s.clone();
            let poll = thread::spawn(move || p.deliver(t, Status::Done, Body::Borrowed(&[1])));
            let freed_here = s.abandon(t);
            let d = poll.join().unwrap();
            assert_eq!(freed_here, d == Delivered::Filled);
            assert_eq!(!freed_here, d == Delivered::Discarded);
            // Exactly one free: one slot on the list, then a new chunk.
            let a = s.issue();
            let b = s.issue();
            assert_eq!(a as u32, t as u32);
            assert_ne!(b as u32, t as u32);
        });
    }

    /// Two callers take slots from the free list, get their replies and
    /// free them at once, twice each: the free list never hands one slot
    /// to both (each reads its own reply), and a reply to a token already
    /// answered is stale. (The blocking side is the first model's; here
    /// each caller's own poll fills its slot, which keeps the model small
    /// enough to explore.)
    #[test]
    fn loom_two_callers_share_the_free_list() {
        model(|| {
            let s = Arc::new(ReplySlots::new());
            // One chunk of one slot under loom: the second caller must
            // grow, or wait for the first to free its slot.
            let callers: Vec<_> = (0..2u8)
                .map(|c| {
                    let s = s.clone();
                    thread::spawn(move || {
                        let t = s.issue();
                        assert_eq!(
                            s.deliver(t, Status::Done, Body::Borrowed(&[c])),
                            Delivered::Filled
                        );
                        assert_eq!(s.take(t, |_, b| b.to_vec()), vec![c]);
                        assert_eq!(
                            s.deliver(t, Status::Done, Body::Borrowed(&[9])),
                            Delivered::Stale
                        );
                    })
                })
                .collect();
            for c in callers {
                c.join().unwrap();
            }
        });
    }
}
