//! The side table: full/empty state and wait queues for caller-owned
//! 64-bit words, whose 64 bits are all data (Qthreads `aligned_t`), wait
//! queues for Qthreads `syncvar_t` (whose state is in the word), and
//! value-less states keyed by address (`KeySite`: per-address locks, sinc
//! and barrier phases).
//!
//! Two parts. In front, the fast empties (`crate::sync::fast_empty`): a
//! slot per address (`Slots::index`) that can hold one empty, unwaited
//! word, so the common life of a fork's return word (emptied at the fork,
//! filled by the task, read by the forker) takes three compare-exchanges
//! or loads and no lock. Behind, `STRIPES` stripes, each a hash map from slot to
//! the entries of the keys hashing there, behind a lock bit
//! (`crate::sync::lock::BitLock`, the engine's one spin lock). Every key
//! of a slot is in the same stripe; an operation that needs the table
//! claims the slot under the stripe's lock (taking over an empty word the
//! slot held) and releases it when the slot's last entry goes. A word in
//! the default state (full, nobody waiting) has no entry, so the maps
//! hold only words that are empty or waited on (as in Qthreads). See
//! `../README.md` for the protocol.

use crate::sync::fast_empty::Slots;
use crate::sync::full_empty::{Place, Site};
use crate::sync::lock::BitLock;
use crate::sync::wait_queue::Queue;
use crossbeam_utils::CachePadded;
use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};
use std::sync::LazyLock;
use std::sync::atomic::{AtomicU64, Ordering};

/// Number of stripes (a power of two).
pub(crate) const STRIPES: usize = 128;
const STRIPE_BITS: u32 = STRIPES.trailing_zeros();
/// The fast empties: 2^17 slots (1 MiB, committed only where words
/// hash). Measured against 2^15 and 2^20 with a million return words
/// outstanding (`bench/c/qthread_tasks.c`): a larger table takes fewer
/// words to the locked table but misses the TLB on every operation, and
/// was slower.
const SLOT_BITS: u32 = 17;

static SLOTS: LazyLock<Slots<SLOT_BITS>> = LazyLock::new(Slots::new);

/// Per-address state of a word that is not in the default state.
struct Entry {
    /// The word's full/empty bit (unused, always true, for `syncvar_t`,
    /// whose state lives in the word).
    full: bool,
    queue: Queue<u64>,
}

impl Entry {
    const DEFAULT: Entry = Entry {
        full: true,
        queue: Queue::EMPTY,
    };

    /// A word the fast slots held empty, nobody waiting.
    const EMPTY: Entry = Entry {
        full: false,
        queue: Queue::EMPTY,
    };

    fn is_default(&self) -> bool {
        self.full && self.queue.is_empty()
    }
}

/// The slot index itself is the key (already a hash).
#[derive(Default)]
struct SlotHasher(u64);

impl Hasher for SlotHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0.rotate_left(8) ^ u64::from(b)).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        }
    }

    fn write_usize(&mut self, slot: usize) {
        self.0 = (slot as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    }
}

/// The entries of one slot's keys that are empty or waited on now: one
/// inline (the common case: no allocation when a word gets its first
/// waiter), more in a vector.
#[derive(Default)]
struct SlotKeys {
    first: Option<(usize, Entry)>,
    more: Vec<(usize, Entry)>,
}

impl SlotKeys {
    fn get_mut(&mut self, key: usize) -> Option<&mut Entry> {
        match &mut self.first {
            Some((k, e)) if *k == key => Some(e),
            _ => self
                .more
                .iter_mut()
                .find(|(k, _)| *k == key)
                .map(|(_, e)| e),
        }
    }

    fn insert(&mut self, key: usize, e: Entry) {
        if self.first.is_none() {
            self.first = Some((key, e));
        } else {
            self.more.push((key, e));
        }
    }

    fn remove(&mut self, key: usize) {
        if matches!(&self.first, Some((k, _)) if *k == key) {
            self.first = self.more.pop();
        } else if let Some(i) = self.more.iter().position(|(k, _)| *k == key) {
            self.more.swap_remove(i);
        }
    }

    fn is_empty(&self) -> bool {
        self.first.is_none()
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        usize::from(self.first.is_some()) + self.more.len()
    }
}

/// Each slot's keys that have entries.
type Map = HashMap<usize, SlotKeys, BuildHasherDefault<SlotHasher>>;

/// A stripe: its map behind a lock bit. Critical sections are a hash
/// lookup and a few stores, so contenders spin (with backoff).
type Stripe = BitLock<Map>;

