//! The side table under load, from tasks and outside threads: no lost
//! wake-ups, values handed over intact, and the table drains back to
//! empty once every word is full again.

use super::table::{self, syncvar};
use super::*;
use crate::ffi::qthread::feb::{Syncvar, qthread_syncvar_readFE, qthread_syncvar_writeEF_const};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};

/// The unit tests' shared runtime, these tests serialised, since they
/// count the process-wide table's entries.
fn runtime() -> std::sync::MutexGuard<'static, ()> {
    crate::ffi::lifecycle::shared_test_runtime()
}

#[derive(Clone, Copy)]
struct Word(*mut u64);
// SAFETY: the words live in an Arc'd box that outlives every user.
unsafe impl Send for Word {}
// SAFETY: as above; all access goes through the FEB functions.
unsafe impl Sync for Word {}

impl Word {
    /// The pointer (a method, so closures capture the whole `Word`).
    fn get(self) -> *mut u64 {
        self.0
    }
}

#[test]
fn words_hand_over_every_value_and_the_table_drains() {
    let _rt = runtime();
    const WORDS: usize = 16;
    const N: u64 = 2_000;
    let words: Arc<Vec<AtomicU64>> = Arc::new((0..WORDS).map(|_| AtomicU64::new(0)).collect());
    let word = |i: usize| Word(words[i].as_ptr());
    for i in 0..WORDS {
        // SAFETY: the word is a live, aligned u64.
        assert_eq!(unsafe { cantus_feb_empty(word(i).0) }, OK);
    }
    let group = crate::par::TaskGroup::new();
    let sums = Arc::new(Mutex::new(Vec::new()));
    let mut threads = Vec::new();
    for i in 0..WORDS {
        let w = word(i);
        let keep = words.clone();
        group.spawn(move || {
            for v in 1..=N {
                // SAFETY: `keep` keeps the word alive.
                assert_eq!(unsafe { cantus_feb_write_ef(w.get(), v) }, OK);
            }
            drop(keep);
        });
        let (keep, sums) = (words.clone(), sums.clone());
        let consume = move || {
            let mut sum = 0;
            for _ in 0..N {
                let mut v = 0;
                // SAFETY: `keep` keeps the word alive; `v` is writable.
                assert_eq!(unsafe { cantus_feb_read_fe(w.get(), &mut v) }, OK);
                sum += v;
            }
            sums.lock().unwrap().push(sum);
            drop(keep);
        };
        if i % 2 == 0 {
            group.spawn(consume);
        } else {
            threads.push(std::thread::spawn(consume));
        }
    }
    for t in threads {
        t.join().unwrap();
    }
    group.wait();
    let sums = sums.lock().unwrap();
    assert_eq!(sums.len(), WORDS);
    assert!(sums.iter().all(|&s| s == N * (N + 1) / 2), "{sums:?}");
    assert!(table::entries() >= WORDS, "empty words keep their entries");
    for i in 0..WORDS {
        // SAFETY: the word is alive.
        assert_eq!(unsafe { cantus_feb_fill(word(i).0) }, OK);
    }
    assert_eq!(
        table::entries(),
        0,
        "full words with no waiters take no room"
    );
}

#[test]
fn syncvar_state_bits_follow_qthreads_encoding() {
    let _rt = runtime();
    let sv = Arc::new(AtomicU64::new(syncvar::EMPTY));
    let w = Word(sv.as_ptr());
    let got = Arc::new(AtomicU64::new(0));
    let group = crate::par::TaskGroup::new();
    let (keep, out) = (sv.clone(), got.clone());
    group.spawn(move || {
        let mut v = 0;
        // SAFETY: `keep` keeps the syncvar alive.
        let rc = unsafe { qthread_syncvar_readFE(&mut v, w.get().cast::<Syncvar>()) };
        assert_eq!(rc, 0);
        out.store(v, Ordering::Relaxed);
        drop(keep);
    });
    // The reader queues: the word says "empty, with waiters" (state 3).
    while sv.load(Ordering::Acquire) & syncvar::WAITERS == 0 {
        std::thread::yield_now();
    }
    assert_eq!(sv.load(Ordering::Acquire) >> 1 & 7, 3);
    // SAFETY: the syncvar is alive.
    assert_eq!(unsafe { qthread_syncvar_writeEF_const(w.0.cast(), 42) }, 0);
    group.wait();
    assert_eq!(got.load(Ordering::Relaxed), 42);
    // Read and emptied, nobody waiting: state 2, the value kept.
    assert_eq!(
        sv.load(Ordering::Acquire),
        (42 << syncvar::SHIFT) | syncvar::EMPTY
    );
    assert_eq!(table::entries(), 0);
}

