//! `cantus-bench scale`: a scaling sweep. Each benchmark runs serially
//! once, then at 1, 2, 4, 8, ... workers up to the CPU count (the CPU
//! count itself always included) on cantus, on a rayon pool of as many
//! threads, and on GNU OpenMP with as many threads where the benchmark has
//! an OpenMP version; the figure is the speedup over the serial time.
//!
//! The benchmarks, each checking its own result:
//!
//! - `fib<n>`: fib(n) with a join at every level (n = 30; 25 with
//!   `--quick`), checked against the serial value;
//! - `quicksort`: 2^24 random u64 (2^20), a task at every level, checked
//!   against `sort_unstable`;
//! - `tree`: build a balanced tree of 2^22 nodes (2^18) in parallel and
//!   sum its ids in parallel, checked against n(n-1)/2;
//! - `uts_t1`, `uts_t3`: UTS-style unbalanced trees (see [`uts()`]; about 4
//!   million nodes each, 130,000 and 250,000 with `--quick`; a few
//!   nanoseconds of hashing a node, so the tasking layer's cost per node
//!   dominates), a task per node with blocking joins, the node count checked against an independent serial
//!   traversal and the count pinned for the tree; cantus tasks and rayon
//!   threads get 4 MiB stacks here ([`UTS_STACK`]: the T3-like tree is
//!   over a thousand levels deep);
//! - `lcals.muladdsub.long` (streams 2 arrays in, 3 out) and
//!   `lcals.trap_int.long` (a reduction: a square root and a division per
//!   element, no memory traffic): the suite's LCALS kernels at the long
//!   size (44217), cantus `forall` (adaptive schedule), rayon
//!   (`rayon::iter::split`, the same grain) and the suite's OpenMP peer
//!   (`OMP_NUM_THREADS` = workers, `OMP_WAIT_POLICY=active`,
//!   `OMP_PROC_BIND=true`: its best setting, see `suite/peer.rs`), checked
//!   against serial loops and the cantus checksum against OpenMP's.
//!
//! The first five reuse the kernels and sessions of [`crate::apps`]: every
//! repetition starts the tasking layer afresh with the worker count (one
//! cantus runtime at a time, shut down before the next; rayon's pool is
//! dropped likewise), warms it up with a small run, then times one run.
//! Within a repetition the peers follow each other, in an order that
//! alternates between repetitions. The serial time is the median over the
//! repetitions of the same kernel with plain calls instead of joins (a
//! plain serial loop for LCALS), measured once per benchmark; every
//! peer's speedup is over that one time, so the curves of one chart
//! compare times directly. (For LCALS that includes the compilers' share:
//! gcc's serial loops are slower than rustc's here, `suite --baseline`.)
//!
//! Output: figures on stdout (`scale.<benchmark>.w<workers>` for cantus,
//! `...w<workers>.rayon`, `...w<workers>.openmp`, `.../rayon` ratios and
//! `..._speedup` values; `scale.<benchmark>.serial`), notes on stderr, and
//! in `--out` (default `target/bench-out`) `scale.csv`
//! (`benchmark,peer,workers,median_s,speedup`; LCALS times are per trial),
//! `scale.md` (the table, also printed on stderr) and one
//! `scale-<benchmark>.svg` speedup chart per benchmark.
//!
//! ```text
//! cantus-bench scale [--quick] [--reps N] [--max N] [--out DIR] [--only TEXT]
//! ```

mod report;
mod uts;

use crate::apps::{self, Cantus, ForkJoin, Rayon, Serial};
use crate::stats::{Samples, figure, note, ratio, time, value};
use crate::suite::Sched;
use crate::suite::lcals::{Kernel, Lcals, Size};
use crate::suite::peer::Peer;
use report::Row;
use std::path::PathBuf;
use std::time::Instant;

/// The peers, as named in figures and in the CSV.
pub(crate) const SERIAL: &str = "serial";
pub(crate) const CANTUS: &str = "cantus";
pub(crate) const RAYON: &str = "rayon";
pub(crate) const OPENMP: &str = "openmp";

