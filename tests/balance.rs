//! Balanced computations (`cantus::balance`) on jobs of 1 to 4 locales
//! (processes on this machine, shared memory), each run in a child
//! process under a kill timeout (`common::run_child`): right answers,
//! termination exactly once, work that moves, a victim busy in long
//! steps that still answers.

mod common;

use cantus_programs::fib as fib_program;
use cantus_programs::lu;
use cantus_programs::nqueens;
use cantus_programs::pentomino;
use cantus_programs::uts;

use cantus::balance::{self, Balance, Splittable};
use common::held::{Held, Hold};
use common::{is_child, run_child};
use serde::{Deserialize, Serialize};

/// Counts the leaves of a complete binary tree of the given depth, but
/// each unit sleeps `unit_us` microseconds (a victim whose steps are
/// long). Results: leaves, and the locales that counted some (a bit
/// set).
#[derive(Serialize, Deserialize)]
struct SlowTree {
    stack: Vec<u32>,
    unit_us: u64,
}

impl Splittable for SlowTree {
    type Result = (u64, u64);
    fn run(&mut self, units: usize, r: &mut (u64, u64)) -> bool {
        for _ in 0..units {
            let Some(d) = self.stack.pop() else {
                return false;
            };
            std::thread::sleep(std::time::Duration::from_micros(self.unit_us));
            if d == 0 {
                r.0 += 1;
                r.1 |= 1 << cantus::here();
            } else {
                self.stack.extend([d - 1, d - 1]);
            }
        }
        !self.stack.is_empty()
    }
    fn split(&mut self) -> Option<SlowTree> {
        (self.stack.len() >= 2).then(|| SlowTree {
            stack: self.stack.drain(..self.stack.len() / 2).collect(),
            unit_us: self.unit_us,
        })
    }
    fn merge(into: &mut (u64, u64), other: (u64, u64)) {
        into.0 += other.0;
        into.1 |= other.1;
    }
}

cantus::splittable!(SlowTree);

fn fib(n: u64) -> u64 {
    let (mut a, mut b) = (0u64, 1u64);
    for _ in 0..n {
        (a, b) = (b, a + b);
    }
    a
}

/// Runs `body` in a child whose job has `locales` locales (one worker
/// each); asserts the child succeeded and returns its stderr.
fn in_job(test: &str, locales: usize, body: impl FnOnce(&cantus::Runtime)) -> Option<String> {
    if is_child() {
        let rt = cantus::Runtime::builder()
            .locales(locales)
            .workers(1)
            .build()
            .expect("a job starts");
        body(&rt);
        return None;
    }
    let (status, stderr) = run_child(test, &[("CANTUS_LOCALES", &locales.to_string())]);
    assert!(
        status.success(),
        "{test} with {locales} locales failed: {status}\n{stderr}"
    );
    Some(stderr)
}

/// Runs the test body for each locale count; a child runs only its own.
fn for_locales(test: &str, counts: &[usize], body: impl Fn(&cantus::Runtime, usize)) {
    for &n in counts {
        if is_child() && std::env::var("CANTUS_LOCALES").ok() != Some(n.to_string()) {
            continue;
        }
        in_job(test, n, |rt| body(rt, n));
    }
}

#[test]
fn fib_is_right_on_1_to_4_locales_and_work_moves() {
    for_locales(
        "fib_is_right_on_1_to_4_locales_and_work_moves",
        &[1, 2, 3, 4],
        |rt, n| {
            for k in [0u32, 1, 2, 24] {
                // fib(24) is held until another locale takes a piece: it
                // must move, whatever the schedule.
                let out = rt
                    .block_on(|| {
                        Balance::new(Held::new(fib_program::Fib::with_cutoff(k, 2)))
                            .units(64)
                            .run()
                    })
                    .expect("balanced fib");
                assert_eq!(out.result, fib(k as u64), "fib({k}) on {n} locales");
                assert_eq!(out.locales.len(), n);
                // The printable table: a header, a row per locale (its
                // number, then its steps), a legend.
                let table = out.table().to_string();
                let rows: Vec<&str> = table.lines().collect();
                assert_eq!(rows.len(), n + 2, "{table}");
                for (l, s) in out.locales.iter().enumerate() {
                    let cols: Vec<&str> = rows[l + 1].split_whitespace().collect();
                    assert_eq!(cols[..2], [l.to_string(), s.steps.to_string()], "{table}");
                }
                let sent: u64 = out.locales.iter().map(|s| s.work_sent).sum();
                let received: u64 = out.locales.iter().map(|s| s.work_received).sum();
                assert_eq!(
                    sent, received,
                    "every piece sent arrived: {:?}",
                    out.locales
                );
                if k == 24 && n > 1 {
                    assert!(
                        received > 0,
                        "no work moved on {n} locales: {:?}",
                        out.locales
                    );
                }
            }
            // Many computations one after another: each ends exactly once.
            for k in 0..20u32 {
                assert_eq!(
                    rt.block_on(|| balance::run(fib_program::Fib::with_cutoff(k, 2)))
                        .unwrap(),
                    fib(k as u64)
                );
            }
        },
    );
}