#[test]
fn cantus_sync_blocks_tasks_and_threads_alike() {
    let _rt = runtime();
    let var: Arc<CantusSync> = Arc::new(
        // SAFETY: all-zero bytes are a valid empty variable (header contract).
        unsafe { std::mem::zeroed() },
    );
    let group = crate::par::TaskGroup::new();
    let total = Arc::new(AtomicU64::new(0));
    let mut threads = Vec::new();
    for k in 0..4 {
        let (v, t) = (var.clone(), total.clone());
        let reader = move || {
            for _ in 0..500 {
                let mut x = 0;
                let p = Arc::as_ptr(&v).cast_mut();
                // SAFETY: `v` keeps the variable alive.
                assert_eq!(unsafe { cantus_sync_read_fe(p, &mut x) }, OK);
                t.fetch_add(x, Ordering::Relaxed);
            }
        };
        if k < 2 {
            group.spawn(reader);
        } else {
            threads.push(std::thread::spawn(reader));
        }
    }
    let p = Arc::as_ptr(&var).cast_mut();
    for i in 0..2000 {
        // SAFETY: `var` is alive.
        assert_eq!(unsafe { cantus_sync_write_ef(p, i) }, OK);
    }
    for t in threads {
        t.join().unwrap();
    }
    group.wait();
    assert_eq!(total.load(Ordering::Relaxed), 1999 * 2000 / 2);
    // SAFETY: `var` is alive.
    assert_eq!(unsafe { cantus_sync_destroy(p) }, OK);
}

/// Per-address locks, counting sincs and barriers (value-less `KeySite`
/// states) under load from tasks and threads: mutual exclusion, every
/// round released, and no table entry left once all are idle, even for
/// sincs that were never finalised.
#[test]
fn locks_sincs_and_barriers_leave_the_table_empty() {
    use crate::ffi::qthread::barrier::{qt_barrier_create, qt_barrier_destroy, qt_barrier_enter};
    use crate::ffi::qthread::feb::{qthread_lock, qthread_unlock};
    use crate::ffi::qthread::sinc::{QtSinc, qt_sinc_init, qt_sinc_submit, qt_sinc_wait};

    let _rt = runtime();
    const PARTIES: usize = 6;
    const ROUNDS: usize = 300;
    let lock_key = Arc::new(AtomicU64::new(0));
    let counter = Arc::new(AtomicU64::new(0));
    let barrier = Word(qt_barrier_create(PARTIES, 0).cast());
    assert!(!barrier.0.is_null());
    let group = crate::par::TaskGroup::new();
    let mut threads = Vec::new();
    for k in 0..PARTIES {
        let (key, counter) = (lock_key.clone(), counter.clone());
        let body = move || {
            let a = key.as_ptr().cast_const();
            for round in 0..ROUNDS {
                assert_eq!(qthread_lock(a), 0);
                // A plain read-modify-write, protected by the lock.
                let v = counter.load(Ordering::Relaxed);
                if round % 32 == 0 {
                    crate::task::yield_now();
                }
                counter.store(v + 1, Ordering::Relaxed);
                assert_eq!(qthread_unlock(a), 0);
                // A counting sinc on this frame, never finalised.
                // SAFETY: all-zero bytes are a valid (dead) qt_sinc_t.
                let mut s: QtSinc = unsafe { std::mem::zeroed() };
                // SAFETY: `s` is a live local for all three calls.
                unsafe {
                    qt_sinc_init(&mut s, 0, std::ptr::null(), None, 2);
                    qt_sinc_submit(&mut s, std::ptr::null());
                    qt_sinc_submit(&mut s, std::ptr::null());
                    qt_sinc_wait(&mut s, std::ptr::null_mut());
                }
                // SAFETY: the barrier is destroyed only after the group.
                unsafe { qt_barrier_enter(barrier.get().cast()) };
                // After each round every party has bumped the counter.
                assert!(counter.load(Ordering::Relaxed) >= ((round + 1) * PARTIES) as u64);
            }
        };
        if k % 3 == 0 {
            threads.push(std::thread::spawn(body));
        } else {
            group.spawn(body);
        }
    }
    for t in threads {
        t.join().unwrap();
    }
    group.wait();
    assert_eq!(counter.load(Ordering::Relaxed), (PARTIES * ROUNDS) as u64);
    assert!(
        table::entries() >= 1,
        "an open barrier round keeps its entry"
    );
    // SAFETY: created above, nobody uses it any more.
    unsafe { qt_barrier_destroy(barrier.get().cast()) };
    assert_eq!(
        table::entries(),
        0,
        "idle locks, sincs and barriers take no room"
    );
}

