//! Micro-benchmarks: the seed 002 spawn benchmark against GNU OpenMP,
//! spawn+join of one task, yield, and sync-variable hand-off (with the
//! hardware's floor: an atomic-flag ping-pong between two OS threads).

use crate::openmp::{self, WaitPolicy};
use crate::stats::{Samples, figure, note, ns_per, ratio, section, time};
use crate::{Options, start_cantus};
use std::hint::black_box;
use std::process::Command;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

/// Target duration of the "~1 us" coforall body.
const WORK_BODY_NS: f64 = 1_000.0;

/// Operation counts per repetition (divided by [`QUICK_DIVISOR`] with
/// `--quick`).
const SPAWN_TRIALS: u64 = 200_000;
const SPAWN_WORK_TRIALS: u64 = 50_000;
/// OpenMP's passive policy costs a futex wake-up per trial: fewer trials.
const PASSIVE_DIVISOR: u64 = 20;
const JOINS: u64 = 1_000_000;
const YIELDS: u64 = 1_000_000;
const ROUND_TRIPS: u64 = 200_000;
const BLOCKING_CALLS: u64 = 5_000;
const QUICK_DIVISOR: u64 = 10;
/// Time after which a repetition of the spawn benchmark stops early (at a
/// multiple of [`BUDGET_CHECK`] trials), for cantus and OpenMP alike: on
/// an oversubscribed machine spinning OpenMP threads can take milliseconds
/// per trial. Divided by [`QUICK_DIVISOR`] with `--quick`.
const SPAWN_BUDGET: Duration = Duration::from_secs(2);
const BUDGET_CHECK: u64 = 64;

/// The body of the loaded spawn benchmark: a dependent chain of `iters`
/// multiply-adds, the same as `work` in `c/spawn_omp.c`. An empty `asm`
/// statement hides `x` from the optimizer at every step, as in the C code;
/// without it LLVM unrolls and folds several steps into one multiply-add.
#[inline(never)]
pub(crate) fn work(seed: u64, iters: u64) -> u64 {
    let mut x = seed;
    for _ in 0..iters {
        x = x
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        x = opaque(x);
    }
    x
}

/// An optimization barrier that costs no instruction.
#[inline(always)]
fn opaque(mut x: u64) -> u64 {
    #[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
    // SAFETY: an empty template: reads and writes nothing but `x`'s register.
    unsafe {
        std::arch::asm!("/* {0} */", inout(reg) x, options(nomem, nostack, preserves_flags));
    }
    #[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
    {
        x = black_box(x);
    }
    x
}

/// Iterations of [`work`] that take about `ns` nanoseconds here.
fn calibrate_work(ns: f64) -> u64 {
    const PROBE: u64 = 200_000;
    let best = (0..5)
        .map(|_| time(|| black_box(work(black_box(1), black_box(PROBE)))).0)
        .min()
        .unwrap_or(Duration::from_nanos(1));
    let per_iter = ns_per(best, PROBE);
    ((ns / per_iter).round() as u64).max(1)
}

pub(crate) fn run(opts: &Options) {
    let reps = opts.reps.unwrap_or(if opts.quick { 3 } else { 9 });
    let div = if opts.quick { QUICK_DIVISOR } else { 1 };
    let omp = openmp::executable();
    if let Err(e) = &omp {
        note(&format!("OpenMP peer unavailable: {e}"));
    }
    let omp = omp.ok();

    note(&format!("micro: {reps} reps"));
    let budget = SPAWN_BUDGET / div as u32;
    if opts.wants("spawn_coforall") {
        section("spawn_coforall", || {
            spawn_coforall(
                "spawn_coforall",
                reps,
                (SPAWN_TRIALS / div, budget),
                0,
                omp.as_ref(),
                &[WaitPolicy::Active, WaitPolicy::Default, WaitPolicy::Passive],
            )
        });
    }
    let iters = calibrate_work(WORK_BODY_NS);
    note(&format!(
        "spawn_coforall_1us: body = {iters} multiply-adds (about {WORK_BODY_NS} ns here)"
    ));
    if opts.wants("spawn_coforall_1us") {
        section("spawn_coforall_1us", || {
            spawn_coforall(
                "spawn_coforall_1us",
                reps,
                (SPAWN_WORK_TRIALS / div, budget),
                iters,
                omp.as_ref(),
                &[WaitPolicy::Active, WaitPolicy::Default],
            )
        });
    }
    if opts.wants("spawn_join") {
        section("spawn_join, yield", || task_ops(reps, div));
    }
    if opts.wants("handoff") {
        section("handoff", || handoff(reps, ROUND_TRIPS / div));
    }
    if opts.wants("blocking") {
        section("blocking", || blocking(reps, BLOCKING_CALLS / div));
    }
    if opts.wants("block_on_latency") {
        section("block_on_latency", || {
            crate::latency::run(if opts.quick { 2 } else { reps.min(5) }, opts.quick)
        });
    }
}

