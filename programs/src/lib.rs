//! The balanced programs of seed 001 (Tascell over MPI: Fib, LU,
//! N-Queens, Pentomino) and UTS, written once as splittable work for
//! `cantus::balance` beside their sequential references, and shared by
//! cantus's examples (`examples/{fib_balanced,lu,nqueens,pentomino,uts}.rs`),
//! its tests (`tests/balance*.rs`, `tests/mpi.rs`, `tests/trace.rs`,
//! `tests/inline_in_polls.rs`) and its benchmarks (`cantus-bench
//! balance`). `report` holds what the examples print besides their
//! answers; `random` (splitmix64) and `sort` (quicksort's partition)
//! the small pieces the examples and benchmarks share.

// Under `--cfg loom` (cantus's model-checking build, in which `balance`
// does not exist) this crate, a dev-dependency of cantus, is empty.
#![cfg(not(loom))]

pub mod fib;
pub mod lu;
pub mod nqueens;
pub mod pentomino;
pub mod random;
pub mod report;
pub mod sort;
pub mod uts;
