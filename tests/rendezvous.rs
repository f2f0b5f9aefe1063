//! Large messages on shared memory by rendezvous (`src/comm/shm/README.md`,
//! "Rendezvous"): a frame larger than a ring frame is written once into a
//! block of the sender's area for its receiver, which reads it in place.
//! Every size arrives whole on both sides of each threshold (the ring
//! frame, the largest block) with the areas at their default, small, and
//! off; many senders at once never mix; replies kept for later and
//! handlers that wait for later calls never hold up an area, and
//! messages kept in a mailbox never hold up their sender (rule L); a
//! receiver killed mid-transfer ends the job with a message and leaves no
//! process behind. Each test runs its body in a child process (locale 0)
//! under the kill timeout of `tests/common`, so a hang fails fast.

mod common;

use cantus::{Bulk, Remote};
use common::{in_job, is_child, one_worker_job, run_child};
use serde::{Deserialize, Serialize};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// The default ring's largest frame (half of 128 KiB, less its header).
const RING_FRAME: usize = 65_504;
/// The default area's largest block (a quarter of 8 MiB, less its header).
const LARGEST_BLOCK: usize = (8 << 20) / 4 - 64;

/// `len` bytes that differ by position and by `seed`.
fn pattern(len: usize, seed: u64) -> Vec<u8> {
    (0..len)
        .map(|i| {
            ((i as u64).wrapping_mul(0x9e37_79b9) ^ seed.wrapping_mul(31)) as u8 ^ (i >> 12) as u8
        })
        .collect()
}

/// FNV-1a over bytes: a digest both sides compute alike.
fn fnv(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, &b| {
        (h ^ b as u64).wrapping_mul(0x100_0000_01b3)
    })
}

/// Checks its block by digest, and sends back a block of `back` bytes
/// made from the same seed.
#[derive(Serialize, Deserialize)]
struct Check {
    seed: u64,
    digest: u64,
    block: Bulk<u8>,
    back: u64,
}

impl Remote for Check {
    type Output = (bool, Bulk<u8>);
    fn run(self) -> (bool, Bulk<u8>) {
        let ok =
            fnv(&self.block) == self.digest && *self.block == pattern(self.block.len(), self.seed);
        (ok, pattern(self.back as usize, self.seed ^ 1).into())
    }
}

/// Calls `Check` on `to` with `len` bytes each way and checks the answer.
fn check_round_trip(to: usize, len: usize, seed: u64) {
    let block = pattern(len, seed);
    let (ok, back) = cantus::on(
        to,
        Check {
            seed,
            digest: fnv(&block),
            block: block.into(),
            back: len as u64,
        },
    )
    .join()
    .unwrap();
    assert!(ok, "{len} bytes arrived whole at locale {to}");
    assert!(
        *back == pattern(len, seed ^ 1),
        "{len} bytes came back whole"
    );
}

/// Calls that have arrived on this locale (for the tests that count).
static ARRIVED: AtomicU64 = AtomicU64::new(0);

/// Waits (sleeping) until `all` of these calls have arrived here, so that
/// each one's run lasts until the sender sent the last: the area would
/// fill with their blocks, were they kept while the bodies run.
#[derive(Serialize, Deserialize)]
struct WaitForAll {
    block: Bulk<u8>,
    all: u64,
}

impl Remote for WaitForAll {
    type Output = u64;
    fn run(self) -> u64 {
        ARRIVED.fetch_add(1, Ordering::SeqCst);
        let start = Instant::now();
        while ARRIVED.load(Ordering::SeqCst) < self.all {
            assert!(
                start.elapsed() < Duration::from_secs(60),
                "the later calls never came"
            );
            cantus::task::sleep(Duration::from_millis(1));
        }
        fnv(&self.block)
    }
}

/// Counts its call, and kills this locale at call number `die_at`.
#[derive(Serialize, Deserialize)]
struct DieAt {
    block: Bulk<u8>,
    die_at: u64,
}

impl Remote for DieAt {
    type Output = u64;
    fn run(self) -> u64 {
        if ARRIVED.fetch_add(1, Ordering::SeqCst) == self.die_at {
            eprintln!("locale {} kills itself mid-transfer", cantus::here());
            // SAFETY: a signal to this very process.
            unsafe { libc::kill(libc::getpid(), libc::SIGKILL) };
        }
        self.block.len() as u64
    }
}

/// Sends to both other locales from eight tasks at once, sizes from under
/// a ring frame to several blocks; returns how many round trips it made.
#[derive(Serialize, Deserialize)]
struct Spray;

