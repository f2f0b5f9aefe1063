//! Naive parallel quicksort (seed 000, section 7.1): partition around a
//! pivot in serial, then sort both sides as two tasks with `cobegin`, at
//! every level and with no serial cut-off, so it spawns about one task per
//! element. Sorts pseudo-random `u64`s from a fixed seed, on the full
//! runtime and then on a 1-worker runtime, and prints the speedup of the
//! full run over the 1-worker run of the same code; both results are
//! checked against `sort_unstable` of a copy (sorted and a permutation).
//!
//! `cargo run --release --example quicksort -- 1048576`

/// splitmix64 (Steele, Lea, Flood: "Fast splittable pseudorandom number
/// generators", 2014): a fixed seed gives the same input on every run.
struct SplitMix64(u64);

impl SplitMix64 {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
}

/// Partitions `v` (at least two elements) around the median of its first,
/// middle and last elements. Returns the pivot's final index `p`: every
/// element before `p` is `<=` the pivot and every one after is `>=`.
/// (Sedgewick's scheme: equal keys stop both scans, so runs of equal
/// keys split evenly.)
fn partition(v: &mut [u64]) -> usize {
    let last = v.len() - 1;
    let mid = v.len() / 2;
    if v[mid] < v[0] {
        v.swap(mid, 0);
    }
    if v[last] < v[0] {
        v.swap(last, 0);
    }
    if v[last] < v[mid] {
        v.swap(last, mid);
    }
    v.swap(0, mid);
    let pivot = v[0];
    let (mut i, mut j) = (1, last);
    loop {
        while i <= j && v[i] < pivot {
            i += 1;
        }
        // Stops at index 0 at the latest, which holds the pivot.
        while v[j] > pivot {
            j -= 1;
        }
        if i >= j {
            break;
        }
        v.swap(i, j);
        i += 1;
        j -= 1;
    }
    v.swap(0, j);
    j
}

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

fn start(builder: cantus::Builder) -> cantus::Runtime {
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
