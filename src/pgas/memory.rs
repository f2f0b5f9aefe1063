//! The memory under the global address space: what a locale's pgas
//! operations need from the job, whatever moves the bytes. Every pgas
//! operation goes through the installed [`Memory`]; two implement it
//! (`README.md` beside this file, "Two memories"):
//!
//! - [`SharedMemory`](super::shared::SharedMemory): the symmetric areas
//!   every locale maps (`comm::symmetric`); a put is a copy, an atomic
//!   an atomic instruction, the barrier a counter and a generation word;
//! - [`MessageMemory`](super::messages::MessageMemory): each locale's
//!   segment is memory of its own process; other locales reach it by
//!   remote calls that its owner runs inside its poll, and collectives
//!   are trees of messages.
//!
//! The caller has checked what it hands over (a locale of the job, bytes
//! inside the segment, an SPMD body that may call collectives, one
//! collective at a time per locale); the memory moves the bytes and
//! keeps the guarantees of `README.md` (ordering, agreement, heap full on
//! every locale, poison).

use super::heap::{Block, Full};
use super::nonblocking::{Gets, InFlight};
use crate::comm::collective::AlignedBytes;
use crate::error::Error;
use std::any::Any;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU64, Ordering};

/// A cache line as far as false sharing goes (two 64-byte lines: the
/// adjacent-line prefetcher pulls pairs on x86): the unit global memory
/// is laid out by (block headers and alignment, the control page's
/// words).
pub(crate) const LINE: usize = 128;

/// What a collective call was, compared across locales so that all can
/// tell they called the same thing: (kind, two arguments).
pub(crate) type Signature = [u64; 3];
/// Kinds of collective calls (a [`Signature`]'s first word).
pub(crate) const ALLOC: u64 = 1;
pub(crate) const BROADCAST: u64 = 2;
pub(crate) const REDUCE: u64 = 3;
pub(crate) const ALL_REDUCE: u64 = 4;
/// A barrier (compared only by the message memory; the shared memory's
/// barrier carries no signature, to stay one barrier).
pub(crate) const BARRIER: u64 = 5;
/// The exchanges (`exchange.rs`, over messages between the bodies),
/// whose signatures are (kind, element size, elements per locale where
/// every locale sends as many, else 0).
pub(crate) const ALL_GATHER: u64 = 6;
pub(crate) const ALL_GATHER_V: u64 = 7;
pub(crate) const ALL_TO_ALL: u64 = 8;
pub(crate) const ALL_TO_ALL_V: u64 = 9;
pub(crate) const SCAN: u64 = 10;
pub(crate) const EXCLUSIVE_SCAN: u64 = 11;

/// The locales' collective calls differ: locale 0 called `first`, locale
/// `locale` (the lowest that differs) called `theirs`. Every locale gets
/// the same one.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Mismatch {
    pub(crate) first: Signature,
    pub(crate) locale: usize,
    pub(crate) theirs: Signature,
}

/// Compares every locale's signature (`sig(l)`, `l` in `0..locales`)
/// with locale 0's: the same comparison wherever it runs, so every
/// locale that makes it (or is told its result) reports the same
/// mismatch.
pub(crate) fn agree(locales: usize, sig: impl Fn(usize) -> Signature) -> Result<(), Mismatch> {
    let first = sig(0);
    (1..locales)
        .map(|l| (l, sig(l)))
        .find(|&(_, theirs)| theirs != first)
        .map_or(Ok(()), |(locale, theirs)| {
            Err(Mismatch {
                first,
                locale,
                theirs,
            })
        })
}

/// Why a collective allocation gave no block (on every locale alike).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum AllocFailure {
    /// The heap has no room.
    Full(Full),
    /// The locales asked for different things.
    Mismatch(Mismatch),
}

/// A read-modify-write, load or store on a 64-bit word of global memory.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum AtomicOp {
    /// Acquire.
    Load,
    /// Release.
    Store(u64),
    /// AcqRel, wrapping.
    FetchAdd(u64),
    /// AcqRel.
    Swap(u64),
    /// (current, new): AcqRel on success, Acquire on failure.
    CompareExchange(u64, u64),
}

