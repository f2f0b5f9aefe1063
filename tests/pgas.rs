//! The global address space with 1 to 4 locales, on each of its two
//! memories (`CANTUS_PGAS=shared`: the shared-memory areas every locale
//! maps; `CANTUS_PGAS=messages`: remote calls to each segment's owner):
//! each test re-runs this binary as locale 0 of a job (which starts the
//! others as further copies) under a kill timeout, and runs its SPMD
//! bodies there.

mod common;

use cantus::ErrorKind;
use cantus::pgas::{self, BlockArray, GlobalPtr, HaloGrid, Signal};
use common::{is_child, run_child};
use serde::{Deserialize, Serialize};

const HEAP: usize = 1 << 20;

/// The memories every job runs on, in turn (`CANTUS_PGAS`).
const MEMORIES: [&str; 2] = ["shared", "messages"];

/// Runs `body` in a child whose job has `locales` locales, for each
/// count in `counts`, once on each memory; with the `mpi` feature, also
/// as an MPI job of that many ranks over the message memory, every rank
/// a node of its own (`inline`: MPI's collectives, every frame through
/// MPI) and, from 3 ranks, two nodes in `thread` mode (the mixed path).
fn in_jobs(test: &str, counts: &[usize], body: impl Fn(usize) + Sync) {
    in_jobs_with(test, counts, 256 << 10, &[], body);
}

/// [`in_jobs`] with task stacks of `stack` bytes (for values of a
/// megabyte passed by value).
fn in_jobs_with_stacks(test: &str, counts: &[usize], stack: usize, body: impl Fn(usize) + Sync) {
    in_jobs_with(test, counts, stack, &[], body);
}

/// [`in_jobs_with_stacks`] with `env` set for every job.
fn in_jobs_with(
    test: &str,
    counts: &[usize],
    stack: usize,
    env: &[(&str, &str)],
    body: impl Fn(usize) + Sync,
) {
    for &n in counts {
        if is_child() {
            let ranks = std::env::var("OMPI_COMM_WORLD_SIZE").ok();
            let locales = std::env::var("CANTUS_LOCALES").ok().or(ranks.clone());
            if locales == Some(n.to_string()) {
                let rt = cantus::Runtime::builder()
                    .locales(n)
                    .workers(2)
                    .heap_bytes(HEAP)
                    .stack_size(stack)
                    .build()
                    .expect("a job starts");
                rt.block_on(|| {
                    if ranks.is_some() && n > 1 {
                        // Over MPI across nodes, the collectives are MPI's own
                        // (until a body of the job panics).
                        assert_eq!(cantus::__test::pgas_collectives(), Some("transport"));
                    }
                    body(n);
                    let asked = std::env::var("CANTUS_PGAS").expect("the memory is named");
                    if let Some(used) = cantus::__test::pgas_memory() {
                        assert_eq!(used, asked, "the job used the memory it was asked for");
                    }
                });
                rt.shutdown();
            }
            continue;
        }
        for memory in MEMORIES {
            let n_text = n.to_string();
            let mut vars = vec![("CANTUS_LOCALES", n_text.as_str()), ("CANTUS_PGAS", memory)];
            vars.extend_from_slice(env);
            let (status, stderr) = run_child(test, &vars);
            assert!(
                status.success(),
                "{test} with CANTUS_LOCALES={n} CANTUS_PGAS={memory} failed: {status}\n{stderr}"
            );
        }
        #[cfg(feature = "mpi")]
        if n > 1 {
            let mut paths = vec![("inline", n)];
            if n >= 3 {
                paths.push(("thread", 2));
            }
            for (mode, nodes) in paths {
                let nodes = nodes.to_string();
                let mut vars = vec![
                    ("CANTUS_PGAS", "messages"),
                    ("CANTUS_MPI_PROGRESS", mode),
                    ("CANTUS_MPI_NODES", nodes.as_str()),
                ];
                vars.extend_from_slice(env);
                let (ok, stdout, stderr) = common::mpirun(test, n, &[], &vars);
                assert!(
                    ok,
                    "{test} under mpirun -n {n}, {vars:?}, failed:\n{stdout}\n{stderr}"
                );
            }
        }
    }
}

const ALL: &[usize] = &[1, 2, 3, 4];

/// Puts into every locale's part, gets them back, and tries accesses
/// outside the allocation.
#[derive(Clone, Serialize, Deserialize)]
struct RoundTrip;
impl cantus::Remote for RoundTrip {
    type Output = ();
    fn run(self) {
        let (me, n) = (cantus::here(), cantus::num_locales());
        let a = pgas::alloc::<u64>(64).unwrap();
        assert!(a.local().iter().all(|&x| x == 0), "fresh memory is zeroed");
        pgas::barrier();
        // Locale `me` writes its 8 elements of every locale's part.
        for l in 0..n {
            let vals: Vec<u64> = (0..8).map(|k| (me * 1000 + l * 10 + k) as u64).collect();
            a.ptr(l).add(me * 8).put(&vals).unwrap();
        }
        pgas::barrier();
        for src in 0..n {
            for k in 0..8 {
                assert_eq!(a.local()[src * 8 + k], (src * 1000 + me * 10 + k) as u64);
            }
        }
        // Read back everything that went to the next locale.
        let next = (me + 1) % n;
        let mut back = vec![0u64; 8 * n];
        a.ptr(next).get(&mut back).unwrap();
        for src in 0..n {
            assert_eq!(back[src * 8 + 3], (src * 1000 + next * 10 + 3) as u64);
        }
        // The same place on another locale (`on`), reached from a pointer
        // into this locale's part: what that locale was sent there.
        let mine = a.ptr(me).add(me * 8 + 5);
        assert_eq!(mine.on(next), a.ptr(next).add(me * 8 + 5));
        assert_eq!(mine.on(next).locale(), next);
        assert_eq!(mine.on(next).remaining(), 64 - me * 8 - 5);
        assert_eq!(
            mine.on(next).read().unwrap(),
            (me * 1000 + next * 10 + 5) as u64
        );
        let e = mine.on(n).read().unwrap_err();
        assert!(e.to_string().contains("the job has"), "{e}");
        // Direct access where this process maps the place: this locale's
        // own part always, another's only on shared memory.
        let own = a
            .ptr(me)
            .mapped_ptr(8 * n)
            .unwrap()
            .expect("own part mapped");
        // SAFETY: the 8 n elements lie in this locale's part (checked by
        // mapped_ptr); every locale's puts into it completed before the
        // barrier above, and nothing writes them until the next one.
        let seen = unsafe { std::slice::from_raw_parts(own, 8 * n) };
        assert_eq!(seen, &a.local()[..8 * n]);
        let theirs = a.ptr(next).add(me * 8).mapped_ptr(8).unwrap();
        assert_eq!(
            theirs.is_some(),
            a.ptr(next).is_mapped(),
            "locale {next}'s part"
        );
        if let Some(p) = theirs {
            // SAFETY: as above, in locale `next`'s part, which this
            // process maps (shared memory).
            assert_eq!(unsafe { *p.add(3) }, (me * 1000 + next * 10 + 3) as u64);
        }
        let e = a.ptr(me).add(60).mapped_ptr(5).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::OutOfBounds);
        assert!(a.ptr(me).add(64).mapped_ptr(0).unwrap().is_some());
        // A forged pointer off the element grid.
        let bytes = postcard::to_allocvec(&(me as u32, 128u64 + 3, 128u64, 256u64)).unwrap();
        let crooked: GlobalPtr<u64> = postcard::from_bytes(&bytes).unwrap();
        let e = crooked.mapped_ptr(1).unwrap_err();
        assert!(e.to_string().contains("not aligned"), "{e}");
        // Bounds: past the end, before nothing is written.
        let e = a.ptr(next).add(60).put(&[1, 2, 3, 4, 5]).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::OutOfBounds);
        let msg = e.to_string();
        assert!(
            msg.contains("5 element(s) at element 60 of a 64-element allocation")
                && msg.contains(&format!("locale {next}")),
            "{msg}"
        );
        let mut big = vec![0u64; 65];
        assert_eq!(
            a.ptr(me).get(&mut big).unwrap_err().kind(),
            ErrorKind::OutOfBounds
        );
        assert_eq!(a.ptr(me).add(64).remaining(), 0);
        assert!(a.ptr(me).add(64).read().is_err());
        assert!(a.ptr(me).add(63).read().is_ok());
        // A pointer naming a locale the job does not have.
        let bytes = postcard::to_allocvec(&(n as u32 + 3, 128u64, 128u64, 256u64)).unwrap();
        let forged: GlobalPtr<u64> = postcard::from_bytes(&bytes).unwrap();
        let e = forged.read().unwrap_err();
        assert!(e.to_string().contains("the job has"), "{e}");
        assert!(!forged.is_mapped(), "a place outside the job is not mapped");
        // Mapped: this locale's own part always; another's where the
        // memory is shared (every locale maps every segment), never over
        // messages.
        assert!(a.ptr(me).is_mapped());
        let shared = std::env::var("CANTUS_PGAS").is_ok_and(|m| m == "shared");
        assert_eq!(
            a.ptr(next).is_mapped(),
            shared || next == me,
            "locale {next}'s part"
        );
        pgas::barrier();
        // Nothing was written by the failed puts.
        assert!(a.local()[8 * n..].iter().all(|&x| x == 0));
    }
}

