//! Rendezvous for large frames on shared memory: a frame larger than a
//! ring frame is written once into a block of the sender's area for that
//! receiver, and the ring carries only a note naming the block; the
//! receiver reads the frame in place, and may keep it (lent, past the
//! poll) until its reader is done, when it marks the block taken and the
//! sender reuses it. `README.md` beside this file ("Rendezvous") states
//! the block format, who writes what, the validation and the orderings.
//!
//! After the large-message protocols of MPI implementations (eager below
//! a threshold, rendezvous above) and Berkeley UPC's shared-memory
//! conduit (seed 003, "Pthreads or Processes", section 4.3.2), whose
//! medium and long active messages name their payload in a shared
//! segment instead of copying it through the queue.
//!
//! - [`Outbound`] is the sender's view of one area (one per destination):
//!   it allocates blocks first in, first out, and takes back the oldest
//!   ones their receiver marked taken; nothing about it lives in shared
//!   memory but the blocks' headers.
//! - [`Inbound`] is the receiver's view of an area (one per source): it
//!   checks a note against the area and the block before trusting it.
//! - [`Blocks`] hands a lent block back: its drop stores `TAKEN` in the
//!   block's state word.

use super::region::Region;
use crate::comm::transport::TakeBack;
use std::collections::VecDeque;
use std::ptr::NonNull;
use std::sync::atomic::AtomicU32;

#[cfg(all(test, loom))]
mod loom_tests;

/// The protocol's memory orderings, named once: the code below and the
/// loom model of the protocol (`rendezvous/loom_tests.rs`) use these, so
/// the model checks the orderings the code makes.
mod order {
    use std::sync::atomic::Ordering;

    /// The sender marks a block `WRITTEN` when it allocates it: the ring's
    /// Release publication of the block's note orders it, with the
    /// header's words and the payload, before the receiver's reads.
    pub(super) const MARK_WRITTEN: Ordering = Ordering::Relaxed;
    /// The receiver reads the state after the ring's Acquire load that
    /// showed it the note.
    pub(super) const CHECK_STATE: Ordering = Ordering::Relaxed;
    /// The receiver marks a block `TAKEN` once it is done with it: its
    /// reads of the block happen before the sender's next writes.
    pub(super) const TAKE_BACK: Ordering = Ordering::Release;
    /// The sender's load that finds a block taken, before it writes the
    /// block again.
    pub(super) const RECLAIM: Ordering = Ordering::Acquire;
}

/// Bytes before a block's payload: its state word, length and number.
pub(crate) const BLOCK_HEADER: usize = 64;
/// Blocks start at multiples of this within their area (a cache line, so
/// a state word never shares a line with another block's payload, and
/// payloads are aligned for any plain type).
pub(crate) const BLOCK_ALIGN: usize = 64;
/// The ring tag of a note (a frame that names a block); ordinary frames
/// carry tag 0.
pub(crate) const NOTE_TAG: u32 = 1;
/// A note's bytes: the block's offset in the area, its payload length and
/// its number, three little-endian `u64`s.
pub(crate) const NOTE_LEN: usize = 24;

/// A block's state word: written by its sender, read by its receiver.
const WRITTEN: u32 = 1;
/// A block's state word: its receiver is done with it.
const TAKEN: u32 = 2;

/// The largest payload a block of an area of `area_bytes` carries: a
/// quarter of the area (less the header), so that a second such block
/// fits beside a first wherever the first lies (the free space, 3/4 of
/// the area, is at most two pieces, one of them at least 3/8).
pub(crate) fn max_payload(area_bytes: usize) -> usize {
    (area_bytes / 4).saturating_sub(BLOCK_HEADER)
}

/// Bytes a block of `len` payload bytes takes in its area.
fn footprint(len: usize) -> usize {
    BLOCK_HEADER + len.next_multiple_of(BLOCK_ALIGN)
}