struct ScaleOptions {
    quick: bool,
    reps: Option<usize>,
    max: Option<usize>,
    out: PathBuf,
    only: Option<String>,
}

fn usage() -> ! {
    eprintln!(
        "usage: cantus-bench scale [--quick] [--reps N] [--max N] [--out DIR] [--only TEXT]\n\
         \n\
         Runs fib, quicksort, tree, two UTS trees and two LCALS kernels serially, then at\n\
         1, 2, 4, ... workers up to the CPU count (or N) on cantus, rayon and, for LCALS,\n\
         OpenMP; checks every result; prints the times and speedups over serial, and\n\
         writes scale.csv, scale.md and scale-<benchmark>.svg to DIR (default\n\
         target/bench-out). --only runs the benchmarks whose name contains TEXT."
    );
    std::process::exit(2);
}

fn parse(args: &[String]) -> ScaleOptions {
    let mut opts = ScaleOptions {
        quick: false,
        reps: None,
        max: None,
        out: PathBuf::from("target/bench-out"),
        only: None,
    };
    let mut it = args.iter();
    while let Some(a) = it.next() {
        let mut value = |what: &str| -> String {
            it.next().cloned().unwrap_or_else(|| {
                eprintln!("cantus-bench scale: {what} needs a value");
                usage()
            })
        };
        let positive = |what: &str, v: String| -> usize {
            match v.parse() {
                Ok(n) if n > 0 => n,
                _ => {
                    eprintln!("cantus-bench scale: {what} needs a positive integer");
                    usage()
                }
            }
        };
        match a.as_str() {
            "--quick" => opts.quick = true,
            "--reps" => opts.reps = Some(positive("--reps", value("--reps"))),
            "--max" => opts.max = Some(positive("--max", value("--max"))),
            "--out" => opts.out = PathBuf::from(value("--out")),
            "--only" => opts.only = Some(value("--only")),
            "-h" | "--help" => usage(),
            _ => {
                eprintln!("cantus-bench scale: unknown option {a}");
                usage()
            }
        }
    }
    opts
}

/// 1, 2, 4, ... below `top`, then `top` itself.
fn worker_counts(top: usize) -> Vec<usize> {
    let mut v: Vec<usize> = std::iter::successors(Some(1usize), |&w| w.checked_mul(2))
        .take_while(|&w| w < top)
        .collect();
    v.push(top.max(1));
    v
}

/// Stops the program: a benchmark computed a wrong result, or a peer
/// failed.
fn fail(msg: &str) -> ! {
    eprintln!("cantus-bench scale: FAILED: {msg}");
    std::process::exit(1);
}

/// How a benchmark shows its times: `seconds * scale` in `unit`.
#[derive(Clone, Copy)]
pub(crate) struct Unit {
    pub(crate) scale: f64,
    pub(crate) name: &'static str,
}

const MS: Unit = Unit {
    scale: 1e3,
    name: "ms",
};
const US_PER_TRIAL: Unit = Unit {
    scale: 1e6,
    name: "us/trial",
};

/// The sweep: options, worker counts, and the rows measured so far.
struct Sweep {
    quick: bool,
    reps: usize,
    counts: Vec<usize>,
    only: Option<String>,
    peer: Option<Peer>,
    rows: Vec<Row>,
    started: Instant,
}

impl Sweep {
    fn selected(&self, name: &str) -> bool {
        self.only.as_ref().is_none_or(|o| name.contains(o.as_str()))
    }

    fn progress(&self, msg: &str) {
        note(&format!(
            "[{:6.1} s] {msg}",
            self.started.elapsed().as_secs_f64()
        ));
    }

    /// Records the serial time of `bench` (seconds, one per rep) and
    /// prints it; returns its median.
    fn serial(&mut self, bench: &str, unit: Unit, secs: &[f64]) -> f64 {
        figure(
            &format!("scale.{bench}.{SERIAL}"),
            &shown(unit, secs),
            unit.name,
        );
        let mut row = Row::new(bench, SERIAL, 1, unit, secs.to_vec(), f64::NAN);
        row.serial_s = row.median_s();
        let median = row.serial_s;
        self.rows.push(row);
        median
    }

