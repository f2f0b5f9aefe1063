//! A token ring of talking tasks: `TASKS` tasks on every locale form a
//! ring (neighbours on different locales, so every hop crosses locales
//! when there are several); a token, a counter, goes around `ROUNDS`
//! times as Chant messages (`cantus::chant`), each task adding one.
//! Checks the final count and prints the time per hop.
//!
//! ```text
//! cargo run --release --example token_ring [ROUNDS] [TASKS]
//! ```
//!
//! Defaults: 10 000 rounds, 4 tasks per locale, 2 locales (set
//! `CANTUS_LOCALES` for more, `CANTUS_CHANT_POLL=task` for the policy in
//! which waiting tasks poll for themselves). The program starts its other
//! locales itself (copies of this process, talking through shared
//! memory); no launcher is needed.

use cantus::chant::{self, Source, Tag, TaskId};
use serde::{Deserialize, Serialize};
use std::time::Instant;

/// Member -> boss: here I am (payload: the member's index).
const HELLO: u32 = 1;
/// Boss -> member: your successor in the ring.
const NEXT: u32 = 2;
/// The token (payload: the count so far).
const TOKEN: u32 = 3;

/// One member of the ring, started on its locale as a remote call.
#[derive(Serialize, Deserialize)]
struct Member {
    boss: TaskId,
    index: u32,
    members: u32,
    rounds: u64,
}

impl cantus::Remote for Member {
    type Output = ();
    fn run(self) {
        chant::send_value(self.boss, HELLO, self.index).expect("hello");
        let next: TaskId = chant::recv(Source::Task(self.boss), Tag::Is(NEXT))
            .decode()
            .expect("a task id");
        for round in 0..self.rounds {
            let count: u64 = chant::recv(Source::Any, Tag::Is(TOKEN))
                .decode()
                .expect("a count");
            // The last hop of the last round goes home to the boss.
            let to = if self.index + 1 == self.members && round + 1 == self.rounds {
                self.boss
            } else {
                next
            };
            chant::send_value(to, TOKEN, count + 1).expect("pass the token");
        }
    }
}
cantus::remote!(Member);

fn arg(n: usize, default: u64, what: &str) -> u64 {
    match std::env::args().nth(n) {
        None => default,
        Some(a) => a.parse().ok().filter(|&v| v > 0).unwrap_or_else(|| {
            eprintln!("usage: token_ring [ROUNDS] [TASKS] ({what} must be a positive integer)");
            std::process::exit(2)
        }),
    }
}

fn main() {
    let rounds = arg(1, 10_000, "ROUNDS");
    let per_locale = arg(2, 4, "TASKS");
    let rt = cantus::Runtime::builder()
        .default_locales(2)
        .build()
        .unwrap_or_else(|e| {
            eprintln!("token_ring: {e}");
            std::process::exit(1)
        });
    let locales = cantus::num_locales();
    let members = (locales as u64 * per_locale) as u32;
    let (took, count) = rt.block_on(|| {
        let boss = chant::me();
        // Member i runs on locale i % locales: ring neighbours differ.
        for index in 0..members {
            let m = Member {
                boss,
                index,
                members,
                rounds,
            };
            cantus::begin_on(index as usize % locales, m).expect("start a member");
        }
        let mut ring = vec![None; members as usize];
        for _ in 0..members {
            let m = chant::recv(Source::Any, Tag::Is(HELLO));
            let index: u32 = m.decode().expect("an index");
            ring[index as usize] = Some(m.source());
        }
        let ring: Vec<TaskId> = ring.into_iter().map(|m| m.expect("every member")).collect();
        for (i, &member) in ring.iter().enumerate() {
            let next = ring[(i + 1) % ring.len()];
            chant::send_value(member, NEXT, next).expect("tell the successor");
        }
        let start = Instant::now();
        chant::send_value(ring[0], TOKEN, 0u64).expect("start the token");
        let count: u64 = chant::recv(Source::Any, Tag::Is(TOKEN))
            .decode()
            .expect("a count");
        (start.elapsed(), count)
    });
    let hops = rounds * members as u64;
    assert_eq!(count, hops, "every hop added one");
    rt.shutdown();
    println!(
        "token_ring: {members} tasks on {locales} locales ({:?}), {rounds} rounds, {hops} hops, {:.2} us per hop",
        chant::policy(),
        took.as_secs_f64() * 1e6 / (hops + 1) as f64
    );
}
