//! `cantus-bench suite`: the seed benchmark suite side by side with GNU
//! OpenMP. Seed 002's LCALS loop kernels at the short, medium and long
//! sizes, and seed 000's HPCC STREAM, STREAM-EP and RandomAccess (GUPS).
//!
//! Every benchmark checks its own result, on both sides: the LCALS
//! kernels against a serial run of the same loop bodies (and the two
//! sides' checksums against each other), STREAM against the values its
//! kernels must produce, RandomAccess with HPCC's verification (undo the
//! updates serially; at most 1% of the table may be in error).
//!
//! The OpenMP peer is `c/suite/suite_omp.c`, built by `build.rs` and run as
//! a child process (see [`peer`]). Repetitions of the two sides alternate,
//! so a change in the machine's background load hits both alike; figures
//! are medians over the repetitions.
//!
//! ```text
//! cantus-bench suite [--quick] [--reps N] [--out DIR] [--baseline]
//!                    [--schedule adaptive|static|dynamic|all] [--only TEXT]
//! ```
//!
//! Figures go to stdout as `<name>.cantus <value> <unit>` and
//! `<name>/openmp <ratio>` (cantus time over OpenMP time: below 1 means
//! cantus is faster), where `<name>` carries the schedule when it is not
//! the default (`lcals.fir.long.static`); OpenMP's own figure is printed
//! once per benchmark, as `<benchmark>.openmp <value> <unit>`. The table
//! goes to stderr and, with `suite.csv` and `suite.svg` (a chart of the
//! ratios), to `--out` (default `target/bench-out/`). Progress goes to
//! stderr.

mod gups;
pub(crate) mod lcals;
pub(crate) mod peer;
pub(crate) mod report;
mod stream;

use crate::stats::note;
use cantus::{Forall, Schedule};
use peer::Peer;
use report::{Row, Value};
use std::ops::Range;
use std::path::PathBuf;
use std::time::Instant;

/// The cantus schedule a benchmark runs with.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Sched {
    /// [`Schedule::Adaptive`] with the default grain (the library default).
    Adaptive,
    /// [`Schedule::Static`]: one block per worker, like OpenMP's default.
    Static,
    /// [`Schedule::Dynamic`] with a chunk size chosen per benchmark.
    Dynamic,
}

impl Sched {
    pub(crate) const ALL: [Sched; 3] = [Sched::Adaptive, Sched::Static, Sched::Dynamic];

    pub(crate) fn name(self) -> &'static str {
        match self {
            Sched::Adaptive => "adaptive",
            Sched::Static => "static",
            Sched::Dynamic => "dynamic",
        }
    }

    /// The schedule, with `chunk` iterations per chunk if dynamic.
    pub(crate) fn schedule(self, chunk: usize) -> Schedule {
        match self {
            Sched::Adaptive => Schedule::Adaptive,
            Sched::Static => Schedule::Static,
            Sched::Dynamic => Schedule::Dynamic(chunk),
        }
    }

    /// `forall(range)` with this schedule.
    pub(crate) fn forall(self, range: Range<usize>, chunk: usize) -> Forall {
        cantus::forall(range).schedule(self.schedule(chunk))
    }
}

/// Suite options.
struct SuiteOptions {
    quick: bool,
    baseline: bool,
    reps: Option<usize>,
    out: PathBuf,
    schedules: Vec<Sched>,
    only: Option<String>,
}

fn usage() -> ! {
    eprintln!(
        "usage: cantus-bench suite [--quick] [--reps N] [--out DIR] [--baseline]\n\
         \x20                         [--schedule adaptive|static|dynamic|all] [--only TEXT]\n\
         \n\
         Runs the LCALS kernels, STREAM, STREAM-EP and RandomAccess with cantus and\n\
         with the OpenMP peer (a child process), checks every result, and prints\n\
         `<name>.cantus <value> <unit>`, `<name>.openmp ...` and `<name>/openmp <ratio>`\n\
         (cantus time / OpenMP time). Writes suite.csv and suite.svg to DIR\n\
         (default target/bench-out). --only runs the benchmarks whose name contains TEXT.\n\
         --baseline also times each LCALS kernel serially on both sides (plain loop in\n\
         Rust, OMP_NUM_THREADS=1 in C): their ratio is the compilers' share."
    );
    std::process::exit(2);
}