/// Every locale hammers counters on every locale with atomics, from
/// several tasks.
#[derive(Clone, Serialize, Deserialize)]
struct Contend(u64);
impl cantus::Remote for Contend {
    type Output = ();
    fn run(self) {
        let (me, n) = (cantus::here(), cantus::num_locales());
        let counters = pgas::alloc::<u64>(3).unwrap();
        let iters = self.0;
        cantus::forall(0..4).for_each(|_| {
            for i in 0..iters {
                let l = (i as usize + me) % n;
                counters.ptr(l).fetch_add(1).unwrap();
                // An increment by compare-and-swap on locale 0's second slot.
                let c = counters.ptr(0).add(1);
                let mut cur = c.load().unwrap();
                loop {
                    match c.compare_exchange(cur, cur + 1).unwrap() {
                        Ok(_) => break,
                        Err(actual) => cur = actual,
                    }
                }
            }
        });
        // Swap: every locale swaps its number in; the values seen plus the
        // final one are each locale's number and the initial 0 once.
        let seen = counters.ptr(0).add(2).swap(me as u64 + 1).unwrap();
        pgas::barrier();
        let total = pgas::all_reduce(counters.local()[0], pgas::sum);
        assert_eq!(total, 4 * iters * n as u64, "every fetch_add counted");
        assert_eq!(counters.ptr(0).add(1).load().unwrap(), 4 * iters * n as u64);
        let last = counters.ptr(0).add(2).load().unwrap();
        let seen_sum = pgas::all_reduce(seen, pgas::sum);
        assert_eq!(
            seen_sum + last,
            (n * (n + 1) / 2) as u64,
            "each swapped-in value seen exactly once"
        );
        pgas::barrier();
        if me == 0 {
            counters.ptr(n - 1).store(77).unwrap();
        }
        pgas::barrier();
        if me == n - 1 {
            assert_eq!(counters.local()[0], 77);
        }
    }
}

/// Plain puts before a barrier are seen after it, round after round.
#[derive(Clone, Serialize, Deserialize)]
struct BarrierOrder(u64);
impl cantus::Remote for BarrierOrder {
    type Output = ();
    fn run(self) {
        let (me, n) = (cantus::here(), cantus::num_locales());
        let mut slots = pgas::alloc::<[u64; 4]>(n).unwrap();
        for round in 1..=self.0 {
            for l in 0..n {
                slots
                    .ptr(l)
                    .add(me)
                    .write([round, me as u64, round * 3, !round])
                    .unwrap();
            }
            pgas::barrier();
            for (src, s) in slots.local().iter().enumerate() {
                assert_eq!(*s, [round, src as u64, round * 3, !round], "round {round}");
            }
            pgas::barrier();
        }
        slots.local_mut()[0][0] = 5;
        assert_eq!(slots.local()[0][0], 5);
    }
}

/// Broadcasts (several scratch pieces long), reductions to each root,
/// all-reductions of floats.
#[derive(Clone, Serialize, Deserialize)]
struct Collectives;
impl cantus::Remote for Collectives {
    type Output = f64;
    fn run(self) -> f64 {
        let (me, n) = (cantus::here(), cantus::num_locales());
        for root in 0..n {
            let mut buf: Vec<u64> = if me == root {
                (0..10_000).map(|i| i * 7 + root as u64).collect()
            } else {
                vec![0; 10_000]
            };
            pgas::broadcast(root, &mut buf);
            assert!(
                buf.iter()
                    .enumerate()
                    .all(|(i, &x)| x == i as u64 * 7 + root as u64)
            );
            let mut empty: [u8; 0] = [];
            pgas::broadcast(root, &mut empty);
            let r = pgas::reduce(root, me as u64 + 1, pgas::sum);
            if me == root {
                assert_eq!(r, Some((n * (n + 1) / 2) as u64));
            } else {
                assert_eq!(r, None);
            }
        }
        let x = (me as f64 + 1.0) * 0.5;
        assert_eq!(pgas::all_reduce(x, pgas::max), n as f64 * 0.5);
        assert_eq!(pgas::all_reduce(x, pgas::min), 0.5);
        assert_eq!(pgas::all_reduce(-(me as i32), pgas::min), -(n as i32 - 1));
        let pair = pgas::all_reduce([me as u32, 1], |a, b| [a[0].max(b[0]), a[1] + b[1]]);
        assert_eq!(pair, [n as u32 - 1, n as u32]);
        pgas::all_reduce(x, pgas::sum)
    }
}

