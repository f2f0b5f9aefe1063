//! LCALS-style parallel loop kernels (seed 002): a trial loop around one
//! or more parallel loops, at the short (171), medium (5001) and long
//! (44217) loop lengths.
//!
//! The kernels are seven of the LCALS parallel kernels: MULADDSUB (the
//! one seed 002 shows), INIT3, IF_QUAD, TRAP_INT (a sum reduction),
//! PRESSURE_CALC (two loops a trial), ENERGY_CALC (six loops a trial) and
//! FIR (a 16-tap filter). Each loop body is written once, over a block of
//! indices, and runs both in parallel (a `forall` per loop, `for_each_range`
//! so the inner loop is a plain loop the compiler can vectorise) and
//! serially for verification. `c/suite/suite_omp.c` has the same bodies,
//! data and constants with one `#pragma omp parallel for` per loop.
//!
//! Verification: outputs are poisoned with NaN before the first trial;
//! after the timed trials every output must equal the serial run of the
//! same bodies (relative error at most [`TOLERANCE`]), TRAP_INT's mean sum
//! must equal the serial sum (relative [`SUM_TOLERANCE`]), and the
//! checksum of the outputs must equal the OpenMP peer's, which checks that
//! both sides computed the same thing.

use super::report::{Row, Value};
use super::{Ctx, Outs, Sched, turns, uval};
use std::ops::Range;
use std::time::Instant;

/// Loop lengths of seed 002 (LCALS's short, medium and long sizes).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Size {
    Short,
    Medium,
    Long,
}

impl Size {
    pub(crate) const ALL: [Size; 3] = [Size::Short, Size::Medium, Size::Long];

    pub(crate) fn len(self) -> usize {
        match self {
            Size::Short => 171,
            Size::Medium => 5001,
            Size::Long => 44217,
        }
    }

    pub(crate) fn name(self) -> &'static str {
        match self {
            Size::Short => "short",
            Size::Medium => "medium",
            Size::Long => "long",
        }
    }

    /// Trials of a kernel of `weight` 1 per repetition. Seed 002 runs
    /// 15,000,000 trials of the short size and 12,000 of the long one;
    /// these keep a repetition of either side within about 0.05-0.5 s on
    /// the 2-core reference machine.
    fn base_trials(self) -> u64 {
        match self {
            Size::Short => 400_000,
            Size::Medium => 60_000,
            Size::Long => 8_000,
        }
    }

    /// The target for the cantus/OpenMP time ratio.
    fn target(self) -> Option<f64> {
        match self {
            Size::Short => Some(1.2),
            Size::Medium => None,
            Size::Long => Some(1.0),
        }
    }
}

/// Trials are divided by this with `--quick`.
const QUICK_DIVISOR: u64 = 20;
/// Chunk size of the dynamic schedule.
const DYNAMIC_CHUNK: usize = 1024;
/// Largest relative difference between a parallel and the serial output.
pub(crate) const TOLERANCE: f64 = 1e-12;
/// Largest relative difference of TRAP_INT's sum (the order of the
/// additions depends on how the loop was split).
pub(crate) const SUM_TOLERANCE: f64 = 1e-10;
/// Largest relative difference between the cantus and OpenMP checksums.
const CHECKSUM_TOLERANCE: f64 = 1e-9;

/// The kernels.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kernel {
    MulAddSub,
    Init3,
    IfQuad,
    TrapInt,
    PressureCalc,
    EnergyCalc,
    Fir,
}

