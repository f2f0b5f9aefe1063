//! Messages of any size between locales: remote-call arguments and
//! results, and Chant messages, larger than a frame of the transport (half
//! a ring) travel in fragments and arrive whole; concurrent senders never
//! mix; a result that cannot be sent back is an error for the caller, not
//! a hang; broken fragment streams from a faulty peer are reported. Each
//! test runs its body in a child process (locale 0) under the kill timeout
//! of `tests/common`, so a hang fails fast.

mod common;

use cantus::chant::{self, Source, Tag, TaskId};
use cantus::{ErrorKind, Remote};
use serde::{Deserialize, Serialize};

cantus::remote_fn! {
    /// The reproduction: a result of `8 n` bytes.
    fn make(n: u64) -> Vec<u64> {
        (0..n).collect()
    }
}

cantus::remote_fn! {
    /// Checks a large argument and sends back a digest and a large result.
    fn digest(bytes: Vec<u8>, answer_len: u64) -> (u64, Vec<u8>) {
        (fnv(&bytes), pattern(answer_len as usize, bytes.len() as u8))
    }
}

cantus::remote_fn! {
    /// Calls `digest` on locale `to` with a large argument of its own, so
    /// two locales stream to `to` at once.
    fn relay(to: u64, len: u64) -> bool {
        let seed = cantus::here() as u8 ^ 0x5a;
        let arg = pattern(len as usize, seed);
        let (h, back) = cantus::on(to as usize, digest(arg.clone(), len / 3)).join().unwrap();
        h == fnv(&arg) && back == pattern(len as usize / 3, arg.len() as u8)
    }
}

cantus::remote_fn! {
    /// Lowers the largest payload this locale sends (to reach the path of
    /// a result too large to send).
    fn limit_here(max: u64) {
        cantus::__test::limit_message_bytes(max as usize);
    }
}

cantus::remote_fn! {
    fn explode_politely(what: String) -> u64 {
        panic!("{what}")
    }
}

/// FNV-1a over bytes: a digest the two sides compute alike.
fn fnv(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, &b| {
        (h ^ b as u64).wrapping_mul(0x100_0000_01b3)
    })
}

/// `len` bytes that differ by position and by `seed`.
fn pattern(len: usize, seed: u8) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u32).wrapping_mul(2_654_435_761).to_le_bytes()[3] ^ seed)
        .collect()
}

/// Echoes every message back to its sender (same tag) until tag 0.
#[derive(Serialize, Deserialize)]
struct Echo {
    boss: TaskId,
}
impl Remote for Echo {
    type Output = ();
    fn run(self) {
        common::serve_chant(self.boss, Source::Any, |m| {
            chant::send(m.source(), m.tag(), m.bytes()).unwrap();
        });
    }
}

/// Plays a faulty peer: broken fragment streams to locale 0.
#[derive(Serialize, Deserialize)]
struct BrokenStreams;
impl Remote for BrokenStreams {
    type Output = ();
    fn run(self) {
        let fragment = |stream: u64, offset: u64, total: u64, piece: &[u8]| {
            let len = (8 + piece.len()) as u32;
            let mut f = vec![5, 0, 0, 0];
            f.extend_from_slice(&len.to_le_bytes());
            f.extend_from_slice(&stream.to_le_bytes());
            f.extend_from_slice(&offset.to_le_bytes());
            f.extend_from_slice(&total.to_le_bytes());
            f.extend_from_slice(piece);
            f
        };
        let send = |f: Vec<u8>| cantus::__test::send_raw_frame(0, false, &f).unwrap();
        // A piece of a stream never begun.
        send(fragment(7, 100, 1000, &[0; 10]));
        // A stream that skips.
        send(fragment(8, 0, 1000, &[1; 100]));
        send(fragment(8, 300, 1000, &[1; 100]));
        // A stream interrupted by another, which then completes with a
        // frame that is not one (a kind no frame has).
        send(fragment(9, 0, 60, &[2; 30]));
        let mut bogus = vec![99u8; 24];
        bogus.extend_from_slice(&[0; 36]);
        send(fragment(10, 0, 60, &bogus[..30]));
        send(fragment(10, 30, 60, &bogus[30..]));
    }
}

cantus::remote!(Echo, BrokenStreams);

/// Runs `body` in a child process whose job has `locales` locales (one
/// worker each); returns the child's stderr after asserting it succeeded.
fn in_job(test: &str, locales: usize, body: impl FnOnce() + Send) -> Option<String> {
    common::in_job(test, locales, &[], body)
}

#[test]
fn a_result_larger_than_a_frame_comes_back_whole() {
    in_job("a_result_larger_than_a_frame_comes_back_whole", 2, || {
        let got = cantus::on(1, make(100_000)).join().unwrap();
        assert_eq!(got.len(), 100_000);
        assert!(got.iter().enumerate().all(|(i, &v)| v == i as u64));
        // Results whose encoding (varints) is just under, at and just over
        // a frame of the default ring (65 504 payload bytes), and many
        // frames.
        for n in (27_300..27_420).step_by(3).chain([500_000]) {
            let got = cantus::on(1, make(n)).join().unwrap();
            assert_eq!(got, (0..n).collect::<Vec<_>>(), "{n} words");
        }
    });
}

