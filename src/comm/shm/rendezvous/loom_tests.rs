//! A loom model of the rendezvous protocol (`README.md` beside
//! `rendezvous.rs`, "Rendezvous"): a sender writes a block, sends its
//! note through the ring (the ring's own code, as loom objects:
//! `ring::loom_pair`), takes the block back once its receiver marked it
//! taken, and writes it again for the next frame; the receiver checks each
//! note's block and reads it in place, then marks it taken.
//!
//! In the code the block lies in the job's shared mapping (its state word
//! an atomic in it, its header and payload plain bytes), which loom
//! cannot watch; here the block is loom objects (the state a loom atomic,
//! the header's number and the payload loom cells), accessed in the
//! code's order with the code's states and orderings (`super::order`). So
//! loom reports a read of the block that races with its rewrite (a take
//! back or a reclaim too weak, or a take back before the reads), and a
//! check that could see a stale state or number. Run with:
//! `RUSTFLAGS="--cfg loom" cargo test --release --lib --target-dir target/loom loom_rendezvous`

use super::{Block, NOTE_LEN, NOTE_TAG, TAKEN, WRITTEN, order};
use crate::comm::shm::ring::loom_pair;
use crate::loom::model;
use crate::loom::sync::atomic::AtomicU32;
use loom::cell::UnsafeCell;
use loom::sync::Arc;
use loom::thread;

/// One block: its state word, its header's number, one payload word.
struct LoomBlock {
    state: AtomicU32,
    number: UnsafeCell<u64>,
    payload: UnsafeCell<u64>,
}

fn value(frame: u64) -> u64 {
    0x100 + frame
}

/// `frames` frames through one block, each sent once the previous one
/// was taken back.
fn frames_through_one_block(frames: u64) {
    let (mut producer, mut consumer) = loom_pair(64);
    let block = Arc::new(LoomBlock {
        state: AtomicU32::new(TAKEN),
        number: UnsafeCell::new(0),
        payload: UnsafeCell::new(0),
    });
    let b = block.clone();
    let sender = thread::spawn(move || {
        for frame in 1..=frames {
            // `Outbound::reclaim`: the block is reused only once taken.
            while b.state.load(order::RECLAIM) != TAKEN {
                thread::yield_now();
            }
            // `Outbound::try_alloc`, then the payload's write.
            b.state.store(WRITTEN, order::MARK_WRITTEN);
            // SAFETY: loom checks that no access races with these writes.
            b.number.with_mut(|p| unsafe { *p = frame });
            b.payload.with_mut(|p| unsafe { *p = value(frame) });
            let note = Block {
                offset: 0,
                len: 8,
                number: frame,
            }
            .note();
            while producer.try_send(NOTE_TAG, &note).is_err() {
                thread::yield_now();
            }
        }
    });
    for frame in 1..=frames {
        let note = loop {
            match consumer.try_peek().unwrap() {
                Some(f) => {
                    assert_eq!(f.tag(), NOTE_TAG);
                    let note = f.to_vec();
                    f.release();
                    break note;
                }
                None => thread::yield_now(),
            }
        };
        assert_eq!(note.len(), NOTE_LEN);
        let number = u64::from_le_bytes(note[16..24].try_into().unwrap());
        assert_eq!(number, frame, "notes come in order");
        // `Inbound::check`: the state and the header repeat the note.
        assert_eq!(block.state.load(order::CHECK_STATE), WRITTEN);
        // SAFETY: loom checks that no write races with these reads.
        assert_eq!(block.number.with(|p| unsafe { *p }), frame);
        // The frame read in place (lent), then `Blocks::take_back`.
        assert_eq!(block.payload.with(|p| unsafe { *p }), value(frame));
        block.state.store(TAKEN, order::TAKE_BACK);
    }
    sender.join().unwrap();
}

/// Two frames: the second rewrites the block the receiver read the first
/// from, racing its reads unless the take back and the reclaim order them.
#[test]
fn loom_rendezvous_reuses_a_taken_block() {
    model(None, || frames_through_one_block(2));
}

/// Three frames, bounded (the third rewrite also races the second read).
#[test]
fn loom_rendezvous_three_frames() {
    model(Some(4), || frames_through_one_block(3));
}