/// A loop body over a block of indices: inputs, outputs, the block.
type Body = fn(&[Vec<f64>], &Outs<'_>, Range<usize>);

impl Kernel {
    pub(crate) const ALL: [Kernel; 7] = [
        Kernel::MulAddSub,
        Kernel::Init3,
        Kernel::IfQuad,
        Kernel::TrapInt,
        Kernel::PressureCalc,
        Kernel::EnergyCalc,
        Kernel::Fir,
    ];

    /// The name, as `suite_omp lcals <name>` takes it.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Kernel::MulAddSub => "muladdsub",
            Kernel::Init3 => "init3",
            Kernel::IfQuad => "if_quad",
            Kernel::TrapInt => "trap_int",
            Kernel::PressureCalc => "pressure_calc",
            Kernel::EnergyCalc => "energy_calc",
            Kernel::Fir => "fir",
        }
    }

    /// The OpenMP peer's arguments for `trials` trials on `n` elements,
    /// one repetition per run (`suite_omp lcals <name> <n> <trials> 1`).
    pub(crate) fn peer_args(self, n: usize, trials: u64) -> Vec<String> {
        vec![
            "lcals".into(),
            self.name().into(),
            n.to_string(),
            trials.to_string(),
            "1".into(),
        ]
    }

    fn inputs(self) -> usize {
        match self {
            Kernel::MulAddSub | Kernel::Init3 => 2,
            Kernel::IfQuad | Kernel::PressureCalc => 3,
            Kernel::TrapInt => 0,
            Kernel::EnergyCalc => 13,
            Kernel::Fir => 1,
        }
    }

    fn outputs(self) -> usize {
        match self {
            Kernel::MulAddSub | Kernel::Init3 => 3,
            Kernel::IfQuad | Kernel::PressureCalc | Kernel::EnergyCalc => 2,
            Kernel::TrapInt => 0,
            Kernel::Fir => 1,
        }
    }

    /// The parallel loops of one trial, in order (TRAP_INT, a reduction,
    /// has none).
    fn loops(self) -> &'static [Body] {
        match self {
            Kernel::MulAddSub => &[muladdsub],
            Kernel::Init3 => &[init3],
            Kernel::IfQuad => &[if_quad],
            Kernel::TrapInt => &[],
            Kernel::PressureCalc => &[pressure_1, pressure_2],
            Kernel::EnergyCalc => &[energy_1, energy_2, energy_3, energy_4, energy_5, energy_6],
            Kernel::Fir => &[fir],
        }
    }

    /// Relative cost of a trial: trials per repetition are
    /// `Size::base_trials / weight`.
    fn weight(self) -> u64 {
        match self {
            Kernel::MulAddSub | Kernel::Init3 | Kernel::Fir => 1,
            Kernel::PressureCalc => 2,
            Kernel::IfQuad | Kernel::TrapInt => 3,
            Kernel::EnergyCalc => 8,
        }
    }

    /// Trials per repetition at `size`, the same for cantus and OpenMP.
    pub(crate) fn trials(self, size: Size, quick: bool) -> u64 {
        let t = size.base_trials() / self.weight();
        if quick { (t / QUICK_DIVISOR).max(1) } else { t }
    }

    /// Input `j` at length `n`: the same data as `lcals_input` in
    /// suite_omp.c.
    fn input(self, j: usize, n: usize) -> Vec<f64> {
        let key = j as u64 + 1;
        let (len, scale, offset) = match (self, j) {
            // IF_QUAD: a in [0.5, 1.5), b in [-1, 1), c in [-0.1, 0.15).
            (Kernel::IfQuad, 0) => (n, 1.0, 0.5),
            (Kernel::IfQuad, 1) => (n, 2.0, -1.0),
            (Kernel::IfQuad, _) => (n, 0.25, -0.1),
            // PRESSURE_CALC: e_old in [-0.25, 0.75).
            (Kernel::PressureCalc, 1) => (n, 1.0, -0.25),
            // ENERGY_CALC: delvc in [-0.5, 0.5), pbvc in [-0.3, 0.7).
            (Kernel::EnergyCalc, 1) => (n, 1.0, -0.5),
            (Kernel::EnergyCalc, 8) => (n, 1.0, -0.3),
            (Kernel::Fir, _) => (n + FIR_TAPS, 1.0, 0.0),
            _ => (n, 1.0, 0.0),
        };
        (0..len).map(|i| scale * uval(i, key) + offset).collect()
    }
}

/// One kernel's data at one length.
pub(crate) struct Lcals {
    kernel: Kernel,
    n: usize,
    x: Vec<Vec<f64>>,
    out: Vec<Vec<f64>>,
    /// TRAP_INT: the sum of every trial's result, and how many trials.
    trap_total: f64,
    trap_trials: u64,
}

impl Lcals {
    /// Inputs filled, outputs poisoned with NaN.
    pub(crate) fn new(kernel: Kernel, n: usize) -> Lcals {
        Lcals {
            kernel,
            n,
            x: (0..kernel.inputs()).map(|j| kernel.input(j, n)).collect(),
            out: vec![vec![f64::NAN; n]; kernel.outputs()],
            trap_total: 0.0,
            trap_trials: 0,
        }
    }

