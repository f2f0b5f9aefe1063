//! Fast empties: the front of the C side table (`ffi/feb/table.rs`) that
//! lets a word be emptied, filled and read without the table's lock while
//! nobody waits on it. It is what makes Qthreads' way to spawn and join
//! cheap: `qthread_fork` empties the return word, the task fills it, the
//! forker reads it (`readFF`), three operations that would otherwise each
//! lock a stripe and look the word up in a hash map, on three threads
//! (a cache miss apiece for the lock, the map's control bytes and its
//! entry).
//!
//! A fixed array of slots; a word's slot is chosen from its address
//! (neighbouring words in one page of slots: [`Slots::index`]). A slot
//! holds
//!
//! - [`FREE`]: every word that hashes here is in the default state (full,
//!   nobody waiting) unless the locked table says otherwise, which it can
//!   only do while the slot is [`TABLE`];
//! - a word's address `w` (8-aligned): `w` is empty and nobody waits on it;
//!   every other word of the slot is in the default state;
//! - `w | FILLING`: `w` is being filled (its value is being stored; the
//!   slot becomes `FREE` next, with a `Release` store);
//! - [`TABLE`]: the locked table owns the state of the slot's words.
//!
//! Invariant S: the state of a word is the slot's while the slot is not
//! `TABLE`, and the table's (an entry, or the default) while it is. Only
//! the holder of the lock of the slot's stripe turns a slot into `TABLE`
//! ([`Slots::claim`]) and back ([`Slots::release`]); lock-free operations
//! only move a slot `FREE -> w` ([`Slots::try_empty`]) and `w -> w |
//! FILLING -> FREE` ([`Slots::try_fill`]), and fall back to the locked
//! table when the slot is not as they need it. So every change of a
//! word's state is one compare-exchange on its slot or happens under its
//! stripe's lock with the slot `TABLE`, and the two never overlap.
//!
//! Orderings: a fill stores the value before its `Release` store of
//! `FREE`; a reader ([`Slots::read_full`]) loads the slot with `Acquire`,
//! the value, and the slot again after an `Acquire` fence (a seqlock
//! read), and trusts the value only if both loads said the word was full:
//! then the value is the one the word held when the first load was made,
//! or one a fill stored and finished publishing by the second. A claim
//! reads the slot with `Acquire` (so the table sees a fast fill's value)
//! and a release stores `FREE` with `Release` (so fast readers see what
//! the table wrote). `loom_tests.rs` checks the protocol.

use crate::loom::Backoff;
use crate::loom::sync::atomic::{AtomicUsize, Ordering, fence};

/// The slot holds no word (or, while claimed, see [`TABLE`]).
pub(crate) const FREE: usize = 0;
/// Low bit beside an address: its fill is storing the value.
pub(crate) const FILLING: usize = 1;
/// The locked table owns the slot's words.
pub(crate) const TABLE: usize = 2;

/// The slots, `1 << BITS` of them.
pub(crate) struct Slots<const BITS: u32> {
    slots: Box<[AtomicUsize]>,
}

impl<const BITS: u32> Slots<BITS> {
    /// All slots free. Zeroed memory, so the pages of a large table are
    /// committed only as words hash into them.
    #[cfg(not(loom))]
    pub(crate) fn new() -> Slots<BITS> {
        use std::alloc::{Layout, alloc_zeroed, handle_alloc_error};
        let n = 1usize << BITS;
        let layout = Layout::array::<AtomicUsize>(n).expect("fast-empty slots fit memory");
        // SAFETY: the layout has a non-zero size (n >= 1 slots of 8 bytes).
        let p = unsafe { alloc_zeroed(layout) }.cast::<AtomicUsize>();
        if p.is_null() {
            handle_alloc_error(layout);
        }
        // SAFETY: `p` is a fresh allocation of `layout`, the layout of n
        // AtomicUsize (as a Box<[AtomicUsize]> of n frees it), all zero
        // bits: a valid AtomicUsize holding FREE in each.
        let slots = unsafe { Box::from_raw(std::ptr::slice_from_raw_parts_mut(p, n)) };
        Slots { slots }
    }

