//! How cantus fails: stack overflow in a task, deadlock, bad
//! configuration. Each case re-runs this test binary as a child process
//! and checks how the child died (rayon's `stack_overflow_crash.rs`
//! pattern).

mod common;
use common::{is_child, run_child};
use std::os::unix::process::ExitStatusExt;

fn recurse(depth: u64) -> u64 {
    let frame = std::hint::black_box([depth; 128]);
    if depth == u64::MAX {
        0
    } else {
        recurse(depth + 1) + frame[3]
    }
}

#[test]
fn task_stack_overflow_names_the_task_and_the_setting() {
    if is_child() {
        let rt = cantus::Runtime::builder()
            .workers(2)
            .stack_size(64 * 1024)
            .build()
            .unwrap();
        // A detached task (the root closure itself, and tasks it runs
        // while it waits for them, use a larger stack).
        rt.block_on(|| {
            let done = std::sync::Arc::new(cantus::SingleVar::new());
            let d = done.clone();
            cantus::begin(move || d.write(recurse(0)));
            *done.read()
        });
        unreachable!("the overflow aborts the process");
    }
    let (status, stderr) = run_child("task_stack_overflow_names_the_task_and_the_setting", &[]);
    assert_eq!(
        status.signal(),
        Some(libc::SIGABRT),
        "status {status:?}, stderr:\n{stderr}"
    );
    assert!(stderr.contains("cantus: task "), "{stderr}");
    assert!(stderr.contains("overflowed its 64 KiB stack"), "{stderr}");
    assert!(stderr.contains("raise CANTUS_STACK_SIZE"), "{stderr}");
}

/// Recursion with frames of about 512 bytes.
fn deep(depth: u32) -> u64 {
    let frame = std::hint::black_box([depth as u64; 60]);
    if depth == 0 {
        frame[1]
    } else {
        deep(depth - 1) + frame[7]
    }
}

#[test]
fn serial_recursion_in_the_root_closure_has_a_main_thread_stack() {
    if is_child() {
        // 4000 frames of ~512 bytes: 2 MiB, far over the 256 KiB task
        // stack, well inside a main thread's 8 MiB.
        let r = cantus::run(|| deep(4000)).unwrap();
        // The same from a second block_on (the root stack is reused).
        let rt = cantus::Runtime::new().unwrap();
        let again = rt.block_on(|| deep(4000));
        // join's first half runs in the calling (root) task itself.
        let via_join = rt.block_on(|| cantus::join(|| deep(4000), || deep(10)).0);
        rt.shutdown();
        println!("ROOT {r} {again} {via_join}");
        return;
    }
    let (status, stderr) = run_child(
        "serial_recursion_in_the_root_closure_has_a_main_thread_stack",
        &[("CANTUS_WORKERS", "2")],
    );
    assert!(status.success(), "status {status:?}, stderr:\n{stderr}");
}

#[test]
fn overflow_of_a_plain_thread_keeps_rusts_own_message() {
    if is_child() {
        let _rt = cantus::Runtime::builder().workers(1).build().unwrap();
        std::thread::Builder::new()
            .stack_size(64 * 1024)
            .spawn(|| recurse(0))
            .unwrap()
            .join()
            .unwrap();
        unreachable!();
    }
    let (status, stderr) = run_child("overflow_of_a_plain_thread_keeps_rusts_own_message", &[]);
    assert!(!status.success());
    assert!(stderr.contains("has overflowed its stack"), "{stderr}");
    assert!(!stderr.contains("cantus: task"), "{stderr}");
}

#[test]
fn deadlock_is_reported_instead_of_hanging() {
    if is_child() {
        let rt = cantus::Runtime::new().unwrap();
        rt.block_on(|| {
            let x: cantus::SyncVar<u32> = cantus::SyncVar::new();
            let y: cantus::SyncVar<u32> = cantus::SyncVar::new();
            cantus::scope(|s| {
                s.spawn(|| y.write_ef(x.read_fe()));
                s.spawn(|| x.write_ef(y.read_fe()));
            });
        });
        unreachable!();
    }
    let (status, stderr) = run_child(
        "deadlock_is_reported_instead_of_hanging",
        &[("CANTUS_DEADLOCK_MS", "200"), ("CANTUS_WORKERS", "2")],
    );
    assert_eq!(status.signal(), Some(libc::SIGABRT), "{stderr}");
    assert!(stderr.contains("cantus: deadlock"), "{stderr}");
    assert!(stderr.contains("2 task(s) reading a SyncVar"), "{stderr}");
    assert!(stderr.contains("1 outside thread(s)"), "{stderr}");
    assert!(stderr.contains("CANTUS_DEADLOCK_MS"), "{stderr}");
}

