//! STREAM-EP: every locale runs the STREAM triad `a = b + s * c` on its
//! own block of three `BlockArray<f64>`s, with `forall` over the block;
//! reports the aggregate bandwidth (24 bytes per element: two reads, one
//! write) and checks the results.
//!
//! ```text
//! cargo run --release --example stream_ep [ELEMENTS] [LOCALES]
//! ```
//!
//! Defaults: 2^23 elements in all, 2 locales (`CANTUS_LOCALES`
//! overrides); each locale's heap is sized to hold its blocks.

use cantus::pgas::{self, BlockArray};
use serde::{Deserialize, Serialize};
use std::time::Instant;

const TRIALS: usize = 10;
const SCALAR: f64 = 3.0;
/// Elements per forall chunk.
const CHUNK: usize = 1 << 14;

#[derive(Clone, Serialize, Deserialize)]
struct Stream {
    n: usize,
}

impl cantus::Remote for Stream {
    /// (best time of a trial, the slowest locale's; wrong elements in all)
    type Output = (f64, u64);
    fn run(self) -> (f64, u64) {
        let mut a = BlockArray::<f64>::new(self.n).expect("room for a");
        let mut b = BlockArray::<f64>::new(self.n).expect("room for b");
        let mut c = BlockArray::<f64>::new(self.n).expect("room for c");
        b.forall_local(|_, x| *x = 2.0);
        c.forall_local(|_, x| *x = 1.0);
        a.forall_local(|_, x| *x = 0.0);
        let mut best = f64::INFINITY;
        for _ in 0..TRIALS {
            pgas::barrier();
            let start = Instant::now();
            let (b, c) = (b.local(), c.local());
            cantus::forall_chunks_mut(a.local_mut(), CHUNK, |k, chunk| {
                let lo = k * CHUNK;
                let (b, c) = (&b[lo..lo + chunk.len()], &c[lo..lo + chunk.len()]);
                for ((x, &y), &z) in chunk.iter_mut().zip(b).zip(c) {
                    *x = y + SCALAR * z;
                }
            });
            let took = pgas::all_reduce(start.elapsed().as_secs_f64(), pgas::max);
            best = best.min(took);
        }
        let wrong = a.local().iter().filter(|&&x| x != 2.0 + SCALAR).count() as u64;
        (best, pgas::all_reduce(wrong, pgas::sum))
    }
}
cantus::remote!(Stream);

fn main() {
    let mut args = std::env::args().skip(1);
    let n: usize = args
        .next()
        .map_or(1 << 23, |a| a.parse().unwrap_or_else(|_| usage()));
    let locales: usize = args
        .next()
        .map_or(2, |a| a.parse().unwrap_or_else(|_| usage()));
    let per_locale = n.div_ceil(locales.max(1));
    let rt = cantus::Runtime::builder()
        .default_locales(locales)
        .heap_bytes((3 * per_locale * 8 + (1 << 20)).max(64 << 10))
        .build()
        .unwrap_or_else(|e| {
            eprintln!("stream_ep: {e}");
            std::process::exit(1)
        });
    let out = rt
        .block_on(|| pgas::spmd(Stream { n }))
        .unwrap_or_else(|e| {
            eprintln!("stream_ep: {e}");
            std::process::exit(1)
        });
    let locales = cantus::num_locales();
    rt.shutdown();
    let (best, wrong) = out[0];
    assert_eq!(wrong, 0, "every a[i] is b[i] + s * c[i]");
    println!(
        "stream_ep: triad on {n} elements over {locales} locales: best of {TRIALS} {:.2} ms, \
         aggregate {:.2} GB/s; results check",
        best * 1e3,
        24.0 * n as f64 / best / 1e9
    );
}

fn usage() -> ! {
    eprintln!("usage: stream_ep [ELEMENTS] [LOCALES] (positive integers)");
    std::process::exit(2)
}
