//! `forall`: data-parallel loops over index ranges, slices and mutable
//! chunks, with reductions and a choice of schedule.
//!
//! The default schedule, [`Schedule::Adaptive`], is lazy splitting in the
//! manner of Tascell (seed 001) applied to loops: the task running a range
//! works through it from the front in steps, and splits off the back half
//! of what remains only when some worker is idle and asking for work. A
//! loop of at least two grains is first cut into one part per worker
//! without asking (an unstolen part costs a deque push and pop); a loop
//! shorter than two grains runs as a plain serial loop, and a part that
//! finishes late is split again on demand.

use super::join::join;
use crate::config::DEFAULT_GRAIN;
use crate::sched::WorkerLocal;
use crate::sched::registry::Registry;
use std::cell::UnsafeCell;
use std::ops::Range;
use std::sync::atomic::{AtomicUsize, Ordering};

/// How a [`Forall`] divides its range among workers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Schedule {
    /// One contiguous block per worker, fixed in advance (OpenMP's
    /// `schedule(static)`).
    Static,
    /// Chunks of the given size handed out in order from a shared counter
    /// (OpenMP's `schedule(dynamic, chunk)`).
    Dynamic(usize),
    /// One part per worker up front if the loop has at least two grains,
    /// then split further only when a worker is idle and asks for work
    /// (the default).
    Adaptive,
}

/// A data-parallel loop over `range`; see [`forall`].
#[derive(Clone, Debug)]
#[must_use = "a Forall does nothing until for_each, for_each_range or a reduction runs it"]
pub struct Forall {
    range: Range<usize>,
    schedule: Schedule,
    grain: usize,
}

/// A parallel loop over `range`. Call [`Forall::for_each`],
/// [`Forall::for_each_range`] or a reduction to run it. It behaves the
/// same from `main`, from an outside thread and from inside a task, and
/// foralls nest. A panic in the body reaches the caller once every piece
/// has stopped. Running a loop outside tasks with no runtime running
/// panics.
///
/// ```
/// let rt = cantus::Runtime::builder().workers(2).build().unwrap();
/// let x: Vec<f64> = (0..10_000).map(|i| i as f64).collect();
/// let dot = rt.block_on(|| cantus::forall(0..x.len()).sum(|i| x[i] * 2.0));
/// assert_eq!(dot, 2.0 * (9_999.0 * 10_000.0 / 2.0));
/// ```
pub fn forall(range: Range<usize>) -> Forall {
    Forall {
        range,
        schedule: Schedule::Adaptive,
        grain: DEFAULT_GRAIN,
    }
}

impl Forall {
    /// Chooses the schedule.
    pub fn schedule(mut self, schedule: Schedule) -> Forall {
        self.schedule = schedule;
        self
    }

    /// Sets the adaptive grain: the most iterations between hunger checks
    /// and the smallest piece split off (at least 1); see
    /// [`DEFAULT_GRAIN`].
    pub fn grain(mut self, grain: usize) -> Forall {
        self.grain = grain.max(1);
        self
    }

    /// Runs `body(i)` for every index.
    #[track_caller]
    pub fn for_each<F>(self, body: F)
    where
        F: Fn(usize) + Sync,
    {
        self.for_each_range(|r| {
            for i in r {
                body(i)
            }
        })
    }

    /// Runs `body` on disjoint sub-ranges that together cover the range:
    /// the body's inner loop is a plain loop the compiler can vectorise.
    #[track_caller]
    pub fn for_each_range<F>(self, body: F)
    where
        F: Fn(Range<usize>) + Sync,
    {
        self.fold_reduce(|| (), |(), r| body(r), |(), ()| ())
    }

    /// The general reduction: each piece starts from `identity()`, folds
    /// its sub-ranges in with `fold`, and pieces are combined with
    /// `combine` in index order (so `combine` must be associative, need
    /// not be commutative).
    #[track_caller]
    pub fn fold_reduce<T, Id, Fold, Combine>(self, identity: Id, fold: Fold, combine: Combine) -> T
    where
        T: Send,
        Id: Fn() -> T + Sync,
        Fold: Fn(T, Range<usize>) -> T + Sync,
        Combine: Fn(T, T) -> T + Sync,
    {
        if self.range.start >= self.range.end {
            return identity();
        }
        let ops = Ops {
            identity: &identity,
            fold: &fold,
            combine: &combine,
        };
        if WorkerLocal::current().is_some_and(|l| l.in_task()) {
            return self.run(&ops);
        }
        crate::par::on_worker("forall", || self.run(&ops))
    }