#[test]
fn computations_started_on_another_locale_and_side_by_side() {
    for_locales(
        "computations_started_on_another_locale_and_side_by_side",
        &[3],
        |rt, _| {
            cantus::remote_fn! {
                fn fib_there(k: u32) -> u64 {
                    cantus::balance::run(fib_program::Fib::with_cutoff(k, 2)).unwrap()
                }
            }
            let (a, b) = rt.block_on(|| {
                let a = cantus::on(2, fib_there(22));
                let b = cantus::on(1, fib_there(21));
                (a.join().unwrap(), b.join().unwrap())
            });
            assert_eq!((a, b), (fib(22), fib(21)));
        },
    );
}

#[test]
fn a_victim_busy_in_long_steps_still_answers() {
    for_locales(
        "a_victim_busy_in_long_steps_still_answers",
        &[2],
        |rt, _| {
            // 64 leaves, 127 units of 2 ms, 8 units a step: one step is
            // 16 ms, and the whole tree 250 ms on one worker. The only
            // piece starts on locale 0, whose one worker is always busy in
            // it; locale 1 must still get work and count leaves.
            let out = rt
                .block_on(|| {
                    Balance::new(Held::new(SlowTree {
                        stack: vec![6],
                        unit_us: 2000,
                    }))
                    .units(8)
                    .run()
                })
                .unwrap();
            assert_eq!(out.result.0, 64);
            assert_eq!(
                out.result.1, 0b11,
                "both locales counted leaves: {:?}",
                out.locales
            );
            assert!(out.locales[1].work_received > 0);
        },
    );
}

#[test]
fn a_single_leaf_ends() {
    for_locales("a_single_leaf_ends", &[1, 4], |rt, _| {
        let r = rt.block_on(|| {
            balance::run(SlowTree {
                stack: vec![0],
                unit_us: 0,
            })
        });
        assert_eq!(r.unwrap(), (1, 1));
    });
}

/// Counts leaves like `SlowTree`, but the locale named by `die_on`
/// exits (as if killed) in the middle of its first piece.
#[derive(Serialize, Deserialize)]
struct DoomedTree {
    stack: Vec<u32>,
    die_on: usize,
}

impl Splittable for DoomedTree {
    type Result = u64;
    fn run(&mut self, units: usize, leaves: &mut u64) -> bool {
        if cantus::here() == self.die_on {
            // A crash: no unwinding, no clean-up.
            std::process::abort();
        }
        for _ in 0..units {
            let Some(d) = self.stack.pop() else {
                return false;
            };
            std::thread::sleep(std::time::Duration::from_micros(200));
            if d == 0 {
                *leaves += 1;
            } else {
                self.stack.extend([d - 1, d - 1]);
            }
        }
        !self.stack.is_empty()
    }
    fn split(&mut self) -> Option<DoomedTree> {
        (self.stack.len() >= 2).then(|| DoomedTree {
            stack: self.stack.drain(..self.stack.len() / 2).collect(),
            die_on: self.die_on,
        })
    }
    fn merge(into: &mut u64, other: u64) {
        *into += other;
    }
}
cantus::splittable!(DoomedTree);

#[test]
fn a_locale_that_dies_mid_search_ends_the_job_naming_it() {
    let test = "a_locale_that_dies_mid_search_ends_the_job_naming_it";
    if is_child() {
        let rt = cantus::Runtime::builder()
            .locales(3)
            .workers(1)
            .build()
            .expect("a job starts");
        let _ = rt.block_on(|| {
            balance::run(DoomedTree {
                stack: vec![12],
                die_on: 2,
            })
        });
        // Not reached: locale 2 dies when it gets work, and the job ends.
        std::process::exit(0);
    }
    let start = std::time::Instant::now();
    let (status, stderr) = run_child(test, &[("CANTUS_LOCALES", "3")]);
    assert!(!status.success(), "the job should have failed:\n{stderr}");
    assert!(
        stderr.contains("locale 2"),
        "the message names locale 2:\n{stderr}"
    );
    assert!(
        start.elapsed() < std::time::Duration::from_secs(30),
        "took {:?}",
        start.elapsed()
    );
}

/// A complete binary tree of 2^depth leaves whose subtrees below depth
/// `CUT` are counted in one unit: the result is (leaves, the deepest
/// stack any piece held).
#[derive(Serialize, Deserialize)]
struct HugeTree(Vec<u32>);

