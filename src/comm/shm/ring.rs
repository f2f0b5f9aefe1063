//! A single-producer single-consumer ring of variable-length frames that
//! lives in shared memory: one process (or thread) writes frames, one reads
//! them, and neither ever blocks. `README.md` beside this file states the
//! invariants (who writes which index, the frame format, the wrap rule,
//! what the consumer validates) and the two orderings the protocol needs.
//!
//! The ring is a classic bounded SPSC queue over monotonically increasing
//! byte indices, as in Lamport's single-producer single-consumer buffer
//! ("Specifying Concurrent Program Modules", TOPLAS 1983), with each side
//! keeping a cached copy of the other side's index so that it reads the
//! shared one only when the cached one says "full" or "empty".
//!
//! Memory layout from the ring's base (which must be [`ALIGN`]-aligned):
//!
//! | bytes | what | written by |
//! |---|---|---|
//! | 0..8 | `tail`: bytes ever committed | the producer |
//! | 8..16, 16..24 | magic, capacity | [`init`], then read-only |
//! | 128..136 | `head`: bytes ever released (published) | the consumer |
//! | 256..256+capacity | frames | the producer; read by the consumer |

#[cfg(not(loom))]
use std::ptr::NonNull;

use crate::error::{Error, ErrorKind};
use crate::loom::sync::atomic::{AtomicU64, Ordering};

#[cfg(all(test, loom))]
mod loom_tests;
#[cfg(all(test, not(loom)))]
pub(crate) mod tests;

/// The alignment a ring's base needs: each index has a 128-byte line of
/// its own (`region::LINE`).
pub(crate) const ALIGN: usize = super::region::LINE;
/// Bytes in front of the frames: the producer's line and the consumer's.
pub(crate) const RING_HEADER: usize = 2 * ALIGN;
/// Bytes of a frame header: payload length (`u32`) and tag (`u32`).
pub(crate) const FRAME_HEADER: usize = 8;
/// The smallest capacity (data bytes) a ring may have.
pub(crate) const MIN_CAPACITY: usize = 32;
/// The largest capacity: payload lengths must fit the header's `u32`.
pub(crate) const MAX_CAPACITY: usize = 1 << 32;
/// The tag of a padding frame, which fills the bytes from a frame that
/// would not fit before the end of the buffer up to that end. Reserved:
/// callers may use every other tag.
pub(crate) const PAD_TAG: u32 = u32::MAX;

const TAIL_AT: usize = 0;
const MAGIC_AT: usize = 8;
const CAPACITY_AT: usize = 16;
const HEAD_AT: usize = ALIGN;
const MAGIC: u64 = u64::from_le_bytes(*b"CANTRING");

/// Bytes a ring of `capacity` takes in the region: carve it with
/// alignment [`ALIGN`].
pub(crate) fn footprint(capacity: usize) -> usize {
    RING_HEADER + capacity
}

/// The largest payload a ring of `capacity` accepts: half the capacity
/// less a header, so that a frame always fits into an empty ring,
/// wherever the producer's index stands (a frame that does not fit before
/// the end needs the end's bytes as padding plus its own at the start).
pub(crate) fn max_payload(capacity: usize) -> usize {
    capacity / 2 - FRAME_HEADER
}

/// Bytes a frame with a `len`-byte payload takes: the header plus the
/// payload rounded up to 8, so every header is 8-byte aligned.
fn frame_size(len: usize) -> usize {
    FRAME_HEADER + len.next_multiple_of(8)
}

fn encode(len: usize, tag: u32) -> u64 {
    len as u64 | u64::from(tag) << 32
}

fn decode(word: u64) -> (usize, u32) {
    ((word & 0xffff_ffff) as usize, (word >> 32) as u32)
}

fn check_capacity(capacity: usize) -> Result<(), Error> {
    if capacity.is_power_of_two() && (MIN_CAPACITY..=MAX_CAPACITY).contains(&capacity) {
        Ok(())
    } else {
        Err(Error::new(
            ErrorKind::InvalidConfig,
            format!(
                "a ring capacity of {capacity} bytes is not valid: use a power of two from \
                 {MIN_CAPACITY} to {MAX_CAPACITY}"
            ),
        ))
    }
}