/// A block array filled with forall, summed, and reached by index.
#[derive(Clone, Serialize, Deserialize)]
struct Blocks(usize);
impl cantus::Remote for Blocks {
    type Output = u64;
    fn run(self) -> u64 {
        let (me, n) = (cantus::here(), cantus::num_locales());
        let len = self.0;
        let mut a = BlockArray::<u64>::new(len).unwrap();
        assert_eq!(a.len(), len);
        let r = a.local_range();
        assert_eq!(r, a.range_of(me));
        assert_eq!(a.local().len(), r.len());
        a.forall_local(|i, x| *x = i as u64 * 2);
        pgas::barrier();
        let local: u64 = a.local().iter().sum();
        let total = pgas::all_reduce(local, pgas::sum);
        assert_eq!(total, (len * (len - 1)) as u64);
        // Every element, through its owner.
        if me == n - 1 {
            for i in (0..len).step_by(97) {
                assert_eq!(a.read(i).unwrap(), i as u64 * 2);
                assert!(a.range_of(a.owner(i)).contains(&i));
            }
        }
        assert_eq!(a.read(len).unwrap_err().kind(), ErrorKind::OutOfBounds);
        pgas::barrier();
        if me == 0 {
            a.write(len - 1, 5).unwrap();
        }
        pgas::barrier();
        // Each locale bumps the first element of the next block.
        let next = a.range_of((me + 1) % n);
        if !next.is_empty() {
            a.ptr(next.start).unwrap().fetch_add(1).unwrap();
        }
        pgas::barrier();
        let after: u64 = a.local().iter().sum();
        let sum = pgas::all_reduce(after, pgas::sum);
        pgas::barrier();
        // Ranges across owners, as slices: the last locale writes every
        // element from a third of the way on, each locale reads it all.
        if me == n - 1 {
            let from = len / 3;
            let values: Vec<u64> = (from..len).map(|i| 7 * i as u64 + 1).collect();
            a.put_slice(from, &values).unwrap();
        }
        pgas::barrier();
        let mut all = vec![0u64; len];
        a.get_slice(0, &mut all).unwrap();
        for (i, &x) in all.iter().enumerate().skip(len / 3) {
            assert_eq!(x, 7 * i as u64 + 1, "element {i} of {len}");
        }
        let mut none: [u64; 0] = [];
        a.get_slice(len, &mut none).unwrap();
        let mut past = vec![9u64; 2];
        let e = a.get_slice(len - 1, &mut past).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::OutOfBounds);
        assert!(e.to_string().contains("get_slice"), "{e}");
        assert_eq!(past, [9, 9], "nothing read past the end");
        assert_eq!(
            a.put_slice(usize::MAX, &[1]).unwrap_err().kind(),
            ErrorKind::OutOfBounds
        );
        pgas::barrier();
        sum
    }
}

/// The heap's limits: a full heap, freeing by drop, zeroing on reuse,
/// locales that disagree.
#[derive(Clone, Serialize, Deserialize)]
struct Limits;
impl cantus::Remote for Limits {
    type Output = ();
    fn run(self) {
        let me = cantus::here();
        let e = pgas::alloc::<u64>(HEAP / 8).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::HeapFull);
        let msg = e.to_string();
        assert!(
            msg.contains(&format!("asked for {HEAP} bytes"))
                && msg.contains(&format!(
                    "but {} of its {HEAP} bytes per locale are left",
                    HEAP - 128
                ))
                && msg.contains("CANTUS_HEAP_BYTES")
                && msg.contains("Builder::heap_bytes"),
            "{msg}"
        );
        // Most of the heap, twice: the first must be freed for the second.
        {
            let mut big = pgas::alloc::<u64>(HEAP / 8 - 64).unwrap();
            big.local_mut().iter_mut().for_each(|x| *x = 0xdead);
            pgas::barrier();
        }
        let big = pgas::alloc::<u64>(HEAP / 8 - 64).unwrap();
        assert!(
            big.local().iter().all(|&x| x == 0),
            "reused memory is zeroed"
        );
        drop(big);
        // The locales disagree on the size: every one is told.
        let r = pgas::alloc::<u8>(100 + me);
        if cantus::num_locales() > 1 {
            let e = r.unwrap_err();
            assert_eq!(e.kind(), ErrorKind::Locale);
            assert!(e.to_string().contains("do not match"), "{e}");
        }
        // And the heap still works.
        let ok = pgas::alloc::<u8>(10).unwrap();
        assert_eq!(ok.len(), 10);
    }
}

/// Panics on the last locale before the barrier the others wait in.
#[derive(Clone, Serialize, Deserialize)]
struct PanicsBeforeBarrier;
impl cantus::Remote for PanicsBeforeBarrier {
    type Output = ();
    fn run(self) {
        if cantus::here() + 1 == cantus::num_locales() {
            panic!("the last locale gives up");
        }
        pgas::barrier();
    }
}

/// Panics on locale 1 only, with a message of its own; the others wait
/// in a barrier (and end with a follow-on panic).
#[derive(Clone, Serialize, Deserialize)]
struct BoomOnOne;
impl cantus::Remote for BoomOnOne {
    type Output = ();
    fn run(self) {
        if cantus::here() == 1 {
            panic!("boom on 1");
        }
        pgas::barrier();
    }
}

/// Locale 1 returns at once; the others wait in a barrier it never calls.
#[derive(Clone, Serialize, Deserialize)]
struct SkipsABarrier;
impl cantus::Remote for SkipsABarrier {
    type Output = ();
    fn run(self) {
        if cantus::here() != 1 {
            pgas::barrier();
        }
    }
}

/// Calls `spmd` from inside an SPMD body.
#[derive(Clone, Serialize, Deserialize)]
struct Nested;
impl cantus::Remote for Nested {
    type Output = String;
    fn run(self) -> String {
        let e = pgas::spmd(BarrierOrder(1)).unwrap_err();
        pgas::barrier();
        e.to_string()
    }
}

/// Words of a 32 KiB block (two scratch pieces and a bit).
const W32K: usize = 4096;
/// A value of `K` blocks of 32 KiB: 32 KiB for `K = 1`, 1 MiB for 32.
type Big<const K: usize> = [[u64; W32K]; K];

/// Locale `l`'s value: each word a mix of `l` and its place.
fn big<const K: usize>(l: usize) -> Big<K> {
    let mut v = [[0u64; W32K]; K];
    for (j, w) in v.iter_mut().flatten().enumerate() {
        *w = (j as u64 + 1).wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ (l as u64 * 7919);
    }
    v
}

