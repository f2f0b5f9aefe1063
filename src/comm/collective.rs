//! Collectives a transport makes itself (MPI's non-blocking collectives),
//! offered to the global address space's memories beside messages
//! (`Job::collectives`). Named by no transport: the MPI transport
//! implements [`Collectives`]; `pgas`'s message memory uses it where the
//! job has it (`pgas/README.md`, "Collectives over MPI").
//!
//! A collective is started by one task per locale, in the same order on
//! every locale (the SPMD rule), and completes on its own: the task polls
//! [`Pending::take`] while it makes progress (`remote::poll_once`), so no
//! thread waits inside the transport.

use std::alloc::{Layout, alloc, dealloc};
use std::ptr::NonNull;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

/// A transport's own collectives over every locale of the job.
pub(crate) trait Collectives: Send + Sync {
    /// Starts an all-gather: every locale passes `mine`, of the same
    /// length on every locale; the result is every locale's bytes,
    /// concatenated in locale order.
    fn all_gather(&self, mine: Vec<u8>) -> Arc<Pending>;

    /// Starts a broadcast of `buf` from locale `root`: every locale passes
    /// a buffer of the same length (the root's holds the data); the result
    /// is the root's bytes.
    fn broadcast(&self, root: usize, buf: Vec<u8>) -> Arc<Pending>;

    /// Starts an exchange between every pair of locales (MPI's
    /// all-to-all): the bytes of `send[l]` go to locale `l`, and `recv[l]`
    /// (already of the length locale `l` sends this one; every locale
    /// agreed on the lengths) receives locale `l`'s part. The result
    /// ([`Pending::take_parts`]) is `recv`, filled.
    ///
    /// # Safety
    ///
    /// The memory of every `send` part stays valid and unchanged until the
    /// result is taken: the caller waits for it and never gives up.
    unsafe fn exchange(&self, send: SendParts, recv: Vec<AlignedBytes>) -> Arc<Pending>;

    /// Moves the collectives in flight on, where the waiting task's own
    /// calls do that (MPI inline: a try of the lock and an `MPI_Test`);
    /// cheaper than a poll of the transport, which a waiting task still
    /// makes now and then to serve what arrives. Returns whether it did
    /// anything.
    fn progress(&self) -> bool {
        false
    }
}

/// The parts an exchange sends, one per locale: where each lies, in
/// memory the caller keeps unchanged until the exchange completes (the
/// contract of [`Collectives::exchange`]). Parts may overlap (an
/// all-gather sends one part to every locale).
pub(crate) struct SendParts(
    #[cfg_attr(not(feature = "mpi"), allow(dead_code))] pub(crate) Vec<(*const u8, usize)>,
);

// SAFETY: only addresses, read by the transport (on whatever thread makes
// its calls) while the caller waits for the exchange that uses them.
unsafe impl Send for SendParts {}

/// Bytes in an allocation of a chosen alignment, owned: what an
/// exchange receives a locale's part into, so that it can become a
/// `Vec<T>` of that alignment without a copy (`into_raw`).
pub(crate) struct AlignedBytes {
    ptr: NonNull<u8>,
    len: usize,
    align: usize,
}

// SAFETY: the allocation is owned (no other handle to it exists) and
// plain bytes.
unsafe impl Send for AlignedBytes {}

impl AlignedBytes {
    /// Room for `len` bytes aligned to `align` (a power of two), for a
    /// transport to fill: not written yet (not zeroed either, which would
    /// cost a pass over memory the receive overwrites), so not to be read
    /// before a completed exchange filled it (`Pending::take_parts`).
    /// `None` if no such allocation can be made.
    pub(crate) fn for_receiving(len: usize, align: usize) -> Option<AlignedBytes> {
        let layout = Layout::from_size_align(len, align).ok()?;
        let ptr = if len == 0 {
            // No allocation: a dangling pointer of the alignment.
            NonNull::new(align as *mut u8)?
        } else {
            // SAFETY: the layout has a nonzero size.
            NonNull::new(unsafe { alloc(layout) })?
        };
        advise_huge_pages(ptr.as_ptr(), len);
        Some(AlignedBytes { ptr, len, align })
    }

    /// The bytes' length.
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// The alignment it was made with.
    pub(crate) fn align(&self) -> usize {
        self.align
    }

    /// The bytes.
    ///
    /// # Safety
    ///
    /// Every byte was written (by a completed exchange, or through
    /// [`as_mut_ptr`](Self::as_mut_ptr)).
    pub(crate) unsafe fn filled(&self) -> &[u8] {
        // SAFETY: `len` bytes at `ptr` are ours, all written (the
        // caller's contract), or none (dangling and aligned).
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.len) }
    }

    /// Where the bytes start (for a transport, or a buffer, to write
    /// them).
    pub(crate) fn as_mut_ptr(&mut self) -> *mut u8 {
        self.ptr.as_ptr()
    }

    /// Gives the allocation up: `(ptr, len, align)`, allocated by the
    /// global allocator with `Layout::from_size_align(len, align)` when
    /// `len > 0` (dangling otherwise); the caller frees it.
    pub(crate) fn into_raw(self) -> (NonNull<u8>, usize, usize) {
        let this = std::mem::ManuallyDrop::new(self);
        (this.ptr, this.len, this.align)
    }
}

/// Allocations of at least this many bytes ask for transparent huge
/// pages.
const HUGE_FROM: usize = 4 << 20;

