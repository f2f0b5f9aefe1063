//! Timeline traces (`CANTUS_TRACE`, `Builder::trace`): what a traced run
//! writes parses as Chrome trace-event JSON, has spans on every worker of
//! every locale, a flow for each message and steal across locales that
//! `CANTUS_STATS` counts, no span ending before it starts; and a job whose
//! locale is killed still leaves a readable trace. Every run is a child
//! process under a timeout.

mod common;

use cantus_programs::uts;

use common::held::Held;
use common::is_child;
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Runs `test` as a child process ([`common::run_child`]), one at a time:
/// the tests assert that every worker of a job ran tasks, which a worker
/// starved of a CPU by the other tests' jobs (on two cores) may not.
fn run_child(test: &str, env: &[(&str, &str)]) -> (std::process::ExitStatus, String) {
    static ONE: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let _turn = ONE.lock().unwrap_or_else(|p| p.into_inner());
    common::run_child(test, env)
}

/// A fresh trace path for `test` (and its part files gone).
fn trace_path(test: &str) -> PathBuf {
    let p = std::env::temp_dir().join(format!("cantus-test-{test}-{}.json", std::process::id()));
    remove(&p);
    p
}

/// Removes the trace `path` and this user's parts of it.
fn remove(path: &Path) {
    let _ = std::fs::remove_file(path);
    for d in cantus::trace::parts_dirs(path) {
        let _ = std::fs::remove_dir_all(d);
    }
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
    // Each worker's row (busy, idle, asleep, other) adds up to its time.
    let table: Vec<&str> = stderr
        .lines()
        .filter(|l| {
            let mut words = l.split_whitespace();
            words.next().is_some_and(|w| w.parse::<usize>().is_ok())
                && words.next() == Some("worker")
        })
        .collect();
    assert_eq!(table.len(), 2, "a row per worker: {stderr}");
    for row in table {
        let shares: Vec<f64> = row
            .split_whitespace()
            .filter_map(|w| w.strip_suffix('%')?.parse().ok())
            .collect();
        let sum: f64 = shares.iter().sum();
        assert!(
            shares.len() == 4 && (sum - 100.0).abs() < 0.3,
            "{row}: {sum}% in\n{stderr}"
        );
    }
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
        cantus::trace::parts_dirs(&path).is_empty(),
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
    // The summary names the locale that died, not locale 0, which
    // merged.
    assert!(
        stderr.contains("locale 1 did not stop cleanly"),
        "the dead locale is named: {stderr}"
    );
    assert!(
        !stderr.contains("locale 0 did not stop cleanly"),
        "locale 0 did not die: {stderr}"
    );
    let ev = events(&path);
    let lanes = lanes_with_tasks(&ev);
    assert!(
        lanes.iter().any(|(pid, _)| *pid == 1),
        "what the dead locale recorded is there: {lanes:?}"
    );
    let unclean: Vec<u64> = ev
        .iter()
        .filter(|e| {
            e["ph"] == "M"
                && e["name"] == "process_name"
                && e["args"]["name"]
                    .as_str()
                    .unwrap()
                    .contains("did not stop cleanly")
        })
        .map(|e| e["pid"].as_u64().unwrap())
        .collect();
    assert_eq!(unclean, [1], "the dead locale alone is marked");
    assert_no_span_ends_before_it_starts(&ev);
    assert!(
        stderr.contains("the part files stay in"),
        "where the parts are: {stderr}"
    );
    remove(&path);
}

/// Runs a job of two locales traced into `path` whose locale 0 dies
/// without shutting down (`test` is the test that calls it, re-run as
/// the child): nothing merges at the end, and the parts stay. Returns
/// the parts directory.
fn dead_job(test: &str, path: &Path) -> PathBuf {
    if is_child() {
        let rt = cantus::Runtime::builder().build().unwrap();
        rt.block_on(|| {
            cantus::coforall_locales(|_| Tasks).unwrap();
        });
        // Dies without shutting down (locale 1 follows: PR_SET_PDEATHSIG).
        std::process::abort();
    }
    let (status, stderr) = run_child(
        test,
        &[
            ("CANTUS_LOCALES", "2"),
            ("CANTUS_WORKERS", "1"),
            ("CANTUS_TRACE", path.to_str().unwrap()),
        ],
    );
    assert!(!status.success(), "locale 0 aborted: {stderr}");
    assert!(!path.exists(), "nothing merged the trace");
    let dirs = cantus::trace::parts_dirs(path);
    assert_eq!(dirs.len(), 1, "the parts stay for a later merge: {dirs:?}");
    // Locale 1 dies with locale 0 (PR_SET_PDEATHSIG), soon.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    let running = || {
        let (parts, _) = cantus::trace::merge::read_parts(&dirs[0]);
        parts.iter().any(|p| cantus::trace::merge::alive(p.pid))
    };
    while running() {
        assert!(
            std::time::Instant::now() < deadline,
            "locale 1 outlived locale 0"
        );
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    dirs[0].clone()
}

