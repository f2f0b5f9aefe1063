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
//! - A receiver may instead *return* a block it alone holds, with a reply
//!   written around the array it received there ([`RETURN_TAG`]): the
//!   sender checks the return against its own records
//!   ([`Outbound::check_return`]), reads the reply in place, and takes
//!   the block back itself when done ([`Returned`]).

use super::region::Region;
use crate::comm::transport::TakeBack;
use std::collections::VecDeque;
use std::ptr::NonNull;
use std::sync::atomic::AtomicU32;
use std::sync::{Arc, Mutex};

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
/// The ring tag of a return: a frame written into a block its receiver was
/// sent, handed back to the block's sender (who reads it there). Its note
/// is `NOTE_LEN` bytes: the frame's offset in the sender's area, its
/// length and the block's number.
pub(crate) const RETURN_TAG: u32 = 2;

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
    /// Blocks allocated and not yet taken back, oldest first.
    live: VecDeque<Live>,
    /// Offsets of blocks their receiver returned (`check_return`) and this
    /// locale still reads: not reclaimed, whatever their state word says,
    /// until their [`Returned`] take-back removes them.
    held: Arc<Mutex<Vec<usize>>>,
    /// Where the next block goes (the end of the newest one).
    next: usize,
    /// The newest block's number.
    number: u64,
    /// Staged blocks (rule S of `README.md`) among `live`, and the last
    /// stage number given (each staged block's own, never reused).
    staged: usize,
    stages: u64,
}

/// A block of an [`Outbound`] not yet taken back: where it lies, what it
/// carries (kept here, not read back from the shared header, which its
/// receiver could overwrite).
#[derive(Clone, Copy, Debug)]
struct Live {
    offset: usize,
    len: usize,
    /// Its number; 0 while it is staged, and once a staged block was
    /// given back (never a note's: numbers start at 1).
    number: u64,
    /// Its stage number while it is staged (rule S), else 0.
    stage: u64,
}