/// Many words at once, more than share a fast slot each: forks' return
/// words emptied, a waiter queued on some of them (taking their slots to
/// the stripes) and the rest read without waiting, then every word filled
/// by tasks; each waiter gets its word's value and the table, slots
/// included, drains.
#[test]
fn fast_empties_hand_over_to_the_stripes_and_back() {
    let _rt = runtime();
    const WORDS: usize = 4096;
    let words: Arc<Vec<AtomicU64>> = Arc::new((0..WORDS).map(|_| AtomicU64::new(0)).collect());
    let word = |i: usize| Word(words[i].as_ptr());
    for i in 0..WORDS {
        // SAFETY: the word is a live, aligned u64.
        assert_eq!(unsafe { cantus_feb_empty(word(i).0) }, OK);
    }
    assert_eq!(
        table::entries(),
        WORDS,
        "every empty word is held somewhere"
    );
    let group = crate::par::TaskGroup::new();
    let got = Arc::new(Mutex::new(Vec::new()));
    // Waiters on every 16th word: they find it empty and queue.
    for i in (0..WORDS).step_by(16) {
        let (w, keep, got) = (word(i), words.clone(), got.clone());
        group.spawn(move || {
            let mut v = 0;
            // SAFETY: `keep` keeps the word alive.
            assert_eq!(unsafe { cantus_feb_read_ff(w.get(), &mut v) }, OK);
            got.lock().unwrap().push((i, v));
            drop(keep);
        });
    }
    // Fill every word from tasks: through the fast slot where nobody
    // waits, through the stripes where somebody does.
    for i in 0..WORDS {
        let (w, keep) = (word(i), words.clone());
        group.spawn(move || {
            // SAFETY: `keep` keeps the word alive.
            assert_eq!(unsafe { cantus_feb_write_xf(w.get(), 1000 + i as u64) }, OK);
            drop(keep);
        });
    }
    group.wait();
    let mut got = got.lock().unwrap().clone();
    got.sort_unstable();
    assert_eq!(got.len(), WORDS / 16);
    assert!(got.iter().all(|&(i, v)| v == 1000 + i as u64), "{got:?}");
    for i in 0..WORDS {
        let mut v = 0;
        // SAFETY: the word is alive; full now, so this does not wait.
        assert_eq!(unsafe { cantus_feb_read_ff(word(i).0, &mut v) }, OK);
        assert_eq!(v, 1000 + i as u64);
    }
    assert_eq!(table::entries(), 0, "slots and stripes drain");
    // Once drained, the fast path works again for the same words.
    for i in 0..WORDS {
        // SAFETY: the word is alive.
        assert_eq!(unsafe { cantus_feb_empty(word(i).0) }, OK);
        // SAFETY: as above.
        assert_eq!(unsafe { cantus_feb_fill(word(i).0) }, OK);
    }
    assert_eq!(table::entries(), 0);
}