/// Locale 0 itself dies: the parts stay, and merging them afterwards
/// (what `cantus-trace merge PATH` does) gives a readable trace of both
/// locales. The parts are this user's only: the directory 0700, each
/// part 0600, made by this user.
#[test]
fn the_parts_of_a_job_whose_locale_0_died_merge_afterwards() {
    use std::os::unix::fs::MetadataExt;
    let path = trace_path("locale0");
    let dir = dead_job(
        "the_parts_of_a_job_whose_locale_0_died_merge_afterwards",
        &path,
    );
    // SAFETY: geteuid has no preconditions.
    let me = unsafe { libc::geteuid() };
    let m = std::fs::symlink_metadata(&dir).unwrap();
    assert!(m.is_dir());
    assert_eq!(
        (m.mode() & 0o777, m.uid()),
        (0o700, me),
        "{}",
        dir.display()
    );
    for l in 0..2 {
        let m = std::fs::symlink_metadata(dir.join(format!("locale-{l}.bin"))).unwrap();
        assert!(m.is_file());
        assert_eq!(
            (m.mode() & 0o777, m.uid()),
            (0o600, me),
            "locale {l}'s part"
        );
    }
    let summary = cantus::trace::merge::merge(&path).expect("the parts merge");
    assert_eq!(summary.locales.len(), 2, "{summary}");
    let ev = events(&path);
    let lanes = lanes_with_tasks(&ev);
    assert!(
        lanes.iter().any(|(pid, _)| *pid == 0) && lanes.iter().any(|(pid, _)| *pid == 1),
        "both locales' tasks: {lanes:?}"
    );
    assert_no_span_ends_before_it_starts(&ev);
    let m = std::fs::symlink_metadata(&path).unwrap();
    assert_eq!(
        m.mode() & 0o777,
        0o600,
        "the merged trace is this user's only"
    );
    assert!(dir.exists(), "merge() leaves the parts");
    remove(&path);
}

/// `cantus-trace merge DIR` with the parts directory locale 0 printed:
/// the trace goes where the parts say it was asked for, and the parts
/// are removed, saying so.
#[test]
fn merging_a_parts_directory_writes_its_trace_and_removes_the_parts() {
    let path = trace_path("mergedir");
    let dir = dead_job(
        "merging_a_parts_directory_writes_its_trace_and_removes_the_parts",
        &path,
    );
    let merged = cantus::trace::merge::merge_job(&dir, None, false).expect("the directory merges");
    let text = merged.to_string();
    assert_eq!(merged.summary.locales.len(), 2, "{text}");
    assert_eq!(merged.summary.output, path, "{text}");
    assert!(!events(&path).is_empty());
    assert!(merged.removed && !dir.exists(), "{text}");
    assert!(
        text.contains(&format!("removed the part files in {}", dir.display())),
        "{text}"
    );
    remove(&path);
}

/// `cantus-trace merge PATH --keep`: the parts stay, and it says where
/// and why.
#[test]
fn merging_with_keep_leaves_the_parts_and_says_where() {
    let path = trace_path("keep");
    let dir = dead_job("merging_with_keep_leaves_the_parts_and_says_where", &path);
    let out = path.with_extension("out.json");
    let merged = cantus::trace::merge::merge_job(&path, Some(&out), true).expect("merges");
    let text = merged.to_string();
    assert!(!events(&out).is_empty() && !path.exists(), "{text}");
    assert!(!merged.removed && dir.exists(), "{text}");
    assert!(
        text.contains(&format!(
            "the part files stay in {}: kept as asked",
            dir.display()
        )),
        "{text}"
    );
    let _ = std::fs::remove_file(&out);
    remove(&path);
}