fn corrupt(message: String) -> Error {
    Error::new(
        ErrorKind::SharedMemory,
        format!(
            "shared-memory ring corrupt: {message}; the ring's memory was overwritten, or \
             its two ends disagree on its layout (different builds or capacities)"
        ),
    )
}

/// Initializes a ring of `capacity` data bytes at `base`: both indices
/// zero, magic and capacity recorded for [`Producer::attach`] and
/// [`Consumer::attach`] to check. Call it once, before any process
/// attaches (in practice: right after `Region::create`).
///
/// # Errors
///
/// [`ErrorKind::InvalidConfig`] if `capacity` is not a power of two in
/// [`MIN_CAPACITY`]`..=`[`MAX_CAPACITY`].
///
/// # Safety
///
/// - `base` is [`ALIGN`]-aligned and valid for reads and writes of
///   [`footprint`]`(capacity)` bytes;
/// - no producer or consumer of this ring exists yet, in any process.
#[cfg(not(loom))]
pub(crate) unsafe fn init(base: NonNull<u8>, capacity: usize) -> Result<(), Error> {
    check_capacity(capacity)?;
    assert!(
        base.as_ptr() as usize % ALIGN == 0,
        "a ring's base must be {ALIGN}-byte aligned"
    );
    let mem = Mem { base };
    mem.tail().store(0, Ordering::Relaxed);
    mem.head().store(0, Ordering::Relaxed);
    // SAFETY: within the producer's line (the caller guarantees the
    // footprint), 8-aligned, and no handle reads it concurrently (the
    // caller guarantees none exists yet).
    unsafe {
        base.add(MAGIC_AT).cast::<u64>().write(MAGIC);
        base.add(CAPACITY_AT).cast::<u64>().write(capacity as u64);
    }
    Ok(())
}

/// The ring's shared memory as the protocol sees it: the two indices and
/// the data bytes. In a normal build these are bytes in a mapping; under
/// `--cfg loom` the data words are loom cells, so the model checker sees
/// every access to a frame and reports one that races with its reuse.
#[cfg(not(loom))]
struct Mem {
    base: NonNull<u8>,
}

#[cfg(not(loom))]
impl Mem {
    fn tail(&self) -> &AtomicU64 {
        // SAFETY: the attach/init contracts make `base` an ALIGN-aligned
        // ring that stays mapped while a handle exists; offset 0 holds the
        // tail, accessed only atomically; any bits are a valid AtomicU64.
        unsafe { self.base.add(TAIL_AT).cast::<AtomicU64>().as_ref() }
    }

    fn head(&self) -> &AtomicU64 {
        // SAFETY: as for `tail`, at offset HEAD_AT.
        unsafe { self.base.add(HEAD_AT).cast::<AtomicU64>().as_ref() }
    }

    /// Reads the 8-byte-aligned word at data offset `pos`.
    ///
    /// # Safety
    ///
    /// `pos + 8 <= capacity`, `pos` a multiple of 8, and no one writes
    /// the word concurrently (the consumer reads only published frames).
    unsafe fn read_word(&self, pos: usize) -> u64 {
        // SAFETY: in the data area by the caller's bound, 8-aligned (base
        // is 128-aligned, RING_HEADER and pos are multiples of 8).
        unsafe { self.data(pos).cast::<u64>().read() }
    }

    /// # Safety
    ///
    /// As for `read_word`, and the caller is the producer writing free
    /// space (no one reads the word concurrently).
    unsafe fn write_word(&self, pos: usize, word: u64) {
        // SAFETY: as in `read_word`; exclusive by the caller's contract.
        unsafe { self.data(pos).cast::<u64>().write(word) }
    }

