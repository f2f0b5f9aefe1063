//! Shared helpers: one runtime per test binary (cantus runs one runtime
//! per process), started on first use.

#![allow(dead_code, unreachable_pub)]

use std::sync::OnceLock;

pub mod calls;
#[cfg(not(loom))]
pub mod held;

pub fn rt() -> &'static cantus::Runtime {
    static RT: OnceLock<cantus::Runtime> = OnceLock::new();
    RT.get_or_init(|| {
        cantus::Runtime::builder()
            .workers(2)
            .ignore_environment()
            .deadlock_detection(None)
            .build()
            .expect("test runtime")
    })
}

/// A runtime of one worker, for tests of what must work when the worker
/// is the only one (yield, sleep, blocking calls); deadlock detection on.
pub fn one_worker_rt() -> &'static cantus::Runtime {
    static RT: OnceLock<cantus::Runtime> = OnceLock::new();
    RT.get_or_init(|| {
        cantus::Runtime::builder()
            .workers(1)
            .ignore_environment()
            .build()
            .expect("one-worker test runtime")
    })
}

/// How long a child process may run before it is killed and the test
/// fails (a hang must fail fast, never stall CI).
pub const CHILD_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(60);

/// Re-runs this test binary with only `test` selected and `env` set; the
/// child sees `CANTUS_CHILD=1`. Returns (exit status, stderr). A child
/// still running after [`CHILD_TIMEOUT`] is killed and the test panics.
pub fn run_child(test: &str, env: &[(&str, &str)]) -> (std::process::ExitStatus, String) {
    let exe = std::env::current_exe().unwrap();
    let mut cmd = std::process::Command::new(exe);
    cmd.args([test, "--exact", "--nocapture", "--test-threads=1"])
        .env("CANTUS_CHILD", "1")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    for (k, v) in env {
        cmd.env(k, v);
    }
    let child = cmd.spawn().expect("re-run test binary");
    wait_with_timeout(child, CHILD_TIMEOUT, test)
}

/// How long one mpirun may take before it is killed.
pub const MPIRUN_LIMIT: std::time::Duration = std::time::Duration::from_secs(90);

/// Runs this test binary's `test` under `mpirun -n ranks` (Open MPI, as
/// root where need be, oversubscribing) with `extra` mpirun arguments and
/// `env` on every rank (the ranks see `CANTUS_CHILD=1`); returns
/// (success, stdout, stderr). mpirun ends the job after 80 s
/// (`--timeout`); past [`MPIRUN_LIMIT`] it is killed, with the whole
/// process group, and the test panics. Each mpirun keeps its session
/// files under a directory of its own (`orte_tmpdir_base`), removed after:
/// Open MPI 4.1's mpiruns started at the same moment (the tests of a
/// binary run in parallel) race to create their shared one
/// (`/tmp/ompi.HOST.UID`), and the loser fails in `orte_init` ("A call to
/// mkdir was unable to create the desired directory ... File exists").
pub fn mpirun(
    test: &str,
    ranks: usize,
    extra: &[&str],
    env: &[(&str, impl AsRef<str>)],
) -> (bool, String, String) {
    use std::os::unix::process::CommandExt;
    use std::process::Stdio;
    static RUNS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let exe = std::env::current_exe().unwrap();
    let session = std::env::temp_dir().join(format!(
        "cantus-mpirun-{}-{}",
        std::process::id(),
        RUNS.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
    ));
    std::fs::create_dir_all(&session).expect("a session directory for mpirun");
    let mut cmd = std::process::Command::new("mpirun");
    cmd.env("OMPI_MCA_orte_tmpdir_base", &session);
    cmd.args([
        "--oversubscribe",
        "--timeout",
        "80",
        "-n",
        &ranks.to_string(),
    ])
    .args(extra)
    .env("OMPI_ALLOW_RUN_AS_ROOT", "1")
    .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
    .env("CANTUS_CHILD", "1");
    for (k, v) in env {
        cmd.env(k, v.as_ref()).args(["-x", k]);
    }
    cmd.args(["-x", "CANTUS_CHILD"])
        .arg(exe)
        .args([test, "--exact", "--nocapture", "--test-threads=1"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0);
    let child = cmd
        .spawn()
        .expect("mpirun (Open MPI) must be installed for the mpi tests");
    let group = child.id() as i32;
    let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        wait_with_output(
            child,
            MPIRUN_LIMIT,
            &format!("{test} under mpirun -n {ranks}"),
        )
    }));
    let (status, stdout, stderr) = outcome.unwrap_or_else(|p| {
        // Killed for running too long: the ranks it left go too. (Only
        // then: a group whose processes all ended may name another.)
        // SAFETY: signals the process group this test started, which its
        // ranks keep alive while any runs.
        unsafe { libc::kill(-group, libc::SIGKILL) };
        let _ = std::fs::remove_dir_all(&session);
        std::panic::resume_unwind(p)
    });
    let _ = std::fs::remove_dir_all(&session);
    (status.success(), stdout, stderr)
}