static TABLE: [CachePadded<Stripe>; STRIPES] = [const {
    CachePadded::new(BitLock::new(
        HashMap::with_hasher(BuildHasherDefault::new()),
    ))
}; STRIPES];

/// The stripe of slot `slot`: a hash of it, so a slot's keys share one
/// and neighbouring slots (neighbouring words, `Slots::index`) spread
/// over all stripes.
fn stripe_of(slot: usize) -> &'static Stripe {
    const GOLDEN: u64 = 0x9E37_79B9_7F4A_7C15;
    &TABLE[((slot as u64).wrapping_mul(GOLDEN) >> (64 - STRIPE_BITS)) as usize]
}

/// Runs `f` on the entry of `key` (a default one if it has none) under
/// its stripe's lock, with its slot claimed for the table (an empty word
/// the slot held becomes an entry); afterwards drops an entry back in the
/// default state, stores one that left it, and gives the slot back once
/// it has no entry left.
fn with_entry<R>(key: usize, f: impl FnOnce(&mut Entry) -> R) -> R {
    let slot = Slots::<SLOT_BITS>::index(key);
    let slots = &*SLOTS;
    stripe_of(slot).with(|map| {
        let list = map.entry(slot).or_default();
        if let Some(w) = slots.claim(key) {
            list.insert(w, Entry::EMPTY);
        }
        let r = match list.get_mut(key) {
            Some(e) => {
                let r = f(e);
                if e.is_default() {
                    list.remove(key);
                }
                r
            }
            None => {
                let mut e = Entry::DEFAULT;
                let r = f(&mut e);
                if !e.is_default() {
                    list.insert(key, e);
                }
                r
            }
        };
        if list.is_empty() {
            map.remove(&slot);
            slots.release(key);
        }
        r
    })
}

/// Empties the word at `w` without waking anyone if that can be done
/// without the table (its slot is free): `true` if done.
#[inline]
pub(crate) fn try_fast_empty(w: &AtomicU64) -> bool {
    SLOTS.try_empty(w.as_ptr().addr())
}

/// Stores `v` (if any) in the word at `w` and fills it, if it is empty
/// with nobody waiting and its slot says so: `true` if done.
#[inline]
pub(crate) fn try_fast_fill(w: &AtomicU64, v: Option<u64>) -> bool {
    SLOTS.try_fill(w.as_ptr().addr(), || {
        if let Some(v) = v {
            // Relaxed: the slot's Release store publishes it.
            w.store(v, Ordering::Relaxed);
        }
    })
}

/// The value of the word at `w` if its slot says it is full, without
/// the table.
#[inline]
pub(crate) fn fast_read_full(w: &AtomicU64) -> Option<u64> {
    SLOTS.read_full(w.as_ptr().addr(), || w.load(Ordering::Relaxed))
}

/// Entries in the table now, empty words in the fast slots included (for
/// tests: it must drain back to zero).
#[cfg(test)]
pub(crate) fn entries() -> usize {
    TABLE
        .iter()
        .map(|s| s.with(|m| m.values().map(SlotKeys::len).sum::<usize>()))
        .sum::<usize>()
        + SLOTS.empties()
}

/// A caller-owned word whose 64 bits are data; state in the table.
pub(crate) struct WordSite<'a>(pub(crate) &'a AtomicU64);

struct WordPlace<'a> {
    word: &'a AtomicU64,
    entry: &'a mut Entry,
}

impl Place for WordPlace<'_> {
    type Value = u64;

    fn is_full(&self) -> bool {
        self.entry.full
    }
    fn set_full(&mut self, full: bool) {
        self.entry.full = full;
    }
    unsafe fn take(&mut self) -> u64 {
        // Relaxed: the stripe lock orders this with every other FEB access.
        self.word.load(Ordering::Relaxed)
    }
    fn put(&mut self, value: u64) {
        // Relaxed: as in `take`.
        self.word.store(value, Ordering::Relaxed)
    }
    fn queue(&mut self) -> &mut Queue<u64> {
        &mut self.entry.queue
    }
}

impl Site for WordSite<'_> {
    type Value = u64;

    fn locked<R>(&self, f: impl FnOnce(&mut dyn Place<Value = u64>) -> R) -> R {
        let word = self.0;
        with_entry(word.as_ptr() as usize, |entry| {
            f(&mut WordPlace { word, entry })
        })
    }

    fn addr(&self) -> usize {
        self.0.as_ptr() as usize
    }
}

