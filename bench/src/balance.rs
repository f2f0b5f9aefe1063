//! `cantus-bench balance`: work stealing across locales (`cantus::balance`),
//! side by side with its peers in one run.
//!
//! - `balance_<prog>_seq`: the sequential program (one thread, no runtime);
//! - `balance_<prog>_<L>loc`: the whole process (start-up included) of a
//!   job of L locales of one worker each, on shared memory, running the
//!   splittable version: `speedup` rows are over the 1-locale job and
//!   over the sequential program;
//! - `balance_<prog>_wait_{none,task,all}`: the mean time a random request
//!   of the 2-locale job waited for its answer (seed 001, table 2: NONE,
//!   TASK, NONE+TASK);
//! - `balance_<prog>_join` (fib, UTS T1, LU): on one locale with this
//!   machine's workers, the splittable version against the same program
//!   written with `join` (the peer), in this process.
//!
//! The jobs are copies of this program (`__balance_child PROG`), run as
//! children so that their whole time, start-up included, is measured.
//!
//! `cantus-bench balance-sim`: the protocol on 16 to 256 simulated
//! locales (`cantus::balance::sim`), UTS T1 with and without lifelines:
//! requests per locale per idle period, requests per locale, and the
//! simulated time.

use cantus_programs::fib;
use cantus_programs::lu;
use cantus_programs::nqueens;
use cantus_programs::pentomino;
use cantus_programs::uts;

use crate::Options;
use crate::stats::{Samples, child_numbers, figure, note, ratio, section, time, value};
use cantus::balance::{Balance, Outcome, Tuning, sim};

/// One version of a program: runs it, giving the count it found.
type Version<T> = Box<dyn Fn() -> T + Send + Sync>;

/// A program of the benchmark: its sequential version and its balanced
/// one, each giving the count it found.
struct Program {
    name: &'static str,
    seq: Version<u64>,
    balanced: Version<Outcome<u64>>,
    /// The same program with `join` (fib, UTS T1 and T1L, LU), if it has
    /// one.
    join: Option<Version<u64>>,
}

const FIB_N: u32 = 44;
/// LU's order and block size (the count compared is the factors'
/// checksum, the same bit for bit in every version).
const LU_N: usize = 2048;
const LU_B: usize = 64;
const QUEENS_N: u32 = 15;

fn programs() -> Vec<Program> {
    vec![
        Program {
            name: "fib",
            seq: Box::new(|| fib::fib_seq(FIB_N)),
            balanced: Box::new(|| Balance::new(fib::Fib::new(FIB_N)).run().expect("fib")),
            join: Some(Box::new(|| fib::fib_join(FIB_N))),
        },
        Program {
            name: "nqueens",
            seq: Box::new(|| nqueens::nqueens_seq(QUEENS_N)),
            balanced: Box::new(|| {
                Balance::new(nqueens::Queens::new(QUEENS_N))
                    .run()
                    .expect("nqueens")
            }),
            join: None,
        },
        uts_program("uts_t1", uts::Tree::T1, true),
        uts_program("uts_t3", uts::Tree::T3, false),
        uts_program("uts_large_t1l", uts::Tree::T1L, true),
        uts_program("uts_large_t3l", uts::Tree::T3L, false),
        Program {
            name: "pentomino",
            seq: Box::new(|| pentomino::pentomino_seq(pentomino::Puzzle::Board6x10)),
            balanced: Box::new(|| {
                Balance::new(pentomino::Pentomino::new(pentomino::Puzzle::Board6x10))
                    .run()
                    .expect("pentomino")
            }),
            join: None,
        },
        Program {
            name: "lu",
            seq: Box::new(|| lu::checksum(&lu::lu_seq(LU_N, LU_B, lu::SEED))),
            balanced: Box::new(|| {
                let (m, stats) = lu::lu_balanced(LU_N, LU_B, lu::SEED).expect("lu");
                Outcome {
                    result: lu::checksum(&m),
                    locales: stats.locales,
                }
            }),
            join: Some(Box::new(|| {
                lu::checksum(&lu::lu_join(LU_N, LU_B, lu::SEED))
            })),
        },
        // The peer of `lu`: the pieces carry their blocks (what `lu` did
        // before its pieces fetched them by one-sided get).
        Program {
            name: "lu_carried",
            seq: Box::new(|| lu::checksum(&lu::lu_seq(LU_N, LU_B, lu::SEED))),
            balanced: Box::new(|| {
                let (m, stats) = lu::lu_carried(LU_N, LU_B, lu::SEED).expect("lu");
                Outcome {
                    result: lu::checksum(&m),
                    locales: stats.locales,
                }
            }),
            join: None,
        },
    ]
}