impl AtomicOp {
    /// Applies the operation to `word` with the orderings above: `Ok`
    /// with the previous value (0 for a store), `Err(actual)` for a
    /// compare-exchange that failed.
    pub(crate) fn apply(self, word: &AtomicU64) -> Result<u64, u64> {
        // The orderings are those `GlobalPtr`'s docs promise
        // (`README.md`, "Global pointers and atomics"): a store or RMW
        // releases the caller's earlier writes to whoever loads or RMWs
        // its value (or a later one) with Acquire.
        match self {
            AtomicOp::Load => Ok(word.load(Ordering::Acquire)),
            AtomicOp::Store(v) => {
                word.store(v, Ordering::Release);
                Ok(0)
            }
            AtomicOp::FetchAdd(v) => Ok(word.fetch_add(v, Ordering::AcqRel)),
            AtomicOp::Swap(v) => Ok(word.swap(v, Ordering::AcqRel)),
            AtomicOp::CompareExchange(current, new) => {
                word.compare_exchange(current, new, Ordering::AcqRel, Ordering::Acquire)
            }
        }
    }
}

/// Whether the calls of a put over messages are answered, their answers
/// its completion ([`Memory::put_nb`]), or not (`halo.rs`: the consumer
/// waits only for the signal, and knows by other means when the bytes
/// may be written again).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Answers {
    Wanted,
    Unwanted,
}

/// The global address space's memory, as one locale sees it. The
/// one-sided half (`put_nb`, `get_nb`, `atomic`) is called from any task or
/// thread; the collective half only from this locale's SPMD body (one
/// collective at a time, checked by the caller); the group half from the
/// hooks the active-message layer calls (`remote::SpmdHooks`).
pub(crate) trait Memory: Send + Sync + 'static {
    /// This locale.
    fn here(&self) -> usize;

    /// The locales of the job.
    fn locales(&self) -> usize;

    /// Bytes of every locale's heap segment.
    fn heap_bytes(&self) -> usize;

    /// Where this process maps `locale`'s heap segment (`heap_bytes`
    /// long, aligned to a page), if it does: the shared memory maps every
    /// locale's, the message memory only this locale's. A mapped segment
    /// is accessed in place (copies, CPU atomics); the others only
    /// through `put_nb`, `get_nb` and `atomic`. Valid while `self` lives.
    fn mapped(&self, locale: usize) -> Option<NonNull<u8>>;

    /// Starts copying `src` to `offset` of `locale`'s segment, which
    /// this process does not map (the bytes lie in the segment: checked
    /// by the caller), and returns once `src` may be reused: the calls
    /// carrying it, unanswered. With a `signal` (a word's offset in the
    /// same segment, a store or fetch_add), the owner applies it once
    /// every byte is in place. Once [`InFlight::finish`] returned, the
    /// bytes are there: a later operation of the caller, on any locale,
    /// comes after it (`README.md`, "Ordering").
    ///
    /// With [`Answers::Unwanted`] the calls are answered by nobody: the
    /// [`InFlight`] is complete at once, and the signal (applied after
    /// every byte is in place) is the only sign they landed.
    fn put_nb(
        &self,
        locale: usize,
        offset: usize,
        src: &[u8],
        signal: Option<(usize, AtomicOp)>,
        answers: Answers,
    ) -> Result<InFlight, Error>;

    /// Starts copying `len` bytes from `offset` of `locale`'s segment,
    /// which this process does not map: the calls fetching them
    /// ([`Gets::finish`] copies them out).
    fn get_nb(&self, locale: usize, offset: usize, len: usize) -> Result<Gets, Error>;

    /// Copies `dst.len()` bytes from `offset` of `locale`'s segment, which
    /// this process does not map, into `dst`, and returns once they are
    /// there: [`get_nb`](Self::get_nb)'s calls, their answers copied out,
    /// unless the memory has a way to receive them straight into `dst`.
    fn get_into(&self, locale: usize, offset: usize, dst: &mut [u8]) -> Result<(), Error> {
        self.get_nb(locale, offset, dst.len())?.finish(dst)
    }

    /// Applies `op` to the 8-byte-aligned word at `offset` of `locale`'s
    /// segment, which this process does not map, as [`AtomicOp::apply`]
    /// would there.
    fn atomic(&self, locale: usize, offset: usize, op: AtomicOp)
    -> Result<Result<u64, u64>, Error>;

    /// Waits until every locale called `barrier`; every locale's writes
    /// to global memory before it are visible to every locale after it.
    /// Panics (naming the locale) if a locale's body ended without it.
    fn barrier(&self) -> Result<(), Mismatch>;

    /// Copies `bytes` from `root` into `bytes` on every other locale
    /// (`sig` says `root` and the length, so that every locale can check
    /// every other called the same).
    fn broadcast(&self, sig: Signature, root: usize, bytes: &mut [u8]) -> Result<(), Mismatch>;

    /// Gathers every locale's `value` (all of one size) at `root`, or at
    /// every locale if `root` is `None`, and returns there what `fold`
    /// makes of them (the values concatenated in locale order), `None`
    /// elsewhere. A locale that folds calls `fold` once; every locale
    /// that gets a result gets the same bytes.
    fn reduce(
        &self,
        sig: Signature,
        root: Option<usize>,
        value: &[u8],
        fold: &dyn Fn(&[u8]) -> Vec<u8>,
    ) -> Result<Option<Vec<u8>>, Mismatch>;

    /// An exchange between every pair of locales (`exchange.rs`) as the
    /// transport's own collective, where this memory makes them: every
    /// locale's `part(l)` goes to locale `l`, and every other locale's part for
    /// this one comes back, in locale order, in an allocation aligned to
    /// `align` (this locale's own entry empty: the caller has it). The
    /// parts are read where they lie, until every locale has them. `None`
    /// where the memory has no such collective, or where the parts are
    /// beyond what one call of it moves (every locale decides alike: the
    /// caller then sends messages); `Some(Err)` if the locales' `sig`s
    /// differ. Panics, naming the locale, if a body ended without it.
    fn exchange<'p>(
        &self,
        _sig: Signature,
        _align: usize,
        _part: &dyn Fn(usize) -> &'p [u8],
    ) -> Option<Result<Vec<AlignedBytes>, Mismatch>> {
        None
    }

    /// Allocates `bytes` aligned to `align` (a power of two up to a page)
    /// at the same offset of every segment (`sig` is `[ALLOC, bytes,
    /// align]`), by the allocator of `heap.rs`, shared by `locales`
    /// handles. Returns on no locale before every locale zeroed its part
    /// of the block. The same answer on every locale.
    fn alloc(&self, sig: Signature, bytes: usize, align: usize) -> Result<Block, AllocFailure>;

    /// One locale's handle of the block whose header is at `header` was
    /// dropped (any thread, never inside a collective's wait). The
    /// block is freed when every locale's was, at the latest before the
    /// next `alloc` decides.
    fn release(&self, header: usize);

    /// Begins an SPMD group of handler `id` (any locale may, one group
    /// runs at a time in a job); an error if one runs.
    fn begin_group(&self, id: u64) -> Result<(), Error>;

    /// The group running as this locale knows it: (handler id, epoch).
    fn running_group(&self) -> Option<(u64, u64)>;

    /// This locale's body of group `epoch` starts (it was claimed).
    fn body_started(&self, epoch: u64);

    /// This locale's body ended, by a panic or not; `in_collective`: a
    /// task it started is still inside a collective (so a body that
    /// returned may yet arrive at the collective the others wait in).
    /// Collectives that can no longer complete end with a panic naming
    /// this locale, on every locale; a panic is recorded for
    /// `end_group` (the first one only) before this returns.
    fn body_ended(&self, panicked: bool, in_collective: bool);

    /// Every body of the group ended: ends it, and returns the locale
    /// whose body panicked first, if one did.
    fn end_group(&self) -> Option<usize>;

    /// For the handlers of one implementation's remote calls, to find it
    /// among the installed memories.
    fn as_any(&self) -> &dyn Any;
}

