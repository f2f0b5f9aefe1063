//! The balanced programs of `programs/` (the crate `cantus-programs`) (Fib, N-Queens,
//! Pentomino, UTS, LU) at small sizes, checked two ways against their
//! sequential references and published counts:
//!
//! - by a sequential driver without a runtime, which runs random pieces
//!   a random number of units at a time, splits at random, sends every
//!   split piece and every result through postcard (the encoding they
//!   travel in between locales) and merges the results in a random
//!   order: whatever the splits, nothing is lost or counted twice;
//! - by `cantus::balance` on one locale with 2 workers (the shared test
//!   runtime, `common::rt`), with the default step and with one unit per
//!   step (the most chances to split).

mod common;

use cantus_programs::fib;
use cantus_programs::lu;
use cantus_programs::nqueens;
use cantus_programs::pentomino;
use cantus_programs::uts;

use cantus::balance::{Balance, RegisteredWork, Splittable};
use common::rt;
use pentomino::Puzzle;
use serde::Serialize;
use serde::de::DeserializeOwned;
use uts::Tree;

use cantus_programs::random::SplitMix64;

/// `value` encoded with postcard and decoded again, as a piece of work
/// or a result crosses between locales.
fn travel<T: Serialize + DeserializeOwned>(value: &T) -> T {
    let bytes = postcard::to_allocvec(value).expect("encode");
    postcard::from_bytes(&bytes).expect("decode")
}

/// Runs `work` to the end on this thread as the balancer might, but with
/// its choices random (from `seed`): picks a piece at random, runs it
/// 1..=`max_units` units, and after a step that leaves work, splits it
/// with probability 1/3 (the new piece travels, and starts with the
/// default result); now and then the piece itself travels. Finished
/// pieces' results travel and are merged in a random order. Returns the
/// merged result and how many splits gave a piece.
fn drive<W: Splittable>(work: W, seed: u64, max_units: usize) -> (W::Result, usize) {
    let mut rng = SplitMix64(seed);
    let mut pieces: Vec<(W, W::Result)> = vec![(work, W::Result::default())];
    let mut finished: Vec<W::Result> = Vec::new();
    let mut splits = 0;
    while !pieces.is_empty() {
        let i = rng.below(pieces.len());
        let units = 1 + rng.below(max_units);
        let (piece, result) = &mut pieces[i];
        if !piece.run(units, result) {
            let (_, result) = pieces.swap_remove(i);
            finished.push(travel(&result));
            continue;
        }
        if rng.below(3) == 0 {
            if let Some(part) = piece.split() {
                splits += 1;
                pieces.push((travel(&part), W::Result::default()));
            }
        }
        if rng.below(16) == 0 {
            pieces[i].0 = travel(&pieces[i].0);
        }
    }
    let mut total = W::Result::default();
    while !finished.is_empty() {
        let r = finished.swap_remove(rng.below(finished.len()));
        W::merge(&mut total, r);
    }
    (total, splits)
}

/// Drives `make()` with several seeds and step sizes; each run must give
/// `expected` and split at least once, and all of them at least
/// `min_splits` times in all.
fn check_driven<W: Splittable>(
    what: &str,
    make: impl Fn() -> W,
    expected: W::Result,
    min_splits: usize,
) where
    W::Result: PartialEq + std::fmt::Debug,
{
    let mut total_splits = 0;
    for seed in 1..=4 {
        for max_units in [1, 7, 64] {
            let (result, splits) = drive(make(), seed, max_units);
            assert_eq!(
                result, expected,
                "{what}: seed {seed}, up to {max_units} units a step"
            );
            assert!(
                splits > 0,
                "{what}: seed {seed}, up to {max_units} units a step: no split"
            );
            total_splits += splits;
        }
    }
    assert!(
        total_splits >= min_splits,
        "{what}: only {total_splits} splits in all"
    );
}

/// Balances `make()` on the shared 2-worker runtime, with the default
/// step and with one unit per step; both must give `expected`.
fn check_balanced<W: RegisteredWork>(what: &str, make: impl Fn() -> W, expected: W::Result)
where
    W::Result: PartialEq + std::fmt::Debug,
{
    let work = make();
    let default = rt().block_on(move || cantus::balance::run(work).expect("balance::run"));
    assert_eq!(default, expected, "{what}: the default step");
    let work = make();
    let outcome = rt().block_on(move || Balance::new(work).units(1).run().expect("Balance::run"));
    assert_eq!(outcome.result, expected, "{what}: one unit per step");
    assert_eq!(outcome.locales.len(), 1, "{what}: one locale");
    assert!(outcome.locales[0].steps > 0, "{what}: steps counted");
}

