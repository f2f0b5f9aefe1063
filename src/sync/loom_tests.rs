//! Loom models of the full/empty engine: every interleaving of a few
//! threads over `SyncVar`, `SingleVar` and end counts, checking for lost
//! wake-ups (loom reports a deadlock when a waiter is never woken), wrong
//! values and overtaking. Waiters are outside threads (park/unpark) or,
//! with `run_as_task`, the loom stand-in for a task handle (`wait.rs`).
//! Run with:
//! `RUSTFLAGS="--cfg loom" cargo test --release --lib --target-dir target/loom loom`

use super::end_count::EndCount;
use super::wait::BlockKind;
use super::wait::loom_task::run_as_task;
use super::{SingleVar, SyncVar};
use loom::sync::Arc;
use loom::thread;

/// [`crate::loom::model`] with at most 3 forced preemptions per
/// execution (tokio's default), so the models finish in CI time.
fn model(f: impl Fn() + Sync + Send + 'static) {
    crate::loom::model(Some(3), f)
}

/// `model` with another preemption bound.
#[allow(dead_code)]
fn model_bounded(bound: usize, f: impl Fn() + Sync + Send + 'static) {
    crate::loom::model(Some(bound), f)
}

#[test]
fn loom_write_ef_read_fe_hand_off() {
    model(|| {
        let v = Arc::new(SyncVar::new());
        let w = v.clone();
        let t = thread::spawn(move || w.write_ef(7u32));
        assert_eq!(v.read_fe(), 7);
        t.join().unwrap();
        assert!(!v.is_full());
    });
}

#[test]
fn loom_write_ef_blocks_until_emptied() {
    model(|| {
        let v = Arc::new(SyncVar::with_value(1u32));
        let w = v.clone();
        let t = thread::spawn(move || w.write_ef(2));
        assert_eq!(v.read_fe(), 1);
        assert_eq!(v.read_fe(), 2);
        t.join().unwrap();
    });
}

#[test]
fn loom_read_ff_waiter_is_woken_and_leaves_it_full() {
    model(|| {
        let v = Arc::new(SyncVar::new());
        let r = v.clone();
        let t = thread::spawn(move || r.read_ff());
        v.write_ef(5u32);
        assert_eq!(t.join().unwrap(), 5);
        assert!(v.is_full());
    });
}

#[test]
fn loom_consumer_wakes_blocked_writer() {
    // The reader consumes the first value; the second write must wait for
    // that and be woken by it.
    model(|| {
        let v = Arc::new(SyncVar::new());
        let r = v.clone();
        let t = thread::spawn(move || r.read_fe());
        v.write_ef(5u32);
        v.write_ef(6);
        assert_eq!(t.join().unwrap(), 5);
        assert_eq!(v.read_xx(), Some(6));
    });
}

#[test]
fn loom_single_wakes_its_reader() {
    model(|| {
        let s = Arc::new(SingleVar::new());
        let r = s.clone();
        let t = thread::spawn(move || *r.read());
        s.write(9u32);
        assert_eq!(t.join().unwrap(), 9);
    });
}

#[test]
fn loom_end_count_reaches_zero_once_and_wakes_the_waiter() {
    model(|| {
        let c = Arc::new(EndCount::new(2));
        let (a, b) = (c.clone(), c.clone());
        let ta = thread::spawn(move || a.done_one());
        let tb = thread::spawn(move || b.done_one());
        c.wait_blocking(BlockKind::GroupWait);
        assert!(c.is_done());
        assert_eq!(c.count(), 0);
        ta.join().unwrap();
        tb.join().unwrap();
    });
}

#[test]
fn loom_end_count_two_waiters() {
    // Three threads with two spin-then-park waiters: every interleaving
    // with one forced preemption takes 0.1 s, with two more than 5 min, so
    // this model is bounded at one (raise LOOM_MAX_PREEMPTIONS to search
    // deeper). The two-thread models above run at bound 3.
    model_bounded(1, || {
        let c = Arc::new(EndCount::new(1));
        let (a, b) = (c.clone(), c.clone());
        let w = thread::spawn(move || a.wait_blocking(BlockKind::GroupWait));
        let d = thread::spawn(move || b.done_one());
        c.wait_blocking(BlockKind::GroupWait);
        w.join().unwrap();
        d.join().unwrap();
    });
}

