//! A user's crate tested the natural way: `tests/user-crate` holds
//! ordinary `#[test]`s that each start a job of two locales, and this
//! test runs plain `cargo test` on it, with the default number of test
//! threads (README, "Testing a program that uses locales"). The tests
//! take turns (none fails with `AlreadyRunning`), each locale runs only
//! its own test (the harness's report appears once), and the locales'
//! output joins the test's own.
//!
//! The crate builds into `target/user-crate` (beside this build's own
//! output, so a second run recompiles only what changed), offline: its
//! dependencies are the ones cantus's build fetched already.

mod common;

use common::{CHILD_TIMEOUT, wait_with_output};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::time::Duration;

/// Building the crate compiles cantus again: a while on a loaded machine.
const BUILD_TIMEOUT: Duration = Duration::from_secs(600);

/// The tests of `tests/user-crate/tests/jobs.rs` that run by default.
const JOBS: [&str; 4] = [
    "squares_three",
    "squares_four_slowly",
    "squares_five",
    "no_locales",
];

fn crate_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/user-crate")
}

/// `cargo test --offline --test jobs <args>` in the user crate, with a
/// clean environment for the job (no cantus or test-harness settings of
/// ours leak in).
fn cargo_test(args: &[&str]) -> Command {
    let mut cmd = cargo(&["test", "--offline", "--test", "jobs"]);
    cmd.args(args);
    cmd
}

/// `cargo <args>` in the user crate, with its target directory and a
/// clean environment (as [`cargo_test`]).
fn cargo(args: &[&str]) -> Command {
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let target = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .parent()
        .expect("target/tmp has a parent")
        .join("user-crate");
    let mut cmd = Command::new(cargo);
    cmd.args(args)
        .current_dir(crate_dir())
        .env("CARGO_TARGET_DIR", target)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    for (name, _) in std::env::vars_os() {
        let n = name.to_string_lossy();
        if n.starts_with("CANTUS_") || n.starts_with("RUST_TEST_") {
            cmd.env_remove(&name);
        }
    }
    cmd
}

/// Builds the crate's tests once (under its own, longer, limit), so the
/// runs below are timed on running alone.
fn built() {
    static BUILT: OnceLock<()> = OnceLock::new();
    BUILT.get_or_init(|| {
        let child = cargo_test(&["--no-run"]).spawn().expect("start cargo");
        let (status, _, stderr) = wait_with_output(child, BUILD_TIMEOUT, "building the user crate");
        assert!(status.success(), "the user crate did not build:\n{stderr}");
    });
}

/// Runs `cargo test` on the crate: (success, stdout, stderr).
fn run(args: &[&str]) -> (bool, String, String) {
    built();
    let child = cargo_test(args).spawn().expect("start cargo");
    let (status, out, err) = wait_with_output(child, CHILD_TIMEOUT, "cargo test on the user crate");
    (status.success(), out, err)
}

fn count(haystack: &str, needle: &str) -> usize {
    haystack.matches(needle).count()
}

#[test]
fn tests_that_start_locales_pass_under_plain_cargo_test() {
    let (ok, out, err) = run(&[]);
    let report = format!("stdout:\n{out}\nstderr:\n{err}");
    assert!(ok, "cargo test failed on the user crate\n{report}");
    assert_eq!(
        count(&out, "running "),
        1,
        "the harness ran more than once\n{report}"
    );
    for test in JOBS {
        let line = format!("test {test} ... ok");
        assert_eq!(
            count(&out, &line),
            1,
            "`{line}` is not there once\n{report}"
        );
    }
    assert_eq!(count(&out, "test result:"), 1, "{report}");
    assert!(
        out.contains("test result: ok. 4 passed; 0 failed; 2 ignored"),
        "{report}"
    );
    // The tests' output, on every locale, is captured with the test's.
    assert!(!out.contains("user-crate:"), "{report}");
    assert!(!err.contains("user-crate:"), "{report}");
}

#[test]
fn each_locale_prints_once_under_nocapture() {
    let (ok, out, err) = run(&["--", "--nocapture"]);
    let report = format!("stdout:\n{out}\nstderr:\n{err}");
    assert!(ok, "cargo test failed on the user crate\n{report}");
    assert_eq!(
        count(&out, "running "),
        1,
        "the harness ran more than once\n{report}"
    );
    for n in [3, 4, 5] {
        let line = format!("user-crate: squaring {n} on locale 1");
        assert_eq!(
            count(&out, &line),
            1,
            "`{line}` is not there once\n{report}"
        );
    }
    // Code before `build` runs on both locales of its job; a test that
    // starts no job runs on none but its own.
    assert_eq!(
        count(&out, "user-crate: test squares_three ran"),
        2,
        "{report}"
    );
    assert_eq!(
        count(&out, "user-crate: test no_locales ran"),
        1,
        "{report}"
    );
}

#[test]
fn a_failing_test_reports_what_its_locales_printed() {
    let (ok, out, err) = run(&["--", "--ignored", "fails_after_a_remote_call"]);
    let report = format!("stdout:\n{out}\nstderr:\n{err}");
    assert!(!ok, "the test that fails on purpose passed\n{report}");
    let failure = out
        .split("---- fails_after_a_remote_call stdout ----")
        .nth(1)
        .unwrap_or_else(|| panic!("no failure report for the test\n{report}"));
    assert!(
        failure.contains("user-crate: squaring 6 on locale 1"),
        "locale 1's output is not in the failure report\n{report}"
    );
    assert!(failure.contains("wrong on purpose"), "{report}");
    assert!(
        out.contains(
            "test result: FAILED. 0 passed; 1 failed; 0 ignored; 0 measured; 5 filtered out"
        ),
        "{report}"
    );
}

#[test]
fn a_locale_that_dies_before_build_is_reported() {
    let (ok, out, err) = run(&["--", "--ignored", "locale_1_dies_before_build"]);
    let report = format!("stdout:\n{out}\nstderr:\n{err}");
    assert!(!ok, "the job whose locale died passed\n{report}");
    // The locale's own words, and locale 0's, though the job ended the
    // test binary before the harness printed any captured output.
    assert!(err.contains("locale 1 panics before build"), "{report}");
    assert!(
        err.contains("cantus: locale 1 (pid ") && err.contains("exited with status 101"),
        "{report}"
    );
}

/// A plain function's result passed as a remote call
/// (`examples/not_a_call.rs` of the crate) does not compile, and the
/// compiler's words fit the case: they say how to make a function a
/// remote call, not only that a closure cannot be one.
#[test]
fn a_plain_function_passed_as_a_call_is_explained() {
    built();
    let cmd = &mut cargo(&["build", "--offline", "--example", "not_a_call"]);
    let child = cmd.spawn().expect("start cargo");
    let (status, _, err) = wait_with_output(child, BUILD_TIMEOUT, "building not_a_call");
    assert!(!status.success(), "not_a_call compiled:\n{err}");
    for words in [
        "`u64` is not a registered remote call",
        "cantus::remote_fn!",
        "then `f(args)` builds the call instead of running `f` here",
        "implements `cantus::Remote`",
    ] {
        assert!(err.contains(words), "the error lacks {words:?}:\n{err}");
    }
}
