//! Full/empty semantics of every `SyncVar` operation, `SingleVar`, with tasks
//! and outside threads as parties, and with many waiters.

mod common;
use cantus::{SingleVar, SyncVar};
use std::collections::HashSet;
use std::panic::{self, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, mpsc};
use std::time::{Duration, Instant};

/// How long a test waits for something that should take milliseconds
/// before it fails instead of hanging.
const DEADLINE: Duration = Duration::from_secs(10);

/// The shared runtime, held by one test at a time: tests here wait for a
/// number of blocked tasks (`query::snapshot().blocked`), which counts the
/// whole runtime's tasks, so two tests must not block tasks at once. The
/// guard lives until the end of the statement that calls `rt()`, so
/// `rt().block_on(..)` holds it for the whole call.
fn rt() -> Alone {
    static LOCK: Mutex<()> = Mutex::new(());
    Alone {
        // A test that failed while holding it poisons it; the next may go on.
        _guard: LOCK.lock().unwrap_or_else(|e| e.into_inner()),
    }
}

struct Alone {
    _guard: MutexGuard<'static, ()>,
}

impl std::ops::Deref for Alone {
    type Target = cantus::Runtime;
    fn deref(&self) -> &cantus::Runtime {
        common::rt()
    }
}

/// Waits, inside a task, until at least `n` tasks are blocked (on sync
/// variables or task groups); fails after [`DEADLINE`] naming `what`.
fn wait_blocked(n: u64, what: &str) {
    let deadline = Instant::now() + DEADLINE;
    loop {
        let blocked = cantus::query::snapshot().expect("the runtime runs").blocked;
        if blocked >= n {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{what}: only {blocked} of {n} tasks blocked after {DEADLINE:?}"
        );
        cantus::task::yield_now();
    }
}

/// Runs `f` on a thread and returns its result, or fails (instead of
/// hanging) if it takes longer than [`DEADLINE`]: after a panic under the
/// variable's lock, a leaked lock shows up as an operation that never
/// returns.
fn within<R: Send + 'static>(what: &str, f: impl FnOnce() -> R + Send + 'static) -> R {
    let (done, finished) = mpsc::channel();
    let t = std::thread::spawn(move || {
        let r = f();
        let _ = done.send(());
        r
    });
    match finished.recv_timeout(DEADLINE) {
        Ok(()) => t.join().unwrap(),
        // `f` panicked (an assertion failed): pass its panic on.
        Err(mpsc::RecvTimeoutError::Disconnected) => match t.join() {
            Err(p) => panic::resume_unwind(p),
            Ok(_) => unreachable!("the thread drops its sender only by returning or panicking"),
        },
        Err(mpsc::RecvTimeoutError::Timeout) => panic!(
            "{what}: still not done after {DEADLINE:?}: the variable stayed locked after a panic"
        ),
    }
}

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
                // The reader below (this scope's task) is blocked on `v`.
                wait_blocked(1, "readFE on an empty variable");
                assert!(!v.is_full());
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
            wait_blocked(1, "writeEF on a full variable");
            assert_eq!(v.read_xx(), Some(1), "the blocked writer wrote nothing");
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
            wait_blocked(1, "writeFF on an empty variable");
            assert!(!v.is_full(), "the blocked writeFF wrote nothing");
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
            wait_blocked(N as u64, "readFF waiters on an empty variable");
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
            wait_blocked(20, "readFF and readFE waiters on an empty variable");
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
            wait_blocked(50, "SingleVar readers before the write");
            assert!(!s1.is_full());
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

/// A value whose `Clone` panics while `armed` is set.
struct CloneBomb {
    id: u32,
    armed: Arc<AtomicBool>,
}

impl Clone for CloneBomb {
    fn clone(&self) -> Self {
        if self.armed.load(Ordering::Relaxed) {
            panic!("CloneBomb {} refuses to be cloned", self.id);
        }
        CloneBomb {
            id: self.id,
            armed: self.armed.clone(),
        }
    }
}