/// A value whose `Clone` panics when it holds 0 (the other values clone).
#[derive(Debug, PartialEq)]
struct PanicsOnZero(u32);

impl Clone for PanicsOnZero {
    fn clone(&self) -> Self {
        if self.0 == 0 {
            panic!("loom model: clone of 0");
        }
        PanicsOnZero(self.0)
    }
}

/// Keeps the models' deliberate panics off stderr; other panics print as
/// usual.
fn quiet_deliberate_panics() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let default = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            let msg = info.payload().downcast_ref::<&str>().copied();
            if msg != Some("loom model: clone of 0") {
                default(info);
            }
        }));
    });
}

#[test]
fn loom_panicking_clone_releases_the_lock_and_keeps_waiters() {
    // A readFF whose clone panics, racing a writeEF that blocks while the
    // variable is full: the panic must release the lock, leave the variable
    // full with its value and keep the writer queued (WAITERS), so the
    // readFE that follows wakes it.
    quiet_deliberate_panics();
    model(|| {
        let v = Arc::new(SyncVar::with_value(PanicsOnZero(0)));
        let (r, w) = (v.clone(), v.clone());
        let reader = thread::spawn(move || {
            let got = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| r.read_ff()));
            assert!(got.is_err(), "the clone panicked");
            assert!(r.is_full(), "a panicking readFF leaves the variable full");
            r.read_fe()
        });
        let writer = thread::spawn(move || w.write_ef(PanicsOnZero(2)));
        assert_eq!(reader.join().unwrap(), PanicsOnZero(0));
        writer.join().unwrap();
        assert_eq!(v.read_ff(), PanicsOnZero(2));
    });
}

// The unified engine: direct hand-off and its fairness rule.

/// Yields to loom until `n` operations are queued on `v`.
fn until_queued<T>(v: &SyncVar<T>, n: usize) {
    while v.queued() < n {
        thread::yield_now();
    }
}

#[test]
fn loom_writer_hands_the_value_to_the_queued_reader() {
    // If the reader is queued when the writer fills the variable, the
    // writeEF completes the reader's readFE: the writer cannot take the
    // value back (its own try_read_fe finds the variable empty). If it is
    // not queued yet, the writer may take it, and writes again.
    model(|| {
        let v = Arc::new(SyncVar::new());
        let r = v.clone();
        let reader = thread::spawn(move || r.read_fe());
        let queued = v.queued_now();
        v.write_ef(7u32);
        let mine = v.try_read_fe();
        if queued {
            assert_eq!(mine, None, "the queued reader was overtaken");
        }
        if mine.is_some() {
            v.write_ef(8);
        }
        let got = reader.join().unwrap();
        assert_eq!(got, if mine.is_some() { 8 } else { 7 });
        assert!(!v.is_full());
    });
}

#[test]
fn loom_two_queued_readers_are_served_in_fifo_order() {
    // Three threads with yield loops: bounded at one preemption (0.5 s);
    // the queue order itself is fixed by the until_queued steps.
    model_bounded(1, || {
        let v = Arc::new(SyncVar::new());
        let (r1, r2) = (v.clone(), v.clone());
        let first = thread::spawn(move || r1.read_fe());
        until_queued(&v, 1);
        let second = thread::spawn(move || r2.read_fe());
        until_queued(&v, 2);
        v.write_ef(1u32);
        v.write_ef(2);
        assert_eq!(first.join().unwrap(), 1);
        assert_eq!(second.join().unwrap(), 2);
    });
}

#[test]
fn loom_task_waiter_is_woken_through_its_resume_queue() {
    // The reader is a task (the loom stand-in for a task handle): the wake
    // may come before it has suspended and must not be lost.
    model(|| {
        let v = Arc::new(SyncVar::new());
        let r = v.clone();
        let reader = thread::spawn(move || run_as_task(1, || r.read_fe()));
        v.write_ef(3u32);
        assert_eq!(reader.join().unwrap(), 3);
    });
}

