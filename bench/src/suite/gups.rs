//! HPCC RandomAccess (GUPS; seed 000, section 7.4): `4 * size` updates
//! `table[ran & (size - 1)] ^= ran` of a table of 64-bit words, with `ran`
//! HPCC's update stream: each value is the previous one times `x` in
//! GF(2)\[x\] modulo `x^64 + x^2 + x + 1` (shift left, XOR in [`POLY`] when
//! the top bit falls off), starting from 1.
//!
//! The updates are racy read-XOR-writes, as in HPCC: two workers updating
//! one word at once may lose an update (relaxed atomic loads and stores,
//! which compile to the plain `mov`s of the C code). A forall over the
//! update indices gives each piece of the loop its block; a piece finds
//! the stream value at its first index with [`starts`] (a power of `x`)
//! and carries it from block to block while it runs on.
//!
//! Verification, HPCC's: run the same updates again serially (XOR undoes
//! them), then count the words that differ from their index; at most 1%
//! of the table may be in error.

use super::report::{Row, Value};
use super::{Ctx, Sched, turns};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

/// Feedback of the update stream's polynomial.
pub(crate) const POLY: u64 = 0x7;
/// The period of the update stream (HPCC's `PERIOD`).
pub(crate) const PERIOD: i64 = 1_317_624_576_693_539_401;
/// log2 of the table size in words: 2^24 words are 128 MiB, four times
/// the 32 MiB L3 of the reference machine (HPCC sizes the table to half
/// the memory; four times the cache keeps a repetition near a second).
const LOG2_FULL: u32 = 24;
/// With `--quick`: 32 MiB.
const LOG2_QUICK: u32 = 22;
/// Chunk size of the dynamic schedule.
const DYNAMIC_CHUNK: usize = 1 << 16;
/// Most table words in error HPCC accepts, as a fraction of the table.
pub(crate) const MAX_ERROR_FRACTION: f64 = 0.01;
/// The target: GUPS at least OpenMP's.
const TARGET: f64 = 1.0;

/// The next value of the update stream.
#[inline(always)]
pub(crate) fn next(r: u64) -> u64 {
    (r << 1) ^ if (r as i64) < 0 { POLY } else { 0 }
}

/// `a * b` modulo the stream's polynomial (Horner's rule over b's bits).
fn mulmod(a: u64, b: u64) -> u64 {
    (0..64)
        .rev()
        .fold(0, |r, i| next(r) ^ if (b >> i) & 1 == 1 { a } else { 0 })
}

/// `x^n` modulo the polynomial, by squaring.
fn pow_x(mut n: u64) -> u64 {
    let (mut r, mut p) = (1u64, 2u64);
    while n > 0 {
        if n & 1 == 1 {
            r = mulmod(r, p);
        }
        p = mulmod(p, p);
        n >>= 1;
    }
    r
}

/// The `n`-th value of the update stream (the 0-th is 1).
pub(crate) fn starts(n: i64) -> u64 {
    pow_x(n.rem_euclid(PERIOD) as u64)
}

/// The table.
pub(crate) struct Table {
    words: Vec<AtomicU64>,
    mask: u64,
}

impl Table {
    /// A table of `2^log2` words, zero and not yet touched: as in the C
    /// peer, the first [`reset`](Table::reset) (in parallel) places the
    /// pages.
    pub(crate) fn new(log2: u32) -> Table {
        const _: () = assert!(
            std::mem::size_of::<AtomicU64>() == std::mem::size_of::<u64>()
                && std::mem::align_of::<AtomicU64>() == std::mem::align_of::<u64>()
        );
        let size = 1usize << log2;
        // Zeroed memory from the allocator (fresh pages for a large table).
        let mut zeros = std::mem::ManuallyDrop::new(vec![0u64; size]);
        let (ptr, len, cap) = (zeros.as_mut_ptr(), zeros.len(), zeros.capacity());
        // SAFETY: AtomicU64 has the same size, alignment and in-memory
        // representation as u64 (checked above), so the allocation is a
        // valid Vec<AtomicU64> of the same length and capacity; `zeros` is
        // never dropped, so the allocation has one owner.
        let words = unsafe { Vec::from_raw_parts(ptr.cast::<AtomicU64>(), len, cap) };
        Table {
            words,
            mask: size as u64 - 1,
        }
    }