/// Counts its drops in `drops`; its `Drop` panics (after counting) if
/// `panics` is set.
struct DropBomb {
    id: u32,
    panics: bool,
    drops: Arc<AtomicUsize>,
}

impl DropBomb {
    fn new(id: u32, panics: bool, drops: &Arc<AtomicUsize>) -> DropBomb {
        DropBomb {
            id,
            panics,
            drops: drops.clone(),
        }
    }
}

impl Drop for DropBomb {
    fn drop(&mut self) {
        self.drops.fetch_add(1, Ordering::SeqCst);
        if self.panics {
            panic!("DropBomb {} panics in drop", self.id);
        }
    }
}

/// Asserts that `op` panicked with a message containing `expected`.
fn assert_panicked<R>(r: std::thread::Result<R>, expected: &str) {
    let Err(p) = r else {
        panic!("expected a panic containing {expected:?}, but the call returned");
    };
    let msg = p
        .downcast_ref::<String>()
        .cloned()
        .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
        .unwrap_or_default();
    assert!(msg.contains(expected), "unexpected panic: {msg:?}");
}

#[test]
fn a_panicking_clone_in_read_ff_leaves_the_variable_full_and_usable() {
    let armed = Arc::new(AtomicBool::new(true));
    let v = Arc::new(SyncVar::with_value(CloneBomb {
        id: 1,
        armed: armed.clone(),
    }));
    within("readFF after a panicking clone", move || {
        // A writer queued on the full variable must survive the panic too.
        let w = v.clone();
        let writer = std::thread::spawn(move || {
            w.write_ef(CloneBomb {
                id: 2,
                armed: Arc::new(AtomicBool::new(false)),
            })
        });
        assert_panicked(
            panic::catch_unwind(AssertUnwindSafe(|| v.read_ff())),
            "refuses to be cloned",
        );
        assert!(v.is_full(), "a panicking readFF leaves the variable full");
        armed.store(false, Ordering::Relaxed);
        assert_eq!(v.read_ff().id, 1, "the value is unchanged");
        assert_eq!(v.read_fe().id, 1);
        writer.join().unwrap();
        assert_eq!(v.read_fe().id, 2, "the queued writer was woken");
        v.write_ef(CloneBomb {
            id: 3,
            armed: armed.clone(),
        });
        assert_eq!(v.read_ff().id, 3);
    });
}

#[test]
fn a_panicking_clone_in_read_xx_leaves_the_variable_full_and_usable() {
    let armed = Arc::new(AtomicBool::new(true));
    let v = Arc::new(SyncVar::with_value(CloneBomb {
        id: 1,
        armed: armed.clone(),
    }));
    within("readXX after a panicking clone", move || {
        assert_panicked(
            panic::catch_unwind(AssertUnwindSafe(|| v.read_xx())),
            "refuses to be cloned",
        );
        assert!(v.is_full(), "a panicking readXX leaves the variable full");
        armed.store(false, Ordering::Relaxed);
        assert_eq!(v.read_xx().map(|b| b.id), Some(1));
        assert_eq!(v.read_ff().id, 1);
        assert_eq!(v.read_fe().id, 1);
        assert!(v.read_xx().is_none());
        v.write_ef(CloneBomb {
            id: 2,
            armed: armed.clone(),
        });
        assert_eq!(v.read_fe().id, 2);
    });
}

#[test]
fn a_panicking_drop_in_write_ff_completes_the_write() {
    let drops = Arc::new(AtomicUsize::new(0));
    let v = Arc::new(SyncVar::with_value(DropBomb::new(1, true, &drops)));
    let d = drops.clone();
    within("writeFF after a panicking drop", move || {
        assert_panicked(
            panic::catch_unwind(AssertUnwindSafe(|| v.write_ff(DropBomb::new(2, false, &d)))),
            "DropBomb 1 panics in drop",
        );
        assert_eq!(d.load(Ordering::SeqCst), 1, "the old value dropped once");
        assert!(v.is_full(), "writeFF stored the new value");
        let got = v.read_fe();
        assert_eq!(got.id, 2);
        drop(got);
        v.write_ef(DropBomb::new(3, false, &d));
        v.write_ff(DropBomb::new(4, false, &d));
        assert_eq!(v.read_fe().id, 4);
    });
    assert_eq!(drops.load(Ordering::SeqCst), 4, "every value dropped once");
}