impl Remote for Spray {
    type Output = u64;
    fn run(self) -> u64 {
        let me = cantus::here();
        let n = cantus::num_locales();
        let made = AtomicU64::new(0);
        cantus::coforall(8, |k| {
            let to = (me + 1 + k % (n - 1)) % n;
            let len = [50_000, 70_000, 300_000, 1 << 20, 3 << 20][k % 5];
            check_round_trip(to, len, (me as u64) << 8 | k as u64);
            made.fetch_add(1, Ordering::Relaxed);
        });
        made.into_inner()
    }
}

/// Receives, from `from`, only the message tagged `LAST` first, while the
/// large ones sent before it wait in this task's mailbox, kept where they
/// arrived; then checks each (tag `i`, the pattern of seed `i`) and
/// returns how many came whole.
#[derive(Serialize, Deserialize)]
struct KeepThenRead {
    from: cantus::chant::TaskId,
    count: u64,
    len: u64,
}

/// The tag of the message that says every large one was sent.
const LAST: u32 = 1 << 20;

impl Remote for KeepThenRead {
    type Output = u64;
    fn run(self) -> u64 {
        use cantus::chant::{self, Source, Tag};
        chant::send(self.from, 0, &[]).unwrap();
        chant::recv(Source::Task(self.from), Tag::Is(LAST));
        (1..=self.count)
            .filter(|&i| {
                let m = chant::recv(Source::Task(self.from), Tag::Is(i as u32));
                m.bytes() == pattern(self.len as usize, i)
            })
            .count() as u64
    }
}

cantus::remote!(Check, WaitForAll, DieAt, Spray, KeepThenRead);

/// Byte sizes on both sides of each threshold: the frame that fits a ring
/// (the call's own fields and the header make up the few bytes between),
/// and the largest block; then 1 MiB, and (`big`) 64 MiB in blocks'
/// pieces.
fn sizes(big: bool) -> Vec<usize> {
    let mut s = vec![0, 1];
    s.extend(RING_FRAME - 48..RING_FRAME + 8);
    s.extend([
        1 << 20,
        LARGEST_BLOCK - 40,
        LARGEST_BLOCK - 20,
        LARGEST_BLOCK,
        LARGEST_BLOCK + 1,
    ]);
    if big {
        s.push(64 << 20);
    }
    s
}

fn every_size_arrives_whole(test: &str, big: bool, env: &[(&str, &str)]) {
    let _ = in_job(test, 2, env, move || {
        for (i, len) in sizes(big).into_iter().enumerate() {
            check_round_trip(1, len, i as u64);
        }
    });
}

#[test]
fn every_size_arrives_whole_around_both_thresholds() {
    every_size_arrives_whole("every_size_arrives_whole_around_both_thresholds", true, &[]);
}

#[test]
fn every_size_arrives_whole_with_the_smallest_areas() {
    // 1 MiB areas: blocks of at most 256 KiB, so a 1 MiB message goes in
    // pieces, each a block.
    every_size_arrives_whole(
        "every_size_arrives_whole_with_the_smallest_areas",
        false,
        &[("CANTUS_RENDEZVOUS_BYTES", "1M")],
    );
}

#[test]
fn every_size_arrives_whole_with_rendezvous_off() {
    every_size_arrives_whole(
        "every_size_arrives_whole_with_rendezvous_off",
        false,
        &[("CANTUS_RENDEZVOUS_BYTES", "0")],
    );
}

#[test]
fn many_senders_at_once_never_mix() {
    let _ = in_job("many_senders_at_once_never_mix", 3, &[], || {
        // Every locale sends to both others from several tasks at once,
        // sizes from under a ring frame to several blocks.
        let sent = cantus::coforall_locales(|_| Spray).unwrap();
        assert_eq!(sent, vec![8, 8, 8]);
    });
}

#[test]
fn results_kept_for_later_do_not_hold_up_the_area() {
    let _ = in_job(
        "results_kept_for_later_do_not_hold_up_the_area",
        2,
        &[],
        || {
            // 32 results of 1 MiB (four times the 8 MiB area) all on their
            // way before any is taken, then taken newest first: were the
            // first ones kept in the area, the last could never come.
            let handles: Vec<_> = (0..32u64)
                .map(|i| {
                    let h = cantus::on(
                        1,
                        Check {
                            seed: i,
                            digest: fnv(&[]),
                            block: Bulk::new(),
                            back: 1 << 20,
                        },
                    );
                    (i, h)
                })
                .collect();
            for (i, h) in handles.into_iter().rev() {
                let (ok, back) = h.join().unwrap();
                assert!(ok);
                assert!(*back == pattern(1 << 20, i ^ 1), "result {i}");
            }
        },
    );
}