    /// Reduces `map(i)` over the range with `op` from `identity`.
    #[track_caller]
    pub fn reduce<T, Id, Map, Op>(self, identity: Id, map: Map, op: Op) -> T
    where
        T: Send,
        Id: Fn() -> T + Sync,
        Map: Fn(usize) -> T + Sync,
        Op: Fn(T, T) -> T + Sync,
    {
        self.fold_reduce(&identity, |acc, r| r.fold(acc, |a, i| op(a, map(i))), &op)
    }

    /// The sum of `map(i)`.
    #[track_caller]
    pub fn sum<T, Map>(self, map: Map) -> T
    where
        T: Send + Default + std::ops::Add<Output = T>,
        Map: Fn(usize) -> T + Sync,
    {
        self.fold_reduce(
            T::default,
            |acc, r| r.fold(acc, |a, i| a + map(i)),
            |a, b| a + b,
        )
    }

    /// The smallest `map(i)`, or `None` for an empty range.
    #[track_caller]
    pub fn min<T, Map>(self, map: Map) -> Option<T>
    where
        T: Send + PartialOrd,
        Map: Fn(usize) -> T + Sync,
    {
        self.reduce(|| None, |i| Some(map(i)), |a, b| pick(a, b, |x, y| y < x))
    }

    /// The largest `map(i)`, or `None` for an empty range.
    #[track_caller]
    pub fn max<T, Map>(self, map: Map) -> Option<T>
    where
        T: Send + PartialOrd,
        Map: Fn(usize) -> T + Sync,
    {
        self.reduce(|| None, |i| Some(map(i)), |a, b| pick(a, b, |x, y| y > x))
    }

    fn run<T: Send>(self, ops: &Ops<'_, T>) -> T {
        let reg = &*WorkerLocal::current()
            .expect("forall runs in a task")
            .registry;
        let workers = reg.config.workers;
        match self.schedule {
            Schedule::Adaptive => adaptive(self.range, self.grain, workers, ops, reg),
            Schedule::Static => {
                let len = self.range.end - self.range.start;
                let blocks = workers.min(len);
                let block = |b: usize| {
                    let lo = self.range.start + len * b / blocks;
                    lo..self.range.start + len * (b + 1) / blocks
                };
                partials(blocks, |b| (ops.fold)((ops.identity)(), block(b)), ops)
            }
            Schedule::Dynamic(chunk) => {
                let chunk = chunk.max(1);
                let len = self.range.end - self.range.start;
                let chunks = len.div_ceil(chunk);
                let slots: Slots<T> = Slots((0..chunks).map(|_| UnsafeCell::new(None)).collect());
                let next = AtomicUsize::new(0);
                crate::par::coforall(workers.min(chunks), |_| {
                    crate::trace::relabel(crate::trace::task_kind::FORALL);
                    loop {
                        let c = next.fetch_add(1, Ordering::Relaxed);
                        if c >= chunks {
                            break;
                        }
                        let lo = self.range.start + c * chunk;
                        let v = (ops.fold)((ops.identity)(), lo..(lo + chunk).min(self.range.end));
                        // SAFETY: chunk c is claimed by exactly one task
                        // through the counter.
                        unsafe { slots.set(c, v) };
                    }
                });
                slots.combine(ops)
            }
        }
    }
}

struct Ops<'a, T> {
    identity: &'a (dyn Fn() -> T + Sync),
    fold: &'a (dyn Fn(T, Range<usize>) -> T + Sync),
    combine: &'a (dyn Fn(T, T) -> T + Sync),
}

fn pick<T>(a: Option<T>, b: Option<T>, better: impl Fn(&T, &T) -> bool) -> Option<T> {
    match (a, b) {
        (Some(x), Some(y)) => Some(if better(&x, &y) { y } else { x }),
        (x, None) => x,
        (None, y) => y,
    }
}

/// The first step of an adaptive loop is `grain / SLOW_START`; each step
/// doubles until it reaches `grain`.
const SLOW_START: usize = 16;

/// Lazy splitting, after an eager start.
///
/// A loop of at least two grains is first cut into `pieces` parts (one
/// per worker) with `join`, without asking whether anyone is idle: an
/// unstolen part costs a deque push and pop, and a worker that is just
/// finishing something else finds the part at its next steal instead of
/// waiting until the owner notices it is hungry. Each part then runs from
/// the front; when a worker is hungry and enough remains, it splits the
/// rest in two, so the hungry worker can steal the back half.
///
/// Steps start short and double up to `grain` ("slow start"), so a
/// worker that turns idle just after a part began is noticed after a few
/// dozen iterations rather than a whole grain.
fn adaptive<T: Send>(
    range: Range<usize>,
    grain: usize,
    pieces: usize,
    ops: &Ops<'_, T>,
    reg: &Registry,
) -> T {
    let (lo, hi) = (range.start, range.end);
    if pieces > 1 && hi - lo >= 2 * grain {
        let left = pieces / 2;
        let mid = lo + ((hi - lo) as u128 * left as u128 / pieces as u128) as usize;
        let (a, b) = join(
            || adaptive(lo..mid, grain, left, ops, reg),
            || adaptive(mid..hi, grain, pieces - left, ops, reg),
        );
        return (ops.combine)(a, b);
    }
    lazy(range, grain, ops, reg)
}