/// A fold that depends on the order: word-wise `a * 31 + b`.
fn mix<const K: usize>(mut a: Big<K>, b: Big<K>) -> Big<K> {
    for (x, y) in a.iter_mut().flatten().zip(b.iter().flatten()) {
        *x = x.wrapping_mul(31).wrapping_add(*y);
    }
    a
}

/// What a fold of locales `0..n` in locale order gives.
fn want<const K: usize>(n: usize) -> Big<K> {
    (1..n).fold(big::<K>(0), |acc, l| mix(acc, big::<K>(l)))
}

/// Reductions of values larger than a scratch area: a 32 KiB and a 1 MiB
/// array, to every root and to all; returns nothing, asserts inside.
#[derive(Clone, Serialize, Deserialize)]
struct BigReductions;
impl cantus::Remote for BigReductions {
    type Output = ();
    fn run(self) {
        let (me, n) = (cantus::here(), cantus::num_locales());
        let got = pgas::all_reduce(big::<1>(me), mix);
        assert!(got == want::<1>(n), "all_reduce of 32 KiB");
        for root in 0..n {
            let r = pgas::reduce(root, big::<1>(me), mix);
            assert_eq!(r.is_some(), me == root);
            assert!(r.is_none_or(|r| r == want::<1>(n)), "reduce of 32 KiB");
        }
        let got = pgas::all_reduce(big::<32>(me), mix);
        assert!(got == want::<32>(n), "all_reduce of 1 MiB");
        let root = n - 1;
        let r = pgas::reduce(root, big::<32>(me), mix);
        assert!(r.is_none_or(|r| r == want::<32>(n)), "reduce of 1 MiB");
        // Small values still work after large ones.
        assert_eq!(pgas::all_reduce(1u64, pgas::sum), n as u64);
    }
}

/// Broadcasts of megabytes whose length is not a multiple of the scratch
/// piece, from every root.
#[derive(Clone, Serialize, Deserialize)]
struct BigBroadcasts;
impl cantus::Remote for BigBroadcasts {
    type Output = ();
    fn run(self) {
        let (me, n) = (cantus::here(), cantus::num_locales());
        for (root, len) in (0..n).zip(
            [(1 << 20) + 13, 3 << 20 | 7, (1 << 20) + 4097]
                .into_iter()
                .cycle(),
        ) {
            let byte = |i: usize| (i.wrapping_mul(131) ^ (i >> 9) ^ root) as u8;
            let mut buf: Vec<u8> = if me == root {
                (0..len).map(byte).collect()
            } else {
                vec![0; len]
            };
            pgas::broadcast(root, &mut buf);
            let bad = (0..len).find(|&i| buf[i] != byte(i));
            assert_eq!(bad, None, "broadcast of {len} bytes from locale {root}");
        }
    }
}

/// The locales disagree on a broadcast's root (even locales name 0, odd
/// ones 1): every locale's call panics with the same message, and the
/// locales go on together. Returns the message.
#[derive(Clone, Serialize, Deserialize)]
struct DisagreeOnRoot;
impl cantus::Remote for DisagreeOnRoot {
    type Output = String;
    fn run(self) -> String {
        let (me, n) = (cantus::here(), cantus::num_locales());
        let mut buf = [me as u64; 4];
        let p = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            pgas::broadcast(me % 2, &mut buf)
        }))
        .unwrap_err();
        assert_eq!(buf, [me as u64; 4], "nothing was copied");
        pgas::barrier();
        assert_eq!(pgas::all_reduce(1u64, pgas::sum), n as u64);
        panic_text(p)
    }
}

/// Every body returns right after its last barrier: a locale whose
/// verdict came early ends while others still wait for theirs, which is
/// no reason for them to fail (it completed the barrier).
#[derive(Clone, Serialize, Deserialize)]
struct EndsAfterLastBarrier;
impl cantus::Remote for EndsAfterLastBarrier {
    type Output = ();
    fn run(self) {
        pgas::barrier();
        pgas::barrier();
    }
}

/// Each locale hands its right neighbour rows by `put_signal`, round
/// after round, without a barrier: the consumer waits on its signal
/// word, checks the row, and acknowledges by an atomic on the
/// producer's word, which the producer waits on before its next row.
#[derive(Clone, Serialize, Deserialize)]
struct SignalledRing {
    len: usize,
    rounds: u64,
}
impl cantus::Remote for SignalledRing {
    type Output = ();
    fn run(self) {
        let (me, n) = (cantus::here(), cantus::num_locales());
        let (right, left) = ((me + 1) % n, (me + n - 1) % n);
        let rows = pgas::alloc::<u64>(self.len).unwrap();
        // [0]: rows received; [1]: acknowledgements received.
        let words = pgas::alloc::<u64>(2).unwrap();
        let mine = |r: u64, who: usize| -> Vec<u64> {
            (0..self.len as u64)
                .map(|k| (who as u64) << 48 | r << 24 | k)
                .collect()
        };
        for r in 0..self.rounds {
            if r > 0 {
                // The neighbour read the previous row before this one
                // overwrites it.
                assert_eq!(words.ptr(me).add(1).wait_until(|v| v >= r).unwrap(), r);
            }
            let row = mine(r, me);
            let done = rows
                .ptr(right)
                .put_signal(&row, words.ptr(right), Signal::Add(1))
                .unwrap();
            drop(row); // the source may be reused at once
            if r % 2 == 0 {
                done.wait().unwrap();
            }
            let got = words.ptr(me).wait_until(|v| v > r).unwrap();
            assert_eq!(got, r + 1, "one signal per row");
            assert!(
                rows.local() == mine(r, left).as_slice(),
                "row {r} from locale {left} is whole once its signal is seen"
            );
            words.ptr(left).add(1).fetch_add(1).unwrap();
        }
        pgas::quiet().unwrap();
        pgas::barrier();
    }
}