    /// All slots free (loom's atomics are made one by one).
    #[cfg(loom)]
    pub(crate) fn new() -> Slots<BITS> {
        Slots {
            slots: (0..1usize << BITS)
                .map(|_| AtomicUsize::new(FREE))
                .collect(),
        }
    }

    /// The slot index of `key` (a word's address, or any key of the
    /// locked table: keys that share a slot share a stripe).
    ///
    /// Neighbouring words get slots in the same 4 KiB page of slots: a
    /// task that forks into an array of return words and reads them in
    /// order touches each slot line eight times per 512 forks, where a
    /// scattering hash missed the cache at every empty, fill and read (a
    /// third of a fork's cost in `examples/c/bench_capi.c`). Within the
    /// page, word `i` (of 512) takes slot `8 * (i % 64) + i / 64`, so the
    /// next eight words are in eight different lines: a thief that fills
    /// words just behind the forker's empties does not share their line
    /// (with plain neighbouring slots it did, and forks from Qthreads'
    /// main, whose words the other worker fills a few behind, were slower
    /// than with the scattering hash). The address bits above the table's
    /// reach are folded in, so words a power of two apart (the same
    /// field of large records) do not all share a slot.
    #[inline]
    pub(crate) fn index(key: usize) -> usize {
        let word = key as u64 >> 3;
        let folded = word ^ (word >> BITS) ^ (word >> (2 * BITS));
        let mask = (1u64 << BITS) - 1;
        if BITS < 9 {
            // A table smaller than a page (the tests'): neighbours.
            return (folded & mask) as usize;
        }
        let low = folded & 511;
        let spread = ((low & 63) << 3) | (low >> 6);
        (((folded & !511) | spread) & mask) as usize
    }

    fn slot(&self, key: usize) -> &AtomicUsize {
        &self.slots[Self::index(key)]
    }

    /// Empties the full, unwaited word at `w` (8-aligned) if its slot is
    /// free: `true` if done. `false`: nothing changed; the caller empties
    /// it through the locked table.
    #[inline]
    pub(crate) fn try_empty(&self, w: usize) -> bool {
        debug_assert!(w % 8 == 0 && w != 0);
        let s = self.slot(w);
        // Relaxed load first: a slot that is taken is not written (and its
        // cache line not taken from its owner).
        // AcqRel: the slot's history is one modification order; nothing
        // else is published by an empty.
        s.load(Ordering::Relaxed) == FREE
            && s.compare_exchange(FREE, w, Ordering::AcqRel, Ordering::Relaxed)
                .is_ok()
    }

    /// Fills the word at `w` if the slot says it is empty and unwaited:
    /// `store` writes the value, then the word is full. `true` if done;
    /// `false`: nothing happened (`store` was not called); the caller
    /// fills it through the locked table.
    #[inline]
    pub(crate) fn try_fill(&self, w: usize, store: impl FnOnce()) -> bool {
        let s = self.slot(w);
        // Acquire: pairs with nothing in particular (the value is ours to
        // write); the store below is the publication.
        if s.compare_exchange(w, w | FILLING, Ordering::Acquire, Ordering::Relaxed)
            .is_err()
        {
            return false;
        }
        store();
        // Release: the value is visible to whoever sees the word full.
        s.store(FREE, Ordering::Release);
        true
    }

    /// The value of the word at `w` if the slot says it is full: `read`
    /// loads it (relaxed) between two reads of the slot. `None`: the word
    /// is empty, being filled, or in the locked table's hands; ask there.
    #[inline]
    pub(crate) fn read_full(&self, w: usize, read: impl FnOnce() -> u64) -> Option<u64> {
        let s = self.slot(w);
        let full = |v: usize| v != w && v != w | FILLING && v != TABLE;
        // Acquire: sees the value of the fill (or table release) that
        // made this slot value.
        if !full(s.load(Ordering::Acquire)) {
            return None;
        }
        let v = read();
        // The value's load stays before the second load of the slot.
        fence(Ordering::Acquire);
        full(s.load(Ordering::Relaxed)).then_some(v)
    }

