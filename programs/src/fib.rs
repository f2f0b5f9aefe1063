//! Fib(n) (seed 001, Muraoka et al., "An MPI-based Implementation of the
//! Tascell Task-Parallel Programming Language": "Fib(n) recursively
//! computes the n-th Fibonacci number"), three ways:
//!
//! - [`Fib`]: splittable work for `cantus::balance`: a stack of the
//!   subproblems still to do, the largest at the bottom, every other one
//!   given away (`balance::split_stack`);
//! - [`fib_join`]: the same recursion with `cantus::join` at every level
//!   above the cut-off (the peer to compare with on one locale);
//! - [`fib_seq`]: the naive recursion on one thread (the reference).
//!
//! [`Fib`] (by default) and [`fib_join`] compute subproblems below
//! [`CUTOFF`] with [`fib_seq`] in one piece, so all three do the same
//! additions.
//!
//! Shared by the examples, tests and benchmarks (the workspace crate
//! `cantus-programs`), each of which uses a part of it.

use serde::{Deserialize, Serialize};

/// Subproblems below this are computed with [`fib_seq`] in one piece (one
/// unit of work, or one `join`-free call): fib(11) is 287 calls of the
/// naive recursion, a fraction of a microsecond.
pub const CUTOFF: u32 = 12;

/// The n-th Fibonacci number by the naive recursion (fib(0) = 0,
/// fib(1) = 1), on the calling thread: the sequential reference.
pub fn fib_seq(n: u32) -> u64 {
    if n < 2 {
        n as u64
    } else {
        fib_seq(n - 1) + fib_seq(n - 2)
    }
}

/// The n-th Fibonacci number with a `cantus::join` at every level down
/// to [`CUTOFF`]; call it from a task.
pub fn fib_join(n: u32) -> u64 {
    if n < CUTOFF {
        return fib_seq(n);
    }
    let (a, b) = cantus::join(|| fib_join(n - 1), || fib_join(n - 2));
    a + b
}

/// The n-th Fibonacci number as splittable work: the subproblems still
/// to do. A unit is one subproblem: split in two at or above the
/// cut-off, computed whole below it. The stack grows at its top (depth first) and
/// its oldest entries, at the bottom, are the largest subproblems; a
/// split gives away every other entry (`balance::split_stack`).
#[derive(Debug, Serialize, Deserialize)]
pub struct Fib {
    /// Subproblems below this are computed whole.
    cutoff: u32,
    /// Subproblems (arguments of fib) still to do, the largest first.
    pending: Vec<u32>,
}

impl Fib {
    /// The work of computing fib(n), with the cut-off [`CUTOFF`].
    pub fn new(n: u32) -> Fib {
        Fib::with_cutoff(n, CUTOFF)
    }

    /// The same work with subproblems below `cutoff` computed whole
    /// (2 or less: every unit is one call of the naive recursion).
    pub fn with_cutoff(n: u32, cutoff: u32) -> Fib {
        Fib {
            cutoff: cutoff.max(2),
            pending: vec![n],
        }
    }
}

impl cantus::balance::Splittable for Fib {
    /// The sum of fib over the subproblems done.
    type Result = u64;

    fn run(&mut self, units: usize, sum: &mut u64) -> bool {
        for _ in 0..units {
            match self.pending.pop() {
                Some(n) if n < self.cutoff => *sum += fib_seq(n),
                Some(n) => self.pending.extend([n - 2, n - 1]),
                None => return false,
            }
        }
        !self.pending.is_empty()
    }

    fn split(&mut self) -> Option<Fib> {
        // Every other subproblem, from the largest: one entry a level,
        // so about 62% of what is left goes (the bottom half would be
        // nearly all of it).
        cantus::balance::split_stack(&mut self.pending).map(|pending| Fib {
            cutoff: self.cutoff,
            pending,
        })
    }

    fn merge(sum: &mut u64, other: u64) {
        *sum += other;
    }
}

cantus::splittable!(Fib);
