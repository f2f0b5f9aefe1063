//! The global address space in memory every locale maps (the symmetric
//! areas of `comm::symmetric`): puts and gets are copies, atomics are
//! atomic instructions on the shared pages, the barrier is a counter and
//! a generation word in the control page, broadcast and reductions pass
//! data through the scratch areas between barriers, and the allocator's
//! and the SPMD group's words lie in the control page. `README.md`
//! beside this file lays the areas out and states the protocols.

use super::heap::{Block, Heap};
use super::memory::{
    ALL_REDUCE, AllocFailure, Answers, AtomicOp, LINE, Memory, Mismatch, REDUCE, Signature, agree,
    body_gone, wait_until, zero_part,
};
use super::nonblocking::{Gets, InFlight};
use crate::comm::symmetric::{Areas, CONTROL_BYTES, SCRATCH_BYTES, SymmetricAreas};
use crate::error::{Error, ErrorKind};
use std::any::Any;
use std::ptr::NonNull;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

// Offsets in the control page (one line per writer group).
/// Barrier: locales arrived at the current barrier (u32).
const BARRIER_COUNT: usize = 0;
/// Barrier: how many barriers completed (u32).
const BARRIER_GEN: usize = LINE;
/// Allocator: lock (u32) at +0, top, last, high (u64) at +8, +16, +24.
const ALLOC_WORDS: usize = 2 * LINE;
/// The result of the current collective allocation, written by locale 0.
const ALLOC_RESULT: usize = 3 * LINE;
/// The SPMD group, five u64 words from here.
const SPMD: usize = 4 * LINE;
/// The running group's handler id.
const SPMD_ID: usize = SPMD;
/// The poison word: 0, or 1 + the locale whose body panicked first.
const SPMD_POISON: usize = SPMD + 8;
/// Groups begun so far (the current group's number).
const SPMD_EPOCH: usize = SPMD + 16;
/// 1 while a group runs (from its `begin` to its `end`), else 0.
const SPMD_RUNNING: usize = SPMD + 24;
/// 0, or 1 + the first locale whose body returned (without a panic).
const SPMD_RETURNED: usize = SPMD + 32;
const _: () = assert!(SPMD + LINE <= CONTROL_BYTES);

/// In each scratch area: the collective signature (three u64) at 0, data
/// from `SCRATCH_DATA` on.
const SCRATCH_DATA: usize = LINE;
/// Bytes of collective data each scratch area holds.
pub(crate) const SCRATCH_DATA_BYTES: usize = SCRATCH_BYTES - SCRATCH_DATA;

// Words of the allocation result line (written by locale 0).
const R_STATUS: usize = 0;
const R_DATA: usize = 8;
const R_HEADER: usize = 16;
const R_DIRTY: usize = 24;
const R_LEFT: usize = 32;
const GRANTED: u64 = 1;
const FULL: u64 = 2;

/// The global address space in the job's symmetric areas.
pub(crate) struct SharedMemory {
    areas: Areas,
    /// Owns the mapping the areas lie in.
    _owner: Arc<dyn SymmetricAreas>,
}

// SAFETY: the pointers are into the owner's mapping, which `SharedMemory`
// keeps alive; everything reached through them is either accessed
// atomically or copied as plain bytes under the protocols of `README.md`
// (memory other processes write anyway).
unsafe impl Send for SharedMemory {}
// SAFETY: as for Send; `SharedMemory` itself is never mutated after
// construction.
unsafe impl Sync for SharedMemory {}

impl SharedMemory {
    pub(crate) fn new(owner: Arc<dyn SymmetricAreas>) -> SharedMemory {
        SharedMemory {
            areas: owner.areas(),
            _owner: owner,
        }
    }

    /// The start of `locale`'s scratch data (`SCRATCH_DATA_BYTES` long).
    fn scratch_data(&self, locale: usize) -> *mut u8 {
        // SAFETY: SCRATCH_DATA < SCRATCH_BYTES, the area's length.
        unsafe { self.areas.scratch[locale].add(SCRATCH_DATA).as_ptr() }
    }

    /// Word `i` (0..3) of `locale`'s collective signature.
    fn signature(&self, locale: usize, i: usize) -> &AtomicU64 {
        assert!(i < 3);
        // SAFETY: the scratch area is aligned to AREA_ALIGN and
        // SCRATCH_BYTES long; word `i` lies in its first line. The area
        // lives as long as `self`; every process accesses it only
        // atomically.
        unsafe {
            self.areas.scratch[locale]
                .add(8 * i)
                .cast::<AtomicU64>()
                .as_ref()
        }
    }

