//! Timeline traces (`CANTUS_TRACE`, `Builder::trace`): what a traced run
//! writes parses as Chrome trace-event JSON, has spans on every worker of
//! every locale, a flow for each message and steal across locales that
//! `CANTUS_STATS` counts, no span ending before it starts; and a job whose
//! locale is killed still leaves a readable trace. Every run is a child
//! process under a timeout.

mod common;

#[path = "../examples/balance/uts.rs"]
mod uts;

use common::held::Held;
use common::{is_child, run_child};
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// A fresh trace path for `test` (and its part files gone).
fn trace_path(test: &str) -> PathBuf {
    let p = std::env::temp_dir().join(format!("cantus-test-{test}-{}.json", std::process::id()));
    let _ = std::fs::remove_file(&p);
    let _ = std::fs::remove_dir_all(cantus::trace::parts_dir(&p));
    p
}

/// The trace's events (it must parse as a whole).
fn events(path: &Path) -> Vec<Value> {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let v: Value = serde_json::from_str(&text).expect("the trace is valid JSON");
    v["traceEvents"]
        .as_array()
        .expect("a traceEvents array")
        .clone()
}

fn worker_lanes(ev: &[Value]) -> BTreeSet<(u64, u64)> {
    ev.iter()
        .filter(|e| e["ph"] == "M" && e["name"] == "thread_name")
        .filter(|e| {
            e["args"]["name"]
                .as_str()
                .unwrap_or("")
                .starts_with("worker ")
        })
        .map(|e| (e["pid"].as_u64().unwrap(), e["tid"].as_u64().unwrap()))
        .collect()
}

/// Lanes that have at least one task span.
fn lanes_with_tasks(ev: &[Value]) -> BTreeSet<(u64, u64)> {
    ev.iter()
        .filter(|e| e["ph"] == "X" && e["cat"] == "task")
        .map(|e| (e["pid"].as_u64().unwrap(), e["tid"].as_u64().unwrap()))
        .collect()
}

fn assert_no_span_ends_before_it_starts(ev: &[Value]) {
    for e in ev.iter().filter(|e| e["ph"] == "X") {
        let dur = e["dur"].as_f64().expect("a duration");
        assert!(dur >= 0.0, "a span ends before it starts: {e}");
        assert!(e["ts"].as_f64().unwrap() >= 0.0, "{e}");
    }
}

/// Flow starts by category.
fn flows(ev: &[Value]) -> BTreeMap<String, u64> {
    let mut m = BTreeMap::new();
    for e in ev.iter().filter(|e| e["ph"] == "s") {
        *m.entry(e["cat"].as_str().unwrap().to_string()).or_default() += 1;
    }
    // Every flow start has its end.
    let ends = ev.iter().filter(|e| e["ph"] == "f").count() as u64;
    assert_eq!(
        m.values().sum::<u64>(),
        ends,
        "flow starts and ends pair up"
    );
    m
}

/// Sums `CANTUS_STATS`'s "<label> N" counts over the locales' reports.
fn stat(stderr: &str, label: &str) -> u64 {
    stderr
        .lines()
        .filter_map(|l| l.split(label).nth(1))
        .map(|rest| {
            rest.trim()
                .split(|c: char| !c.is_ascii_digit())
                .next()
                .unwrap()
                .parse::<u64>()
                .unwrap()
        })
        .sum()
}