    /// One trial: each loop of the kernel as a forall.
    pub(crate) fn trial(&mut self, sched: Sched) {
        let n = self.n;
        if self.kernel == Kernel::TrapInt {
            let h = 1.0 / n as f64;
            let sum = sched.forall(0..n, DYNAMIC_CHUNK).fold_reduce(
                || 0.0,
                |acc, r| trap_sum(acc, r, h),
                |a, b| a + b,
            );
            self.trap_total += sum * h;
            self.trap_trials += 1;
            return;
        }
        let x = &self.x;
        let outs = Outs::new(self.out.iter_mut().map(Vec::as_mut_slice), n);
        for body in self.kernel.loops() {
            sched
                .forall(0..n, DYNAMIC_CHUNK)
                .for_each_range(|r| body(x, &outs, r));
        }
    }

    /// One trial on the current rayon pool (`cantus-bench scale`'s rayon
    /// peer): each loop split by `rayon::iter::split`, which halves a
    /// range as long as rayon's adaptive splitter asks for more pieces
    /// and the range holds at least two grains of `grain` indices (the
    /// same rule as cantus's adaptive schedule and its default grain).
    pub(crate) fn trial_rayon(&mut self, grain: usize) {
        use rayon::iter::ParallelIterator;
        let n = self.n;
        let grain = grain.max(1);
        let blocks = move || {
            rayon::iter::split(0..n, move |r: Range<usize>| {
                if r.len() >= 2 * grain {
                    let mid = r.start + r.len() / 2;
                    (r.start..mid, Some(mid..r.end))
                } else {
                    (r, None)
                }
            })
        };
        if self.kernel == Kernel::TrapInt {
            let h = 1.0 / n as f64;
            let sum: f64 = blocks().map(|r| trap_sum(0.0, r, h)).sum();
            self.trap_total += sum * h;
            self.trap_trials += 1;
            return;
        }
        let x = &self.x;
        let outs = Outs::new(self.out.iter_mut().map(Vec::as_mut_slice), n);
        for body in self.kernel.loops() {
            blocks().for_each(|r| body(x, &outs, r));
        }
    }

    /// One trial without the runtime: each loop as a plain serial loop
    /// (the `--baseline` figure: what the compiler makes of the loops).
    pub(crate) fn serial_trial(&mut self) {
        let n = self.n;
        if self.kernel == Kernel::TrapInt {
            let h = 1.0 / n as f64;
            self.trap_total += std::hint::black_box(trap_sum(0.0, 0..n, h)) * h;
            self.trap_trials += 1;
            return;
        }
        let outs = Outs::new(self.out.iter_mut().map(Vec::as_mut_slice), n);
        for body in self.kernel.loops() {
            body(&self.x, &outs, 0..n);
        }
        drop(outs);
        std::hint::black_box(&mut self.out);
    }

    /// Checks the outputs against a serial run of the same loop bodies;
    /// returns the checksum (the same formula as suite_omp.c).
    pub(crate) fn verify(&self) -> Result<f64, String> {
        let k = self.kernel;
        let mut sum = 0.0;
        if k == Kernel::TrapInt {
            let h = 1.0 / self.n as f64;
            let want = trap_sum(0.0, 0..self.n, h) * h;
            let got = self.trap_total / self.trap_trials as f64;
            if !close(got, want, SUM_TOLERANCE) {
                return Err(format!(
                    "lcals.trap_int n={}: mean sum {got:e} differs from the serial sum {want:e}",
                    self.n
                ));
            }
            sum = got;
        }
        let mut want = vec![vec![f64::NAN; self.n]; k.outputs()];
        {
            let outs = Outs::new(want.iter_mut().map(Vec::as_mut_slice), self.n);
            for body in k.loops() {
                body(&self.x, &outs, 0..self.n);
            }
        }
        for (j, (got, want)) in self.out.iter().zip(&want).enumerate() {
            if let Some(i) = (0..self.n).find(|&i| !close(got[i], want[i], TOLERANCE)) {
                return Err(format!(
                    "lcals.{} n={}: output {j}[{i}] is {} but the serial loop gives {}",
                    k.name(),
                    self.n,
                    got[i],
                    want[i]
                ));
            }
            sum += checksum(got, 1.0 + j as f64);
        }
        Ok(sum)
    }
}

/// `|x - want| <= tol * max(1, |want|)`; NaN is never close.
fn close(x: f64, want: f64, tol: f64) -> bool {
    (x - want).abs() <= tol * want.abs().max(1.0)
}

