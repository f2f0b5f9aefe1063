//! Full/empty semantics of every `SyncVar` operation, `SingleVar`, with tasks
//! and outside threads as parties, and with many waiters.

mod common;
use cantus::{SingleVar, SyncVar};
use common::rt;
use std::collections::HashSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

#[test]
fn fresh_variables_are_empty_or_full_as_made() {
    let e: SyncVar<u32> = SyncVar::new();
    assert!(!e.is_full());
    assert_eq!(e.read_xx(), None);
    let f = SyncVar::with_value(5u32);
    assert!(f.is_full());
    assert_eq!(f.read_xx(), Some(5));
    assert!(f.is_full(), "readXX leaves the state alone");
}

#[test]
fn read_fe_empties_and_write_ef_fills() {
    let v = SyncVar::new();
    v.write_ef(1);
    assert!(v.is_full());
    assert_eq!(v.read_fe(), 1);
    assert!(!v.is_full());
    assert_eq!(v.try_read_fe(), None);
}

#[test]
fn read_ff_leaves_full_and_write_ff_replaces() {
    let v = SyncVar::with_value(String::from("a"));
    assert_eq!(v.read_ff(), "a");
    assert!(v.is_full());
    v.write_ff(String::from("b"));
    assert_eq!(v.read_ff(), "b");
    assert_eq!(v.read_fe(), "b");
}

#[test]
fn write_xf_fills_whatever_the_state_and_reset_empties() {
    let v = SyncVar::new();
    v.write_xf(1);
    assert_eq!(v.read_xx(), Some(1));
    v.write_xf(2);
    assert_eq!(v.read_xx(), Some(2));
    v.reset();
    assert!(!v.is_full());
    v.reset();
    assert!(!v.is_full());
    v.write_ef(3);
    assert_eq!(v.into_inner(), Some(3));
}

#[test]
fn values_are_dropped_exactly_once() {
    let token = Arc::new(());
    {
        let v = SyncVar::with_value(token.clone());
        v.write_xf(token.clone());
        assert_eq!(Arc::strong_count(&token), 2);
        v.reset();
        assert_eq!(Arc::strong_count(&token), 1);
        v.write_ef(token.clone());
    }
    assert_eq!(Arc::strong_count(&token), 1);
}

#[test]
fn read_fe_blocks_until_a_task_writes() {
    let v = SyncVar::new();
    rt().block_on(|| {
        cantus::scope(|s| {
            s.spawn(|| {
                cantus::sleep(Duration::from_millis(20));
                v.write_ef(7);
            });
            assert_eq!(v.read_fe(), 7);
        })
    });
}

#[test]
fn write_ef_blocks_until_emptied() {
    let v = SyncVar::with_value(1);
    rt().block_on(|| {
        cantus::scope(|s| {
            s.spawn(|| v.write_ef(2)); // blocks: full
            cantus::sleep(Duration::from_millis(10));
            assert_eq!(v.read_fe(), 1);
            assert_eq!(v.read_fe(), 2);
        })
    });
}

#[test]
fn write_ff_waits_for_full() {
    let v = SyncVar::new();
    rt().block_on(|| {
        cantus::scope(|s| {
            s.spawn(|| v.write_ff(9)); // waits for full
            cantus::sleep(Duration::from_millis(10));
            v.write_ef(1);
        })
    });
    assert_eq!(
        v.read_fe(),
        9,
        "writeFF replaced the value after it became full"
    );
}

#[test]
fn many_consuming_readers_each_get_one_value() {
    const N: usize = 200;
    let v = SyncVar::new();
    let got: Vec<SyncVar<usize>> = (0..N).map(|_| SyncVar::new()).collect();
    rt().block_on(|| {
        cantus::scope(|s| {
            for slot in &got {
                let v = &v;
                s.spawn(move || slot.write_ef(v.read_fe()));
            }
            for i in 0..N {
                v.write_ef(i);
            }
        })
    });
    let seen: HashSet<usize> = got.iter().map(|g| g.read_fe()).collect();
    assert_eq!(seen.len(), N, "every value read exactly once");
    assert!(!v.is_full());
}

