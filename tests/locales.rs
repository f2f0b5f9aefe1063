//! Jobs of several locales (processes on this machine, talking through
//! shared memory), started from `cargo test` by re-running this binary:
//! each test runs its body in a child (locale 0), which starts the other
//! locales as further copies. Every child runs under a kill timeout.

mod common;

use cantus::{ErrorKind, Remote};
use common::calls::{Add, WhoAmI};
use common::{CHILD_TIMEOUT, is_child, run_child};
use serde::{Deserialize, Serialize};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

static COUNTER: AtomicU64 = AtomicU64::new(0);

/// Bumps this locale's counter (sent detached).
#[derive(Serialize, Deserialize)]
struct Bump(u64);
impl Remote for Bump {
    type Output = ();
    fn run(self) {
        COUNTER.fetch_add(self.0, Ordering::Relaxed);
    }
}

/// Reads this locale's counter.
#[derive(Serialize, Deserialize)]
struct ReadCounter;
impl Remote for ReadCounter {
    type Output = u64;
    fn run(self) -> u64 {
        COUNTER.load(Ordering::Relaxed)
    }
}

/// Panics with its message.
#[derive(Serialize, Deserialize)]
struct Explode(String);
impl Remote for Explode {
    type Output = u64;
    fn run(self) -> u64 {
        panic!("{}", self.0)
    }
}

static GATE: std::sync::LazyLock<cantus::SyncVar<u64>> =
    std::sync::LazyLock::new(cantus::SyncVar::new);

/// Blocks (its task only) until `Open` fills the gate.
#[derive(Serialize, Deserialize)]
struct AwaitGate;
impl Remote for AwaitGate {
    type Output = u64;
    fn run(self) -> u64 {
        GATE.read_fe()
    }
}

#[derive(Serialize, Deserialize)]
struct Open(u64);
impl Remote for Open {
    type Output = ();
    fn run(self) {
        GATE.write_ef(self.0)
    }
}

/// Ends its process at once with a status.
#[derive(Serialize, Deserialize)]
struct Exit(i32);
impl Remote for Exit {
    type Output = ();
    fn run(self) {
        std::process::exit(self.0)
    }
}

/// Sends `n` detached bumps to locale 0.
#[derive(Serialize, Deserialize)]
struct Flood(u64);
impl Remote for Flood {
    type Output = ();
    fn run(self) {
        for _ in 0..self.0 {
            cantus::begin_on(0, Bump(1)).expect("locale 0 is there");
        }
    }
}

/// Plays a faulty peer: sends locale 0 a truncated frame, a request for a
/// handler that does not exist, and a reply to a request never made.
#[derive(Serialize, Deserialize)]
struct Garbage;
impl Remote for Garbage {
    type Output = ();
    fn run(self) {
        let header = |kind: u8, word: u64, token: u64| {
            let mut f = vec![kind, 0, 0, 0, 0, 0, 0, 0];
            f.extend_from_slice(&word.to_le_bytes());
            f.extend_from_slice(&token.to_le_bytes());
            f
        };
        cantus::__test::send_raw_frame(0, false, &[1, 2, 3, 4, 5]).unwrap();
        cantus::__test::send_raw_frame(0, false, &header(1, 0xdead_beef, 0)).unwrap();
        cantus::__test::send_raw_frame(0, true, &header(2, 0, 987_654)).unwrap();
    }
}

cantus::remote!(
    Bump,
    ReadCounter,
    Explode,
    AwaitGate,
    Open,
    Exit,
    Flood,
    Garbage
);

/// A plain-data call: travels as its bytes.
#[derive(Clone, Copy, bytemuck::Pod, bytemuck::Zeroable)]
#[repr(C)]
struct Axpy {
    a: f64,
    x: f64,
    y: f64,
}
impl cantus::remote::RemotePod for Axpy {
    type Output = [u64; 2];
    fn run(self) -> [u64; 2] {
        [(self.a * self.x + self.y) as u64, cantus::here() as u64]
    }
}