/// The header at the start of every block.
#[repr(C)]
struct BlockHeader {
    /// `WRITTEN` or `TAKEN`.
    state: AtomicU32,
    _pad: u32,
    /// The payload's length in bytes.
    len: u64,
    /// The block's number in its area (from 1, one more per block).
    number: u64,
}

const _: () = assert!(std::mem::size_of::<BlockHeader>() <= BLOCK_HEADER);

/// A block just allocated: where it is and what it holds.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Block {
    offset: usize,
    len: usize,
    number: u64,
}

impl Block {
    /// The note that names it, for the ring.
    pub(crate) fn note(&self) -> [u8; NOTE_LEN] {
        let mut n = [0u8; NOTE_LEN];
        n[..8].copy_from_slice(&(self.offset as u64).to_le_bytes());
        n[8..16].copy_from_slice(&(self.len as u64).to_le_bytes());
        n[16..].copy_from_slice(&self.number.to_le_bytes());
        n
    }
}

/// The sender's side of its area for one destination. Only the sending
/// locale allocates in it (under its caller's lock); the receiver writes
/// only the state words of blocks it was sent.
pub(crate) struct Outbound {
    base: NonNull<u8>,
    cap: usize,
    /// Blocks allocated and not yet taken back, oldest first: (offset,
    /// footprint).
    live: VecDeque<(usize, usize)>,
    /// Where the next block goes (the end of the newest one).
    next: usize,
    /// The newest block's number.
    number: u64,
}

// SAFETY: `base` points into the region's mapping, which the transport
// that holds this keeps alive; the `Outbound` is used under its mutex.
unsafe impl Send for Outbound {}

impl Outbound {
    /// The area of `cap` bytes at `base` (aligned to a page, all of it
    /// this locale's to allocate in).
    ///
    /// # Safety
    ///
    /// `base..base + cap` lies in a mapping that outlives the result, is
    /// this locale's area for one destination, and no other `Outbound`
    /// exists for it anywhere.
    pub(crate) unsafe fn new(base: NonNull<u8>, cap: usize) -> Outbound {
        Outbound {
            base,
            cap,
            live: VecDeque::new(),
            next: 0,
            number: 0,
        }
    }

    fn header(&self, offset: usize) -> &BlockHeader {
        // SAFETY: `offset` is a block's offset, a multiple of BLOCK_ALIGN
        // with the header inside the area (allocation made it so); the
        // header's fields are an atomic (shared with the receiver) and two
        // words only this side writes, while the block is its own.
        unsafe { &*self.base.as_ptr().add(offset).cast::<BlockHeader>() }
    }

    /// Takes back the oldest blocks their receiver marked taken; when
    /// none is left, starts again at the area's first byte (so a quiet
    /// pair keeps reusing the same, warm pages).
    fn reclaim(&mut self) {
        while let Some(&(offset, _)) = self.live.front() {
            // Acquire: pairs with the receiver's Release store of TAKEN
            // (`Blocks::take_back`): its reads of the block happen before
            // we write the block again.
            if self.header(offset).state.load(order::RECLAIM) != TAKEN {
                break;
            }
            self.live.pop_front();
        }
        if self.live.is_empty() {
            self.next = 0;
        }
    }

    /// Where a block of `size` bytes (a footprint) fits now, if it does.
    fn place(&self, size: usize) -> Option<usize> {
        let Some(&(head, _)) = self.live.front() else {
            return (size <= self.cap).then_some(0);
        };
        if self.next > head {
            // Free: [next, cap) and, after a wrap, [0, head).
            if self.next + size <= self.cap {
                Some(self.next)
            } else if size <= head {
                Some(0)
            } else {
                None
            }
        } else {
            // Wrapped (next <= head; equal means full): free is [next, head).
            (self.next + size <= head).then_some(self.next)
        }
    }

