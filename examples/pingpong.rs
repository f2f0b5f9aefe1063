//! Ping-pong between two locales: locale 0 sends a remote call to locale
//! 1, which answers; prints the round-trip time.
//!
//! ```text
//! cargo run --release --example pingpong [ROUNDS]
//! ```
//!
//! The program starts its second locale itself (a copy of this process,
//! talking through shared memory); no launcher is needed.

use serde::{Deserialize, Serialize};
use std::time::Instant;

/// The ball: locale 1 hands it back one higher, with its locale number.
#[derive(Serialize, Deserialize)]
struct Ping(u64);

impl cantus::Remote for Ping {
    type Output = (u64, usize);
    fn run(self) -> (u64, usize) {
        (self.0 + 1, cantus::here())
    }
}
cantus::remote!(Ping);

fn main() {
    let rounds: u64 = match std::env::args().nth(1) {
        None => 100_000,
        Some(a) => a.parse().unwrap_or_else(|_| {
            eprintln!("usage: pingpong [ROUNDS] (a positive integer)");
            std::process::exit(2)
        }),
    };
    let rt = cantus::Runtime::builder()
        .default_locales(2)
        .build()
        .unwrap_or_else(|e| {
            eprintln!("pingpong: {e}");
            std::process::exit(1)
        });
    let (took, last) = rt.block_on(|| {
        for i in 0..rounds.min(1000) {
            let (v, _) = cantus::on(1, Ping(i)).join().expect("warm-up ping");
            assert_eq!(v, i + 1);
        }
        let start = Instant::now();
        let mut ball = 0;
        for _ in 0..rounds {
            let (v, from) = cantus::on(1, Ping(ball)).join().expect("ping");
            assert_eq!(from, 1, "the answer comes from locale 1");
            ball = v;
        }
        (start.elapsed(), ball)
    });
    assert_eq!(last, rounds, "every round trip added one");
    rt.shutdown();
    println!(
        "pingpong: {rounds} round trips between locales 0 and 1, {:.2} us each",
        took.as_secs_f64() * 1e6 / rounds as f64
    );
}
