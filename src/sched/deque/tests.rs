//! Unit and stress tests of the deque (the loom models are in
//! `loom_tests.rs`). Self-contained (std only), since the benchmark crate
//! includes this module's source too.

use super::{Element, Steal, Stealer, Worker};
use std::sync::Barrier;
use std::sync::atomic::{AtomicBool, AtomicU8, AtomicUsize, Ordering};
use std::thread;

/// A two-word element (a function and the data it runs on), for tests
/// that run what they pop or steal.
#[derive(Clone, Copy, Debug)]
#[repr(C)]
struct JobRef {
    execute: unsafe fn(*const ()),
    data: *const (),
}

// SAFETY: `JobRef::new`'s contract: the job may be run from any thread.
unsafe impl Send for JobRef {}
// SAFETY: two pointer-sized fields, so no padding, and both are always
// initialized (a function pointer and a raw pointer).
unsafe impl Element for JobRef {}

impl JobRef {
    /// A reference to the job at `data`, run by `execute(data)`.
    ///
    /// # Safety
    /// Whoever ends up holding the reference may call `execute(data)` once,
    /// from any thread: `data` must stay valid until then and whatever it
    /// refers to must be safe to use from another thread.
    #[inline]
    unsafe fn new(execute: unsafe fn(*const ()), data: *const ()) -> JobRef {
        JobRef { execute, data }
    }

    /// The job's data pointer, which identifies the job.
    #[inline]
    fn data(self) -> *const () {
        self.data
    }

    /// Runs the job.
    ///
    /// # Safety
    /// Called at most once per job, under `new`'s contract.
    #[inline]
    unsafe fn execute(self) {
        // SAFETY: forwarded contract of `new`.
        unsafe { (self.execute)(self.data) }
    }
}

fn steal<T: Element>(s: &Stealer<T>) -> Option<T> {
    loop {
        match s.steal() {
            Steal::Success(v) => return Some(v),
            Steal::Empty => return None,
            Steal::Retry => {}
        }
    }
}

#[test]
fn owner_pops_newest_first_thieves_steal_oldest_first() {
    let w = Worker::<usize>::new();
    let s = w.stealer();
    assert!(w.is_empty() && s.is_empty());
    assert_eq!(w.pop(), None);
    assert_eq!(s.steal(), Steal::Empty);
    for i in 0..5 {
        w.push(i);
    }
    assert_eq!((w.len(), s.len()), (5, 5));
    assert_eq!(w.pop(), Some(4));
    assert_eq!(s.steal(), Steal::Success(0));
    assert_eq!(s.clone().steal(), Steal::Success(1));
    assert_eq!(w.pop(), Some(3));
    assert_eq!(w.pop(), Some(2));
    assert_eq!(w.pop(), None);
    assert_eq!(s.steal(), Steal::Empty);
    assert!(w.is_empty() && s.is_empty());
    // Usable again after running dry from both ends.
    w.push(7);
    assert_eq!(s.steal(), Steal::Success(7));
    w.push(8);
    assert_eq!(w.pop(), Some(8));
    assert_eq!(w.len(), 0);
}

#[test]
fn growth_keeps_every_element_in_order() {
    let w = Worker::<[usize; 4]>::with_capacity(1);
    let s = w.stealer();
    assert_eq!(w.capacity(), 1);
    for i in 0..1000 {
        w.push([i, i + 1, i + 2, i + 3]);
    }
    assert_eq!(w.capacity(), 1024);
    assert_eq!(w.len(), 1000);
    for i in 0..500 {
        assert_eq!(steal(&s), Some([i, i + 1, i + 2, i + 3]));
    }
    for i in (500..1000).rev() {
        assert_eq!(w.pop(), Some([i, i + 1, i + 2, i + 3]));
    }
    assert_eq!(w.pop(), None);
}

#[test]
fn slots_are_reused_around_the_ring_without_growth() {
    let w = Worker::<[usize; 2]>::with_capacity(4);
    let s = w.stealer();
    for i in 0..10_000 {
        w.push([i, !i]);
        w.push([i, i]);
        assert_eq!(steal(&s), Some([i, !i]));
        assert_eq!(w.pop(), Some([i, i]));
    }
    assert_eq!(w.capacity(), 4);
}

#[test]
fn fewer_than_counts_steals_once_it_looks_at_top() {
    let w = Worker::<usize>::with_capacity(4);
    let s = w.stealer();
    for i in 0..10 {
        w.push(i);
    }
    assert!(w.fewer_than(11));
    assert!(!w.fewer_than(10));
    for i in 0..6 {
        assert_eq!(steal(&s), Some(i));
    }
    // The owner's bound still counts the stolen ones; the answer reads top.
    assert!(w.fewer_than(5));
    assert!(!w.fewer_than(4));
    assert_eq!(w.pop(), Some(9));
    assert!(w.fewer_than(4));
    assert!(!w.fewer_than(3));
}

