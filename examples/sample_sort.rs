//! Sample sort across locales: every locale draws its share of `N`
//! pseudo-random 64-bit keys, sorts them, and all of them agree on
//! splitters from a sample (`pgas::all_gather`); each locale then sends
//! every other the keys that fall in its range (`pgas::all_to_all_v`)
//! and sorts what it received. Locale 0 checks that the locales' runs
//! are sorted, in order across locales, and hold exactly the keys drawn
//! (their count and a sum computed serially).
//!
//! ```text
//! cargo run --release --example sample_sort [N] [LOCALES] [ROUNDS]
//! ```
//!
//! Defaults: 4,000,000 keys, 2 locales (`CANTUS_LOCALES` overrides), 1
//! round. It prints the time of the sort and of its all-to-all-v (the
//! slowest locale's, the median of the rounds); `bench/c/sample_sort_mpi.c`
//! does the same with `MPI_Allgather`, `MPI_Alltoall` and `MPI_Alltoallv`.

use cantus::pgas;
use std::time::Instant;

/// Samples each locale contributes to choose the splitters.
const SAMPLES: usize = 64;

/// The `i`-th key (SplitMix64: any key from its index).
fn key(i: u64) -> u64 {
    let mut z = i.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

cantus::remote_fn! {
    /// The SPMD body: sorts `n` keys across the locales `rounds` times;
    /// returns this locale's run's (length, first, last, wrapping sum),
    /// whether it is sorted, and the slowest locale's seconds for the
    /// sort and for its all-to-all-v (medians of the rounds).
    fn sample_sort(n: u64, rounds: usize) -> ([u64; 4], bool, f64, f64) {
        let (me, locales) = (cantus::here() as u64, cantus::num_locales());
        let (lo, hi) = (n * me / locales as u64, n * (me + 1) / locales as u64);
        let mut times = Vec::new();
        let mut run = Vec::new();
        for _ in 0..rounds {
            let mut keys: Vec<u64> = (lo..hi).map(key).collect();
            pgas::barrier();
            let start = Instant::now();
            keys.sort_unstable();
            // Evenly spaced samples of the sorted keys, from every locale.
            let samples: Vec<u64> = (0..SAMPLES)
                .map(|s| keys.get(s * keys.len() / SAMPLES).copied().unwrap_or(u64::MAX))
                .collect();
            let mut all = pgas::all_gather(&samples);
            all.sort_unstable();
            let splitters: Vec<u64> = (1..locales).map(|l| all[l * all.len() / locales]).collect();
            // Keys below splitter l go to locale l (the keys are sorted:
            // each part is a range of them).
            let mut parts = Vec::with_capacity(locales);
            let mut from = 0;
            for &s in &splitters {
                let to = from + keys[from..].partition_point(|&k| k < s);
                parts.push(&keys[from..to]);
                from = to;
            }
            parts.push(&keys[from..]);
            let t = Instant::now();
            let received = pgas::all_to_all_v(&parts);
            let exchanged = t.elapsed().as_secs_f64();
            run = received.concat();
            run.sort_unstable();
            times.push((start.elapsed().as_secs_f64(), exchanged));
        }
        times.sort_by(|a, b| a.0.total_cmp(&b.0));
        let (took, exchanged) = times[times.len() / 2];
        let sorted = run.windows(2).all(|w| w[0] <= w[1]);
        let sum = run.iter().fold(0u64, |s, &k| s.wrapping_add(k));
        let ends = [
            run.len() as u64,
            run.first().copied().unwrap_or(u64::MAX),
            run.last().copied().unwrap_or(0),
            sum,
        ];
        (
            ends,
            sorted,
            pgas::all_reduce(took, pgas::max),
            pgas::all_reduce(exchanged, pgas::max),
        )
    }
}

fn main() {
    let mut args = std::env::args().skip(1);
    let mut arg = |default: u64| -> u64 {
        args.next().map_or(default, |a| {
            a.parse().ok().filter(|&v| v > 0).unwrap_or_else(|| usage())
        })
    };
    let (n, locales, rounds) = (arg(4_000_000), arg(2) as usize, arg(1) as usize);
    let rt = cantus::Runtime::builder()
        .default_locales(locales)
        .build()
        .unwrap_or_else(|e| fail(e));
    let parts = rt
        .block_on(|| pgas::spmd(sample_sort(n, rounds)))
        .unwrap_or_else(|e| fail(e));
    let locales = cantus::num_locales();
    rt.shutdown();

    let want_sum = (0..n).fold(0u64, |s, i| s.wrapping_add(key(i)));
    let count: u64 = parts.iter().map(|p| p.0[0]).sum();
    let sum = parts.iter().fold(0u64, |s, p| s.wrapping_add(p.0[3]));
    assert!(parts.iter().all(|p| p.1), "every locale's run is sorted");
    let nonempty: Vec<_> = parts.iter().filter(|p| p.0[0] > 0).collect();
    assert!(
        nonempty.windows(2).all(|w| w[0].0[2] <= w[1].0[1]),
        "the runs are in order across locales"
    );
    assert_eq!(count, n, "every key is somewhere, once");
    assert_eq!(sum, want_sum, "the keys are the ones drawn");
    let (took, exchanged) = (parts[0].2, parts[0].3);
    let sizes: Vec<u64> = parts.iter().map(|p| p.0[0]).collect();
    println!(
        "sample_sort: {n} keys on {locales} locales: {:.2} ms ({:.2} ms of it in \
         all_to_all_v), runs of {sizes:?} keys, sorted across locales and checked",
        took * 1e3,
        exchanged * 1e3
    );
}

fn fail(e: cantus::Error) -> ! {
    eprintln!("sample_sort: {e}");
    std::process::exit(1)
}

fn usage() -> ! {
    eprintln!("usage: sample_sort [N] [LOCALES] [ROUNDS] (positive integers)");
    std::process::exit(2)
}
