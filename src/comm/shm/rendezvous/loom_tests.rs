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
//! check that could see a stale state or number. A staged block (rule S)
//! is modelled beside another sender of the locale, with the area's lock
//! a loom mutex, numbered when its note goes. Run with:
//! `RUSTFLAGS="--cfg loom" cargo test --release --lib --target-dir target/loom loom_rendezvous`

use super::{Block, NOTE_LEN, NOTE_TAG, RETURN_TAG, TAKEN, WRITTEN, order};
use crate::comm::shm::ring::{Consumer, Producer, loom_pair};
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

/// The next frame of `consumer` (waiting for it), a note with `tag`.
fn next_note(consumer: &mut Consumer, tag: u32) -> Vec<u8> {
    loop {
        match consumer.try_peek().unwrap() {
            Some(f) => {
                assert_eq!(f.tag(), tag);
                let note = f.to_vec();
                f.release();
                assert_eq!(note.len(), NOTE_LEN);
                return note;
            }
            None => thread::yield_now(),
        }
    }
}

/// The sender's side of `frame`: `Outbound::try_alloc` (the state, the
/// header's number), the payload's write, the note on the ring.
fn write_and_send(b: &LoomBlock, producer: &mut Producer, frame: u64) {
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
            write_and_send(&b, &mut producer, frame);
        }
    });
    for frame in 1..=frames {
        let note = next_note(&mut consumer, NOTE_TAG);
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

fn reply(frame: u64) -> u64 {
    0x200 + frame
}

/// `frames` calls through one block, each answered in it: the receiver
/// reads the argument in place, writes its reply there, and returns the
/// block through the ring back (`try_send_returning`, `RETURN_TAG`); the
/// sender reads the reply in place, takes the block back itself
/// (`Returned::take_back`) and writes it again for the next call. So the
/// sender's reads of the reply and its rewrite race the receiver's writes
/// unless the ring back orders them.
fn calls_answered_in_their_block(frames: u64) {
    let (mut producer, mut consumer) = loom_pair(64);
    let (mut back_producer, mut back_consumer) = loom_pair(64);
    let block = Arc::new(LoomBlock {
        state: AtomicU32::new(TAKEN),
        number: UnsafeCell::new(0),
        payload: UnsafeCell::new(0),
    });
    let b = block.clone();
    let receiver = thread::spawn(move || {
        for frame in 1..=frames {
            next_note(&mut consumer, NOTE_TAG);
            assert_eq!(b.state.load(order::CHECK_STATE), WRITTEN);
            // SAFETY: loom checks that no access races with these.
            assert_eq!(b.number.with(|p| unsafe { *p }), frame);
            assert_eq!(b.payload.with(|p| unsafe { *p }), value(frame));
            // The reply written where the argument lay; the block
            // returned, never marked taken here.
            b.payload.with_mut(|p| unsafe { *p = reply(frame) });
            let back = super::return_note(64, 8, frame);
            while back_producer.try_send(RETURN_TAG, &back).is_err() {
                thread::yield_now();
            }
        }
    });
    for frame in 1..=frames {
        // `Outbound::reclaim`: our own take-back below marked it.
        assert_eq!(block.state.load(order::RECLAIM), TAKEN);
        write_and_send(&block, &mut producer, frame);
        // The return comes back; `check_return`, then the reply read in
        // place, then `Returned::take_back`.
        next_note(&mut back_consumer, RETURN_TAG);
        assert_eq!(block.state.load(order::CHECK_STATE), WRITTEN);
        // SAFETY: loom checks that no write races with this read.
        assert_eq!(block.payload.with(|p| unsafe { *p }), reply(frame));
        block.state.store(TAKEN, order::TAKE_BACK);
    }
    receiver.join().unwrap();
}

/// Two calls answered in one block: the second argument rewrites the
/// block the first reply was written in.
#[test]
fn loom_rendezvous_calls_answered_in_their_block() {
    model(None, || calls_answered_in_their_block(2));
}

/// Rule S: one sender stages a block (allocated under the area's lock,
/// written without it, numbered and noted under it later) while another
/// sender of the same locale allocates, numbers, writes and notes a block
/// of its own under the lock, before or after. The receiver must see
/// notes in number order (B5), each block's header repeating its note,
/// and every staged write before it reads the block: a staged write
/// outside the lock that the note's Release did not order, or a number
/// written after the note, is a race loom reports.
fn a_staged_block_beside_another_sender() {
    use loom::sync::Mutex;
    let (producer, mut consumer) = loom_pair(64);
    let producer = Arc::new(Mutex::new(producer));
    // The area's newest number (`Outbound::number`), under its lock.
    let area = Arc::new(Mutex::new(0u64));
    // Block 0 is the staged one, block 1 the other sender's.
    let blocks: Arc<[LoomBlock; 2]> = Arc::new(std::array::from_fn(|_| LoomBlock {
        state: AtomicU32::new(TAKEN),
        number: UnsafeCell::new(0),
        payload: UnsafeCell::new(0),
    }));
    let note = |block: usize, n: u64| {
        Block {
            offset: block * 64,
            len: 8,
            number: n,
        }
        .note()
    };
    // Numbers the block under the area's lock and sends its note.
    let number_and_send = move |blk: &LoomBlock, p: &Mutex<Producer>, n: u64, block: usize| {
        // SAFETY: loom checks that no access races with this write.
        blk.number.with_mut(|q| unsafe { *q = n });
        while p
            .lock()
            .unwrap()
            .try_send(NOTE_TAG, &note(block, n))
            .is_err()
        {
            thread::yield_now();
        }
    };
    let (a, p, b) = (area.clone(), producer.clone(), blocks.clone());
    let stager = thread::spawn(move || {
        // `Outbound::stage`: WRITTEN, no number, under the lock.
        drop(a.lock().unwrap());
        b[0].state.store(WRITTEN, order::MARK_WRITTEN);
        // The encoder writes the payload without the area's lock.
        // SAFETY: loom checks that no access races with this write.
        b[0].payload.with_mut(|q| unsafe { *q = value(0) });
        // `send_staged`: numbered and noted under the area's lock.
        let mut n = a.lock().unwrap();
        *n += 1;
        number_and_send(&b[0], &p, *n, 0);
    });
    let (a, p, b) = (area.clone(), producer.clone(), blocks.clone());
    let other = thread::spawn(move || {
        // `send_block`: allocated, numbered, written and noted under the
        // lock.
        let mut n = a.lock().unwrap();
        *n += 1;
        b[1].state.store(WRITTEN, order::MARK_WRITTEN);
        // SAFETY: loom checks that no access races with this write.
        b[1].payload.with_mut(|q| unsafe { *q = value(1) });
        number_and_send(&b[1], &p, *n, 1);
    });
    let mut last = 0;
    for _ in 0..2 {
        let bytes = next_note(&mut consumer, NOTE_TAG);
        let block = u64::from_le_bytes(bytes[..8].try_into().unwrap()) as usize / 64;
        let n = u64::from_le_bytes(bytes[16..24].try_into().unwrap());
        assert!(n > last, "notes come in number order");
        last = n;
        let blk = &blocks[block];
        assert_eq!(blk.state.load(order::CHECK_STATE), WRITTEN);
        // SAFETY: loom checks that no write races with these reads.
        assert_eq!(blk.number.with(|q| unsafe { *q }), n);
        assert_eq!(blk.payload.with(|q| unsafe { *q }), value(block as u64));
    }
    stager.join().unwrap();
    other.join().unwrap();
}

#[test]
fn loom_rendezvous_a_staged_block_beside_another_sender() {
    model(None, a_staged_block_beside_another_sender);
}