/// Non-blocking puts to every locale, some completions dropped, then
/// `quiet`; non-blocking gets of every locale's part; and the errors of
/// signals and waits aimed wrong.
#[derive(Clone, Serialize, Deserialize)]
struct NonBlocking(usize);
impl cantus::Remote for NonBlocking {
    type Output = ();
    fn run(self) {
        let (me, n) = (cantus::here(), cantus::num_locales());
        let len = self.0;
        let a = pgas::alloc::<u32>(len * n).unwrap();
        let word = pgas::alloc::<u64>(2).unwrap();
        let value = |from: usize, to: usize, k: usize| (from * 1_000_000 + to * 1000 + k) as u32;
        let mut kept = Vec::new();
        for to in 0..n {
            let part: Vec<u32> = (0..len).map(|k| value(me, to, k)).collect();
            let c = a.ptr(to).add(me * len).put_nb(&part).unwrap();
            if to % 2 == 0 {
                kept.push(c);
            }
        }
        for c in kept {
            c.wait().unwrap();
        }
        // Many dropped completions: the list quiet keeps settles those
        // that answered as it grows (the same bytes again).
        let next = (me + 1) % n;
        let again: Vec<u32> = (0..len).map(|k| value(me, next, k)).collect();
        for _ in 0..150 {
            drop(a.ptr(next).add(me * len).put_nb(&again).unwrap());
        }
        pgas::quiet().unwrap();
        pgas::barrier();
        for from in 0..n {
            let part = &a.local()[from * len..][..len];
            assert!(
                part.iter()
                    .enumerate()
                    .all(|(k, &x)| x == value(from, me, k)),
                "the part from locale {from} arrived whole"
            );
        }
        let gets: Vec<_> = (0..n).map(|l| a.ptr(l).get_nb(len * n).unwrap()).collect();
        for (l, g) in gets.into_iter().enumerate() {
            let got = g.wait().unwrap();
            for from in 0..n {
                assert_eq!(got[from * len + len / 2], value(from, l, len / 2));
            }
        }
        // Aimed wrong: nothing is written, an error says why.
        let other = (me + 1) % n;
        if n > 1 {
            let e = a
                .ptr(me)
                .put_signal(&[1], word.ptr(other), Signal::Set(1))
                .err()
                .expect("a signal on another locale than its data");
            assert_eq!(e.kind(), ErrorKind::OutOfBounds);
            assert!(e.to_string().contains("locale of its data"), "{e}");
            let e = word.ptr(other).wait_until(|v| v > 0).unwrap_err();
            assert!(e.to_string().contains("of its own locale"), "{e}");
        }
        let unaligned: GlobalPtr<u64> = {
            let bytes = pgas::alloc::<u8>(16).unwrap();
            let p = bytes.ptr(me).add(1);
            postcard::from_bytes(&postcard::to_allocvec(&p).unwrap()).unwrap()
        };
        assert!(word.ptr(me).add(1).wait_until(|v| v == 0).is_ok());
        assert_eq!(
            unaligned.wait_until(|_| true).unwrap_err().kind(),
            ErrorKind::OutOfBounds
        );
        assert!(
            a.ptr(other)
                .add(len * n - 1)
                .put_signal(&[1, 2], word.ptr(other), Signal::Set(7))
                .is_err(),
            "data past the allocation"
        );
        pgas::barrier();
        assert_eq!(word.local(), &[0, 0], "nothing was signalled");
        assert_eq!(a.local()[len * n - 1], value(n - 1, me, len - 1));
        pgas::barrier();
    }
}

/// Messages between the bodies by locale number: every locale sends to
/// every locale (itself included) on two tags, of several lengths, and
/// receives them in order; typed, into a buffer, refused when the type
/// does not fit (the message stays); a receive from a body that
/// returned without sending is an error naming it.
#[derive(Clone, Serialize, Deserialize)]
struct Mail;
impl cantus::Remote for Mail {
    type Output = ();
    fn run(self) {
        let (me, n) = (cantus::here(), cantus::num_locales());
        let row = |from: usize, to: usize, len: usize| -> Vec<f64> {
            (0..len)
                .map(|k| (from * 1_000_000 + to * 10_000 + k) as f64)
                .collect()
        };
        let lens = [0usize, 1, 5000, 100_000];
        for to in 0..n {
            for &len in &lens {
                pgas::send(to, 1, &row(me, to, len)).unwrap();
            }
            pgas::send(to, 2, &[me as u8; 3]).unwrap();
        }
        for from in (0..n).rev() {
            // Tag 2 first: tags are separate queues.
            let e = pgas::recv::<u32>(from, 2).unwrap_err();
            assert_eq!(e.kind(), ErrorKind::Message, "{e}");
            assert!(e.to_string().contains("not a whole number"), "{e}");
            let mut small = [0u8; 2];
            assert!(pgas::recv_into(from, 2, &mut small).is_err(), "too long");
            let mut buf = [9u8; 8];
            assert_eq!(pgas::recv_into(from, 2, &mut buf).unwrap(), 3);
            assert_eq!(buf, [from as u8, from as u8, from as u8, 9, 9, 9, 9, 9]);
            for &len in &lens {
                let got: Vec<f64> = pgas::recv(from, 1).unwrap();
                assert_eq!(got.as_ptr() as usize % align_of::<f64>(), 0);
                assert!(
                    got == row(from, me, len),
                    "{len} elements from {from}, in order"
                );
            }
        }
        let e = pgas::send(n, 0, &[1u8]).unwrap_err();
        assert!(e.to_string().contains("does not exist"), "{e}");
        // The last locale returns; the others wait for it in vain.
        pgas::barrier();
        if me + 1 < n {
            let e = pgas::recv::<u8>(n - 1, 9).unwrap_err();
            assert_eq!(e.kind(), ErrorKind::Locale);
            assert!(
                e.to_string().contains(&format!("from locale {}", n - 1))
                    && e.to_string().contains("returned without sending"),
                "{e}"
            );
        }
    }
}

/// All-gather(v), all-to-all(v) and scans against what each locale
/// computes alone.
#[derive(Clone, Serialize, Deserialize)]
struct Exchanges(usize);
impl cantus::Remote for Exchanges {
    type Output = ();
    fn run(self) {
        let (me, n) = (cantus::here(), cantus::num_locales());
        let k = self.0;
        let block = |from: usize, to: usize| -> Vec<u64> {
            (0..k)
                .map(|i| (from * 1000 + to * 100 + i) as u64)
                .collect()
        };
        let all = pgas::all_gather(&block(me, 0));
        assert_eq!(all, (0..n).flat_map(|l| block(l, 0)).collect::<Vec<_>>());
        // Lengths that differ by locale, one of them empty.
        let mine: Vec<u16> = (0..me * k).map(|i| i as u16).collect();
        let v = pgas::all_gather_v(&mine);
        for (l, part) in v.iter().enumerate() {
            assert_eq!(part.len(), l * k);
        }
        let send: Vec<u64> = (0..n).flat_map(|to| block(me, to)).collect();
        let got = pgas::all_to_all(&send);
        assert_eq!(
            got,
            (0..n).flat_map(|from| block(from, me)).collect::<Vec<_>>()
        );
        let parts: Vec<Vec<f32>> = (0..n)
            .map(|to| {
                (0..(me + to) % 3 * k)
                    .map(|i| (me * 10 + to) as f32 + i as f32)
                    .collect()
            })
            .collect();
        let got = pgas::all_to_all_v(&parts);
        for (from, part) in got.iter().enumerate() {
            let want: Vec<f32> = (0..(from + me) % 3 * k)
                .map(|i| (from * 10 + me) as f32 + i as f32)
                .collect();
            assert!(*part == want, "the part from {from}");
        }
        let x = 0.1 * (me + 1) as f64;
        let inclusive = pgas::scan(x, pgas::sum);
        let exclusive = pgas::exclusive_scan(x, pgas::sum);
        let fold = |m: usize| (0..m).map(|l| 0.1 * (l + 1) as f64).reduce(|a, b| a + b);
        assert_eq!(inclusive.to_bits(), fold(me + 1).unwrap().to_bits());
        assert_eq!(exclusive.map(f64::to_bits), fold(me).map(f64::to_bits));
        assert_eq!(pgas::scan(me as u64, pgas::max), me as u64);
    }
}