/// The lazy part of [`adaptive`]: split only for a hungry worker.
fn lazy<T: Send>(range: Range<usize>, grain: usize, ops: &Ops<'_, T>, reg: &Registry) -> T {
    crate::trace::relabel(crate::trace::task_kind::FORALL);
    let mut acc = (ops.identity)();
    let (mut lo, hi) = (range.start, range.end);
    let mut step = (grain / SLOW_START).max(1);
    while lo < hi {
        if hi - lo >= 2 * grain && reg.idle.idle() > 0 {
            let mid = lo + (hi - lo) / 2;
            let (a, b) = join(
                || lazy(lo..mid, grain, ops, reg),
                || lazy(mid..hi, grain, ops, reg),
            );
            return (ops.combine)((ops.combine)(acc, a), b);
        }
        let end = lo + step.min(hi - lo);
        acc = (ops.fold)(acc, lo..end);
        lo = end;
        step = (step * 2).min(grain);
    }
    acc
}

/// Runs `part(b)` for `b` in `0..n` as tasks and combines in order.
fn partials<T: Send>(n: usize, part: impl Fn(usize) -> T + Sync, ops: &Ops<'_, T>) -> T {
    let slots: Slots<T> = Slots((0..n).map(|_| UnsafeCell::new(None)).collect());
    crate::par::coforall(n, |b| {
        crate::trace::relabel(crate::trace::task_kind::FORALL);
        let v = part(b);
        // SAFETY: index b writes only slot b.
        unsafe { slots.set(b, v) };
    });
    slots.combine(ops)
}

struct Slots<T>(Vec<UnsafeCell<Option<T>>>);

// SAFETY: every slot is written by exactly one task (see the callers), and
// read only after the coforall that wrote them has finished.
unsafe impl<T: Send> Sync for Slots<T> {}

impl<T: Send> Slots<T> {
    /// # Safety
    /// No other task may access slot `i` concurrently.
    unsafe fn set(&self, i: usize, v: T) {
        // SAFETY: per the contract, we have exclusive access to slot i.
        unsafe { *self.0[i].get() = Some(v) };
    }

    fn combine(self, ops: &Ops<'_, T>) -> T {
        self.0
            .into_iter()
            .filter_map(UnsafeCell::into_inner)
            .fold((ops.identity)(), |a, b| (ops.combine)(a, b))
    }
}

/// A parallel loop over the elements of a mutable slice: `body(i, &mut
/// slice[i])`.
///
/// ```
/// let rt = cantus::Runtime::builder().workers(2).build().unwrap();
/// let mut v = vec![1u32; 5000];
/// rt.block_on(|| cantus::forall_mut(&mut v, |i, x| *x += i as u32));
/// assert_eq!(v[4999], 5000);
/// ```
#[track_caller]
pub fn forall_mut<T, F>(slice: &mut [T], body: F)
where
    T: Send,
    F: Fn(usize, &mut T) + Sync,
{
    forall_chunks_mut(slice, 1, |c, chunk| body(c, &mut chunk[0]));
}

/// A parallel loop over `chunk_size` pieces of a mutable slice (the last
/// may be shorter): `body(chunk_index, chunk)`. Panics if `chunk_size`
/// is 0.
#[track_caller]
pub fn forall_chunks_mut<T, F>(slice: &mut [T], chunk_size: usize, body: F)
where
    T: Send,
    F: Fn(usize, &mut [T]) + Sync,
{
    assert!(
        chunk_size > 0,
        "forall_chunks_mut: chunk_size must be positive"
    );
    let len = slice.len();
    let base = SendPtr(slice.as_mut_ptr());
    let chunks = len.div_ceil(chunk_size);
    forall(0..chunks).for_each_range(|r| {
        let base = &base;
        for c in r {
            let lo = c * chunk_size;
            let n = chunk_size.min(len - lo);
            // SAFETY: chunk c covers [lo, lo + n), inside the slice and
            // disjoint from every other chunk; each chunk index is visited
            // exactly once, and the slice is borrowed mutably for the
            // whole loop.
            let chunk = unsafe { std::slice::from_raw_parts_mut(base.0.add(lo), n) };
            body(c, chunk);
        }
    });
}

struct SendPtr<T>(*mut T);
// SAFETY: used only to hand disjoint sub-slices of a `&mut [T]` with
// T: Send to tasks (see forall_chunks_mut).
unsafe impl<T: Send> Sync for SendPtr<T> {}
