//! Pentomino (seed 001, Muraoka et al., "An MPI-based Implementation of
//! the Tascell Task-Parallel Programming Language": "Pen(n) finds all
//! solutions to the Pentomino problem with n pieces"), with the classic
//! n = 12: the twelve pentominoes (F I L N P T U V W X Y Z), each used
//! once, tile a rectangle of 60 cells. (The paper's n > 12, with extra
//! pieces and a larger board, is not done here.)
//!
//! The search fills the first empty cell, in an order that runs along the
//! board's short side, with every placement of every unused piece whose
//! first cell it is (Knuth's order for exact cover by backtracking);
//! a search state is the filled cells and the pieces used.
//!
//! - [`Pentomino`]: splittable work for `cantus::balance`: a stack of
//!   search states, every other one given away (`balance::split_stack`);
//! - [`pentomino_seq`]: the same search, recursive, on one thread (the
//!   reference).
//!
//! The counts are checkable against the published ones: 6x10 has 2339
//! solutions up to the board's symmetries, 5x12 has 1010, 4x15 368 and
//! 3x20 2. A rectangle has four symmetries and no tiling is symmetric,
//! so counting every tiling gives four times as many (9356 on 6x10); on
//! 6x10, keeping the X pentomino (symmetric itself) in one quarter of the
//! board counts each tiling once: 2339 ([`Puzzle::Board6x10Distinct`]).
//!
//! Shared by the examples, tests and benchmarks (the workspace crate
//! `cantus-programs`), each of which uses a part of it.

use serde::{Deserialize, Serialize};
use std::sync::OnceLock;

/// By default, search states with this many pieces or fewer left to
/// place are finished by the recursion in one unit of work (under two
/// microseconds on average on 6x10), so that a unit is not a single node
/// of a few nanoseconds.
pub const CUTOFF_PIECES: u32 = 6;

/// The twelve pentominoes, each as five (row, column) cells of one of
/// its orientations, in the order F I L N P T U V W X Y Z.
const PIECES: [[(i32, i32); 5]; 12] = [
    [(0, 1), (0, 2), (1, 0), (1, 1), (2, 1)], // F
    [(0, 0), (1, 0), (2, 0), (3, 0), (4, 0)], // I
    [(0, 0), (1, 0), (2, 0), (3, 0), (3, 1)], // L
    [(0, 1), (1, 1), (2, 1), (2, 0), (3, 0)], // N
    [(0, 0), (0, 1), (1, 0), (1, 1), (2, 0)], // P
    [(0, 0), (0, 1), (0, 2), (1, 1), (2, 1)], // T
    [(0, 0), (0, 2), (1, 0), (1, 1), (1, 2)], // U
    [(0, 0), (1, 0), (2, 0), (2, 1), (2, 2)], // V
    [(0, 0), (1, 0), (1, 1), (2, 1), (2, 2)], // W
    [(0, 1), (1, 0), (1, 1), (1, 2), (2, 1)], // X
    [(0, 1), (1, 0), (1, 1), (2, 1), (3, 1)], // Y
    [(0, 0), (0, 1), (1, 1), (2, 1), (2, 2)], // Z
];

/// The index of the X pentomino in [`PIECES`].
const X_PIECE: usize = 9;
/// The center of the X pentomino as written in [`PIECES`].
const X_CENTER: (i32, i32) = (1, 1);

/// Every piece used: the goal.
const ALL_PIECES: u16 = (1 << PIECES.len()) - 1;

/// The board and what is counted.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Puzzle {
    /// Every tiling of the 6x10 rectangle (9356).
    Board6x10,
    /// The tilings of 6x10 up to its symmetries (2339): the X pentomino's
    /// center stays in the quarter of the board nearest the first cell.
    Board6x10Distinct,
    /// Every tiling of 5x12 (4 x 1010).
    Board5x12,
    /// Every tiling of 4x15 (4 x 368).
    Board4x15,
    /// Every tiling of 3x20 (4 x 2).
    Board3x20,
}

impl Puzzle {
    /// Every puzzle, in the order of [`Puzzle::index`].
    pub const ALL: [Puzzle; 5] = [
        Puzzle::Board6x10,
        Puzzle::Board6x10Distinct,
        Puzzle::Board5x12,
        Puzzle::Board4x15,
        Puzzle::Board3x20,
    ];

    /// The puzzle named `name`: "6x10", "6x10-distinct", "5x12", "4x15"
    /// or "3x20".
    pub fn parse(name: &str) -> Option<Puzzle> {
        Puzzle::ALL.into_iter().find(|p| p.name() == name)
    }

