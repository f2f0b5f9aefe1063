//! Loom model of the sleep protocol (README.md beside this file): a
//! worker that finds no work and goes to sleep is always woken by a
//! notifier that publishes work, whatever the interleaving. Run with:
//! `RUSTFLAGS="--cfg loom" cargo test --release --lib --target-dir target/loom loom`

use super::Sleep;
use loom::sync::Arc;
use loom::sync::atomic::{AtomicBool, Ordering};
use loom::thread;

/// Explores interleavings with at most `LOOM_MAX_PREEMPTIONS` (default 3)
/// forced preemptions per execution, as tokio does, so the models finish
/// in CI time; set it higher for a deeper search.
fn model(f: impl Fn() + core::marker::Sync + Send + 'static) {
    model_bounded(3, f)
}

/// `model` with a different default preemption bound.
#[allow(dead_code)]
fn model_bounded(bound: usize, f: impl Fn() + core::marker::Sync + Send + 'static) {
    let mut b = loom::model::Builder::new();
    if b.preemption_bound.is_none() {
        b.preemption_bound = Some(bound);
    }
    // Lock and count spins yield to loom's scheduler; allow them room.
    b.max_branches = 100_000;
    b.check(f);
}

/// The sleeper's loop: look for work; if none, sleep (which re-checks).
fn worker(sleep: &Sleep, index: usize, work: &AtomicBool) {
    loop {
        if work.swap(false, Ordering::Acquire) {
            return;
        }
        sleep.sleep(index, || work.load(Ordering::Relaxed), None);
    }
}

#[test]
fn loom_targeted_notify_is_never_lost() {
    model(|| {
        let sleep = Arc::new(Sleep::new(1));
        let work = Arc::new(AtomicBool::new(false));
        let (s2, w2) = (sleep.clone(), work.clone());
        let notifier = thread::spawn(move || {
            // Publish, then notify. (Published with a swap: loom orders a
            // plain store and a concurrent RMW only partially and would let
            // the consumer's swap read around it, an execution no real
            // machine has.)
            w2.swap(true, Ordering::Release);
            s2.notify_worker(0);
        });
        worker(&sleep, 0, &work);
        notifier.join().unwrap();
    });
}

#[test]
fn loom_notify_one_wakes_some_sleeper() {
    model(|| {
        let sleep = Arc::new(Sleep::new(2));
        let work = Arc::new(AtomicBool::new(false));
        let (s2, w2) = (sleep.clone(), work.clone());
        let notifier = thread::spawn(move || {
            w2.swap(true, Ordering::Release);
            s2.notify_one();
        });
        // Worker 1 is busy elsewhere (never sleeps); worker 0 must get it.
        worker(&sleep, 0, &work);
        notifier.join().unwrap();
    });
}
