//! Remote calls declared inline (`Remote::INLINE`, `RemotePod::INLINE`):
//! run inside the poll that received them, with no task. They answer like
//! any call (serde and plain data, detached, from a task or from `main`,
//! results larger than a frame, replies that find the ring full); one
//! that would wait or talk to another locale fails with an error naming
//! the call and what it tried, and its locale goes on serving. Each test
//! runs its body in a child process (locale 0) under the kill timeout of
//! `tests/common`, so a hang fails fast.

mod common;

use cantus::{ErrorKind, Remote, RemotePod, SyncVar};
use common::calls::Add;
use common::{is_child, run_child};
use serde::{Deserialize, Serialize};
use std::sync::LazyLock;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

static HITS: AtomicU64 = AtomicU64::new(0);

/// Counts a hit, answers the count and where it ran.
#[derive(Serialize, Deserialize)]
struct Hit(u64);
impl Remote for Hit {
    type Output = (u64, usize);
    const INLINE: bool = true;
    fn run(self) -> (u64, usize) {
        (
            HITS.fetch_add(self.0, Ordering::Relaxed) + self.0,
            cantus::here(),
        )
    }
}

/// Answers `n` bytes of a pattern (larger than a frame when `n` is).
#[derive(Serialize, Deserialize)]
struct Bytes(u64);
impl Remote for Bytes {
    type Output = Vec<u8>;
    const INLINE: bool = true;
    fn run(self) -> Vec<u8> {
        pattern(self.0 as usize)
    }
}

/// Panics with its message.
#[derive(Serialize, Deserialize)]
struct Boom(String);
impl Remote for Boom {
    type Output = ();
    const INLINE: bool = true;
    fn run(self) {
        panic!("{}", self.0)
    }
}

static GATE: LazyLock<SyncVar<u64>> = LazyLock::new(SyncVar::new);

/// What an inline call tries that it must not.
#[derive(Serialize, Deserialize, Clone, Copy, Debug)]
enum Misuse {
    /// Reads an empty sync variable.
    ReadEmpty,
    /// Calls another locale.
    CallOut,
    /// Sleeps.
    Sleep,
    /// Yields.
    Yield,
    /// Spawns a task that waits (allowed: the task may wait).
    SpawnWaiter,
}

#[derive(Serialize, Deserialize)]
struct Misbehave(Misuse);
impl Remote for Misbehave {
    type Output = u64;
    const INLINE: bool = true;
    fn run(self) -> u64 {
        match self.0 {
            Misuse::ReadEmpty => GATE.read_fe(),
            Misuse::CallOut => cantus::on(0, Add(1, 1)).join().unwrap(),
            Misuse::Sleep => {
                cantus::task::sleep(Duration::from_millis(1));
                0
            }
            Misuse::Yield => {
                cantus::task::yield_now();
                0
            }
            Misuse::SpawnWaiter => {
                cantus::begin(|| {
                    let v = GATE.read_fe();
                    HITS.fetch_add(v, Ordering::Relaxed);
                });
                1
            }
        }
    }
}

/// Fills the gate (a task: may wait).
#[derive(Serialize, Deserialize)]
struct Open(u64);
impl Remote for Open {
    type Output = ();
    fn run(self) {
        GATE.write_ef(self.0)
    }
}

/// Reads the hit count (a task).
#[derive(Serialize, Deserialize)]
struct ReadHits;
impl Remote for ReadHits {
    type Output = u64;
    fn run(self) -> u64 {
        HITS.load(Ordering::Relaxed)
    }
}

cantus::remote!(Hit, Bytes, Boom, Misbehave, Open, ReadHits);

/// A plain-data inline call.
#[derive(Clone, Copy, bytemuck::Pod, bytemuck::Zeroable)]
#[repr(C)]
struct Twice(u64);
impl RemotePod for Twice {
    type Output = u64;
    const INLINE: bool = true;
    fn run(self) -> u64 {
        2 * self.0
    }
}
cantus::remote_pod!(Twice);

fn pattern(n: usize) -> Vec<u8> {
    (0..n).map(|i| (i * 7 + i / 251) as u8).collect()
}

/// Runs `body` in a child process (locale 0 of its job) with `env`.
fn in_child(test: &str, env: &[(&str, &str)], body: impl FnOnce()) {
    if is_child() {
        body();
        return;
    }
    let (status, stderr) = run_child(test, env);
    assert!(status.success(), "{test} failed: {status}\n{stderr}");
}

