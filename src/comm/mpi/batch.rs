//! A batch received from MPI (`README.md`, "Messages", 1 and 7): the
//! frames of one MPI message, handed on one by one, and lent where their
//! receiver keeps them.
//!
//! A batch's buffer is its own until one of several frames in it is
//! offered lendable (`Batch::share`: a frame a large enough share of the
//! batch; the engine lends Chant messages, which wait in their mailbox):
//! then it becomes a `SharedBatch`, whose heap block the batch and every
//! frame lent from it hold (an `Arc`), freed when the last of them goes.
//! Frames are handed on in order and each at most once, so the bytes from
//! the next frame on (what the batch still reads) never overlap a frame
//! lent.

use super::transport::{FRAME_PREFIX, frame_at};
use crate::comm::transport::{Lendable, Lent, TakeBack};
use std::ops::Range;
use std::ptr::NonNull;
use std::sync::Arc;

/// A frame is lent out of a batch of others only if it is at least this
/// fraction of the batch (1/`LEND_SHARE`): a message kept holds its whole
/// batch, so what a kept message holds is at most this many times its
/// own size. 32: a Chant window's 1 KiB messages travel in batches of 16
/// to 32 of them (`HELD_BYTES`, 16 KiB, and more while a pass is busy).
pub(super) const LEND_SHARE: usize = 32;

/// Frames received in one MPI message (a batch), handed on one by one.
pub(super) struct Batch {
    pub(super) src: usize,
    /// The message is the bytes from `start` on.
    bytes: Bytes,
    pub(super) start: usize,
    /// Where the next frame's length prefix starts.
    pub(super) at: usize,
}

/// A batch's buffer.
enum Bytes {
    /// Its own.
    Own(Vec<u8>),
    /// Shared with the frames lent from it.
    Shared {
        owner: Arc<dyn TakeBack>,
        ptr: NonNull<u8>,
        len: usize,
    },
}

// SAFETY: `Shared`'s pointer is into the heap block its `owner` keeps
// alive (a `SharedBatch`: a `Vec` nobody touches until it is dropped),
// and the batch only reads the frames not yet handed on, which nobody
// else touches (module doc); so a batch may move to another thread as the
// `Vec` of `Own` may.
unsafe impl Send for Bytes {}

impl Batch {
    /// The batch received into `bytes`, its message from `start` on.
    pub(super) fn new(src: usize, bytes: Vec<u8>, start: usize) -> Batch {
        Batch {
            src,
            bytes: Bytes::Own(bytes),
            start,
            at: start,
        }
    }

    /// Its buffer's length (the message ends there).
    pub(super) fn len(&self) -> usize {
        match &self.bytes {
            Bytes::Own(v) => v.len(),
            Bytes::Shared { len, .. } => *len,
        }
    }

    /// Whether every frame was handed on.
    pub(super) fn is_done(&self) -> bool {
        self.at >= self.len()
    }

    /// The next frame's byte range; advances past it.
    pub(super) fn next_frame(&mut self) -> Result<Range<usize>, String> {
        let at = self.at;
        // The bytes from `at` on: the frames not yet handed on, which no
        // lent frame overlaps.
        let rest = self.bytes_from(at);
        let frame = frame_at(rest, 0)?;
        let frame = at + frame.start..at + frame.end;
        self.at = frame.end;
        Ok(frame)
    }

    /// The bytes of `range`, a frame not lent (the one `next_frame` just
    /// returned, until it is lent).
    pub(super) fn frame(&self, range: Range<usize>) -> &[u8] {
        match &self.bytes {
            Bytes::Own(v) => &v[range],
            Bytes::Shared { ptr, len, .. } => {
                assert!(range.start <= range.end && range.end <= *len);
                // SAFETY: in the shared block (checked), which lives while
                // `owner` (held by `self`) does; not lent yet (this
                // method's contract), so nobody writes it.
                unsafe { std::slice::from_raw_parts(ptr.as_ptr().add(range.start), range.len()) }
            }
        }
    }

    /// `bytes_from(at)`: the bytes from `at` to the end.
    fn bytes_from(&self, at: usize) -> &[u8] {
        let len = self.len();
        self.frame(at.min(len)..len)
    }

    /// Whether `range` is the batch's only frame (it may be lent with the
    /// whole buffer: [`take_alone`](Self::take_alone)).
    pub(super) fn is_alone(&self, range: &Range<usize>) -> bool {
        range.start == self.start + FRAME_PREFIX && range.end == self.len()
    }

    /// The frame `range`, alone in its batch, lent with the buffer, which
    /// goes to `give_back` when its receiver drops it.
    pub(super) fn take_alone(&mut self, range: Range<usize>, give_back: fn(Vec<u8>)) -> Lent {
        match &mut self.bytes {
            Bytes::Own(v) => Lent::recycled(std::mem::take(v), range, give_back),
            Bytes::Shared { .. } => unreachable!("a frame alone in its batch is lent first"),
        }
    }

    /// Whether the frame `range` (just returned by `next_frame`, with
    /// other frames of the batch before or after it) may be lent: if it is
    /// a large enough share of its batch ([`LEND_SHARE`]). The batch's
    /// buffer is then shared with what is lent from it.
    pub(super) fn share(&mut self, range: &Range<usize>) -> bool {
        if (range.len() + FRAME_PREFIX) * LEND_SHARE < self.len() - self.start {
            return false;
        }
        if let Bytes::Own(v) = &mut self.bytes {
            let mut v = std::mem::take(v);
            // From the vector's own pointer, not a shared borrow of it, so
            // a frame's receiver may write the bytes it alone holds.
            let ptr = NonNull::new(v.as_mut_ptr()).expect("a vector's pointer is never null");
            let len = v.len();
            self.bytes = Bytes::Shared {
                owner: Arc::new(SharedBatch { _buffer: v }),
                ptr,
                len,
            };
        }
        true
    }