    /// The puzzle's name, as [`Puzzle::parse`] reads it.
    pub fn name(self) -> &'static str {
        match self {
            Puzzle::Board6x10 => "6x10",
            Puzzle::Board6x10Distinct => "6x10-distinct",
            Puzzle::Board5x12 => "5x12",
            Puzzle::Board4x15 => "4x15",
            Puzzle::Board3x20 => "3x20",
        }
    }

    /// The position of the puzzle in [`Puzzle::ALL`].
    pub fn index(self) -> usize {
        self as usize
    }

    /// The board's (short, long) sides.
    fn sides(self) -> (i32, i32) {
        match self {
            Puzzle::Board6x10 | Puzzle::Board6x10Distinct => (6, 10),
            Puzzle::Board5x12 => (5, 12),
            Puzzle::Board4x15 => (4, 15),
            Puzzle::Board3x20 => (3, 20),
        }
    }

    /// The published number of solutions counted this way.
    pub fn known_count(self) -> u64 {
        match self {
            Puzzle::Board6x10 => 4 * 2339,
            Puzzle::Board6x10Distinct => 2339,
            Puzzle::Board5x12 => 4 * 1010,
            Puzzle::Board4x15 => 4 * 368,
            Puzzle::Board3x20 => 4 * 2,
        }
    }

    /// The placements of this puzzle, built on first use.
    fn placements(self) -> &'static Placements {
        static TABLES: [OnceLock<Placements>; Puzzle::ALL.len()] =
            [const { OnceLock::new() }; Puzzle::ALL.len()];
        TABLES[self.index()].get_or_init(|| Placements::new(self))
    }
}

/// One piece at one place on the board.
#[derive(Clone, Copy, Debug)]
struct Placement {
    /// The piece's bit among the pieces.
    piece: u16,
    /// The cells it covers.
    cells: u64,
}

/// For each cell of the board, the placements whose first cell (in the
/// search's order) it is. A cell's index runs along the short side
/// first: cell (s, l) is `l * short + s`.
struct Placements {
    /// Placements by first cell.
    by_first_cell: Vec<Vec<Placement>>,
}

impl Placements {
    /// The placements of every piece in every orientation on `puzzle`'s
    /// board.
    fn new(puzzle: Puzzle) -> Placements {
        let (short, long) = puzzle.sides();
        let mut by_first_cell = vec![Vec::new(); (short * long) as usize];
        let mut orientations_total = 0;
        for (piece, shape) in PIECES.iter().enumerate() {
            let orientations = orientations(shape);
            orientations_total += orientations.len();
            for cells in orientations {
                for ds in 0..short {
                    for dl in 0..long {
                        let placed = cells.map(|(s, l, _)| (s + ds, l + dl));
                        if placed.iter().any(|&(s, l)| s >= short || l >= long) {
                            continue;
                        }
                        if puzzle == Puzzle::Board6x10Distinct && piece == X_PIECE {
                            let center = cells.iter().position(|c| c.2).expect("a center");
                            let (s, l) = placed[center];
                            if s >= short / 2 || l >= long / 2 {
                                continue;
                            }
                        }
                        let mask = placed
                            .iter()
                            .fold(0u64, |m, &(s, l)| m | 1 << (l * short + s));
                        by_first_cell[mask.trailing_zeros() as usize].push(Placement {
                            piece: 1 << piece,
                            cells: mask,
                        });
                    }
                }
            }
        }
        assert_eq!(
            orientations_total, 63,
            "the twelve pentominoes have 63 orientations"
        );
        Placements { by_first_cell }
    }
}

/// The distinct orientations (rotations and reflections) of a piece,
/// each moved to touch both axes at 0, its cells sorted; a cell is
/// (row, column, whether it is the cell written at [`X_CENTER`] in
/// [`PIECES`]: for the X pentomino, its center).
fn orientations(shape: &[(i32, i32); 5]) -> Vec<[(i32, i32, bool); 5]> {
    let mut seen: Vec<[(i32, i32, bool); 5]> = Vec::new();
    for turn in 0..8 {
        let mut cells = shape.map(|(r, c)| {
            let center = (r, c) == X_CENTER;
            let (r, c) = if turn & 4 != 0 { (c, r) } else { (r, c) };
            let r = if turn & 1 != 0 { -r } else { r };
            let c = if turn & 2 != 0 { -c } else { c };
            (r, c, center)
        });
        let min_r = cells.iter().map(|c| c.0).min().expect("five cells");
        let min_c = cells.iter().map(|c| c.1).min().expect("five cells");
        for cell in &mut cells {
            cell.0 -= min_r;
            cell.1 -= min_c;
        }
        cells.sort_unstable();
        // A symmetric piece turned onto itself has the same cells with
        // the mark elsewhere: compare the cells alone.
        let same =
            |a: &[(i32, i32, bool); 5]| a.iter().zip(&cells).all(|(x, y)| x.0 == y.0 && x.1 == y.1);
        if !seen.iter().any(same) {
            seen.push(cells);
        }
    }
    seen
}

