//! Collectives that exchange data between every pair of locales:
//! [`all_gather`], [`all_gather_v`], [`all_to_all`], [`all_to_all_v`],
//! [`scan`], [`exclusive_scan`] (MPI's `MPI_Allgather(v)`,
//! `MPI_Alltoall(v)`, `MPI_Scan`, `MPI_Exscan`; OpenSHMEM's `fcollect`
//! and `alltoall`). They travel as messages between the SPMD bodies
//! (`mailbox.rs`) on a channel of their own, each tagged with its
//! number among this group's exchanges, which every locale counts alike;
//! every part carries its call's signature, so locales that called
//! different exchanges are told alike. Where the memory makes its
//! collectives with the transport's (MPI over several nodes), an exchange
//! is one `MPI_Ialltoallw` instead (`Memory::exchange`). `README.md`
//! beside this file, "Exchanges".

use super::collective::{Collective, mismatch};
use super::mailbox::{Buffer, Channel, Gone, send_message, take};
use super::memory::{
    ALL_GATHER, ALL_GATHER_V, ALL_TO_ALL, ALL_TO_ALL_V, EXCLUSIVE_SCAN, SCAN, Signature, agree,
    body_gone,
};
use crate::error::Locales;
use bytemuck::Pod;
use std::sync::Mutex;

/// (epoch, the number of the next exchange in it) on this locale.
static NEXT: Mutex<(u64, u64)> = Mutex::new((0, 0));

fn next_seq(epoch: u64) -> u64 {
    let mut n = NEXT.lock().unwrap();
    if n.0 != epoch {
        *n = (epoch, 0);
    }
    n.1 += 1;
    n.1
}

/// A locale's part for this one, as an exchange hands it on.
enum Part<'a> {
    /// This locale's own, in the caller's slice.
    Own(&'a [u8]),
    /// Another locale's, in a buffer aligned for the elements.
    Received(Buffer),
}

impl Part<'_> {
    fn bytes(&self) -> &[u8] {
        match self {
            Part::Own(b) => b,
            Part::Received(b) => b.bytes(),
        }
    }

    /// The elements (another locale's taken over without a copy).
    fn into_vec<T: Pod>(self) -> Vec<T> {
        match self {
            // Through an aligned buffer: a large one asks for huge pages.
            Part::Own(b) => Buffer::from_bytes(b, align_of::<T>())
                .and_then(Buffer::into_vec)
                .unwrap_or_else(|| bytemuck::cast_slice(b).to_vec()),
            Part::Received(b) => b
                .into_vec()
                .expect("a whole number of T (the signature matched)"),
        }
    }
}

/// Runs one exchange as `call`: sends `part(l)` to every other locale
/// `l`, and hands every locale's part for this one (its own included)
/// to `into`, in locale order. Panics, alike on every locale, if the
/// locales' signatures differ; with a body gone, naming it.
fn exchange<'a, T: Pod>(
    call: &str,
    kind: u64,
    count: usize,
    part: impl Fn(usize) -> &'a [T],
    mut into: impl FnMut(usize, Part<'a>),
) {
    let c = Collective::enter(call).unwrap_or_else(|e| panic!("{e}"));
    let s = &c.space;
    let (here, n) = (s.here, s.locales);
    let (_, epoch) = s
        .memory
        .running_group()
        .expect("a collective runs inside an SPMD group");
    let seq = next_seq(epoch);
    let sig: Signature = [kind, size_of::<T>() as u64, count as u64];
    let bytes_of = |l: usize| -> &'a [u8] { bytemuck::cast_slice(part(l)) };
    if let Some(got) = s.memory.exchange(sig, align_of::<T>(), &bytes_of) {
        // The transport's own collective (`Memory::exchange`).
        let got = got.unwrap_or_else(|m| panic!("{}", mismatch(call, m)));
        for (from, bytes) in got.into_iter().enumerate() {
            if from == here {
                into(here, Part::Own(bytes_of(here)));
            } else {
                into(from, Part::Received(Buffer::adopt(bytes)));
            }
        }
        return;
    }
    // Each locale sends to its right neighbours first, so that no locale
    // is everyone's first target.
    for k in 1..n {
        let to = (here + k) % n;
        let bytes: &[u8] = bytemuck::cast_slice(part(to));
        let channel = (Channel::Collective, seq, sig);
        if let Err(e) = send_message(s, epoch, to, channel, bytes, align_of::<T>()) {
            panic!("cantus::{call}: locale {here} could not send its part to locale {to}: {e}");
        }
    }
    let mut sigs = vec![sig; n];
    // Once a part disagrees, no more go to `into` (this locale panics
    // below, as every other does).
    let mut agreed = true;
    for (from, seen) in sigs.iter_mut().enumerate() {
        if from == here {
            if agreed {
                into(here, Part::Own(bytemuck::cast_slice(part(here))));
            }
            continue;
        }
        match take(here, epoch, from, (Channel::Collective, seq), |_| Ok(())) {
            Ok(Ok(m)) => {
                *seen = m.signature;
                let whole = m.buffer.bytes().len() % size_of::<T>().max(1) == 0;
                agreed &= m.signature == sig && whole;
                if agreed {
                    into(from, Part::Received(m.buffer));
                }
            }
            Ok(Err(_)) => unreachable!("every part is accepted"),
            Err(Gone { locale, panicked }) => body_gone(locale, panicked, here, "collective"),
        }
    }
    // Every locale has every signature: the same verdict everywhere.
    if let Err(m) = agree(n, |l| sigs[l]) {
        panic!("{}", mismatch(call, m));
    }
}

