//! HPCC STREAM and STREAM-EP (seed 000, section 7.3): copy, scale, add
//! and triad over arrays far larger than the caches, best time of
//! [`NTIMES`] iterations (the first not counted), as STREAM reports.
//!
//! STREAM runs its foralls from the main thread, which is not a task, as
//! in seed 000 (every loop goes through cantus's outside-thread path);
//! STREAM-EP starts with a coforall over the locales (one, for now), and
//! each locale's task runs the same kernels as foralls inside a task. The
//! OpenMP peer has one form only: a process is its one locale, and its
//! master thread is already part of the team.
//!
//! Verification, as STREAM's: the kernels from `a = 1, b = 2, c = 0` must
//! leave every element equal to the values the same arithmetic gives on
//! scalars (relative error at most [`TOLERANCE`]).

use super::report::{Row, Value};
use super::{Ctx, Outs, Sched, turns};
use std::sync::Mutex;
use std::time::Instant;

/// Array length: 2^24 doubles, 128 MiB an array, 12 times the 32 MiB L3
/// of the reference machine for the three (STREAM asks for 4 times).
const N_FULL: usize = 1 << 24;
/// With `--quick`: 32 MiB an array.
const N_QUICK: usize = 1 << 22;
/// Timed iterations per repetition (STREAM's NTIMES).
pub(crate) const NTIMES: usize = 10;
/// STREAM's scalar.
pub(crate) const SCALAR: f64 = 3.0;
/// Chunk size of the dynamic schedule.
const DYNAMIC_CHUNK: usize = 1 << 16;
/// Largest relative error of an element.
pub(crate) const TOLERANCE: f64 = 1e-13;
/// The target for triad: at least 0.95 times OpenMP's bandwidth,
/// that is a time ratio of at most 1/0.95.
const TRIAD_TARGET: f64 = 1.0 / 0.95;

/// The four kernels, with the bytes each moves per element (STREAM's
/// counting: reads and writes, no write-allocate traffic).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kernel {
    Copy,
    Scale,
    Add,
    Triad,
}

impl Kernel {
    pub(crate) const ALL: [Kernel; 4] = [Kernel::Copy, Kernel::Scale, Kernel::Add, Kernel::Triad];

    pub(crate) fn name(self) -> &'static str {
        match self {
            Kernel::Copy => "copy",
            Kernel::Scale => "scale",
            Kernel::Add => "add",
            Kernel::Triad => "triad",
        }
    }

    fn bytes(self) -> usize {
        match self {
            Kernel::Copy | Kernel::Scale => 16,
            Kernel::Add | Kernel::Triad => 24,
        }
    }
}

/// STREAM's three arrays.
pub(crate) struct Arrays {
    a: Vec<f64>,
    b: Vec<f64>,
    c: Vec<f64>,
}

impl Arrays {
    /// Arrays of `n` elements, not yet touched (the parallel
    /// initialisation places their pages).
    pub(crate) fn new(n: usize) -> Arrays {
        Arrays {
            a: vec![0.0; n],
            b: vec![0.0; n],
            c: vec![0.0; n],
        }
    }

    fn len(&self) -> usize {
        self.a.len()
    }

    /// `a = 1, b = 2, c = 0`, in parallel.
    fn init(&mut self, sched: Sched) {
        let n = self.len();
        let Arrays { a, b, c } = self;
        let outs = Outs::new([a.as_mut_slice(), b.as_mut_slice(), c.as_mut_slice()], n);
        sched.forall(0..n, DYNAMIC_CHUNK).for_each_range(|r| {
            // SAFETY: the forall hands out disjoint blocks.
            let (a, b, c) = unsafe {
                (
                    outs.slice(0, r.clone()),
                    outs.slice(1, r.clone()),
                    outs.slice(2, r),
                )
            };
            a.fill(1.0);
            b.fill(2.0);
            c.fill(0.0);
        });
    }

