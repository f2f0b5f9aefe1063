//! A distributed histogram with remote atomics: every locale draws its
//! share of pseudo-random values and bins each into one global
//! histogram (a `BlockArray<u64>`, each bin on its owner) with
//! `fetch_add`; locale 0 checks the bins against a serial count.
//!
//! ```text
//! cargo run --release --example histogram [VALUES] [LOCALES]
//! ```
//!
//! Defaults: 4,000,000 values on 2 locales (`CANTUS_LOCALES` overrides).

use cantus::pgas::{self, BlockArray};
use serde::{Deserialize, Serialize};
use std::time::Instant;

const BINS: usize = 1000;

/// The `i`-th value of the sequence (SplitMix64: any value from its
/// index, so locales and tasks need no shared generator).
fn value(i: u64) -> u64 {
    let mut z = i.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

fn bin(v: u64) -> usize {
    (v % BINS as u64) as usize
}

/// The SPMD body: bins values `lo..hi` of this locale's share.
#[derive(Clone, Serialize, Deserialize)]
struct Histogram {
    values: u64,
}

impl cantus::Remote for Histogram {
    /// (this locale's first bin, its bins, seconds it took all locales)
    type Output = (usize, Vec<u64>, f64);
    fn run(self) -> (usize, Vec<u64>, f64) {
        let (me, n) = (cantus::here() as u64, cantus::num_locales() as u64);
        let hist = BlockArray::<u64>::new(BINS).expect("room for the histogram");
        let (lo, hi) = (self.values * me / n, self.values * (me + 1) / n);
        pgas::barrier();
        let start = Instant::now();
        cantus::forall(lo as usize..hi as usize).for_each(|i| {
            let b = bin(value(i as u64));
            hist.ptr(b)
                .and_then(|p| p.fetch_add(1))
                .expect("a bin of the histogram");
        });
        pgas::barrier();
        let took = pgas::all_reduce(start.elapsed().as_secs_f64(), pgas::max);
        (hist.local_range().start, hist.local().to_vec(), took)
    }
}
cantus::remote!(Histogram);

fn main() {
    let mut args = std::env::args().skip(1);
    let values: u64 = args
        .next()
        .map_or(4_000_000, |a| a.parse().unwrap_or_else(|_| usage()));
    let locales: usize = args
        .next()
        .map_or(2, |a| a.parse().unwrap_or_else(|_| usage()));
    let rt = cantus::Runtime::builder()
        .default_locales(locales)
        .build()
        .unwrap_or_else(|e| {
            eprintln!("histogram: {e}");
            std::process::exit(1)
        });
    let parts = rt
        .block_on(|| pgas::spmd(Histogram { values }))
        .unwrap_or_else(|e| {
            eprintln!("histogram: {e}");
            std::process::exit(1)
        });
    let locales = cantus::num_locales();
    rt.shutdown();

    let mut global = vec![0u64; BINS];
    for (first, bins, _) in &parts {
        global[*first..*first + bins.len()].copy_from_slice(bins);
    }
    let took = parts[0].2;
    let start = Instant::now();
    let mut serial = vec![0u64; BINS];
    for i in 0..values {
        serial[bin(value(i))] += 1;
    }
    let serial_took = start.elapsed().as_secs_f64();
    assert_eq!(
        global.iter().sum::<u64>(),
        values,
        "every value binned once"
    );
    assert_eq!(global, serial, "the bins match a serial count");
    println!(
        "histogram: {values} values into {BINS} bins on {locales} locales with remote \
         fetch_add: {:.3} s ({:.1} M updates/s); serial plain increments: {:.3} s; bins match",
        took,
        values as f64 / took / 1e6,
        serial_took
    );
}

fn usage() -> ! {
    eprintln!("usage: histogram [VALUES] [LOCALES] (positive integers)");
    std::process::exit(2)
}