/// UTS on `tree`; with its `join` version if `join` (which needs deep
/// task stacks on T3's trees, so it is left to T1's).
fn uts_program(name: &'static str, tree: uts::Tree, join: bool) -> Program {
    Program {
        name,
        seq: Box::new(move || uts::uts_seq(tree).nodes),
        balanced: Box::new(move || {
            let o = Balance::new(uts::Uts::new(tree)).run().expect("uts");
            Outcome {
                result: o.result.nodes,
                locales: o.locales,
            }
        }),
        join: join.then(|| Box::new(move || uts::uts_join(tree).nodes) as Version<u64>),
    }
}

/// `cantus-bench balance`.
pub(crate) fn run(opts: &Options) {
    let reps = opts.reps.unwrap_or(if opts.quick { 1 } else { 3 });
    for p in programs() {
        if !opts.wants(p.name) {
            continue;
        }
        section(&format!("balance {}", p.name), || program(&p, reps));
    }
}

fn program(p: &Program, reps: usize) {
    let mut seq = Samples::new();
    let mut expected = 0;
    for _ in 0..reps {
        let (d, n) = time(&p.seq);
        expected = n;
        seq.push(d.as_secs_f64());
    }
    let mut jobs: Vec<Samples> = vec![Samples::new(), Samples::new()];
    let mut waits = [Samples::new(), Samples::new(), Samples::new()];
    for _ in 0..reps {
        for (i, locales) in [1usize, 2].into_iter().enumerate() {
            let exe = std::env::current_exe().expect("this program");
            let (d, out) = time(|| {
                std::process::Command::new(&exe)
                    .args(["__balance_child", p.name])
                    .env("CANTUS_LOCALES", locales.to_string())
                    .env("CANTUS_WORKERS", "1")
                    .output()
                    .expect("run a job")
            });
            let who = format!("{} on {locales} locales", p.name);
            let nums = match child_numbers(&out, &who) {
                Ok(n) => n,
                Err(e) => {
                    note(&e);
                    return;
                }
            };
            // (As f64 on both sides: a checksum has more bits than f64
            // keeps, and both round the same.)
            if nums[0] != expected as f64 {
                note(&format!(
                    "{who}: WRONG count {} (expected {expected})",
                    nums[0]
                ));
                return;
            }
            jobs[i].push(d.as_secs_f64());
            if locales == 2 {
                let (none, task) = ((nums[1], nums[2]), (nums[3], nums[4]));
                if none.1 > 0.0 {
                    waits[0].push(none.0 / none.1 / 1e3);
                }
                if task.1 > 0.0 {
                    waits[1].push(task.0 / task.1 / 1e3);
                }
                if none.1 + task.1 > 0.0 {
                    waits[2].push((none.0 + task.0) / (none.1 + task.1) / 1e3);
                }
            }
        }
    }
    let name = format!("balance_{}", p.name);
    let s = figure(&format!("{name}_seq"), &seq, "s");
    let one = figure(&format!("{name}_1loc"), &jobs[0], "s");
    let two = figure(&format!("{name}_2loc"), &jobs[1], "s");
    value(&format!("{name}_speedup_2loc_over_1loc"), one / two, "x");
    value(&format!("{name}_speedup_2loc_over_seq"), s / two, "x");
    value(&format!("{name}_speedup_1loc_over_seq"), s / one, "x");
    for (w, kind) in waits.iter().zip(["none", "task", "all"]) {
        figure(&format!("{name}_wait_{kind}"), w, "us");
    }
    if let Some(join) = &p.join {
        join_peer(p, join, reps);
    }
}