/// A plain-data detached call: bumps the counter.
#[derive(Clone, Copy, bytemuck::Pod, bytemuck::Zeroable)]
#[repr(C)]
struct PodBump(u64);
impl cantus::remote::RemotePod for PodBump {
    type Output = ();
    fn run(self) {
        COUNTER.fetch_add(self.0, Ordering::Relaxed);
    }
}
cantus::remote_pod!(Axpy, PodBump);

cantus::remote_fn! {
    /// A plain function as a remote call.
    fn scaled_sum(xs: Vec<u64>, by: u64) -> (u64, usize) {
        (xs.iter().sum::<u64>() * by, cantus::here())
    }
}

static LOCAL_GATE: std::sync::LazyLock<cantus::SyncVar<u64>> =
    std::sync::LazyLock::new(cantus::SyncVar::new);

/// Sleeps, then fills locale 0's gate with a call back.
#[derive(Serialize, Deserialize)]
struct CallBackLater(u64);
impl Remote for CallBackLater {
    type Output = ();
    fn run(self) {
        cantus::task::sleep(Duration::from_millis(self.0));
        cantus::on(0, OpenLocalGate(self.0)).join().unwrap();
    }
}

#[derive(Serialize, Deserialize)]
struct OpenLocalGate(u64);
impl Remote for OpenLocalGate {
    type Output = ();
    fn run(self) {
        LOCAL_GATE.write_ef(self.0)
    }
}
cantus::remote!(CallBackLater, OpenLocalGate);

/// Runs `body` in a child process whose job has `locales` locales;
/// returns the child's stderr after asserting it succeeded.
fn in_job(test: &str, locales: usize, body: impl FnOnce()) -> Option<String> {
    if is_child() {
        body();
        return None;
    }
    let (status, stderr) = run_child(test, &[("CANTUS_LOCALES", &locales.to_string())]);
    assert!(
        status.success(),
        "{test} with CANTUS_LOCALES={locales} failed: {status}\n{stderr}"
    );
    Some(stderr)
}

fn job(locales: usize) -> cantus::Runtime {
    cantus::Runtime::builder()
        .locales(locales)
        .workers(1)
        .build()
        .expect("a job starts")
}

#[test]
fn every_locale_answers_remote_calls() {
    for n in 1..=4 {
        if is_child() && std::env::var("CANTUS_LOCALES").ok() != Some(n.to_string()) {
            continue;
        }
        in_job("every_locale_answers_remote_calls", n, || {
            let rt = job(n);
            assert_eq!(cantus::here(), 0);
            assert_eq!(cantus::num_locales(), n);
            let pids = rt.block_on(|| {
                let who = cantus::coforall_locales(|_| WhoAmI).unwrap();
                for (l, &(here, count, _)) in who.iter().enumerate() {
                    assert_eq!((here, count), (l, n), "locale {l} knows where it is");
                }
                for l in 0..n {
                    assert_eq!(
                        cantus::on(l, Add(l as u64, 40)).join().unwrap(),
                        l as u64 + 40
                    );
                    let sum = cantus::on(l, scaled_sum(vec![1, 2, 3], 2)).join().unwrap();
                    assert_eq!(sum, (12, l), "a remote_fn runs on locale {l}");
                    let call = Axpy {
                        a: 2.0,
                        x: 20.0,
                        y: l as f64,
                    };
                    let got = cantus::remote::on_pod(l, call).join().unwrap();
                    assert_eq!(
                        got,
                        [40 + l as u64, l as u64],
                        "a plain-data call runs on locale {l}"
                    );
                    cantus::remote::begin_on_pod(l, PodBump(0)).unwrap();
                }
                who.iter().map(|w| w.2).collect::<Vec<_>>()
            });
            let mut distinct = pids.clone();
            distinct.sort_unstable();
            distinct.dedup();
            assert_eq!(
                distinct.len(),
                n,
                "each locale is its own process: {pids:?}"
            );
            // Calls from an outside thread (main) work too.
            assert_eq!(cantus::on(n - 1, Add(1, 2)).join().unwrap(), 3);
            rt.shutdown();
            for pid in &pids[1..] {
                assert!(
                    gone_soon(*pid),
                    "locale process {pid} still exists after the job ended"
                );
            }
        });
    }
}