/// Locale 0 gathers one element, the others two.
#[derive(Clone, Serialize, Deserialize)]
struct GatherMismatch;
impl cantus::Remote for GatherMismatch {
    type Output = ();
    fn run(self) {
        let k = if cantus::here() == 0 { 1 } else { 2 };
        pgas::all_gather(&vec![7u32; k]);
    }
}

/// Locale 0 calls a barrier where the others call an exchange.
#[derive(Clone, Serialize, Deserialize)]
struct BarrierAgainstExchange;
impl cantus::Remote for BarrierAgainstExchange {
    type Output = ();
    fn run(self) {
        if cantus::here() == 0 {
            pgas::barrier();
        } else {
            pgas::all_to_all(&vec![1u8; cantus::num_locales()]);
        }
    }
}

/// The last locale's body returns (or panics) without joining the
/// exchange the others wait in.
#[derive(Clone, Serialize, Deserialize)]
struct ExchangeSkipped {
    panics: bool,
}
impl cantus::Remote for ExchangeSkipped {
    type Output = ();
    fn run(self) {
        let (me, n) = (cantus::here(), cantus::num_locales());
        if me + 1 == n {
            assert!(!self.panics, "locale {me} gives up");
            return;
        }
        pgas::all_to_all(&vec![1u8; n]);
    }
}

/// A halo grid whose cells hold their global coordinates and the
/// exchange's number: after each exchange every ghost cell holds its
/// neighbour's value, and ghost cells past the array's edge keep the
/// boundary value set once.
#[derive(Clone, Serialize, Deserialize)]
struct Halos {
    rows: usize,
    cols: usize,
    width: usize,
    grid: Option<(usize, usize)>,
}
impl cantus::Remote for Halos {
    type Output = ();
    fn run(self) {
        let mut g = match self.grid {
            None => HaloGrid::<f64>::new(self.rows, self.cols, self.width).unwrap(),
            Some(grid) => {
                HaloGrid::<f64>::with_grid(self.rows, self.cols, self.width, grid).unwrap()
            }
        };
        let (rows, cols) = (g.own_rows(), g.own_cols());
        let (h, c, w) = (
            rows.len() as isize,
            cols.len() as isize,
            self.width as isize,
        );
        let value = |round: usize, i: isize, j: isize| -> f64 {
            let (gi, gj) = (rows.start as isize + i, cols.start as isize + j);
            if gi < 0 || gj < 0 || gi >= self.rows as isize || gj >= self.cols as isize {
                -1.0 // the boundary
            } else {
                (round * 1_000_000 + gi as usize * 1000 + gj as usize) as f64
            }
        };
        for i in -w..h + w {
            for j in -w..c + w {
                let at = g.index(i, j);
                g.local_mut()[at] = value(0, i, j).min(-1.0);
            }
        }
        for round in 1..=4 {
            for i in 0..h {
                for j in 0..c {
                    let at = g.index(i, j);
                    g.local_mut()[at] = value(round, i, j);
                }
            }
            if round % 2 == 0 {
                g.exchange().unwrap();
            } else {
                let x = g.start_exchange().unwrap();
                // The ghost cells change only in wait.
                let old = x.grid().row(-w)[0];
                assert!(old == -1.0 || old == value(round - 1, -w, -w));
                x.wait().unwrap();
            }
            for i in -w..h + w {
                let row = g.row(i);
                for j in -w..c + w {
                    assert_eq!(
                        row[(j + w) as usize],
                        value(round, i, j),
                        "exchange {round}: cell ({i}, {j}) of locale {}'s block",
                        cantus::here()
                    );
                }
            }
            pgas::barrier(); // each exchange's cells are checked before the next
        }
        let n = cantus::num_locales();
        let e = HaloGrid::<f64>::new(n * self.width.max(1) - 1, 4, self.width.max(1))
            .err()
            .expect("a block smaller than the ghost width");
        assert_eq!(e.kind(), ErrorKind::InvalidConfig);
        assert!(e.to_string().contains("fewer than the ghost width"), "{e}");
    }
}

/// Exchanges round after round; the last locale kills itself part-way.
#[derive(Clone, Serialize, Deserialize)]
struct DiesMidExchange;
impl cantus::Remote for DiesMidExchange {
    type Output = ();
    fn run(self) {
        let (me, n) = (cantus::here(), cantus::num_locales());
        let mut g = HaloGrid::<u64>::new(64, 8, 1).unwrap();
        for round in 0..100_000u64 {
            if me + 1 == n && round == 50 {
                // SAFETY: a signal to this very process.
                unsafe { libc::kill(libc::getpid(), libc::SIGKILL) };
            }
            g.exchange().unwrap();
            let got = pgas::all_to_all(&vec![round; 4 * n]);
            assert!(got.iter().all(|&x| x == round));
        }
    }
}

cantus::remote!(
    DiesMidExchange,
    Halos,
    ExchangeSkipped,
    Mail,
    Exchanges,
    GatherMismatch,
    BarrierAgainstExchange,
    SignalledRing,
    NonBlocking,
    DisagreeOnRoot,
    EndsAfterLastBarrier,
    BoomOnOne,
    SkipsABarrier,
    Nested,
    BigReductions,
    BigBroadcasts,
    PanicsBeforeBarrier,
    RoundTrip,
    Contend,
    BarrierOrder,
    Collectives,
    Blocks,
    Limits
);

#[test]
fn a_panicking_spmd_body_ends_the_others_barriers() {
    in_jobs(
        "a_panicking_spmd_body_ends_the_others_barriers",
        &[2, 3],
        |n| {
            let e = pgas::spmd(PanicsBeforeBarrier).unwrap_err();
            assert_eq!(e.kind(), ErrorKind::RemotePanic);
            let msg = e.to_string();
            let last = format!("locale {}", n - 1);
            assert!(msg.contains(&last), "{msg}");
            // The next SPMD body runs normally.
            pgas::spmd(BarrierOrder(3)).unwrap();
        },
    );
}

cantus::remote_fn! {
    /// An SPMD body written as a plain function: every locale adds its
    /// number times `k` and its own vector's length.
    fn weighted_sum(k: u64, xs: Vec<u64>) -> (usize, u64) {
        let mine = k * cantus::here() as u64 + xs.len() as u64;
        (cantus::here(), pgas::all_reduce(mine, pgas::sum))
    }
}