    /// Under the lock of the slot's stripe: makes the slot [`TABLE`]
    /// (waiting out a fill in progress) and returns the word it said was
    /// empty, if any, which the caller records as an empty entry. The
    /// slot's words are the table's until [`Slots::release`].
    pub(crate) fn claim(&self, key: usize) -> Option<usize> {
        let s = self.slot(key);
        let backoff = Backoff::new();
        loop {
            // Acquire: a fill's value (or an empty) before this is seen.
            let v = s.load(Ordering::Acquire);
            if v == TABLE {
                return None;
            }
            if v & FILLING != 0 {
                // A fill between its two steps: it stores FREE next,
                // without any lock, so waiting for it cannot deadlock.
                backoff.snooze();
                continue;
            }
            if s.compare_exchange(v, TABLE, Ordering::Acquire, Ordering::Relaxed)
                .is_ok()
            {
                return (v != FREE).then_some(v);
            }
        }
    }

    /// Under the lock of the slot's stripe, with the table holding no
    /// entry for any key of the slot: gives the slot back to the
    /// lock-free operations.
    pub(crate) fn release(&self, key: usize) {
        // Release: what the table stored (a value) is seen by fast readers
        // that find the slot free.
        self.slot(key).store(FREE, Ordering::Release);
    }

    /// Slots that hold an empty word now (for tests).
    #[cfg(test)]
    pub(crate) fn empties(&self) -> usize {
        self.slots
            .iter()
            .filter(|s| {
                let v = s.load(Ordering::Relaxed);
                v != FREE && v != TABLE
            })
            .count()
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn a_word_goes_empty_filled_and_read_without_the_table() {
        let slots = Slots::<4>::new();
        let w = 0x1000;
        assert_eq!(slots.read_full(w, || 3), Some(3), "free slot: full");
        assert!(slots.try_empty(w));
        assert_eq!(slots.read_full(w, || 3), None, "empty");
        assert!(!slots.try_empty(w), "already empty: the table decides");
        let mut stored = 0;
        assert!(slots.try_fill(w, || stored = 9));
        assert_eq!(stored, 9);
        assert_eq!(slots.read_full(w, || 9), Some(9));
        assert!(
            !slots.try_fill(w, || unreachable!()),
            "full: the table fills"
        );
    }

    #[test]
    fn neighbouring_words_share_a_page_of_slots_but_not_a_line() {
        type S = Slots<17>;
        let base = 0x7f00_0000_0000usize;
        for page in 0..4 {
            let first = base + page * 512 * 8;
            let slots: Vec<usize> = (0..512).map(|i| S::index(first + 8 * i)).collect();
            let mut sorted = slots.clone();
            sorted.sort_unstable();
            sorted.dedup();
            assert_eq!(sorted.len(), 512, "512 words, 512 slots");
            assert!(
                slots.iter().all(|&s| s / 512 == slots[0] / 512),
                "one page of slots"
            );
            assert!(
                slots.windows(2).all(|p| p[0] / 8 != p[1] / 8),
                "neighbouring words in different lines"
            );
        }
        // Words a table's reach apart do not share a slot.
        let reach = 8usize << 17;
        assert_ne!(S::index(base), S::index(base + reach));
        assert_ne!(S::index(base), S::index(base + 2 * reach));
    }

    #[test]
    fn a_claimed_slot_sends_every_word_of_it_to_the_table() {
        let slots = Slots::<4>::new();
        let w = 0x2000;
        // Another word of the same slot.
        let other = (1..)
            .map(|i| w + 8 * i)
            .find(|&o| Slots::<4>::index(o) == Slots::<4>::index(w))
            .unwrap();
        assert!(slots.try_empty(w));
        assert!(!slots.try_empty(other), "one empty word per slot");
        assert_eq!(slots.claim(other), Some(w), "the table takes w over, empty");
        assert_eq!(slots.read_full(w, || 1), None);
        assert_eq!(slots.read_full(other, || 1), None);
        assert!(!slots.try_fill(w, || unreachable!()));
        assert!(!slots.try_empty(other));
        assert_eq!(slots.claim(w), None, "claimed already");
        slots.release(w);
        assert_eq!(slots.read_full(other, || 4), Some(4));
        assert!(slots.try_empty(other));
        assert_eq!(slots.empties(), 1);
    }
}