/// Whether /proc/<pid> disappears (or turns zombie) within 2 s.
fn gone_soon(pid: u32) -> bool {
    let deadline = Instant::now() + Duration::from_secs(2);
    while Instant::now() < deadline {
        match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
            Err(_) => return true,
            Ok(s) if s.contains(") Z ") => return true,
            Ok(_) => std::thread::sleep(Duration::from_millis(10)),
        }
    }
    false
}

#[test]
fn detached_calls_all_run_before_the_job_ends() {
    in_job("detached_calls_all_run_before_the_job_ends", 3, || {
        let rt = job(3);
        rt.block_on(|| {
            for i in 0..300u64 {
                cantus::begin_on((i % 3) as usize, Bump(1)).unwrap();
            }
            for l in 0..3 {
                let deadline = Instant::now() + Duration::from_secs(20);
                loop {
                    let seen = cantus::on(l, ReadCounter).join().unwrap();
                    if seen == 100 {
                        break;
                    }
                    assert!(
                        Instant::now() < deadline,
                        "locale {l} ran {seen} of 100 bumps"
                    );
                    cantus::task::sleep(Duration::from_millis(1));
                }
            }
        });
        rt.shutdown();
    });
}

#[test]
fn a_remote_panic_is_an_error_naming_call_and_locale() {
    in_job(
        "a_remote_panic_is_an_error_naming_call_and_locale",
        2,
        || {
            let rt = job(2);
            rt.block_on(|| {
                let e = cantus::on(1, Explode("the reactor".into()))
                    .join()
                    .unwrap_err();
                assert_eq!(e.kind(), ErrorKind::RemotePanic);
                let msg = e.to_string();
                assert!(
                    msg.contains("Explode")
                        && msg.contains("locale 1")
                        && msg.contains("the reactor"),
                    "{msg}"
                );
                // The locale goes on serving.
                assert_eq!(cantus::on(1, Add(2, 2)).join().unwrap(), 4);
                // A local call panics the same way.
                let e = cantus::on(0, Explode("here".into())).join().unwrap_err();
                assert_eq!(e.kind(), ErrorKind::RemotePanic);
            });
            rt.shutdown();
        },
    );
}

#[test]
fn handlers_block_on_sync_variables_without_blocking_their_locale() {
    in_job(
        "handlers_block_on_sync_variables_without_blocking_their_locale",
        2,
        || {
            let rt = job(2);
            rt.block_on(|| {
                // Locale 1 has one worker: the waiting handler must not hold it.
                let waiting = cantus::on(1, AwaitGate);
                assert_eq!(cantus::on(1, Add(5, 5)).join().unwrap(), 10);
                cantus::on(1, Open(77)).join().unwrap();
                assert_eq!(waiting.join().unwrap(), 77);
            });
            rt.shutdown();
        },
    );
}

/// Held by the flood test (three locales busy for tens of seconds on a
/// machine that may have two cores) and by the tests that bound a
/// detection time, so that those never run starved beside it.
static CPU_HOG: std::sync::Mutex<()> = std::sync::Mutex::new(());

#[test]
fn a_flood_of_requests_to_one_locale_loses_nothing() {
    const EACH: u64 = 1_000_000;
    let _hog = CPU_HOG.lock().unwrap_or_else(|e| e.into_inner());
    let out = in_job("a_flood_of_requests_to_one_locale_loses_nothing", 3, || {
        let rt = job(3);
        rt.block_on(|| {
            cantus::coforall_locales(|_| Flood(EACH)).unwrap();
        });
        rt.shutdown();
        // After shutdown every message has been handled (termination
        // detection); self-sends ran as local tasks.
        assert_eq!(COUNTER.load(Ordering::Relaxed), 3 * EACH);
        let status = std::fs::read_to_string("/proc/self/status").unwrap();
        let hwm_kb: u64 = status
            .lines()
            .find_map(|l| l.strip_prefix("VmHWM:"))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
            .unwrap();
        eprintln!("flood: peak RSS of locale 0 {hwm_kb} kB");
        assert!(hwm_kb < 256 << 10, "locale 0 peaked at {hwm_kb} kB");
    });
    if let Some(out) = out {
        assert!(out.contains("flood: peak RSS"), "{out}");
    }
}