/// `for trials { coforall(workers, body) }` inside a task, against
/// `for trials { #pragma omp parallel for ... }` in a child process, one
/// repetition of each in turn so that noise hits both alike.
fn spawn_coforall(
    name: &str,
    reps: usize,
    (trials, budget): (u64, Duration),
    work_iters: u64,
    omp: Option<&std::path::PathBuf>,
    policies: &[WaitPolicy],
) {
    let mut ours = Samples::new();
    let mut peers: Vec<Samples> = policies.iter().map(|_| Samples::new()).collect();
    for _ in 0..reps {
        // The runtime is shut down while OpenMP runs, so that neither
        // disturbs the other.
        let rt = start_cantus();
        let workers = rt.workers();
        let ns = rt.block_on(|| {
            coforall_trials(workers, trials / 10 + 1, work_iters, budget / 10);
            let (d, done) = time(|| coforall_trials(workers, trials, work_iters, budget));
            ns_per(d, done)
        });
        rt.shutdown();
        ours.push(ns);
        let Some(exe) = omp else { continue };
        for (&policy, samples) in policies.iter().zip(&mut peers) {
            let t = match policy {
                WaitPolicy::Passive => (trials / PASSIVE_DIVISOR).max(1),
                _ => trials,
            };
            match openmp::spawn_trials(exe, policy, workers, t, 1, work_iters, budget) {
                Ok(v) => v.into_iter().for_each(|x| samples.push(x)),
                Err(e) => note(&format!("{name}.{}: {e}", policy.peer())),
            }
        }
    }
    let c = figure(name, &ours, "ns/trial");
    for (&policy, samples) in policies.iter().zip(&peers) {
        let p = figure(&format!("{name}.{}", policy.peer()), samples, "ns/trial");
        ratio(name, policy.peer(), c, p);
    }
}

/// Runs up to `trials` trials, stopping early (after a multiple of
/// [`BUDGET_CHECK`]) once `budget` has passed; returns the trials run.
fn coforall_trials(workers: usize, trials: u64, work_iters: u64, budget: Duration) -> u64 {
    let t0 = Instant::now();
    for i in 0..trials {
        if work_iters == 0 {
            cantus::coforall(workers, |_| {});
        } else {
            cantus::coforall(workers, |j| {
                black_box(work(j as u64, work_iters));
            });
        }
        if i % BUDGET_CHECK == BUDGET_CHECK - 1 && t0.elapsed() > budget {
            return i + 1;
        }
    }
    trials
}

/// Spawn+join of one task (`join` and `scope`), and yield, in one runtime.
fn task_ops(reps: usize, div: u64) {
    let (joins, yields) = (JOINS / div, YIELDS / div);
    let rt = start_cantus();
    let (join_s, scope_s, yield_s) = rt.block_on(|| {
        let (mut j, mut s, mut y) = (Samples::new(), Samples::new(), Samples::new());
        // The first round warms up and is not counted.
        for rep in 0..=reps {
            let (d, ()) = time(|| {
                for _ in 0..joins {
                    cantus::join(|| black_box(()), || black_box(()));
                }
            });
            let dj = ns_per(d, joins);
            let (d, ()) = time(|| {
                for _ in 0..joins {
                    cantus::scope(|sc| sc.spawn(|| black_box(())));
                }
            });
            let ds = ns_per(d, joins);
            let (d, ()) = time(|| {
                for _ in 0..yields {
                    cantus::task::yield_now();
                }
            });
            let dy = ns_per(d, yields);
            if rep > 0 {
                j.push(dj);
                s.push(ds);
                y.push(dy);
            }
        }
        (j, s, y)
    });
    rt.shutdown();
    figure("spawn_join", &join_s, "ns");
    figure("spawn_join_scope", &scope_s, "ns");
    figure("yield", &yield_s, "ns");
}