#[test]
fn fib_references_agree() {
    for n in 0..=20 {
        assert_eq!(
            rt().block_on(|| fib::fib_join(n)),
            fib::fib_seq(n),
            "n = {n}"
        );
    }
    assert_eq!(fib::fib_seq(20), 6765);
}

#[test]
fn fib_splits_lose_nothing() {
    let expected = fib::fib_seq(18);
    check_driven(
        "fib(18), cutoff 2",
        || fib::Fib::with_cutoff(18, 2),
        expected,
        200,
    );
    check_driven("fib(18)", || fib::Fib::new(18), expected, 20);
}

#[test]
fn fib_balanced_matches_sequential() {
    let expected = fib::fib_seq(24);
    assert_eq!(expected, 46368);
    check_balanced("fib(24)", || fib::Fib::new(24), expected);
    check_balanced(
        "fib(24), cutoff 2",
        || fib::Fib::with_cutoff(24, 2),
        expected,
    );
}

#[test]
fn nqueens_sequential_matches_known_counts() {
    for n in 1..=10 {
        assert_eq!(
            Some(nqueens::nqueens_seq(n)),
            nqueens::known_count(n),
            "n = {n}"
        );
    }
}

#[test]
fn nqueens_splits_lose_nothing() {
    check_driven(
        "8-queens, cutoff 0",
        || nqueens::Queens::with_cutoff(8, 0),
        92,
        200,
    );
    check_driven(
        "8-queens, cutoff 3",
        || nqueens::Queens::with_cutoff(8, 3),
        92,
        20,
    );
}

#[test]
fn nqueens_balanced_matches_sequential() {
    let expected = nqueens::nqueens_seq(10);
    assert_eq!(expected, 724);
    check_balanced("10-queens", || nqueens::Queens::new(10), expected);
    check_balanced(
        "10-queens, cutoff 0",
        || nqueens::Queens::with_cutoff(10, 0),
        expected,
    );
}

#[test]
fn pentomino_sequential_matches_published_counts() {
    for puzzle in [Puzzle::Board3x20, Puzzle::Board4x15] {
        assert_eq!(
            pentomino::pentomino_seq(puzzle),
            puzzle.known_count(),
            "{}",
            puzzle.name()
        );
    }
    for puzzle in Puzzle::ALL {
        assert_eq!(Puzzle::parse(puzzle.name()), Some(puzzle));
    }
}

#[test]
fn pentomino_splits_lose_nothing() {
    let puzzle = Puzzle::Board3x20;
    check_driven(
        "3x20, cutoff 0",
        || pentomino::Pentomino::with_cutoff(puzzle, 0),
        puzzle.known_count(),
        200,
    );
    check_driven(
        "3x20",
        || pentomino::Pentomino::new(puzzle),
        puzzle.known_count(),
        20,
    );
}

#[test]
fn pentomino_balanced_matches_sequential() {
    for (puzzle, cutoff) in [(Puzzle::Board3x20, 0), (Puzzle::Board4x15, 6)] {
        check_balanced(
            puzzle.name(),
            || pentomino::Pentomino::with_cutoff(puzzle, cutoff),
            puzzle.known_count(),
        );
    }
}

#[test]
fn uts_sequential_matches_the_small_trees_counts() {
    for tree in [Tree::T1Small, Tree::T3Small] {
        assert_eq!(uts::uts_seq(tree), tree.known_counts(), "{}", tree.name());
    }
    for tree in Tree::ALL {
        assert_eq!(Tree::parse(tree.name()), Some(tree));
    }
}

#[test]
fn uts_join_matches_sequential() {
    let tree = Tree::T1Small;
    assert_eq!(rt().block_on(|| uts::uts_join(tree)), tree.known_counts());
}

#[test]
fn uts_splits_lose_nothing() {
    for tree in [Tree::T1Small, Tree::T3Small] {
        check_driven(
            tree.name(),
            || uts::Uts::new(tree),
            tree.known_counts(),
            200,
        );
    }
}

#[test]
fn uts_balanced_matches_sequential() {
    for tree in [Tree::T1Small, Tree::T3Small] {
        check_balanced(tree.name(), || uts::Uts::new(tree), uts::uts_seq(tree));
    }
}