    /// The 64-bit word at `offset` in the control page.
    fn control64(&self, offset: usize) -> &AtomicU64 {
        assert!(offset % 8 == 0 && offset + 8 <= CONTROL_BYTES);
        // SAFETY: in bounds and aligned (checked; the page is aligned to
        // AREA_ALIGN); the page lives as long as `self`; every process
        // accesses control words only atomically.
        unsafe { self.areas.control.add(offset).cast::<AtomicU64>().as_ref() }
    }

    /// The 32-bit word at `offset` in the control page.
    fn control32(&self, offset: usize) -> &AtomicU32 {
        assert!(offset % 4 == 0 && offset + 4 <= CONTROL_BYTES);
        // SAFETY: as in `control64`.
        unsafe { self.areas.control.add(offset).cast::<AtomicU32>().as_ref() }
    }

    /// The allocator over the control page and locale 0's segment.
    fn heap(&self) -> Heap<'_> {
        Heap {
            lock: self.control32(ALLOC_WORDS),
            top: self.control64(ALLOC_WORDS + 8),
            last: self.control64(ALLOC_WORDS + 16),
            high: self.control64(ALLOC_WORDS + 24),
            meta: self.areas.heaps[0],
            bytes: self.areas.heap_bytes,
        }
    }

    /// Publishes this locale's signature (before the first barrier of a
    /// collective).
    fn publish(&self, sig: Signature) {
        for (i, w) in sig.into_iter().enumerate() {
            // Relaxed: the barrier that follows publishes it.
            self.signature(self.areas.here, i)
                .store(w, Ordering::Relaxed);
        }
    }

    /// After the first barrier: whether every locale published the same
    /// signature. Every locale makes the same comparison, so all reach
    /// the same verdict.
    fn agreed(&self) -> Result<(), Mismatch> {
        agree(self.areas.locales, |l| {
            // Relaxed: published before the barrier we passed.
            std::array::from_fn(|i| self.signature(l, i).load(Ordering::Relaxed))
        })
    }

    /// The barrier: a counter of arrivals and a generation number.
    fn barrier_in(&self) {
        let count = self.control32(BARRIER_COUNT);
        let generation = self.control32(BARRIER_GEN);
        // Acquire: we left the previous barrier having seen this
        // generation; this load cannot see a later one before we arrive.
        let g = generation.load(Ordering::Acquire);
        // AcqRel: Release publishes our writes made before the barrier to
        // the last arriver (the count's modifications form one release
        // sequence); Acquire, for the last arriver, takes every locale's.
        if count.fetch_add(1, Ordering::AcqRel) + 1 == self.areas.locales as u32 {
            // Reset before opening: a locale arrives at the next barrier
            // only after it saw the new generation (Release below).
            count.store(0, Ordering::Relaxed);
            // Release: pairs with the waiters' Acquire load of the
            // generation, passing on what the last arriver acquired above.
            generation.store(g.wrapping_add(1), Ordering::Release);
            return;
        }
        // Acquire: pairs with the Release store of the last arriver.
        wait_until(
            || {
                generation.load(Ordering::Acquire) != g
                    || self.poisoned() != 0
                    || self.returned() != 0
            },
            || false,
        );
        // Seeing the poison or the return (Acquire) we also see a
        // generation stored before them: a body that returned after
        // opening this barrier as its last arriver is no reason to panic.
        if generation.load(Ordering::Acquire) == g {
            let p = self.poisoned();
            let (locale, panicked) = if p != 0 {
                (p - 1, true)
            } else {
                (self.returned() - 1, false)
            };
            body_gone(locale as usize, panicked, self.areas.here, "barrier");
        }
    }

    /// 0, or 1 + the first locale whose SPMD body returned (normally).
    fn returned(&self) -> u64 {
        // Acquire: pairs with the Release CAS in `body_ended`.
        self.control64(SPMD_RETURNED).load(Ordering::Acquire)
    }

    /// 0, or 1 + the locale whose SPMD body panicked.
    fn poisoned(&self) -> u64 {
        // Acquire: pairs with the Release CAS in `body_ended`.
        self.control64(SPMD_POISON).load(Ordering::Acquire)
    }
}

impl Memory for SharedMemory {
    fn here(&self) -> usize {
        self.areas.here
    }

    fn locales(&self) -> usize {
        self.areas.locales
    }

    fn heap_bytes(&self) -> usize {
        self.areas.heap_bytes
    }

    fn mapped(&self, locale: usize) -> Option<NonNull<u8>> {
        self.areas.heaps.get(locale).copied()
    }

    fn put_nb(
        &self,
        locale: usize,
        _: usize,
        _: &[u8],
        _: Option<(usize, AtomicOp)>,
        _: Answers,
    ) -> Result<InFlight, Error> {
        Err(unmapped(locale))
    }

    fn get_nb(&self, locale: usize, _: usize, _: usize) -> Result<Gets, Error> {
        Err(unmapped(locale))
    }

