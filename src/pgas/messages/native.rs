//! The message memory's barrier, broadcast, reductions and exchanges as
//! collectives the transport makes itself (`comm::collective`: over MPI,
//! its non-blocking all-gather, broadcast and all-to-all), where the job
//! has them and
//! no body of the job panicked yet (`pgas/README.md`, "Collectives over
//! MPI").
//!
//! Every collective starts with an all-gather of one fixed-size record
//! per locale: its signature and, for a small value, the value itself.
//! Each locale then holds every signature and reaches the same verdict
//! as every other (the lowest locale that differs from locale 0, as the
//! trees' agreement says); a barrier ends there, a small reduction folds
//! the values it holds, a small broadcast copies the root's. A larger
//! value or broadcast is a second collective, started only after the
//! verdict, the same on every locale. So the locales always start the
//! same collectives in the same order, whatever they called, as MPI's
//! matching asks.

use super::{MessageMemory, Step, read_u64};
use crate::comm::collective::{AlignedBytes, Collectives, Pending, SendParts};
use crate::pgas::memory::{BARRIER, Mismatch, Signature, agree, wait_promptly};
use std::sync::Arc;

/// Bytes of a value that travel in the record itself.
const INLINE: usize = 40;
/// A locale's record: its signature (three u64s), then `INLINE` bytes.
const RECORD: usize = 24 + INLINE;
/// Exchanges this process made as the transport's own collective (a test
/// hook: `cantus::__test::native_exchanges`).
pub(crate) static NATIVE_EXCHANGES: std::sync::atomic::AtomicU64 =
    std::sync::atomic::AtomicU64::new(0);
/// How often a wait polls the transport (every this many looks; the
/// others only move the collective on).
const POLL_EVERY: u32 = 8;

impl MessageMemory {
    /// Waits for `pending`, in collective `step`, with [`looks`].
    fn wait(&self, step: &Step<'_>, coll: &dyn Collectives, pending: Arc<Pending>) -> Vec<u8> {
        self.post
            .wait_for(step.seq, self.here, || pending.take(), looks(coll))
    }

    /// Every locale's record of this collective (with `inline` bytes of
    /// this locale's, at most [`INLINE`]), once the locales agree.
    fn records(
        &self,
        step: &Step<'_>,
        coll: &dyn Collectives,
        sig: Signature,
        inline: &[u8],
    ) -> Result<Vec<u8>, Mismatch> {
        let mut record = vec![0u8; RECORD];
        for (i, word) in sig.iter().enumerate() {
            record[8 * i..8 * i + 8].copy_from_slice(&word.to_le_bytes());
        }
        record[24..24 + inline.len()].copy_from_slice(inline);
        let all = self.wait(step, coll, coll.all_gather(record));
        agree(self.locales, |l| {
            std::array::from_fn(|i| read_u64(&all[l * RECORD..], 8 * i))
        })?;
        Ok(all)
    }

    /// The inline bytes of `locale`'s record, `len` of them.
    fn inline(all: &[u8], locale: usize, len: usize) -> &[u8] {
        &all[locale * RECORD + 24..][..len]
    }

    pub(super) fn native_barrier(&self, coll: &dyn Collectives) -> Result<(), Mismatch> {
        let step = self.collective();
        self.records(&step, coll, [BARRIER, 0, 0], &[]).map(drop)
    }

    pub(super) fn native_broadcast(
        &self,
        coll: &dyn Collectives,
        sig: Signature,
        root: usize,
        bytes: &mut [u8],
    ) -> Result<(), Mismatch> {
        let step = self.collective();
        let small = bytes.len() <= INLINE;
        let mine: &[u8] = if small && self.here == root {
            bytes
        } else {
            &[]
        };
        let all = self.records(&step, coll, sig, mine)?;
        if small {
            if self.here != root {
                bytes.copy_from_slice(Self::inline(&all, root, bytes.len()));
            }
        } else {
            // Every locale agreed on the root and the length.
            let got = self.wait(&step, coll, coll.broadcast(root, bytes.to_vec()));
            bytes.copy_from_slice(&got);
        }
        Ok(())
    }

