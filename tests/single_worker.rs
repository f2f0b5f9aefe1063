//! One worker: yield and sleep must let the worker's other tasks run,
//! since nothing else would.

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::time::{Duration, Instant};

fn rt() -> &'static cantus::Runtime {
    common::one_worker_rt()
}

#[test]
fn yield_lets_a_task_on_the_same_worker_run() {
    let flag = AtomicBool::new(false);
    let spins = AtomicU32::new(0);
    let deadline = Instant::now() + Duration::from_secs(10);
    let saw_flag = AtomicBool::new(false);
    rt().block_on(|| {
        cantus::scope(|s| {
            s.spawn(|| {
                // Would spin forever on one worker without yield (bounded
                // by the deadline, so a regression fails instead of hanging).
                while !flag.load(Ordering::Acquire) && Instant::now() < deadline {
                    spins.fetch_add(1, Ordering::Relaxed);
                    cantus::task::yield_now();
                }
                saw_flag.store(flag.load(Ordering::Acquire), Ordering::Relaxed);
            });
            s.spawn(|| flag.store(true, Ordering::Release));
        })
    });
    assert!(
        saw_flag.load(Ordering::Relaxed),
        "the spinning task never saw the flag within 10 s: yield_now did not let the setter run"
    );
}

/// Runs, on the one worker, a task that starts `outside` on a thread of
/// its own (given a flag to set from work it queues for the runtime) and
/// then spins with `yield_now` until the flag is set or 10 s pass;
/// returns whether it saw the flag. The thread is joined once the worker
/// is free again, so a failure ends rather than hangs.
fn yield_until_outside_work_ran(outside: impl FnOnce(Arc<AtomicBool>) + Send + 'static) -> bool {
    let set = Arc::new(AtomicBool::new(false));
    let (saw, thread) = rt().block_on(|| {
        let thread = std::thread::spawn({
            let set = set.clone();
            move || outside(set)
        });
        let deadline = Instant::now() + Duration::from_secs(10);
        while !set.load(Ordering::Acquire) && Instant::now() < deadline {
            cantus::task::yield_now();
        }
        (set.load(Ordering::Acquire), thread)
    });
    thread.join().unwrap();
    saw
}

#[test]
fn yield_lets_a_task_queued_from_outside_run() {
    // A task that a thread outside the runtime starts (a C caller, a
    // transport's helper thread handing on a request) waits in the
    // runtime's shared queue, not in the worker's deque: a task that
    // yields until it ran must let the worker take it.
    let saw = yield_until_outside_work_ran(|set| {
        cantus::begin(move || set.store(true, Ordering::Release))
    });
    assert!(
        saw,
        "the yielding task never saw the flag within 10 s: the task queued from outside never ran"
    );
}

#[test]
fn yield_lets_another_threads_block_on_run() {
    // Another thread's `block_on` queues its closure for the workers: a
    // task that yields until that closure ran must let it start.
    let saw = yield_until_outside_work_ran(|set| {
        rt().block_on(move || set.store(true, Ordering::Release))
    });
    assert!(
        saw,
        "the yielding task never saw the flag within 10 s: the other thread's block_on never ran"
    );
}

#[test]
fn a_sleeping_task_does_not_hold_the_worker() {
    let order = std::sync::Mutex::new(Vec::new());
    let start = Instant::now();
    rt().block_on(|| {
        cantus::scope(|s| {
            s.spawn(|| {
                cantus::task::sleep(Duration::from_millis(50));
                order.lock().unwrap().push(("sleeper", start.elapsed()));
            });
            s.spawn(|| order.lock().unwrap().push(("other", start.elapsed())));
        })
    });
    let order = order.into_inner().unwrap();
    assert_eq!(order[0].0, "other", "{order:?}");
    assert_eq!(order[1].0, "sleeper");
    assert!(order[1].1 >= Duration::from_millis(50));
}

#[test]
fn blocked_tasks_resume_on_one_worker() {
    // A pipeline of 50 stages on one worker: each stage blocks on its input.
    let stages: Vec<cantus::SyncVar<u64>> = (0..51).map(|_| cantus::SyncVar::new()).collect();
    let out = rt().block_on(|| {
        cantus::scope(|s| {
            for i in 0..50 {
                let (inp, out) = (&stages[i], &stages[i + 1]);
                s.spawn(move || {
                    for _ in 0..100 {
                        out.write_ef(inp.read_fe() + 1);
                    }
                });
            }
            let mut total = 0;
            for k in 0..100 {
                stages[0].write_ef(k);
                total += stages[50].read_fe();
            }
            total
        })
    });
    assert_eq!(out, (0..100).map(|k| k + 50).sum::<u64>());
}