#[test]
fn a_killed_locale_ends_the_job_with_a_message() {
    if is_child() {
        let rt = job(2);
        let (_, _, pid) = rt.block_on(|| cantus::on(1, WhoAmI).join().unwrap());
        eprintln!("killing locale 1 (pid {pid})");
        // SAFETY: kill with a pid we were given and a valid signal.
        unsafe { libc::kill(pid as i32, libc::SIGKILL) };
        // This never returns: the job ends while we wait.
        let _ = rt.block_on(|| cantus::on(1, Add(1, 1)).join());
        std::thread::sleep(Duration::from_secs(30));
        unreachable!("the job should have ended");
    }
    let start = Instant::now();
    let (status, stderr) = run_child(
        "a_killed_locale_ends_the_job_with_a_message",
        &[("CANTUS_LOCALES", "2")],
    );
    assert_eq!(
        status.code(),
        Some(128 + 9),
        "the job exits with 128 + the signal, as shells do:\n{stderr}"
    );
    assert!(
        stderr.contains("locale 1") && stderr.contains("signal 9"),
        "the message names the locale and why:\n{stderr}"
    );
    assert!(
        start.elapsed() < Duration::from_secs(20),
        "took {:?}",
        start.elapsed()
    );
}

#[test]
fn a_locale_that_exits_early_ends_the_job() {
    if is_child() {
        let rt = job(3);
        let _ = rt.block_on(|| cantus::on(2, Exit(3)).join());
        std::thread::sleep(Duration::from_secs(30));
        unreachable!("the job should have ended");
    }
    let (status, stderr) = run_child(
        "a_locale_that_exits_early_ends_the_job",
        &[("CANTUS_LOCALES", "3")],
    );
    assert_eq!(
        status.code(),
        Some(3),
        "the job exits with the locale's status:\n{stderr}"
    );
    assert!(
        stderr.contains("locale 2") && stderr.contains("exited with status 3"),
        "{stderr}"
    );
}

#[test]
fn a_remote_call_with_no_runtime_says_to_start_one() {
    in_job("a_remote_call_with_no_runtime_says_to_start_one", 1, || {
        let says_no_runtime = |call: &str, run: &dyn Fn()| {
            let msg = panic_text(run);
            assert!(
                msg.contains(&format!("cantus::{call} called with no runtime running"))
                    && msg.contains("cantus::run(|| ...)")
                    && !msg.contains("does not exist"),
                "{msg}"
            );
        };
        says_no_runtime("on", &|| drop(cantus::on(1, Add(1, 1))));
        says_no_runtime("begin_on", &|| drop(cantus::begin_on(1, Bump(1))));
        says_no_runtime("on_pod", &|| drop(cantus::remote::on_pod(1, PodBump(1))));
        says_no_runtime("begin_on_pod", &|| {
            drop(cantus::remote::begin_on_pod(1, PodBump(1)))
        });
        says_no_runtime("coforall_locales", &|| {
            drop(cantus::coforall_locales(|_| WhoAmI))
        });
        let msg = panic_text(|| drop(cantus::on(1, Add(1, 1))));
        assert!(
            msg.contains("locale 1 exists only in a job of several locales")
                && msg.contains("cantus::Runtime::builder().locales(n)"),
            "{msg}"
        );
        // With a runtime of one locale, locale 1 does not exist.
        let rt = job(1);
        let msg = rt.block_on(|| panic_text(|| drop(cantus::on(1, Add(1, 1)))));
        assert!(
            msg.contains("cantus::on: locale 1 does not exist (the job has 1 locale)")
                && msg.contains("Runtime::builder().locales(n)"),
            "{msg}"
        );
        rt.shutdown();
    });
}