    pub(crate) fn size(&self) -> usize {
        self.words.len()
    }

    /// The updates of a run.
    pub(crate) fn updates(&self) -> usize {
        4 * self.size()
    }

    /// Every word back to its index, in parallel.
    pub(crate) fn reset(&self, sched: Sched) {
        sched
            .forall(0..self.size(), DYNAMIC_CHUNK)
            .for_each_range(|r| {
                for (w, i) in self.words[r.clone()].iter().zip(r) {
                    w.store(i as u64, Ordering::Relaxed);
                }
            });
    }

    /// Updates `lo..hi` of the stream, starting from stream value `ran`
    /// (the value before update `lo`); returns the last value.
    #[inline]
    fn apply(&self, mut ran: u64, lo: usize, hi: usize) -> u64 {
        let words = &self.words[..=self.mask as usize];
        for _ in lo..hi {
            ran = next(ran);
            let w = &words[(ran & self.mask) as usize];
            // A racy read-xor-write, as HPCC: relaxed, not an atomic RMW.
            w.store(w.load(Ordering::Relaxed) ^ ran, Ordering::Relaxed);
        }
        ran
    }

    /// Every update, as one forall over the update indices.
    pub(crate) fn update(&self, sched: Sched) {
        sched.forall(0..self.updates(), DYNAMIC_CHUNK).fold_reduce(
            || None,
            |carry: Option<(usize, u64)>, r| {
                // Carry the stream on when this block continues the last.
                let ran = match carry {
                    Some((end, ran)) if end == r.start => ran,
                    _ => starts(r.start as i64),
                };
                Some((r.end, self.apply(ran, r.start, r.end)))
            },
            |_, b| b,
        );
    }

    /// HPCC's verification: undoes the updates serially and counts the
    /// words that are not their index. Leaves the table reset (except for
    /// the errors).
    pub(crate) fn verify(&self) -> Result<u64, String> {
        self.apply(starts(0), 0, self.updates());
        let errors = self
            .words
            .iter()
            .enumerate()
            .filter(|&(i, w)| w.load(Ordering::Relaxed) != i as u64)
            .count() as u64;
        if errors as f64 > MAX_ERROR_FRACTION * self.size() as f64 {
            return Err(format!(
                "gups: {errors} of {} table words in error (more than {}%)",
                self.size(),
                MAX_ERROR_FRACTION * 100.0
            ));
        }
        Ok(errors)
    }
}

