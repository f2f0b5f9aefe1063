//! `cantus-bench deque`: cantus's own Chase-Lev deque
//! (`src/sched/deque/`, included here by path since it is crate-private)
//! against `crossbeam_deque::Worker` (LIFO), the deque the scheduler uses
//! today, with a two-word element (a job reference) and a four-word one
//! (the size of the scheduler's `Task`, as `[usize; 4]`).
//!
//! Patterns, each as nanoseconds per element:
//!
//! - `pushpop`: the owner pushes one element and pops it back, as an
//!   unstolen `join` does;
//! - `burst`: the owner pushes 32 elements, then pops them, as nested
//!   joins do;
//! - `steal`: the owner pushes a batch, one thief (the same thread, so
//!   uncontended) steals all of it;
//! - `contended`: the owner pushes elements in bursts and pops half of
//!   each burst, while thieves on other threads steal all along; the
//!   figure is wall time per element. Noisy where cores are few.
//!
//! The figures are `deque.<pattern>.<words>w` (cantus's deque) and
//! `deque.<pattern>.<words>w.crossbeam`, with their ratio.

use cantus::__bench::deque as imp;

use crate::Options;
use crate::stats::{Samples, figure, note, ns_per, ratio, section, time};
use std::hint::black_box;
use std::sync::Barrier;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::thread;

/// Elements per repetition (divided by [`QUICK_DIVISOR`] with `--quick`).
const PUSHPOP: usize = 20_000_000;
const BURSTS: usize = 500_000;
const BURST: usize = 32;
const STEAL_BATCH: usize = 1024;
const STEAL_ROUNDS: usize = 10_000;
const CONTENDED: usize = 4_000_000;
const QUICK_DIVISOR: usize = 10;

/// The owner's end of a deque under test.
trait Owner<T>: Send + Sized {
    type Thief: Thief<T>;
    fn create() -> Self;
    fn push(&self, v: T);
    fn pop(&self) -> Option<T>;
    fn stealer(&self) -> Self::Thief;
}

/// A thief's end: `steal` retries lost races and returns `None` when the
/// deque looked empty.
trait Thief<T>: Send + Sync + Clone {
    fn steal(&self) -> Option<T>;
}

impl<T: imp::Element> Owner<T> for imp::Worker<T> {
    type Thief = imp::Stealer<T>;
    fn create() -> Self {
        imp::Worker::new()
    }
    #[inline(always)]
    fn push(&self, v: T) {
        imp::Worker::push(self, v)
    }
    #[inline(always)]
    fn pop(&self) -> Option<T> {
        imp::Worker::pop(self)
    }
    fn stealer(&self) -> Self::Thief {
        imp::Worker::stealer(self)
    }
}

impl<T: imp::Element> Thief<T> for imp::Stealer<T> {
    #[inline(always)]
    fn steal(&self) -> Option<T> {
        loop {
            match imp::Stealer::steal(self) {
                imp::Steal::Success(v) => return Some(v),
                imp::Steal::Empty => return None,
                imp::Steal::Retry => {}
            }
        }
    }
}

impl<T: Send> Owner<T> for crossbeam_deque::Worker<T> {
    type Thief = crossbeam_deque::Stealer<T>;
    fn create() -> Self {
        crossbeam_deque::Worker::new_lifo()
    }
    #[inline(always)]
    fn push(&self, v: T) {
        crossbeam_deque::Worker::push(self, v)
    }
    #[inline(always)]
    fn pop(&self) -> Option<T> {
        crossbeam_deque::Worker::pop(self)
    }
    fn stealer(&self) -> Self::Thief {
        crossbeam_deque::Worker::stealer(self)
    }
}

impl<T: Send> Thief<T> for crossbeam_deque::Stealer<T> {
    #[inline(always)]
    fn steal(&self) -> Option<T> {
        loop {
            match crossbeam_deque::Stealer::steal(self) {
                crossbeam_deque::Steal::Success(v) => return Some(v),
                crossbeam_deque::Steal::Empty => return None,
                crossbeam_deque::Steal::Retry => {}
            }
        }
    }
}

/// An element of `W` words: built from a counter, so nothing folds away.
trait Elem: Copy + Send + 'static {
    const WORDS: usize;
    fn make(i: usize) -> Self;
    fn key(self) -> usize;
}

impl<const W: usize> Elem for [usize; W] {
    const WORDS: usize = W;
    #[inline(always)]
    fn make(i: usize) -> Self {
        let mut a = [i; W];
        a[W - 1] = !i;
        a
    }
    #[inline(always)]
    fn key(self) -> usize {
        self[0]
    }
}

/// `n` push+pop pairs; ns per pair.
#[inline(never)]
fn pushpop<T: Elem, D: Owner<T>>(d: &D, n: usize) -> f64 {
    let (t, ()) = time(|| {
        for i in 0..n {
            d.push(T::make(black_box(i)));
            black_box(d.pop());
        }
    });
    ns_per(t, n as u64)
}

/// `n` bursts of [`BURST`] pushes then as many pops; ns per element.
#[inline(never)]
fn burst<T: Elem, D: Owner<T>>(d: &D, n: usize) -> f64 {
    let (t, ()) = time(|| {
        for i in 0..n {
            for j in 0..BURST {
                d.push(T::make(black_box(i + j)));
            }
            for _ in 0..BURST {
                black_box(d.pop());
            }
        }
    });
    ns_per(t, (n * BURST) as u64)
}