    /// Records and prints the times of one worker count: `peers` holds
    /// (peer, seconds per rep); an empty list means the peer did not run.
    fn point(
        &mut self,
        bench: &str,
        unit: Unit,
        serial_s: f64,
        w: usize,
        peers: Vec<(&'static str, Vec<f64>)>,
    ) {
        let name = format!("scale.{bench}.w{w}");
        let mut cantus_median = f64::NAN;
        let mut medians = Vec::new();
        for (peer, secs) in peers {
            if secs.is_empty() {
                continue;
            }
            let fig = if peer == CANTUS {
                name.clone()
            } else {
                format!("{name}.{peer}")
            };
            let m = figure(&fig, &shown(unit, &secs), unit.name);
            let row = Row::new(bench, peer, w, unit, secs, serial_s);
            let sp = if peer == CANTUS {
                format!("{name}_speedup")
            } else {
                format!("{name}_speedup.{peer}")
            };
            value(&sp, row.speedup(), "x");
            if peer == CANTUS {
                cantus_median = m;
            } else {
                medians.push((peer, m));
            }
            self.rows.push(row);
        }
        for (peer, m) in medians {
            ratio(&name, peer, cantus_median, m);
        }
    }
}

/// `secs` in the unit shown, as samples.
fn shown(unit: Unit, secs: &[f64]) -> Samples {
    let mut s = Samples::new();
    for &t in secs {
        s.push(t * unit.scale);
    }
    s
}

/// Runs the sweep.
pub(crate) fn run(args: &[String]) {
    let opts = parse(args);
    if std::env::var_os("CANTUS_WORKERS").is_some() {
        eprintln!(
            "cantus-bench scale: CANTUS_WORKERS is set, and it overrides the worker count of \
             each step of the sweep; unset it (use --max to cap the sweep)"
        );
        std::process::exit(2);
    }
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    let top = opts.max.unwrap_or(cpus);
    if top > cpus {
        note(&format!(
            "scale: --max {top} is above the {cpus} CPUs: the last steps oversubscribe"
        ));
    }
    let counts = worker_counts(top);
    let peer = match Peer::find(top) {
        Ok(p) => Some(p),
        Err(e) => {
            note(&format!("scale: the OpenMP peer is unavailable: {e}"));
            None
        }
    };
    let reps = opts.reps.unwrap_or(if opts.quick { 3 } else { 5 });
    note(&format!(
        "scale: {cpus} CPUs, worker counts {counts:?}, {reps} reps{}; {}",
        if opts.quick { ", quick" } else { "" },
        peer.as_ref().map_or_else(
            || "no OpenMP peer".to_string(),
            |p| format!("{} (OMP_NUM_THREADS = each step's workers)", p.describe())
        )
    ));
    let mut sweep = Sweep {
        quick: opts.quick,
        reps,
        counts,
        only: opts.only,
        peer,
        rows: Vec::new(),
        started: Instant::now(),
    };
    fib(&mut sweep);
    quicksort(&mut sweep);
    tree(&mut sweep);
    for t in [uts::Tree::t1(sweep.quick), uts::Tree::t3(sweep.quick)] {
        uts(&mut sweep, t);
    }
    for k in [Kernel::MulAddSub, Kernel::TrapInt] {
        lcals(&mut sweep, k);
    }
    sweep.progress("done");
    report::table(&sweep.rows);
    match report::write_files(&opts.out, &sweep.rows) {
        Ok(files) => note(&format!(
            "scale: wrote {} files to {} ({})",
            files.len(),
            opts.out.display(),
            files
                .iter()
                .filter_map(|f| f.file_name())
                .map(|f| f.to_string_lossy().into_owned())
                .collect::<Vec<_>>()
                .join(", ")
        )),
        Err(e) => fail(&format!(
            "cannot write the report to {}: {e}",
            opts.out.display()
        )),
    }
}

/// Which peer runs first in repetition `rep`: the order alternates.
fn order(rep: usize) -> [bool; 2] {
    // `true` is cantus.
    if rep.is_multiple_of(2) {
        [true, false]
    } else {
        [false, true]
    }
}

/// Runs a fork-join benchmark: `serial()` reps times, then per worker
/// count `cantus(w)` and `rayon(w)` reps times each, alternating. Every
/// call returns seconds, having checked its own result.
fn fork_join_bench(
    sweep: &mut Sweep,
    bench: &str,
    unit: Unit,
    serial: impl Fn() -> f64,
    cantus: impl Fn(usize) -> f64,
    rayon: impl Fn(usize) -> f64,
) {
    if !sweep.selected(bench) {
        return;
    }
    sweep.progress(&format!("{bench}: serial, {} reps", sweep.reps));
    let secs: Vec<f64> = (0..sweep.reps).map(|_| serial()).collect();
    let serial_s = sweep.serial(bench, unit, &secs);
    for w in sweep.counts.clone() {
        sweep.progress(&format!("{bench}: {w} workers, {} reps", sweep.reps));
        let (mut c, mut r) = (Vec::new(), Vec::new());
        for rep in 0..sweep.reps {
            for cantus_turn in order(rep) {
                if cantus_turn {
                    c.push(cantus(w));
                } else {
                    r.push(rayon(w));
                }
            }
        }
        sweep.point(bench, unit, serial_s, w, vec![(CANTUS, c), (RAYON, r)]);
    }
}

fn fib(sweep: &mut Sweep) {
    let n = if sweep.quick { 25 } else { 30 };
    let expected = apps::fib::<Serial>(n);
    // fib(n) = fib(n-1) + fib(n-2) from 0, 1: an independent check.
    let (mut a, mut b) = (0u64, 1u64);
    for _ in 0..n {
        (a, b) = (b, a + b);
    }
    if expected != a {
        fail(&format!("serial fib({n}) gave {expected}, not {a}"));
    }
    let check = |who: &str, v: u64| {
        if v != expected {
            fail(&format!("fib({n}) on {who} gave {v}, not {expected}"));
        }
    };
    fork_join_bench(
        sweep,
        &format!("fib{n}"),
        MS,
        || {
            let (d, v) = time(|| apps::fib::<Serial>(std::hint::black_box(n)));
            check(SERIAL, v);
            d.as_secs_f64()
        },
        |w| {
            let (d, v) = apps::timed_session::<Cantus, _>(w, || apps::fib::<Cantus>(n));
            check(CANTUS, v);
            d.as_secs_f64()
        },
        |w| {
            let (d, v) = apps::timed_session::<Rayon, _>(w, || apps::fib::<Rayon>(n));
            check(RAYON, v);
            d.as_secs_f64()
        },
    );
}

fn quicksort(sweep: &mut Sweep) {
    if !sweep.selected("quicksort") {
        return;
    }
    let n: usize = if sweep.quick { 1 << 20 } else { 1 << 24 };
    sweep.progress(&format!("quicksort: {n} u64"));
    let mut rng = apps::SplitMix64(0x5EED);
    let input: Vec<u64> = (0..n).map(|_| rng.next()).collect();
    let mut reference = input.clone();
    reference.sort_unstable();
    let warm: Vec<u64> = input[..n.min(1 << 16)].to_vec();
    let bufs = std::cell::RefCell::new((vec![0u64; n], warm.clone()));
    // Sorts a copy of the input on `J` with `w` workers; checks the result.
    let sort = |who: &str, f: &dyn Fn(&mut [u64], &mut [u64]) -> std::time::Duration| {
        let mut b = bufs.borrow_mut();
        let (buf, warm_buf) = &mut *b;
        buf.copy_from_slice(&input);
        let d = f(buf, warm_buf);
        if *buf != reference {
            let sorted = buf.windows(2).all(|p| p[0] <= p[1]);
            fail(&format!(
                "quicksort on {who} gave a wrong result ({})",
                if sorted {
                    "sorted, but not a permutation of the input"
                } else {
                    "not sorted"
                }
            ));
        }
        d.as_secs_f64()
    };
    fork_join_bench(
        sweep,
        "quicksort",
        MS,
        || {
            sort(SERIAL, &|b, wb| {
                apps::sort_session::<Serial>(1, b, wb, &warm)
            })
        },
        |w| {
            sort(CANTUS, &|b, wb| {
                apps::sort_session::<Cantus>(w, b, wb, &warm)
            })
        },
        |w| sort(RAYON, &|b, wb| apps::sort_session::<Rayon>(w, b, wb, &warm)),
    );
}

fn tree(sweep: &mut Sweep) {
    let n: u64 = if sweep.quick { 1 << 18 } else { 1 << 22 };
    let expected = n * (n - 1) / 2;
    let check = |who: &str, (d, total, tree): (std::time::Duration, u64, _)| {
        if total != expected {
            fail(&format!(
                "tree of {n} nodes on {who}: id sum {total}, not {expected}"
            ));
        }
        // Freed outside the timing, with no tasking layer running.
        drop::<Option<Box<apps::Node>>>(tree);
        d.as_secs_f64()
    };
    if sweep.selected("tree") {
        note(&format!("tree: {n} nodes"));
    }
    fork_join_bench(
        sweep,
        "tree",
        MS,
        || check(SERIAL, apps::tree_session::<Serial>(1, n)),
        |w| check(CANTUS, apps::tree_session::<Cantus>(w, n)),
        |w| check(RAYON, apps::tree_session::<Rayon>(w, n)),
    );
}

fn uts(sweep: &mut Sweep, t: uts::Tree) {
    if !sweep.selected(t.name) {
        return;
    }
    let (nodes, depth) = t.serial_count();
    note(&format!(
        "{}; {nodes} nodes, {} levels",
        t.describe(),
        depth + 1
    ));
    if nodes != t.nodes {
        fail(&format!(
            "{}: the serial traversal counts {nodes} nodes, not the {} pinned for the tree",
            t.name, t.nodes
        ));
    }
    let check = |who: &str, (d, v): (std::time::Duration, u64)| {
        if v != nodes {
            fail(&format!(
                "{} on {who} counted {v} nodes, not {nodes}",
                t.name
            ));
        }
        d.as_secs_f64()
    };
    fork_join_bench(
        sweep,
        t.name,
        MS,
        || check(SERIAL, time(|| t.count::<Serial>())),
        |w| {
            check(
                CANTUS,
                apps::timed_session::<DeepCantus, _>(w, || t.count::<DeepCantus>()),
            )
        },
        |w| {
            check(
                RAYON,
                apps::timed_session::<DeepRayon, _>(w, || t.count::<DeepRayon>()),
            )
        },
    );
}

/// Whether two LCALS checksums agree (relative 1e-9, as the suite's
/// cantus/OpenMP check: the order of a reduction's additions differs).
fn same_sum(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-9 * b.abs().max(1.0)
}

/// Stack size of the UTS runs' cantus tasks and rayon threads. A stolen
/// cantus task runs the rest of its subtree on its own stack (rayon: a
/// thread runs what it steals while it waits on its own stack), and the
/// T3-like tree reaches depth 1121, at about 1.2 KiB of stack a level
/// (three joins and a call): the full-size tree overflowed cantus's
/// default 256 KiB and still 1.25 MiB (1.5 MiB was enough), and would be
/// close to rayon's default 2 MiB (Rust's thread default). Both get 4
/// MiB; pages are committed only when touched.
const UTS_STACK: usize = 4 << 20;

/// cantus and rayon with [`UTS_STACK`]-sized stacks.
type DeepCantus = apps::CantusWith<UTS_STACK>;
type DeepRayon = apps::RayonWith<UTS_STACK>;

/// One LCALS kernel at the long size: serial loops once, then per worker
/// count cantus forall, rayon and the OpenMP peer.
fn lcals(sweep: &mut Sweep, kernel: Kernel) {
    let size = Size::Long;
    let bench = format!("lcals.{}.{}", kernel.name(), size.name());
    if !sweep.selected(&bench) {
        return;
    }
    let n = size.len();
    let trials = kernel.trials(size, sweep.quick);
    let warm = trials / 10 + 1;
    sweep.progress(&format!("{bench}: n {n}, {trials} trials a rep, serial"));
    // Runs `trial` on fresh data (warm-up, then `trials` timed), checks
    // the outputs; returns seconds per trial and the checksum.
    let measure = |who: &str, trial: &mut dyn FnMut(&mut Lcals, u64) -> f64| {
        let mut data = Lcals::new(kernel, n);
        let secs = trial(&mut data, trials);
        match data.verify() {
            Ok(sum) => (secs / trials as f64, sum),
            Err(e) => fail(&format!("{bench} on {who}: {e}")),
        }
    };
    let mut serial = Vec::new();
    let mut checksum = None;
    for _ in 0..sweep.reps {
        let (s, sum) = measure(SERIAL, &mut |d, t| {
            for _ in 0..warm {
                d.serial_trial();
            }
            let t0 = Instant::now();
            for _ in 0..t {
                d.serial_trial();
            }
            t0.elapsed().as_secs_f64()
        });
        serial.push(s);
        checksum = Some(sum);
    }
    let serial_s = sweep.serial(&bench, US_PER_TRIAL, &serial);
    let args = kernel.peer_args(n, trials);
    let grain = cantus::config::DEFAULT_GRAIN;
    for w in sweep.counts.clone() {
        sweep.progress(&format!("{bench}: {w} workers, {} reps", sweep.reps));
        let (mut c, mut r, mut o) = (Vec::new(), Vec::new(), Vec::new());
        for rep in 0..sweep.reps {
            // OpenMP first in even repetitions, last in odd ones.
            let omp_first = rep.is_multiple_of(2);
            let run_omp = |o: &mut Vec<f64>| {
                let Some(peer) = &sweep.peer else { return };
                match peer.run_with(&args, w) {
                    Ok(run) => {
                        let times = run.times_of("trials");
                        if times.is_empty() {
                            fail(&format!("{bench}: the OpenMP peer printed no time"));
                        }
                        o.extend(times.iter().map(|t| t / trials as f64));
                        if let (Some(a), Some(b)) = (run.checksum, checksum)
                            && !same_sum(a, b)
                        {
                            fail(&format!(
                                "{bench}: the OpenMP checksum {a:e} differs from the serial one {b:e}"
                            ));
                        }
                    }
                    Err(e) => fail(&format!("{bench} on OpenMP with {w} threads: {e}")),
                }
            };
            if omp_first {
                run_omp(&mut o);
            }
            for cantus_turn in order(rep) {
                let (secs, sum) = if cantus_turn {
                    measure(CANTUS, &mut |d, t| {
                        Cantus::session(w, || {
                            for _ in 0..warm {
                                d.trial(Sched::Adaptive);
                            }
                            let t0 = Instant::now();
                            for _ in 0..t {
                                d.trial(Sched::Adaptive);
                            }
                            t0.elapsed().as_secs_f64()
                        })
                    })
                } else {
                    measure(RAYON, &mut |d, t| {
                        Rayon::session(w, || {
                            for _ in 0..warm {
                                d.trial_rayon(grain);
                            }
                            let t0 = Instant::now();
                            for _ in 0..t {
                                d.trial_rayon(grain);
                            }
                            t0.elapsed().as_secs_f64()
                        })
                    })
                };
                if let Some(b) = checksum.filter(|&b| !same_sum(sum, b)) {
                    fail(&format!(
                        "{bench}: the checksum {sum:e} differs from the serial one {b:e}"
                    ));
                }
                if cantus_turn {
                    c.push(secs)
                } else {
                    r.push(secs)
                }
            }
            if !omp_first {
                run_omp(&mut o);
            }
        }
        sweep.point(
            &bench,
            US_PER_TRIAL,
            serial_s,
            w,
            vec![(CANTUS, c), (RAYON, r), (OPENMP, o)],
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn worker_counts_end_at_the_top() {
        assert_eq!(worker_counts(1), vec![1]);
        assert_eq!(worker_counts(2), vec![1, 2]);
        assert_eq!(worker_counts(12), vec![1, 2, 4, 8, 12]);
        assert_eq!(worker_counts(16), vec![1, 2, 4, 8, 16]);
    }
}