/// Zeroes the `block.dirty` bytes at `block.data` of `segment`, this
/// locale's part of a block just granted (bytes above the heap's
/// high-water mark were never handed out and are still zero).
///
/// # Safety
///
/// `segment` is this locale's heap segment, at least `block.data +
/// block.dirty` bytes long, and no other locale or task accesses those
/// bytes until the allocation returns (no pointer to the block exists
/// yet).
pub(crate) unsafe fn zero_part(segment: NonNull<u8>, block: &Block) {
    // SAFETY: in bounds and unaccessed meanwhile, as the caller promises.
    unsafe { std::ptr::write_bytes(segment.as_ptr().add(block.data), 0, block.dirty) };
}

/// How long a collective's waiter spins (polling, where it has to) before
/// it starts sleeping.
const SPIN_FOR: std::time::Duration = std::time::Duration::from_micros(20);
/// The first and the longest sleep of a waiter that stopped spinning.
pub(crate) const MIN_PAUSE: std::time::Duration = std::time::Duration::from_micros(5);
pub(crate) const MAX_PAUSE: std::time::Duration = std::time::Duration::from_micros(200);

/// Waits until `done`: spins for [`SPIN_FOR`], calling `progress` between
/// looks (a waiter that needs frames to arrive polls for them: it keeps
/// its worker from polling while it spins), then sleeps for growing
/// pauses (as a task, so its worker runs other tasks and polls the
/// transport; as an outside thread, the OS thread sleeps).
pub(crate) fn wait_until(mut done: impl FnMut() -> bool, progress: impl Fn() -> bool) {
    let start = std::time::Instant::now();
    let mut spins = 0u32;
    while !done() {
        if progress() {
            continue;
        }
        std::hint::spin_loop();
        spins += 1;
        if spins % 64 == 0 && start.elapsed() > SPIN_FOR {
            let mut pause = MIN_PAUSE;
            while !done() {
                if !progress() {
                    crate::task::sleep(pause);
                    pause = (pause * 2).min(MAX_PAUSE);
                }
            }
            return;
        }
    }
}

