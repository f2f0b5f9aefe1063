//! RandomAccess (HPCC GUPS) across locales, two ways:
//!
//! - **RA-on**: every update is a detached remote call to the locale that
//!   owns the table entry (seed 002's "RA-on": one active message per
//!   update);
//! - **aggregated**: each locale buffers its updates per destination and
//!   sends them in batches of `BATCH`.
//!
//! The table is block-distributed: locale `l` owns entries
//! `l * part .. (l + 1) * part`. Each locale generates its share of the
//! HPCC update stream and applies local updates directly. Updates are
//! atomic XORs, so the result is exact; it is checked against a serial
//! run of the same stream, entry by entry.
//!
//! ```text
//! cargo run --release --example random_access [LOG2_TABLE] [LOCALES]
//! ```

use serde::{Deserialize, Serialize};
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

const POLY: u64 = 0x7;
const PERIOD: i64 = 1_317_624_576_693_539_401;
const BATCH: usize = 1024;
const DUMP: u64 = 2048;

/// This locale's part of the table, and its size.
static TABLE: OnceLock<Vec<AtomicU64>> = OnceLock::new();
/// Updates applied on this locale (local and remote).
static APPLIED: AtomicU64 = AtomicU64::new(0);

/// The `n`-th number of HPCC's update stream.
fn hpcc_start(mut n: i64) -> u64 {
    while n < 0 {
        n += PERIOD;
    }
    while n > PERIOD {
        n -= PERIOD;
    }
    if n == 0 {
        return 1;
    }
    let mut m2 = [0u64; 64];
    let mut temp = 1u64;
    for m in m2.iter_mut() {
        *m = temp;
        temp = (temp << 1) ^ if (temp as i64) < 0 { POLY } else { 0 };
        temp = (temp << 1) ^ if (temp as i64) < 0 { POLY } else { 0 };
    }
    let mut i = 62;
    while i >= 0 && (n >> i) & 1 == 0 {
        i -= 1;
    }
    let mut ran = 2u64;
    while i > 0 {
        temp = 0;
        for (j, m) in m2.iter().enumerate() {
            if (ran >> j) & 1 == 1 {
                temp ^= m;
            }
        }
        ran = temp;
        i -= 1;
        if (n >> i) & 1 == 1 {
            ran = (ran << 1) ^ if (ran as i64) < 0 { POLY } else { 0 };
        }
    }
    ran
}

fn next(ran: u64) -> u64 {
    (ran << 1) ^ if (ran as i64) < 0 { POLY } else { 0 }
}

/// The job's shape, the same on every locale.
#[derive(Serialize, Deserialize, Clone, Copy)]
struct Shape {
    log_table: u32,
    locales: usize,
}

impl Shape {
    fn size(self) -> u64 {
        1 << self.log_table
    }
    fn part(self) -> u64 {
        self.size() / self.locales as u64
    }
    fn owner(self, index: u64) -> usize {
        (index / self.part()) as usize
    }
    fn updates(self) -> u64 {
        4 * self.size()
    }
}

fn apply(shape: Shape, index: u64, value: u64) {
    let table = TABLE.get().expect("the table was set up");
    table[(index % shape.part()) as usize].fetch_xor(value, Ordering::Relaxed);
    APPLIED.fetch_add(1, Ordering::Relaxed);
}

/// Sets up this locale's part: entry i holds its global index.
#[derive(Serialize, Deserialize)]
struct Init(Shape);
impl cantus::Remote for Init {
    type Output = ();
    fn run(self) {
        let first = cantus::here() as u64 * self.0.part();
        let part = (0..self.0.part())
            .map(|i| AtomicU64::new(first + i))
            .collect();
        TABLE.set(part).expect("Init runs once per locale");
    }
}

/// One update, sent to the owner of its entry (RA-on).
#[derive(Serialize, Deserialize)]
struct Update {
    shape: Shape,
    index: u64,
    value: u64,
}
impl cantus::Remote for Update {
    type Output = ();
    fn run(self) {
        apply(self.shape, self.index, self.value);
    }
}

/// A batch of updates for the receiving locale (aggregated).
#[derive(Serialize, Deserialize)]
struct Batch(Shape, Vec<u64>);
impl cantus::Remote for Batch {
    type Output = ();
    fn run(self) {
        for v in self.1 {
            apply(self.0, v & (self.0.size() - 1), v);
        }
    }
}

