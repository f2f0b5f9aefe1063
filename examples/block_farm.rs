//! A farm of talking tasks that filter an image block by block: the boss
//! on locale 0 cuts a `SIZE` x `SIZE` image of `f64`s into blocks of
//! `ROWS` rows and hands them out, as Chant messages carrying each block
//! as a `cantus::Bulk<f64>`, to worker tasks on the other locales, a new
//! block to each worker as soon as it sends one back. A worker smooths
//! every row of its block where the block arrived (`PASSES` passes of a
//! three-point average) and sends the block back given up
//! (`chant::send_value(boss, tag, block)`), so on shared memory the
//! block goes back in the very memory it came in and is never copied on
//! the way back. Checks the image against the same filter run here, and
//! prints the time, the bandwidth and how many blocks the boss read where
//! they arrived (`Bulk::is_in_place`: not copied out of a message).
//!
//! ```text
//! cargo run --release --example block_farm [SIZE] [ROWS] [PASSES]
//! ```
//!
//! Defaults: a 2048 x 2048 image, blocks of 64 rows (1 MiB), 4 passes, 2
//! locales with two workers each on locales 1 and up (set
//! `CANTUS_LOCALES` for more). The program starts its other locales
//! itself (copies of this process, talking through shared memory); no
//! launcher is needed.

use cantus::Bulk;
use cantus::chant::{self, Source, Tag, TaskId};
use serde::{Deserialize, Serialize};
use std::time::Instant;

/// Worker -> boss: ready for a block.
const HELLO: u32 = 1;
/// Boss -> worker: a block to filter (its index, then its values).
const BLOCK: u32 = 2;
/// Worker -> boss: a block filtered (its index, then its values).
const DONE: u32 = 3;
/// Boss -> worker: no more blocks.
const STOP: u32 = 4;

/// Workers on each locale but the boss's.
const WORKERS_PER_LOCALE: usize = 2;

/// A worker, started on its locale as a remote call.
#[derive(Serialize, Deserialize)]
struct Worker {
    boss: TaskId,
    width: usize,
    passes: usize,
}

impl cantus::Remote for Worker {
    type Output = ();
    fn run(self) {
        chant::send(self.boss, HELLO, &[]).expect("hello");
        loop {
            let m = chant::recv(Source::Task(self.boss), Tag::Any);
            if m.tag() == STOP {
                return;
            }
            // Decoded whole: the block is read where it arrived.
            let (index, mut block): (u32, Bulk<f64>) = m.into_decoded().expect("a block");
            for row in block.chunks_exact_mut(self.width) {
                smooth(row, self.passes);
            }
            // Given up (not `&block`): back in the memory it came in.
            chant::send_value(self.boss, DONE, (index, block)).expect("send the block back");
        }
    }
}

cantus::remote!(Worker);

/// `passes` passes of a three-point average over `row`, its ends kept.
fn smooth(row: &mut [f64], passes: usize) {
    if row.len() < 3 {
        return;
    }
    for _ in 0..passes {
        let mut before = row[0];
        for i in 1..row.len() - 1 {
            let here = row[i];
            row[i] = (before + here + row[i + 1]) / 3.0;
            before = here;
        }
    }
}

/// The image's value at (`r`, `c`): a pattern with detail to smooth.
fn pixel(r: usize, c: usize) -> f64 {
    ((r * 31 + c * 17) % 97) as f64 + ((r ^ c) & 7) as f64 * 0.5
}

fn arg(n: usize, default: usize, what: &str) -> usize {
    match std::env::args().nth(n) {
        None => default,
        Some(a) => a.parse().ok().filter(|&v| v > 0).unwrap_or_else(|| {
            eprintln!(
                "usage: block_farm [SIZE] [ROWS] [PASSES] ({what} must be a positive integer)"
            );
            std::process::exit(2)
        }),
    }
}

fn main() {
    let size = arg(1, 2048, "SIZE");
    let rows = arg(2, 64, "ROWS").min(size);
    let passes = arg(3, 4, "PASSES");
    let rt = cantus::Runtime::builder()
        .default_locales(2)
        .build()
        .unwrap_or_else(|e| {
            eprintln!("block_farm: {e}");
            std::process::exit(1)
        });
    let locales = cantus::num_locales();
    let image: Vec<f64> = (0..size * size)
        .map(|i| pixel(i / size, i % size))
        .collect();
    let blocks = size.div_ceil(rows);
    let (took, filtered, in_place, workers) = rt.block_on(|| {
        let boss = chant::me();
        // On one locale the boss's own locale works (no remote block).
        let workers = (1..locales.max(2))
            .flat_map(|l| std::iter::repeat_n(l % locales, WORKERS_PER_LOCALE))
            .collect::<Vec<_>>();
        for &l in &workers {
            let w = Worker {
                boss,
                width: size,
                passes,
            };
            cantus::begin_on(l, w).expect("start a worker");
        }
        let start = Instant::now();
        let mut out = vec![0.0; size * size];
        // Each worker says hello, then sends back each block it is given;
        // it is stopped when it comes back with no block left to give.
        let (mut next, mut done, mut stopped, mut in_place) = (0, 0, 0, 0);
        while stopped < workers.len() {
            let m = chant::recv(Source::Any, Tag::Any);
            let worker = m.source();
            if m.tag() == DONE {
                let (index, block): (u32, Bulk<f64>) = m.into_decoded().expect("a block");
                let at = index as usize * rows * size;
                out[at..at + block.len()].copy_from_slice(&block);
                in_place += usize::from(block.is_in_place());
                done += 1;
            }
            if next < blocks {
                let rows_here = rows.min(size - next * rows);
                let at = next * rows * size;
                let block = Bulk::from(image[at..at + rows_here * size].to_vec());
                chant::send_value(worker, BLOCK, (next as u32, block)).expect("send a block");
                next += 1;
            } else {
                chant::send(worker, STOP, &[]).expect("stop a worker");
                stopped += 1;
            }
        }
        assert_eq!(done, blocks, "every block came back");
        (start.elapsed(), out, in_place, workers.len())
    });
    rt.shutdown();
    // The same filter, here.
    let mut want = image;
    for row in want.chunks_exact_mut(size) {
        smooth(row, passes);
    }
    assert!(filtered == want, "every block came back filtered");
    let bytes = 2.0 * (size * size * 8) as f64;
    println!(
        "block_farm: {size} x {size} image, {blocks} blocks of {rows} rows, {passes} passes, \
         {workers} workers on {locales} locales: {:.2} ms, {:.2} GB/s both ways, \
         {in_place} of {blocks} blocks read in place",
        took.as_secs_f64() * 1e3,
        bytes / took.as_secs_f64() / 1e9
    );
}
