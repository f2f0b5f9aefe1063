//! Blocking with no runtime running, in processes whose only thread is
//! `main` (libtest would add threads of its own, so this test target has
//! its own `main`: it re-runs itself once per case, under a timeout).

mod common;
use std::os::unix::process::ExitStatusExt;
use std::sync::Arc;

const CASE: &str = "CANTUS_ALONE_CASE";

/// With no runtime and no other thread, a blocking read could never end:
/// it panics with a message that says so and suggests `cantus::run`, and
/// leaves the variable usable.
fn read_alone() {
    let v = cantus::SyncVar::<u32>::new();
    let r = std::panic::catch_unwind(|| v.read_fe());
    let msg = r.unwrap_err().downcast::<String>().unwrap();
    eprintln!("PANIC: {msg}");
    v.write_ef(3u32);
    assert_eq!(v.read_fe(), 3);
    let s = cantus::SingleVar::<u8>::new();
    let r = std::panic::catch_unwind(|| *s.read());
    assert!(r.is_err(), "a SingleVar read alone panics too");
    eprintln!("DONE");
}

/// With no runtime, when every thread of the process blocks on a cantus
/// variable, the deadlock is reported instead of hanging.
fn all_threads_blocked() {
    let a = Arc::new(cantus::SyncVar::<u32>::new());
    let b = Arc::new(cantus::SyncVar::<u32>::new());
    let (a2, b2) = (a.clone(), b.clone());
    let t = std::thread::spawn(move || b2.write_ef(a2.read_fe()));
    a.write_ef(b.read_fe());
    t.join().unwrap();
    unreachable!("the deadlock is reported");
}

/// Two plain threads handing values over with no runtime: not a deadlock
/// even when the hand-offs are slower than the grace period.
fn slow_plain_threads_are_fine() {
    let v = Arc::new(cantus::SyncVar::<u32>::new());
    let v2 = v.clone();
    let t = std::thread::spawn(move || {
        for i in 0..3 {
            std::thread::sleep(std::time::Duration::from_millis(150));
            v2.write_ef(i);
        }
    });
    let sum: u32 = (0..3).map(|_| v.read_fe()).sum();
    t.join().unwrap();
    assert_eq!(sum, 3);
    eprintln!("DONE");
}

fn child(case: &str, env: &[(&str, &str)]) -> (std::process::ExitStatus, String) {
    let mut cmd = std::process::Command::new(std::env::current_exe().unwrap());
    cmd.env(CASE, case)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    for (k, v) in env {
        cmd.env(k, v);
    }
    common::wait_with_timeout(cmd.spawn().unwrap(), common::CHILD_TIMEOUT, case)
}

fn main() {
    match std::env::var(CASE).as_deref() {
        Ok("read_alone") => return read_alone(),
        Ok("all_threads_blocked") => return all_threads_blocked(),
        Ok("slow_plain_threads_are_fine") => return slow_plain_threads_are_fine(),
        Ok(other) => panic!("unknown case {other}"),
        Err(_) => {}
    }
    let mut passed = 0;

    let (status, stderr) = child("read_alone", &[]);
    assert!(status.success(), "read_alone: {stderr}");
    assert!(
        stderr.contains("PANIC: cantus: SyncVar::read_fe would block forever"),
        "{stderr}"
    );
    assert!(stderr.contains("cantus::run"), "{stderr}");
    assert!(stderr.contains("DONE"), "{stderr}");
    passed += 1;

    let (status, stderr) = child("all_threads_blocked", &[("CANTUS_DEADLOCK_MS", "200")]);
    assert_eq!(
        status.signal(),
        Some(libc::SIGABRT),
        "all_threads_blocked: {stderr}"
    );
    assert!(
        stderr.contains("every thread of this process (2)"),
        "{stderr}"
    );
    assert!(
        stderr.contains("SyncVar::read_fe") || stderr.contains("reading a SyncVar"),
        "{stderr}"
    );
    passed += 1;

    let (status, stderr) = child(
        "slow_plain_threads_are_fine",
        &[("CANTUS_DEADLOCK_MS", "50")],
    );
    assert!(status.success(), "slow_plain_threads_are_fine: {stderr}");
    assert!(
        stderr.contains("DONE") && !stderr.contains("deadlock"),
        "{stderr}"
    );
    passed += 1;

    // No runtime's start checks CANTUS_DEADLOCK_MS for these threads: a
    // bad value is said once, naming the variable, and the default holds
    // (it was once taken silently for the default).
    let (status, stderr) = child(
        "slow_plain_threads_are_fine",
        &[("CANTUS_DEADLOCK_MS", "soon")],
    );
    assert!(status.success(), "a bad CANTUS_DEADLOCK_MS: {stderr}");
    assert!(stderr.contains("DONE"), "{stderr}");
    assert_eq!(
        stderr
            .matches("CANTUS_DEADLOCK_MS=\"soon\" is not valid")
            .count(),
        1,
        "said once: {stderr}"
    );
    assert!(stderr.contains("uses the default 1000 ms"), "{stderr}");
    passed += 1;

    println!("alone: {passed} passed, 0 failed");
}
