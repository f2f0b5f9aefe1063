//! Chant's polling experiment (seed 004, section 4.2): 12 tasks per
//! locale on 2 locales; each task computes for a while, then exchanges a
//! message with its partner on the other locale, round after round. Run
//! once with each polling policy (the scheduler polls on behalf of
//! waiting tasks; each waiting task polls for itself) and once without
//! messages, and print the time of each and the messaging overhead.
//!
//! ```text
//! cargo run --release --example chant_polling [ROUNDS] [WORK]
//! ```
//! `WORK` is multiply-adds between messages (default 5000, some
//! microseconds).

use cantus::chant::{self, Policy, Source, Tag, TaskId};
use serde::{Deserialize, Serialize};
use std::time::Instant;

const TASKS: u32 = 12;
const HELLO: u32 = 1;
const PARTNER: u32 = 2;
const PING: u32 = 3;
const DONE: u32 = 4;

/// Busy work the compiler cannot remove.
fn compute(iters: u64, seed: u64) -> u64 {
    let mut x = seed | 1;
    for _ in 0..iters {
        x = std::hint::black_box(x)
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
    }
    std::hint::black_box(x)
}

/// One task of the experiment, started on its locale by a remote call.
#[derive(Serialize, Deserialize)]
struct Member {
    boss: TaskId,
    index: u32,
    rounds: u64,
    work: u64,
    talk: bool,
}

impl cantus::Remote for Member {
    type Output = ();
    fn run(self) {
        let key = cantus::here() as u32 * TASKS + self.index;
        chant::send_value(self.boss, HELLO, key).expect("hello");
        let partner: TaskId = chant::recv(Source::Task(self.boss), Tag::Is(PARTNER))
            .decode()
            .expect("a task id");
        let mut acc = 0u64;
        for round in 0..self.rounds {
            acc = acc.wrapping_add(compute(self.work, round ^ key as u64));
            if self.talk {
                chant::send_value(partner, PING, round).expect("ping");
                let r: u64 = chant::recv(Source::Task(partner), Tag::Is(PING))
                    .decode()
                    .expect("a round");
                assert_eq!(r, round, "messages from one partner arrive in order");
            }
        }
        chant::send_value(self.boss, DONE, acc).expect("done");
    }
}

/// Sets the polling policy on the locale that runs it.
#[derive(Serialize, Deserialize)]
struct SetPolicy(bool);
impl cantus::Remote for SetPolicy {
    type Output = ();
    fn run(self) {
        chant::set_policy(if self.0 {
            Policy::TaskPolls
        } else {
            Policy::SchedulerPolls
        });
    }
}

cantus::remote!(Member, SetPolicy);

/// One run: seconds from the start of the members until all are done.
fn run(rounds: u64, work: u64, talk: bool) -> f64 {
    let boss = chant::me();
    let start = Instant::now();
    for locale in 0..2 {
        for index in 0..TASKS {
            cantus::begin_on(
                locale,
                Member {
                    boss,
                    index,
                    rounds,
                    work,
                    talk,
                },
            )
            .expect("start");
        }
    }
    let mut ids = vec![None; 2 * TASKS as usize];
    for _ in 0..2 * TASKS {
        let m = chant::recv(Source::Any, Tag::Is(HELLO));
        let key: u32 = m.decode().expect("a key");
        ids[key as usize] = Some(m.source());
    }
    for key in 0..TASKS as usize {
        let (a, b) = (ids[key].unwrap(), ids[key + TASKS as usize].unwrap());
        chant::send_value(a, PARTNER, b).expect("partner");
        chant::send_value(b, PARTNER, a).expect("partner");
    }
    for _ in 0..2 * TASKS {
        let _: u64 = chant::recv(Source::Any, Tag::Is(DONE))
            .decode()
            .expect("a sum");
    }
    start.elapsed().as_secs_f64()
}

fn main() {
    let mut args = std::env::args().skip(1);
    let rounds: u64 = args
        .next()
        .map_or(2000, |a| a.parse().expect("ROUNDS: an integer"));
    let work: u64 = args
        .next()
        .map_or(5_000, |a| a.parse().expect("WORK: an integer"));
    let rt = cantus::Runtime::builder()
        .default_locales(2)
        .build()
        .unwrap_or_else(|e| {
            eprintln!("chant_polling: {e}");
            std::process::exit(1)
        });
    let (alone, sched, task) = rt.block_on(|| {
        let alone = run(rounds, work, false);
        cantus::coforall_locales(|_| SetPolicy(false)).unwrap();
        let sched = run(rounds, work, true);
        cantus::coforall_locales(|_| SetPolicy(true)).unwrap();
        let task = run(rounds, work, true);
        (alone, sched, task)
    });
    rt.shutdown();
    let per = |t: f64| t * 1e6 / rounds as f64;
    println!(
        "chant_polling: {TASKS} tasks per locale on 2 locales, {rounds} rounds of {work} multiply-adds \
         then one exchange: compute only {:.2} us/round; SchedulerPolls {:.2} us/round (+{:.1}%); \
         TaskPolls {:.2} us/round (+{:.1}%)",
        per(alone),
        per(sched),
        (sched / alone - 1.0) * 100.0,
        per(task),
        (task / alone - 1.0) * 100.0
    );
}