/// Subtrees of this height are one unit.
const CUT: u32 = 12;

impl Splittable for HugeTree {
    type Result = (u64, usize);
    fn run(&mut self, units: usize, r: &mut (u64, usize)) -> bool {
        for _ in 0..units {
            match self.0.pop() {
                Some(h) if h <= CUT => r.0 += 1 << h,
                Some(h) => self.0.extend([h - 1, h - 1]),
                None => return false,
            }
            r.1 = r.1.max(self.0.len());
        }
        !self.0.is_empty()
    }
    fn split(&mut self) -> Option<HugeTree> {
        (self.0.len() >= 2).then(|| HugeTree(self.0.drain(..self.0.len() / 2).collect()))
    }
    fn merge(into: &mut (u64, usize), other: (u64, usize)) {
        into.0 += other.0;
        into.1 = into.1.max(other.1);
    }
}
cantus::splittable!(HugeTree);

// The works above, held until a piece moves (`common::held`).
cantus::splittable!(Held<fib_program::Fib>, Held<SlowTree>, Held<HugeTree>);

#[test]
fn a_tree_far_larger_than_memory_could_hold_as_tasks_ends() {
    // 2^34 leaves: as tasks of 64 bytes, a tree of 2^35 nodes would need
    // 2 TiB. As splittable work, no piece holds more than one pending
    // subtree per level.
    for_locales(
        "a_tree_far_larger_than_memory_could_hold_as_tasks_ends",
        &[2, 3],
        |rt, n| {
            let out = rt
                .block_on(|| Balance::new(Held::new(HugeTree(vec![34]))).run())
                .unwrap();
            assert_eq!(out.result.0, 1 << 34, "on {n} locales");
            assert!(
                out.result.1 <= 34,
                "a piece held {} pending subtrees",
                out.result.1
            );
            let moved: u64 = out.locales.iter().map(|s| s.work_received).sum();
            assert!(moved > 0, "no work moved: {:?}", out.locales);
        },
    );
}

/// Counts leaves like `SlowTree` (without sleeping), but a piece running
/// on locale `bad` panics at its first step there.
#[derive(Serialize, Deserialize)]
struct Faulty {
    stack: Vec<u32>,
    bad: usize,
}

impl Splittable for Faulty {
    type Result = u64;
    fn run(&mut self, units: usize, leaves: &mut u64) -> bool {
        if cantus::here() == self.bad {
            panic!("a bad node on locale {}", self.bad);
        }
        for _ in 0..units {
            let Some(d) = self.stack.pop() else {
                return false;
            };
            std::thread::sleep(std::time::Duration::from_micros(50));
            if d == 0 {
                *leaves += 1;
            } else {
                self.stack.extend([d - 1, d - 1]);
            }
        }
        !self.stack.is_empty()
    }
    fn split(&mut self) -> Option<Faulty> {
        balance::split_stack(&mut self.stack).map(|stack| Faulty {
            stack,
            bad: self.bad,
        })
    }
    fn merge(into: &mut u64, other: u64) {
        *into += other;
    }
}
cantus::splittable!(Faulty);

#[test]
fn a_panicking_piece_fails_the_computation_with_its_message() {
    for_locales(
        "a_panicking_piece_fails_the_computation_with_its_message",
        &[1, 2, 3],
        |rt, n| {
            for bad in (0..n).rev() {
                let err = rt
                    .block_on(|| {
                        balance::run(Faulty {
                            stack: vec![10],
                            bad,
                        })
                    })
                    .expect_err("a piece panicked");
                assert_eq!(err.kind(), cantus::ErrorKind::WorkFailed, "{err}");
                let msg = err.to_string();
                assert!(msg.contains(&format!("on locale {bad}")), "{msg}");
                assert!(
                    msg.contains(&format!("a bad node on locale {bad}")),
                    "{msg}"
                );
                assert!(msg.contains("Faulty::run panicked"), "{msg}");
            }
            // The job goes on: the next computation is right.
            let ok = rt.block_on(|| {
                balance::run(Faulty {
                    stack: vec![8],
                    bad: usize::MAX,
                })
            });
            assert_eq!(ok.unwrap(), 256, "on {n} locales");
        },
    );
}

