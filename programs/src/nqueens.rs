//! N-Queens (seed 001, Muraoka et al., "An MPI-based Implementation of
//! the Tascell Task-Parallel Programming Language": "Nq(n) finds all
//! solutions to the n-queens problem"): counts the ways to place n queens
//! on an n x n board so that no two attack each other, by backtracking
//! one row at a time over bitmasks of the attacked columns and
//! diagonals.
//!
//! - [`Queens`]: splittable work for `cantus::balance`: a stack of
//!   partial placements, every other one given away (`balance::split_stack`);
//! - [`nqueens_seq`]: the same search, recursive, on one thread (the
//!   reference).
//!
//! [`known_count`] holds the published counts (OEIS A000170).
//!
//! Shared by the examples, tests and benchmarks (the workspace crate
//! `cantus-programs`), each of which uses a part of it.

use serde::{Deserialize, Serialize};

/// By default, partial placements with this many rows or fewer left are
/// finished by the recursion in one unit of work (about half a
/// microsecond on average for n = 15), so that a unit is not a single
/// node of a few nanoseconds.
pub const CUTOFF_ROWS: u32 = 8;

/// The largest board: the masks are `u32`.
pub const MAX_N: u32 = 32;

/// The number of solutions of n-queens for n = 0..=16 (OEIS A000170).
const KNOWN: [u64; 17] = [
    1, 1, 0, 0, 2, 10, 4, 40, 92, 352, 724, 2680, 14200, 73712, 365596, 2279184, 14772512,
];

/// The published number of solutions for an n x n board, if n <= 16.
pub fn known_count(n: u32) -> Option<u64> {
    KNOWN.get(n as usize).copied()
}

/// Queens placed in the first `row` rows: which columns and diagonals of
/// the next row they attack.
#[derive(Clone, Copy, Debug, Serialize, Deserialize)]
pub struct Partial {
    /// Rows filled so far.
    row: u32,
    /// Columns holding a queen.
    cols: u32,
    /// Columns of this row attacked along the down-left diagonals.
    diag_left: u32,
    /// Columns of this row attacked along the down-right diagonals.
    diag_right: u32,
}

impl Partial {
    /// The empty board.
    const EMPTY: Partial = Partial {
        row: 0,
        cols: 0,
        diag_left: 0,
        diag_right: 0,
    };

    /// The columns of the next row where a queen is safe (`full` has a
    /// bit for each column of the board).
    fn free(&self, full: u32) -> u32 {
        full & !(self.cols | self.diag_left | self.diag_right)
    }

    /// This placement with a queen added in the next row at the column
    /// of the single bit `bit`.
    fn place(&self, bit: u32) -> Partial {
        Partial {
            row: self.row + 1,
            cols: self.cols | bit,
            diag_left: (self.diag_left | bit) << 1,
            diag_right: (self.diag_right | bit) >> 1,
        }
    }
}

/// A mask with one bit for each of `n` columns.
fn full_mask(n: u32) -> u32 {
    assert!(n <= MAX_N, "n-queens: n = {n} is larger than {MAX_N}");
    if n == MAX_N { u32::MAX } else { (1 << n) - 1 }
}

/// The number of ways to finish `p` on an `n`-row board whose columns
/// are `full`: the recursion.
fn complete(p: Partial, n: u32, full: u32) -> u64 {
    if p.row == n {
        return 1;
    }
    let mut free = p.free(full);
    let mut count = 0;
    while free != 0 {
        let bit = free & free.wrapping_neg();
        free &= free - 1;
        count += complete(p.place(bit), n, full);
    }
    count
}

/// The number of solutions of n-queens, on the calling thread: the
/// sequential reference.
pub fn nqueens_seq(n: u32) -> u64 {
    complete(Partial::EMPTY, n, full_mask(n))
}

/// N-queens as splittable work: the partial placements still to extend.
/// A unit is one placement: extended by one row (each safe column pushed)
/// or, with `cutoff_rows` rows or fewer left, finished by the recursion.
/// The stack grows at its top (depth first), so its oldest entries, at
/// the bottom, are the shallowest placements with the most work under
/// them; a split gives away every other entry
/// (`balance::split_stack`).
#[derive(Debug, Serialize, Deserialize)]
pub struct Queens {
    /// The size of the board.
    n: u32,
    /// Placements with this many rows or fewer left are finished in one
    /// unit.
    cutoff_rows: u32,
    /// Placements still to extend, the shallowest first.
    pending: Vec<Partial>,
}

impl Queens {
    /// The work of counting the solutions for an n x n board, with the
    /// default cut-off ([`CUTOFF_ROWS`]).
    pub fn new(n: u32) -> Queens {
        Queens::with_cutoff(n, CUTOFF_ROWS)
    }

    /// The same work with placements of `cutoff_rows` rows left or fewer
    /// finished in one unit (0: every unit is one node).
    pub fn with_cutoff(n: u32, cutoff_rows: u32) -> Queens {
        full_mask(n);
        Queens {
            n,
            cutoff_rows,
            pending: vec![Partial::EMPTY],
        }
    }
}

impl cantus::balance::Splittable for Queens {
    /// Solutions found.
    type Result = u64;

    fn run(&mut self, units: usize, count: &mut u64) -> bool {
        let full = full_mask(self.n);
        for _ in 0..units {
            let Some(p) = self.pending.pop() else {
                return false;
            };
            if self.n - p.row <= self.cutoff_rows {
                *count += complete(p, self.n, full);
                continue;
            }
            let mut free = p.free(full);
            while free != 0 {
                let bit = free & free.wrapping_neg();
                free &= free - 1;
                self.pending.push(p.place(bit));
            }
        }
        !self.pending.is_empty()
    }

    fn split(&mut self) -> Option<Queens> {
        // Every other pending entry, from the oldest: each level's
        // siblings shared about evenly.
        cantus::balance::split_stack(&mut self.pending).map(|pending| Queens {
            n: self.n,
            cutoff_rows: self.cutoff_rows,
            pending,
        })
    }

    fn merge(count: &mut u64, other: u64) {
        *count += other;
    }
}

cantus::splittable!(Queens);