/// An exchange's `into` that appends each locale's part of `k` elements
/// to `out` (the parts come in locale order), writing its bytes once,
/// with no zero fill before.
fn into_blocks<T: Pod>(out: &mut Vec<T>, k: usize) -> impl FnMut(usize, Part<'_>) + '_ {
    move |from, part| {
        let bytes = part.bytes();
        assert!(
            out.len() == from * k && bytes.len() == k * size_of::<T>(),
            "parts come in locale order, each of {k} elements"
        );
        out.reserve(k);
        // SAFETY: `reserve` made room for `k` more elements past `len`;
        // exactly their bytes are copied there from `bytes` (a message's
        // or the caller's slice, not in `out`), so every element of the
        // new length is written, and any bytes are a valid `T` (Pod).
        unsafe {
            std::ptr::copy_nonoverlapping(
                bytes.as_ptr(),
                out.as_mut_ptr().add(out.len()).cast::<u8>(),
                bytes.len(),
            );
            out.set_len(out.len() + k);
        }
    }
}

/// Every locale's `mine`, concatenated in locale order, on every locale
/// (`MPI_Allgather`). Every locale passes as many elements.
///
/// A collective: call it from the SPMD body on every locale
/// ([`spmd`](super::spmd)), in the same order as the other collectives.
/// The parts travel as messages straight to every locale
/// (`num_locales() - 1` each way per locale).
///
/// ```
/// use cantus::pgas;
///
/// cantus::remote_fn! {
///     fn everyone() -> Vec<u32> {
///         let me = cantus::here() as u32;
///         pgas::all_gather(&[me, me * 10])
///     }
/// }
///
/// let all = cantus::run(|| pgas::spmd(everyone()).unwrap()).unwrap();
/// let n = all.len() as u32;
/// let want: Vec<u32> = (0..n).flat_map(|l| [l, l * 10]).collect();
/// assert!(all.iter().all(|v| *v == want));
/// ```
///
/// # Panics
///
/// On every locale alike if the locales passed different lengths or
/// called different collectives; if called outside an SPMD body; naming
/// the locale whose body ended (or panicked) before it took part.
#[track_caller]
pub fn all_gather<T: Pod>(mine: &[T]) -> Vec<T> {
    gathered("pgas::all_gather", ALL_GATHER, mine)
}

/// An all-gather made as `call`, of kind `kind` (an all-gather's or a
/// scan's, which gathers one value from each locale).
fn gathered<T: Pod>(call: &str, kind: u64, mine: &[T]) -> Vec<T> {
    let k = mine.len();
    let mut out = Vec::with_capacity(crate::remote::num_locales() * k);
    exchange(call, kind, k, |_| mine, into_blocks(&mut out, k));
    out
}

/// Every locale's `mine`, of any length, on every locale, one vector
/// per locale in locale order (`MPI_Allgatherv`).
///
/// # Panics
///
/// As [`all_gather`] (the lengths may differ).
#[track_caller]
pub fn all_gather_v<T: Pod>(mine: &[T]) -> Vec<Vec<T>> {
    let mut out = vec![Vec::new(); crate::remote::num_locales()];
    exchange(
        "pgas::all_gather_v",
        ALL_GATHER_V,
        0,
        |_| mine,
        |from, part| out[from] = part.into_vec(),
    );
    out
}

/// Sends block `l` of `send` to locale `l` and returns the blocks every
/// locale sent this one, in locale order (`MPI_Alltoall`): `send` holds
/// `num_locales()` blocks of equal length, and so does the result.
///
/// # Panics
///
/// If `send`'s length is not a multiple of `num_locales()`; on every
/// locale alike if the locales' blocks differ in length; otherwise as
/// [`all_gather`].
#[track_caller]
pub fn all_to_all<T: Pod>(send: &[T]) -> Vec<T> {
    let n = crate::remote::num_locales();
    assert!(
        send.len() % n == 0,
        "cantus::pgas::all_to_all: {} elements are not one block per locale ({})",
        send.len(),
        Locales(n)
    );
    let k = send.len() / n;
    let mut out = Vec::with_capacity(send.len());
    exchange(
        "pgas::all_to_all",
        ALL_TO_ALL,
        k,
        |to| &send[to * k..(to + 1) * k],
        into_blocks(&mut out, k),
    );
    out
}

/// Sends `parts[l]` (of any length) to locale `l` and returns the parts
/// every locale sent this one, in locale order (`MPI_Alltoallv`, the
/// counts travelling with the data).
///
/// ```
/// use cantus::pgas;
///
/// cantus::remote_fn! {
///     /// Sorts numbers into buckets by owner: locale l gets those
///     /// with `x % n == l`.
///     fn buckets(xs: Vec<u64>) -> Vec<u64> {
///         let n = cantus::num_locales();
///         let mut parts = vec![Vec::new(); n];
///         for x in xs {
///             parts[(x % n as u64) as usize].push(x);
///         }
///         pgas::all_to_all_v(&parts).concat()
///     }
/// }
///
/// let got = cantus::run(|| pgas::spmd(buckets((0..100).collect())).unwrap()).unwrap();
/// let n = got.len() as u64;
/// for (l, mine) in got.iter().enumerate() {
///     assert!(mine.iter().all(|x| x % n == l as u64));
///     assert_eq!(mine.len() as u64, n * (0..100).filter(|x| x % n == l as u64).count() as u64);
/// }
/// ```
///
/// # Panics
///
/// If `parts` does not hold one part per locale; otherwise as
/// [`all_gather`].
#[track_caller]
pub fn all_to_all_v<T: Pod, P: AsRef<[T]>>(parts: &[P]) -> Vec<Vec<T>> {
    let n = crate::remote::num_locales();
    assert!(
        parts.len() == n,
        "cantus::pgas::all_to_all_v: {} parts for {}",
        parts.len(),
        Locales(n)
    );
    let mut out = vec![Vec::new(); n];
    exchange(
        "pgas::all_to_all_v",
        ALL_TO_ALL_V,
        0,
        |to| parts[to].as_ref(),
        |from, part| out[from] = part.into_vec(),
    );
    out
}

/// The inclusive prefix of the locales' values: on locale `l`,
/// `op(...op(op(v0, v1), v2)..., vl)` (`MPI_Scan`), folded in locale
/// order, so floats give the same bits however the job is placed.
///
/// # Panics
///
/// As [`all_gather`].
#[track_caller]
pub fn scan<T: Pod>(value: T, op: impl Fn(T, T) -> T) -> T {
    let here = crate::remote::here();
    gathered("pgas::scan", SCAN, &[value])
        .into_iter()
        .take(here + 1)
        .reduce(op)
        .expect("a locale's own value is there")
}

/// The exclusive prefix: on locale `l > 0`, the fold of the values of
/// locales `0..l` (`MPI_Exscan`); `None` on locale 0.
///
/// # Panics
///
/// As [`all_gather`].
#[track_caller]
pub fn exclusive_scan<T: Pod>(value: T, op: impl Fn(T, T) -> T) -> Option<T> {
    let here = crate::remote::here();
    gathered("pgas::exclusive_scan", EXCLUSIVE_SCAN, &[value])
        .into_iter()
        .take(here)
        .reduce(op)
}