#[test]
fn a_traced_run_shows_tasks_blocks_and_wakes_on_every_worker() {
    let path = trace_path("one");
    if is_child() {
        let path = std::env::var("TRACE_FILE").unwrap();
        let rt = cantus::Runtime::builder()
            .workers(2)
            .trace(&path)
            .build()
            .unwrap();
        let total = rt.block_on(|| {
            // Tasks on both workers, whatever the schedule.
            common::a_task_on_every_worker();
            let v = cantus::SyncVar::new();
            cantus::scope(|s| {
                // A producer and a consumer that block on each other, and
                // tasks enough for both workers.
                s.spawn(|| {
                    for i in 0..200u64 {
                        v.write_ef(i);
                    }
                });
                let mut sum = 0;
                for _ in 0..200 {
                    sum += v.read_fe();
                }
                cantus::coforall(64, |i| {
                    std::hint::black_box((0..20_000u64).fold(i as u64, |a, b| a ^ b));
                });
                sum
            })
        });
        assert_eq!(total, 199 * 200 / 2);
        rt.shutdown();
        return;
    }
    let (status, stderr) = run_child(
        "a_traced_run_shows_tasks_blocks_and_wakes_on_every_worker",
        &[("TRACE_FILE", path.to_str().unwrap())],
    );
    assert!(status.success(), "{status}: {stderr}");
    assert!(stderr.contains("worker utilisation"), "{stderr}");
    let ev = events(&path);
    let workers = worker_lanes(&ev);
    assert_eq!(workers.len(), 2, "two worker lanes");
    assert_eq!(lanes_with_tasks(&ev), workers, "spans on every worker");
    assert_no_span_ends_before_it_starts(&ev);
    assert!(
        ev.iter().any(|e| e["ph"] == "X" && e["name"] == "block"),
        "blocks on the sync variable are in the trace"
    );
    let f = flows(&ev);
    assert!(
        f.get("wake").copied().unwrap_or(0) > 0,
        "wakes as flows: {f:?}"
    );
    assert!(
        ev.iter()
            .any(|e| e["ph"] == "X" && e["cat"] == "task" && e["name"] == "coforall"),
        "tasks carry their kind"
    );
    assert!(
        ev.iter().any(|e| e["ph"] == "X"
            && e["cat"] == "task"
            && e["args"]["spawner"].as_u64().unwrap_or(0) != 0),
        "tasks name the task that spawned them"
    );
    assert!(
        !cantus::trace::parts_dir(&path).exists(),
        "a complete trace's parts are removed"
    );
    let _ = std::fs::remove_file(&path);
}

#[test]
fn a_traced_two_locale_uts_run_has_a_flow_per_message_and_steal() {
    let path = trace_path("uts");
    if is_child() {
        let rt = cantus::Runtime::builder().build().unwrap();
        let counts = rt.block_on(|| {
            // Tasks on every worker of every locale, and a piece that
            // moves, whatever the schedule (`common`).
            for l in 0..cantus::num_locales() {
                cantus::on(l, EveryWorker).join().unwrap();
            }
            cantus::balance::run(Held::new(uts::Uts::new(uts::Tree::T1Small)))
                .expect("balanced UTS")
        });
        assert_eq!(counts, uts::Tree::T1Small.known_counts());
        rt.shutdown();
        return;
    }
    let (status, stderr) = run_child(
        "a_traced_two_locale_uts_run_has_a_flow_per_message_and_steal",
        &[
            ("CANTUS_LOCALES", "2"),
            ("CANTUS_WORKERS", "2"),
            ("CANTUS_STATS", "1"),
            ("CANTUS_TRACE", path.to_str().unwrap()),
        ],
    );
    assert!(status.success(), "{status}: {stderr}");
    let ev = events(&path);
    let workers = worker_lanes(&ev);
    assert_eq!(workers.len(), 4, "2 locales x 2 workers: {workers:?}");
    assert_eq!(
        lanes_with_tasks(&ev),
        workers,
        "spans on every worker of every locale"
    );
    assert_no_span_ends_before_it_starts(&ev);
    let f = flows(&ev);
    let sent = stat(&stderr, "messages to other locales");
    let stolen = stat(&stderr, "work stolen from here by other locales");
    assert!(sent > 0 && stolen > 0, "the run talked and stole: {stderr}");
    assert_eq!(
        f.get("message").copied().unwrap_or(0),
        sent,
        "a flow per message CANTUS_STATS counted"
    );
    assert_eq!(
        f.get("steal-across").copied().unwrap_or(0),
        stolen,
        "a flow per steal across locales"
    );
    let _ = std::fs::remove_file(&path);
}

/// Runs a few tasks on the locale it is sent to.
#[derive(serde::Serialize, serde::Deserialize)]
struct Tasks;
impl cantus::Remote for Tasks {
    type Output = ();
    fn run(self) {
        cantus::coforall(8, |i| {
            std::hint::black_box(i);
        });
    }
}

