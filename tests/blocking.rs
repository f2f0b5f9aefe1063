//! Blocking calls (`cantus::task::blocking`, Qthreads' qt_begin/end_blocking_action):
//! a task in a system call leaves its worker for a blocking-call thread,
//! so on one worker the task that will end the call can still run.

mod common;

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

fn rt() -> &'static cantus::Runtime {
    common::one_worker_rt()
}

fn pipe() -> (OwnedFd, OwnedFd) {
    let mut fds = [0; 2];
    // SAFETY: `fds` has room for the two descriptors pipe(2) writes.
    assert_eq!(unsafe { libc::pipe(fds.as_mut_ptr()) }, 0);
    // SAFETY: fresh descriptors, owned from here on.
    unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) }
}

/// Waits up to 10 s for `fd` to be readable, then reads; `None` on a
/// timeout (so a regression fails instead of hanging).
fn read_within_10s(fd: &OwnedFd) -> Option<Vec<u8>> {
    let mut p = libc::pollfd {
        fd: fd.as_raw_fd(),
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: one valid pollfd.
    if unsafe { libc::poll(&mut p, 1, 10_000) } != 1 {
        return None;
    }
    let mut buf = [0u8; 64];
    // SAFETY: reads into our buffer.
    let n = unsafe { libc::read(fd.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len()) };
    (n > 0).then(|| buf[..n as usize].to_vec())
}

#[test]
fn a_task_in_a_system_call_does_not_hold_its_only_worker() {
    let (r, w) = pipe();
    let got = std::sync::Mutex::new(None);
    rt().block_on(|| {
        cantus::scope(|s| {
            s.spawn(|| *got.lock().unwrap() = cantus::task::blocking(|| read_within_10s(&r)));
            // The writer runs on the same (only) worker, while the reader
            // waits in poll(2) on a blocking-call thread.
            s.spawn(|| {
                // SAFETY: writes 5 bytes from a static string.
                let n = unsafe { libc::write(w.as_raw_fd(), b"hello".as_ptr().cast(), 5) };
                assert_eq!(n, 5);
            });
        })
    });
    let got = got.into_inner().unwrap();
    assert_eq!(
        got.as_deref(),
        Some(&b"hello"[..]),
        "the reader timed out: the writer never ran while it was in its system call"
    );
}

#[test]
fn blocking_calls_of_many_tasks_overlap_on_one_worker() {
    let inflight = AtomicUsize::new(0);
    let most = AtomicUsize::new(0);
    rt().block_on(|| {
        cantus::scope(|s| {
            for _ in 0..8 {
                s.spawn(|| {
                    cantus::task::blocking(|| {
                        let now = inflight.fetch_add(1, Ordering::SeqCst) + 1;
                        most.fetch_max(now, Ordering::SeqCst);
                        std::thread::sleep(Duration::from_millis(50));
                        inflight.fetch_sub(1, Ordering::SeqCst);
                    })
                });
            }
        })
    });
    assert!(
        most.load(Ordering::SeqCst) >= 2,
        "on one worker, blocking calls never overlapped: they held the worker"
    );
}

#[test]
fn a_task_comes_home_to_its_worker_with_its_identity() {
    let seen = std::sync::Mutex::new(None);
    rt().block_on(|| {
        cantus::scope(|s| {
            s.spawn(|| {
                let me = (
                    cantus::query::current_task_id(),
                    cantus::query::current_worker(),
                );
                // Away, the call runs as an outside thread does.
                let away = cantus::task::blocking(|| {
                    (
                        cantus::query::current_task_id(),
                        cantus::query::current_worker(),
                        std::thread::current().name().map(str::to_owned),
                    )
                });
                let back = (
                    cantus::query::current_task_id(),
                    cantus::query::current_worker(),
                );
                *seen.lock().unwrap() = Some((me, away, back));
            })
        })
    });
    let (before, away, after) = seen.into_inner().unwrap().unwrap();
    assert!(before.0.is_some() && before.1 == Some(0));
    assert_eq!(before, after, "the task came back as itself, to its worker");
    assert_eq!((away.0, away.1), (None, None));
    assert_eq!(away.2.as_deref(), Some("cantus-blocking"));
}

#[test]
fn nested_blocking_calls_come_home_once() {
    let v = rt().block_on(|| {
        let inner = cantus::task::blocking(|| cantus::task::blocking(|| 20) + 1);
        assert!(cantus::query::current_worker().is_some(), "home again");
        inner * 2
    });
    assert_eq!(v, 42);
}

#[test]
fn a_panic_in_a_blocking_call_continues_in_the_task() {
    let r = rt().block_on(|| {
        let caught = std::panic::catch_unwind(|| cantus::task::blocking(|| panic!("in the call")));
        // The task is home and works as before.
        cantus::task::yield_now();
        (caught.is_err(), cantus::query::current_worker())
    });
    assert_eq!(r, (true, Some(0)));
}

#[test]
fn an_outside_thread_makes_its_blocking_call_in_place() {
    rt();
    let name = cantus::task::blocking(|| std::thread::current().name().map(str::to_owned));
    assert_eq!(
        name,
        std::thread::current().name().map(str::to_owned),
        "in place"
    );
}

/// While a task is in a blocking call, every other task may wait for it
/// with the worker idle: that is no deadlock (the call is outside
/// activity). In a child process, with a 100 ms grace period.
#[test]
fn a_blocking_call_keeps_the_deadlock_detector_quiet() {
    if common::is_child() {
        let rt = cantus::Runtime::builder()
            .workers(1)
            .ignore_environment()
            .deadlock_detection(Some(Duration::from_millis(100)))
            .build()
            .unwrap();
        let v = cantus::SyncVar::new();
        let got = rt.block_on(|| {
            cantus::scope(|s| {
                s.spawn(|| {
                    cantus::task::blocking(|| std::thread::sleep(Duration::from_millis(600)));
                    v.write_ef(7u32);
                });
                v.read_fe()
            })
        });
        println!("got {got}");
        rt.shutdown();
        return;
    }
    let (status, stderr) =
        common::run_child("a_blocking_call_keeps_the_deadlock_detector_quiet", &[]);
    assert!(status.success(), "{status}: {stderr}");
}