    /// # Safety
    ///
    /// `pos + dst.len() <= capacity` and the bytes are a published frame.
    #[cfg_attr(not(test), allow(dead_code))] // the ring's API; tests use it
    unsafe fn read_bytes(&self, pos: usize, dst: &mut [u8]) {
        // SAFETY: in bounds by the caller's contract; `dst` is a local
        // slice and cannot overlap the shared mapping's frame.
        unsafe { std::ptr::copy_nonoverlapping(self.data(pos), dst.as_mut_ptr(), dst.len()) }
    }

    /// # Safety
    ///
    /// `pos + src.len() <= capacity` and the bytes are free space owned by
    /// the producer.
    #[cfg_attr(not(test), allow(dead_code))] // the ring's API; tests use it
    unsafe fn write_bytes(&self, pos: usize, src: &[u8]) {
        // SAFETY: in bounds by the caller's contract; `src` is the
        // caller's slice, not part of the free space being written.
        unsafe { std::ptr::copy_nonoverlapping(src.as_ptr(), self.data(pos), src.len()) }
    }

    /// The address of data offset `pos`.
    fn data(&self, pos: usize) -> *mut u8 {
        self.base
            .as_ptr()
            .wrapping_add(RING_HEADER)
            .wrapping_add(pos)
    }
}

#[cfg(loom)]
struct Mem {
    shared: loom::sync::Arc<LoomRing>,
}

/// The whole ring as loom objects: the indices as loom atomics, the data
/// as one loom cell per 8-byte word.
#[cfg(loom)]
struct LoomRing {
    tail: AtomicU64,
    head: AtomicU64,
    data: Box<[crate::loom::UnsafeCell<u64>]>,
}

#[cfg(loom)]
impl Mem {
    fn tail(&self) -> &AtomicU64 {
        &self.shared.tail
    }

    fn head(&self) -> &AtomicU64 {
        &self.shared.head
    }

    unsafe fn read_word(&self, pos: usize) -> u64 {
        // SAFETY: loom checks that no write to this word races with us.
        self.shared.data[pos / 8].with(|p| unsafe { *p })
    }

    unsafe fn write_word(&self, pos: usize, word: u64) {
        // SAFETY: loom checks that no access to this word races with us.
        self.shared.data[pos / 8].with_mut(|p| unsafe { *p = word })
    }

    unsafe fn read_bytes(&self, pos: usize, dst: &mut [u8]) {
        for (i, chunk) in dst.chunks_mut(8).enumerate() {
            // SAFETY: forwarded contract (a published frame).
            let word = unsafe { self.read_word(pos + 8 * i) }.to_le_bytes();
            chunk.copy_from_slice(&word[..chunk.len()]);
        }
    }

    unsafe fn write_bytes(&self, pos: usize, src: &[u8]) {
        for (i, chunk) in src.chunks(8).enumerate() {
            let mut word = [0u8; 8];
            word[..chunk.len()].copy_from_slice(chunk);
            // SAFETY: forwarded contract (free space of the producer).
            unsafe { self.write_word(pos + 8 * i, u64::from_le_bytes(word)) };
        }
    }
}

/// A fresh ring of `capacity` data bytes and its two ends (loom models
/// only: there is no shared mapping under loom).
#[cfg(loom)]
pub(crate) fn loom_pair(capacity: usize) -> (Producer, Consumer) {
    check_capacity(capacity).unwrap();
    let shared = loom::sync::Arc::new(LoomRing {
        tail: AtomicU64::new(0),
        head: AtomicU64::new(0),
        data: (0..capacity / 8)
            .map(|_| crate::loom::UnsafeCell::new(0))
            .collect(),
    });
    let producer = Producer::new(
        Mem {
            shared: shared.clone(),
        },
        capacity,
    );
    (producer, Consumer::new(Mem { shared }, capacity))
}