/// A full/empty state with no value of its own, keyed by an address in a
/// key space of its own (so it never meets the word's FEB entry): the
/// per-address locks of `qthread_lock` and the phase of a sinc or a
/// barrier. Default (no entry): full, nobody waiting.
pub(crate) struct KeySite(usize);

impl KeySite {
    /// Keys are `addr << 2 | space`: word entries are keyed by 8-aligned
    /// addresses (low bits 00), so the spaces 01 and 10 never meet them
    /// or each other. User-space addresses are below 2^62.
    fn new(addr: usize, space: usize) -> KeySite {
        debug_assert!(addr >> 62 == 0, "address {addr:#x} out of user space");
        KeySite((addr << 2) | space)
    }

    /// The lock of `addr` (`qthread_lock`): full = unlocked.
    pub(crate) fn lock(addr: usize) -> KeySite {
        KeySite::new(addr, 1)
    }

    /// The phase of the sinc or barrier at `addr`: full = done / released.
    pub(crate) fn phase(addr: usize) -> KeySite {
        KeySite::new(addr, 2)
    }
}

struct KeyPlace<'a> {
    entry: &'a mut Entry,
}

impl Place for KeyPlace<'_> {
    type Value = u64;

    fn is_full(&self) -> bool {
        self.entry.full
    }
    fn set_full(&mut self, full: bool) {
        self.entry.full = full;
    }
    unsafe fn take(&mut self) -> u64 {
        0
    }
    fn put(&mut self, _value: u64) {}
    fn queue(&mut self) -> &mut Queue<u64> {
        &mut self.entry.queue
    }
}

impl Site for KeySite {
    type Value = u64;

    fn locked<R>(&self, f: impl FnOnce(&mut dyn Place<Value = u64>) -> R) -> R {
        with_entry(self.0, |entry| f(&mut KeyPlace { entry }))
    }

    fn addr(&self) -> usize {
        self.0 >> 2
    }
}

/// Qthreads `syncvar_t` layout (little-endian bit-field order): bit 0 a
/// lock bit (cantus never sets it), bits 1-3 the state (1: waiters, 2:
/// empty), bits 4-63 the 60-bit value.
pub(crate) mod syncvar {
    /// State bit: somebody waits.
    pub(crate) const WAITERS: u64 = 1 << 1;
    /// State bit: empty.
    pub(crate) const EMPTY: u64 = 1 << 2;
    /// Bits below the value.
    pub(crate) const SHIFT: u32 = 4;
    /// The largest value a `syncvar_t` holds.
    pub(crate) const MAX: u64 = (1 << 60) - 1;
}

/// A Qthreads `syncvar_t`: state in the word, waiters in the table.
pub(crate) struct SyncvarSite<'a>(pub(crate) &'a AtomicU64);

struct SyncvarPlace<'a> {
    word: &'a AtomicU64,
    bits: u64,
    entry: &'a mut Entry,
}

impl Place for SyncvarPlace<'_> {
    type Value = u64;

    fn is_full(&self) -> bool {
        self.bits & syncvar::EMPTY == 0
    }
    fn set_full(&mut self, full: bool) {
        if full {
            self.bits &= !syncvar::EMPTY;
        } else {
            self.bits |= syncvar::EMPTY;
        }
    }
    unsafe fn take(&mut self) -> u64 {
        self.bits >> syncvar::SHIFT
    }
    fn put(&mut self, value: u64) {
        self.bits =
            (self.bits & ((1 << syncvar::SHIFT) - 1)) | ((value & syncvar::MAX) << syncvar::SHIFT);
    }
    fn queue(&mut self) -> &mut Queue<u64> {
        &mut self.entry.queue
    }
}

impl Site for SyncvarSite<'_> {
    type Value = u64;

    fn addr(&self) -> usize {
        self.0.as_ptr() as usize
    }

    fn locked<R>(&self, f: impl FnOnce(&mut dyn Place<Value = u64>) -> R) -> R {
        let word = self.0;
        with_entry(word.as_ptr() as usize, |entry| {
            // Acquire: a word initialised by plain stores before it was
            // shared is seen whole (the stripe lock orders later accesses).
            let before = word.load(Ordering::Acquire);
            let mut p = SyncvarPlace {
                word,
                bits: before & !1,
                entry,
            };
            let r = f(&mut p);
            let waiters = if p.entry.queue.is_empty() {
                0
            } else {
                syncvar::WAITERS
            };
            let after = (p.bits & !syncvar::WAITERS) | waiters;
            if after != before {
                // Release pairs with the Acquire of lock-free status readers.
                p.word.store(after, Ordering::Release);
            }
            r
        })
    }
}
