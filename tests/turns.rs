//! One runtime per process, and who waits for it (`src/runtime/process_turn.rs`):
//! a test thread waits for its turn (run with plain `cargo test` by
//! `tests/user_crate.rs`), but where waiting cannot help, `build` fails
//! at once with `AlreadyRunning` instead of hanging. Each test runs in a
//! child process of its own (a runtime left running by one would decide
//! the others), under a kill timeout.

mod common;

use cantus::{ErrorKind, Runtime};
use common::{is_child, run_child};
use std::time::{Duration, Instant};

/// Far below the child's kill timeout: a refusal is immediate.
const AT_ONCE: Duration = Duration::from_secs(5);

fn small() -> cantus::config::Builder {
    Runtime::builder()
        .workers(1)
        .ignore_environment()
        .deadlock_detection(None)
}

/// `build` fails at once with `AlreadyRunning`, giving `why`.
fn refused(build: impl FnOnce() -> Result<Runtime, cantus::Error>, why: &str) {
    let start = Instant::now();
    let e = build().err().expect("a second runtime started");
    assert!(
        start.elapsed() < AT_ONCE,
        "refused only after {:?}",
        start.elapsed()
    );
    assert_eq!(e.kind(), ErrorKind::AlreadyRunning, "{e}");
    assert!(e.to_string().contains(why), "{e}");
}

/// Runs `test` in a child running only `name`, and checks it passed.
fn in_child(name: &str, test: impl FnOnce()) {
    if is_child() {
        test();
        return;
    }
    let (status, stderr) = run_child(name, &[]);
    assert!(status.success(), "{name} failed in its child:\n{stderr}");
}

#[test]
fn the_thread_that_started_the_runtime_is_refused_at_once() {
    in_child(
        "the_thread_that_started_the_runtime_is_refused_at_once",
        || {
            let rt = small().build().unwrap();
            refused(|| small().build(), "this thread started it");
            rt.shutdown();
            small().build().expect("the turn is free again").shutdown();
        },
    );
}

#[test]
fn a_task_of_the_runtime_is_refused_at_once() {
    in_child("a_task_of_the_runtime_is_refused_at_once", || {
        let rt = small().build().unwrap();
        rt.block_on(|| refused(|| small().build(), "its own workers"));
        rt.shutdown();
    });
}

#[test]
fn a_runtime_whose_thread_ended_is_not_waited_for() {
    in_child("a_runtime_whose_thread_ended_is_not_waited_for", || {
        // Started on a thread that ends, kept running (as in a static).
        let rt = std::thread::spawn(|| small().build().unwrap())
            .join()
            .unwrap();
        refused(|| small().build(), "the thread that started it has ended");
        rt.shutdown();
    });
}

#[test]
fn a_thread_that_is_not_a_test_is_refused_at_once() {
    in_child("a_thread_that_is_not_a_test_is_refused_at_once", || {
        let rt = small().build().unwrap();
        std::thread::spawn(|| refused(|| small().build(), "already running"))
            .join()
            .unwrap();
        // A job of locales is refused before it starts any locale.
        std::thread::spawn(|| refused(|| small().locales(2).build(), "already running"))
            .join()
            .unwrap();
        rt.shutdown();
    });
}

#[test]
fn a_test_waits_for_a_runtime_of_another_thread() {
    in_child("a_test_waits_for_a_runtime_of_another_thread", || {
        let (started, release) = (std::sync::mpsc::channel(), std::sync::mpsc::channel());
        let (started_tx, started_rx) = started;
        let (release_tx, release_rx) = release;
        let holder = std::thread::spawn(move || {
            let rt = small().build().unwrap();
            started_tx.send(()).unwrap();
            release_rx.recv().unwrap();
            std::thread::sleep(Duration::from_millis(200));
            rt.shutdown();
        });
        started_rx.recv().unwrap();
        release_tx.send(()).unwrap();
        // This thread is the test's: it waits until the holder shut down.
        let start = Instant::now();
        let rt = small().build().expect("the test's turn came");
        assert!(
            start.elapsed() >= Duration::from_millis(150),
            "did not wait"
        );
        assert_eq!(rt.block_on(|| 6 * 7), 42);
        rt.shutdown();
        holder.join().unwrap();
    });
}