/// Whether the ring at `base` may hold frames its consumer has not
/// released: its shared indices differ. For a cheap "anything for me?"
/// from any thread of the consumer's process, without the consumer
/// itself. A `true` may be stale (the consumer took the frames but has
/// not yet published its index); a `false` is reliable for every frame
/// whose commit happened before this call (the Acquire load below).
///
/// # Safety
///
/// As for [`Consumer::attach`], except that it may be called while the
/// consumer exists (it only loads the two indices).
#[cfg(not(loom))]
pub(crate) unsafe fn unread(base: NonNull<u8>) -> bool {
    let mem = Mem { base };
    // Acquire: pairs with the producer's Release store of `tail` in
    // `WriteSlot::commit`.
    mem.tail().load(Ordering::Acquire) != mem.head().load(Ordering::Relaxed)
}

/// The fuzz target's body (`fuzz/fuzz_targets/ring_frames.rs`): a ring
/// whose indices and data are arbitrary bytes (as a corrupt or hostile
/// peer could leave them) is read until it reports an error or runs dry;
/// reading it never panics and never touches memory outside the ring.
#[cfg(not(loom))]
pub(crate) fn fuzz_consumer(bytes: &[u8]) {
    const CAPACITY: usize = 256;
    #[repr(align(128))]
    struct Aligned([u8; RING_HEADER + CAPACITY]);
    let mut mem = Box::new(Aligned([0; RING_HEADER + CAPACITY]));
    let base = NonNull::from(&mut mem.0).cast::<u8>();
    // SAFETY: `base` is 128-aligned and `footprint(CAPACITY)` bytes long;
    // no handle exists yet.
    unsafe { init(base, CAPACITY) }.expect("a valid capacity");
    let (idx, data) = bytes.split_at(bytes.len().min(16));
    let mut w = [0u8; 16];
    w[..idx.len()].copy_from_slice(idx);
    let (tail, head) = (
        u64::from_le_bytes(w[..8].try_into().unwrap()),
        u64::from_le_bytes(w[8..].try_into().unwrap()),
    );
    let n = data.len().min(CAPACITY);
    // SAFETY: within the ring's footprint; no handle exists yet.
    unsafe {
        base.add(TAIL_AT).cast::<u64>().write(tail);
        base.add(HEAD_AT).cast::<u64>().write(head);
        std::ptr::copy_nonoverlapping(data.as_ptr(), base.add(RING_HEADER).as_ptr(), n);
    }
    // SAFETY: initialized above; this is the only handle.
    let mut c = unsafe { Consumer::attach(base, CAPACITY) }.expect("init ran");
    for _ in 0..64 {
        match c.try_peek() {
            Ok(Some(f)) => {
                assert!(f.payload().len() <= max_payload(CAPACITY));
                f.release();
            }
            Ok(None) | Err(_) => break,
        }
    }
    // (The consumer has no destructor; `mem` outlives its last use.)
    drop(mem);
}

/// Checks the magic and capacity [`init`] wrote.
///
/// # Safety
///
/// As for [`Producer::attach`].
#[cfg(not(loom))]
unsafe fn attach_mem(base: NonNull<u8>, capacity: usize) -> Result<Mem, Error> {
    check_capacity(capacity)?;
    assert!(
        base.as_ptr() as usize % ALIGN == 0,
        "a ring's base must be {ALIGN}-byte aligned"
    );
    // SAFETY: within the producer's line (the caller guarantees the
    // footprint); written once by `init` before any handle existed.
    let (magic, recorded) = unsafe {
        (
            base.add(MAGIC_AT).cast::<u64>().read(),
            base.add(CAPACITY_AT).cast::<u64>().read(),
        )
    };
    if magic != MAGIC {
        return Err(Error::new(
            ErrorKind::SharedMemory,
            "no ring at this place in the shared region (its magic word is missing): the \
             ring was never initialized, or the processes disagree on the region's layout",
        ));
    }
    if recorded != capacity as u64 {
        return Err(Error::new(
            ErrorKind::SharedMemory,
            format!(
                "the ring here was initialized with a capacity of {recorded} bytes, but this \
                 process expects {capacity}: every process of a job must compute the same \
                 layout (same build, same configuration)"
            ),
        ));
    }
    Ok(Mem { base })
}