/// The splittable version against the `join` version on one locale.
fn join_peer(p: &Program, join: &Version<u64>, reps: usize) {
    let rt = cantus::Runtime::builder()
        .locales(1)
        .build()
        .expect("a runtime");
    let workers = rt.workers();
    let (mut bal, mut j) = (Samples::new(), Samples::new());
    for _ in 0..reps {
        let (d, o) = time(|| rt.block_on(&p.balanced));
        bal.push(d.as_secs_f64());
        let (dj, n) = time(|| rt.block_on(join));
        j.push(dj.as_secs_f64());
        assert_eq!(o.result, n, "{}: balanced and join disagree", p.name);
    }
    rt.shutdown();
    let name = format!("balance_{}_{}w", p.name, workers);
    let b = figure(&name, &bal, "s");
    let jj = figure(&format!("{name}.join"), &j, "s");
    ratio(&name, "join", b, jj);
}

/// `cantus-bench __balance_child PROG`: one job (its locales from the
/// environment) runs the program; locale 0 prints the count, then the
/// NONE and TASK waits (sum in ns, count) over all locales.
pub(crate) fn child(args: &[String]) {
    let name = args.first().map(String::as_str).unwrap_or("");
    let Some(p) = programs().into_iter().find(|p| p.name == name) else {
        eprintln!("__balance_child: no program {name:?}");
        std::process::exit(2);
    };
    let rt = cantus::Runtime::builder().build().expect("a job");
    let o = rt.block_on(&p.balanced);
    rt.shutdown();
    let mut all = cantus::balance::LocaleStats::default();
    for s in &o.locales {
        all.add(s);
    }
    println!("{}", o.result);
    println!(
        "{}\n{}\n{}\n{}",
        all.nothing_wait, all.nothing_answers, all.task_wait, all.task_answers
    );
}

/// `cantus-bench balance-sim`: UTS T1 on 16 to 256 simulated locales,
/// and T1L (25 times larger) on 64 and 256, with and without lifelines.
pub(crate) fn sim(opts: &Options) {
    let sizes: &[usize] = if opts.quick {
        &[16, 64]
    } else {
        &[16, 32, 64, 128, 256]
    };
    for &p in sizes {
        sim_row(uts::Tree::T1, "t1", p, 2);
    }
    if !opts.quick {
        for p in [64, 256] {
            sim_row(uts::Tree::T1L, "t1l", p, 2);
        }
        // A slow network (a message as long as two steps: MPI here).
        for &p in sizes {
            sim_row(uts::Tree::T1, "t1_slow", p, 30);
        }
    }
}

/// One size of the simulation, with and without lifelines; a message
/// takes `latency` ticks (a step 15).
fn sim_row(tree: uts::Tree, tree_tag: &str, p: usize, latency: u64) {
    for lifelines in [true, false] {
        let cfg = sim::SimConfig {
            locales: p,
            tuning: Tuning {
                units: 256,
                step_us: 0,
                random_attempts: 2,
                lifelines,
            },
            // A step of 256 UTS nodes is about 15 us here, a message
            // about 2 us over shared memory: ticks of 1 us.
            latency_ticks: latency,
            step_ticks: 15,
            jitter_ticks: 2,
            seed: p as u64,
        };
        let r = sim::simulate(uts::Uts::new(tree), cfg);
        assert_eq!(r.result.nodes, tree.known_counts().nodes, "simulated UTS");
        let mut per_period = cantus::balance::Spread::default();
        for s in &r.locales {
            per_period.add(&s.requests_per_period);
        }
        let requests = r.messages.random_requests + r.messages.lifeline_requests;
        let tag = format!(
            "sim_{tree_tag}_{p}loc_{}",
            if lifelines { "lifelines" } else { "random" }
        );
        value(
            &format!("{tag}_requests_per_idle_period"),
            per_period.mean(),
            "",
        );
        value(
            &format!("{tag}_requests_per_idle_period_max"),
            per_period.max as f64,
            "",
        );
        value(
            &format!("{tag}_idle_periods_per_locale"),
            per_period.count as f64 / p as f64,
            "",
        );
        value(
            &format!("{tag}_requests_per_locale"),
            requests as f64 / p as f64,
            "",
        );
        value(
            &format!("{tag}_work_moved_per_locale"),
            r.messages.work as f64 / p as f64,
            "",
        );
        let busy = r.locales.iter().map(|s| s.steps).sum::<u64>() * cfg.step_ticks;
        value(
            &format!("{tag}_efficiency"),
            busy as f64 / (r.ticks as f64 * p as f64),
            "",
        );
    }
}