#[test]
fn every_program_is_right_on_1_to_4_locales() {
    // The programs of programs/ at sizes a debug build runs in
    // about a second, each against its sequential reference or its
    // published count.
    for_locales(
        "every_program_is_right_on_1_to_4_locales",
        &[1, 2, 3, 4],
        |rt, n| {
            let fib = rt.block_on(|| balance::run(fib_program::Fib::with_cutoff(27, 10)));
            assert_eq!(fib.unwrap(), fib_program::fib_seq(27), "fib on {n} locales");

            let queens = rt.block_on(|| balance::run(nqueens::Queens::with_cutoff(10, 5)));
            assert_eq!(
                Some(queens.unwrap()),
                nqueens::known_count(10),
                "queens on {n} locales"
            );

            let puzzle = pentomino::Puzzle::Board3x20;
            let tilings = rt.block_on(|| balance::run(pentomino::Pentomino::new(puzzle)));
            assert_eq!(
                tilings.unwrap(),
                puzzle.known_count(),
                "pentomino on {n} locales"
            );

            for tree in [uts::Tree::T1Small, uts::Tree::T3Small] {
                let counts = rt.block_on(|| balance::run(uts::Uts::new(tree)));
                assert_eq!(
                    counts.unwrap(),
                    tree.known_counts(),
                    "UTS {} on {n} locales",
                    tree.name()
                );
            }

            let seq = lu::lu_seq(128, 32, lu::SEED);
            let (factors, _) = rt
                .block_on(|| lu::lu_balanced(128, 32, lu::SEED))
                .expect("lu");
            assert_eq!(
                lu::checksum(&factors),
                lu::checksum(&seq),
                "LU on {n} locales"
            );
            let (carried, _) = rt
                .block_on(|| lu::lu_carried(128, 32, lu::SEED))
                .expect("lu");
            assert_eq!(
                lu::checksum(&carried),
                lu::checksum(&seq),
                "LU with pieces that carry their blocks on {n} locales"
            );
        },
    );
}

/// Items each of which lies on locale `item % locales`. A piece records
/// the locale it was split for; it holds on the starting locale until a
/// piece has run elsewhere (so that work moves whatever the schedule),
/// and `split_for` gives a thief of another locale the items that lie
/// there. Results: the sum, the pieces that ran on a locale other than
/// the one they were split for, and the items that ran on their owner's
/// locale away from the start.
#[derive(Serialize, Deserialize)]
struct Owned {
    items: Vec<u64>,
    locales: u64,
    made_for: usize,
    hold: Hold,
    checked: bool,
}

impl Owned {
    fn piece(&self, items: Vec<u64>, to: usize) -> Owned {
        Owned {
            items,
            locales: self.locales,
            made_for: to,
            hold: self.hold,
            checked: false,
        }
    }
}

impl Splittable for Owned {
    type Result = (u64, u64, u64);

    fn run(&mut self, units: usize, r: &mut (u64, u64, u64)) -> bool {
        let here = cantus::here();
        if !self.checked {
            self.checked = true;
            if self.made_for != here {
                r.1 += 1;
            }
        }
        if self.hold.holding() {
            // Holding until a piece ran elsewhere (requests are answered
            // between steps).
            std::thread::yield_now();
            return true;
        }
        for _ in 0..units {
            let Some(x) = self.items.pop() else { break };
            r.0 += x;
            if here != self.hold.origin() && x % self.locales == here as u64 {
                r.2 += 1;
            }
        }
        !self.items.is_empty()
    }

    fn split(&mut self) -> Option<Owned> {
        panic!("the runtime splits by split_for, which says where the piece goes")
    }

    fn split_for(&mut self, to: usize) -> Option<Owned> {
        let theirs: Vec<u64> = self
            .items
            .iter()
            .copied()
            .filter(|&x| x % self.locales == to as u64)
            .collect();
        let piece = if to != cantus::here() && !theirs.is_empty() && theirs.len() < self.items.len()
        {
            self.items.retain(|&x| x % self.locales != to as u64);
            theirs
        } else {
            let half = self.items.len() / 2;
            if half == 0 {
                return None;
            }
            self.items.drain(..half).collect()
        };
        Some(self.piece(piece, to))
    }

    fn merge(into: &mut (u64, u64, u64), other: (u64, u64, u64)) {
        into.0 += other.0;
        into.1 += other.1;
        into.2 += other.2;
    }
}

cantus::splittable!(Owned);

#[test]
fn a_piece_is_split_for_the_locale_it_runs_on() {
    for_locales(
        "a_piece_is_split_for_the_locale_it_runs_on",
        &[2, 3],
        |rt, n| {
            for _ in 0..3 {
                let items: Vec<u64> = (0..20_000).collect();
                let want: u64 = items.iter().sum();
                let (sum, astray, at_owner) = rt
                    .block_on(|| {
                        balance::run(Owned {
                            items,
                            locales: n as u64,
                            made_for: cantus::here(),
                            hold: Hold::new(),
                            checked: false,
                        })
                    })
                    .expect("balanced");
                assert_eq!(sum, want, "on {n} locales");
                assert_eq!(
                    astray, 0,
                    "pieces ran away from the locale they were split for"
                );
                // The origin held until a piece of another locale's own
                // items (the first split for a thief) ran there.
                assert!(at_owner > 0, "no item ran on its owner away from the start");
            }
        },
    );
}