/// Generates this locale's share of the stream and sends every update.
#[derive(Serialize, Deserialize)]
struct Generate {
    shape: Shape,
    aggregate: bool,
}
impl cantus::Remote for Generate {
    type Output = ();
    fn run(self) {
        let s = self.shape;
        let here = cantus::here();
        let per = s.updates() / s.locales as u64;
        let mut ran = hpcc_start((here as u64 * per) as i64);
        let mut buffers: Vec<Vec<u64>> = vec![Vec::with_capacity(BATCH); s.locales];
        for _ in 0..per {
            ran = next(ran);
            let index = ran & (s.size() - 1);
            let to = s.owner(index);
            if to == here {
                apply(s, index, ran);
            } else if self.aggregate {
                buffers[to].push(ran);
                if buffers[to].len() == BATCH {
                    let batch = std::mem::replace(&mut buffers[to], Vec::with_capacity(BATCH));
                    cantus::begin_on(to, Batch(s, batch)).expect("the owner is there");
                }
            } else {
                cantus::begin_on(
                    to,
                    Update {
                        shape: s,
                        index,
                        value: ran,
                    },
                )
                .expect("the owner is there");
            }
        }
        for (to, rest) in buffers.into_iter().enumerate() {
            if !rest.is_empty() {
                cantus::begin_on(to, Batch(s, rest)).expect("the owner is there");
            }
        }
    }
}

/// Updates applied on this locale so far.
#[derive(Serialize, Deserialize)]
struct Applied;
impl cantus::Remote for Applied {
    type Output = u64;
    fn run(self) -> u64 {
        APPLIED.load(Ordering::Relaxed)
    }
}

/// Entries `from..from + len` of this locale's part.
#[derive(Serialize, Deserialize)]
struct Dump {
    from: u64,
    len: u64,
}
impl cantus::Remote for Dump {
    type Output = Vec<u64>;
    fn run(self) -> Vec<u64> {
        let table = TABLE.get().expect("the table was set up");
        (self.from..self.from + self.len)
            .map(|i| table[i as usize].load(Ordering::Relaxed))
            .collect()
    }
}

cantus::remote!(Init, Update, Batch, Generate, Applied, Dump);

/// Runs the updates in one mode; returns seconds taken.
fn run(shape: Shape, aggregate: bool, rounds_before: u64) -> f64 {
    let start = Instant::now();
    cantus::coforall_locales(|_| Generate { shape, aggregate }).expect("every locale generates");
    // Detached updates may still be on their way: wait until all landed.
    let want = rounds_before + shape.updates();
    loop {
        let done: u64 = cantus::coforall_locales(|_| Applied).unwrap().iter().sum();
        if done == want {
            break;
        }
        assert!(
            done < want,
            "{done} updates applied, more than the {want} sent"
        );
        cantus::task::yield_now();
    }
    start.elapsed().as_secs_f64()
}

fn main() {
    let mut args = std::env::args().skip(1);
    let log_table: u32 = args
        .next()
        .map_or(18, |a| a.parse().expect("LOG2_TABLE: an integer"));
    let locales: usize = args
        .next()
        .map_or(2, |a| a.parse().expect("LOCALES: an integer"));
    assert!(
        (4..=30).contains(&log_table),
        "LOG2_TABLE must be from 4 to 30"
    );
    assert!(
        locales.is_power_of_two(),
        "LOCALES must be a power of two (the table splits evenly)"
    );
    let rt = cantus::Runtime::builder()
        .default_locales(locales)
        .build()
        .unwrap_or_else(|e| {
            eprintln!("random_access: {e}");
            std::process::exit(1)
        });
    // The job's own count: an MPI launcher's, or the one asked for.
    let locales = cantus::num_locales();
    assert!(
        locales.is_power_of_two(),
        "the job's {locales} locales must be a power of two (the table splits evenly)"
    );
    let shape = Shape { log_table, locales };
    let (t_on, t_agg, table) = rt.block_on(|| {
        cantus::coforall_locales(|_| Init(shape)).expect("every locale sets up");
        let t_on = run(shape, false, 0);
        let t_agg = run(shape, true, shape.updates());
        let mut table = Vec::with_capacity(shape.size() as usize);
        for l in 0..locales {
            let mut from = 0;
            while from < shape.part() {
                let len = DUMP.min(shape.part() - from);
                table.extend(cantus::on(l, Dump { from, len }).join().expect("dump"));
                from += len;
            }
        }
        (t_on, t_agg, table)
    });
    rt.shutdown();
    // Both passes again, serially, on one table: the result must match
    // entry by entry.
    let mut serial: Vec<u64> = (0..shape.size()).collect();
    for _ in 0..2 {
        for l in 0..locales as u64 {
            let per = shape.updates() / locales as u64;
            let mut ran = hpcc_start((l * per) as i64);
            for _ in 0..per {
                ran = next(ran);
                serial[(ran & (shape.size() - 1)) as usize] ^= ran;
            }
        }
    }
    let wrong = serial.iter().zip(&table).filter(|(a, b)| a != b).count();
    assert_eq!(wrong, 0, "{wrong} table entries differ from the serial run");
    let gups = |t: f64| shape.updates() as f64 / t / 1e9;
    println!(
        "random_access: 2^{log_table} entries on {locales} locales, {} updates each way, checked: \
         RA-on {:.4} GUPS ({:.3} s), aggregated {:.4} GUPS ({:.3} s)",
        shape.updates(),
        gups(t_on),
        t_on,
        gups(t_agg),
        t_agg
    );
}