    /// Allocates a block for `len` payload bytes, or `None` when the area
    /// has no room now (its receiver has not taken enough yet).
    pub(crate) fn try_alloc(&mut self, len: usize) -> Option<Block> {
        let size = footprint(len);
        self.reclaim();
        let offset = self.place(size)?;
        self.number += 1;
        let block = Block {
            offset,
            len,
            number: self.number,
        };
        // SAFETY: [offset, offset + size) is free space of the area (by
        // `place`): no receiver reads it (it was taken, or never sent).
        unsafe {
            let h = self.base.as_ptr().add(offset).cast::<BlockHeader>();
            (*h).state.store(WRITTEN, order::MARK_WRITTEN);
            std::ptr::addr_of_mut!((*h).len).write(len as u64);
            std::ptr::addr_of_mut!((*h).number).write(block.number);
        }
        self.live.push_back((offset, size));
        self.next = offset + size;
        Some(block)
    }

    /// The payload of `block`, the newest block, to write.
    pub(crate) fn payload_mut(&mut self, block: &Block) -> &mut [u8] {
        debug_assert_eq!(self.live.back().map(|b| b.0), Some(block.offset));
        // SAFETY: the block was allocated by `try_alloc` and not sent yet,
        // so its payload (inside the area, by `place`) is ours alone.
        unsafe {
            std::slice::from_raw_parts_mut(
                self.base.as_ptr().add(block.offset + BLOCK_HEADER),
                block.len,
            )
        }
    }

    /// Gives back `block`, the newest block, never sent (its note found no
    /// room in the ring).
    pub(crate) fn unalloc(&mut self, block: Block) {
        let last = self.live.pop_back();
        debug_assert_eq!(last.map(|b| b.0), Some(block.offset));
        self.number -= 1;
        self.next = match self.live.back() {
            Some(&(offset, size)) => offset + size,
            None => 0,
        };
    }

    /// Blocks allocated and not yet seen taken (tests).
    #[cfg(test)]
    pub(crate) fn live(&self) -> usize {
        self.live.len()
    }
}

/// The receiver's side of a sender's area: checks notes.
pub(crate) struct Inbound {
    /// The area's offset in the region and its length.
    area: usize,
    cap: usize,
    /// The newest block number seen on each network: numbers grow along
    /// each ring (the sender numbers blocks and sends their notes under
    /// one lock).
    seen: [u64; 2],
}

/// A note checked against its area and block: the payload lies at region
/// offset `payload`, `len` bytes, and its state word at `state`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Taken {
    pub(crate) payload: usize,
    pub(crate) len: usize,
    pub(crate) state: usize,
}

impl Inbound {
    /// The area at region offset `area`, `cap` bytes.
    pub(crate) fn new(area: usize, cap: usize) -> Inbound {
        Inbound {
            area,
            cap,
            seen: [0; 2],
        }
    }