    fn atomic(&self, locale: usize, _: usize, _: AtomicOp) -> Result<Result<u64, u64>, Error> {
        Err(unmapped(locale))
    }

    fn barrier(&self) -> Result<(), Mismatch> {
        self.barrier_in();
        Ok(())
    }

    /// Through the root's scratch area, in pieces of
    /// `SCRATCH_DATA_BYTES`, two barriers per piece (written, then read).
    fn broadcast(&self, sig: Signature, root: usize, bytes: &mut [u8]) -> Result<(), Mismatch> {
        let here = self.areas.here;
        let len = bytes.len();
        let piece = SCRATCH_DATA_BYTES;
        let area = self.scratch_data(root);
        let fill = |at: usize, bytes: &[u8]| {
            let n = piece.min(len - at);
            // SAFETY: `area` is root's scratch data, SCRATCH_DATA_BYTES
            // long, `n` at most that; between the barriers around this
            // piece only the root writes it, and no locale reads it.
            unsafe { crate::copy::copy_raw(bytes[at..].as_ptr(), area, n) };
        };
        self.publish(sig);
        if here == root {
            fill(0, bytes);
        }
        self.barrier_in();
        self.agreed()?;
        let mut at = 0;
        loop {
            let n = piece.min(len - at);
            if here != root {
                // SAFETY: as in `fill`; the root wrote this piece before
                // the barrier we passed and will not write again before
                // the next.
                unsafe { crate::copy::copy_raw(area, bytes[at..].as_mut_ptr(), n) };
            }
            at += n;
            self.barrier_in();
            if at >= len {
                return Ok(());
            }
            if here == root {
                fill(at, bytes);
            }
            self.barrier_in();
        }
    }

    /// Piece by piece through the scratch areas: each locale writes a
    /// piece of its value into its own scratch area; after a barrier the
    /// locales that want the result copy that piece of every locale's
    /// value into a buffer of `locales` values; a second barrier frees
    /// the scratch areas for the next piece (or collective). Then each of
    /// them folds the buffer.
    fn reduce(
        &self,
        sig: Signature,
        root: Option<usize>,
        value: &[u8],
        fold: &dyn Fn(&[u8]) -> Vec<u8>,
    ) -> Result<Option<Vec<u8>>, Mismatch> {
        let (here, locales) = (self.areas.here, self.areas.locales);
        debug_assert!(sig[0] == REDUCE || sig[0] == ALL_REDUCE);
        let size = value.len();
        let wants = root.is_none_or(|r| r == here);
        self.publish(sig);
        // values[l * size..][..size] is locale l's value.
        let mut values = vec![0u8; if wants { locales * size } else { 0 }];
        let mut at = 0;
        loop {
            let n = SCRATCH_DATA_BYTES.min(size - at);
            // SAFETY: our scratch data, SCRATCH_DATA_BYTES long, `n` at
            // most that; only we write it, and no locale reads it between
            // the barrier that followed every read of the last piece (or
            // collective) and the barrier below.
            unsafe { crate::copy::copy_raw(value[at..].as_ptr(), self.scratch_data(here), n) };
            self.barrier_in();
            if at == 0 {
                self.agreed()?;
            }
            if wants {
                for l in 0..locales {
                    let to = &mut values[l * size + at..][..n];
                    // SAFETY: locale l wrote this piece (`n` bytes: the
                    // sizes agree) at the start of its scratch data before
                    // the barrier we passed, and writes it again only
                    // after the next one; `to` is `n` bytes of our own
                    // buffer.
                    unsafe { crate::copy::copy_raw(self.scratch_data(l), to.as_mut_ptr(), n) };
                }
            }
            at += n;
            self.barrier_in();
            if at >= size {
                break;
            }
        }
        Ok(wants.then(|| fold(&values)))
    }