#[test]
fn a_panicking_drop_in_write_xf_completes_the_write() {
    let drops = Arc::new(AtomicUsize::new(0));
    let v = Arc::new(SyncVar::with_value(DropBomb::new(1, true, &drops)));
    let d = drops.clone();
    within("writeXF after a panicking drop", move || {
        assert_panicked(
            panic::catch_unwind(AssertUnwindSafe(|| v.write_xf(DropBomb::new(2, false, &d)))),
            "DropBomb 1 panics in drop",
        );
        assert_eq!(d.load(Ordering::SeqCst), 1, "the old value dropped once");
        assert!(v.is_full(), "writeXF stored the new value");
        assert_eq!(v.read_fe().id, 2);
        v.write_xf(DropBomb::new(3, false, &d));
        assert_eq!(v.read_fe().id, 3);
    });
    assert_eq!(drops.load(Ordering::SeqCst), 3, "every value dropped once");
}

#[test]
fn a_panicking_drop_in_reset_leaves_it_empty() {
    let drops = Arc::new(AtomicUsize::new(0));
    let v = Arc::new(SyncVar::with_value(DropBomb::new(1, true, &drops)));
    let d = drops.clone();
    within("reset after a panicking drop", move || {
        // A writer queued on the full variable is woken by the reset.
        let w = v.clone();
        let wd = d.clone();
        let writer = std::thread::spawn(move || w.write_ef(DropBomb::new(2, false, &wd)));
        assert_panicked(
            panic::catch_unwind(AssertUnwindSafe(|| v.reset())),
            "DropBomb 1 panics in drop",
        );
        assert_eq!(d.load(Ordering::SeqCst), 1, "the old value dropped once");
        writer.join().unwrap();
        assert_eq!(
            v.read_fe().id,
            2,
            "the queued writer filled it after the reset"
        );
        v.reset();
        assert!(!v.is_full());
        v.write_ef(DropBomb::new(3, false, &d));
        assert_eq!(v.read_fe().id, 3);
    });
    assert_eq!(drops.load(Ordering::SeqCst), 3, "every value dropped once");
}

/// Two variables never share a cache line, wherever a struct, an array
/// or a stack frame puts them (a hand-off between workers then moves its
/// own line only; sharing one doubled it, and where a stack frame put
/// two variables moved with unrelated code).
#[test]
fn variables_never_share_a_cache_line() {
    let line = if cfg!(any(target_arch = "x86_64", target_arch = "aarch64")) {
        128
    } else {
        64
    };
    struct Frame {
        _a: u8,
        x: SyncVar<u64>,
        _b: u16,
        y: SyncVar<u8>,
        z: cantus::SingleVar<u32>,
    }
    let f = Frame {
        _a: 1,
        x: SyncVar::new(),
        _b: 2,
        y: SyncVar::new(),
        z: cantus::SingleVar::new(),
    };
    let arr: [SyncVar<u16>; 3] = [SyncVar::new(), SyncVar::new(), SyncVar::new()];
    let (p, q) = (SyncVar::<u64>::new(), SyncVar::<u64>::new());
    let addrs = [
        std::ptr::from_ref(&f.x) as usize,
        std::ptr::from_ref(&f.y) as usize,
        std::ptr::from_ref(&f.z) as usize,
        std::ptr::from_ref(&arr[0]) as usize,
        std::ptr::from_ref(&arr[1]) as usize,
        std::ptr::from_ref(&arr[2]) as usize,
        std::ptr::from_ref(&p) as usize,
        std::ptr::from_ref(&q) as usize,
    ];
    for a in addrs {
        assert_eq!(a % line, 0, "a variable starts a line: {a:#x}");
    }
    assert!(std::mem::size_of::<SyncVar<u8>>() >= line);
    assert_eq!(std::mem::size_of::<SyncVar<[u8; 200]>>() % line, 0);
}