/// Waits for `child` at most `limit`, collecting its stderr; kills it and
/// panics (naming `what` and what it printed) if it runs longer.
pub fn wait_with_timeout(
    child: std::process::Child,
    limit: std::time::Duration,
    what: &str,
) -> (std::process::ExitStatus, String) {
    let (status, _, stderr) = wait_with_output(child, limit, what);
    (status, stderr)
}

/// As [`wait_with_timeout`], also collecting stdout (if piped): returns
/// (exit status, stdout, stderr).
pub fn wait_with_output(
    mut child: std::process::Child,
    limit: std::time::Duration,
    what: &str,
) -> (std::process::ExitStatus, String, String) {
    use std::io::Read;
    let mut err = child.stderr.take().expect("piped stderr");
    let mut out = child.stdout.take();
    let reader = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = err.read_to_string(&mut s);
        s
    });
    let drain = std::thread::spawn(move || {
        let mut s = Vec::new();
        if let Some(o) = out.as_mut() {
            let _ = o.read_to_end(&mut s);
        }
        String::from_utf8_lossy(&s).into_owned()
    });
    let start = std::time::Instant::now();
    let status = loop {
        if let Some(st) = child.try_wait().expect("wait for child") {
            break st;
        }
        if start.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            let stderr = reader.join().unwrap_or_default();
            panic!(
                "{what}: child process still running after {limit:?}; killed it. stderr:\n{stderr}"
            );
        }
        std::thread::sleep(std::time::Duration::from_millis(5));
    };
    let stdout = drain.join().unwrap_or_default();
    (status, stdout, reader.join().unwrap_or_default())
}

pub fn is_child() -> bool {
    std::env::var_os("CANTUS_CHILD").is_some()
}

/// A job of `locales` locales with one worker each: what the child of a
/// test across locales starts.
pub fn one_worker_job(locales: usize) -> cantus::Runtime {
    cantus::Runtime::builder()
        .locales(locales)
        .workers(1)
        .build()
        .expect("a job starts")
}

/// Runs `body` in a child process (locale 0, under [`run_child`]'s kill
/// timeout) whose job has `locales` locales of one worker each and the
/// settings `env`. In the child: runs it and returns `None`; in the test:
/// asserts the child succeeded and returns its stderr.
pub fn in_job(
    test: &str,
    locales: usize,
    env: &[(&str, &str)],
    body: impl FnOnce() + Send,
) -> Option<String> {
    if is_child() {
        let rt = one_worker_job(locales);
        rt.block_on(body);
        rt.shutdown();
        return None;
    }
    let locales = locales.to_string();
    let mut vars = vec![("CANTUS_LOCALES", locales.as_str())];
    vars.extend_from_slice(env);
    let (status, stderr) = run_child(test, &vars);
    assert!(
        status.success(),
        "{test} with {vars:?} failed: {status}\n{stderr}"
    );
    Some(stderr)
}

/// Runs a task on every worker of the calling task's runtime, whatever
/// the schedule, and returns the workers they ran on (each once, sorted).
/// Every task spins without yielding until all have started, so none of
/// them can take another: each is taken by a worker none of the others
/// holds. (Call it from a task; a test that asserts that every worker ran
/// something forces it so instead of hoping the schedule spreads work.)
pub fn a_task_on_every_worker() -> Vec<usize> {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};
    let n = cantus::query::workers().expect("a runtime runs");
    let me = cantus::query::current_worker().expect("called from a task");
    let started = Arc::new(AtomicUsize::new(1));
    let seen = Arc::new(std::sync::Mutex::new(vec![me]));
    for _ in 1..n {
        let (started, seen) = (started.clone(), seen.clone());
        cantus::begin(move || {
            seen.lock()
                .unwrap()
                .push(cantus::query::current_worker().unwrap());
            started.fetch_add(1, Ordering::AcqRel);
            while started.load(Ordering::Acquire) < n {
                std::hint::spin_loop();
            }
        });
    }
    while started.load(Ordering::Acquire) < n {
        std::hint::spin_loop();
    }
    let mut seen = seen.lock().unwrap().clone();
    seen.sort_unstable();
    assert_eq!(seen, (0..n).collect::<Vec<_>>(), "one task on each worker");
    seen
}

/// The loop of a Chant task that serves `boss`: a hello to it (tag 1),
/// then each message from `from` to `each`, until one with tag 0.
pub fn serve_chant(
    boss: cantus::chant::TaskId,
    from: cantus::chant::Source,
    mut each: impl FnMut(cantus::chant::Message),
) {
    use cantus::chant::{self, Tag};
    chant::send(boss, 1, &[]).unwrap();
    loop {
        let m = chant::recv(from, Tag::Any);
        if m.tag() == 0 {
            return;
        }
        each(m);
    }
}

/// Whether each element of `back` is the negation of the one of `of` at
/// its place (element by element, as far as both go).
pub fn negated<T: Copy + std::ops::Neg<Output = T> + PartialEq>(back: &[T], of: &[T]) -> bool {
    back.iter().zip(of).all(|(b, a)| *b == -*a)
}