#[test]
fn pop_if_leaves_a_rejected_element_in_place() {
    let w = Worker::<usize>::with_capacity(2);
    let s = w.stealer();
    assert_eq!(w.pop_if(|_| true), None);
    w.push(1);
    w.push(2);
    assert_eq!(w.pop_if(|&v| v == 1), None);
    assert_eq!(w.len(), 2);
    assert_eq!(w.pop_if(|&v| v == 2), Some(2));
    // The last element, rejected, goes back too.
    assert_eq!(w.pop_if(|&v| v == 2), None);
    assert_eq!(steal(&s), Some(1));
}

#[test]
fn job_refs_run_and_identify_their_job() {
    unsafe fn bump(data: *const ()) {
        // SAFETY: `data` is the counter below, alive while the jobs run.
        unsafe { (*(data as *const AtomicUsize)).fetch_add(1, Ordering::Relaxed) };
    }
    let count = AtomicUsize::new(0);
    let data = &count as *const AtomicUsize as *const ();
    let w = Worker::<JobRef>::new();
    let s = w.stealer();
    for _ in 0..3 {
        // SAFETY: the counter outlives the jobs, and atomics may be
        // touched from any thread.
        w.push(unsafe { JobRef::new(bump, data) });
    }
    let stolen = thread::scope(|sc| sc.spawn(|| steal(&s)).join().unwrap()).unwrap();
    assert_eq!(stolen.data(), data);
    // SAFETY: each job reference is executed once.
    unsafe { stolen.execute() };
    let mine = w.pop_if(|j| j.data() == data).unwrap();
    // SAFETY: as above.
    unsafe { mine.execute() };
    // SAFETY: as above.
    unsafe { w.pop().unwrap().execute() };
    assert_eq!(count.load(Ordering::Relaxed), 3);
}

#[test]
fn handles_are_send_and_stealers_sync() {
    fn send<T: Send>() {}
    fn sync<T: Sync>() {}
    send::<Worker<JobRef>>();
    send::<Stealer<JobRef>>();
    sync::<Stealer<JobRef>>();
    send::<Worker<[usize; 4]>>();
    sync::<Stealer<[usize; 4]>>();
}

/// An element whose four words are all derived from one number, so a
/// torn element (words of two pushes) is detected.
fn element(k: usize) -> [usize; 4] {
    [k, !k, k.wrapping_mul(0x9e37_79b9_7f4a_7c15), k ^ 0x5555]
}

fn check(e: [usize; 4]) -> usize {
    assert_eq!(e, element(e[0]), "a torn element");
    e[0]
}

/// The stress tests' owner: pushes elements `0..n` in bursts of 1..=257,
/// each followed by popping about half, then pops what is left; hands
/// each element it pops, checked whole, to `took`. Stops pushing early
/// once `stop` says so.
fn owner_bursts(
    w: &Worker<[usize; 4]>,
    n: usize,
    stop: &dyn Fn() -> bool,
    mut took: impl FnMut(usize),
) {
    let mut next = 0usize;
    let mut x = 0x2545_f491_4f6c_dd1du64;
    while next < n && !stop() {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let burst = (1 + (x % 257) as usize).min(n - next);
        for _ in 0..burst {
            w.push(element(next));
            next += 1;
        }
        for _ in 0..burst / 2 {
            match w.pop() {
                Some(e) => took(check(e)),
                None => break,
            }
        }
    }
    while let Some(e) = w.pop() {
        took(check(e));
    }
}

/// Sets its flag when dropped, unwinding included.
struct SetOnDrop<'a>(&'a AtomicBool);

impl Drop for SetOnDrop<'_> {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Release);
    }
}

/// The stress tests' record of which elements of `0..n` were taken: each
/// at most once, and all of them by the end.
struct Ledger {
    seen: Vec<AtomicU8>,
    taken: AtomicUsize,
}

impl Ledger {
    fn new(n: usize) -> Ledger {
        Ledger {
            seen: (0..n).map(|_| AtomicU8::new(0)).collect(),
            taken: AtomicUsize::new(0),
        }
    }

    /// Records element `k` as taken. Taken twice, it sets `stop` first, so
    /// that the other threads wind down and the test fails rather than
    /// hangs, then panics.
    fn record(&self, k: usize, stop: &AtomicBool) {
        if self.seen[k].fetch_add(1, Ordering::Relaxed) != 0 {
            stop.store(true, Ordering::Release);
            panic!("element {k} taken twice");
        }
        self.taken.fetch_add(1, Ordering::Relaxed);
    }

