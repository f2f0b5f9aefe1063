//! Naive parallel quicksort (seed 000, section 7.1): partition around a
//! pivot in serial, then sort both sides as two tasks with `cobegin`, at
//! every level and with no serial cut-off, so it spawns about one task per
//! element. Sorts pseudo-random `u64`s from a fixed seed, on the full
//! runtime and then on a 1-worker runtime, and prints the speedup of the
//! full run over the 1-worker run of the same code; both results are
//! checked against `sort_unstable` of a copy (sorted and a permutation).
//!
//! `cargo run --release --example quicksort -- 1048576`

use cantus_programs::random::SplitMix64;
use cantus_programs::sort::partition;

fn quicksort(v: &mut [u64]) {
    if v.len() <= 1 {
        return;
    }
    let p = partition(v);
    let (left, rest) = v.split_at_mut(p);
    let right = &mut rest[1..];
    cantus::cobegin!(quicksort(left), quicksort(right));
}

/// Sorts `data` with the parallel quicksort on `rt`; returns the seconds.
fn timed_sort(rt: &cantus::Runtime, data: &mut [u64]) -> f64 {
    let t = std::time::Instant::now();
    rt.block_on(|| quicksort(data));
    t.elapsed().as_secs_f64()
}

fn start(builder: cantus::config::Builder) -> cantus::Runtime {
    builder.build().unwrap_or_else(|e| {
        eprintln!("quicksort: {e}");
        std::process::exit(2);
    })
}

/// Exits with a message unless `data` is the sorted `expected`.
fn check(what: &str, data: &[u64], expected: &[u64]) {
    if let Some(i) = data.windows(2).position(|w| w[0] > w[1]) {
        eprintln!(
            "quicksort: WRONG ({what}): not sorted at index {i}: {} > {}",
            data[i],
            data[i + 1]
        );
        std::process::exit(1);
    }
    if data != expected {
        eprintln!("quicksort: WRONG ({what}): the output is not a permutation of the input");
        std::process::exit(1);
    }
}

fn main() {
    let n: usize = std::env::args()
        .nth(1)
        .map(|a| a.parse().expect("usage: quicksort [N]"))
        .unwrap_or(1 << 20);
    let mut rng = SplitMix64(0x5EED);
    let input: Vec<u64> = (0..n).map(|_| rng.next()).collect();

    let mut expected = input.clone();
    let t = std::time::Instant::now();
    expected.sort_unstable();
    let std_secs = t.elapsed().as_secs_f64();

    let rt = start(cantus::Runtime::builder());
    let workers = rt.workers();
    let mut data = input.clone();
    let secs = timed_sort(&rt, &mut data);
    rt.shutdown();
    check(&format!("{workers} workers"), &data, &expected);

    // The same parallel code on one worker: the baseline the speedup is
    // measured against (every task is still created, joined and run). One
    // runtime runs at a time, so it starts after the full one has shut
    // down. It keeps the defaults apart from the worker count, so that
    // CANTUS_WORKERS does not change it.
    let one = start(cantus::Runtime::builder().ignore_environment().workers(1));
    let mut data = input;
    let one_secs = timed_sort(&one, &mut data);
    one.shutdown();
    check("1 worker", &data, &expected);

    let plural = if workers == 1 { "" } else { "s" };
    println!(
        "quicksort of {n} u64: {secs:.3} s on {workers} worker{plural}, {one_secs:.3} s on 1 worker: \
         speedup {:.2}x over the same code on 1 worker",
        one_secs / secs
    );
    println!(
        "  (for scale, std's serial sort_unstable, a different algorithm with no tasks: {std_secs:.3} s)"
    );
    println!("quicksort: both results checked against sort_unstable: OK");
}