/// Weighted sum in index order, as `checksum` in suite_omp.c.
fn checksum(v: &[f64], base: f64) -> f64 {
    v.iter()
        .enumerate()
        .fold(0.0, |s, (i, &x)| s + x * (base + (i % 8) as f64 * 0.125))
}

/// Benchmarks every kernel at every size.
pub(crate) fn run(ctx: &mut Ctx) {
    for kernel in Kernel::ALL {
        for size in Size::ALL {
            let base = format!("lcals.{}.{}", kernel.name(), size.name());
            if ctx.selected(&base) {
                bench(ctx, kernel, size, &base);
            }
        }
    }
}

fn bench(ctx: &mut Ctx, kernel: Kernel, size: Size, base: &str) {
    let n = size.len();
    let trials = kernel.trials(size, ctx.quick);
    let scheds = ctx.schedules.clone();
    let mut data = Lcals::new(kernel, n);
    // Warm-up, as the peer does: carriers, stacks and caches.
    ctx.rt.block_on(|| {
        for _ in 0..trials / 10 + 1 {
            data.trial(scheds[0]);
        }
    });
    let args = kernel.peer_args(n, trials);
    let mut omp = Vec::new();
    let mut omp_checksum = None;
    let mut cantus: Vec<Vec<f64>> = vec![Vec::new(); scheds.len()];
    let (mut serial_rust, mut serial_c) = (Vec::new(), Vec::new());
    let mut errors = Vec::new();
    for rep in 0..ctx.reps {
        ctx.progress(&format!(
            "{base}: rep {}/{} ({trials} trials)",
            rep + 1,
            ctx.reps
        ));
        for peer_turn in turns(rep) {
            if peer_turn {
                if let Some(peer) = &ctx.peer {
                    match peer.run(&args) {
                        Ok(r) => {
                            omp.extend(r.times_of("trials").iter().map(|t| t / trials as f64));
                            omp_checksum = r.checksum;
                        }
                        Err(e) => errors.push(e),
                    }
                }
                continue;
            }
            for (si, &s) in scheds.iter().enumerate() {
                let secs = ctx.rt.block_on(|| {
                    let t = Instant::now();
                    for _ in 0..trials {
                        data.trial(s);
                    }
                    t.elapsed().as_secs_f64()
                });
                cantus[si].push(secs / trials as f64);
            }
        }
        if !ctx.baseline {
            continue;
        }
        for peer_turn in turns(rep) {
            if peer_turn {
                if let Some(peer) = &ctx.peer {
                    match peer.run_with(&args, 1) {
                        Ok(r) => {
                            serial_c.extend(r.times_of("trials").iter().map(|t| t / trials as f64))
                        }
                        Err(e) => errors.push(e),
                    }
                }
                continue;
            }
            let t = Instant::now();
            for _ in 0..trials {
                data.serial_trial();
            }
            serial_rust.push(t.elapsed().as_secs_f64() / trials as f64);
        }
    }
    match data.verify() {
        Ok(sum) => {
            if let Some(c) = omp_checksum.filter(|&c| !close(sum, c, CHECKSUM_TOLERANCE)) {
                errors.push(format!(
                    "{base}: the cantus checksum {sum:e} differs from the OpenMP checksum {c:e}"
                ));
            }
        }
        Err(e) => errors.push(e),
    }
    for e in errors {
        ctx.fail(e);
    }
    for (si, &s) in scheds.iter().enumerate() {
        let row = Row {
            group: "lcals",
            kernel: kernel.name(),
            size: size.name().into(),
            n,
            sched: s,
            base: base.to_string(),
            name: ctx.name(base, s),
            trials,
            value: Value::TimePer {
                scale: 1e6,
                unit: "us/trial",
            },
            cantus: std::mem::take(&mut cantus[si]),
            openmp: omp.clone(),
            target: size.target(),
            serial: ctx
                .baseline
                .then(|| (serial_rust.clone(), serial_c.clone())),
        };
        ctx.record(row);
    }
}

// ---------------------------------------------------------------- bodies
//
// Each body takes the inputs, the outputs and a block of indices; the
// constants are the same as in suite_omp.c.

/// The inputs `0..K` restricted to block `r`.
fn ins<'a, const K: usize>(x: &'a [Vec<f64>], r: &Range<usize>) -> [&'a [f64]; K] {
    std::array::from_fn(|j| &x[j][r.clone()])
}