#[test]
fn slow_but_live_programs_are_not_called_deadlocked() {
    if is_child() {
        let rt = cantus::Runtime::new().unwrap();
        let v = cantus::SyncVar::new();
        rt.block_on(|| {
            cantus::scope(|s| {
                s.spawn(|| {
                    cantus::task::sleep(std::time::Duration::from_millis(600));
                    v.write_ef(1);
                });
                assert_eq!(v.read_fe(), 1);
            })
        });
        println!("finished");
        return;
    }
    let (status, stderr) = run_child(
        "slow_but_live_programs_are_not_called_deadlocked",
        &[("CANTUS_DEADLOCK_MS", "100")],
    );
    assert!(status.success(), "{stderr}");
    assert!(!stderr.contains("deadlock"), "{stderr}");
}

#[test]
fn bad_environment_values_are_clear_errors() {
    if is_child() {
        let e = cantus::Runtime::new()
            .err()
            .expect("bad configuration is refused");
        eprintln!("ERROR: {e}");
        assert_eq!(e.kind(), cantus::ErrorKind::InvalidConfig);
        return;
    }
    // Every setting is checked at start, also those of layers above the
    // scheduler (Chant's polling policy was once read at the first wait,
    // and a job of two locales then never shut down), and a job of
    // several locales refuses before any other locale starts.
    for (var, val, locales) in [
        ("CANTUS_WORKERS", "lots", "1"),
        ("CANTUS_WAIT_POLICY", "eager", "1"),
        ("CANTUS_STACK_SIZE", "4", "1"),
        ("CANTUS_CHANT_POLL", "tasks", "1"),
        ("CANTUS_CHANT_POLL", "poll", "2"),
    ] {
        let (status, stderr) = run_child(
            "bad_environment_values_are_clear_errors",
            &[(var, val), ("CANTUS_LOCALES", locales)],
        );
        assert!(status.success(), "{stderr}");
        assert!(
            stderr.contains(&format!("ERROR: {var}=\"{val}\" is not valid")),
            "{stderr}"
        );
    }
}

#[test]
fn thread_limit_refuses_before_starting_threads() {
    let e = cantus::Runtime::builder()
        .ignore_environment()
        .workers(4)
        .max_threads(2)
        .build()
        .err()
        .unwrap();
    assert_eq!(e.kind(), cantus::ErrorKind::TooManyThreads);
    assert!(e.to_string().contains("CANTUS_MAX_THREADS"));
}

#[test]
fn stats_are_printed_at_shutdown() {
    if is_child() {
        let rt = cantus::Runtime::new().unwrap();
        rt.block_on(|| cantus::coforall(1000, |_| ()));
        rt.shutdown();
        return;
    }
    let (status, stderr) = run_child("stats_are_printed_at_shutdown", &[("CANTUS_STATS", "1")]);
    assert!(status.success(), "{stderr}");
    assert!(stderr.contains("cantus stats:"), "{stderr}");
    assert!(stderr.contains("max stack use"), "{stderr}");
}

