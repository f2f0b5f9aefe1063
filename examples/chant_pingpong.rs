//! One-way time of a message between tasks on two locales: Chant messages
//! (`cantus::chant`) against raw remote calls (`cantus::on`, as
//! `examples/pingpong.rs`), for several message sizes. Each round trip
//! carries the message both ways; one-way time is half a round trip.
//!
//! ```text
//! cargo run --release --example chant_pingpong [ROUNDS]
//! CANTUS_CHANT_POLL=task cargo run --release --example chant_pingpong
//! ```

use cantus::chant::{self, Source, Tag, TaskId};
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::time::{Duration, Instant};

/// Chant: echoes every message to its sender until an empty one.
#[derive(Serialize, Deserialize)]
struct Echo {
    boss: TaskId,
}
impl cantus::Remote for Echo {
    type Output = ();
    fn run(self) {
        chant::send(self.boss, 0, &[]).expect("hello");
        loop {
            let m = chant::recv(Source::Task(self.boss), Tag::Any);
            if m.bytes().is_empty() {
                break;
            }
            chant::send(self.boss, m.tag(), m.bytes()).expect("echo");
        }
    }
}

/// Bytes that serde encodes as one block (a `Vec<u8>` would go byte by
/// byte), so the remote call moves its bytes as cheaply as it can.
struct Bytes(Vec<u8>);

impl Serialize for Bytes {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_bytes(&self.0)
    }
}

impl<'de> Deserialize<'de> for Bytes {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Bytes, D::Error> {
        struct Block;
        impl serde::de::Visitor<'_> for Block {
            type Value = Bytes;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("bytes")
            }
            fn visit_bytes<E>(self, v: &[u8]) -> Result<Bytes, E> {
                Ok(Bytes(v.to_vec()))
            }
            fn visit_byte_buf<E>(self, v: Vec<u8>) -> Result<Bytes, E> {
                Ok(Bytes(v))
            }
        }
        d.deserialize_byte_buf(Block)
    }
}

/// Remote call: hands its bytes back.
#[derive(Serialize, Deserialize)]
struct Bounce(Bytes);
impl cantus::Remote for Bounce {
    type Output = Bytes;
    fn run(self) -> Bytes {
        self.0
    }
}
cantus::remote!(Echo, Bounce);

const SIZES: [usize; 4] = [8, 1 << 10, 4 << 10, 16 << 10];

fn one_way(took: Duration, rounds: u64) -> f64 {
    took.as_secs_f64() * 1e6 / (2 * rounds) as f64
}

fn main() {
    let rounds: u64 = match std::env::args().nth(1) {
        None => 20_000,
        Some(a) => a.parse().unwrap_or_else(|_| {
            eprintln!("usage: chant_pingpong [ROUNDS]");
            std::process::exit(2)
        }),
    };
    let rt = cantus::Runtime::builder()
        .default_locales(2)
        .build()
        .unwrap_or_else(|e| {
            eprintln!("chant_pingpong: {e}");
            std::process::exit(1)
        });
    let rows = rt.block_on(|| {
        let boss = chant::me();
        cantus::begin_on(1, Echo { boss }).expect("start the echo");
        let echo = chant::recv(Source::Any, Tag::Is(0)).source();
        let mut rows = Vec::new();
        for size in SIZES {
            let msg = vec![7u8; size];
            for _ in 0..rounds.min(1000) {
                chant::send(echo, 1, &msg).expect("warm-up");
                chant::recv(Source::Task(echo), Tag::Is(1));
            }
            let start = Instant::now();
            for _ in 0..rounds {
                chant::send(echo, 1, &msg).expect("send");
                let back = chant::recv(Source::Task(echo), Tag::Is(1));
                debug_assert_eq!(back.bytes().len(), size);
            }
            let chant_us = one_way(start.elapsed(), rounds);
            for _ in 0..rounds.min(1000) {
                cantus::on(1, Bounce(Bytes(msg.clone())))
                    .join()
                    .expect("warm-up");
            }
            let start = Instant::now();
            for _ in 0..rounds {
                let back = cantus::on(1, Bounce(Bytes(msg.clone())))
                    .join()
                    .expect("bounce");
                debug_assert_eq!(back.0.len(), size);
            }
            rows.push((size, chant_us, one_way(start.elapsed(), rounds)));
        }
        chant::send(echo, 0, &[]).expect("stop");
        rows
    });
    rt.shutdown();
    println!(
        "chant_pingpong: {rounds} round trips per size, policy {:?}",
        chant::policy()
    );
    println!(
        "{:>8} {:>16} {:>16}",
        "bytes", "chant one-way", "remote call"
    );
    for (size, c, r) in rows {
        println!("{size:>8} {c:>13.2} us {r:>13.2} us");
    }
}