    /// One kernel as one forall.
    fn kernel(&mut self, k: Kernel, sched: Sched) {
        let n = self.len();
        let Arrays { a, b, c } = self;
        // The array written, and the arrays read.
        let (dst, x, y): (&mut [f64], &[f64], &[f64]) = match k {
            Kernel::Copy => (c, a, a),
            Kernel::Scale => (b, c, c),
            Kernel::Add => (c, a, b),
            Kernel::Triad => (a, b, c),
        };
        let outs = Outs::new([dst], n);
        let body = |r: std::ops::Range<usize>| {
            let (x, y) = (&x[r.clone()], &y[r.clone()]);
            // SAFETY: the forall hands out disjoint blocks.
            let d = unsafe { outs.slice(0, r) };
            match k {
                // The loop of STREAM and of the C peer, not a memcpy
                // (which may take another path, e.g. non-temporal stores).
                #[allow(clippy::manual_memcpy)]
                Kernel::Copy => {
                    for j in 0..d.len() {
                        d[j] = x[j];
                    }
                }
                Kernel::Scale => {
                    for j in 0..d.len() {
                        d[j] = SCALAR * x[j];
                    }
                }
                Kernel::Add => {
                    for j in 0..d.len() {
                        d[j] = x[j] + y[j];
                    }
                }
                Kernel::Triad => {
                    for j in 0..d.len() {
                        d[j] = x[j] + SCALAR * y[j];
                    }
                }
            }
        };
        sched.forall(0..n, DYNAMIC_CHUNK).for_each_range(body);
    }

    /// Every element equals the scalar result of `ntimes` iterations.
    pub(crate) fn verify(&self, ntimes: usize) -> Result<(), String> {
        let (mut ea, mut eb, mut ec) = (1.0f64, 2.0f64, 0.0f64);
        for _ in 0..ntimes {
            ec = ea;
            eb = SCALAR * ec;
            ec = ea + eb;
            ea = eb + SCALAR * ec;
        }
        let bad = |v: &[f64], want: f64| {
            v.iter().position(|&x| {
                let ok = (x - want).abs() <= TOLERANCE * want.abs();
                !ok
            })
        };
        for (name, v, want) in [("a", &self.a, ea), ("b", &self.b, eb), ("c", &self.c, ec)] {
            if let Some(j) = bad(v, want) {
                return Err(format!(
                    "stream: {name}[{j}] is {} but should be {want}",
                    v[j]
                ));
            }
        }
        Ok(())
    }
}

/// The best time of each kernel, or why the run failed verification.
type RunResult = Result<[f64; 4], String>;

/// One STREAM run: initialise, `ntimes` iterations of the four kernels,
/// verify. Returns the best time of each kernel, the first iteration not
/// counted.
pub(crate) fn stream_run(arrays: &mut Arrays, ntimes: usize, sched: Sched) -> RunResult {
    arrays.init(sched);
    let mut best = [f64::INFINITY; 4];
    for it in 0..ntimes {
        for (q, k) in Kernel::ALL.into_iter().enumerate() {
            let t = Instant::now();
            arrays.kernel(k, sched);
            let secs = t.elapsed().as_secs_f64();
            if it > 0 {
                best[q] = best[q].min(secs);
            }
        }
    }
    arrays.verify(ntimes)?;
    Ok(best)
}

/// STREAM-EP: a coforall over the locales (one), each running STREAM on
/// its own arrays inside its task.
fn stream_ep_run(
    ctx: &Ctx,
    locales: &[Mutex<&mut Arrays>],
    ntimes: usize,
    sched: Sched,
) -> RunResult {
    let results: Vec<Mutex<Option<RunResult>>> = locales.iter().map(|_| Mutex::new(None)).collect();
    ctx.rt.block_on(|| {
        cantus::coforall(locales.len(), |loc| {
            let mut arrays = locales[loc].lock().unwrap();
            *results[loc].lock().unwrap() = Some(stream_run(&mut arrays, ntimes, sched));
        })
    });
    // The slowest locale's time for each kernel (all locales run at once).
    let mut worst = [0.0f64; 4];
    for r in results {
        let best = r.into_inner().unwrap().expect("every locale ran")?;
        for q in 0..4 {
            worst[q] = worst[q].max(best[q]);
        }
    }
    Ok(worst)
}