#[test]
fn many_blocked_writers_are_all_drained() {
    const N: usize = 200;
    let v = SyncVar::with_value(usize::MAX);
    let sum = rt().block_on(|| {
        cantus::scope(|s| {
            for i in 0..N {
                let v = &v;
                s.spawn(move || v.write_ef(i));
            }
            let mut sum = 0;
            assert_eq!(v.read_fe(), usize::MAX);
            for _ in 0..N {
                sum += v.read_fe();
            }
            sum
        })
    });
    assert_eq!(sum, N * (N - 1) / 2);
}

#[test]
fn read_ff_wakes_every_waiter_and_stays_full() {
    const N: usize = 100;
    let v = SyncVar::new();
    let total = AtomicUsize::new(0);
    rt().block_on(|| {
        cantus::scope(|s| {
            for _ in 0..N {
                s.spawn(|| {
                    total.fetch_add(v.read_ff(), Ordering::Relaxed);
                });
            }
            cantus::sleep(Duration::from_millis(5));
            v.write_ef(3);
        })
    });
    assert_eq!(total.load(Ordering::Relaxed), 3 * N);
    assert!(v.is_full());
}

#[test]
fn mixed_waiters_on_one_variable() {
    // readFF waiters and readFE waiters queue together; a fill wakes the
    // non-consuming ones and one consumer.
    let v = SyncVar::new();
    let ff = AtomicUsize::new(0);
    let fe = AtomicUsize::new(0);
    rt().block_on(|| {
        cantus::scope(|s| {
            for i in 0..20 {
                if i % 2 == 0 {
                    s.spawn(|| {
                        ff.fetch_add(v.read_ff(), Ordering::Relaxed);
                    });
                } else {
                    s.spawn(|| {
                        fe.fetch_add(v.read_fe(), Ordering::Relaxed);
                    });
                }
            }
            cantus::sleep(Duration::from_millis(5));
            // Ten consumers: fill ten times, each time after it was emptied.
            for _ in 0..10 {
                v.write_ef(1);
            }
            // Once the last consumer emptied it, fill it for good: readers
            // that still wait need it full.
            v.write_ef(1);
        })
    });
    assert_eq!(ff.load(Ordering::Relaxed), 10);
    assert_eq!(fe.load(Ordering::Relaxed), 10);
}

#[test]
fn ping_pong_between_two_tasks() {
    const ROUNDS: u64 = 20_000;
    let ping = SyncVar::new();
    let pong = SyncVar::new();
    rt().block_on(|| {
        cantus::scope(|s| {
            s.spawn(|| {
                for _ in 0..ROUNDS {
                    let x: u64 = ping.read_fe();
                    pong.write_ef(x + 1);
                }
            });
            let mut x = 0;
            for _ in 0..ROUNDS {
                ping.write_ef(x);
                x = pong.read_fe();
            }
            assert_eq!(x, ROUNDS);
        })
    });
}

#[test]
fn outside_threads_and_tasks_hand_off() {
    let v = Arc::new(SyncVar::new());
    let back = Arc::new(SyncVar::new());
    let (v2, b2) = (v.clone(), back.clone());
    let t = std::thread::spawn(move || {
        for i in 0..1000u32 {
            v2.write_ef(i);
            assert_eq!(b2.read_fe(), i * 2);
        }
    });
    rt().block_on(|| {
        for _ in 0..1000 {
            let i: u32 = v.read_fe();
            back.write_ef(i * 2);
        }
    });
    t.join().unwrap();
}

#[test]
fn single_blocks_readers_until_written_once() {
    let s1 = SingleVar::new();
    let sum = AtomicUsize::new(0);
    rt().block_on(|| {
        cantus::scope(|s| {
            for _ in 0..50 {
                s.spawn(|| {
                    sum.fetch_add(*s1.read(), Ordering::Relaxed);
                });
            }
            cantus::sleep(Duration::from_millis(5));
            s1.write(2);
        })
    });
    assert_eq!(sum.load(Ordering::Relaxed), 100);
    assert_eq!(s1.try_read(), Some(&2));
    let (back, err) = s1.try_write(3).unwrap_err();
    assert_eq!(back, 3);
    assert_eq!(err.kind(), cantus::ErrorKind::AlreadyWritten);
}

#[test]
#[should_panic(expected = "SingleVar written twice")]
fn single_second_write_panics() {
    let s = SingleVar::new();
    s.write(1);
    s.write(2);
}
