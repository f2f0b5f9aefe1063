//! forall results equal serial results for every schedule, on empty,
//! length-1 and odd-length ranges, nested, from main and from tasks, and
//! with panics in the body.

mod common;
use cantus::{Schedule, forall, forall_chunks_mut, forall_mut};
use common::rt;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

const SCHEDULES: [Schedule; 5] = [
    Schedule::Adaptive,
    Schedule::Static,
    Schedule::Dynamic(1),
    Schedule::Dynamic(7),
    Schedule::Dynamic(4096),
];
const LENGTHS: [usize; 8] = [0, 1, 2, 3, 171, 1001, 5001, 44217];

fn value(i: usize) -> u64 {
    (i as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 40
}

#[test]
fn every_index_runs_once_for_every_schedule_and_length() {
    for s in SCHEDULES {
        for n in LENGTHS {
            for grain in [1, 64, cantus::config::DEFAULT_GRAIN] {
                let hits: Vec<AtomicUsize> = (0..n).map(|_| AtomicUsize::new(0)).collect();
                rt().block_on(|| {
                    forall(0..n).schedule(s).grain(grain).for_each(|i| {
                        hits[i].fetch_add(1, Ordering::Relaxed);
                    })
                });
                assert!(
                    hits.iter().all(|h| h.load(Ordering::Relaxed) == 1),
                    "{s:?} n={n} grain={grain}"
                );
            }
        }
    }
}

#[test]
fn reductions_equal_serial_results() {
    for s in SCHEDULES {
        for n in LENGTHS {
            let serial_sum: u64 = (0..n).map(value).sum();
            let serial_min = (0..n).map(value).min();
            let serial_max = (0..n).map(value).max();
            let (sum, min, max) = rt().block_on(|| {
                (
                    forall(0..n).schedule(s).grain(16).sum(value),
                    forall(0..n).schedule(s).grain(16).min(value),
                    forall(0..n).schedule(s).grain(16).max(value),
                )
            });
            assert_eq!(
                (sum, min, max),
                (serial_sum, serial_min, serial_max),
                "{s:?} n={n}"
            );
        }
    }
}

#[test]
fn non_commutative_reductions_keep_index_order() {
    // String concatenation is associative but not commutative.
    for s in SCHEDULES {
        let n = 300;
        let serial: String = (0..n).map(|i| char::from(b'a' + (i % 26) as u8)).collect();
        let got = rt().block_on(|| {
            forall(0..n).schedule(s).grain(8).reduce(
                String::new,
                |i| char::from(b'a' + (i % 26) as u8).to_string(),
                |mut a, b| {
                    a.push_str(&b);
                    a
                },
            )
        });
        assert_eq!(got, serial, "{s:?}");
    }
}

#[test]
fn forall_from_main_behaves_as_from_a_task() {
    rt();
    for s in SCHEDULES {
        let n = 10_007;
        let from_main = forall(0..n).schedule(s).sum(value);
        let from_task = rt().block_on(|| forall(0..n).schedule(s).sum(value));
        assert_eq!(from_main, from_task);
        assert_eq!(from_main, (0..n).map(value).sum::<u64>());
    }
}

#[test]
fn nested_foralls() {
    let total = AtomicU64::new(0);
    rt().block_on(|| {
        forall(0..37).grain(1).for_each(|i| {
            let inner = forall(0..1000)
                .schedule(Schedule::Dynamic(33))
                .sum(|j| (i * j) as u64);
            total.fetch_add(inner, Ordering::Relaxed);
        })
    });
    let serial: u64 = (0..37u64)
        .map(|i| (0..1000u64).map(|j| i * j).sum::<u64>())
        .sum();
    assert_eq!(total.into_inner(), serial);
}

#[test]
fn mutable_slices_and_chunks() {
    for n in LENGTHS {
        let mut v = vec![0u64; n];
        rt().block_on(|| forall_mut(&mut v, |i, x| *x = value(i)));
        assert!(v.iter().enumerate().all(|(i, x)| *x == value(i)), "n={n}");
        for chunk in [1, 3, 100] {
            let mut w = vec![0usize; n];
            rt().block_on(|| {
                forall_chunks_mut(&mut w, chunk, |c, piece| {
                    for (k, x) in piece.iter_mut().enumerate() {
                        *x = c * chunk + k;
                    }
                })
            });
            assert!(
                w.iter().enumerate().all(|(i, x)| *x == i),
                "n={n} chunk={chunk}"
            );
        }
    }
}

#[test]
fn a_panic_in_the_body_reaches_the_caller_and_the_runtime_keeps_working() {
    for s in SCHEDULES {
        let r = std::panic::catch_unwind(|| {
            rt().block_on(|| {
                forall(0..10_000).schedule(s).grain(10).for_each(|i| {
                    if i == 7777 {
                        panic!("body failed at 7777");
                    }
                })
            })
        });
        let msg = *r.unwrap_err().downcast::<&str>().unwrap();
        assert_eq!(msg, "body failed at 7777", "{s:?}");
        // From main too.
        let r = std::panic::catch_unwind(|| {
            forall(0..100)
                .schedule(s)
                .for_each(|i| assert!(i != 50, "main-side"))
        });
        assert!(r.is_err());
    }
    assert_eq!(rt().block_on(|| forall(0..100).sum(|i| i as u64)), 4950);
}