#[test]
fn other_locales_show_program_and_locale_in_ps() {
    in_job("other_locales_show_program_and_locale_in_ps", 3, || {
        let rt = job(3);
        let who = rt.block_on(|| cantus::coforall_locales(|_| WhoAmI).unwrap());
        for (l, &(_, _, pid)) in who.iter().enumerate().skip(1) {
            let comm = std::fs::read_to_string(format!("/proc/{pid}/comm")).unwrap();
            let comm = comm.trim_end();
            // The test binary is `locales-<hash>`.
            assert!(
                comm.starts_with("locales-") && comm.ends_with(&format!("-loc{l}")),
                "locale {l} (pid {pid}) is named {comm:?}"
            );
        }
        rt.shutdown();
    });
}

/// The message of the panic that `f` raises.
fn panic_text(f: impl FnOnce()) -> String {
    let p = std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)).expect_err("it panics");
    match p.downcast::<String>() {
        Ok(s) => *s,
        Err(p) => p.downcast_ref::<&str>().expect("a text panic").to_string(),
    }
}

#[test]
fn bad_frames_are_rejected_naming_their_source() {
    let out = in_job("bad_frames_are_rejected_naming_their_source", 2, || {
        let rt = job(2);
        rt.block_on(|| {
            cantus::on(1, Garbage).join().unwrap();
            // Locale 0 goes on serving and calling.
            assert_eq!(cantus::on(1, Add(3, 4)).join().unwrap(), 7);
        });
        // Termination still balances: every bad frame counts as received.
        rt.shutdown();
    });
    if let Some(err) = out {
        for want in [
            "rejected a malformed frame from locale 1: a 5-byte frame is shorter",
            "no remote handler with id 0xdeadbeef (sent by locale 1)",
            "locale 1 sent locale 0 a reply to request 987654",
        ] {
            assert!(err.contains(want), "stderr lacks {want:?}:\n{err}");
        }
    }
}

#[test]
fn two_jobs_at_once_do_not_collide() {
    if is_child() {
        let rt = job(2);
        rt.block_on(|| {
            for i in 0..2000u64 {
                let (_, _, pid) = cantus::on(1, WhoAmI).join().unwrap();
                // Our locale 1 is our own child, not the other job's.
                let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
                let ppid: u32 = stat
                    .rsplit(") ")
                    .next()
                    .unwrap()
                    .split(' ')
                    .nth(1)
                    .unwrap()
                    .parse()
                    .unwrap();
                assert_eq!(ppid, std::process::id(), "locale 1 belongs to this job");
                assert_eq!(cantus::on(1, Add(i, 1)).join().unwrap(), i + 1);
            }
        });
        rt.shutdown();
        return;
    }
    let jobs: Vec<_> = (0..2)
        .map(|_| {
            std::thread::spawn(|| {
                run_child(
                    "two_jobs_at_once_do_not_collide",
                    &[("CANTUS_LOCALES", "2")],
                )
            })
        })
        .collect();
    for j in jobs {
        let (status, stderr) = j.join().unwrap();
        assert!(status.success(), "a job failed beside another:\n{stderr}");
    }
}

#[test]
fn waiting_for_another_locale_is_not_a_deadlock() {
    in_job("waiting_for_another_locale_is_not_a_deadlock", 2, || {
        // Deadlock detection on, with a grace period far shorter than the
        // time locale 1 takes to call back.
        let rt = cantus::Runtime::builder()
            .locales(2)
            .workers(1)
            .deadlock_detection(Some(Duration::from_millis(200)))
            .build()
            .expect("a job starts");
        let got = rt.block_on(|| {
            cantus::begin_on(1, CallBackLater(1500)).unwrap();
            LOCAL_GATE.read_fe()
        });
        assert_eq!(got, 1500);
        rt.shutdown();
    });
}