/// A blocking call's round trip from a task (`cantus::task::blocking` of an
/// empty call: leave the worker for a blocking-call thread and come home)
/// against the thread-per-call baseline (spawn an OS thread for the call
/// and join it), one repetition of each in turn.
fn blocking(reps: usize, calls: u64) {
    let rt = start_cantus();
    let (mut away, mut thread) = (Samples::new(), Samples::new());
    for rep in 0..=reps {
        let da = rt.block_on(|| {
            let (d, ()) = time(|| {
                for _ in 0..calls {
                    cantus::task::blocking(|| black_box(()));
                }
            });
            ns_per(d, calls)
        });
        let (d, ()) = time(|| {
            for _ in 0..calls {
                std::thread::spawn(|| black_box(())).join().unwrap();
            }
        });
        // The first round warms up (and starts the blocking-call thread).
        if rep > 0 {
            away.push(da);
            thread.push(ns_per(d, calls));
        }
    }
    rt.shutdown();
    let a = figure("blocking_call", &away, "ns");
    let t = figure("blocking_call.thread", &thread, "ns");
    ratio("blocking_call", "thread", a, t);
}

/// SyncVar hand-off: ns per one-way hand-off, with both tasks on one worker
/// (a child process of this program with one worker) and across workers;
/// then the floor of a cross-core hand-off, [`atomic_floor`], once the
/// runtime is shut down, and the cross-worker figure over it.
fn handoff(reps: usize, round_trips: u64) {
    let mut same = Samples::new();
    match handoff_same_worker_child(reps, round_trips) {
        Ok(v) => v.into_iter().for_each(|x| same.push(x)),
        Err(e) => note(&format!("handoff_same_worker: {e}")),
    }
    figure("handoff_same_worker", &same, "ns");

    let rt = start_cantus();
    if rt.workers() < 2 {
        note("handoff_cross_worker: needs 2 workers; skipped");
        rt.shutdown();
        handoff_floor(reps, round_trips.max(ROUND_TRIPS));
        return;
    }
    let cross = rt.block_on(|| {
        let mut s = Samples::new();
        let mut same_worker_runs = 0;
        for rep in 0..=reps {
            let r = ping_pong(round_trips, true);
            if r.same_worker {
                same_worker_runs += 1;
            }
            if rep > 0 {
                s.push(r.ns_per_handoff);
            }
        }
        if same_worker_runs > 0 {
            note(&format!(
                "handoff_cross_worker: {same_worker_runs} runs had both tasks on one worker"
            ));
        }
        note(&format!(
            "handoff_cross_worker: {}",
            ping_pong(1, true).layout
        ));
        s
    });
    rt.shutdown();
    let c = figure("handoff_cross_worker", &cross, "ns");
    let f = handoff_floor(reps, round_trips.max(ROUND_TRIPS));
    ratio("handoff_cross_worker", "atomic_floor", c, f);
}

/// Measures and prints `handoff_floor_atomic` (ns per one-way hand-off,
/// the median of `reps` after one warm-up run); returns it, or NaN where
/// there are not two CPUs to spin on. No cantus runtime may be running:
/// its workers would compete with the two spinning threads for the cores.
/// The callers pass the full [`ROUND_TRIPS`] even with `--quick` (about
/// 70 ms a run here): on a virtual machine a run of 20,000 round trips
/// lost to one descheduling of either spinning thread read 3-6x the
/// floor, and a few runs in ten did.
fn handoff_floor(reps: usize, round_trips: u64) -> f64 {
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    if cpus < 2 {
        note("handoff_floor_atomic: needs 2 CPUs; skipped");
        return f64::NAN;
    }
    let mut floor = Samples::new();
    for rep in 0..=reps {
        let ns = atomic_floor(round_trips);
        if rep > 0 {
            floor.push(ns);
        }
    }
    figure("handoff_floor_atomic", &floor, "ns")
}

/// An atomic word on a cache line of its own (128 bytes: adjacent-line
/// prefetchers pair 64-byte lines).
#[repr(align(128))]
struct Line(AtomicU64);

/// The floor under any cross-worker hand-off: two plain OS threads (not
/// pinned) pass a counter back and forth through two atomic words, each
/// spinning (`spin_loop`) until the other's store arrives. Returns ns per
/// one-way hand-off (a round trip is two), timed by the initiating thread
/// from when the echoing thread is spinning.
fn atomic_floor(round_trips: u64) -> f64 {
    let ping = Line(AtomicU64::new(0));
    let pong = Line(AtomicU64::new(0));
    let started = AtomicBool::new(false);
    std::thread::scope(|s| {
        s.spawn(|| {
            // Release pairs with the Acquire load of the waiting loop below.
            started.store(true, Ordering::Release);
            for i in 1..=round_trips {
                // Acquire/Release: each side's store publishes its count.
                while ping.0.load(Ordering::Acquire) != i {
                    std::hint::spin_loop();
                }
                pong.0.store(i, Ordering::Release);
            }
        });
        while !started.load(Ordering::Acquire) {
            std::hint::spin_loop();
        }
        let t = Instant::now();
        for i in 1..=round_trips {
            ping.0.store(i, Ordering::Release);
            while pong.0.load(Ordering::Acquire) != i {
                std::hint::spin_loop();
            }
        }
        ns_per(t.elapsed(), 2 * round_trips)
    })
}