// LU (seed 001): blocked, with cache-oblivious kernels; the balanced
// and join versions give the sequential factors bit for bit.

/// The largest error of L*U against A (relative to A's largest entry)
/// accepted.
const LU_TOLERANCE: f64 = 1e-9;

/// (n, b): blocks at the kernels' leaf size, and blocks the kernels
/// recurse in (halves of odd size included).
const LU_SIZES: [(usize, usize); 2] = [(256, 32), (192, 48)];

/// Asserts that `lu` is `seq` bit for bit.
fn assert_same(what: &str, lu: &lu::Matrix, seq: &lu::Matrix) {
    assert_eq!(lu.n, seq.n, "{what}: size");
    let differ = lu
        .data
        .iter()
        .zip(&seq.data)
        .position(|(x, y)| x.to_bits() != y.to_bits());
    if let Some(p) = differ {
        panic!(
            "{what}: entry ({}, {}) is {} instead of {}",
            p / seq.n,
            p % seq.n,
            lu.data[p],
            seq.data[p]
        );
    }
    assert_eq!(lu::checksum(lu), lu::checksum(seq), "{what}: checksum");
}

#[test]
fn lu_sequential_is_accurate() {
    // Besides `LU_SIZES`: one block (the kernels alone), small blocks, and
    // blocks whose recursion reaches odd sizes (100 -> 50 -> 25, 75).
    for (n, b) in LU_SIZES
        .into_iter()
        .chain([(96, 96), (64, 16), (200, 100), (75, 75)])
    {
        let a = lu::Matrix::generate(n, lu::SEED);
        let f = lu::lu_seq(n, b, lu::SEED);
        let error = lu::check(&a, &f);
        assert!(error < LU_TOLERANCE, "n = {n}, b = {b}: error {error:e}");
        // Not trivially so: the factors are not A.
        assert!(lu::check(&a, &a) > 1e-3, "n = {n}: check sees no error");
    }
    // Another seed, another matrix.
    assert_ne!(
        lu::Matrix::generate(64, 1).data,
        lu::Matrix::generate(64, 2).data,
        "the seed is used"
    );
}

#[test]
fn lu_random_splits_give_the_same_factors() {
    let mut seed = 7;
    let mut total = 0;
    for (n, b) in LU_SIZES {
        let seq = lu::lu_seq(n, b, lu::SEED);
        let mut splits = 0;
        let driven = lu::lu_pieces(n, b, lu::SEED, |step| {
            seed += 1;
            let (blocks, s) = match step {
                lu::Step::Panel(w) => drive(w, seed, 3),
                lu::Step::Schur(w) => drive(w, seed, 3),
            };
            splits += s;
            Ok::<_, ()>(blocks)
        })
        .unwrap();
        assert!(splits > 0, "n = {n}, b = {b}: no split");
        total += splits;
        assert_same(&format!("driven, n = {n}, b = {b}"), &driven, &seq);
    }
    assert!(total > 10, "only {total} splits in all");
}

#[test]
fn lu_balanced_matches_sequential() {
    for (n, b) in LU_SIZES {
        let seq = lu::lu_seq(n, b, lu::SEED);
        let (balanced, stats) = rt()
            .block_on(|| lu::lu_balanced(n, b, lu::SEED))
            .expect("lu_balanced");
        assert_same(&format!("balanced, n = {n}, b = {b}"), &balanced, &seq);
        assert_eq!(stats.computations, 2 * (n / b - 1), "two per step");
        assert_eq!(stats.locales.len(), 1, "one locale");
        assert!(stats.locales[0].steps > 0, "steps counted");
        let error = lu::check(&lu::Matrix::generate(n, lu::SEED), &balanced);
        assert!(error < LU_TOLERANCE, "n = {n}, b = {b}: error {error:e}");

        let joined = rt().block_on(|| lu::lu_join(n, b, lu::SEED));
        assert_same(&format!("join, n = {n}, b = {b}"), &joined, &seq);

        let (carried, stats) = rt()
            .block_on(|| lu::lu_carried(n, b, lu::SEED))
            .expect("lu_carried");
        assert_same(&format!("carried, n = {n}, b = {b}"), &carried, &seq);
        assert_eq!(stats.computations, 2 * (n / b - 1), "two per step");
    }
}