#[test]
fn jobs_leave_nothing_in_dev_shm() {
    let before: Vec<_> = shm_entries();
    in_job("jobs_leave_nothing_in_dev_shm", 2, || {
        let rt = job(2);
        assert_eq!(rt.block_on(|| cantus::on(1, Add(1, 1)).join()).unwrap(), 2);
        rt.shutdown();
    });
    if !is_child() {
        let after = shm_entries();
        let new: Vec<_> = after.iter().filter(|e| !before.contains(e)).collect();
        assert!(new.is_empty(), "left in /dev/shm: {new:?}");
    }
}

/// What cantus has in /dev/shm: names of its own (other programs, an MPI
/// job's segments say, may come and go meanwhile), less trace parts'
/// directories, which traced tests running beside this one own.
fn shm_entries() -> Vec<String> {
    std::fs::read_dir("/dev/shm")
        .map(|d| {
            d.filter_map(|e| e.ok())
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|n| n.contains("cantus") && !n.starts_with("cantus-trace-"))
                .collect()
        })
        .unwrap_or_default()
}

// ---- deadlock across locales (sleep/README.md, "Deadlock detection across locales") ----

/// The grace period of the deadlock tests.
const GRACE_MS: u64 = 200;

/// A variable no task of any locale ever fills.
static NEVER: std::sync::LazyLock<cantus::SyncVar<u64>> =
    std::sync::LazyLock::new(cantus::SyncVar::new);

/// Blocks its handler task forever on this locale's `NEVER`.
#[derive(Serialize, Deserialize)]
struct AwaitNever;
impl Remote for AwaitNever {
    type Output = u64;
    fn run(self) -> u64 {
        NEVER.read_fe()
    }
}

/// Computes (a busy loop, no blocking, no timer) for `ms`, then fills
/// locale 0's gate with a call back.
#[derive(Serialize, Deserialize)]
struct ComputeThenCallBack(u64);
impl Remote for ComputeThenCallBack {
    type Output = ();
    fn run(self) {
        let start = Instant::now();
        let mut x = 0u64;
        while start.elapsed() < Duration::from_millis(self.0) {
            x = std::hint::black_box(x.wrapping_mul(31).wrapping_add(1));
        }
        cantus::on(0, OpenLocalGate(self.0)).join().unwrap();
    }
}

/// Computes for `ms`, then sends a Chant message to `to`.
#[derive(Serialize, Deserialize)]
struct ComputeThenSend {
    to: cantus::chant::TaskId,
    ms: u64,
}
impl Remote for ComputeThenSend {
    type Output = ();
    fn run(self) {
        let start = Instant::now();
        while start.elapsed() < Duration::from_millis(self.ms) {
            std::hint::spin_loop();
        }
        cantus::chant::send(self.to, 7, b"done").unwrap();
    }
}
cantus::remote!(AwaitNever, ComputeThenCallBack, ComputeThenSend);

/// A job of `locales` with deadlock detection on (`GRACE_MS`).
fn watched_job(locales: usize) -> cantus::Runtime {
    cantus::Runtime::builder()
        .locales(locales)
        .workers(1)
        .deadlock_detection(Some(Duration::from_millis(GRACE_MS)))
        .build()
        .expect("a job starts")
}

/// Milliseconds since the Unix epoch (comparable across processes).
fn epoch_ms() -> u128 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis()
}