fn parse(args: &[String]) -> SuiteOptions {
    let mut opts = SuiteOptions {
        quick: false,
        baseline: false,
        reps: None,
        out: PathBuf::from("target/bench-out"),
        schedules: vec![Sched::Adaptive],
        only: None,
    };
    let mut it = args.iter();
    while let Some(a) = it.next() {
        let mut value = |what: &str| -> String {
            it.next().cloned().unwrap_or_else(|| {
                eprintln!("cantus-bench suite: {what} needs a value");
                usage()
            })
        };
        match a.as_str() {
            "--quick" => opts.quick = true,
            "--baseline" => opts.baseline = true,
            "--reps" => match value("--reps").parse() {
                Ok(n) if n > 0 => opts.reps = Some(n),
                _ => {
                    eprintln!("cantus-bench suite: --reps needs a positive integer");
                    usage()
                }
            },
            "--out" => opts.out = PathBuf::from(value("--out")),
            "--only" => opts.only = Some(value("--only")),
            "--schedule" => {
                let v = value("--schedule");
                opts.schedules = match v.as_str() {
                    "all" => Sched::ALL.to_vec(),
                    _ => match Sched::ALL.into_iter().find(|s| s.name() == v) {
                        Some(s) => vec![s],
                        None => {
                            eprintln!("cantus-bench suite: unknown schedule {v}");
                            usage()
                        }
                    },
                };
            }
            "-h" | "--help" => usage(),
            _ => {
                eprintln!("cantus-bench suite: unknown option {a}");
                usage()
            }
        }
    }
    opts
}

/// What a benchmark needs from the suite while it runs.
pub(crate) struct Ctx {
    pub(crate) rt: cantus::Runtime,
    pub(crate) peer: Option<Peer>,
    pub(crate) quick: bool,
    /// Also time the LCALS kernels serially on both sides (the compilers'
    /// share of a ratio).
    pub(crate) baseline: bool,
    pub(crate) reps: usize,
    pub(crate) schedules: Vec<Sched>,
    only: Option<String>,
    rows: Vec<Row>,
    failures: Vec<String>,
    started: Instant,
}

impl Ctx {
    /// Whether the benchmark named `name` was selected by `--only`.
    pub(crate) fn selected(&self, name: &str) -> bool {
        self.only.as_ref().is_none_or(|o| name.contains(o.as_str()))
    }

    /// Shows progress on stderr.
    pub(crate) fn progress(&self, msg: &str) {
        note(&format!(
            "[{:6.1} s] {msg}",
            self.started.elapsed().as_secs_f64()
        ));
    }

    /// Records a failed verification or a peer that could not run; the
    /// suite goes on and exits with an error at the end.
    pub(crate) fn fail(&mut self, msg: String) {
        eprintln!("cantus-bench suite: FAILED: {msg}");
        self.failures.push(msg);
    }

    /// Prints a benchmark's figures and keeps its row for the report.
    pub(crate) fn record(&mut self, row: Row) {
        row.print(!self.rows.iter().any(|r| r.base == row.base));
        self.rows.push(row);
    }

    /// The figure name of `base` under `sched`: the default schedule
    /// keeps the plain name.
    pub(crate) fn name(&self, base: &str, sched: Sched) -> String {
        if sched == Sched::Adaptive {
            base.to_string()
        } else {
            format!("{base}.{}", sched.name())
        }
    }
}

/// Runs the suite.
pub(crate) fn run(args: &[String]) {
    let opts = parse(args);
    let rt = crate::start_cantus();
    let workers = rt.workers();
    let peer = match Peer::find(workers) {
        Ok(p) => Some(p),
        Err(e) => {
            note(&format!("suite: the OpenMP peer is unavailable: {e}"));
            None
        }
    };
    let reps = opts.reps.unwrap_or(if opts.quick { 3 } else { 5 });
    note(&format!(
        "suite: {workers} cantus workers (CANTUS_WAIT_POLICY={}), {}; schedules {}; {reps} reps{}",
        std::env::var("CANTUS_WAIT_POLICY").unwrap_or_else(|_| "hybrid (default)".into()),
        peer.as_ref()
            .map_or_else(|| "no OpenMP peer".to_string(), Peer::describe),
        opts.schedules
            .iter()
            .map(|s| s.name())
            .collect::<Vec<_>>()
            .join(","),
        if opts.quick { ", quick" } else { "" }
    ));
    let mut ctx = Ctx {
        rt,
        peer,
        quick: opts.quick,
        baseline: opts.baseline,
        reps,
        schedules: opts.schedules,
        only: opts.only,
        rows: Vec::new(),
        failures: Vec::new(),
        started: Instant::now(),
    };
    lcals::run(&mut ctx);
    stream::run(&mut ctx);
    gups::run(&mut ctx);
    ctx.progress("done");
    report::table(&ctx.rows);
    match report::write_files(&opts.out, &ctx.rows) {
        Ok(files) => {
            for f in files {
                note(&format!("suite: wrote {}", f.display()));
            }
        }
        Err(e) => ctx.fail(format!(
            "cannot write the report to {}: {e}",
            opts.out.display()
        )),
    }
    let Ctx { rt, failures, .. } = ctx;
    rt.shutdown();
    if !failures.is_empty() {
        eprintln!(
            "cantus-bench suite: {} check(s) failed:\n  {}",
            failures.len(),
            failures.join("\n  ")
        );
        std::process::exit(1);
    }
}