/// The ring has no room for the frame right now. The ring never blocks:
/// the caller decides what to do, and to stay deadlock free it must make
/// progress on its *own* incoming rings before retrying (the consumer of
/// this ring may be waiting for room in one of them). See `README.md`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Full;

/// The writing end of a ring. At most one exists per ring, in all
/// processes together.
pub(crate) struct Producer {
    mem: Mem,
    capacity: usize,
    /// Our own index: bytes committed. Only we write the shared `tail`,
    /// so this copy is always exact.
    tail: u64,
    /// The consumer's index as last loaded: may be behind the real one,
    /// which only under-states the free space.
    head_cache: u64,
}

// SAFETY: a Producer is the unique writer of its ring's tail and free
// space; moving it to another thread moves that role. The ring memory
// stays valid by the attach contract, independent of the thread.
unsafe impl Send for Producer {}

impl Producer {
    /// The producer of the ring at `base`, which [`init`] prepared with
    /// the same `capacity`.
    ///
    /// # Errors
    ///
    /// [`ErrorKind::InvalidConfig`] for a capacity [`init`] would refuse;
    /// [`ErrorKind::SharedMemory`] if no ring was initialized there or it
    /// was initialized with another capacity.
    ///
    /// # Safety
    ///
    /// - `base` is [`ALIGN`]-aligned and valid for reads and writes of
    ///   [`footprint`]`(capacity)` bytes for the life of the producer
    ///   (the region stays mapped);
    /// - [`init`] ran on it before, and happens-before this call (for
    ///   another process: it ran before that process was started);
    /// - no other producer of this ring exists, in any process, and the
    ///   memory is accessed only through one producer and one consumer.
    #[cfg(not(loom))]
    pub(crate) unsafe fn attach(base: NonNull<u8>, capacity: usize) -> Result<Producer, Error> {
        // SAFETY: forwarded contract.
        let mem = unsafe { attach_mem(base, capacity) }?;
        Ok(Producer::new(mem, capacity))
    }

    fn new(mem: Mem, capacity: usize) -> Producer {
        // Relaxed: our own index, written only by this role.
        let tail = mem.tail().load(Ordering::Relaxed);
        // Acquire: pairs with the consumer's Release store in
        // `Consumer::publish`, as in `try_reserve`.
        let head_cache = mem.head().load(Ordering::Acquire);
        Producer {
            mem,
            capacity,
            tail,
            head_cache,
        }
    }

    /// The largest payload [`Producer::try_reserve`] accepts.
    pub(crate) fn max_payload(&self) -> usize {
        max_payload(self.capacity)
    }

    /// Reserves a frame with a `len`-byte payload and the given `tag`, or
    /// reports [`Full`]. Nothing is visible to the consumer until
    /// [`WriteSlot::commit`]; a slot dropped uncommitted is forgotten.
    ///
    /// Reads the consumer's shared index only when the cached one shows
    /// too little room.
    ///
    /// # Panics
    ///
    /// If `tag` is [`PAD_TAG`] or `len` exceeds
    /// [`max_payload`](Producer::max_payload) (caller bugs); if the
    /// consumer's index is impossible (not within one capacity behind
    /// ours): the ring's memory was overwritten.
    pub(crate) fn try_reserve(&mut self, tag: u32, len: usize) -> Result<WriteSlot<'_>, Full> {
        assert!(
            tag != PAD_TAG,
            "the ring tag {PAD_TAG:#x} is reserved for padding"
        );
        assert!(
            len <= self.max_payload(),
            "a {len}-byte payload exceeds the ring's limit of {} bytes (capacity {})",
            self.max_payload(),
            self.capacity
        );
        let size = frame_size(len);
        let pos = self.tail as usize & (self.capacity - 1);
        let to_end = self.capacity - pos;
        // The wrap rule: a frame never straddles the end. If it does not
        // fit before the end, a padding frame fills the end and the frame
        // starts at 0.
        let (at, need) = if size <= to_end {
            (pos, size)
        } else {
            (0, to_end + size)
        };
        if self.free() < need {
            // Acquire: pairs with the consumer's Release store of `head`
            // in `Consumer::publish`, so its reads of the frames it
            // released happen before we overwrite them.
            self.head_cache = self.mem.head().load(Ordering::Acquire);
            if self.free() < need {
                return Err(Full);
            }
        }
        Ok(WriteSlot {
            pad_at: (at != pos).then_some(pos),
            at,
            len,
            tag,
            advance: need,
            producer: self,
        })
    }

    /// Reserves, fills with `payload` and commits one frame.
    ///
    /// # Panics
    ///
    /// As [`Producer::try_reserve`].
    #[cfg_attr(not(test), allow(dead_code))] // the ring's API; tests use it
    pub(crate) fn try_send(&mut self, tag: u32, payload: &[u8]) -> Result<(), Full> {
        let mut slot = self.try_reserve(tag, payload.len())?;
        slot.copy_from(payload);
        slot.commit();
        Ok(())
    }

    /// Free bytes as far as the cached consumer index tells.
    fn free(&self) -> usize {
        let used = self.tail.wrapping_sub(self.head_cache);
        assert!(
            used <= self.capacity as u64,
            "shared-memory ring corrupt: the consumer's index {} is not within {} bytes \
             behind the producer's {}; the ring's memory was overwritten",
            self.head_cache,
            self.capacity,
            self.tail
        );
        self.capacity - used as usize
    }
}