/// Asks the kernel to back the whole 2 MiB pages inside `len` bytes at
/// `ptr` with huge pages where it can (`MADV_HUGEPAGE`: the default of
/// Linux's transparent huge pages is to do it only where asked). A
/// received part of megabytes is written once, by the transport, into
/// memory never touched before: with 4 KiB pages that is a fault every
/// 4 KiB (8 MiB: 2,048 faults, 2-3 ms on the project's VM, longer than
/// MPI's copy of it), with huge pages one every 2 MiB. Advice only: a
/// kernel that refuses it, or an allocation that did not come from a
/// mapping of its own, loses nothing.
fn advise_huge_pages(ptr: *mut u8, len: usize) {
    #[cfg(target_os = "linux")]
    if len >= HUGE_FROM {
        const HUGE: usize = 2 << 20;
        let start = (ptr as usize).next_multiple_of(HUGE);
        let end = (ptr as usize + len) / HUGE * HUGE;
        if end > start {
            // SAFETY: advice on whole pages inside our own allocation;
            // MADV_HUGEPAGE changes no contents and no mapping's rights.
            unsafe { libc::madvise(start as *mut libc::c_void, end - start, libc::MADV_HUGEPAGE) };
        }
    }
    #[cfg(not(target_os = "linux"))]
    let _ = (ptr, len);
}

impl Drop for AlignedBytes {
    fn drop(&mut self) {
        if self.len > 0 {
            // SAFETY: allocated in `zeroed` with this very layout.
            unsafe {
                dealloc(
                    self.ptr.as_ptr(),
                    Layout::from_size_align_unchecked(self.len, self.align),
                )
            };
        }
    }
}

/// What a collective produced.
enum Outcome {
    Bytes(Vec<u8>),
    Parts(Vec<AlignedBytes>),
}

/// A collective in flight: its result once every locale took part.
#[derive(Default)]
pub(crate) struct Pending {
    done: AtomicBool,
    result: Mutex<Option<Outcome>>,
}

impl Pending {
    /// A collective not yet complete.
    #[cfg_attr(not(feature = "mpi"), allow(dead_code))]
    pub(crate) fn new() -> Arc<Pending> {
        Arc::new(Pending::default())
    }

    /// The transport completed it with `result`.
    #[cfg_attr(not(feature = "mpi"), allow(dead_code))]
    pub(crate) fn complete(&self, result: Vec<u8>) {
        self.finish(Outcome::Bytes(result));
    }

    /// The transport completed an exchange, whose parts are `parts`.
    #[cfg_attr(not(feature = "mpi"), allow(dead_code))]
    pub(crate) fn complete_parts(&self, parts: Vec<AlignedBytes>) {
        self.finish(Outcome::Parts(parts));
    }

    fn finish(&self, outcome: Outcome) {
        *self.result.lock().unwrap() = Some(outcome);
        // Release: pairs with the Acquire in `take_outcome` (the mutex
        // orders the result itself; the flag only says it is there, for a
        // cheap poll).
        self.done.store(true, Ordering::Release);
    }

    fn take_outcome(&self) -> Option<Outcome> {
        // Acquire: pairs with `finish`'s Release.
        if !self.done.load(Ordering::Acquire) {
            return None;
        }
        self.result.lock().unwrap().take()
    }

    /// The result of an all-gather or a broadcast, once complete (then
    /// `None` ever after).
    ///
    /// # Panics
    ///
    /// If the collective was an exchange.
    pub(crate) fn take(&self) -> Option<Vec<u8>> {
        self.take_outcome().map(|o| match o {
            Outcome::Bytes(b) => b,
            Outcome::Parts(_) => panic!("an exchange's result is taken as its parts"),
        })
    }

    /// The parts an exchange received, once complete (then `None` ever
    /// after).
    ///
    /// # Panics
    ///
    /// If the collective was not an exchange.
    pub(crate) fn take_parts(&self) -> Option<Vec<AlignedBytes>> {
        self.take_outcome().map(|o| match o {
            Outcome::Parts(p) => p,
            Outcome::Bytes(_) => panic!("only an exchange's result is taken as parts"),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_result_is_taken_once_and_only_when_complete() {
        let p = Pending::new();
        assert_eq!(p.take(), None);
        p.complete(vec![1, 2, 3]);
        assert_eq!(p.take(), Some(vec![1, 2, 3]));
        assert_eq!(p.take(), None);
    }

    #[test]
    fn another_thread_sees_the_result() {
        let p = Pending::new();
        let q = p.clone();
        let t = std::thread::spawn(move || q.complete(vec![7; 64]));
        let got = loop {
            if let Some(r) = p.take() {
                break r;
            }
            std::hint::spin_loop();
        };
        t.join().unwrap();
        assert_eq!(got, vec![7; 64]);
    }

    #[test]
    fn an_exchange_hands_its_parts_over() {
        let p = Pending::new();
        assert!(p.take_parts().is_none());
        let mut a = AlignedBytes::for_receiving(24, 64).unwrap();
        assert_eq!(a.as_mut_ptr() as usize % 64, 0);
        // SAFETY: 24 bytes of ours.
        unsafe { a.as_mut_ptr().add(23).write(9) };
        p.complete_parts(vec![a, AlignedBytes::for_receiving(0, 8).unwrap()]);
        let parts = p.take_parts().unwrap();
        assert_eq!(
            parts.iter().map(AlignedBytes::len).collect::<Vec<_>>(),
            [24, 0]
        );
        let (ptr, len, align) = parts.into_iter().next().unwrap().into_raw();
        assert_eq!((len, align), (24, 64));
        // SAFETY: the allocation just given up, 24 bytes, this layout.
        unsafe {
            assert_eq!(ptr.as_ptr().add(23).read(), 9);
            std::alloc::dealloc(ptr.as_ptr(), Layout::from_size_align(24, 64).unwrap());
        }
        assert!(p.take_parts().is_none());
    }
}