    pub(super) fn native_reduce(
        &self,
        coll: &dyn Collectives,
        sig: Signature,
        root: Option<usize>,
        value: &[u8],
        fold: &dyn Fn(&[u8]) -> Vec<u8>,
    ) -> Result<Option<Vec<u8>>, Mismatch> {
        let step = self.collective();
        let small = value.len() <= INLINE;
        let all = self.records(&step, coll, sig, if small { value } else { &[] })?;
        let values = if small {
            (0..self.locales)
                .flat_map(|l| Self::inline(&all, l, value.len()))
                .copied()
                .collect()
        } else {
            // Every locale agreed on the size.
            self.wait(&step, coll, coll.all_gather(value.to_vec()))
        };
        // Every locale folds the same values in the same order (all_reduce
        // needs the same bits everywhere); a reduce keeps the root's.
        Ok(root.is_none_or(|r| r == self.here).then(|| fold(&values)))
    }

    /// An exchange (`Memory::exchange`): the records carry the signature
    /// and, for up to five locales, this locale's part lengths for each
    /// (a second all-gather of them otherwise); then every locale knows
    /// every length, and one `MPI_Ialltoallw` moves the parts from where
    /// they lie into an allocation of its own each (no copy on either
    /// side but MPI's).
    ///
    /// Once the records are in, every locale has entered the exchange and
    /// none can leave it before its own parts moved, so the wait for the
    /// parts never gives up (MPI reads the caller's slices until then;
    /// a process that dies ends the MPI job).
    ///
    /// Counted in [`NATIVE_EXCHANGES`] (a test hook).
    pub(super) fn native_exchange<'p>(
        &self,
        coll: &dyn Collectives,
        sig: Signature,
        align: usize,
        part: &dyn Fn(usize) -> &'p [u8],
    ) -> Option<Result<Vec<AlignedBytes>, Mismatch>> {
        let (here, n) = (self.here, self.locales);
        let step = self.collective();
        let len = |l: usize| if l == here { 0 } else { part(l).len() };
        let mine: Vec<u8> = (0..n).flat_map(|l| (len(l) as u64).to_le_bytes()).collect();
        let small = mine.len() <= INLINE;
        let all = match self.records(&step, coll, sig, if small { &mine } else { &[] }) {
            Ok(all) => all,
            Err(m) => return Some(Err(m)),
        };
        let lengths: Vec<u8> = if small {
            (0..n)
                .flat_map(|l| Self::inline(&all, l, mine.len()))
                .copied()
                .collect()
        } else {
            self.wait(&step, coll, coll.all_gather(mine))
        };
        let sent = |from: usize, to: usize| read_u64(&lengths, (from * n + to) * 8) as usize;
        // MPI's counts are ints: every locale sees every length, so every
        // locale decides alike whether one call moves them all.
        if (0..n).any(|from| (0..n).any(|to| sent(from, to) > i32::MAX as usize)) {
            return None;
        }
        let send = SendParts(
            (0..n)
                .map(|to| {
                    let p = if to == here { &[][..] } else { part(to) };
                    (p.as_ptr(), p.len())
                })
                .collect(),
        );
        // Past the records every other locale waits for this one's parts
        // without a way out, so a receive buffer that cannot be had ends
        // the process (and so the MPI job), as any failed allocation
        // does, rather than a panic of this body alone.
        let recv: Vec<AlignedBytes> = (0..n)
            .map(|from| {
                let bytes = sent(from, here);
                AlignedBytes::for_receiving(bytes, align).unwrap_or_else(|| {
                    eprintln!(
                        "cantus::pgas: locale {here} could not allocate {bytes} bytes for \
                         locale {from}'s part of an exchange"
                    );
                    std::process::abort()
                })
            })
            .collect();
        // SAFETY: the parts are the caller's slices, borrowed for `'p`,
        // beyond this call; the wait below returns only with the result
        // (it has no way out but the exchange's completion).
        let pending = unsafe { coll.exchange(send, recv) };
        let mut got = None;
        wait_promptly(
            || {
                got = pending.take_parts();
                got.is_some()
            },
            looks(coll),
        );
        NATIVE_EXCHANGES.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        Some(Ok(got.expect("the exchange completed")))
    }
}

/// A wait's look at a collective in flight: moves it on itself (cheap),
/// and polls the transport every [`POLL_EVERY`]th look to serve what
/// arrives meanwhile. Returns whether anything moved.
fn looks(coll: &dyn Collectives) -> impl Fn() -> bool + '_ {
    let looks = std::cell::Cell::new(0u32);
    move || {
        looks.set(looks.get().wrapping_add(1));
        let moved = coll.progress();
        if looks.get() % POLL_EVERY == 0 {
            crate::remote::poll_once() | moved
        } else {
            moved
        }
    }
}
