//! Fib(n) (seed 001's Fib) as splittable work balanced across the
//! workers of every locale by `cantus::balance`, beside the same
//! recursion written with `cantus::join` (the peer on one locale: both
//! compute subproblems below the same cut-off whole,
//! `programs/src/fib.rs`). Prints both times, their ratio and what
//! the balancing did on each locale, and checks both answers against
//! fib(n) computed by iteration; exits 1 if either differs.
//!
//! ```text
//! cargo run --release --example fib_balanced -- [N] [UNITS] [--seq]
//! CANTUS_LOCALES=2 cargo run --release --example fib_balanced -- 42
//! ```
//!
//! On several locales the `join` version still runs on locale 0's
//! workers alone. Every locale runs this same program; only locale 0's
//! `main` goes on past the runtime's start, so only it prints. `UNITS` is
//! the units of work (subproblems) per step (`Balance::units`); `--seq`
//! also times the sequential recursion (after the runtime has ended) and
//! checks it too.

use cantus_programs::fib;
use cantus_programs::report;

use fib::Fib;
use std::time::Instant;

/// How to call the program.
const USAGE: &str = "fib_balanced [N (at most 93)] [UNITS] [--seq]";

/// fib(n) by iteration (fib(93) is the largest that fits a `u64`).
fn fib_iterative(n: u32) -> u64 {
    let (mut a, mut b) = (0u64, 1u64);
    for _ in 0..n {
        (a, b) = (b, a + b);
    }
    a
}

fn main() {
    let n: u32 = report::arg(1, USAGE).unwrap_or(40);
    if n > 93 {
        eprintln!("usage: {USAGE}");
        std::process::exit(2);
    }
    let (run, (joined, join_secs)) =
        report::run_balanced("fib_balanced", USAGE, Fib::new(n), move || {
            let start = Instant::now();
            let joined = fib::fib_join(n);
            (joined, start.elapsed().as_secs_f64())
        });
    let (balanced, secs) = (run.outcome.result, run.secs);
    run.print(
        "fib_balanced",
        &format!(
            "fib({n}) = {balanced} (join on locale 0: {join_secs:.3} s; balanced / join = {:.2})",
            secs / join_secs
        ),
    );
    let expected = fib_iterative(n);
    if balanced != expected || joined != expected {
        eprintln!(
            "fib_balanced: WRONG: balanced {balanced}, join {joined}; fib({n}) is {expected}"
        );
        std::process::exit(1);
    }
    println!("fib_balanced: both answers are fib({n}) by iteration: OK");
    report::compare_sequential("fib_balanced", &balanced, secs, || fib::fib_seq(n));
}
