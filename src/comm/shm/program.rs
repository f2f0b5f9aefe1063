//! What the locales that locale 0 starts run, and where their output goes.
//!
//! A program's locales are copies of it with the same arguments, their
//! output the program's own ([`Program::Same`]). A runtime started from
//! inside a test of Rust's test harness (`cargo test`) is different: a
//! copy with the same arguments would be the whole test harness again,
//! running every test (each printing its results) and making the first
//! runtime *any* of them builds its locale. So there ([`Program::Test`])
//! each locale runs only that test:
//!
//! `<test name> --exact --include-ignored --test-threads=1 --nocapture --quiet`
//!
//! (one test, even an ignored one run by `--ignored`, on one thread, with
//! nothing captured: the harness on a locale never reports the test, as
//! the locale's `build` serves until the job ends and then exits the
//! process, so a capture would be thrown away with any message in it).
//! The locale's stdout is piped back and printed by a thread of locale 0's
//! test, so it joins the test's own captured output: shown when the test
//! fails or under `--nocapture`, like the test's. The harness's preamble
//! on a locale (an empty line, `running 1 test`) is dropped. Its stderr
//! (panic messages, cantus's own diagnostics) is locale 0's, uncaptured:
//! a locale that fails may end the job, and with it locale 0's process,
//! before the test's captured output is ever printed.
//!
//! A locale whose test never reaches `build` (its name filtered nothing,
//! or the test returned first) exits: locale 0's monitor ends the job with
//! a message naming it (`launch.rs`), so nothing waits for its hello.

use std::ffi::OsString;
use std::io::{BufRead, BufReader, Read};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// How long locale 0 waits, after the locales exited, for the last of
/// their output (a process they started may hold the pipe open).
const OUTPUT_GRACE: Duration = Duration::from_secs(1);

/// What locales 1..n run.
pub(crate) enum Program {
    /// This program again, with its arguments.
    Same,
    /// Only the libtest test of this name, with its output forwarded.
    Test {
        name: String,
        /// One message per forwarding thread when its pipe closes.
        done: (mpsc::Sender<()>, mpsc::Receiver<()>),
        forwarding: usize,
    },
}

impl Program {
    /// The program for locales started by the calling thread (the one
    /// building locale 0's runtime).
    pub(crate) fn of_caller() -> Program {
        match crate::test_harness::current_test() {
            Some(name) => Program::Test {
                name,
                done: mpsc::channel(),
                forwarding: 0,
            },
            None => Program::Same,
        }
    }

    /// The locale's arguments, after its `argv[0]`.
    pub(crate) fn args(&self) -> Vec<OsString> {
        match self {
            Program::Same => std::env::args_os().skip(1).collect(),
            Program::Test { name, .. } => [
                name.as_str(),
                "--exact",
                "--include-ignored",
                "--test-threads=1",
                "--nocapture",
                "--quiet",
            ]
            .into_iter()
            .map(OsString::from)
            .collect(),
        }
    }

    /// Sets the locale's arguments and, for a test, pipes its stdout.
    pub(crate) fn configure(&self, cmd: &mut Command) {
        cmd.args(self.args());
        if let Program::Test { .. } = self {
            cmd.stdout(Stdio::piped());
        }
    }

    /// After the locale started: forwards its piped stdout, printing it on
    /// a thread that shares the calling thread's output capture (threads
    /// inherit it from the thread that starts them, and the caller runs
    /// on a thread started by the test).
    pub(crate) fn forward(&mut self, child: &mut Child) {
        let Program::Test {
            done, forwarding, ..
        } = self
        else {
            return;
        };
        if let Some(out) = child.stdout.take() {
            *forwarding += start_forwarding(out, done.0.clone());
        }
    }

    /// After the locales exited: waits (at most [`OUTPUT_GRACE`]) until
    /// their output has all been printed.
    pub(crate) fn finish_output(self) {
        let Program::Test {
            done, forwarding, ..
        } = self
        else {
            return;
        };
        let deadline = Instant::now() + OUTPUT_GRACE;
        for _ in 0..forwarding {
            let left = deadline.saturating_duration_since(Instant::now());
            if done.1.recv_timeout(left).is_err() {
                return;
            }
        }
    }
}

/// Starts a thread printing `pipe` line by line with `print!` (after the
/// harness's preamble); 1 if it started, else 0 (the output is lost, the
/// job goes on).
fn start_forwarding(pipe: impl Read + Send + 'static, done: mpsc::Sender<()>) -> usize {
    let started = std::thread::Builder::new()
        .name("cantus-locale-output".into())
        .spawn(move || {
            let mut pipe = BufReader::new(pipe);
            let mut line = Vec::new();
            let mut preamble = true;
            while matches!(pipe.read_until(b'\n', &mut line), Ok(n) if n > 0) {
                let text = String::from_utf8_lossy(&line);
                preamble = preamble && is_preamble(&text);
                if !preamble {
                    print!("{text}");
                }
                line.clear();
            }
            let _ = done.send(());
        });
    usize::from(started.is_ok())
}

/// The lines libtest prints before running the locale's one test.
fn is_preamble(line: &str) -> bool {
    let line = line.trim_end();
    line.is_empty() || line == "running 1 test"
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_test_thread_runs_only_its_test_on_the_locales() {
        let program = Program::of_caller();
        assert_eq!(
            program.args(),
            [
                "comm::shm::program::tests::a_test_thread_runs_only_its_test_on_the_locales",
                "--exact",
                "--include-ignored",
                "--test-threads=1",
                "--nocapture",
                "--quiet",
            ]
        );
    }

    #[test]
    fn another_thread_runs_the_program_again() {
        let program = std::thread::spawn(Program::of_caller).join().unwrap();
        assert!(matches!(program, Program::Same));
        let own: Vec<OsString> = std::env::args_os().skip(1).collect();
        assert_eq!(program.args(), own);
    }

    #[test]
    fn only_the_preamble_is_dropped() {
        assert!(is_preamble("\n"));
        assert!(is_preamble("running 1 test\n"));
        assert!(!is_preamble("user output\n"));
        assert!(!is_preamble("running 2 tests\n"));
    }
}
