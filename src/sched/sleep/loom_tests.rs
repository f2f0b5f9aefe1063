//! Loom model of the sleep protocol (README.md beside this file): a
//! worker that finds no work and goes to sleep is always woken by a
//! notifier that publishes work, whatever the interleaving. Run with:
//! `RUSTFLAGS="--cfg loom" cargo test --release --lib --target-dir target/loom loom`

use super::Sleep;
use loom::sync::Arc;
use loom::sync::atomic::{AtomicBool, Ordering};
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

/// The wait of a thread that hosts a worker (`worker/host.rs`): the
/// waker stores the wait's flag (a plain Release store, as
/// `sync::wait::Waiter::wake` does) and notifies the worker; the host,
/// in the worker's idle loop, reads the flag before it sleeps and in the
/// sleep's re-check. It is never left asleep with the flag set (without
/// the re-check, loom finds the lost wake-up).
#[test]
fn loom_host_wait_flag_is_never_missed() {
    model(|| {
        let sleep = Arc::new(Sleep::new(1));
        let woken = Arc::new(AtomicBool::new(false));
        let (s2, w2) = (sleep.clone(), woken.clone());
        let waker = thread::spawn(move || {
            w2.store(true, Ordering::Release);
            s2.notify_worker(0);
        });
        while !woken.load(Ordering::Acquire) {
            sleep.sleep(0, || woken.load(Ordering::Acquire), None);
        }
        waker.join().unwrap();
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

#[test]
fn loom_notify_one_passes_a_disabled_sleeper_by() {
    model(|| {
        let sleep = Arc::new(Sleep::new(2));
        let work = Arc::new(AtomicBool::new(false));
        let stop = Arc::new(AtomicBool::new(false));
        // Worker 0 is disabled: it sleeps waiting for its own work only
        // (here, being told to stop), so it would not take the published
        // work; notify_one, which looks at worker 0 first, must wake
        // worker 1 instead.
        sleep.set_disabled(0, true);
        let (s0, stop0) = (sleep.clone(), stop.clone());
        let disabled = thread::spawn(move || worker(&s0, 0, &stop0));
        let (s2, w2) = (sleep.clone(), work.clone());
        let notifier = thread::spawn(move || {
            w2.swap(true, Ordering::Release);
            s2.notify_one();
        });
        worker(&sleep, 1, &work);
        notifier.join().unwrap();
        stop.swap(true, Ordering::Release);
        sleep.notify_worker(0);
        disabled.join().unwrap();
    });
}

/// A parker like a transport's futex word: a token under a lock.
struct TokenParker {
    token: loom::sync::Mutex<bool>,
    cv: loom::sync::Condvar,
}

impl super::Parker for Arc<TokenParker> {
    fn park(&self, _timeout: Option<std::time::Duration>) {
        let mut t = self.token.lock().unwrap();
        while !*t {
            t = self.cv.wait(t).unwrap();
        }
        *t = false;
    }
    fn unpark(&self) {
        *self.token.lock().unwrap() = true;
        self.cv.notify_one();
    }
}

fn token_parker() -> Arc<TokenParker> {
    Arc::new(TokenParker {
        token: loom::sync::Mutex::new(false),
        cv: loom::sync::Condvar::new(),
    })
}

/// The driver seam's remote path: a worker sleeps parked in the driver;
/// a producer publishes a message and signals the driver (as another
/// process would through a futex word). The worker always wakes and finds
/// the message.
#[test]
fn loom_arrival_wakes_the_worker_parked_in_the_driver() {
    model(|| {
        let parker = token_parker();
        let sleep = Arc::new(Sleep::with_parker(1, Box::new(parker.clone())));
        let arrived = Arc::new(AtomicBool::new(false));
        let (p2, a2) = (parker.clone(), arrived.clone());
        let producer = thread::spawn(move || {
            a2.swap(true, Ordering::Release);
            super::Parker::unpark(&p2);
        });
        loop {
            if arrived.swap(false, Ordering::Acquire) {
                break;
            }
            sleep.sleep_in(0, || arrived.load(Ordering::Relaxed), None);
        }
        producer.join().unwrap();
    });
}

/// The local path: a worker parked in the driver is woken by ordinary
/// runtime work (a task of its own made runnable): the notifier must
/// unpark the driver, not only signal the condition variable.
#[test]
fn loom_local_work_unparks_the_worker_parked_in_the_driver() {
    model(|| {
        let parker = token_parker();
        let sleep = Arc::new(Sleep::with_parker(1, Box::new(parker.clone())));
        let work = Arc::new(AtomicBool::new(false));
        let (s2, w2) = (sleep.clone(), work.clone());
        let notifier = thread::spawn(move || {
            w2.swap(true, Ordering::Release);
            s2.notify_worker(0);
        });
        loop {
            if work.swap(false, Ordering::Acquire) {
                break;
            }
            sleep.sleep_in(0, || work.load(Ordering::Relaxed), None);
        }
        notifier.join().unwrap();
    });
}

/// The in-process path (`DriverWaker::wake`): a producer publishes, then
/// notifies any sleeper; with two workers, one busy elsewhere, the
/// sleeping one always wakes and polls.
#[test]
fn loom_driver_waker_wakes_a_sleeping_worker() {
    model(|| {
        let sleep = Arc::new(Sleep::new(2));
        let arrived = Arc::new(AtomicBool::new(false));
        let (s2, a2) = (sleep.clone(), arrived.clone());
        let producer = thread::spawn(move || {
            a2.swap(true, Ordering::Release);
            s2.notify_one();
        });
        worker(&sleep, 1, &arrived);
        producer.join().unwrap();
    });
}
