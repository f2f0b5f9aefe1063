//! LU(n) (seed 001's LU): the blocked LU without pivoting of a diagonally
//! dominant n x n matrix, each block step's panel solves and trailing
//! update balanced across the workers of every locale by
//! `cantus::balance` (`programs/src/lu.rs`): the matrix lies in the
//! global address space, spread over the locales block-cyclic, and the
//! pieces name the blocks they work on, which they work on in place
//! where their process maps them and get and put back one-sidedly where
//! it does not (every rank a node); beside the same block
//! jobs run with `cantus::join` on locale 0 and the sequential
//! blocked LU (after the runtime has ended), each timed after one untimed
//! balanced run has touched the memory. Prints the three times, the
//! error of L*U against A and what the balancing did on each locale
//! (summed over the computations, two per block step); exits 1 if the
//! error is too large or the three factorizations differ in any bit.
//!
//! ```text
//! cargo run --release --example lu -- [N] [B]
//! CANTUS_LOCALES=2 cargo run --release --example lu -- 1024
//! ```
//!
//! `B` (default 64) is the block size; it must divide `N` (default 1024).
//! Every locale runs this same program; only locale 0's `main` goes on
//! past the runtime's start, so only it prints.

use cantus_programs::lu;
use cantus_programs::report;

use std::time::Instant;

/// How to call the program.
const USAGE: &str = "lu [N] [B (a divisor of N)]";

/// The largest error of L*U against A (relative to A's largest entry)
/// accepted: the error is about 1e-16 times a small multiple of n.
const TOLERANCE: f64 = 1e-9;

fn main() {
    let n: usize = report::arg(1, USAGE).unwrap_or(1024);
    let b: usize = report::arg(2, USAGE).unwrap_or(lu::B);
    if n == 0 || b == 0 || n % b != 0 {
        eprintln!("lu: the block size {b} must divide n = {n}; usage: {USAGE}");
        std::process::exit(2);
    }
    let seed = lu::SEED;
    let (balanced, secs, joined, join_secs, locales, workers) = cantus::run(|| {
        // One untimed run first: a process's first LU touches the global
        // array's pages and the heap that the matrix's copies then reuse
        // (page faults: 5-8% of an LU(2048) on one worker here), which
        // would otherwise all fall on whichever version ran first.
        if let Err(e) = lu::lu_balanced(n, b, seed) {
            report::fail("lu", e);
        }
        let start = Instant::now();
        let balanced = lu::lu_balanced(n, b, seed);
        let secs = start.elapsed().as_secs_f64();
        let start = Instant::now();
        let joined = lu::lu_join(n, b, seed);
        let join_secs = start.elapsed().as_secs_f64();
        (
            balanced,
            secs,
            joined,
            join_secs,
            cantus::num_locales(),
            cantus::query::workers(),
        )
    })
    .unwrap_or_else(|e| report::fail("lu", e));
    let (factors, stats) = balanced.unwrap_or_else(|e| report::fail("lu", e));

    let start = Instant::now();
    let seq = lu::lu_seq(n, b, seed);
    let seq_secs = start.elapsed().as_secs_f64();

    let error = lu::check(&lu::Matrix::generate(n, seed), &factors);
    let gflops = |s: f64| lu::flops(n) / s / 1e9;
    println!(
        "lu: n = {n}, blocks of {b}: balanced {secs:.3} s ({:.2} GFLOP/s) on {locales} \
         locale(s) of {} worker(s); join {join_secs:.3} s ({:.2} GFLOP/s) on locale 0; \
         sequential {seq_secs:.3} s ({:.2} GFLOP/s); sequential / balanced = {:.2}",
        gflops(secs),
        workers.unwrap_or(0),
        gflops(join_secs),
        gflops(seq_secs),
        seq_secs / secs,
    );
    println!(
        "lu: max |L*U - A| / max |A| = {error:.3e}; balancing, summed over {} computations:",
        stats.computations
    );
    print!("{}", cantus::balance::Table(&stats.locales));

    let (c_bal, c_join, c_seq) = (
        lu::checksum(&factors),
        lu::checksum(&joined),
        lu::checksum(&seq),
    );
    let mut wrong = false;
    if error.is_nan() || error >= TOLERANCE {
        eprintln!("lu: WRONG: the error {error:.3e} is not below {TOLERANCE:e}");
        wrong = true;
    }
    if c_bal != c_seq || c_join != c_seq {
        eprintln!(
            "lu: WRONG: the factors differ: checksums balanced {c_bal:016x}, join \
             {c_join:016x}, sequential {c_seq:016x}"
        );
        wrong = true;
    }
    if wrong {
        std::process::exit(1);
    }
    println!(
        "lu: error below {TOLERANCE:e}, and the balanced, join and sequential factors are the \
         same bit for bit (checksum {c_seq:016x}): OK"
    );
}
