//! Application benchmarks with a task at every level and no serial
//! cut-off: fib, quicksort (seed 000, section 7.1) and tree exploration
//! (section 7.2). Each kernel is written once, generic over the fork-join
//! primitive, and run on cantus, rayon, the thread-per-task `fifo`
//! baseline and serially. The runs of one repetition follow each other,
//! one tasking layer alive at a time.

use crate::fifo;
use crate::stats::{Samples, figure, ms, note, ratio, section, time, value};
use crate::{Options, start_cantus, start_cantus_with};
use std::time::Duration;

/// A fork-join primitive: `join(a, b)` runs both, maybe in parallel.
pub(crate) trait ForkJoin {
    /// The peer name used in figure lines.
    const NAME: &'static str;

    fn join<A, B, RA, RB>(a: A, b: B) -> (RA, RB)
    where
        A: FnOnce() -> RA + Send,
        B: FnOnce() -> RB + Send,
        RA: Send,
        RB: Send;

    /// Starts the tasking layer with `workers` threads, runs `f` inside it
    /// (as a task, where the layer has tasks), and stops it again.
    fn session<R: Send>(workers: usize, f: impl FnOnce() -> R + Send) -> R;
}

pub(crate) struct Serial;
/// cantus; `STACK` > 0 sets the task stack size in bytes (0: the default;
/// `CANTUS_STACK_SIZE`, if set, overrides either).
pub(crate) struct CantusWith<const STACK: usize>;
/// rayon; `STACK` > 0 sets the thread stack size in bytes (0: rayon's
/// default).
pub(crate) struct RayonWith<const STACK: usize>;
pub(crate) type Cantus = CantusWith<0>;
pub(crate) type Rayon = RayonWith<0>;
struct Fifo;

impl ForkJoin for Serial {
    const NAME: &'static str = "serial";

    fn join<A, B, RA, RB>(a: A, b: B) -> (RA, RB)
    where
        A: FnOnce() -> RA + Send,
        B: FnOnce() -> RB + Send,
        RA: Send,
        RB: Send,
    {
        (a(), b())
    }

    fn session<R: Send>(_workers: usize, f: impl FnOnce() -> R + Send) -> R {
        f()
    }
}

impl<const STACK: usize> ForkJoin for CantusWith<STACK> {
    const NAME: &'static str = "cantus";

    fn join<A, B, RA, RB>(a: A, b: B) -> (RA, RB)
    where
        A: FnOnce() -> RA + Send,
        B: FnOnce() -> RB + Send,
        RA: Send,
        RB: Send,
    {
        cantus::join(a, b)
    }

    fn session<R: Send>(workers: usize, f: impl FnOnce() -> R + Send) -> R {
        let rt = start_cantus_with(workers, (STACK > 0).then_some(STACK));
        let r = rt.block_on(f);
        rt.shutdown();
        r
    }
}

impl<const STACK: usize> ForkJoin for RayonWith<STACK> {
    const NAME: &'static str = "rayon";

    fn join<A, B, RA, RB>(a: A, b: B) -> (RA, RB)
    where
        A: FnOnce() -> RA + Send,
        B: FnOnce() -> RB + Send,
        RA: Send,
        RB: Send,
    {
        rayon::join(a, b)
    }

    fn session<R: Send>(workers: usize, f: impl FnOnce() -> R + Send) -> R {
        let mut builder = rayon::ThreadPoolBuilder::new().num_threads(workers);
        if STACK > 0 {
            builder = builder.stack_size(STACK);
        }
        let pool = builder.build().unwrap_or_else(|e| {
            eprintln!("cantus-bench: cannot start a rayon pool: {e}");
            std::process::exit(2);
        });
        pool.install(f)
        // Dropping the pool tells its threads to exit.
    }
}

/// Thread limit of the fifo pools (set once from the options).
static FIFO_THREADS: std::sync::atomic::AtomicUsize =
    std::sync::atomic::AtomicUsize::new(fifo::DEFAULT_THREAD_LIMIT);

impl ForkJoin for Fifo {
    const NAME: &'static str = "fifo";

    fn join<A, B, RA, RB>(a: A, b: B) -> (RA, RB)
    where
        A: FnOnce() -> RA + Send,
        B: FnOnce() -> RB + Send,
        RA: Send,
        RB: Send,
    {
        fifo::join(a, b)
    }

    fn session<R: Send>(_workers: usize, f: impl FnOnce() -> R + Send) -> R {
        let pool = fifo::Pool::new(FIFO_THREADS.load(std::sync::atomic::Ordering::Relaxed));
        let r = pool.install(f);
        note(&format!("fifo: {} threads started", pool.threads()));
        r
    }
}

// ---- kernels ----

pub(crate) fn fib<J: ForkJoin>(n: u32) -> u64 {
    if n < 2 {
        return n as u64;
    }
    let (a, b) = J::join(|| fib::<J>(n - 1), || fib::<J>(n - 2));
    a + b
}