    /// Every element was taken exactly once.
    fn assert_each_once(&self) {
        assert_eq!(self.taken.load(Ordering::Relaxed), self.seen.len());
        assert!(self.seen.iter().all(|s| s.load(Ordering::Relaxed) == 1));
    }
}

/// One owner pushing and popping 10^6 elements in bursts of varying size,
/// three thieves stealing all along: every element is taken exactly once,
/// whole, and the deque grows from a small buffer.
#[test]
fn stress_one_owner_three_thieves() {
    const N: usize = 1_000_000;
    const THIEVES: usize = 3;
    let ledger = Ledger::new(N);
    let stolen_sum = AtomicUsize::new(0);
    let done = AtomicBool::new(false);
    let start = Barrier::new(THIEVES + 1);
    let w = Worker::<[usize; 4]>::with_capacity(2);
    // A second take sets `done`: the thieves stop once the deque is empty.
    let record = |k: usize| ledger.record(k, &done);
    let mut popped_sum = 0usize;
    let mut stolen_counts = Vec::new();
    thread::scope(|sc| {
        let thieves: Vec<_> = (0..THIEVES)
            .map(|_| {
                let s = w.stealer();
                let (record, done, start, stolen_sum) = (&record, &done, &start, &stolen_sum);
                sc.spawn(move || {
                    start.wait();
                    let mut n = 0usize;
                    loop {
                        match s.steal() {
                            Steal::Success(e) => {
                                let k = check(e);
                                record(k);
                                stolen_sum.fetch_add(k, Ordering::Relaxed);
                                n += 1;
                            }
                            Steal::Retry => {}
                            Steal::Empty => {
                                if done.load(Ordering::Acquire) && s.is_empty() {
                                    return n;
                                }
                                std::hint::spin_loop();
                            }
                        }
                    }
                })
            })
            .collect();
        start.wait();
        // `done` also when the owner's part panics (a torn element).
        let stop = SetOnDrop(&done);
        owner_bursts(&w, N, &|| false, |k| {
            record(k);
            popped_sum += k;
        });
        drop(stop);
        stolen_counts = thieves.into_iter().map(|t| t.join().unwrap()).collect();
    });
    ledger.assert_each_once();
    assert_eq!(
        popped_sum + stolen_sum.load(Ordering::Relaxed),
        N * (N - 1) / 2
    );
    assert!(w.capacity() > 2, "the deque grew");
    eprintln!(
        "deque stress: {} stolen by {THIEVES} thieves {stolen_counts:?}, capacity {}",
        stolen_counts.iter().sum::<usize>(),
        w.capacity()
    );
}

/// Two thieves racing the owner for single elements: the last-element
/// race, over and over. Each element is taken exactly once.
#[test]
fn stress_last_element_race() {
    const ROUNDS: usize = 100_000;
    unsafe fn nothing(_: *const ()) {}
    let w = Worker::<JobRef>::with_capacity(1);
    let seen: Vec<AtomicU8> = (0..=ROUNDS).map(|_| AtomicU8::new(0)).collect();
    let go = AtomicUsize::new(0);
    let done = AtomicBool::new(false);
    let take = |j: JobRef| {
        let round = j.data() as usize;
        assert_eq!(
            seen[round].fetch_add(1, Ordering::Relaxed),
            0,
            "round {round} taken twice"
        );
    };
    thread::scope(|sc| {
        for _ in 0..2 {
            let s = w.stealer();
            let (go, done, take) = (&go, &done, &take);
            sc.spawn(move || {
                let mut last = 0;
                while !done.load(Ordering::Acquire) {
                    // One steal attempt per round the owner announces.
                    let g = go.load(Ordering::Acquire);
                    if g == last {
                        std::hint::spin_loop();
                        continue;
                    }
                    last = g;
                    if let Steal::Success(j) = s.steal() {
                        take(j);
                    }
                }
            });
        }
        // Set when the owner's part ends, by a panic too (a round taken
        // twice), so that the thieves stop and the test fails, not hangs.
        let stop = SetOnDrop(&done);
        for round in 1..=ROUNDS {
            // SAFETY: `nothing` ignores its data and is never run anyway.
            w.push(unsafe { JobRef::new(nothing, round as *const ()) });
            go.store(round, Ordering::Release);
            for _ in 0..(round % 64) {
                std::hint::spin_loop();
            }
            if let Some(j) = w.pop() {
                take(j);
            }
            // Whoever took it, the deque is empty before the next round.
            assert!(w.is_empty());
        }
        drop(stop);
    });
    assert!(seen[1..].iter().all(|s| s.load(Ordering::Relaxed) == 1));
}