/// Another user's id (the tests run as root, which can give a file
/// away; a planted file of another user is simulated so).
const OTHER: u32 = 12345;

/// Gives `p` (not following a link) to [`OTHER`]; false where this user
/// may not (not root): the test then cannot simulate another user.
fn give_away(p: &Path) -> bool {
    std::os::unix::fs::lchown(p, Some(OTHER), Some(OTHER)).is_ok()
}

/// A link where a part would be, or a part owned by another user, in a
/// parts directory: not read, not merged, named as a problem; the parts
/// are kept.
#[test]
fn a_link_or_a_part_of_another_user_is_not_merged() {
    let path = trace_path("otherpart");
    let dir = dead_job("a_link_or_a_part_of_another_user_is_not_merged", &path);
    let part = dir.join("locale-1.bin");
    // A link to a part elsewhere: not followed.
    let elsewhere = path.with_extension("elsewhere.bin");
    std::fs::copy(&part, &elsewhere).unwrap();
    std::fs::remove_file(&part).unwrap();
    std::os::unix::fs::symlink(&elsewhere, &part).unwrap();
    let merged = cantus::trace::merge::merge_job(&dir, None, false).expect("locale 0's merges");
    let text = merged.to_string();
    let locales: Vec<usize> = merged.summary.locales.iter().map(|l| l.0).collect();
    assert_eq!(locales, [0], "the link is not followed: {text}");
    assert!(text.contains("symbolic link"), "{text}");
    assert!(!merged.removed && dir.exists(), "{text}");
    // The part itself, given to another user.
    std::fs::remove_file(&part).unwrap();
    std::fs::copy(&elsewhere, &part).unwrap();
    std::fs::remove_file(&elsewhere).unwrap();
    if give_away(&part) {
        let s = cantus::trace::merge::merge_dir(&dir, None).expect("locale 0's merges");
        assert_eq!(
            s.locales.len(),
            1,
            "the other user's part is not merged: {s}"
        );
        assert!(
            s.to_string()
                .contains(&format!("owned by uid {OTHER}, not by this user")),
            "{s}"
        );
    } else {
        eprintln!("not checked: this user cannot give a file away");
    }
    remove(&path);
}

/// The parts directory the trace `path` had before its name was random:
/// `/dev/shm/cantus-trace-<file name>-<FNV-1a of the absolute path>`,
/// a name anyone could compute, and so plant.
fn guessable_parts_dir(path: &Path) -> PathBuf {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in path.as_os_str().as_encoded_bytes() {
        h = (h ^ u64::from(*b)).wrapping_mul(0x0100_0000_01b3);
    }
    let name = path.file_name().unwrap().to_string_lossy();
    PathBuf::from(format!("/dev/shm/cantus-trace-{name}-{h:016x}"))
}

/// A directory planted by another user where a trace's parts might go:
/// world-writable, given away if this user may (whether it was is
/// returned).
fn plant_dir(dir: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    let _ = std::fs::remove_dir_all(dir);
    std::fs::create_dir(dir).unwrap();
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o777)).unwrap();
    give_away(dir)
}

/// A traced job of two locales, into `path`; it must succeed.
fn traced_job(test: &str, path: &Path) -> String {
    if is_child() {
        let rt = cantus::Runtime::builder().build().unwrap();
        rt.block_on(|| {
            cantus::coforall_locales(|_| Tasks).unwrap();
        });
        rt.shutdown();
        std::process::exit(0);
    }
    let (status, stderr) = run_child(
        test,
        &[
            ("CANTUS_LOCALES", "2"),
            ("CANTUS_WORKERS", "1"),
            ("CANTUS_TRACE", path.to_str().unwrap()),
        ],
    );
    assert!(status.success(), "{status}: {stderr}");
    assert!(!events(path).is_empty(), "the trace is written: {stderr}");
    stderr
}