#[test]
fn a_remote_fn_call_is_an_spmd_body() {
    in_jobs("a_remote_fn_call_is_an_spmd_body", &[2], |n| {
        let got = pgas::spmd(weighted_sum(3, vec![7; 5])).unwrap();
        let want = (0..n as u64).map(|l| 3 * l + 5).sum::<u64>();
        let expect: Vec<_> = (0..n).map(|l| (l, want)).collect();
        assert_eq!(got, expect, "each locale ran the body with the arguments");
    });
}

#[test]
fn put_and_get_round_trip_with_bounds_checks() {
    in_jobs("put_and_get_round_trip_with_bounds_checks", ALL, |_| {
        pgas::spmd(RoundTrip).unwrap();
    });
}

#[test]
fn atomics_under_contention_count_exactly() {
    in_jobs("atomics_under_contention_count_exactly", ALL, |_| {
        // Over messages every atomic is a round trip through its owner's
        // poll, and a contended compare-exchange loop completes about one
        // increment per round trip; with 3 or 4 locales of 2 workers on a
        // 2-core machine a round trip waits for a time slice (a few ms),
        // so fewer rounds keep the job within the child's timeout.
        let messages = std::env::var("CANTUS_PGAS").is_ok_and(|m| m == "messages");
        pgas::spmd(Contend(if messages { 100 } else { 2000 })).unwrap();
    });
}

#[test]
fn writes_before_a_barrier_are_seen_after_it() {
    in_jobs("writes_before_a_barrier_are_seen_after_it", ALL, |_| {
        pgas::spmd(BarrierOrder(200)).unwrap();
    });
}

#[test]
fn broadcast_reduce_and_all_reduce() {
    in_jobs("broadcast_reduce_and_all_reduce", ALL, |n| {
        let sums = pgas::spmd(Collectives).unwrap();
        let want = (1..=n).map(|l| l as f64 * 0.5).sum::<f64>();
        assert!(sums.iter().all(|&s| s == want), "{sums:?}");
    });
}

#[test]
fn block_arrays_forall_and_sum() {
    in_jobs("block_arrays_forall_and_sum", ALL, |n| {
        for len in [1usize, 7, 1000, 10_007] {
            let sums = pgas::spmd(Blocks(len)).unwrap();
            // 2i everywhere, the last element set to 5, then the first
            // element of every non-empty block bumped once.
            let base = (len * (len - 1)) as u64 - (len - 1) as u64 * 2 + 5;
            let blocks = (0..n).filter(|&l| l * len.div_ceil(n) < len).count() as u64;
            assert!(
                sums.iter().all(|&s| s == base + blocks),
                "len {len}: {sums:?}, want {}",
                base + blocks
            );
        }
    });
}

#[test]
fn a_full_heap_says_what_to_raise_and_frees_on_drop() {
    in_jobs(
        "a_full_heap_says_what_to_raise_and_frees_on_drop",
        ALL,
        |_| {
            pgas::spmd(Limits).unwrap();
        },
    );
}

#[test]
fn global_memory_needs_a_runtime() {
    if is_child() {
        return;
    }
    let e = pgas::alloc::<u64>(1).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::NoRuntime);
}

/// The text of a caught panic.
fn panic_text(p: Box<dyn std::any::Any + Send>) -> String {
    p.downcast_ref::<String>()
        .cloned()
        .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
        .unwrap_or_default()
}

/// Collectives called from `main` (outside any SPMD body) are errors at
/// once, on one locale as on two: never a hang on two and a success on
/// one.
#[test]
fn collectives_outside_an_spmd_body_are_errors() {
    in_jobs(
        "collectives_outside_an_spmd_body_are_errors",
        &[1, 2],
        |_| {
            let says_spmd = |msg: &str| {
                assert!(
                    msg.contains("outside an SPMD body") && msg.contains("pgas::spmd"),
                    "{msg}"
                );
            };
            let e = pgas::alloc::<u64>(1).unwrap_err();
            assert_eq!(e.kind(), ErrorKind::Locale);
            says_spmd(&e.to_string());
            says_spmd(&BlockArray::<u64>::new(10).unwrap_err().to_string());
            // Each error names the call that was made.
            assert!(e.to_string().starts_with("cantus::pgas::alloc: "), "{e}");
            let b = BlockArray::<u64>::new(10).unwrap_err().to_string();
            assert!(b.starts_with("cantus::pgas::BlockArray::new: "), "{b}");
            let p = std::panic::catch_unwind(pgas::barrier).unwrap_err();
            says_spmd(&panic_text(p));
            let p = std::panic::catch_unwind(|| pgas::all_reduce(1u64, pgas::sum)).unwrap_err();
            says_spmd(&panic_text(p));
            let p = std::panic::catch_unwind(|| pgas::reduce(0, 1u64, pgas::sum)).unwrap_err();
            says_spmd(&panic_text(p));
            let p = std::panic::catch_unwind(|| pgas::broadcast(0, &mut [0u8; 4])).unwrap_err();
            says_spmd(&panic_text(p));
            // A task of main is outside too.
            let failed = std::sync::Arc::new(cantus::SyncVar::new());
            let f = failed.clone();
            cantus::begin(move || f.write_ef(std::panic::catch_unwind(pgas::barrier).is_err()));
            assert!(
                failed.read_fe(),
                "a task of main calling barrier is an error"
            );
            // Nothing was left half done: SPMD bodies work, from spmd and
            // from coforall_locales.
            pgas::spmd(BarrierOrder(3)).unwrap();
            cantus::coforall_locales(|_| BarrierOrder(3)).unwrap();
            pgas::spmd(Blocks(100)).unwrap();
            // And outside them it is an error again.
            assert!(pgas::alloc::<u64>(1).is_err());
            // spmd inside an SPMD body is an error, not a second group.
            let nested = pgas::spmd(Nested).unwrap();
            assert!(
                nested.iter().all(|m| m.contains("already running")),
                "{nested:?}"
            );
        },
    );
}

/// The error `spmd` returns quotes the locale whose body panicked, not
/// the follow-on panics of the locales that waited for it.
#[test]
fn an_spmd_error_quotes_the_panicking_locale() {
    in_jobs("an_spmd_error_quotes_the_panicking_locale", &[2, 3], |_| {
        let e = pgas::spmd(BoomOnOne).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::RemotePanic);
        let msg = e.to_string();
        assert!(
            msg.contains("boom on 1") && msg.contains("locale 1"),
            "{msg}"
        );
        let e = cantus::coforall_locales(|_| BoomOnOne).unwrap_err();
        assert!(e.to_string().contains("boom on 1"), "{e}");
        pgas::spmd(BarrierOrder(2)).unwrap();
    });
}

#[test]
fn reductions_of_values_larger_than_a_scratch_area() {
    in_jobs_with_stacks(
        "reductions_of_values_larger_than_a_scratch_area",
        &[1, 2, 3],
        64 << 20,
        |_| {
            pgas::spmd(BigReductions).unwrap();
        },
    );
}