/// Benchmarks STREAM and STREAM-EP under every schedule.
pub(crate) fn run(ctx: &mut Ctx) {
    let want_stream = ctx.selected("stream.");
    let want_ep = ctx.selected("stream_ep.");
    if !want_stream && !want_ep {
        return;
    }
    let n = if ctx.quick { N_QUICK } else { N_FULL };
    let scheds = ctx.schedules.clone();
    let mut arrays = Arrays::new(n);
    let args: Vec<String> = vec![
        "stream".into(),
        n.to_string(),
        NTIMES.to_string(),
        "1".into(),
    ];
    let mut omp: [Vec<f64>; 4] = Default::default();
    // [variant][schedule][kernel] -> best times per rep.
    let mut cantus = vec![vec![[const { Vec::new() }; 4]; scheds.len()]; 2];
    let mut errors = Vec::new();
    for rep in 0..ctx.reps {
        ctx.progress(&format!(
            "stream, stream_ep: rep {}/{} (n = {n}, {NTIMES} iterations)",
            rep + 1,
            ctx.reps
        ));
        for peer_turn in turns(rep) {
            if peer_turn {
                if let Some(peer) = &ctx.peer {
                    match peer.run(&args) {
                        Ok(r) => {
                            for (q, k) in Kernel::ALL.into_iter().enumerate() {
                                omp[q].extend(r.times_of(k.name()));
                            }
                        }
                        Err(e) => errors.push(e),
                    }
                }
                continue;
            }
            for (si, &s) in scheds.iter().enumerate() {
                for (variant, wanted) in [want_stream, want_ep].into_iter().enumerate() {
                    if !wanted {
                        continue;
                    }
                    let result = if variant == 0 {
                        stream_run(&mut arrays, NTIMES, s)
                    } else {
                        stream_ep_run(ctx, &[Mutex::new(&mut arrays)], NTIMES, s)
                    };
                    match result {
                        Ok(best) => {
                            for q in 0..4 {
                                cantus[variant][si][q].push(best[q]);
                            }
                        }
                        Err(e) => errors.push(e),
                    }
                }
            }
        }
    }
    for e in errors {
        ctx.fail(e);
    }
    for (variant, group) in ["stream", "stream_ep"].into_iter().enumerate() {
        if ![want_stream, want_ep][variant] {
            continue;
        }
        for (si, &s) in scheds.iter().enumerate() {
            for (q, k) in Kernel::ALL.into_iter().enumerate() {
                let row = Row {
                    group,
                    kernel: k.name(),
                    size: n.to_string(),
                    n,
                    sched: s,
                    base: format!("{group}.{}", k.name()),
                    name: ctx.name(&format!("{group}.{}", k.name()), s),
                    trials: NTIMES as u64,
                    value: Value::Rate {
                        work: (k.bytes() * n) as f64 / 1e9,
                        unit: "GB/s",
                    },
                    cantus: std::mem::take(&mut cantus[variant][si][q]),
                    openmp: omp[q].clone(),
                    target: (k == Kernel::Triad).then_some(TRIAD_TARGET),
                    serial: None,
                };
                ctx.record(row);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::suite::tests::rt;

    fn ran(n: usize, s: Sched) -> Arrays {
        let mut a = Arrays::new(n);
        rt().block_on(|| stream_run(&mut a, 3, s))
            .expect("verifies");
        a
    }

    #[test]
    fn stream_verifies_under_every_schedule() {
        for s in Sched::ALL {
            for n in [1, 1000, 100_003] {
                let a = ran(n, s);
                assert!(a.verify(3).is_ok());
                // Also from an outside thread, as the non-EP form runs.
                let mut b = Arrays::new(n);
                let _ = rt();
                assert!(stream_run(&mut b, 3, s).is_ok());
            }
        }
    }

    #[test]
    fn verification_catches_a_wrong_element() {
        let n = 1000;
        for (which, j) in [(0, 0), (1, 500), (2, 999)] {
            let mut a = ran(n, Sched::Adaptive);
            let v = match which {
                0 => &mut a.a,
                1 => &mut a.b,
                _ => &mut a.c,
            };
            v[j] *= 1.0 + 1e-12;
            assert!(a.verify(3).is_err(), "array {which}[{j}] passed");
        }
        // One iteration too few or too many.
        let a = ran(n, Sched::Static);
        assert!(a.verify(2).is_err() && a.verify(4).is_err());
    }
}