/// Another user plants links where a traced job's parts would go, aimed
/// at a file of this user: the job writes nowhere through them (the
/// parts directory's name is random, made by the job, and its files are
/// created new, never through a link).
#[test]
fn links_planted_where_the_parts_go_do_not_redirect_them() {
    let path = trace_path("links");
    let planted = guessable_parts_dir(&path);
    let victim = path.with_extension("victim");
    if !is_child() {
        std::fs::write(&victim, b"precious").unwrap();
        plant_dir(&planted);
        for l in 0..2 {
            let link = planted.join(format!("locale-{l}.bin"));
            std::os::unix::fs::symlink(&victim, &link).unwrap();
            give_away(&link);
        }
    }
    traced_job(
        "links_planted_where_the_parts_go_do_not_redirect_them",
        &path,
    );
    let v = std::fs::read(&victim).unwrap();
    assert!(
        v == b"precious",
        "the file the links aim at was written: now {} bytes",
        v.len()
    );
    let _ = std::fs::remove_dir_all(&planted);
    let _ = std::fs::remove_file(&victim);
    remove(&path);
}

/// Another user plants a directory where a traced job's parts would go,
/// open to all: the job puts nothing there (another user would read the
/// trace, and could replace its parts).
#[test]
fn a_directory_planted_where_the_parts_go_is_not_used() {
    let path = trace_path("planteddir");
    let planted = guessable_parts_dir(&path);
    if !is_child() {
        plant_dir(&planted);
    }
    traced_job("a_directory_planted_where_the_parts_go_is_not_used", &path);
    let inside: Vec<_> = std::fs::read_dir(&planted)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert!(
        inside.is_empty(),
        "nothing of the job's went there: {inside:?}"
    );
    let _ = std::fs::remove_dir_all(&planted);
    remove(&path);
}

/// `cantus-trace merge PATH` after a dead job finds only this user's
/// private parts directories: parts planted by another user under a
/// name of the trace (with the trace's path recorded in them) are
/// ignored, and it says so.
#[test]
fn merge_does_not_take_parts_another_user_planted() {
    let path = trace_path("plantedparts");
    let dir = dead_job("merge_does_not_take_parts_another_user_planted", &path);
    let planted = guessable_parts_dir(&path);
    let given = plant_dir(&planted);
    // The planted parts: real ones, moved there and given away.
    for l in 0..2 {
        let name = format!("locale-{l}.bin");
        std::fs::rename(dir.join(&name), planted.join(&name)).unwrap();
        give_away(&planted.join(&name));
    }
    std::fs::remove_dir(&dir).unwrap();
    let e = cantus::trace::merge::merge(&path).expect_err("nothing of this user's to merge");
    assert!(!path.exists(), "no trace from the planted parts");
    let why = if given {
        format!("owned by uid {OTHER}")
    } else {
        "others may enter it".to_string()
    };
    assert!(
        e.contains(&format!("ignored {}", planted.display())) && e.contains(&why),
        "{e}"
    );
    let _ = std::fs::remove_dir_all(&planted);
    remove(&path);
}

/// The merged trace is written beside its name and renamed there: a link
/// planted at its name, or at a temporary name beside it, is replaced or
/// left, never written through; the trace is this user's only (0600).
#[test]
fn the_merged_trace_is_never_written_through_a_planted_link() {
    use std::os::unix::fs::MetadataExt;
    let path = trace_path("outlink");
    let victim = path.with_extension("victim");
    let tmp = PathBuf::from(format!("{}.tmp", path.display()));
    if !is_child() {
        std::fs::write(&victim, b"precious").unwrap();
        let _ = std::fs::remove_file(&tmp);
        std::os::unix::fs::symlink(&victim, &tmp).unwrap();
        std::os::unix::fs::symlink(&victim, &path).unwrap();
    }
    traced_job(
        "the_merged_trace_is_never_written_through_a_planted_link",
        &path,
    );
    let v = std::fs::read(&victim).unwrap();
    assert!(
        v == b"precious",
        "the file a link aims at was written: now {} bytes",
        v.len()
    );
    let m = std::fs::symlink_metadata(&path).unwrap();
    assert!(m.is_file(), "the link at the trace's name was replaced");
    assert_eq!(m.mode() & 0o777, 0o600, "the trace is this user's only");
    let _ = std::fs::remove_file(&tmp);
    let _ = std::fs::remove_file(&victim);
    remove(&path);
}
