//! N-Queens (seed 001's Nq(n): all solutions of the n-queens problem)
//! balanced across the workers of every locale by `cantus::balance`:
//! counts the solutions for an n x n board (`programs/src/nqueens.rs`),
//! prints the time and what the balancing did on each locale, and checks
//! the count against the published one (n <= 16) or the sequential
//! search (larger n); exits 1 if they differ.
//!
//! ```text
//! cargo run --release --example nqueens -- [N] [UNITS] [--seq]
//! CANTUS_LOCALES=2 cargo run --release --example nqueens -- 15
//! ```
//!
//! Every locale runs this same program; only locale 0's `main` goes on
//! past the runtime's start, so only it prints. `UNITS` is the units of
//! work (partial placements) per step (`Balance::units`); `--seq` also
//! times the sequential search (after the runtime has ended) and checks
//! it too.

use cantus_programs::nqueens;
use cantus_programs::report;

use nqueens::Queens;

/// How to call the program.
const USAGE: &str = "nqueens [N (1 to 32)] [UNITS] [--seq]";

fn main() {
    let n: u32 = report::arg(1, USAGE).unwrap_or(14);
    if !(1..=nqueens::MAX_N).contains(&n) {
        eprintln!("usage: {USAGE}");
        std::process::exit(2);
    }
    let (run, ()) = report::run_balanced("nqueens", USAGE, Queens::new(n), || ());
    let count = run.outcome.result;
    run.print("nqueens", &format!("{n} x {n}: {count} solutions"));
    let (expected, source) = match nqueens::known_count(n) {
        Some(known) => (known, "the published count"),
        None => (nqueens::nqueens_seq(n), "the sequential search's count"),
    };
    if count != expected {
        eprintln!("nqueens: WRONG: {count} solutions; {source} is {expected}");
        std::process::exit(1);
    }
    println!("nqueens: the count is {source}: OK");
    report::compare_sequential("nqueens", &count, run.secs, || nqueens::nqueens_seq(n));
}