    /// Checks `note`, which came on ring `net` (0 or 1), against the area
    /// and the block it names, whose header lies in `region`. Trusts
    /// nothing the sender wrote: an offset out of the area or misaligned,
    /// a length past its end, a header that does not repeat the note, a
    /// block not in the `WRITTEN` state, or a number that does not grow
    /// along the ring is an error saying which.
    pub(crate) fn check(
        &mut self,
        region: &Region,
        net: usize,
        note: &[u8],
    ) -> Result<Taken, String> {
        let word = |i: usize| -> Option<u64> {
            Some(u64::from_le_bytes(
                note.get(i * 8..i * 8 + 8)?.try_into().ok()?,
            ))
        };
        let (Some(offset), Some(len), Some(number), NOTE_LEN) =
            (word(0), word(1), word(2), note.len())
        else {
            return Err(format!(
                "a block's note of {} bytes (not {NOTE_LEN})",
                note.len()
            ));
        };
        if offset % BLOCK_ALIGN as u64 != 0 {
            return Err(format!(
                "a block at offset {offset}, not a multiple of {BLOCK_ALIGN}"
            ));
        }
        let end = offset
            .checked_add(BLOCK_HEADER as u64)
            .and_then(|e| e.checked_add(len));
        if end.is_none_or(|e| e > self.cap as u64) {
            return Err(format!(
                "a block of {len} bytes at offset {offset}, past the end of the {}-byte area",
                self.cap
            ));
        }
        if number <= self.seen[net] {
            return Err(format!(
                "block number {number} after number {} on the same ring (numbers must grow)",
                self.seen[net]
            ));
        }
        let (offset, len) = (offset as usize, len as usize);
        let state = self.area + offset;
        // Relaxed would do for these reads: the ring's Acquire load of the
        // tail that showed the note ordered the sender's writes before
        // them. The header's length and number are read as plain words
        // (the sender wrote them before publishing the note, and writes
        // them again only after we mark the block taken).
        let seen_state = region.atomic_u32(state).load(order::CHECK_STATE);
        let header = region.ptr(super::region::Area::new(state, BLOCK_HEADER));
        // SAFETY: the header lies inside the area (checked above), 8-byte
        // aligned (the area is page-aligned, the offset a multiple of 64);
        // reading two words of shared memory cannot fault, and any values
        // are checked below.
        let (h_len, h_number) = unsafe {
            let h = header.as_ptr().cast::<BlockHeader>();
            (
                std::ptr::addr_of!((*h).len).read_volatile(),
                std::ptr::addr_of!((*h).number).read_volatile(),
            )
        };
        if seen_state != WRITTEN || h_len != len as u64 || h_number != number {
            return Err(format!(
                "block number {number} at offset {offset} of {len} bytes: its header says \
                 state {seen_state}, {h_len} bytes, number {h_number}"
            ));
        }
        self.seen[net] = number;
        Ok(Taken {
            payload: state + BLOCK_HEADER,
            len,
            state,
        })
    }
}

/// Hands lent blocks back to their senders: the region they lie in.
pub(crate) struct Blocks {
    pub(crate) region: std::sync::Arc<Region>,
}

impl TakeBack for Blocks {
    fn take_back(&self, token: usize) {
        // Release: pairs with the sender's Acquire load in
        // `Outbound::reclaim`, so our reads of the block happen before the
        // sender writes it again.
        self.region.atomic_u32(token).store(TAKEN, order::TAKE_BACK);
    }
}

/// The fuzz target's body (`fuzz/fuzz_targets/rendezvous_notes.rs`):
/// an area whose first bytes (block headers, as a hostile sender could
/// leave them) and a run of notes are arbitrary; checking them never
/// panics, and every note accepted names a payload inside the area,
/// whose header repeats it, with numbers growing along each ring.
pub(crate) fn fuzz_notes(bytes: &[u8]) {
    use super::region::{Area, Layout, MAX_ALIGN};
    const CAP: usize = 1 << 16;
    let mut layout = Layout::new();
    let area = layout.carve(CAP, MAX_ALIGN).expect("an area");
    let region = Region::create(layout.len()).expect("a region");
    let (head, notes) = bytes.split_at(bytes.len().min(4096));
    // SAFETY: the area lies in the region just made, `head` is at most
    // 4096 bytes (the area holds 64 KiB), and nothing else uses it.
    unsafe {
        std::ptr::copy_nonoverlapping(head.as_ptr(), region.ptr(area).as_ptr(), head.len());
    }
    let mut inbound = Inbound::new(area.offset(), CAP);
    let mut last = [0u64; 2];
    for (i, note) in notes.chunks(NOTE_LEN + 1).enumerate() {
        let net = i % 2;
        if let Ok(t) = inbound.check(&region, net, &note[..note.len().min(NOTE_LEN)]) {
            assert!(t.state >= area.offset() && t.payload + t.len <= area.offset() + CAP);
            let number = u64::from_le_bytes(note[16..24].try_into().unwrap());
            assert!(number > last[net]);
            last[net] = number;
            let _ = region.ptr(Area::new(t.payload, t.len));
        }
    }
}

#[cfg(all(test, not(loom)))]
mod tests;
