//! The symmetric heap's allocator: one bump allocator for all locales,
//! its state in the control page, each block's header in locale 0's
//! segment. A block covers the same offsets in every locale's segment.
//! Blocks are freed when every locale dropped its handle; memory returns
//! to the heap when the blocks above it are free too (a stack of
//! blocks). `README.md` beside this file states the rules.

use super::memory::LINE;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

/// Bytes before each block's data that hold its header (in locale 0's
/// segment; the same bytes of other segments stay unused).
pub(crate) const HEADER: usize = LINE;
/// Marks a live header, to catch a corrupt `last` early.
const MAGIC: u64 = 0x6361_6e74_7573_4850; // "cantusHP"

// Header words.
const H_OLD_TOP: usize = 0;
const H_PREV: usize = 1;
const H_LEN: usize = 2;
const H_REFS: usize = 3;
const H_MAGIC: usize = 4;

/// A granted block: offsets in every segment.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Block {
    /// Where the data starts (aligned as asked, at least to [`LINE`]).
    pub(crate) data: usize,
    /// Where its header is, in locale 0's segment.
    pub(crate) header: usize,
    /// Bytes from `data` that may hold old data and must be zeroed (the
    /// rest has never been handed out, so it is still zero).
    pub(crate) dirty: usize,
}

/// No room: the heap has `left` bytes for data above its top.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Full {
    pub(crate) left: usize,
}

/// The allocator's words (in the control page) and the header segment.
pub(crate) struct Heap<'a> {
    /// The lock: 0 free, 1 held.
    pub(crate) lock: &'a AtomicU32,
    /// The first free byte above every block.
    pub(crate) top: &'a AtomicU64,
    /// The topmost block's header offset plus one; 0 when none.
    pub(crate) last: &'a AtomicU64,
    /// The highest `top` ever: bytes above it were never handed out.
    pub(crate) high: &'a AtomicU64,
    /// Locale 0's segment, where headers live.
    pub(crate) meta: NonNull<u8>,
    /// Bytes of each segment.
    pub(crate) bytes: usize,
}

struct Locked<'a>(&'a AtomicU32);

impl Drop for Locked<'_> {
    fn drop(&mut self) {
        // Release: pairs with the Acquire of the next `lock`, so the next
        // holder sees this holder's writes to the allocator's words.
        self.0.store(0, Ordering::Release);
    }
}