/// How long [`wait_promptly`] spins (polling) before it starts yielding,
/// and how long it polls and yields before it naps.
const PROMPT_SPIN_FOR: std::time::Duration = std::time::Duration::from_micros(20);
const PROMPT_FOR: std::time::Duration = std::time::Duration::from_millis(10);

/// Waits until `done` for data another locale sends on its own schedule
/// (a signal word, a message between bodies), which `progress` (the
/// transport's poll) applies inside it: spins for [`PROMPT_SPIN_FOR`],
/// polling between looks (the data of a neighbour that is on time
/// arrives within it); then, until [`PROMPT_FOR`], polls and yields
/// between looks, to the locale's other tasks and to other threads (a
/// locale that shares its core with the sender must not keep it from
/// sending); then naps as [`wait_until`] does where a poll brought
/// nothing. A neighbour a little late is never waited for by a nap.
pub(crate) fn wait_promptly(mut done: impl FnMut() -> bool, progress: impl Fn() -> bool) {
    let start = std::time::Instant::now();
    let mut nap = MIN_PAUSE;
    let mut spins = 0u32;
    while !done() {
        let progressed = progress();
        spins += 1;
        if spins % 64 != 0 || start.elapsed() < PROMPT_SPIN_FOR {
            if !progressed {
                std::hint::spin_loop();
            }
        } else if start.elapsed() < PROMPT_FOR {
            crate::task::yield_now();
            std::thread::yield_now();
        } else if !progressed {
            crate::task::sleep(nap);
            nap = (nap * 2).min(MAX_PAUSE);
        }
    }
}

/// Panics for a collective that can never complete because the SPMD body
/// of `locale` ended: by a panic (`panicked`), or by returning while
/// `here` waits in a collective it did not call.
#[track_caller]
pub(crate) fn body_gone(locale: usize, panicked: bool, here: usize, what: &str) -> ! {
    if panicked {
        panic!(
            "cantus: locale {locale} panicked in the SPMD body, so this {what} can never \
             complete (see that locale's error)"
        );
    }
    panic!(
        "cantus: the SPMD body of locale {locale} returned while locale {here} waits in a \
         collective, which can therefore never complete: every locale's body must make \
         the same collective calls (barrier, alloc, broadcast, reduce, ...) in the same order"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn agreement_names_the_lowest_locale_that_differs() {
        let sigs = [[ALLOC, 8, 8], [ALLOC, 8, 8], [REDUCE, 0, 8], [ALLOC, 9, 8]];
        assert_eq!(agree(2, |l| sigs[l]), Ok(()));
        assert_eq!(
            agree(4, |l| sigs[l]),
            Err(Mismatch {
                first: sigs[0],
                locale: 2,
                theirs: sigs[2]
            })
        );
        assert_eq!(agree(1, |l| sigs[l + 2]), Ok(()));
    }

    #[test]
    fn atomic_ops_return_the_previous_value() {
        let w = AtomicU64::new(5);
        assert_eq!(AtomicOp::FetchAdd(2).apply(&w), Ok(5));
        assert_eq!(AtomicOp::Swap(1).apply(&w), Ok(7));
        assert_eq!(AtomicOp::CompareExchange(0, 3).apply(&w), Err(1));
        assert_eq!(AtomicOp::CompareExchange(1, 3).apply(&w), Ok(1));
        assert_eq!(AtomicOp::Store(9).apply(&w), Ok(0));
        assert_eq!(AtomicOp::Load.apply(&w), Ok(9));
        assert_eq!(AtomicOp::FetchAdd(u64::MAX).apply(&w), Ok(9));
        assert_eq!(AtomicOp::Load.apply(&w), Ok(8), "wraps");
    }
}