/// A reserved, not yet published frame. Fill its payload, then
/// [`commit`](WriteSlot::commit).
#[must_use = "a reserved frame is published only by `commit`"]
pub(crate) struct WriteSlot<'a> {
    producer: &'a mut Producer,
    /// Where a padding frame goes, if the frame wraps to 0.
    pad_at: Option<usize>,
    /// Data offset of the frame's header.
    at: usize,
    len: usize,
    tag: u32,
    /// Bytes the tail moves on commit: padding (if any) plus the frame.
    advance: usize,
}

impl WriteSlot<'_> {
    /// The payload's length in bytes.
    #[cfg_attr(not(test), allow(dead_code))] // the ring's API; tests use it
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// The payload bytes, to fill in place. They hold whatever an earlier
    /// frame left there.
    #[cfg(not(loom))]
    pub(crate) fn payload_mut(&mut self) -> &mut [u8] {
        let p = self.producer.mem.data(self.at + FRAME_HEADER);
        // SAFETY: `at + FRAME_HEADER + len <= capacity` (try_reserve put
        // the frame inside the buffer), the bytes are free space that
        // only the producer touches until commit publishes them (the
        // consumer released them, Acquire in try_reserve), they are
        // initialized (the region is zero-filled at creation), and the
        // slice borrows the slot mutably, so there is one such slice.
        unsafe { std::slice::from_raw_parts_mut(p, self.len) }
    }

    /// Copies `src` into the payload.
    ///
    /// # Panics
    ///
    /// If `src.len()` differs from [`len`](WriteSlot::len).
    #[cfg_attr(not(test), allow(dead_code))] // the ring's API; tests use it
    pub(crate) fn copy_from(&mut self, src: &[u8]) {
        assert_eq!(
            src.len(),
            self.len,
            "payload length differs from the reservation"
        );
        // SAFETY: inside the buffer and free space of the producer (see
        // `payload_mut`).
        unsafe { self.producer.mem.write_bytes(self.at + FRAME_HEADER, src) };
    }

    /// Publishes the frame (and the padding before it, if it wrapped).
    pub(crate) fn commit(self) {
        let p = self.producer;
        if let Some(pad) = self.pad_at {
            let rest = p.capacity - pad - FRAME_HEADER;
            // SAFETY: `pad` is 8-aligned and at most capacity - 8 (it is a
            // frame position short of the end), free space of the producer.
            unsafe { p.mem.write_word(pad, encode(rest, PAD_TAG)) };
        }
        // SAFETY: the frame header at `at` is inside the buffer, 8-aligned
        // and free space of the producer.
        unsafe { p.mem.write_word(self.at, encode(self.len, self.tag)) };
        p.tail += self.advance as u64;
        // Release: pairs with the consumer's Acquire load of `tail` in
        // `Consumer::try_peek`, so the padding, header and payload written
        // above are visible to it once it sees the new tail.
        p.mem.tail().store(p.tail, Ordering::Release);
    }
}

