//! Put and get between two locales against a plain `memcpy` in the same
//! process: the latency of 8-byte puts and gets to the other locale and
//! the bandwidth of 1 MiB ones; and a barrier's time.
//!
//! ```text
//! cargo run --release --example putget [ROUNDS]
//! ```

use cantus::pgas;
use serde::{Deserialize, Serialize};
use std::hint::black_box;
use std::time::Instant;

const MIB: usize = 1 << 20;

#[derive(Clone, Serialize, Deserialize)]
struct Bench {
    rounds: usize,
}

impl cantus::Remote for Bench {
    /// Lines to print (locale 0 measures; locale 1 only takes part).
    type Output = Vec<String>;
    fn run(self) -> Vec<String> {
        let words = pgas::alloc::<u64>(MIB / 8).expect("room for 1 MiB");
        let mut lines = Vec::new();
        if cantus::here() == 0 {
            let far = words.ptr(1);
            let n = self.rounds;
            let per = |t: Instant, k: usize| t.elapsed().as_secs_f64() * 1e9 / k as f64;
            let t = Instant::now();
            for i in 0..n {
                far.put(&[black_box(i as u64)]).unwrap();
            }
            let put8 = per(t, n);
            let mut one = [0u64];
            let t = Instant::now();
            for _ in 0..n {
                far.get(black_box(&mut one)).unwrap();
            }
            let get8 = per(t, n);
            let (src, mut dst) = (vec![1u64; 1], vec![0u64; 1]);
            let t = Instant::now();
            for _ in 0..n {
                black_box(&mut dst).copy_from_slice(black_box(&src));
            }
            let copy8 = per(t, n);
            lines.push(format!(
                "8-byte put to locale 1 {put8:.1} ns, get {get8:.1} ns; local 8-byte copy {copy8:.1} ns"
            ));
            let big = n / 1000 + 10;
            let mut buf = vec![7u64; MIB / 8];
            let gbs = |t: Instant| (big * MIB) as f64 / t.elapsed().as_secs_f64() / 1e9;
            let t = Instant::now();
            for _ in 0..big {
                far.put(black_box(&buf)).unwrap();
            }
            let put_bw = gbs(t);
            let t = Instant::now();
            for _ in 0..big {
                far.get(black_box(&mut buf)).unwrap();
            }
            let get_bw = gbs(t);
            let src = vec![3u64; MIB / 8];
            let t = Instant::now();
            for _ in 0..big {
                black_box(&mut buf).copy_from_slice(black_box(&src));
            }
            let copy_bw = gbs(t);
            lines.push(format!(
                "1 MiB put to locale 1 {put_bw:.2} GB/s, get {get_bw:.2} GB/s; local memcpy {copy_bw:.2} GB/s"
            ));
        }
        pgas::barrier();
        let rounds = 10_000;
        let t = Instant::now();
        for _ in 0..rounds {
            pgas::barrier();
        }
        if cantus::here() == 0 {
            let ns = t.elapsed().as_secs_f64() * 1e9 / rounds as f64;
            lines.push(format!(
                "barrier of {} locales {ns:.0} ns",
                cantus::num_locales()
            ));
        }
        lines
    }
}
cantus::remote!(Bench);

fn main() {
    let rounds = std::env::args()
        .nth(1)
        .map_or(1_000_000, |a| a.parse().expect("usage: putget [ROUNDS]"));
    let rt = cantus::Runtime::builder()
        .default_locales(2)
        .build()
        .expect("a job of two locales");
    let out = rt.block_on(|| pgas::spmd(Bench { rounds })).expect("bench");
    rt.shutdown();
    for line in &out[0] {
        println!("putget: {line}");
    }
}
