//! Is the calling thread running a test of Rust's test harness (libtest,
//! what `cargo test` runs), and which one?
//!
//! Two things change for a runtime started from inside a test (README,
//! "Testing a program that uses locales"): the locales it starts run only
//! that test (`comm/shm/program.rs`), and a second test's `build` waits
//! for the running runtime instead of failing (`runtime/process_turn.rs`).
//!
//! What libtest lets a test see, checked on the toolchains we support: it
//! runs every test on a thread of its own (also with `--test-threads=1`),
//! named after the test's full path (`tests::two_locales`), and the test
//! function is called through libtest's `test::run_test`, which a
//! backtrace names. A thread name alone could be any program's, so both
//! must hold. In a binary stripped of its symbol table the backtrace
//! names nothing: then no thread counts as a test, and the program is
//! treated as any other.

/// The name of the test the calling thread runs (as libtest names it, and
/// as `<name> --exact` selects it), or `None` outside a libtest test
/// thread. Costs a backtrace (milliseconds): call it when starting a
/// runtime, not per task.
pub(crate) fn current_test() -> Option<String> {
    let thread = std::thread::current();
    let name = thread.name()?;
    if name == "main" || name.is_empty() {
        return None;
    }
    let trace = std::backtrace::Backtrace::force_capture().to_string();
    called_by_libtest(&trace).then(|| name.to_string())
}

/// Whether a rendered backtrace holds a frame of libtest's test runner
/// (`test::run_test`, `test::run_test_in_process`, ...): a frame line is
/// `  12: test::run_test::{closure#0}` (a path of the `test` crate).
fn called_by_libtest(trace: &str) -> bool {
    trace.lines().any(|line| {
        line.trim_start()
            .split_once(": ")
            .is_some_and(|(index, symbol)| {
                index.bytes().all(|b| b.is_ascii_digit()) && symbol.starts_with("test::run_test")
            })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_unit_test_is_seen_as_one() {
        assert_eq!(
            current_test().as_deref(),
            Some("test_harness::tests::this_unit_test_is_seen_as_one")
        );
    }

    #[test]
    fn a_thread_a_test_starts_is_not_a_test() {
        let named = std::thread::Builder::new()
            .name("test_harness::tests::a_thread_a_test_starts_is_not_a_test".into())
            .spawn(current_test)
            .unwrap();
        assert_eq!(named.join().unwrap(), None);
        assert_eq!(std::thread::spawn(current_test).join().unwrap(), None);
    }

    #[test]
    fn reads_runner_frames_only() {
        let trace = "   0: cantus::test_harness::current_test\n  \
                     12: test::run_test_in_process\n";
        assert!(called_by_libtest(trace));
        assert!(!called_by_libtest(
            "   3: mytest::run_test_suite\n   4: main\n"
        ));
        assert!(!called_by_libtest(
            "             at src/test::run_test.rs:1\n"
        ));
    }
}