#[test]
fn loom_task_writer_blocked_on_full_is_completed_by_a_reader() {
    model(|| {
        let v = Arc::new(SyncVar::with_value(1u32));
        let w = v.clone();
        let writer = thread::spawn(move || run_as_task(1, || w.write_ef(2)));
        assert_eq!(v.read_fe(), 1);
        writer.join().unwrap();
        assert_eq!(v.read_fe(), 2);
    });
}

#[test]
fn loom_end_count_waiter_unlinks_itself_racing_the_last_finisher() {
    // The cancellation path: a waiter (a task here) that queued itself
    // after the last finisher's fetch_sub unlinks its node and returns; a
    // waiter queued before is woken by the finisher. Either way it returns
    // exactly when the word is 0.
    model(|| {
        let c = Arc::new(EndCount::new(1));
        let d = c.clone();
        let finisher = thread::spawn(move || d.done_one());
        run_as_task(1, || c.wait_blocking(BlockKind::GroupWait));
        assert!(c.is_done());
        finisher.join().unwrap();
    });
}

#[test]
fn loom_copy_panic_during_hand_off_reaches_the_reader() {
    // A queued readFF whose value's clone panics when the writer hands it
    // a copy: the writer is unaffected, the reader gets the panic, and the
    // variable is full with the written value.
    quiet_deliberate_panics();
    model(|| {
        let v = Arc::new(SyncVar::new());
        let r = v.clone();
        let reader = thread::spawn(move || {
            std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| r.read_ff())).is_err()
        });
        v.write_ef(PanicsOnZero(0));
        assert!(reader.join().unwrap(), "the clone panicked in the reader");
        assert_eq!(v.read_fe(), PanicsOnZero(0));
    });
}

/// The fast empties (`fast_empty.rs`) beside a locked table that holds
/// one word's entry (`None`: the default, full): an empty made before
/// the filler starts, a fill racing a locked reader (which claims the
/// slot) and a lock-free reader. Every read that finds the word full
/// sees the filled value, and the slot and table end free.
#[test]
fn loom_fast_empty_fill_and_readers_against_the_table() {
    use super::fast_empty::Slots;
    use loom::sync::Mutex;
    use loom::sync::atomic::{AtomicU64, Ordering};

    struct World {
        slots: Slots<1>,
        word: AtomicU64,
        table: Mutex<Option<bool>>,
    }
    const W: usize = 8;

    impl World {
        /// A locked operation: `op` gets the word's full bit and may
        /// change it (and the value).
        fn locked<R>(&self, op: impl FnOnce(&mut bool, &AtomicU64) -> R) -> R {
            let mut entry = self.table.lock().unwrap();
            if let Some(w) = self.slots.claim(W) {
                assert_eq!(w, W);
                assert!(entry.is_none(), "the slot and the table both held W");
                *entry = Some(false);
            }
            let mut full = entry.unwrap_or(true);
            let r = op(&mut full, &self.word);
            *entry = if full { None } else { Some(false) };
            if entry.is_none() {
                self.slots.release(W);
            }
            r
        }

        fn fill(&self, v: u64) {
            if !self
                .slots
                .try_fill(W, || self.word.store(v, Ordering::Relaxed))
            {
                self.locked(|full, word| {
                    word.store(v, Ordering::Relaxed);
                    *full = true;
                });
            }
        }

        /// The value if full now.
        fn read(&self, fast: bool) -> Option<u64> {
            if fast {
                if let Some(v) = self
                    .slots
                    .read_full(W, || self.word.load(Ordering::Relaxed))
                {
                    return Some(v);
                }
            }
            self.locked(|full, word| full.then(|| word.load(Ordering::Relaxed)))
        }
    }

    model(|| {
        let world = Arc::new(World {
            slots: Slots::new(),
            word: AtomicU64::new(0),
            table: Mutex::new(None),
        });
        // The fork: empty the return word, then start the task.
        if !world.slots.try_empty(W) {
            world.locked(|full, _| *full = false);
        }
        let filler = {
            let world = world.clone();
            thread::spawn(move || world.fill(5))
        };
        let locked_reader = {
            let world = world.clone();
            thread::spawn(move || {
                if let Some(v) = world.read(false) {
                    assert_eq!(v, 5);
                }
            })
        };
        // The forker's readFF, polling.
        loop {
            match world.read(true) {
                Some(v) => {
                    assert_eq!(v, 5);
                    break;
                }
                None => thread::yield_now(),
            }
        }
        filler.join().unwrap();
        locked_reader.join().unwrap();
        assert!(world.table.lock().unwrap().is_none());
        assert_eq!(world.slots.read_full(W, || 1), Some(1), "slot free again");
    });
}