/// Runs `test` (a child whose job deadlocks after printing
/// `blocking at <epoch ms>`) and checks that the job ended with a report
/// naming `waiters` and the remedy (within `common::CHILD_TIMEOUT`: how
/// soon is printed, a measurement). Returns the report.
fn expect_deadlock_report(test: &str, locales: usize, waiters: &[&str]) -> String {
    let exe = std::env::current_exe().unwrap();
    let mut cmd = std::process::Command::new(exe);
    cmd.args([test, "--exact", "--nocapture", "--test-threads=1"])
        .env("CANTUS_CHILD", "1")
        .env("CANTUS_LOCALES", locales.to_string())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    let _not_beside_the_flood = CPU_HOG.lock().unwrap_or_else(|e| e.into_inner());
    // A hang (the old, silent behaviour) fails here.
    let (status, stderr) = common::wait_with_timeout(cmd.spawn().unwrap(), CHILD_TIMEOUT, test);
    let ended = epoch_ms();
    assert!(
        !status.success(),
        "a deadlocked job must not succeed:\n{stderr}"
    );
    let blocked: u128 = stderr
        .lines()
        .find_map(|l| l.strip_prefix("blocking at "))
        .and_then(|t| t.trim().parse().ok())
        .unwrap_or_else(|| panic!("the child never blocked:\n{stderr}"));
    // How soon is a measurement, not a test (on a loaded machine it took
    // 2.9 s once): a job that never reported is killed above.
    eprintln!("{test}: reported {} ms after blocking", ended - blocked);
    assert!(
        stderr.contains(&format!(
            "cantus: deadlock across the job's {locales} locales"
        )),
        "{stderr}"
    );
    for want in waiters
        .iter()
        .chain(&["CANTUS_DEADLOCK_MS=0", "OutsideActivity"])
    {
        assert!(
            stderr.contains(want),
            "the report lacks {want:?}:\n{stderr}"
        );
    }
    stderr
}

/// Locale 0's main task blocks on a variable no locale will fill; every
/// other locale has a handler blocked the same way.
fn deadlock_everywhere(locales: usize) {
    let rt = watched_job(locales);
    rt.block_on(|| {
        for l in 1..locales {
            cantus::begin_on(l, AwaitNever).unwrap();
        }
        // Let the handlers block before we do (not needed for the
        // report; it makes it list them).
        cantus::task::sleep(Duration::from_millis(50));
        eprintln!("blocking at {}", epoch_ms());
        NEVER.read_fe()
    });
    unreachable!("the job is deadlocked");
}

#[test]
fn a_deadlock_across_two_locales_is_reported() {
    if is_child() {
        deadlock_everywhere(2);
    }
    let report = expect_deadlock_report(
        "a_deadlock_across_two_locales_is_reported",
        2,
        &["locale 0: task", "locale 1: task"],
    );
    assert!(report.contains("reading a SyncVar"), "{report}");
}

#[test]
fn a_deadlock_across_four_locales_is_reported() {
    if is_child() {
        deadlock_everywhere(4);
    }
    expect_deadlock_report(
        "a_deadlock_across_four_locales_is_reported",
        4,
        &[
            "locale 0: task",
            "locale 1: task",
            "locale 2: task",
            "locale 3: task",
        ],
    );
}

#[test]
fn a_remote_call_whose_handler_blocks_forever_is_a_deadlock() {
    if is_child() {
        let rt = watched_job(2);
        rt.block_on(|| {
            eprintln!("blocking at {}", epoch_ms());
            cantus::on(1, AwaitNever).join()
        })
        .unwrap();
        unreachable!("the job is deadlocked");
    }
    let report = expect_deadlock_report(
        "a_remote_call_whose_handler_blocks_forever_is_a_deadlock",
        2,
        &["locale 0: task", "locale 1: task"],
    );
    // The caller is named as what it is, the handler as a variable's
    // reader (it was once "reading a SyncVar" for both).
    let caller = report
        .lines()
        .find(|l| l.contains("locale 0: task"))
        .unwrap_or_else(|| panic!("{report}"));
    assert!(
        caller.contains("waiting for the reply of remote call locales::AwaitNever from locale 1")
            && !caller.contains("SyncVar"),
        "{report}"
    );
    let handler = report
        .lines()
        .find(|l| l.contains("locale 1: task"))
        .unwrap_or_else(|| panic!("{report}"));
    assert!(handler.contains("reading a SyncVar"), "{report}");
}

#[test]
fn a_locale_computing_for_long_is_not_a_deadlock() {
    in_job("a_locale_computing_for_long_is_not_a_deadlock", 2, || {
        let rt = watched_job(2);
        let got = rt.block_on(|| {
            cantus::begin_on(1, ComputeThenCallBack(3000)).unwrap();
            LOCAL_GATE.read_fe()
        });
        assert_eq!(got, 3000);
        rt.shutdown();
    });
}