/// A value in `[0, 1)` for element `i` of data array `k`: the suite's
/// input data, defined identically in `c/suite/suite_omp.c` (`uval`), so
/// both sides compute the same numbers.
pub(crate) fn uval(i: usize, k: u64) -> f64 {
    let mut h = (i as u64)
        .wrapping_mul(0x9E37_79B9_7F4A_7C15)
        .wrapping_add(k.wrapping_mul(0xD1B5_4A32_D192_ED03));
    h ^= h >> 29;
    h = h.wrapping_mul(0xBF58_476D_1CE4_E5B9);
    h ^= h >> 32;
    (h >> 11) as f64 * (1.0 / 9_007_199_254_740_992.0)
}

/// Output arrays that a parallel loop writes through disjoint index
/// ranges, one range per call of the loop body.
pub(crate) struct Outs<'a> {
    ptrs: Vec<*mut f64>,
    len: usize,
    _borrow: std::marker::PhantomData<&'a mut [f64]>,
}

// SAFETY: an `Outs` only hands out `&mut [f64]` through `slice`, whose
// contract makes the slices of concurrent callers disjoint; f64 is Send.
unsafe impl Sync for Outs<'_> {}

impl<'a> Outs<'a> {
    /// Borrows every array of `arrays` (all of length `len`) mutably for
    /// the lifetime of the `Outs`.
    pub(crate) fn new(arrays: impl IntoIterator<Item = &'a mut [f64]>, len: usize) -> Outs<'a> {
        let ptrs: Vec<*mut f64> = arrays
            .into_iter()
            .map(|a| {
                assert_eq!(a.len(), len, "output arrays differ in length");
                a.as_mut_ptr()
            })
            .collect();
        Outs {
            ptrs,
            len,
            _borrow: std::marker::PhantomData,
        }
    }

    /// Elements `r` of array `j`.
    ///
    /// # Safety
    /// No two slices alive at the same time may overlap: callers pass
    /// each index range to at most one caller at a time (the ranges a
    /// forall hands to its body are disjoint).
    #[allow(clippy::mut_from_ref)]
    pub(crate) unsafe fn slice(&self, j: usize, r: Range<usize>) -> &mut [f64] {
        assert!(r.start <= r.end && r.end <= self.len, "range out of bounds");
        // SAFETY: in bounds (checked above) of an array borrowed mutably
        // for 'a; disjoint from every other live slice by the contract.
        unsafe { std::slice::from_raw_parts_mut(self.ptrs[j].add(r.start), r.len()) }
    }
}

/// Which side runs first in repetition `rep`: `true` is the OpenMP peer.
/// The order alternates, so whatever the first run leaves behind (caches,
/// freed memory, clock speed) does not always favour the same side.
pub(crate) fn turns(rep: usize) -> [bool; 2] {
    if rep & 1 == 0 {
        [true, false]
    } else {
        [false, true]
    }
}

/// The median of `v` (NaN if empty).
pub(crate) fn median(v: &[f64]) -> f64 {
    if v.is_empty() {
        return f64::NAN;
    }
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    let n = s.len();
    if n % 2 == 1 {
        s[n / 2]
    } else {
        (s[n / 2 - 1] + s[n / 2]) / 2.0
    }
}

/// The value a row shows for a time `t` (seconds).
pub(crate) fn shown(value: Value, t: f64) -> f64 {
    match value {
        Value::TimePer { scale, .. } => t * scale,
        Value::Rate { work, .. } => work / t,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The runtime of the suite's tests (cantus runs one per process).
    pub(crate) fn rt() -> &'static cantus::Runtime {
        static RT: std::sync::OnceLock<cantus::Runtime> = std::sync::OnceLock::new();
        RT.get_or_init(|| {
            cantus::Runtime::builder()
                .workers(2)
                .ignore_environment()
                .deadlock_detection(None)
                .build()
                .expect("test runtime")
        })
    }

    #[test]
    fn uval_is_in_the_unit_interval_and_matches_the_c_definition() {
        assert!((0..10_000).all(|i| (0.0..1.0).contains(&uval(i, 3))));
        // Spot values printed (%.17g) by the C `uval` of suite_omp.c.
        assert_eq!(uval(0, 1), 0.526510949741965);
        assert_eq!(uval(12345, 7), 0.360610012134539);
        assert_eq!(uval(44216, 13), 0.43097058296038426);
    }

    #[test]
    fn median_of_odd_and_even_counts() {
        assert!(median(&[]).is_nan());
        assert_eq!(median(&[3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&[4.0, 1.0, 2.0, 3.0]), 2.5);
    }
}