    /// The frame `range`, which [`share`](Self::share) accepted, as a
    /// lendable frame (none if the batch's buffer is not shared).
    pub(super) fn lendable(&self, range: Range<usize>) -> Option<Lendable<'_>> {
        let Bytes::Shared { owner, ptr, len } = &self.bytes else {
            return None;
        };
        assert!(range.start <= range.end && range.end <= *len);
        // SAFETY: the range lies in the shared block (checked), kept alive
        // by `owner`; a frame is handed on once, after which the batch
        // reads only the frames after it (`next_frame`) and nobody else
        // touches the block: so once lent, its receiver alone reads or
        // writes it; the pointer comes from the vector's own (mutable)
        // pointer.
        Some(unsafe {
            Lendable::new(
                NonNull::new(ptr.as_ptr().wrapping_add(range.start)).expect("inside a heap block"),
                range.len(),
                owner,
            )
        })
    }
}

/// A batch's buffer, shared by the batch and the frames lent from it:
/// freed when the last of them lets go. Its bytes are reached only through
/// the pointer taken from the vector before it was moved here (moving a
/// `Vec` does not move its heap block, as `Lent::recycled` relies on too).
struct SharedBatch {
    /// Held to be dropped with the last holder.
    _buffer: Vec<u8>,
}

impl TakeBack for SharedBatch {
    /// A frame's holder let go of it: nothing to do but drop the `Arc` it
    /// held (the buffer goes with the last).
    fn take_back(&self, _token: usize) {}
}

#[cfg(test)]
mod tests {
    use super::*;

    fn batch_of(frames: &[&[u8]]) -> Vec<u8> {
        let mut v = Vec::new();
        for f in frames {
            v.extend_from_slice(&(f.len() as u32).to_le_bytes());
            v.extend_from_slice(f);
        }
        v
    }

    #[test]
    fn batches_are_checked_whole() {
        let bytes = batch_of(&[b"abc", b"", b"0123456789"]);
        assert_eq!(super::super::transport::count_frames(&bytes), Ok(3));
        let mut cut = batch_of(&[b"abc"]);
        cut.pop();
        assert!(
            super::super::transport::count_frames(&cut)
                .unwrap_err()
                .contains("past the batch's end")
        );
        assert!(
            super::super::transport::count_frames(&[1, 0])
                .unwrap_err()
                .contains("prefix cut")
        );
        assert_eq!(super::super::transport::count_frames(&[]), Ok(0));
    }

    #[test]
    fn a_batch_splits_into_its_frames_in_order() {
        let mut b = Batch::new(2, batch_of(&[b"abc", b"", b"0123456789"]), 0);
        let mut got = Vec::new();
        while !b.is_done() {
            let r = b.next_frame().unwrap();
            got.push(b.frame(r).to_vec());
        }
        assert_eq!(got, vec![b"abc".to_vec(), vec![], b"0123456789".to_vec()]);
        let mut cut = batch_of(&[b"abc"]);
        cut.pop();
        let mut cut = Batch::new(0, cut, 0);
        assert!(
            cut.next_frame()
                .unwrap_err()
                .contains("past the batch's end")
        );
    }

    #[test]
    fn frames_lent_from_a_batch_outlive_it_and_each_other() {
        // Four frames of 40 bytes: each a quarter of the batch, lendable.
        let frames: Vec<Vec<u8>> = (0..4u8).map(|i| vec![i; 40]).collect();
        let refs: Vec<&[u8]> = frames.iter().map(|f| &f[..]).collect();
        let mut b = Batch::new(1, batch_of(&refs), 0);
        let mut lent = Vec::new();
        while !b.is_done() {
            let r = b.next_frame().unwrap();
            assert!(!b.is_alone(&r));
            assert!(b.share(&r), "a quarter of the batch");
            lent.push(b.lendable(r).expect("shared").lend());
        }
        drop(b);
        // Each written where it lies by its own holder, the others intact.
        // SAFETY: the holder of `lent[1]` alone reads or writes its bytes.
        unsafe { *lent[1].as_mut_ptr() = 9 };
        let second = lent.remove(1);
        assert_eq!(second[0], 9);
        drop(second);
        for (i, l) in lent.iter().enumerate() {
            let want = if i == 0 { 0 } else { i as u8 + 1 };
            assert!(l.iter().all(|&x| x == want), "frame {want} unchanged");
        }
    }

    #[test]
    fn a_frame_too_small_a_share_of_its_batch_is_not_lendable() {
        let big = vec![7u8; 40 * LEND_SHARE];
        let mut b = Batch::new(0, batch_of(&[b"tiny", &big]), 0);
        let r = b.next_frame().unwrap();
        assert!(!b.share(&r));
        assert!(b.lendable(r.clone()).is_none());
        assert_eq!(b.frame(r), b"tiny", "still read where it lies");
        let r = b.next_frame().unwrap();
        assert!(b.share(&r), "most of the batch");
        assert_eq!(b.lendable(r).expect("shared").lend().len(), big.len());
    }
}
