//! `block_on_latency`: a rayon user calls `rt.block_on(...)` in a loop the
//! way they call `pool.install(...)`. Each call runs fib(15) with a join at
//! every level; we time every call and report the median and the 90th
//! percentile, for each cantus wait policy against rayon's `install` on a
//! pool of the same size, measured in the same run (alternating blocks of
//! calls, so that drift hits both alike).

use crate::stats::{Samples, figure, note, ratio};
use std::hint::black_box;
use std::time::Instant;

const FIB_N: u32 = 15;
/// Calls per block; blocks alternate between cantus and rayon.
const CALLS: usize = 200;

fn fib_cantus(n: u32) -> u64 {
    if n < 2 {
        return n as u64;
    }
    let (a, b) = cantus::join(|| fib_cantus(n - 1), || fib_cantus(n - 2));
    a + b
}

fn fib_rayon(n: u32) -> u64 {
    if n < 2 {
        return n as u64;
    }
    let (a, b) = rayon::join(|| fib_rayon(n - 1), || fib_rayon(n - 2));
    a + b
}

fn expected() -> u64 {
    let (mut a, mut b) = (0u64, 1u64);
    for _ in 0..FIB_N {
        (a, b) = (b, a + b);
    }
    a
}

/// Times `calls` calls of `f`, in microseconds each.
fn per_call(calls: usize, samples: &mut Samples, mut f: impl FnMut() -> u64) {
    let want = expected();
    for _ in 0..calls {
        let t = Instant::now();
        let r = black_box(f());
        let us = t.elapsed().as_secs_f64() * 1e6;
        assert_eq!(r, want, "fib({FIB_N}) computed wrong");
        samples.push(us);
    }
}

pub(crate) fn run(reps: usize, quick: bool) {
    let calls = if quick { CALLS / 4 } else { CALLS };
    let workers = match cantus::Runtime::new() {
        Ok(rt) => {
            let w = rt.workers();
            rt.shutdown();
            w
        }
        Err(e) => {
            note(&format!("block_on_latency: cannot start cantus: {e}"));
            return;
        }
    };
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(workers)
        .build()
        .expect("rayon pool");
    note(&format!(
        "block_on_latency: {reps} blocks of {calls} calls of fib({FIB_N}) per policy, {workers} workers"
    ));
    for policy in [
        cantus::config::WaitPolicy::Hybrid,
        cantus::config::WaitPolicy::Active,
        cantus::config::WaitPolicy::Passive,
    ] {
        let name = format!("block_on_latency.{}", policy_name(policy));
        let (mut ours, mut theirs) = (Samples::new(), Samples::new());
        for _ in 0..reps {
            // Only one of the two pools is busy at a time: cantus is shut
            // down while rayon runs, and rayon's threads sleep while cantus
            // runs (they go to sleep after a few idle rounds).
            let rt = cantus::Runtime::builder()
                .workers(workers)
                .wait_policy(policy)
                .build()
                .expect("cantus runtime");
            rt.block_on(|| fib_cantus(FIB_N)); // warm-up
            per_call(calls, &mut ours, || rt.block_on(|| fib_cantus(FIB_N)));
            rt.shutdown();
            pool.install(|| fib_rayon(FIB_N)); // warm-up
            per_call(calls, &mut theirs, || pool.install(|| fib_rayon(FIB_N)));
        }
        let (m, p) = (ours.median(), ours.quantile(0.9));
        let (rm, rp) = (theirs.median(), theirs.quantile(0.9));
        figure(&format!("{name}.median"), &single(m), "us");
        figure(&format!("{name}.p90"), &single(p), "us");
        figure(&format!("{name}.median.rayon"), &single(rm), "us");
        figure(&format!("{name}.p90.rayon"), &single(rp), "us");
        ratio(&format!("{name}.median"), "rayon", m, rm);
        ratio(&format!("{name}.p90"), "rayon", p, rp);
    }
}

fn single(v: f64) -> Samples {
    let mut s = Samples::new();
    s.push(v);
    s
}

fn policy_name(p: cantus::config::WaitPolicy) -> &'static str {
    match p {
        cantus::config::WaitPolicy::Active => "active",
        cantus::config::WaitPolicy::Passive => "passive",
        _ => "hybrid",
    }
}