/// The outputs `0..K` restricted to block `r`.
///
/// # Safety
/// As [`Outs::slice`]: no other live slice overlaps block `r`.
#[allow(clippy::mut_from_ref)] // disjoint by contract, as Outs::slice
unsafe fn outs<'a, const K: usize>(o: &'a Outs<'_>, r: &Range<usize>) -> [&'a mut [f64]; K] {
    // SAFETY: distinct arrays j never overlap; block r is ours by the
    // caller's contract.
    std::array::from_fn(|j| unsafe { o.slice(j, r.clone()) })
}

#[inline(never)]
fn muladdsub(x: &[Vec<f64>], o: &Outs<'_>, r: Range<usize>) {
    let [a, b] = ins(x, &r);
    // SAFETY: the forall (or the serial caller) owns block r.
    let [p, s, d] = unsafe { outs(o, &r) };
    for i in 0..r.len() {
        p[i] = a[i] * b[i];
        s[i] = a[i] + b[i];
        d[i] = a[i] - b[i];
    }
}

#[inline(never)]
fn init3(x: &[Vec<f64>], o: &Outs<'_>, r: Range<usize>) {
    let [a, b] = ins(x, &r);
    // SAFETY: the forall (or the serial caller) owns block r.
    let [o1, o2, o3] = unsafe { outs(o, &r) };
    for i in 0..r.len() {
        let v = -a[i] - b[i];
        o1[i] = v;
        o2[i] = v;
        o3[i] = v;
    }
}

#[inline(never)]
fn if_quad(x: &[Vec<f64>], o: &Outs<'_>, r: Range<usize>) {
    let [a, b, c] = ins(x, &r);
    // SAFETY: the forall (or the serial caller) owns block r.
    let [x1, x2] = unsafe { outs(o, &r) };
    for i in 0..r.len() {
        let s = b[i] * b[i] - 4.0 * a[i] * c[i];
        if s >= 0.0 {
            let s = s.sqrt();
            x2[i] = (-b[i] + s) / (2.0 * a[i]);
            x1[i] = (-b[i] - s) / (2.0 * a[i]);
        } else {
            x2[i] = 0.0;
            x1[i] = 0.0;
        }
    }
}

const TRAP_X0: f64 = 0.0;
const TRAP_XP: f64 = 0.5;
const TRAP_Y: f64 = 0.5;
const TRAP_YP: f64 = -0.5;

/// TRAP_INT's sum over block `r`, added to `acc` in index order. Not
/// inlined, so the parallel loop and the serial baseline run the same
/// machine code (the bodies below likewise).
#[inline(never)]
fn trap_sum(acc: f64, r: Range<usize>, h: f64) -> f64 {
    r.fold(acc, |s, i| {
        let x = TRAP_X0 + i as f64 * h;
        let d = (x - TRAP_XP) * (x - TRAP_XP) + (TRAP_Y - TRAP_YP) * (TRAP_Y - TRAP_YP);
        s + 1.0 / d.sqrt()
    })
}

const PRESSURE_CLS: f64 = 0.7;
const PRESSURE_P_CUT: f64 = 0.01;
const PRESSURE_PMIN: f64 = -0.05;
const PRESSURE_EOSVMAX: f64 = 0.9;

/// bvc = cls * (compression + 1).
#[inline(never)]
fn pressure_1(x: &[Vec<f64>], o: &Outs<'_>, r: Range<usize>) {
    let [compression] = ins(x, &r);
    // SAFETY: the forall (or the serial caller) owns block r.
    let [bvc] = unsafe { outs(o, &r) };
    for i in 0..r.len() {
        bvc[i] = PRESSURE_CLS * (compression[i] + 1.0);
    }
}

/// p_new = bvc * e_old, cut and clamped.
#[inline(never)]
fn pressure_2(x: &[Vec<f64>], o: &Outs<'_>, r: Range<usize>) {
    let [_, e_old, vnewc] = ins(x, &r);
    // SAFETY: the forall (or the serial caller) owns block r.
    let [bvc, p_new] = unsafe { outs(o, &r) };
    for i in 0..r.len() {
        let mut p = bvc[i] * e_old[i];
        if p.abs() < PRESSURE_P_CUT {
            p = 0.0;
        }
        if vnewc[i] >= PRESSURE_EOSVMAX {
            p = 0.0;
        }
        if p < PRESSURE_PMIN {
            p = PRESSURE_PMIN;
        }
        p_new[i] = p;
    }
}