#[test]
fn handlers_that_wait_for_later_calls_do_not_hold_up_the_area() {
    let _ = in_job(
        "handlers_that_wait_for_later_calls_do_not_hold_up_the_area",
        2,
        &[],
        || {
            // 12 calls of 1.5 MiB (18 MiB, over twice the area), each
            // waiting for all to arrive before it answers.
            let all = 12;
            let blocks: Vec<Vec<u8>> = (0..all).map(|i| pattern(3 << 19, i)).collect();
            let handles: Vec<_> = blocks
                .iter()
                .map(|b| {
                    cantus::on(
                        1,
                        WaitForAll {
                            block: b.clone().into(),
                            all,
                        },
                    )
                })
                .collect();
            for (h, b) in handles.into_iter().zip(&blocks) {
                assert_eq!(h.join().unwrap(), fnv(b));
            }
        },
    );
}

#[test]
fn messages_kept_in_a_mailbox_do_not_hold_up_the_sender() {
    let _ = in_job(
        "messages_kept_in_a_mailbox_do_not_hold_up_the_sender",
        2,
        &[],
        || {
            use cantus::chant::{self, Source, Tag};
            // 12 messages of 1.5 MiB (18 MiB, over twice the 8 MiB area)
            // all sent before the receiver reads any: each waits in its
            // mailbox where it arrived, holding its block, so the later
            // ones go in eager pieces through the ring.
            let (count, len) = (12u64, 3usize << 19);
            let reader = cantus::on(
                1,
                KeepThenRead {
                    from: chant::me(),
                    count,
                    len: len as u64,
                },
            );
            let them = chant::recv(Source::Any, Tag::Is(0)).source();
            for i in 1..=count {
                chant::send(them, i as u32, &pattern(len, i)).unwrap();
            }
            chant::send(them, LAST, &[]).unwrap();
            assert_eq!(reader.join().unwrap(), count, "every message came whole");
        },
    );
}

#[test]
fn a_receiver_killed_mid_transfer_ends_the_job_and_leaves_nothing_behind() {
    let test = "a_receiver_killed_mid_transfer_ends_the_job_and_leaves_nothing_behind";
    if is_child() {
        let rt = one_worker_job(2);
        rt.block_on(|| {
            eprintln!("locale 1 is pid {}", cantus::on(1, Pid).join().unwrap());
            // 40 calls of 1 MiB on their way at once; locale 1 dies at the
            // tenth, with blocks still unread in its area.
            let handles: Vec<_> = (0..40u64)
                .map(|i| {
                    cantus::on(
                        1,
                        DieAt {
                            block: pattern(1 << 20, i).into(),
                            die_at: 10,
                        },
                    )
                })
                .collect();
            for h in handles {
                let _ = h.join();
            }
        });
        std::thread::sleep(Duration::from_secs(30));
        unreachable!("the job should have ended");
    }
    let start = Instant::now();
    let (status, stderr) = run_child(test, &[("CANTUS_LOCALES", "2")]);
    assert_eq!(
        status.code(),
        Some(128 + 9),
        "the job exits with 128 + the signal that killed locale 1:\n{stderr}"
    );
    assert!(
        stderr.contains("kills itself mid-transfer")
            && stderr.contains("locale 1")
            && stderr.contains("signal 9"),
        "the message names the locale and why:\n{stderr}"
    );
    assert!(
        start.elapsed() < Duration::from_secs(20),
        "took {:?}",
        start.elapsed()
    );
    // Nothing behind: locale 1's process is gone, and nothing was named
    // in /dev/shm (the region is an anonymous file, freed with the last
    // process that maps it).
    let pid: i32 = stderr
        .lines()
        .find_map(|l| l.strip_prefix("locale 1 is pid "))
        .and_then(|p| p.trim().parse().ok())
        .expect("locale 1's pid was printed");
    let gone = (0..200).any(|_| {
        // SAFETY: signal 0 only asks whether the process exists.
        let alive = unsafe { libc::kill(pid, 0) } == 0
            && !std::fs::read_to_string(format!("/proc/{pid}/stat"))
                .is_ok_and(|s| s.contains(") Z "));
        if alive {
            std::thread::sleep(Duration::from_millis(50));
        }
        !alive
    });
    assert!(gone, "locale 1 (pid {pid}) is still running");
    let named: Vec<String> = std::fs::read_dir("/dev/shm")
        .map(|d| {
            d.filter_map(|e| e.ok()?.file_name().into_string().ok())
                .filter(|n| n.contains("cantus"))
                .collect()
        })
        .unwrap_or_default();
    assert!(named.is_empty(), "left in /dev/shm: {named:?}");
}

/// This locale's process id.
#[derive(Serialize, Deserialize)]
struct Pid;

impl Remote for Pid {
    type Output = u32;
    fn run(self) -> u32 {
        std::process::id()
    }
}

cantus::remote!(Pid);