#[test]
fn broadcasts_of_megabytes() {
    in_jobs("broadcasts_of_megabytes", &[2, 3], |_| {
        pgas::spmd(BigBroadcasts).unwrap();
    });
}

/// A body that returns without a collective the others call ends their
/// wait with an error naming it, instead of a hang.
#[test]
fn a_body_that_skips_a_barrier_ends_the_others_wait() {
    in_jobs(
        "a_body_that_skips_a_barrier_ends_the_others_wait",
        &[2, 3],
        |_| {
            let e = pgas::spmd(SkipsABarrier).unwrap_err();
            assert_eq!(e.kind(), ErrorKind::RemotePanic);
            let msg = e.to_string();
            assert!(
                msg.contains("the SPMD body of locale 1 returned")
                    && msg.contains("same collective calls"),
                "{msg}"
            );
            pgas::spmd(BarrierOrder(2)).unwrap();
        },
    );
}

/// Locales that disagree on a collective's root are all told alike, and
/// can go on.
#[test]
fn locales_that_disagree_on_a_root_are_told_alike() {
    in_jobs(
        "locales_that_disagree_on_a_root_are_told_alike",
        &[2, 3],
        |_| {
            let msgs = pgas::spmd(DisagreeOnRoot).unwrap();
            assert!(
                msgs[0].contains("do not match")
                    && msgs[0].contains(
                        "locale 0 called broadcast of 32 bytes from locale 0 but \
                                     locale 1 called broadcast of 32 bytes from locale 1"
                    ),
                "{msgs:?}"
            );
            assert!(msgs.iter().all(|m| *m == msgs[0]), "{msgs:?}");
        },
    );
}

/// Bodies that end as soon as their last collective completed never make
/// a locale still finishing it fail.
#[test]
fn bodies_that_end_right_after_a_collective_are_no_error() {
    in_jobs(
        "bodies_that_end_right_after_a_collective_are_no_error",
        &[3, 4],
        |_| {
            for _ in 0..50 {
                pgas::spmd(EndsAfterLastBarrier).unwrap();
            }
        },
    );
}

#[test]
fn signalled_puts_hand_rows_round_a_ring_without_barriers() {
    // Without rendezvous areas (and so without MPI's large frames) a
    // frame carries 64 KiB, so the 96,000-byte rows over messages go in
    // two pieces, the signal with the last.
    in_jobs_with(
        "signalled_puts_hand_rows_round_a_ring_without_barriers",
        ALL,
        256 << 10,
        &[("CANTUS_RENDEZVOUS_BYTES", "0")],
        |_| {
            for (len, rounds) in [(1, 50), (1000, 20), (12_000, 5)] {
                pgas::spmd(SignalledRing { len, rounds }).unwrap();
            }
        },
    );
}

#[test]
fn non_blocking_puts_and_gets_complete_by_handle_or_quiet() {
    in_jobs(
        "non_blocking_puts_and_gets_complete_by_handle_or_quiet",
        ALL,
        |_| {
            for len in [1, 3000, 20_000] {
                pgas::spmd(NonBlocking(len)).unwrap();
            }
        },
    );
}

#[test]
fn bodies_message_each_other_by_locale_number() {
    in_jobs("bodies_message_each_other_by_locale_number", ALL, |_| {
        pgas::spmd(Mail).unwrap();
        pgas::spmd(Mail).unwrap(); // nothing left over from the first group
        let e = pgas::send(0, 0, &[1u8]).unwrap_err();
        assert!(e.to_string().contains("outside an SPMD body"), "{e}");
    });
}

#[test]
fn all_gather_all_to_all_and_scans() {
    in_jobs("all_gather_all_to_all_and_scans", ALL, |n| {
        for k in [0, 1, 1000, 40_000] {
            pgas::spmd(Exchanges(k)).unwrap();
        }
        // Where the collectives are MPI's (several nodes), so were the
        // exchanges: 7 a body, on this locale too.
        if n > 1 && cantus::__test::pgas_collectives() == Some("transport") {
            assert_eq!(cantus::__test::native_exchanges(), 4 * 7);
            // Both start with the same records, so a barrier against an
            // exchange is told alike everywhere (the message path cannot
            // tell them apart). A body panicked: MPI's collectives are off
            // for the rest of the job.
            let e = pgas::spmd(BarrierAgainstExchange).unwrap_err();
            assert!(
                e.to_string()
                    .contains("locale 0 called barrier but locale 1 called all_to_all"),
                "{e}"
            );
        }
        if n > 1 {
            let e = pgas::spmd(GatherMismatch).unwrap_err();
            assert!(
                e.to_string().contains(
                    "locale 0 called all_gather of 1 element(s) of 4 bytes but locale 1 called \
                     all_gather of 2 element(s)"
                ),
                "{e}"
            );
            let e = pgas::spmd(ExchangeSkipped { panics: false }).unwrap_err();
            assert!(
                e.to_string().contains(&format!(
                    "the SPMD body of locale {} returned while locale",
                    n - 1
                )) && e.to_string().contains("waits in a collective"),
                "{e}"
            );
            let e = pgas::spmd(ExchangeSkipped { panics: true }).unwrap_err();
            assert!(e.to_string().contains("gives up"), "{e}");
            pgas::spmd(Exchanges(3)).unwrap(); // the job goes on
        }
    });
}

#[test]
fn halo_grids_fill_ghost_cells_from_neighbours() {
    in_jobs("halo_grids_fill_ghost_cells_from_neighbours", ALL, |n| {
        for (rows, cols, width) in [(7, 5, 1), (40, 33, 2), (n * 3, 9, 3)] {
            pgas::spmd(Halos {
                rows,
                cols,
                width,
                grid: None,
            })
            .unwrap();
        }
        if n == 4 {
            for width in [1, 2] {
                pgas::spmd(Halos {
                    rows: 21,
                    cols: 19,
                    width,
                    grid: Some((2, 2)),
                })
                .unwrap();
            }
        }
    });
}

#[test]
fn a_locale_killed_mid_exchange_ends_the_job_naming_it() {
    let test = "a_locale_killed_mid_exchange_ends_the_job_naming_it";
    if is_child() {
        let rt = cantus::Runtime::builder()
            .locales(3)
            .workers(1)
            .heap_bytes(HEAP)
            .build()
            .expect("a job starts");
        let _ = rt.block_on(|| pgas::spmd(DiesMidExchange));
        std::thread::sleep(std::time::Duration::from_secs(30));
        unreachable!("the job should have ended");
    }
    for memory in MEMORIES {
        let (status, stderr) = run_child(test, &[("CANTUS_LOCALES", "3"), ("CANTUS_PGAS", memory)]);
        assert_eq!(status.code(), Some(128 + 9), "{memory}:\n{stderr}");
        assert!(
            stderr.contains("locale 2") && stderr.contains("signal 9"),
            "{memory}: the message names the locale and why:\n{stderr}"
        );
    }
}