const ENERGY_RHO0: f64 = 0.5;
const ENERGY_E_CUT: f64 = 1e-4;
const ENERGY_EMIN: f64 = -0.5;
const ENERGY_Q_CUT: f64 = 1e-4;

fn energy_ssc(s: f64) -> f64 {
    if s <= 0.1111111e-36 {
        0.3333333e-18
    } else {
        s.sqrt()
    }
}

fn energy_cut(e: f64) -> f64 {
    let e = if e.abs() < ENERGY_E_CUT { 0.0 } else { e };
    if e < ENERGY_EMIN { ENERGY_EMIN } else { e }
}

// ENERGY_CALC's inputs: e_old, delvc, p_old, q_old, work, comp_half_step,
// p_half_step, bvc, pbvc, ql_old, qq_old, vnewc, p_new; outputs e_new,
// q_new.

#[inline(never)]
fn energy_1(x: &[Vec<f64>], o: &Outs<'_>, r: Range<usize>) {
    let [e_old, delvc, p_old, q_old, work] = ins(x, &r);
    // SAFETY: the forall (or the serial caller) owns block r.
    let [e_new] = unsafe { outs(o, &r) };
    for i in 0..r.len() {
        e_new[i] = e_old[i] - 0.5 * delvc[i] * (p_old[i] + q_old[i]) + 0.5 * work[i];
    }
}

#[inline(never)]
fn energy_2(x: &[Vec<f64>], o: &Outs<'_>, r: Range<usize>) {
    let [
        _,
        delvc,
        _,
        _,
        _,
        comp_half,
        p_half,
        bvc,
        pbvc,
        ql_old,
        qq_old,
    ] = ins(x, &r);
    // SAFETY: the forall (or the serial caller) owns block r.
    let [e_new, q_new] = unsafe { outs(o, &r) };
    for i in 0..r.len() {
        if delvc[i] > 0.0 {
            q_new[i] = 0.0;
        } else {
            let vhalf = 1.0 / (1.0 + comp_half[i]);
            let ssc =
                energy_ssc((pbvc[i] * e_new[i] + vhalf * vhalf * bvc[i] * p_half[i]) / ENERGY_RHO0);
            q_new[i] = ssc * ql_old[i] + qq_old[i];
        }
    }
}

#[inline(never)]
fn energy_3(x: &[Vec<f64>], o: &Outs<'_>, r: Range<usize>) {
    let [_, delvc, p_old, q_old, _, _, p_half] = ins(x, &r);
    // SAFETY: the forall (or the serial caller) owns block r.
    let [e_new, q_new] = unsafe { outs(o, &r) };
    for i in 0..r.len() {
        e_new[i] += 0.5 * delvc[i] * (3.0 * (p_old[i] + q_old[i]) - 4.0 * (p_half[i] + q_new[i]));
    }
}

#[inline(never)]
fn energy_4(x: &[Vec<f64>], o: &Outs<'_>, r: Range<usize>) {
    let [_, _, _, _, work] = ins(x, &r);
    // SAFETY: the forall (or the serial caller) owns block r.
    let [e_new] = unsafe { outs(o, &r) };
    for i in 0..r.len() {
        e_new[i] = energy_cut(e_new[i] + 0.5 * work[i]);
    }
}

#[inline(never)]
fn energy_5(x: &[Vec<f64>], o: &Outs<'_>, r: Range<usize>) {
    let [
        _,
        delvc,
        p_old,
        q_old,
        _,
        _,
        p_half,
        bvc,
        pbvc,
        ql_old,
        qq_old,
        vnewc,
        p_new,
    ] = ins(x, &r);
    // SAFETY: the forall (or the serial caller) owns block r.
    let [e_new, q_new] = unsafe { outs(o, &r) };
    for i in 0..r.len() {
        let q_tilde = if delvc[i] > 0.0 {
            0.0
        } else {
            let ssc = energy_ssc(
                (pbvc[i] * e_new[i] + vnewc[i] * vnewc[i] * bvc[i] * p_new[i]) / ENERGY_RHO0,
            );
            ssc * ql_old[i] + qq_old[i]
        };
        e_new[i] = energy_cut(
            e_new[i]
                - (7.0 * (p_old[i] + q_old[i]) - 8.0 * (p_half[i] + q_new[i])
                    + (p_new[i] + q_tilde))
                    * delvc[i]
                    / 6.0,
        );
    }
}