/// A search state: the cells filled and the pieces placed.
#[derive(Clone, Copy, Debug, Serialize, Deserialize)]
pub struct State {
    /// Filled cells (bit i: cell i).
    filled: u64,
    /// Placed pieces (bit i: piece i of F I L N P T U V W X Y Z).
    used: u16,
}

impl State {
    /// The empty board.
    const EMPTY: State = State { filled: 0, used: 0 };

    /// Pieces still to place.
    fn pieces_left(self) -> u32 {
        (ALL_PIECES & !self.used).count_ones()
    }

    /// Calls `f` with each state that places an unused piece on the
    /// first empty cell of this one, which has pieces left.
    fn for_each_child(self, table: &Placements, mut f: impl FnMut(State)) {
        let first_empty = (!self.filled).trailing_zeros() as usize;
        for p in &table.by_first_cell[first_empty] {
            if self.used & p.piece == 0 && self.filled & p.cells == 0 {
                f(State {
                    filled: self.filled | p.cells,
                    used: self.used | p.piece,
                });
            }
        }
    }
}

/// The number of ways to finish `state`: the recursion.
fn complete(state: State, table: &Placements) -> u64 {
    if state.used == ALL_PIECES {
        return 1;
    }
    let mut count = 0;
    state.for_each_child(table, |child| count += complete(child, table));
    count
}

/// The number of solutions of `puzzle`, on the calling thread: the
/// sequential reference.
pub fn pentomino_seq(puzzle: Puzzle) -> u64 {
    complete(State::EMPTY, puzzle.placements())
}

/// A pentomino puzzle as splittable work: the search states still to
/// extend. A unit is one state: extended by one piece (each fitting
/// placement pushed) or, with `cutoff_pieces` pieces or fewer left,
/// finished by the recursion. The stack grows at its top (depth first),
/// so its oldest entries, at the bottom, are the shallowest states with
/// the most work under them; a split gives away every other entry
/// (`balance::split_stack`).
#[derive(Debug, Serialize, Deserialize)]
pub struct Pentomino {
    /// The board and what is counted.
    puzzle: Puzzle,
    /// States with this many pieces or fewer left are finished in one
    /// unit.
    cutoff_pieces: u32,
    /// Search states still to extend, the shallowest first.
    pending: Vec<State>,
}

impl Pentomino {
    /// The work of counting the solutions of `puzzle`, with the default
    /// cut-off ([`CUTOFF_PIECES`]).
    pub fn new(puzzle: Puzzle) -> Pentomino {
        Pentomino::with_cutoff(puzzle, CUTOFF_PIECES)
    }

    /// The same work with states of `cutoff_pieces` pieces left or fewer
    /// finished in one unit (0: every unit is one node).
    pub fn with_cutoff(puzzle: Puzzle, cutoff_pieces: u32) -> Pentomino {
        Pentomino {
            puzzle,
            cutoff_pieces,
            pending: vec![State::EMPTY],
        }
    }
}

impl cantus::balance::Splittable for Pentomino {
    /// Solutions found.
    type Result = u64;

    fn run(&mut self, units: usize, count: &mut u64) -> bool {
        let table = self.puzzle.placements();
        for _ in 0..units {
            let Some(state) = self.pending.pop() else {
                return false;
            };
            if state.pieces_left() <= self.cutoff_pieces {
                *count += complete(state, table);
            } else {
                state.for_each_child(table, |child| self.pending.push(child));
            }
        }
        !self.pending.is_empty()
    }

    fn split(&mut self) -> Option<Pentomino> {
        // Every other pending entry, from the oldest: each level's
        // siblings shared about evenly.
        cantus::balance::split_stack(&mut self.pending).map(|pending| Pentomino {
            puzzle: self.puzzle,
            cutoff_pieces: self.cutoff_pieces,
            pending,
        })
    }

    fn merge(count: &mut u64, other: u64) {
        *count += other;
    }
}

cantus::splittable!(Pentomino);