/// The reading end of a ring. At most one exists per ring, in all
/// processes together.
pub(crate) struct Consumer {
    mem: Mem,
    capacity: usize,
    /// Our own index: bytes consumed, including releases not yet
    /// published to the producer.
    head: u64,
    /// The value of the shared `head` we last stored.
    published: u64,
    /// The producer's index as last loaded (always validated).
    tail_cache: u64,
}

// SAFETY: a Consumer is the unique reader of its ring's frames and the
// unique writer of its head; moving it to another thread moves that role.
unsafe impl Send for Consumer {}

impl Consumer {
    /// The consumer of the ring at `base`, which [`init`] prepared with
    /// the same `capacity`.
    ///
    /// # Errors
    ///
    /// As [`Producer::attach`].
    ///
    /// # Safety
    ///
    /// As [`Producer::attach`], with "consumer" for "producer".
    #[cfg(not(loom))]
    pub(crate) unsafe fn attach(base: NonNull<u8>, capacity: usize) -> Result<Consumer, Error> {
        // SAFETY: forwarded contract.
        let mem = unsafe { attach_mem(base, capacity) }?;
        Ok(Consumer::new(mem, capacity))
    }

    fn new(mem: Mem, capacity: usize) -> Consumer {
        // Relaxed: our own index, written only by this role.
        let head = mem.head().load(Ordering::Relaxed);
        Consumer {
            mem,
            capacity,
            head,
            published: head,
            // "Nothing known to be published": the first peek loads tail.
            tail_cache: head,
        }
    }

    /// Releases are published once this many bytes are pending (a
    /// quarter of the ring), or when the ring is found empty.
    fn batch(&self) -> u64 {
        self.capacity as u64 / 4
    }

    /// The oldest unreleased frame, if one is published; padding frames
    /// are skipped. Calling it again without releasing the frame returns
    /// the same frame. Finding the ring empty publishes pending releases,
    /// so a producer waiting for room is never left waiting by batching.
    ///
    /// # Errors
    ///
    /// [`ErrorKind::SharedMemory`] if the producer's index or a frame
    /// header is impossible: an index that is not 8-aligned or more than
    /// a capacity ahead, a length beyond [`max_payload`], a frame that
    /// straddles the end of the buffer or extends past the published
    /// index, a padding frame that does not end at the end of the buffer.
    /// The ring is not advanced, so every later call reports it again.
    pub(crate) fn try_peek(&mut self) -> Result<Option<ReadFrame<'_>>, Error> {
        loop {
            if self.head == self.tail_cache {
                // Acquire: pairs with the producer's Release store in
                // `WriteSlot::commit`, so the frames below the loaded
                // tail are visible.
                let tail = self.mem.tail().load(Ordering::Acquire);
                let ahead = tail.wrapping_sub(self.head);
                if tail % 8 != 0 || ahead > self.capacity as u64 {
                    return Err(corrupt(format!(
                        "the producer's index {tail} is not an 8-aligned index at most {} \
                         bytes ahead of the consumer's {}",
                        self.capacity, self.head
                    )));
                }
                self.tail_cache = tail;
                if ahead == 0 {
                    self.publish();
                    return Ok(None);
                }
            }
            let pos = self.head as usize & (self.capacity - 1);
            let to_end = self.capacity - pos;
            let avail = (self.tail_cache - self.head) as usize;
            // SAFETY: `pos` is 8-aligned (head and every frame size are
            // multiples of 8) and `pos + 8 <= capacity`; the word is in
            // published space (`avail >= 8`: head < tail, both multiples
            // of 8), which the producer does not write until we release it.
            let (len, tag) = decode(unsafe { self.mem.read_word(pos) });
            if tag == PAD_TAG {
                if len + FRAME_HEADER != to_end || to_end > avail {
                    return Err(corrupt(format!(
                        "a padding frame at byte {pos} covers {} bytes, but the end of the \
                         buffer is {to_end} bytes away and {avail} bytes are published",
                        len + FRAME_HEADER
                    )));
                }
                self.head += to_end as u64;
                continue;
            }
            let max = max_payload(self.capacity);
            if len > max {
                return Err(corrupt(format!(
                    "the frame at byte {pos} claims a {len}-byte payload, more than the \
                     ring's limit of {max} (capacity {})",
                    self.capacity
                )));
            }
            let size = frame_size(len);
            if size > to_end || size > avail {
                return Err(corrupt(format!(
                    "the {size}-byte frame at byte {pos} runs past the end of the buffer \
                     ({to_end} bytes away) or past the published index ({avail} bytes \
                     published)"
                )));
            }
            return Ok(Some(ReadFrame {
                pos,
                len,
                tag,
                size,
                consumer: self,
            }));
        }
    }

    /// Publishes released bytes to the producer now (one Release store),
    /// rather than when a batch fills or the ring is found empty.
    pub(crate) fn publish(&mut self) {
        if self.published != self.head {
            self.published = self.head;
            // Release: pairs with the producer's Acquire load of `head` in
            // `Producer::try_reserve`: our reads of the released frames
            // happen before it writes new frames over them.
            self.mem.head().store(self.head, Ordering::Release);
        }
    }
}