    /// Signatures, then locale 0 grants under the allocator's lock and
    /// writes the answer into the control page; every locale reads it,
    /// zeroes its part, and a last barrier holds everyone until every
    /// part is zero.
    fn alloc(&self, sig: Signature, bytes: usize, align: usize) -> Result<Block, AllocFailure> {
        let (here, locales) = (self.areas.here, self.areas.locales);
        self.publish(sig);
        self.barrier_in();
        let agreed = self.agreed();
        let result = |off: usize| self.control64(ALLOC_RESULT + off);
        if here == 0 && agreed.is_ok() {
            // Relaxed: the barrier below publishes the result.
            match self.heap().grant(bytes, align, locales as u64) {
                Ok(b) => {
                    result(R_DATA).store(b.data as u64, Ordering::Relaxed);
                    result(R_HEADER).store(b.header as u64, Ordering::Relaxed);
                    result(R_DIRTY).store(b.dirty as u64, Ordering::Relaxed);
                    result(R_STATUS).store(GRANTED, Ordering::Relaxed);
                }
                Err(full) => {
                    result(R_LEFT).store(full.left as u64, Ordering::Relaxed);
                    result(R_STATUS).store(FULL, Ordering::Relaxed);
                }
            }
        }
        self.barrier_in();
        agreed.map_err(AllocFailure::Mismatch)?;
        // Relaxed: written by locale 0 before the barrier we passed.
        if result(R_STATUS).load(Ordering::Relaxed) == FULL {
            let left = result(R_LEFT).load(Ordering::Relaxed) as usize;
            return Err(AllocFailure::Full(super::heap::Full { left }));
        }
        let block = Block {
            data: result(R_DATA).load(Ordering::Relaxed) as usize,
            header: result(R_HEADER).load(Ordering::Relaxed) as usize,
            dirty: result(R_DIRTY).load(Ordering::Relaxed) as usize,
        };
        // SAFETY: data + dirty <= data + bytes <= heap_bytes (granted);
        // no other locale touches this part of our segment before the
        // barrier below (it has no pointer to the new block yet).
        unsafe { zero_part(self.areas.heaps[here], &block) };
        self.barrier_in();
        Ok(block)
    }

    fn release(&self, header: usize) {
        self.heap().release(header);
    }

    /// Claims the group word, records the handler, clears the poison and
    /// return words of an earlier group and the barrier's count (which a
    /// barrier that ended by a panic may have left part-way; nothing
    /// waits in one now: the earlier group ended only after every body
    /// had), and starts a new epoch.
    fn begin_group(&self, id: u64) -> Result<(), Error> {
        // Acquire: pairs with `end_group`'s Release store, so the last
        // group's writes to these words are behind us.
        if self
            .control64(SPMD_RUNNING)
            .compare_exchange(0, 1, Ordering::Acquire, Ordering::Relaxed)
            .is_err()
        {
            return Err(group_running());
        }
        self.control32(BARRIER_COUNT).store(0, Ordering::Relaxed);
        self.control64(SPMD_ID).store(id, Ordering::Relaxed);
        self.control64(SPMD_POISON).store(0, Ordering::Relaxed);
        self.control64(SPMD_RETURNED).store(0, Ordering::Relaxed);
        // Release: pairs with `running_group`'s Acquire load: a body that
        // sees this epoch sees the words above. (The requests that start
        // the bodies are sent after this, and carry it anyway.)
        self.control64(SPMD_EPOCH).fetch_add(1, Ordering::Release);
        Ok(())
    }

    fn running_group(&self) -> Option<(u64, u64)> {
        // Acquire: pairs with `begin_group`'s Release increment.
        let epoch = self.control64(SPMD_EPOCH).load(Ordering::Acquire);
        // Relaxed: published with the epoch (above).
        let running = self.control64(SPMD_RUNNING).load(Ordering::Relaxed) == 1;
        let id = self.control64(SPMD_ID).load(Ordering::Relaxed);
        running.then_some((id, epoch))
    }

    fn body_started(&self, _: u64) {}

    /// Poisons the collectives (a panic) or records the return (unless a
    /// task of the body is still inside a collective: it may yet arrive):
    /// barrier waits watch both words.
    fn body_ended(&self, panicked: bool, in_collective: bool) {
        let word = if panicked {
            SPMD_POISON
        } else if !in_collective {
            SPMD_RETURNED
        } else {
            return;
        };
        // Release: pairs with the Acquire loads of `poisoned`/`returned`
        // (and `end_group`), after our writes of the body. Only the first
        // panic poisons, so the poison names an original panic, never a
        // follow-on one.
        let _ = self.control64(word).compare_exchange(
            0,
            self.areas.here as u64 + 1,
            Ordering::Release,
            Ordering::Relaxed,
        );
    }

    fn end_group(&self) -> Option<usize> {
        // Acquire: pairs with the Release CAS of `body_ended` (which
        // also happened before its body's reply, which we joined).
        let p = self.poisoned();
        // Release: pairs with `begin_group`'s Acquire CAS.
        self.control64(SPMD_RUNNING).store(0, Ordering::Release);
        (p as usize).checked_sub(1)
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}

/// Every segment is mapped here: the one-sided calls never come.
fn unmapped(locale: usize) -> Error {
    Error::new(
        ErrorKind::Locale,
        format!("cantus::pgas: locale {locale}'s heap segment is not mapped by this process"),
    )
}

/// `spmd` while a group runs.
pub(crate) fn group_running() -> Error {
    Error::new(
        ErrorKind::Locale,
        "cantus::pgas::spmd: an SPMD group is already running (spmd and coforall_locales \
         bodies that call collectives neither nest nor run side by side); call the \
         collectives from the running body instead"
            .to_string(),
    )
}