/// Joins made by `fib(n)`: one per call with `n >= 2`, `fib(n + 1) - 1`.
fn fib_joins(n: u32) -> u64 {
    let (mut calls_small, mut calls) = (0u64, 0u64);
    for _ in 2..=n {
        (calls_small, calls) = (calls, calls + calls_small + 1);
    }
    calls
}

pub(crate) use cantus_programs::random::SplitMix64;
use cantus_programs::sort::partition;

/// Naive quicksort: serial partition, then both sides as two tasks.
pub(crate) fn quicksort<J: ForkJoin>(v: &mut [u64]) {
    if v.len() <= 1 {
        return;
    }
    let p = partition(v);
    let (left, rest) = v.split_at_mut(p);
    let right = &mut rest[1..];
    J::join(|| quicksort::<J>(left), || quicksort::<J>(right));
}

pub(crate) struct Node {
    id: u64,
    left: Option<Box<Node>>,
    right: Option<Box<Node>>,
}

/// A balanced tree with one node per id in `lo..hi`.
pub(crate) fn build<J: ForkJoin>(lo: u64, hi: u64) -> Option<Box<Node>> {
    if lo >= hi {
        return None;
    }
    let mid = lo + (hi - lo) / 2;
    let (left, right) = J::join(|| build::<J>(lo, mid), || build::<J>(mid + 1, hi));
    Some(Box::new(Node {
        id: mid,
        left,
        right,
    }))
}

pub(crate) fn sum<J: ForkJoin>(tree: &Option<Box<Node>>) -> u64 {
    match tree {
        None => 0,
        Some(node) => {
            let (a, b) = J::join(|| sum::<J>(&node.left), || sum::<J>(&node.right));
            node.id + a + b
        }
    }
}

// ---- measurements ----

struct Sizes {
    fib: u32,
    quicksort: usize,
    tree: u64,
}

pub(crate) fn run(opts: &Options) {
    let reps = opts.reps.unwrap_or(if opts.quick { 3 } else { 5 });
    let sizes = if opts.quick {
        Sizes {
            fib: 25,
            quicksort: 1 << 20,
            tree: 1 << 18,
        }
    } else {
        Sizes {
            fib: 30,
            quicksort: 1 << 24,
            tree: 1 << 22,
        }
    };
    FIFO_THREADS.store(opts.fifo_threads, std::sync::atomic::Ordering::Relaxed);
    let workers = {
        let rt = start_cantus();
        let w = rt.workers();
        rt.shutdown();
        w
    };
    note(&format!(
        "apps: {workers} workers (rayon threads alike), fifo thread limit {}, {reps} reps",
        opts.fifo_threads
    ));
    if opts.wants("fib") {
        section("fib", || fib_bench(sizes.fib, reps * 2 + 1, workers));
    }
    if opts.wants("quicksort") {
        section("quicksort", || {
            quicksort_bench(sizes.quicksort, reps, workers)
        });
    }
    if opts.wants("tree") {
        section("tree", || tree_bench(sizes.tree, reps, workers));
    }
}

/// fib(n) on cantus and rayon, and serially; per-join overhead
/// `(parallel time * workers - serial time) / joins`.
fn fib_bench(n: u32, reps: usize, workers: usize) {
    let expected = fib::<Serial>(n);
    let run = |f: &dyn Fn() -> (Duration, u64)| {
        let (d, r) = f();
        assert_eq!(r, expected, "fib({n}) gave a wrong answer");
        ms(d)
    };
    let mut serial = Samples::new();
    let mut ours = Samples::new();
    let mut rayon = Samples::new();
    note(&format!("fib{n}: {reps} reps"));
    for _ in 0..reps {
        serial.push(run(&|| time(|| fib::<Serial>(n))));
        ours.push(run(&|| {
            timed_session::<Cantus, _>(workers, || fib::<Cantus>(n))
        }));
        rayon.push(run(&|| {
            timed_session::<Rayon, _>(workers, || fib::<Rayon>(n))
        }));
    }
    let name = format!("fib{n}");
    let s = figure(&format!("{name}.serial"), &serial, "ms");
    let c = figure(&name, &ours, "ms");
    let r = figure(&format!("{name}.rayon"), &rayon, "ms");
    ratio(&name, "rayon", c, r);
    let joins = fib_joins(n) as f64;
    let overhead = |t: f64| (t * workers as f64 - s) * 1e6 / joins;
    let (oc, or) = (overhead(c), overhead(r));
    note(&format!("{name}: {joins} joins, {workers} workers"));
    value(&format!("{name}_join_overhead"), oc, "ns");
    value(&format!("{name}_join_overhead.rayon"), or, "ns");
    ratio(&format!("{name}_join_overhead"), "rayon", oc, or);
}

/// Runs `f` once to warm the layer up, then once timed, in one session.
pub(crate) fn timed_session<J: ForkJoin, R: Send>(
    workers: usize,
    f: impl Fn() -> R + Send,
) -> (Duration, R) {
    J::session(workers, || {
        drop(f());
        time(f)
    })
}