#[test]
fn a_locale_sleeping_on_a_timer_is_not_a_deadlock() {
    in_job("a_locale_sleeping_on_a_timer_is_not_a_deadlock", 2, || {
        let rt = watched_job(2);
        let got = rt.block_on(|| {
            cantus::begin_on(1, CallBackLater(3000)).unwrap();
            LOCAL_GATE.read_fe()
        });
        assert_eq!(got, 3000);
        rt.shutdown();
    });
}

#[test]
fn a_receive_of_a_message_still_to_come_is_not_a_deadlock() {
    in_job(
        "a_receive_of_a_message_still_to_come_is_not_a_deadlock",
        3,
        || {
            let rt = watched_job(3);
            rt.block_on(|| {
                let me = cantus::chant::me();
                cantus::begin_on(2, ComputeThenSend { to: me, ms: 1000 }).unwrap();
                let m = cantus::chant::recv(cantus::chant::Source::Any, cantus::chant::Tag::Is(7));
                assert_eq!(m.bytes(), b"done");
            });
            rt.shutdown();
        },
    );
}

#[test]
fn a_handler_blocked_forever_is_reported_at_shutdown() {
    if is_child() {
        let rt = watched_job(2);
        rt.block_on(|| cantus::begin_on(1, AwaitNever).unwrap());
        eprintln!("blocking at {}", epoch_ms());
        // Termination waits for the handler, which never ends.
        rt.shutdown();
        unreachable!("the job is deadlocked");
    }
    expect_deadlock_report(
        "a_handler_blocked_forever_is_reported_at_shutdown",
        2,
        &["locale 1: task", "locale 0: nothing blocked"],
    );
}

/// A build without the `mpi` feature, started as one of several ranks by
/// an MPI launcher, says so instead of running the whole program once per
/// rank (the launcher's variables are set here by hand).
#[cfg(not(feature = "mpi"))]
#[test]
fn a_build_without_mpi_started_by_mpirun_says_so() {
    if is_child() {
        let e = cantus::Runtime::builder().build().err().expect("refused");
        let msg = e.to_string();
        assert!(
            msg.contains("OMPI_COMM_WORLD_SIZE")
                && msg.contains("one of 4 ranks")
                && msg.contains("features cantus/mpi"),
            "{msg}"
        );
        // One rank is a plain run; CANTUS_TRANSPORT=shm keeps every rank alone.
        return;
    }
    for env in [
        &[("OMPI_COMM_WORLD_SIZE", "4")][..],
        &[("PMI_SIZE", "4"), ("OMPI_COMM_WORLD_SIZE", "4")][..],
    ] {
        let (status, stderr) = run_child("a_build_without_mpi_started_by_mpirun_says_so", env);
        assert!(status.success(), "{stderr}");
    }
    for (env, ok) in [
        (&[("OMPI_COMM_WORLD_SIZE", "1")][..], true),
        (
            &[("OMPI_COMM_WORLD_SIZE", "4"), ("CANTUS_TRANSPORT", "shm")][..],
            true,
        ),
        (&[("CANTUS_TRANSPORT", "mpi")][..], false),
        (&[("CANTUS_TRANSPORT", "carrier pigeon")][..], false),
    ] {
        let (status, stderr) = run_child("a_lone_rank_runs_alone", env);
        assert_eq!(status.success(), ok, "{env:?}: {stderr}");
        if !ok {
            assert!(stderr.contains("CANTUS_TRANSPORT"), "{env:?}: {stderr}");
        }
    }
}

/// Builds a runtime and runs a task (see the test above).
#[cfg(not(feature = "mpi"))]
#[test]
fn a_lone_rank_runs_alone() {
    if !is_child() {
        return;
    }
    match cantus::Runtime::builder().build() {
        Ok(rt) => assert_eq!(rt.block_on(cantus::num_locales), 1),
        Err(e) => {
            eprintln!("{e}");
            std::process::exit(3);
        }
    }
}
