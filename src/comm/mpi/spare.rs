//! Spare receive buffers: the blocks of large messages (frames that
//! travel alone, over 64 KiB) kept once their receivers are done with
//! them, for the next large message to be received into.
//!
//! Why: a large message is received into a buffer of its own and lent
//! to whoever keeps it (`Lent`, README "Messages", 2). With glibc's
//! allocator, freeing a few such blocks together grows the heap's top
//! past its trim threshold (twice the adaptive mmap threshold, so 2 MiB
//! after a 1 MiB block), and the heap is given back to the system; the
//! next message then faults its block in page by page. Measured over MPI
//! (BENCHMARKS.md, "Large receives in recycled buffers"): with three or
//! four 1 MiB messages received at once, a third of the receiver's time
//! went to page faults and each message took 1.5-4x as long. A block
//! kept here is reused warm (the most recently freed first, the
//! likeliest still in cache), whatever the allocator does. Only while
//! other blocks are out, though ([`give_back`]): one freed alone does
//! not reach the trim threshold, and the allocator hands it out again to
//! whatever asks next.
//!
//! Bounded: at most [`SPARE_BLOCKS`] blocks and [`SPARE_BYTES`] bytes
//! are kept, process-wide (MPI runs once per process); a block beyond
//! either is freed. `clear` frees them all when the locale's MPI ends.

use std::sync::Mutex;

/// Most blocks kept.
const SPARE_BLOCKS: usize = 16;
/// Most bytes kept. The receiving rank of a stream of 1 MiB messages in
/// windows (`cantus-bench comm --only chant_window`) had up to 14 blocks
/// out at once; 16 MiB keeps that many, or eight 2 MiB frames (the
/// largest between the ranks of a node); a block larger than 16 MiB is
/// never kept.
pub(super) const SPARE_BYTES: usize = 16 << 20;

/// Blocks of more than this capacity are kept (those of frames that
/// travel alone: a batch is at most 64 KiB); smaller ones are left to the
/// allocator, which reuses them from its bins.
pub(super) const SPARE_ABOVE: usize = 64 << 10;

/// The blocks kept, the most recently given back last, and their bytes.
struct Spares {
    blocks: Vec<Vec<u8>>,
    bytes: usize,
    /// Blocks [`buffer`] gave out and [`give_back`] has not had back (a
    /// block dropped some other way, a malformed batch's, stays counted:
    /// more blocks are then kept, within the bounds).
    out: usize,
}

static SPARES: Mutex<Spares> = Mutex::new(Spares {
    blocks: Vec::new(),
    bytes: 0,
    out: 0,
});

fn spares() -> std::sync::MutexGuard<'static, Spares> {
    // A panic while the lock is held leaves the list whole (each change is
    // one push or remove with its count): the poison is ignored.
    SPARES.lock().unwrap_or_else(|p| p.into_inner())
}

/// An empty buffer with room for `capacity` bytes: a spare block if one
/// fits (room for `capacity`, at most twice that, so a small message
/// does not hold a block of a large one), the most recently given back
/// first; else a new one.
pub(super) fn buffer(capacity: usize) -> Vec<u8> {
    if capacity <= SPARE_ABOVE {
        return Vec::with_capacity(capacity);
    }
    let mut s = spares();
    s.out += 1;
    if let Some(i) = s
        .blocks
        .iter()
        .rposition(|b| b.capacity() >= capacity && b.capacity() / 2 <= capacity)
    {
        let block = s.blocks.remove(i);
        s.bytes -= block.capacity();
        return block;
    }
    drop(s);
    Vec::with_capacity(capacity)
}

/// Keeps `block` for a later [`buffer`], within the bounds, while other
/// blocks are out (messages received together, whose blocks would be
/// freed together); else frees it: a block freed alone is one the
/// allocator keeps and hands out again, warm, to whatever asks next (the
/// decoding of the very message, a reply's encoding), where keeping it
/// here would add a block to what the locale's work cycles through
/// (measured: a round trip of a 1 MiB `Vec<f64>` 3-7% slower).
/// Its bytes are not read again.
pub(super) fn give_back(mut block: Vec<u8>) {
    let capacity = block.capacity();
    if capacity <= SPARE_ABOVE {
        return;
    }
    block.clear();
    let mut s = spares();
    s.out = s.out.saturating_sub(1);
    if s.out > 0 && s.blocks.len() < SPARE_BLOCKS && s.bytes + capacity <= SPARE_BYTES {
        s.bytes += capacity;
        s.blocks.push(block);
        return;
    }
    drop(s);
    // Freed here, outside the lock.
}

/// Frees every spare block (the locale's MPI ended).
pub(super) fn clear() {
    let blocks = {
        let mut s = spares();
        s.bytes = 0;
        s.out = 0;
        std::mem::take(&mut s.blocks)
    };
    drop(blocks);
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The list is process-wide: the tests that use it take turns.
    static TURN: Mutex<()> = Mutex::new(());

    #[test]
    fn blocks_given_back_together_are_reused_most_recent_first_and_bounded() {
        let _turn = TURN.lock().unwrap_or_else(|p| p.into_inner());
        clear();
        // A block given back while no other is out is freed.
        let lone = buffer(1 << 20);
        give_back(lone);
        assert_eq!(spares().blocks.len(), 0);
        // Blocks given back while others are out are kept, all but the
        // last.
        let a = buffer(1 << 20);
        let b = buffer(1 << 20);
        let c = buffer(1 << 20);
        let (pa, pb) = (a.as_ptr(), b.as_ptr());
        give_back(a);
        give_back(b);
        give_back(c);
        assert_eq!(spares().blocks.len(), 2);
        // The most recent first, then the other.
        let first = buffer(1 << 20);
        assert_eq!(first.as_ptr(), pb);
        let second = buffer((1 << 20) - 100);
        assert_eq!(second.as_ptr(), pa);
        // None left: a new block.
        let third = buffer(1 << 20);
        assert!(third.capacity() >= 1 << 20);
        give_back(first);
        // Too large for the message (more than twice): not taken.
        let small = buffer(100 << 10);
        assert!(small.capacity() < 1 << 20);
        assert_eq!(spares().blocks.len(), 1);
        // Small blocks are not kept, nor counted.
        give_back(Vec::with_capacity(SPARE_ABOVE));
        assert_eq!(spares().blocks.len(), 1);
        give_back(small);
        give_back(second);
        give_back(third);
        assert_eq!(spares().out, 0);
        // Bounded in bytes: blocks past SPARE_BYTES are freed.
        clear();
        let out: Vec<Vec<u8>> = (0..SPARE_BYTES / (2 << 20) + 4)
            .map(|_| buffer(2 << 20))
            .collect();
        for b in out {
            give_back(b);
        }
        let s = spares();
        assert!(s.bytes <= SPARE_BYTES);
        assert_eq!(s.bytes, s.blocks.iter().map(Vec::capacity).sum::<usize>());
        assert_eq!(s.blocks.len(), SPARE_BYTES / (2 << 20));
        drop(s);
        // And in blocks.
        clear();
        let out: Vec<Vec<u8>> = (0..SPARE_BLOCKS + 4)
            .map(|_| buffer(SPARE_ABOVE + 1))
            .collect();
        for b in out {
            give_back(b);
        }
        assert_eq!(spares().blocks.len(), SPARE_BLOCKS);
        clear();
        assert_eq!(spares().bytes, 0);
    }
}