fn quicksort_bench(n: usize, reps: usize, workers: usize) {
    let mut rng = SplitMix64(0x5EED);
    let input: Vec<u64> = (0..n).map(|_| rng.next()).collect();
    let mut reference = input.clone();
    reference.sort_unstable();
    let warm: Vec<u64> = input[..n.min(1 << 16)].to_vec();
    let mut buf = vec![0u64; n];
    let mut warm_buf = warm.clone();
    let mut samples: [Samples; 4] = Default::default();
    note(&format!("quicksort of {n} u64: {reps} reps"));
    for _ in 0..reps {
        for (k, s) in samples.iter_mut().enumerate() {
            buf.copy_from_slice(&input);
            let d = match k {
                0 => sort_session::<Serial>(workers, &mut buf, &mut warm_buf, &warm),
                1 => sort_session::<Cantus>(workers, &mut buf, &mut warm_buf, &warm),
                2 => sort_session::<Rayon>(workers, &mut buf, &mut warm_buf, &warm),
                _ => sort_session::<Fifo>(workers, &mut buf, &mut warm_buf, &warm),
            };
            assert!(buf == reference, "quicksort gave a wrong answer");
            s.push(ms(d));
        }
    }
    report_app("quicksort", &samples);
}

/// Sorts a small copy to warm the layer up, then `buf`, timed.
pub(crate) fn sort_session<J: ForkJoin>(
    workers: usize,
    buf: &mut [u64],
    warm_buf: &mut [u64],
    warm: &[u64],
) -> Duration {
    J::session(workers, || {
        warm_buf.copy_from_slice(warm);
        quicksort::<J>(warm_buf);
        time(|| quicksort::<J>(buf)).0
    })
}

fn tree_bench(n: u64, reps: usize, workers: usize) {
    let expected = n * n.saturating_sub(1) / 2;
    let mut samples: [Samples; 4] = Default::default();
    note(&format!("tree of {n} nodes: {reps} reps"));
    for _ in 0..reps {
        for (k, s) in samples.iter_mut().enumerate() {
            let (d, total, tree) = match k {
                0 => tree_session::<Serial>(workers, n),
                1 => tree_session::<Cantus>(workers, n),
                2 => tree_session::<Rayon>(workers, n),
                _ => tree_session::<Fifo>(workers, n),
            };
            assert_eq!(total, expected, "tree gave a wrong answer");
            // Freed outside the timing, with no tasking layer running.
            drop(tree);
            s.push(ms(d));
        }
    }
    report_app("tree", &samples);
}

/// Builds and sums a small tree to warm up, then the real one, timed.
pub(crate) fn tree_session<J: ForkJoin>(
    workers: usize,
    n: u64,
) -> (Duration, u64, Option<Box<Node>>) {
    J::session(workers, || {
        let warm = build::<J>(0, n.min(1 << 14));
        std::hint::black_box(sum::<J>(&warm));
        drop(warm);
        let (d, (tree, total)) = time(|| {
            let tree = build::<J>(0, n);
            let total = sum::<J>(&tree);
            (tree, total)
        });
        (d, total, tree)
    })
}

/// Prints the figures of an app measured as [serial, cantus, rayon, fifo].
fn report_app(name: &str, samples: &[Samples; 4]) {
    let s = figure(&format!("{name}.{}", Serial::NAME), &samples[0], "ms");
    let c = figure(name, &samples[1], "ms");
    let r = figure(&format!("{name}.{}", Rayon::NAME), &samples[2], "ms");
    let f = figure(&format!("{name}.{}", Fifo::NAME), &samples[3], "ms");
    note(&format!(
        "{name}: speed-up over serial: {} {:.2}x, {} {:.2}x, {} {:.2}x",
        Cantus::NAME,
        s / c,
        Rayon::NAME,
        s / r,
        Fifo::NAME,
        s / f
    ));
    ratio(name, Fifo::NAME, c, f);
    ratio(name, Rayon::NAME, c, r);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kernels_agree_with_serial_answers() {
        assert_eq!(fib::<Serial>(20), 6765);
        assert_eq!(fib_joins(30), 1_346_268);
        assert_eq!(fib_joins(1), 0);
        assert_eq!(fib_joins(2), 1);
        let mut rng = SplitMix64(1);
        for n in [0usize, 1, 2, 3, 10, 1000] {
            let mut v: Vec<u64> = (0..n).map(|_| rng.next() % 17).collect();
            let mut w = v.clone();
            w.sort_unstable();
            quicksort::<Serial>(&mut v);
            assert_eq!(v, w);
        }
        let tree = build::<Serial>(0, 1000);
        assert_eq!(sum::<Serial>(&tree), 999 * 1000 / 2);
    }

    #[test]
    fn fifo_layer_runs_the_kernels() {
        let mut v: Vec<u64> = (0..5000u64).rev().collect();
        Fifo::session(2, || quicksort::<Fifo>(&mut v));
        assert!(v.windows(2).all(|w| w[0] <= w[1]));
        let total = Fifo::session(2, || sum::<Fifo>(&build::<Fifo>(0, 3000)));
        assert_eq!(total, 2999 * 3000 / 2);
    }
}
