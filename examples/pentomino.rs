//! Pentomino (seed 001's Pen(n) with n = 12: all tilings of a rectangle
//! by the twelve pentominoes) balanced across the workers of every
//! locale by `cantus::balance`: counts the tilings
//! (`programs/src/pentomino.rs`), prints the time and what the
//! balancing did on each locale, and checks the count against the
//! published one; exits 1 if they differ.
//!
//! ```text
//! cargo run --release --example pentomino -- [6x10|6x10-distinct|5x12|4x15|3x20] [UNITS] [--seq]
//! CANTUS_LOCALES=2 cargo run --release --example pentomino
//! ```
//!
//! `6x10` counts every tiling (9356), `6x10-distinct` each up to the
//! board's symmetries once (2339). Every locale runs this same program;
//! only locale 0's `main` goes on past the runtime's start, so only it
//! prints. `UNITS` is the units of work (search states) per step
//! (`Balance::units`); `--seq` also times the sequential search (after
//! the runtime has ended) and checks it too.

use cantus_programs::pentomino;
use cantus_programs::report;

use pentomino::{Pentomino, Puzzle};

/// How to call the program.
const USAGE: &str = "pentomino [6x10|6x10-distinct|5x12|4x15|3x20] [UNITS] [--seq]";

fn main() {
    let name: String = report::arg(1, USAGE).unwrap_or_else(|| "6x10".to_string());
    let Some(puzzle) = Puzzle::parse(&name) else {
        eprintln!("pentomino: no puzzle named {name:?}; usage: {USAGE}");
        std::process::exit(2)
    };
    let (run, ()) = report::run_balanced("pentomino", USAGE, Pentomino::new(puzzle), || ());
    let count = run.outcome.result;
    run.print(
        "pentomino",
        &format!("{}: {count} solutions", puzzle.name()),
    );
    if count != puzzle.known_count() {
        eprintln!(
            "pentomino: WRONG: {count} solutions; {} has {}",
            puzzle.name(),
            puzzle.known_count()
        );
        std::process::exit(1);
    }
    println!(
        "pentomino: the count is {}'s published one: OK",
        puzzle.name()
    );
    report::compare_sequential("pentomino", &count, run.secs, || {
        pentomino::pentomino_seq(puzzle)
    });
}