/// A program whose plain OS thread fills a variable only after a long
/// pause looks deadlocked to cantus: the report must say who waits on
/// what and how to declare the thread (or turn detection off).
#[test]
fn deadlock_report_lists_waiters_and_names_the_remedy() {
    if is_child() {
        let rt = cantus::Runtime::new().unwrap();
        let v = std::sync::Arc::new(cantus::SyncVar::<u32>::new());
        let filler = {
            let v = v.clone();
            std::thread::spawn(move || {
                std::thread::sleep(std::time::Duration::from_secs(3));
                v.write_ef(7);
            })
        };
        let got = rt.block_on(|| cantus::join(|| v.read_fe(), || ()).0);
        filler.join().unwrap();
        println!("finished {got}");
        return;
    }
    let (status, stderr) = run_child(
        "deadlock_report_lists_waiters_and_names_the_remedy",
        &[("CANTUS_DEADLOCK_MS", "300"), ("CANTUS_WORKERS", "2")],
    );
    assert_eq!(status.signal(), Some(libc::SIGABRT), "{stderr}");
    assert!(stderr.contains("cantus: deadlock"), "{stderr}");
    assert!(stderr.contains("cantus::task::OutsideActivity"), "{stderr}");
    assert!(stderr.contains("cantus_outside_activity_begin"), "{stderr}");
    assert!(stderr.contains("CANTUS_DEADLOCK_MS=0"), "{stderr}");
    // Who waits on what: the task reading the variable, with its id and
    // the variable's address, and the outside thread in block_on.
    assert!(
        stderr.contains("): reading a SyncVar (readFE/readFF)"),
        "{stderr}"
    );
    assert!(stderr.contains(" at 0x"), "{stderr}");
    assert!(stderr.contains("task "), "{stderr}");
    assert!(
        stderr.contains("outside thread") && stderr.contains("waiting for a task group"),
        "{stderr}"
    );
}

/// The same program with the filling thread declared busy runs to the end.
#[test]
fn declared_outside_activity_is_not_a_deadlock() {
    if is_child() {
        let rt = cantus::Runtime::new().unwrap();
        let v = std::sync::Arc::new(cantus::SyncVar::<u32>::new());
        let busy = cantus::task::OutsideActivity::begin().expect("a runtime runs");
        let filler = {
            let v = v.clone();
            std::thread::spawn(move || {
                std::thread::sleep(std::time::Duration::from_millis(1500));
                v.write_ef(7);
                drop(busy);
            })
        };
        let got = rt.block_on(|| cantus::join(|| v.read_fe(), || ()).0);
        filler.join().unwrap();
        eprintln!("finished {got}");
        return;
    }
    let (status, stderr) = run_child(
        "declared_outside_activity_is_not_a_deadlock",
        &[("CANTUS_DEADLOCK_MS", "300"), ("CANTUS_WORKERS", "2")],
    );
    assert!(status.success(), "{stderr}");
    assert!(stderr.contains("finished 7"), "{stderr}");
    assert!(!stderr.contains("deadlock"), "{stderr}");
}

/// Every wait policy gets the check (workers that spin forever are idle
/// too).
#[test]
fn deadlock_is_reported_under_every_wait_policy() {
    if is_child() {
        let rt = cantus::Runtime::new().unwrap();
        rt.block_on(|| {
            let x: cantus::SyncVar<u32> = cantus::SyncVar::new();
            x.read_fe()
        });
        unreachable!();
    }
    for policy in ["active", "passive", "hybrid"] {
        let (status, stderr) = run_child(
            "deadlock_is_reported_under_every_wait_policy",
            &[
                ("CANTUS_DEADLOCK_MS", "200"),
                ("CANTUS_WORKERS", "2"),
                ("CANTUS_WAIT_POLICY", policy),
            ],
        );
        assert_eq!(status.signal(), Some(libc::SIGABRT), "{policy}: {stderr}");
        assert!(stderr.contains("cantus: deadlock"), "{policy}: {stderr}");
        assert!(
            stderr.contains("1 task(s) reading a SyncVar"),
            "{policy}: {stderr}"
        );
    }
}

/// The address a deadlock report prints is the variable's own address.
#[test]
fn deadlock_report_prints_the_variables_address() {
    if is_child() {
        let rt = cantus::Runtime::new().unwrap();
        let v: cantus::SyncVar<u64> = cantus::SyncVar::new();
        eprintln!("VARIABLE {:#x}", &v as *const _ as usize);
        rt.block_on(|| v.read_fe());
        unreachable!();
    }
    let (status, stderr) = run_child(
        "deadlock_report_prints_the_variables_address",
        &[("CANTUS_DEADLOCK_MS", "200"), ("CANTUS_WORKERS", "1")],
    );
    assert_eq!(status.signal(), Some(libc::SIGABRT), "{stderr}");
    let addr = stderr
        .lines()
        .find_map(|l| l.strip_prefix("VARIABLE "))
        .expect("the child printed the address");
    assert!(stderr.contains(&format!("at {addr}")), "{stderr}");
}
