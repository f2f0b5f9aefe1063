//! Naive parallel quicksort (seed 000, section 7.1): partition around a
//! pivot in serial, then sort both sides as two tasks with `cobegin`, at
//! every level and with no serial cut-off, so it spawns about one task per
//! element. Sorts pseudo-random `u64`s from a fixed seed and checks the
//! result against `sort_unstable` of a copy (sorted and a permutation).
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

fn main() {
    let n: usize = std::env::args()
        .nth(1)
        .map(|a| a.parse().expect("usage: quicksort [N]"))
        .unwrap_or(1 << 20);
    let mut rng = SplitMix64(0x5EED);
    let mut data: Vec<u64> = (0..n).map(|_| rng.next()).collect();
    let mut expected = data.clone();
    let rt = match cantus::Runtime::new() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("quicksort: {e}");
            std::process::exit(2);
        }
    };
    let t = std::time::Instant::now();
    rt.block_on(|| quicksort(&mut data));
    let elapsed = t.elapsed();
    let t = std::time::Instant::now();
    expected.sort_unstable();
    let serial_elapsed = t.elapsed();
    println!(
        "quicksort of {n} u64 on {} workers in {:.3} s (sort_unstable {:.3} s)",
        rt.workers(),
        elapsed.as_secs_f64(),
        serial_elapsed.as_secs_f64()
    );
    rt.shutdown();
    if let Some(i) = data.windows(2).position(|w| w[0] > w[1]) {
        eprintln!(
            "quicksort: WRONG: not sorted at index {i}: {} > {}",
            data[i],
            data[i + 1]
        );
        std::process::exit(1);
    }
    if data != expected {
        eprintln!("quicksort: WRONG: the output is not a permutation of the input");
        std::process::exit(1);
    }
    println!("quicksort: result checked against sort_unstable: OK");
}