struct PingPong {
    ns_per_handoff: f64,
    same_worker: bool,
    /// Where the two variables lie: `x`'s and `y`'s addresses modulo 128
    /// (which 64-byte lines of a 128-byte pair they touch), and how many
    /// bytes apart.
    layout: String,
}

/// Where two variables of `size` bytes at `a` and `b` lie, for a note:
/// their offsets in a 128-byte block, and whether they share a 64-byte
/// line or one of them straddles two (a hand-off's cost moves with it).
fn layout(a: usize, b: usize, size: usize) -> String {
    let lines = |p: usize| (p / 64, (p + size - 1) / 64);
    let (la, lb) = (lines(a), lines(b));
    let shared = la.0.max(lb.0) <= la.1.min(lb.1);
    format!(
        "x at {} and y at {} mod 128, {} bytes apart{}{}",
        a % 128,
        b % 128,
        a.abs_diff(b),
        if shared {
            "; they share a 64-byte line"
        } else {
            ""
        },
        if la.0 != la.1 || lb.0 != lb.1 {
            "; one straddles two lines"
        } else {
            ""
        },
    )
}

/// Task A writes `x` (writeEF), task B takes it (readFE) and writes `y`,
/// A takes `y`; `round_trips` times. With `apart`, A busy-waits until B
/// has started, so B was stolen by another worker (a started task stays on
/// its worker), else B runs wherever the scheduler puts it.
fn ping_pong(round_trips: u64, apart: bool) -> PingPong {
    let x = cantus::SyncVar::<u64>::new();
    let y = cantus::SyncVar::<u64>::new();
    let started = AtomicBool::new(false);
    let b_worker = AtomicUsize::new(usize::MAX);
    let mut elapsed = Duration::ZERO;
    let mut a_worker = usize::MAX;
    cantus::scope(|s| {
        s.spawn(|| {
            b_worker.store(
                cantus::query::current_worker().unwrap_or(usize::MAX),
                Ordering::Relaxed,
            );
            // Release pairs with the Acquire load of the waiting loop.
            started.store(true, Ordering::Release);
            for _ in 0..round_trips {
                let v = x.read_fe();
                y.write_ef(v + 1);
            }
        });
        if apart {
            while !started.load(Ordering::Acquire) {
                std::hint::spin_loop();
            }
        }
        a_worker = cantus::query::current_worker().unwrap_or(usize::MAX);
        let t = Instant::now();
        for i in 0..round_trips {
            x.write_ef(i);
            let r = y.read_fe();
            assert_eq!(r, i + 1, "hand-off lost a value");
        }
        elapsed = t.elapsed();
    });
    PingPong {
        ns_per_handoff: ns_per(elapsed, 2 * round_trips),
        same_worker: a_worker == b_worker.load(Ordering::Relaxed),
        layout: layout(
            std::ptr::from_ref(&x) as usize,
            std::ptr::from_ref(&y) as usize,
            size_of_val(&x),
        ),
    }
}

/// The hidden subcommand the parent runs with `CANTUS_WORKERS=1`:
/// `__handoff_child <round_trips> <reps>` prints ns per hand-off, one line
/// per repetition.
pub(crate) fn handoff_child(args: &[String]) {
    let parse = |i: usize| -> u64 {
        args.get(i)
            .and_then(|a| a.parse().ok())
            .unwrap_or_else(|| crate::usage())
    };
    let (round_trips, reps) = (parse(0), parse(1));
    let rt = start_cantus();
    if rt.workers() != 1 {
        eprintln!("cantus-bench: the hand-off child needs CANTUS_WORKERS=1");
        std::process::exit(2);
    }
    let values = rt.block_on(|| {
        ping_pong(round_trips, false);
        (0..reps)
            .map(|_| ping_pong(round_trips, false).ns_per_handoff)
            .collect::<Vec<_>>()
    });
    rt.shutdown();
    for v in values {
        println!("{v:.3}");
    }
}

fn handoff_same_worker_child(reps: usize, round_trips: u64) -> Result<Vec<f64>, String> {
    let exe = std::env::current_exe().map_err(|e| format!("cannot find own executable: {e}"))?;
    let out = Command::new(exe)
        .args([
            "__handoff_child".to_string(),
            round_trips.to_string(),
            reps.to_string(),
        ])
        .env("CANTUS_WORKERS", "1")
        .output()
        .map_err(|e| format!("cannot run child: {e}"))?;
    crate::stats::child_numbers(&out, "the hand-off child")
}