/// Two words that share a fast slot, each emptied then filled by its own
/// thread, one lock-free where it can, the other through the table (which
/// claims the slot and takes the first word over if the slot holds it):
/// neither word is ever both in the slot and in the table, each ends full
/// with its own value, and the slot ends free.
#[test]
fn loom_fast_empty_words_sharing_a_slot() {
    use super::fast_empty::Slots;
    use loom::sync::Mutex;
    use loom::sync::atomic::{AtomicU64, Ordering};
    use std::collections::HashMap;

    /// Two words whose slot is the same (found, not assumed).
    fn pair() -> (usize, usize) {
        let a = 8;
        let b = (2..)
            .map(|i| 8 * i)
            .find(|&b| Slots::<1>::index(b) == Slots::<1>::index(a))
            .unwrap();
        (a, b)
    }

    struct World {
        slots: Slots<1>,
        words: [AtomicU64; 2],
        keys: (usize, usize),
        /// The table: key -> full bit, for keys not in the default state.
        table: Mutex<HashMap<usize, bool>>,
    }

    impl World {
        fn word(&self, key: usize) -> &AtomicU64 {
            &self.words[usize::from(key != self.keys.0)]
        }

        fn locked(&self, key: usize, op: impl FnOnce(&mut bool, &AtomicU64)) {
            let mut table = self.table.lock().unwrap();
            if let Some(w) = self.slots.claim(key) {
                assert!(
                    table.insert(w, false).is_none(),
                    "word {w} in the slot and the table"
                );
            }
            let mut full = table.get(&key).copied().unwrap_or(true);
            op(&mut full, self.word(key));
            if full {
                table.remove(&key);
            } else {
                table.insert(key, false);
            }
            if table.is_empty() {
                self.slots.release(key);
            }
        }

        fn empty(&self, key: usize, fast: bool) {
            if !(fast && self.slots.try_empty(key)) {
                self.locked(key, |full, _| *full = false);
            }
        }

        fn fill(&self, key: usize, v: u64, fast: bool) {
            let word = self.word(key);
            if !(fast
                && self
                    .slots
                    .try_fill(key, || word.store(v, Ordering::Relaxed)))
            {
                self.locked(key, |full, word| {
                    assert!(!*full, "filled twice");
                    word.store(v, Ordering::Relaxed);
                    *full = true;
                });
            }
        }

        fn read(&self, key: usize) -> Option<u64> {
            let word = self.word(key);
            self.slots.read_full(key, || word.load(Ordering::Relaxed))
        }
    }

    model(|| {
        let world = Arc::new(World {
            slots: Slots::new(),
            words: [AtomicU64::new(0), AtomicU64::new(0)],
            keys: pair(),
            table: Mutex::new(HashMap::new()),
        });
        let (a, b) = world.keys;
        let other = {
            let world = world.clone();
            thread::spawn(move || {
                world.empty(b, false);
                world.fill(b, 22, true);
            })
        };
        world.empty(a, true);
        if let Some(v) = world.read(a) {
            // Only a fill could make it full, and nobody filled it yet.
            panic!("empty word read full ({v})");
        }
        world.fill(a, 11, true);
        other.join().unwrap();
        assert_eq!(world.read(a), Some(11));
        assert_eq!(world.read(b), Some(22));
        assert!(world.table.lock().unwrap().is_empty());
    });
}