#[inline(never)]
fn energy_6(x: &[Vec<f64>], o: &Outs<'_>, r: Range<usize>) {
    let [
        _,
        delvc,
        _,
        _,
        _,
        _,
        _,
        bvc,
        pbvc,
        ql_old,
        qq_old,
        vnewc,
        p_new,
    ] = ins(x, &r);
    // SAFETY: the forall (or the serial caller) owns block r.
    let [e_new, q_new] = unsafe { outs(o, &r) };
    for i in 0..r.len() {
        if delvc[i] <= 0.0 {
            let ssc = energy_ssc(
                (pbvc[i] * e_new[i] + vnewc[i] * vnewc[i] * bvc[i] * p_new[i]) / ENERGY_RHO0,
            );
            let q = ssc * ql_old[i] + qq_old[i];
            q_new[i] = if q.abs() < ENERGY_Q_CUT { 0.0 } else { q };
        }
    }
}

const FIR_TAPS: usize = 16;
const FIR_COEFF: [f64; FIR_TAPS] = [
    3.0, -1.0, -1.0, -1.0, -1.0, 3.0, -1.0, -1.0, -1.0, -1.0, 3.0, -1.0, -1.0, -1.0, -1.0, 3.0,
];

#[inline(never)]
fn fir(x: &[Vec<f64>], o: &Outs<'_>, r: Range<usize>) {
    let input = &x[0][r.start..r.end + FIR_TAPS];
    // SAFETY: the forall (or the serial caller) owns block r.
    let [out] = unsafe { outs(o, &r) };
    for i in 0..r.len() {
        let mut sum = 0.0;
        for j in 0..FIR_TAPS {
            sum += FIR_COEFF[j] * input[i + j];
        }
        out[i] = sum;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::suite::tests::rt;

    fn run_trials(k: Kernel, n: usize, s: Sched) -> Lcals {
        let mut d = Lcals::new(k, n);
        rt().block_on(|| {
            for _ in 0..3 {
                d.trial(s);
            }
        });
        d
    }

    #[test]
    fn every_kernel_verifies_under_every_schedule() {
        for k in Kernel::ALL {
            for s in Sched::ALL {
                for n in [1, 171, 5001] {
                    let d = run_trials(k, n, s);
                    assert!(d.verify().is_ok(), "{k:?} {s:?} n={n}: {:?}", d.verify());
                }
            }
        }
    }

    #[test]
    fn every_kernel_verifies_on_rayon() {
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(2)
            .build()
            .expect("rayon pool");
        for k in Kernel::ALL {
            for n in [1, 171, 5001] {
                let mut d = Lcals::new(k, n);
                // A small grain, so that the loops really split.
                pool.install(|| (0..3).for_each(|_| d.trial_rayon(16)));
                assert!(d.verify().is_ok(), "{k:?} n={n}: {:?}", d.verify());
            }
        }
    }

    #[test]
    fn verification_catches_a_wrong_element() {
        for k in Kernel::ALL {
            let n = 171;
            if k == Kernel::TrapInt {
                let mut d = run_trials(k, n, Sched::Adaptive);
                d.trap_total *= 1.0 + 1e-8;
                assert!(d.verify().is_err(), "{k:?}: a wrong sum passed");
                continue;
            }
            for j in 0..k.outputs() {
                for (i, wrong) in [(0, 1e-9), (n / 2, f64::NAN), (n - 1, -1.0)] {
                    let mut d = run_trials(k, n, Sched::Static);
                    d.out[j][i] = if wrong.is_nan() {
                        wrong
                    } else {
                        d.out[j][i] + wrong
                    };
                    assert!(
                        d.verify().is_err(),
                        "{k:?}: output {j}[{i}] off by {wrong} passed"
                    );
                }
            }
        }
    }

    #[test]
    fn verification_catches_a_skipped_block() {
        // A loop that never wrote its last element leaves the NaN poison.
        let mut d = Lcals::new(Kernel::MulAddSub, 171);
        let x = &d.x;
        let outs = Outs::new(d.out.iter_mut().map(Vec::as_mut_slice), 171);
        muladdsub(x, &outs, 0..170);
        drop(outs);
        assert!(d.verify().is_err());
    }

    #[test]
    fn checksums_match_the_c_peer_formula() {
        assert_eq!(checksum(&[1.0; 9], 1.0), 1.0 * 8.0 + 0.125 * 28.0 + 1.0);
    }
}
