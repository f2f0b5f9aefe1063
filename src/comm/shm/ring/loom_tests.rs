//! Loom models of the ring (README.md beside `ring.rs`): whatever the
//! interleaving and whichever stale index values the memory model lets a
//! load return, the consumer receives every frame once, in order, with
//! its tag and payload intact, and no access to a data word races with
//! another (each data word is a loom cell, so a producer that overwrote a
//! frame the consumer had not finished with would be reported). Run with:
//! `RUSTFLAGS="--cfg loom" CARGO_TARGET_DIR=/work/target-ring-loom nice -n 10 cargo test --release --lib comm::`
//!
//! The ring is 32 bytes (the smallest allowed), so a few frames wrap it
//! and the producer finds it full and must wait for the consumer.

use super::{Full, loom_pair};
use loom::thread;

use crate::loom::model;

fn payload(i: usize, len: usize) -> Vec<u8> {
    (0..len).map(|j| (i * 16 + j + 1) as u8).collect()
}

/// The producer sends frames with payloads of `lens` bytes (tags 0, 1,
/// ...) on a thread of its own; the consumer checks each one as it
/// arrives.
fn pass_frames(lens: &'static [usize]) {
    let (mut p, mut c) = loom_pair(32);
    let producer = thread::spawn(move || {
        for (i, &len) in lens.iter().enumerate() {
            let data = payload(i, len);
            while let Err(Full) = p.try_send(i as u32, &data) {
                thread::yield_now();
            }
        }
    });
    let mut next = 0;
    while next < lens.len() {
        match c.try_peek().unwrap() {
            Some(f) => {
                assert_eq!(f.tag(), next as u32, "frames out of order");
                assert_eq!(
                    f.to_vec(),
                    payload(next, lens[next]),
                    "frame {next} garbled"
                );
                f.release();
                next += 1;
            }
            None => thread::yield_now(),
        }
    }
    producer.join().unwrap();
    assert!(c.try_peek().unwrap().is_none(), "a frame too many");
}

/// Frames of 8, 16 and 16 bytes: the third does not fit before the end
/// (8 bytes left), so it goes to offset 0 behind a padding frame, over
/// the bytes of the first two, once the consumer has released them.
#[test]
fn loom_ring_wraps_behind_padding() {
    model(None, || pass_frames(&[0, 8, 1]));
}

/// Four 16-byte frames: the third and fourth reuse the first two's bytes
/// exactly (a wrap without padding), racing the consumer's reads of them.
#[test]
fn loom_ring_reuses_released_frames() {
    model(Some(6), || pass_frames(&[8, 7, 8, 2]));
}
