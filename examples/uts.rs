//! The Unbalanced Tree Search benchmark (Olivier et al., "UTS: An
//! Unbalanced Tree Search Benchmark", LCPC 2006) balanced across the
//! workers of every locale by `cantus::balance`: counts the nodes of one
//! of UTS's sample trees, whose shape is known only as it is explored
//! (`programs/src/uts.rs`), prints the time and what the balancing
//! did on each locale, and checks the counts against the published ones
//! (exits 1 if they differ).
//!
//! ```text
//! cargo run --release --example uts -- [T1|T3|T1L|T3L|T1-small|T3-small] [UNITS] [--seq]
//! CANTUS_LOCALES=2 cargo run --release --example uts -- T3
//! ```
//!
//! Every locale runs this same program; only locale 0's `main` goes on
//! past the runtime's start, so only it prints. `UNITS` is the units of
//! work (nodes) per step (`Balance::units`); `--seq` also times the
//! sequential walk (after the runtime has ended) and checks it too.

use cantus_programs::report;
use cantus_programs::uts;

use uts::{Tree, Uts};

/// How to call the program.
const USAGE: &str = "uts [T1|T3|T1L|T3L|T1-small|T3-small] [UNITS] [--seq]";

fn main() {
    let name: String = report::arg(1, USAGE).unwrap_or_else(|| "T1".to_string());
    let Some(tree) = Tree::parse(&name) else {
        eprintln!("uts: no tree named {name:?}; usage: {USAGE}");
        std::process::exit(2)
    };
    let (run, ()) = report::run_balanced("uts", USAGE, Uts::new(tree), || ());
    let counts = run.outcome.result;
    run.print(
        "uts",
        &format!(
            "{}: {} nodes ({} leaves, depth {}; {:.2} M nodes/s)",
            tree.name(),
            counts.nodes,
            counts.leaves,
            counts.depth,
            counts.nodes as f64 / run.secs / 1e6
        ),
    );
    let known = tree.known_counts();
    if counts != known {
        eprintln!(
            "uts: WRONG: {} nodes, {} leaves, depth {}; {} has {} nodes, {} leaves, depth {}",
            counts.nodes,
            counts.leaves,
            counts.depth,
            tree.name(),
            known.nodes,
            known.leaves,
            known.depth
        );
        std::process::exit(1);
    }
    println!("uts: the counts are {}'s known ones: OK", tree.name());
    report::compare_sequential("uts", &counts, run.secs, || uts::uts_seq(tree));
}