/// A published frame, borrowed from the ring until
/// [`release`](ReadFrame::release) (or dropped, which leaves it in the
/// ring for the next [`Consumer::try_peek`]).
#[must_use = "a frame stays in the ring until `release`"]
pub(crate) struct ReadFrame<'a> {
    consumer: &'a mut Consumer,
    /// Data offset of the frame's header.
    pos: usize,
    len: usize,
    tag: u32,
    size: usize,
}

impl ReadFrame<'_> {
    /// The tag the producer gave the frame.
    #[cfg_attr(not(test), allow(dead_code))] // the ring's API; tests use it
    pub(crate) fn tag(&self) -> u32 {
        self.tag
    }

    /// The payload's length in bytes.
    #[cfg_attr(not(test), allow(dead_code))] // the ring's API; tests use it
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// The payload, in place.
    #[cfg(not(loom))]
    pub(crate) fn payload(&self) -> &[u8] {
        let p = self.consumer.mem.data(self.pos + FRAME_HEADER);
        // SAFETY: try_peek checked the frame lies inside the buffer and
        // below the published tail, so the bytes are initialized and the
        // producer does not write them until we release them (which needs
        // `self` by value, ending this borrow).
        unsafe { std::slice::from_raw_parts(p, self.len) }
    }

    /// Copies the payload into `dst`.
    ///
    /// # Panics
    ///
    /// If `dst.len()` differs from [`len`](ReadFrame::len).
    #[cfg_attr(not(test), allow(dead_code))] // the ring's API; tests use it
    pub(crate) fn copy_to(&self, dst: &mut [u8]) {
        assert_eq!(
            dst.len(),
            self.len,
            "buffer length differs from the payload's"
        );
        // SAFETY: a published frame inside the buffer (see `payload`).
        unsafe { self.consumer.mem.read_bytes(self.pos + FRAME_HEADER, dst) };
    }

    /// The payload, copied.
    #[cfg_attr(not(test), allow(dead_code))] // the ring's API; tests use it
    pub(crate) fn to_vec(&self) -> Vec<u8> {
        let mut v = vec![0; self.len];
        self.copy_to(&mut v);
        v
    }

    /// Consumes the frame. Its bytes return to the producer when a batch
    /// of releases is published (see [`Consumer::publish`]).
    pub(crate) fn release(self) {
        let c = self.consumer;
        c.head += self.size as u64;
        if c.head - c.published >= c.batch() {
            c.publish();
        }
    }
}