impl Heap<'_> {
    fn lock(&self) -> Locked<'_> {
        let mut spins = 0u32;
        // Acquire: pairs with the Release in `Locked::drop`.
        while self
            .lock
            .compare_exchange_weak(0, 1, Ordering::Acquire, Ordering::Relaxed)
            .is_err()
        {
            spins += 1;
            if spins < 100 {
                std::hint::spin_loop();
            } else {
                // Held by a process that was descheduled: let it run.
                std::thread::yield_now();
            }
        }
        Locked(self.lock)
    }

    /// Word `i` of the header at `header`.
    fn word(&self, header: usize, i: usize) -> &AtomicU64 {
        assert!(
            header % LINE == 0 && header + HEADER <= self.bytes,
            "cantus: the symmetric heap's metadata is corrupt (a header at offset {header})"
        );
        // SAFETY: in bounds (checked) and 8-byte aligned (LINE-aligned
        // header in a page-aligned segment); the segment outlives `self`;
        // header words are accessed only atomically, by every process.
        unsafe { self.meta.add(header + 8 * i).cast::<AtomicU64>().as_ref() }
    }

    /// Grants `bytes` bytes aligned to `align` (a power of two up to a
    /// page), shared by `refs` handles.
    pub(crate) fn grant(&self, bytes: usize, align: usize, refs: u64) -> Result<Block, Full> {
        let _held = self.lock();
        let top = self.top.load(Ordering::Relaxed) as usize;
        let first = top + HEADER;
        let full = Full {
            left: self.bytes.saturating_sub(first),
        };
        let data = first.next_multiple_of(align.max(LINE));
        let end = data
            .checked_add(bytes)
            .map(|e| e.next_multiple_of(LINE))
            .filter(|&e| e <= self.bytes)
            .ok_or(full)?;
        let header = data - HEADER;
        self.word(header, H_OLD_TOP)
            .store(top as u64, Ordering::Relaxed);
        self.word(header, H_PREV)
            .store(self.last.load(Ordering::Relaxed), Ordering::Relaxed);
        self.word(header, H_LEN)
            .store(bytes as u64, Ordering::Relaxed);
        self.word(header, H_REFS).store(refs, Ordering::Relaxed);
        self.word(header, H_MAGIC).store(MAGIC, Ordering::Relaxed);
        self.top.store(end as u64, Ordering::Relaxed);
        self.last.store(header as u64 + 1, Ordering::Relaxed);
        let high = self.high.load(Ordering::Relaxed) as usize;
        self.high.store(high.max(end) as u64, Ordering::Relaxed);
        Ok(Block {
            data,
            header,
            dirty: high.saturating_sub(data).min(bytes),
        })
    }

    /// Drops one handle of the block whose header is at `header`; the
    /// last one frees it, and every free block on top of the stack
    /// returns to the heap.
    pub(crate) fn release(&self, header: usize) {
        let _held = self.lock();
        assert_eq!(
            self.word(header, H_MAGIC).load(Ordering::Relaxed),
            MAGIC,
            "cantus: the symmetric heap's metadata is corrupt (no block at offset {header})"
        );
        let refs = self.word(header, H_REFS).load(Ordering::Relaxed);
        assert!(refs > 0, "cantus: a symmetric block was freed twice");
        self.word(header, H_REFS).store(refs - 1, Ordering::Relaxed);
        loop {
            let last = self.last.load(Ordering::Relaxed) as usize;
            if last == 0 || self.word(last - 1, H_REFS).load(Ordering::Relaxed) > 0 {
                break;
            }
            let h = last - 1;
            self.word(h, H_MAGIC).store(0, Ordering::Relaxed);
            self.top.store(
                self.word(h, H_OLD_TOP).load(Ordering::Relaxed),
                Ordering::Relaxed,
            );
            self.last.store(
                self.word(h, H_PREV).load(Ordering::Relaxed),
                Ordering::Relaxed,
            );
        }
    }

    /// Bytes in use (the top of the stack).
    #[cfg(test)]
    pub(crate) fn used(&self) -> usize {
        let _held = self.lock();
        self.top.load(Ordering::Relaxed) as usize
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    struct Fake {
        words: [AtomicU64; 3],
        lock: AtomicU32,
        meta: Vec<AtomicU64>,
    }

    impl Fake {
        fn new(bytes: usize) -> Fake {
            Fake {
                words: Default::default(),
                lock: AtomicU32::new(0),
                meta: (0..bytes / 8).map(|_| AtomicU64::new(0)).collect(),
            }
        }
        fn heap(&self) -> Heap<'_> {
            Heap {
                lock: &self.lock,
                top: &self.words[0],
                last: &self.words[1],
                high: &self.words[2],
                meta: NonNull::new(self.meta.as_ptr() as *mut u8).unwrap(),
                bytes: self.meta.len() * 8,
            }
        }
    }

    #[test]
    fn blocks_are_aligned_and_stacked() {
        let f = Fake::new(64 << 10);
        let h = f.heap();
        let a = h.grant(10, 8, 1).unwrap();
        assert_eq!(a.data, HEADER);
        assert_eq!(a.dirty, 0, "fresh memory is zero");
        let b = h.grant(100, 4096, 1).unwrap();
        assert_eq!(b.data % 4096, 0);
        assert!(b.data >= a.data + 10 + HEADER);
        assert_eq!(h.used(), b.data + 128);
    }

    #[test]
    fn freeing_pops_only_from_the_top() {
        let f = Fake::new(64 << 10);
        let h = f.heap();
        let a = h.grant(1000, 8, 1).unwrap();
        let b = h.grant(1000, 8, 1).unwrap();
        let top = h.used();
        h.release(a.header);
        assert_eq!(h.used(), top, "a is under b: kept until b goes");
        h.release(b.header);
        assert_eq!(h.used(), 0, "both went back");
        let c = h.grant(500, 8, 1).unwrap();
        assert_eq!(c.data, a.data, "reuses the bottom");
        assert_eq!(c.dirty, 500, "reused bytes must be zeroed");
        let d = h.grant(10_000, 8, 1).unwrap();
        assert!(
            d.dirty < 10_000 && d.dirty > 0,
            "partly above the high mark"
        );
    }

    #[test]
    fn every_handle_must_go_before_a_block_is_freed() {
        let f = Fake::new(64 << 10);
        let h = f.heap();
        let a = h.grant(64, 8, 3).unwrap();
        h.release(a.header);
        h.release(a.header);
        assert!(h.used() > 0);
        h.release(a.header);
        assert_eq!(h.used(), 0);
    }

    #[test]
    fn a_full_heap_says_what_is_left() {
        let f = Fake::new(64 << 10);
        let h = f.heap();
        let a = h.grant(32 << 10, 8, 1).unwrap();
        let e = h.grant(32 << 10, 8, 1).unwrap_err();
        assert_eq!(e.left, (64 << 10) - (a.data + (32 << 10)) - HEADER);
        assert!(h.grant(e.left, 8, 1).is_ok(), "exactly what is left fits");
        assert_eq!(h.grant(usize::MAX, 8, 1).unwrap_err().left, 0);
    }

    #[test]
    #[should_panic(expected = "freed twice")]
    fn a_double_free_is_caught() {
        let f = Fake::new(64 << 10);
        let h = f.heap();
        let a = h.grant(64, 8, 1).unwrap();
        let _b = h.grant(64, 8, 1).unwrap();
        h.release(a.header);
        h.release(a.header);
    }

    #[test]
    fn threads_granting_and_freeing_agree() {
        let f = Fake::new(1 << 20);
        std::thread::scope(|s| {
            for _ in 0..4 {
                s.spawn(|| {
                    let h = f.heap();
                    for i in 0..2000 {
                        let b = h.grant(64 + i % 300, 8, 1).unwrap();
                        h.release(b.header);
                    }
                });
            }
        });
        assert_eq!(f.heap().used(), 0);
    }
}