#[test]
fn a_batch_steal_takes_half_rounded_up_oldest_first() {
    let all = |_: &usize| true;
    let w = Worker::<usize>::new();
    let s = w.stealer();
    let mine = Worker::<usize>::new();
    for k in 0..9 {
        w.push(k);
    }
    // Nine queued: five taken onto `mine`, oldest first: its thieves take
    // 0 first, its owner pops 4 first.
    assert_eq!(s.steal_into(&mine, 16, all), 5);
    assert_eq!(w.len(), 4);
    assert_eq!(steal(&mine.stealer()), Some(0));
    assert_eq!(mine.pop(), Some(4));
    assert_eq!(mine.pop(), Some(3));
    assert_eq!(mine.pop(), Some(2));
    assert_eq!(mine.pop(), Some(1));
    assert_eq!(mine.pop(), None);
    // The bound: at most `max`, here one of four.
    assert_eq!(s.steal_into(&mine, 1, all), 1);
    assert_eq!(mine.pop(), Some(5));
    // Three left: two taken; then one; then nothing.
    assert_eq!(s.steal_into(&mine, 16, all), 2);
    assert_eq!(s.steal_into(&mine, 16, all), 1);
    assert_eq!(s.steal_into(&mine, 16, all), 0);
    assert_eq!(mine.len(), 3);
    assert!(w.is_empty());
    while mine.pop().is_some() {}
    // `more` ends a batch at the first element it refuses (taken, the
    // last).
    for k in 10..20 {
        w.push(k);
    }
    assert_eq!(s.steal_into(&mine, 16, |&k| k < 11), 2);
    assert_eq!(mine.pop(), Some(11));
    assert_eq!(mine.pop(), Some(10));
    assert_eq!(s.steal_into(&mine, 16, |_| false), 1);
    assert_eq!(mine.pop(), Some(12));
    assert_eq!(w.len(), 7);
}

/// The scheduler's pattern: one owner pushing and popping 10^6 elements
/// in bursts, three thieves taking batches of up to 8 from it into deques
/// of their own, popping those and taking batches from each other's. Every
/// element is taken exactly once, whole: a batch that moved `top` by more
/// than one in one CAS would race the owner's pops below it (which take
/// no CAS while they see `top` lower), and elements would be taken twice.
#[test]
fn stress_batch_thieves_stealing_from_the_owner_and_each_other() {
    const N: usize = 1_000_000;
    const THIEVES: usize = 3;
    let ledger = Ledger::new(N);
    let done = AtomicBool::new(false);
    // Set by a second take, so that every thread stops (an element a
    // panicking thief held would otherwise keep the others waiting for it
    // for ever).
    let failed = AtomicBool::new(false);
    let start = Barrier::new(THIEVES + 1);
    let w = Worker::<[usize; 4]>::with_capacity(2);
    let record = |k: usize| ledger.record(k, &failed);
    let dests: Vec<Worker<[usize; 4]>> = (0..THIEVES).map(|_| Worker::with_capacity(1)).collect();
    let dest_stealers: Vec<Stealer<[usize; 4]>> = dests.iter().map(Worker::stealer).collect();
    let mut batches = 0usize;
    thread::scope(|sc| {
        let thieves: Vec<_> = dests
            .into_iter()
            .enumerate()
            .map(|(i, mine)| {
                let s = w.stealer();
                let others: Vec<_> = (0..THIEVES)
                    .filter(|&j| j != i)
                    .map(|j| dest_stealers[j].clone())
                    .collect();
                let (record, done, start, failed) = (&record, &done, &start, &failed);
                sc.spawn(move || {
                    start.wait();
                    let mut batches = 0usize;
                    let mut turn = 0usize;
                    loop {
                        if failed.load(Ordering::Acquire) {
                            return batches;
                        }
                        while let Some(e) = mine.pop() {
                            record(check(e));
                        }
                        // From the owner, or now and then from another
                        // thief (whose own pops race this batch).
                        turn += 1;
                        let victim = if turn % 4 == 0 {
                            &others[turn / 4 % others.len()]
                        } else {
                            &s
                        };
                        match victim.steal_into(&mine, 8, |_| true) {
                            0 => {
                                if done.load(Ordering::Acquire)
                                    && s.is_empty()
                                    && others.iter().all(Stealer::is_empty)
                                    && mine.is_empty()
                                {
                                    return batches;
                                }
                                std::hint::spin_loop();
                            }
                            1 => {}
                            _ => batches += 1,
                        }
                    }
                })
            })
            .collect();
        start.wait();
        // `done` also when the owner's part panics (a torn element).
        let stop = SetOnDrop(&done);
        owner_bursts(&w, N, &|| failed.load(Ordering::Acquire), record);
        drop(stop);
        batches = thieves.into_iter().map(|t| t.join().unwrap()).sum();
    });
    ledger.assert_each_once();
    assert!(batches > 0, "no steal took more than one element");
}
