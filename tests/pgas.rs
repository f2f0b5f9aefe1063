//! The global address space with 1 to 4 locales: each test re-runs this
//! binary as locale 0 of a job (which starts the others as further
//! copies) under a kill timeout, and runs its SPMD bodies there.

mod common;

use cantus::ErrorKind;
use cantus::pgas::{self, BlockArray, GlobalPtr};
use common::{is_child, run_child};
use serde::{Deserialize, Serialize};

const HEAP: usize = 1 << 20;

/// Runs `body` in a child whose job has `locales` locales, for each
/// count in `counts`.
fn in_jobs(test: &str, counts: &[usize], body: impl Fn(usize) + Sync) {
    for &n in counts {
        if is_child() {
            if std::env::var("CANTUS_LOCALES").ok() == Some(n.to_string()) {
                let rt = cantus::Runtime::builder()
                    .locales(n)
                    .workers(2)
                    .heap_bytes(HEAP)
                    .build()
                    .expect("a job starts");
                rt.block_on(|| body(n));
                rt.shutdown();
            }
            continue;
        }
        let (status, stderr) = run_child(test, &[("CANTUS_LOCALES", &n.to_string())]);
        assert!(
            status.success(),
            "{test} with CANTUS_LOCALES={n} failed: {status}\n{stderr}"
        );
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
                assert_eq!(a.get(i).unwrap(), i as u64 * 2);
                assert!(a.range_of(a.owner(i)).contains(&i));
            }
        }
        assert_eq!(a.get(len).unwrap_err().kind(), ErrorKind::OutOfBounds);
        pgas::barrier();
        if me == 0 {
            a.put(len - 1, 5).unwrap();
        }
        pgas::barrier();
        // Each locale bumps the first element of the next block.
        let next = a.range_of((me + 1) % n);
        if !next.is_empty() {
            a.ptr(next.start).unwrap().fetch_add(1).unwrap();
        }
        pgas::barrier();
        let after: u64 = a.local().iter().sum();
        pgas::all_reduce(after, pgas::sum)
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

cantus::remote!(
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
        pgas::spmd(Contend(2000)).unwrap();
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