#[test]
fn large_arguments_and_results_from_many_senders_never_mix() {
    in_job(
        "large_arguments_and_results_from_many_senders_never_mix",
        3,
        || {
            // Tasks of locale 0 send to locale 1 at once, while locale 2
            // relays large calls to locale 1 too: streams from two
            // sources, several per sender, results back on two rings.
            let mut handles = Vec::new();
            for i in 0..6u64 {
                let len = (1 << 20) + 4097 * i as usize;
                let arg = pattern(len, i as u8);
                let want = fnv(&arg);
                handles.push((cantus::on(1, digest(arg, 200_000 + i)), want, len));
            }
            let relayed = cantus::on(2, relay(1, 3 << 20));
            for (h, want, len) in handles {
                let (got, back) = h.join().unwrap();
                assert_eq!(got, want, "the {len}-byte argument arrived intact");
                assert_eq!(back, pattern(back.len(), len as u8));
            }
            assert!(relayed.join().unwrap(), "locale 2's large call to locale 1");
        },
    );
}

#[test]
fn chant_messages_of_any_size_arrive_whole() {
    in_job("chant_messages_of_any_size_arrive_whole", 3, || {
        let me = chant::me();
        for l in 1..3 {
            cantus::begin_on(l, Echo { boss: me }).unwrap();
        }
        let echoes: Vec<TaskId> = (1..3)
            .map(|_| chant::recv(Source::Any, Tag::Is(1)).source())
            .collect();
        for &echo in &echoes {
            for (tag, len) in [
                (2, 0),
                (3, 65_500),
                (4, 65_536),
                (5, 1 << 20),
                (6, (3 << 20) + 7),
            ] {
                let m = pattern(len, tag as u8);
                chant::send(echo, tag, &m).unwrap();
                let back = chant::recv(Source::Task(echo), Tag::Is(tag));
                assert_eq!(back.bytes().len(), len);
                assert!(back.bytes() == &m[..], "{len} bytes to {echo} and back");
            }
        }
        // Four tasks of this locale send large messages to one echo at
        // once, each with its own tag; each gets its own bytes back.
        let echo = echoes[0];
        let mixed = std::sync::atomic::AtomicUsize::new(0);
        cantus::scope(|s| {
            for k in 0..4u32 {
                let mixed = &mixed;
                s.spawn(move || {
                    for round in 0..3 {
                        let m = pattern(300_000 + 1000 * k as usize, (k * 16 + round) as u8);
                        chant::send(echo, 10 + k, &m).unwrap();
                        let back = chant::recv(Source::Task(echo), Tag::Is(10 + k));
                        if back.bytes() != &m[..] {
                            mixed.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                        }
                    }
                });
            }
        });
        let ok = mixed.into_inner() == 0;
        assert!(ok, "every sender got its own messages back");
        for &e in &echoes {
            chant::send(e, 0, &[]).unwrap();
        }
    });
}

#[test]
fn a_result_that_cannot_be_sent_back_is_an_error_naming_call_locales_and_cause() {
    let out = in_job(
        "a_result_that_cannot_be_sent_back_is_an_error_naming_call_locales_and_cause",
        2,
        || {
            cantus::on(1, limit_here(1000)).join().unwrap();
            let e = cantus::on(1, make(1000)).join().unwrap_err();
            assert_eq!(e.kind(), ErrorKind::Locale);
            let msg = e.to_string();
            for want in [
                "make",
                "ran on locale 1",
                "could not be sent back from locale 1 to locale 0",
                "larger than the 1000 bytes",
            ] {
                assert!(msg.contains(want), "{msg:?} lacks {want:?}");
            }
            // The locale goes on serving calls whose results fit.
            assert_eq!(cantus::on(1, make(3)).join().unwrap(), vec![0, 1, 2]);
            cantus::on(1, limit_here(u64::MAX)).join().unwrap();
            assert_eq!(cantus::on(1, make(100_000)).join().unwrap().len(), 100_000);
            // A panic there is the caller's error, and printed there too.
            let e = cantus::on(1, explode_politely("the kettle".into()))
                .join()
                .unwrap_err();
            assert_eq!(e.kind(), ErrorKind::RemotePanic);
        },
    );
    if let Some(err) = out {
        assert!(
            err.contains("explode_politely from locale 0 panicked on locale 1: the kettle"),
            "locale 1's stderr names the call, both locales and the panic:\n{err}"
        );
    }
}

#[test]
fn broken_fragment_streams_are_reported_naming_their_source() {
    let out = in_job(
        "broken_fragment_streams_are_reported_naming_their_source",
        2,
        || {
            cantus::on(1, BrokenStreams).join().unwrap();
            // Locale 0 goes on serving and calling, large calls included;
            // termination still balances (the job ends).
            assert_eq!(cantus::on(1, make(200_000)).join().unwrap().len(), 200_000);
        },
    );
    if let Some(err) = out {
        for want in [
            "dropped a frame that locale 1 sent in fragments: a piece at offset 100 of stream 7 came with no stream open",
            "stream 8 skipped from byte 100 to byte 300",
            "stream 9 ended after 30 of its 60 bytes, when stream 10 began",
            "rejected a malformed frame that locale 1 sent in fragments: unknown frame kind 99",
        ] {
            assert!(err.contains(want), "stderr lacks {want:?}:\n{err}");
        }
    }
}