/// A return checked against the sender's records: the frame is the `len`
/// bytes at `frame` (at offset `at` of the area), in the block at offset
/// `block`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Return {
    pub(crate) frame: NonNull<u8>,
    pub(crate) at: usize,
    pub(crate) len: usize,
    pub(crate) block: usize,
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
            held: Arc::new(Mutex::new(Vec::new())),
            next: 0,
            number: 0,
            staged: 0,
            stages: 0,
        }
    }

    /// The list of returned blocks still read here, for their take-back
    /// ([`Returned`]).
    pub(crate) fn held(&self) -> Arc<Mutex<Vec<usize>>> {
        self.held.clone()
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
        while let Some(&Live { offset, .. }) = self.live.front() {
            // A block returned to us is ours to read until our own
            // take-back lets it go, whatever its receiver wrote since.
            if lock(&self.held).contains(&offset) {
                break;
            }
            // Acquire: pairs with the receiver's Release store of TAKEN
            // (`Blocks::take_back`, or our own `Returned::take_back`): its
            // reads of the block happen before we write the block again.
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
        let Some(&Live { offset: head, .. }) = self.live.front() else {
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
        let offset = self.alloc(len, self.number + 1, 0)?;
        self.number += 1;
        Some(Block {
            offset,
            len,
            number: self.number,
        })
    }

    /// Places a WRITTEN block of `len` payload bytes, numbered `number`
    /// (0: not yet) and staged as `stage` (0: not staged), after the
    /// newest: its offset, or `None` when the area has no room now.
    fn alloc(&mut self, len: usize, number: u64, stage: u64) -> Option<usize> {
        let size = footprint(len);
        self.reclaim();
        let offset = self.place(size)?;
        // SAFETY: [offset, offset + size) is free space of the area (by
        // `place`): no receiver reads it (it was taken, or never sent).
        unsafe {
            let h = self.base.as_ptr().add(offset).cast::<BlockHeader>();
            (*h).state.store(WRITTEN, order::MARK_WRITTEN);
        }
        self.set_header(offset, len, number);
        self.live.push_back(Live {
            offset,
            len,
            number,
            stage,
        });
        self.next = offset + size;
        Some(offset)
    }

    /// Writes the length and number words of the header of the block at
    /// `offset`, one of ours not sent yet (allocated or staged).
    fn set_header(&mut self, offset: usize, len: usize, number: u64) {
        // SAFETY: `offset` is a block's, with its header inside the area
        // (allocation made it so); until its note is sent the block is
        // ours alone, and these two words only this side writes.
        unsafe {
            let h = self.base.as_ptr().add(offset).cast::<BlockHeader>();
            std::ptr::addr_of_mut!((*h).len).write(len as u64);
            std::ptr::addr_of_mut!((*h).number).write(number);
        }
    }

    /// The first payload byte of the block at `offset`.
    fn payload_ptr(&self, offset: usize) -> NonNull<u8> {
        // SAFETY: a block's payload lies inside the area at `base`
        // (allocation made it so), which is not null.
        unsafe { NonNull::new_unchecked(self.base.as_ptr().add(offset + BLOCK_HEADER)) }
    }

    /// The payload of `block`, the newest block, to write.
    pub(crate) fn payload_mut(&mut self, block: &Block) -> &mut [u8] {
        debug_assert_eq!(self.live.back().map(|b| b.offset), Some(block.offset));
        // SAFETY: the block was allocated by `try_alloc` and not sent yet,
        // so its payload (inside the area, by `place`) is ours alone.
        unsafe {
            std::slice::from_raw_parts_mut(self.payload_ptr(block.offset).as_ptr(), block.len)
        }
    }

    /// Gives back `block`, the newest block, never sent (its note found no
    /// room in the ring).
    pub(crate) fn unalloc(&mut self, block: Block) {
        let last = self.pop_newest();
        debug_assert_eq!(last.map(|b| b.offset), Some(block.offset));
        self.number -= 1;
    }

    /// Takes the newest block out of the area (never sent): the next one
    /// goes where it was.
    fn pop_newest(&mut self) -> Option<Live> {
        let last = self.live.pop_back();
        self.next = match self.live.back() {
            Some(b) => b.offset + footprint(b.len),
            None => 0,
        };
        last
    }

    /// Allocates a block for up to `len` payload bytes that its sender
    /// writes in place, without this area's lock, before sending it
    /// (rule S of `README.md`): staged, with no number yet, until
    /// [`send_staged`](Self::send_staged) numbers it (its note is then
    /// the next in number order) or [`unstage`](Self::unstage) gives it
    /// back. Other blocks are allocated after it meanwhile. Its stage
    /// number names it; `None` if the area has no room now.
    pub(crate) fn stage(&mut self, len: usize) -> Option<u64> {
        // WRITTEN keeps `reclaim` behind it; its number is written when it
        // is sent.
        self.alloc(len, 0, self.stages + 1)?;
        self.stages += 1;
        self.staged += 1;
        Some(self.stages)
    }

    /// Where the staged block `stage` is among the live ones.
    fn staged_at(&self, stage: u64) -> Option<usize> {
        if stage == 0 || self.staged == 0 {
            return None;
        }
        self.live.iter().rposition(|b| b.stage == stage)
    }

    /// The staged block `stage`, if it still is: its payload's address
    /// and length.
    pub(crate) fn staged_payload(&self, stage: u64) -> Option<(NonNull<u8>, usize)> {
        let b = self.live[self.staged_at(stage)?];
        Some((self.payload_ptr(b.offset), b.len))
    }

    /// The staged block whose payload holds the `len` bytes at `at`, if
    /// any: its stage number, and where they lie in its payload.
    pub(crate) fn staged_holding(&self, at: usize, len: usize) -> Option<(u64, usize)> {
        if self.staged == 0 || len == 0 {
            return None;
        }
        self.live.iter().filter(|b| b.stage != 0).find_map(|b| {
            let payload = self.payload_ptr(b.offset).as_ptr() as usize;
            (at >= payload && at + len <= payload + b.len).then(|| (b.stage, at - payload))
        })
    }

    /// Makes the staged block `stage` `len` payload bytes long, keeping
    /// its first bytes where they are: longer only while it is the newest
    /// block and into free space, shorter anywhere. False (the block
    /// unchanged) if it cannot, or is not staged.
    pub(crate) fn resize_staged(&mut self, stage: u64, len: usize) -> bool {
        self.reclaim();
        let Some(i) = self.staged_at(stage) else {
            return false;
        };
        let b = self.live[i];
        let newest = i + 1 == self.live.len();
        if len > b.len {
            // The room after the block: to the area's end, or (when it
            // lies before the oldest live block, after a wrap) to that
            // block.
            let end = match self.live.front() {
                Some(head) if head.offset > b.offset => head.offset,
                _ => self.cap,
            };
            if !newest || b.offset + footprint(len) > end {
                return false;
            }
        }
        self.live[i].len = len;
        if newest {
            self.next = b.offset + footprint(len);
        }
        self.set_header(b.offset, len, 0);
        true
    }

    /// Numbers the staged block `stage`, whose note its caller puts on
    /// the ring now, under this area's lock (so notes still go in number
    /// order): it becomes a block like any other. Its length is final
    /// (`resize_staged`).
    pub(crate) fn send_staged(&mut self, stage: u64) -> Block {
        let i = self.staged_at(stage).expect("a staged block");
        self.number += 1;
        let b = &mut self.live[i];
        b.number = self.number;
        b.stage = 0;
        self.staged -= 1;
        let block = Block {
            offset: b.offset,
            len: b.len,
            number: b.number,
        };
        self.set_header(block.offset, block.len, block.number);
        block
    }

    /// Gives back the staged block `stage`, never sent; nothing if it is
    /// not staged any more (it was sent). The newest block leaves the
    /// area at once; one with blocks after it is marked taken, and
    /// `reclaim` passes it once the blocks before it came back.
    pub(crate) fn unstage(&mut self, stage: u64) {
        let Some(i) = self.staged_at(stage) else {
            return;
        };
        self.staged -= 1;
        if i + 1 == self.live.len() {
            self.pop_newest();
        } else {
            self.live[i].stage = 0;
            // Under this area's lock, as `reclaim`'s load of it.
            let offset = self.live[i].offset;
            self.header(offset).state.store(TAKEN, order::TAKE_BACK);
        }
    }

    /// Checks a return note (`RETURN_TAG`) from this area's receiver
    /// against our own records, trusting nothing it says: the block must
    /// be live (sent, not taken back), not returned already, still in the
    /// `WRITTEN` state, and the frame must lie inside its payload. A
    /// return accepted is held (`held`) until its [`Returned`] take-back.
    pub(crate) fn check_return(&mut self, note: &[u8]) -> Result<Return, String> {
        let [frame, len, number] = note_words(note)?;
        // Staged blocks, and staged blocks given back, have number 0, which
        // no note carries.
        let found = self.live.iter().find(|b| b.number == number && number != 0);
        let Some(block) = found.copied() else {
            return Err(format!(
                "a return of block number {number}, which is not out (never sent, or taken back)"
            ));
        };
        let payload = (block.offset + BLOCK_HEADER) as u64;
        let end = frame.checked_add(len);
        if frame < payload || end.is_none_or(|e| e > payload + block.len as u64) {
            return Err(format!(
                "a return of {len} bytes at offset {frame}, outside block number {number}'s \
                 payload ({} bytes at offset {payload})",
                block.len
            ));
        }
        let mut held = lock(&self.held);
        if held.contains(&block.offset) {
            return Err(format!("block number {number} returned twice"));
        }
        // Relaxed: the ring's Acquire that showed the note ordered the
        // receiver's writes before this read, and we only compare it.
        let state = self.header(block.offset).state.load(order::CHECK_STATE);
        if state != WRITTEN {
            return Err(format!(
                "a return of block number {number}, whose state is {state} (taken before)"
            ));
        }
        held.push(block.offset);
        let at = frame as usize;
        Ok(Return {
            // SAFETY: `at + len` lies inside a live block's payload
            // (checked above), inside the area that starts at `base`.
            frame: unsafe { NonNull::new_unchecked(self.base.as_ptr().add(at)) },
            at,
            len: len as usize,
            block: block.offset,
        })
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
    /// Whether region offset `at` lies in this area.
    pub(crate) fn contains(&self, at: usize) -> bool {
        (self.area..self.area + self.cap).contains(&at)
    }

    /// The area's offset in the region.
    pub(crate) fn offset(&self) -> usize {
        self.area
    }

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
        let [offset, len, number] = note_words(note)?;
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

/// A note's three words, if it is `NOTE_LEN` bytes.
fn note_words(note: &[u8]) -> Result<[u64; 3], String> {
    let Ok(words) = <&[u8; NOTE_LEN]>::try_from(note) else {
        return Err(format!(
            "a block's note of {} bytes (not {NOTE_LEN})",
            note.len()
        ));
    };
    let word = |i: usize| {
        let mut w = [0u8; 8];
        w.copy_from_slice(&words[i * 8..i * 8 + 8]);
        u64::from_le_bytes(w)
    };
    Ok([word(0), word(1), word(2)])
}

/// The note of a return: the frame's offset in the block sender's area,
/// its length, and the block's number.
pub(crate) fn return_note(frame: usize, len: usize, number: u64) -> [u8; NOTE_LEN] {
    Block {
        offset: frame,
        len,
        number,
    }
    .note()
}

/// The number a block's sender wrote in its header (at region offset
/// `state`, a block lent to us): what a return names.
pub(crate) fn block_number(region: &Region, state: usize) -> u64 {
    let header = region.ptr(super::region::Area::new(state, BLOCK_HEADER));
    // SAFETY: `state` is the header of a block checked when it was lent
    // (inside its area, 8-byte aligned); reading a word of shared memory
    // cannot fault, and the sender checks whatever number comes back.
    unsafe {
        let h = header.as_ptr().cast::<BlockHeader>();
        std::ptr::addr_of!((*h).number).read_volatile()
    }
}

/// The lock, whether or not a thread panicked holding it (the list stays
/// whole: every change is one push or one removal).
fn lock(held: &Mutex<Vec<usize>>) -> std::sync::MutexGuard<'_, Vec<usize>> {
    held.lock().unwrap_or_else(|e| e.into_inner())
}

/// Takes back the blocks returned to this locale, from one area (ours,
/// for one destination): when the reader of a returned frame is done,
/// the block leaves the held list and is marked `TAKEN`, so the area's
/// `reclaim` reuses it.
pub(crate) struct Returned {
    pub(crate) region: Arc<Region>,
    /// The area's offset in the region.
    pub(crate) area: usize,
    /// The area's held list (`Outbound::held`).
    pub(crate) held: Arc<Mutex<Vec<usize>>>,
}

impl TakeBack for Returned {
    /// `token`: the block's offset in the area.
    fn take_back(&self, token: usize) {
        lock(&self.held).retain(|&b| b != token);
        // Release, as the receiver's take-back: our reads of the frame
        // happen before the block is written again (`reclaim`'s Acquire).
        self.region
            .atomic_u32(self.area + token)
            .store(TAKEN, order::TAKE_BACK);
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
/// whose header repeats it, with numbers growing along each ring. The
/// same notes, read as returns against three blocks the area's sender
/// has out, are accepted only inside one of their payloads.
pub(crate) fn fuzz_notes(bytes: &[u8]) {
    use super::region::{Area, Layout, MAX_ALIGN};
    const CAP: usize = 1 << 16;
    let mut layout = Layout::new();
    let area = layout.carve(CAP, MAX_ALIGN).expect("an area");
    let region = Arc::new(Region::create(layout.len()).expect("a region"));
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
    // SAFETY: the area was carved in the region, which outlives `out`
    // (both dropped at the end here), and no other view allocates in it.
    let mut out = unsafe { Outbound::new(region.ptr(area), CAP) };
    let returned = Returned {
        region: region.clone(),
        area: area.offset(),
        held: out.held(),
    };
    let sent: Vec<Block> = [100, 5000, 70]
        .into_iter()
        .map(|len| out.try_alloc(len).expect("room for three small blocks"))
        .collect();
    for note in notes.chunks(NOTE_LEN + 1) {
        if let Ok(r) = out.check_return(&note[..note.len().min(NOTE_LEN)]) {
            assert!(
                sent.iter().any(|b| b.offset == r.block
                    && r.at >= b.offset + BLOCK_HEADER
                    && r.at + r.len <= b.offset + BLOCK_HEADER + b.len),
                "a return accepted outside the payload of a block out: {r:?}"
            );
            returned.take_back(r.block);
        }
    }
}

#[cfg(all(test, not(loom)))]
mod tests;