/// Benchmarks RandomAccess under every schedule.
pub(crate) fn run(ctx: &mut Ctx) {
    if !ctx.selected("gups.") {
        return;
    }
    let log2 = if ctx.quick { LOG2_QUICK } else { LOG2_FULL };
    let scheds = ctx.schedules.clone();
    let table = Table::new(log2);
    let updates = table.updates();
    let args: Vec<String> = vec!["gups".into(), log2.to_string(), "1".into()];
    let mut omp = Vec::new();
    let mut cantus: Vec<Vec<f64>> = vec![Vec::new(); scheds.len()];
    let (mut omp_errors, mut cantus_errors) = (0u64, 0u64);
    let mut errors = Vec::new();
    for rep in 0..ctx.reps {
        ctx.progress(&format!(
            "gups: rep {}/{} (2^{log2} words, {updates} updates)",
            rep + 1,
            ctx.reps
        ));
        for peer_turn in turns(rep) {
            if peer_turn {
                if let Some(peer) = &ctx.peer {
                    match peer.run(&args) {
                        Ok(r) => {
                            omp.extend(r.times_of("update"));
                            let worst = r.errors.iter().map(|e| e.0).max().unwrap_or(0);
                            omp_errors = omp_errors.max(worst);
                        }
                        Err(e) => errors.push(e),
                    }
                }
                continue;
            }
            for (si, &s) in scheds.iter().enumerate() {
                table.reset(s);
                // From the main thread, as the HPCC Chapel program runs it.
                let t = Instant::now();
                table.update(s);
                cantus[si].push(t.elapsed().as_secs_f64());
                match table.verify() {
                    Ok(e) => cantus_errors = cantus_errors.max(e),
                    Err(e) => errors.push(e),
                }
            }
        }
    }
    for e in errors {
        ctx.fail(e);
    }
    ctx.progress(&format!(
        "gups: at most {cantus_errors} (cantus) and {omp_errors} (OpenMP) of {} words in error",
        table.size()
    ));
    for (si, &s) in scheds.iter().enumerate() {
        let row = Row {
            group: "gups",
            kernel: "update",
            size: format!("2^{log2}"),
            n: table.size(),
            sched: s,
            base: "gups".into(),
            name: ctx.name("gups", s),
            trials: 1,
            value: Value::Rate {
                work: updates as f64 / 1e9,
                unit: "GUP/s",
            },
            cantus: std::mem::take(&mut cantus[si]),
            openmp: omp.clone(),
            target: Some(TARGET),
            serial: None,
        };
        ctx.record(row);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::suite::tests::rt;

    #[test]
    fn starts_is_the_stream_stepped_n_times() {
        let mut r = 1u64;
        for n in 0..2000 {
            assert_eq!(starts(n), r, "n = {n}");
            r = next(r);
        }
        for (a, b) in [(12_345, 678_901), (1 << 40, 3), (PERIOD - 5, 7)] {
            assert_eq!(starts(a + b), mulmod(starts(a), starts(b)));
        }
        assert_eq!(starts(-1), starts(PERIOD - 1));
        assert_eq!(next(starts(-1)), 1);
    }

    #[test]
    fn the_stream_has_period_period() {
        assert_eq!(pow_x(PERIOD as u64), 1);
        assert_ne!(pow_x(PERIOD as u64 / 3), 1);
    }

    #[test]
    fn updates_verify_under_every_schedule() {
        // Updates race (a relaxed read-xor-write, as HPCC allows), so the
        // table must be large enough for the lost ones to stay under
        // HPCC's 1%. Measured here with 2 workers, run alone: 2^12 words
        // failed 8 runs in 10 (before this session's changes too), 2^16
        // 6 in 30 (about 1.0-1.6% of words lost), 2^20 none in 30. With
        // atomic updates instead, 2^16 verified exactly in 15 runs of 15.
        for s in Sched::ALL {
            let t = Table::new(20);
            rt().block_on(|| {
                t.reset(s);
                t.update(s)
            });
            assert!(
                t.words
                    .iter()
                    .enumerate()
                    .any(|(i, w)| w.load(Ordering::Relaxed) != i as u64)
            );
            let v = t.verify();
            assert!(v.is_ok(), "{s:?}: {v:?}");
        }
    }

    #[test]
    fn verification_catches_missing_or_wrong_updates() {
        let fresh = || {
            let t = Table::new(12);
            rt().block_on(|| t.reset(Sched::Static));
            t
        };
        // Too few updates.
        let t = fresh();
        rt().block_on(|| t.apply(starts(0), 0, t.updates() - t.updates() / 16));
        assert!(t.verify().is_err());
        // Blocks that each start the stream from the beginning (a wrong
        // start per piece). A stream merely shifted by a few places is not
        // caught: XOR commutes, so all but the ends cancel, as in HPCC.
        let t = fresh();
        for lo in (0..t.updates()).step_by(1024) {
            t.apply(starts(0), lo, lo + 1024);
        }
        assert!(t.verify().is_err());
        // Right updates, then 2% of the words corrupted.
        let t = fresh();
        t.apply(starts(0), 0, t.updates());
        for w in t.words.iter().take(t.size() / 50) {
            w.fetch_xor(1, Ordering::Relaxed);
        }
        assert!(t.verify().is_err());
    }
}