fn job(locales: usize) -> cantus::Runtime {
    cantus::Runtime::builder()
        .locales(locales)
        .workers(1)
        .build()
        .expect("a job starts")
}

#[test]
fn inline_calls_answer_like_any_call() {
    in_child("inline_calls_answer_like_any_call", &[], || {
        let rt = job(3);
        rt.block_on(|| {
            for l in 0..3 {
                let (n, at) = cantus::on(l, Hit(1)).join().unwrap();
                assert_eq!((n, at), (1, l), "an inline call runs on locale {l}");
                assert_eq!(cantus::remote::on_pod(l, Twice(21)).join().unwrap(), 42);
            }
            // Detached, then counted by a call behind them on the same
            // ring (a locale takes its requests in order).
            for _ in 0..1000 {
                cantus::begin_on(1, Hit(1)).unwrap();
            }
            cantus::remote::begin_on_pod(2, Twice(1)).unwrap();
            assert_eq!(cantus::on(1, Hit(0)).join().unwrap().0, 1001);
            // Results larger than a frame (half of the default 64 KiB
            // ring) leave from a task, in fragments.
            for n in [0, 100, 32 << 10, 200 << 10] {
                let got = cantus::on(2, Bytes(n)).join().unwrap();
                assert!(got == pattern(n as usize), "{n} bytes back");
            }
            // A panic is the caller's error; the locale goes on.
            let e = cantus::on(1, Boom("the inline fuse".into()))
                .join()
                .unwrap_err();
            assert_eq!(e.kind(), ErrorKind::RemotePanic);
            assert!(
                e.to_string().contains("Boom") && e.to_string().contains("the inline fuse"),
                "{e}"
            );
            assert_eq!(cantus::on(1, Hit(1)).join().unwrap().0, 1002);
        });
        // From an outside thread (main), which polls for its own reply.
        assert_eq!(cantus::on(2, Hit(5)).join().unwrap(), (6, 2), "1 + 5 hits");
        rt.shutdown();
    });
}

#[test]
fn replies_that_find_the_ring_full_all_arrive() {
    // 4 KiB rings and 1 KiB results: 64 calls in flight fill the reply
    // ring, so most replies wait in the outbox of the poll that ran them.
    in_child(
        "replies_that_find_the_ring_full_all_arrive",
        &[("CANTUS_RING_BYTES", "4k")],
        || {
            let rt = job(2);
            rt.block_on(|| {
                for round in 0..50 {
                    let calls: Vec<_> = (0..64).map(|_| cantus::on(1, Bytes(1024))).collect();
                    for c in calls {
                        let got = c.join().unwrap();
                        assert!(got == pattern(1024), "round {round}");
                    }
                }
            });
            rt.shutdown();
        },
    );
}

#[test]
fn an_inline_call_that_would_wait_fails_naming_what_it_tried() {
    in_child(
        "an_inline_call_that_would_wait_fails_naming_what_it_tried",
        &[],
        || {
            let rt = job(2);
            rt.block_on(|| {
                for (misuse, what) in [
                    (Misuse::ReadEmpty, "waited in SyncVar::read_fe"),
                    (Misuse::CallOut, "send to locale 0"),
                    (Misuse::Sleep, "waited in cantus::task::sleep"),
                    (Misuse::Yield, "waited in cantus::task::yield_now"),
                ] {
                    let e = cantus::on(1, Misbehave(misuse)).join().unwrap_err();
                    assert_eq!(e.kind(), ErrorKind::RemotePanic, "{misuse:?}");
                    let msg = e.to_string();
                    assert!(
                        msg.contains("Misbehave") && msg.contains("inline") && msg.contains(what),
                        "{misuse:?}: {msg}"
                    );
                    // Locale 1 goes on serving, tasks and inline calls.
                    assert_eq!(cantus::on(1, Add(2, 3)).join().unwrap(), 5);
                }
                // A task it spawns may wait: it ends once the gate opens.
                assert_eq!(
                    cantus::on(1, Misbehave(Misuse::SpawnWaiter))
                        .join()
                        .unwrap(),
                    1
                );
                let before = cantus::on(1, ReadHits).join().unwrap();
                cantus::on(1, Open(40)).join().unwrap();
                let deadline = std::time::Instant::now() + Duration::from_secs(20);
                while cantus::on(1, ReadHits).join().unwrap() != before + 40 {
                    assert!(
                        std::time::Instant::now() < deadline,
                        "the spawned task never ran"
                    );
                    cantus::task::sleep(Duration::from_millis(1));
                }
            });
            rt.shutdown();
        },
    );
}
