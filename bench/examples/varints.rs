//! Integer vectors through the codec, beside postcard (whose format the
//! codec writes) in the same run: nanoseconds an element to encode a
//! `Vec<u32>` into a fresh vector and to decode it, best of 5 runs of 100,
//! for three kinds of values (their varints' lengths matter: a branch
//! predicts a run of equal lengths, not lengths that vary at random).
//!
//! `cargo run --release -p cantus-bench --example varints`

use cantus::__bench::codec::{decode, encode};
use std::time::Instant;

/// Best (encode, decode) nanoseconds an element, of 5 runs of 100.
fn time(v: &[u32], enc: impl Fn(&[u32]) -> Vec<u8>, dec: impl Fn(&[u8]) -> Vec<u32>) -> (f64, f64) {
    let per = |t: Instant| t.elapsed().as_nanos() as f64 / 100.0 / v.len() as f64;
    let mut best = (f64::MAX, f64::MAX);
    for _ in 0..5 {
        let t = Instant::now();
        let mut bytes = Vec::new();
        for _ in 0..100 {
            bytes = enc(std::hint::black_box(v));
        }
        let e = per(t);
        let t = Instant::now();
        let mut back = Vec::new();
        for _ in 0..100 {
            back = dec(std::hint::black_box(&bytes));
        }
        let d = per(t);
        assert_eq!(back, v, "comes back whole");
        best = (best.0.min(e), best.1.min(d));
    }
    best
}

fn main() {
    let n = 1u32 << 18;
    // The `transfer_*.codec_vec_u32` rows' values: four consecutive bytes.
    let words: Vec<u32> = (0..n)
        .map(|i| {
            let b = (i * 4) as u8;
            u32::from_le_bytes([b, b.wrapping_add(1), b.wrapping_add(2), b.wrapping_add(3)])
        })
        .collect();
    let indices: Vec<u32> = (0..n).collect();
    let mut x = 0x2545_f491_4f6c_dd1du64;
    let random: Vec<u32> = (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x as u32) >> (x % 32)
        })
        .collect();
    for (name, v) in [
        ("words (4-5 bytes)", &words),
        ("indices (1-3 bytes)", &indices),
        ("random magnitudes (1-5 bytes)", &random),
    ] {
        let ours = time(v, |v| encode(&v), decode);
        let peer = time(
            v,
            |v| postcard::to_allocvec(&v).expect("postcard encodes"),
            |b| postcard::from_bytes(b).expect("postcard decodes"),
        );
        println!(
            "varints_{}: encode {:.2} ns (postcard {:.2}, {:.2}x), decode {:.2} ns (postcard {:.2}, {:.2}x)",
            name.split(' ').next().unwrap_or(name),
            ours.0,
            peer.0,
            ours.0 / peer.0,
            ours.1,
            peer.1,
            ours.1 / peer.1
        );
    }
}