/// `rounds` batches pushed by the owner and stolen by the same thread;
/// ns per element (a push and a steal).
#[inline(never)]
fn steal_uncontended<T: Elem, D: Owner<T>>(d: &D, rounds: usize) -> f64 {
    let s = d.stealer();
    let (t, ()) = time(|| {
        for r in 0..rounds {
            for j in 0..STEAL_BATCH {
                d.push(T::make(black_box(r + j)));
            }
            while let Some(v) = s.steal() {
                black_box(v);
            }
        }
    });
    ns_per(t, (rounds * STEAL_BATCH) as u64)
}

/// The owner pushes `n` elements in bursts (popping half of each) while
/// `thieves` threads steal; ns of wall time per element. Checks that
/// every element was taken once (by the sum of keys).
fn contended<T: Elem, D: Owner<T>>(n: usize, thieves: usize) -> f64 {
    let d = D::create();
    let done = AtomicBool::new(false);
    let stolen = AtomicUsize::new(0);
    let stolen_sum = AtomicUsize::new(0);
    let start = Barrier::new(thieves + 1);
    let mut popped_sum = 0usize;
    let mut elapsed = std::time::Duration::ZERO;
    thread::scope(|sc| {
        for _ in 0..thieves {
            let s = d.stealer();
            let (done, stolen, stolen_sum, start) = (&done, &stolen, &stolen_sum, &start);
            sc.spawn(move || {
                start.wait();
                let (mut count, mut sum) = (0, 0usize);
                loop {
                    match s.steal() {
                        Some(v) => {
                            count += 1;
                            sum = sum.wrapping_add(v.key());
                        }
                        None if done.load(Ordering::Acquire) => break,
                        None => std::hint::spin_loop(),
                    }
                }
                // One last look: `done` was set after the owner drained.
                while let Some(v) = s.steal() {
                    count += 1;
                    sum = sum.wrapping_add(v.key());
                }
                stolen.fetch_add(count, Ordering::Relaxed);
                stolen_sum.fetch_add(sum, Ordering::Relaxed);
            });
        }
        start.wait();
        let (t, ()) = time(|| {
            let mut i = 0;
            let mut x = 0x2545_f491_4f6c_dd1du64;
            while i < n {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                let b = (1 + (x % 64) as usize).min(n - i);
                for _ in 0..b {
                    d.push(T::make(i));
                    i += 1;
                }
                for _ in 0..b / 2 {
                    match d.pop() {
                        Some(v) => popped_sum = popped_sum.wrapping_add(v.key()),
                        None => break,
                    }
                }
            }
            while let Some(v) = d.pop() {
                popped_sum = popped_sum.wrapping_add(v.key());
            }
        });
        elapsed = t;
        done.store(true, Ordering::Release);
    });
    let expected = (0..n).fold(0usize, |a, k| a.wrapping_add(k));
    assert_eq!(
        popped_sum.wrapping_add(stolen_sum.load(Ordering::Relaxed)),
        expected,
        "an element was lost or taken twice"
    );
    ns_per(elapsed, n as u64)
}

/// Runs `mine` and `peer` alternately `reps` times (so that noise hits
/// both alike) and prints both figures and their ratio.
fn compare(name: &str, reps: usize, mut mine: impl FnMut() -> f64, mut peer: impl FnMut() -> f64) {
    let (mut a, mut b) = (Samples::new(), Samples::new());
    // One warm-up of each.
    black_box((mine(), peer()));
    for _ in 0..reps {
        a.push(mine());
        b.push(peer());
    }
    let m = figure(name, &a, "ns");
    let p = figure(&format!("{name}.crossbeam"), &b, "ns");
    ratio(name, "crossbeam", m, p);
}

fn run_words<T>(opts: &Options, reps: usize, thieves: usize)
where
    T: Elem + imp::Element,
{
    let div = if opts.quick { QUICK_DIVISOR } else { 1 };
    let w = T::WORDS;
    type Mine<T> = imp::Worker<T>;
    type Peer<T> = crossbeam_deque::Worker<T>;
    section(&format!("deque {w}w"), || {
        let (mine, peer) = (Mine::<T>::create(), Peer::<T>::create());
        compare(
            &format!("deque.pushpop.{w}w"),
            reps,
            || pushpop::<T, _>(&mine, PUSHPOP / div),
            || pushpop::<T, _>(&peer, PUSHPOP / div),
        );
        compare(
            &format!("deque.burst.{w}w"),
            reps,
            || burst::<T, _>(&mine, BURSTS / div),
            || burst::<T, _>(&peer, BURSTS / div),
        );
        compare(
            &format!("deque.steal.{w}w"),
            reps,
            || steal_uncontended::<T, _>(&mine, STEAL_ROUNDS / div),
            || steal_uncontended::<T, _>(&peer, STEAL_ROUNDS / div),
        );
        compare(
            &format!("deque.contended.{w}w"),
            reps,
            || contended::<T, Mine<T>>(CONTENDED / div, thieves),
            || contended::<T, Peer<T>>(CONTENDED / div, thieves),
        );
    });
}

pub(crate) fn run(opts: &Options) {
    let reps = opts.reps.unwrap_or(if opts.quick { 3 } else { 9 });
    let cpus = thread::available_parallelism().map_or(1, |n| n.get());
    let thieves = (cpus - 1).clamp(1, 3);
    note(&format!(
        "deque: {reps} reps; contended: 1 owner and {thieves} thieves on {cpus} CPUs"
    ));
    run_words::<[usize; 2]>(opts, reps, thieves);
    run_words::<[usize; 4]>(opts, reps, thieves);
}