/// Kills its own process (a locale that dies).
#[derive(serde::Serialize, serde::Deserialize)]
struct Die;
impl cantus::Remote for Die {
    type Output = ();
    fn run(self) {
        // SAFETY: raise with a valid signal.
        unsafe { libc::raise(libc::SIGKILL) };
    }
}
/// Runs a task on every worker of the locale it is sent to.
#[derive(serde::Serialize, serde::Deserialize)]
struct EveryWorker;
impl cantus::Remote for EveryWorker {
    type Output = ();
    fn run(self) {
        common::a_task_on_every_worker();
    }
}
cantus::remote!(Die, Tasks, EveryWorker);
cantus::splittable!(Held<uts::Uts>);

#[test]
fn a_killed_locale_still_leaves_a_readable_trace() {
    let path = trace_path("killed");
    if is_child() {
        let rt = cantus::Runtime::builder().build().unwrap();
        rt.block_on(|| {
            // Some work on both locales first, then locale 1 dies.
            cantus::coforall_locales(|_| Tasks).unwrap();
            let _ = cantus::on(1, Die).join();
        });
        std::thread::sleep(std::time::Duration::from_secs(30));
        unreachable!("the job should have ended");
    }
    let (status, stderr) = run_child(
        "a_killed_locale_still_leaves_a_readable_trace",
        &[
            ("CANTUS_LOCALES", "2"),
            ("CANTUS_WORKERS", "1"),
            ("CANTUS_TRACE", path.to_str().unwrap()),
        ],
    );
    assert!(!status.success(), "the job failed: {stderr}");
    assert!(stderr.contains("locale 1"), "{stderr}");
    let ev = events(&path);
    let lanes = lanes_with_tasks(&ev);
    assert!(
        lanes.iter().any(|(pid, _)| *pid == 1),
        "what the dead locale recorded is there: {lanes:?}"
    );
    assert!(
        ev.iter().any(|e| e["ph"] == "M"
            && e["name"] == "process_name"
            && e["args"]["name"]
                .as_str()
                .unwrap()
                .contains("did not stop cleanly")),
        "the dead locale is marked"
    );
    assert_no_span_ends_before_it_starts(&ev);
    let _ = std::fs::remove_file(&path);
    let _ = std::fs::remove_dir_all(cantus::trace::parts_dir(&path));
}

/// Locale 0 itself dies: nothing merges at the end, the parts stay, and
/// merging them afterwards (what `cantus-trace merge PATH` does) gives a
/// readable trace of both locales.
#[test]
fn the_parts_of_a_job_whose_locale_0_died_merge_afterwards() {
    let path = trace_path("locale0");
    if is_child() {
        let rt = cantus::Runtime::builder().build().unwrap();
        rt.block_on(|| {
            cantus::coforall_locales(|_| Tasks).unwrap();
        });
        // Dies without shutting down (locale 1 follows: PR_SET_PDEATHSIG).
        std::process::abort();
    }
    let (status, stderr) = run_child(
        "the_parts_of_a_job_whose_locale_0_died_merge_afterwards",
        &[
            ("CANTUS_LOCALES", "2"),
            ("CANTUS_WORKERS", "1"),
            ("CANTUS_TRACE", path.to_str().unwrap()),
        ],
    );
    assert!(!status.success(), "locale 0 aborted: {stderr}");
    assert!(!path.exists(), "nothing merged the trace");
    assert!(
        cantus::trace::parts_dir(&path).exists(),
        "the parts stay for a later merge"
    );
    let summary = cantus::trace::merge::merge(&path).expect("the parts merge");
    assert_eq!(summary.locales.len(), 2, "{summary}");
    let ev = events(&path);
    let lanes = lanes_with_tasks(&ev);
    assert!(
        lanes.iter().any(|(pid, _)| *pid == 0) && lanes.iter().any(|(pid, _)| *pid == 1),
        "both locales' tasks: {lanes:?}"
    );
    assert_no_span_ends_before_it_starts(&ev);
    let _ = std::fs::remove_file(&path);
    let _ = std::fs::remove_dir_all(cantus::trace::parts_dir(&path));
}
