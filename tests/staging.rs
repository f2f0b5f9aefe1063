//! Large plain arrays encoded straight into their rendezvous block
//! (`comm/shm/README.md`, "Rendezvous", rule S; `remote/encode.rs`,
//! "Staging"): a call's arguments, its result and a Chant message sent by
//! value, with `Vec`s of plain data and strings at every size around the
//! thresholds (a ring frame, a block) up to 64 MiB, several in one frame,
//! beside `Bulk`s, with a long tail after them; from senders that send,
//! wait, fail or panic while their frame is staged, and from many at
//! once. Every array arrives whole, and `__test::staged_frames` says
//! which frames went from a staged block. Each test runs its body in a
//! child process (locale 0) under the kill timeout of `tests/common`.

mod common;

use cantus::chant::{self, Source, Tag, TaskId};
use cantus::{Bulk, Remote};
use serde::{Deserialize, Serialize};

/// `n` values that differ by position and by `seed`.
fn values(n: usize, seed: u64) -> Vec<f64> {
    (0..n)
        .map(|i| (i as u64).wrapping_mul(0x9e37_79b9).wrapping_add(seed) as f64 * 0.5)
        .collect()
}

cantus::remote_fn! {
    /// The argument negated: a result as long as the argument.
    fn negate(v: Vec<f64>) -> Vec<f64> {
        v.into_iter().map(|x| -x).collect()
    }
}

cantus::remote_fn! {
    /// Frames this locale sent from staged blocks so far.
    fn staged_there() -> u64 {
        cantus::__test::staged_frames()
    }
}

/// Several arrays in one frame, with fields between and after them.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
struct Mixed {
    a: Vec<f64>,
    name: String,
    b: Vec<u8>,
    /// Varints: written in the encoding's bytes, after the staged part.
    tail: Vec<u32>,
    c: Vec<f32>,
    last: u64,
}

fn mixed(seed: u64) -> Mixed {
    Mixed {
        a: values(40_000, seed),
        name: "x".repeat(200_000 + seed as usize),
        b: (0..100_000).map(|i| (i as u64 ^ seed) as u8).collect(),
        tail: (0..20_000).map(|i| i * 7919 + seed as u32).collect(),
        c: (0..30_000).map(|i| i as f32 + seed as f32).collect(),
        last: seed,
    }
}

cantus::remote_fn! {
    /// Checks a `Mixed` against the one `seed` makes and sends it back.
    fn check_mixed(m: Mixed, seed: u64) -> (bool, Mixed) {
        (m == mixed(seed), m)
    }
}

/// A `Bulk` before a large `Vec`: the `Bulk` is pinned, so the frame is
/// not staged; and one after it, pinned in the bytes after the staged
/// part.
#[derive(Serialize, Deserialize)]
struct WithBulks {
    first: Bulk<f64>,
    v: Vec<f64>,
    then: Bulk<f64>,
}

#[derive(Serialize, Deserialize)]
struct SumBulks(WithBulks);
impl Remote for SumBulks {
    type Output = (f64, f64, f64, usize);
    fn run(self) -> (f64, f64, f64, usize) {
        let w = self.0;
        (
            w.first.iter().sum(),
            w.v.iter().sum(),
            w.then.iter().sum(),
            w.first.len() + w.v.len() + w.then.len(),
        )
    }
}

/// An argument whose `Serialize` does something between two large
/// arrays, while the first is staged: makes a large call to the same
/// locale itself, sleeps (the worker runs other tasks), fails, or
/// panics.
#[derive(Deserialize)]
struct Meddler {
    before: Vec<f64>,
    after: Vec<f64>,
    #[serde(skip)]
    what: Meddle,
}

#[derive(Clone, Copy, Default)]
enum Meddle {
    #[default]
    Nothing,
    CallsTheSameLocale,
    CallsThenFails,
    Sleeps,
    Fails,
    Panics,
}

impl Serialize for Meddler {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::{Error, SerializeStruct};
        let mut st = s.serialize_struct("Meddler", 2)?;
        st.serialize_field("before", &self.before)?;
        match self.what {
            Meddle::Nothing => {}
            Meddle::CallsTheSameLocale | Meddle::CallsThenFails => {
                let v = values(200_000, 9);
                let back = cantus::on(1, negate(v.clone())).join().unwrap();
                assert!(common::negated(&back, &v), "the call made while staged");
                if matches!(self.what, Meddle::CallsThenFails) {
                    // Its staged block, with the call's after it, goes
                    // back.
                    return Err(S::Error::custom("this argument does not encode"));
                }
            }
            Meddle::Sleeps => cantus::task::sleep(std::time::Duration::from_millis(20)),
            Meddle::Fails => return Err(S::Error::custom("this argument does not encode")),
            Meddle::Panics => panic!("a Serialize that panics"),
        }
        st.serialize_field("after", &self.after)?;
        st.end()
    }
}

#[derive(Serialize, Deserialize)]
struct SumMeddler(Meddler);
impl Remote for SumMeddler {
    type Output = (f64, f64);
    fn run(self) -> (f64, f64) {
        (self.0.before.iter().sum(), self.0.after.iter().sum())
    }
}

fn meddler(what: Meddle) -> Meddler {
    Meddler {
        before: values(100_000, 1),
        after: values(50_000, 2),
        what,
    }
}

fn sums(m: &Meddler) -> (f64, f64) {
    (m.before.iter().sum(), m.after.iter().sum())
}

/// Echoes every `Vec<f64>` message back by value, negated (same tag),
/// until tag 0.
#[derive(Serialize, Deserialize)]
struct NegateBack {
    boss: TaskId,
}
impl Remote for NegateBack {
    type Output = ();
    fn run(self) {
        common::serve_chant(self.boss, Source::Any, |m| {
            let (from, tag) = (m.source(), m.tag());
            let v: Vec<f64> = m.decode().unwrap();
            let back: Vec<f64> = v.into_iter().map(|x| -x).collect();
            chant::send_value(from, tag, back).unwrap();
        });
    }
}

cantus::remote!(SumBulks, SumMeddler, NegateBack);

/// Frames sent from staged blocks here and on locale 1 since `before`.
fn staged_since(before: (u64, u64)) -> (u64, u64) {
    (
        cantus::__test::staged_frames() - before.0,
        cantus::on(1, staged_there()).join().unwrap() - before.1,
    )
}

fn staged_now() -> (u64, u64) {
    (
        cantus::__test::staged_frames(),
        cantus::on(1, staged_there()).join().unwrap(),
    )
}

#[test]
fn plain_arrays_of_every_size_are_encoded_in_their_block() {
    common::in_job(
        "plain_arrays_of_every_size_are_encoded_in_their_block",
        2,
        &[],
        || {
            // Elements of 8 bytes; a ring frame carries 65,504 bytes, a
            // block 2,097,088 (the default sizes). Staged: an array of at
            // least 32 KiB in a frame longer than a ring frame and no
            // longer than a block, each way.
            let staged = [8_192, 131_072, 262_100];
            let not_staged = [0, 100, 4_095, 4_096, 262_200, 8 << 20];
            let around_a_ring_frame = 8_180..8_192;
            for n in staged
                .into_iter()
                .chain(not_staged)
                .chain(around_a_ring_frame)
            {
                let v = values(n, n as u64);
                let before = staged_now();
                let back = cantus::on(1, negate(v.clone())).join().unwrap();
                assert_eq!(back.len(), n);
                assert!(common::negated(&back, &v), "{n} values and back");
                let went = staged_since(before);
                if staged.contains(&n) {
                    assert_eq!(went, (1, 1), "{n} values: argument and result staged");
                } else if not_staged.contains(&n) {
                    assert_eq!(went, (0, 0), "{n} values: nothing staged");
                }
            }
        },
    );
}

#[test]
fn several_arrays_bulks_and_a_long_tail_share_a_staged_frame() {
    common::in_job(
        "several_arrays_bulks_and_a_long_tail_share_a_staged_frame",
        2,
        &[],
        || {
            for seed in 0..3 {
                let before = staged_now();
                let (same, back) = cantus::on(1, check_mixed(mixed(seed), seed))
                    .join()
                    .unwrap();
                assert!(same, "locale 1 got the whole Mixed {seed}");
                assert_eq!(back, mixed(seed), "and sent it back whole");
                assert_eq!(staged_since(before), (1, 1));
            }
            // A `Bulk` first: pinned, so the `Vec` after it is not staged;
            // every array still arrives.
            let (first, v, then) = (values(20_000, 1), values(100_000, 2), values(9_000, 3));
            let before = staged_now();
            let got = cantus::on(
                1,
                SumBulks(WithBulks {
                    first: first.clone().into(),
                    v: v.clone(),
                    then: then.clone().into(),
                }),
            )
            .join()
            .unwrap();
            let sum = |x: &[f64]| x.iter().sum::<f64>();
            assert_eq!(got, (sum(&first), sum(&v), sum(&then), 129_000));
            assert_eq!(staged_since(before).0, 0, "a pin first: not staged");
        },
    );
}

#[test]
fn a_sender_that_sends_or_waits_while_staged_stops_no_one() {
    common::in_job(
        "a_sender_that_sends_or_waits_while_staged_stops_no_one",
        2,
        &[],
        || {
            // Its `Serialize` makes a large call to the same locale while
            // its own frame is staged there: that call is staged in a
            // block of its own, after the first, and goes first.
            let m = meddler(Meddle::CallsTheSameLocale);
            let want = sums(&m);
            let before = staged_now();
            assert_eq!(cantus::on(1, SumMeddler(m)).join().unwrap(), want);
            assert!(staged_since(before).0 >= 1, "the inner call was staged");
            // It sleeps while staged; other tasks of this locale send
            // large calls meanwhile, and many at once after it.
            cantus::scope(|s| {
                s.spawn(|| {
                    let m = meddler(Meddle::Sleeps);
                    let want = sums(&m);
                    assert_eq!(cantus::on(1, SumMeddler(m)).join().unwrap(), want);
                });
                for k in 0..6 {
                    s.spawn(move || {
                        let v = values(150_000 + 1000 * k, k as u64);
                        let back = cantus::on(1, negate(v.clone())).join().unwrap();
                        assert!(common::negated(&back, &v), "sender {k}");
                    });
                }
            });
        },
    );
}

#[test]
fn a_frame_that_fails_or_panics_while_staged_gives_its_block_back() {
    common::in_job(
        "a_frame_that_fails_or_panics_while_staged_gives_its_block_back",
        2,
        &[],
        || {
            let err = cantus::on(1, SumMeddler(meddler(Meddle::Fails)))
                .join()
                .unwrap_err();
            assert!(
                err.to_string().contains("does not encode"),
                "the encoding's own error: {err}"
            );
            // Given back with a block after it: passed once that one came
            // back.
            let err = cantus::on(1, SumMeddler(meddler(Meddle::CallsThenFails)))
                .join()
                .unwrap_err();
            assert!(err.to_string().contains("does not encode"), "{err}");
            let panicked = std::panic::catch_unwind(|| {
                cantus::on(1, SumMeddler(meddler(Meddle::Panics))).join()
            });
            assert!(panicked.is_err(), "the panic reaches the caller");
            // The block came back both times: the next frame is staged.
            let m = meddler(Meddle::Nothing);
            let want = sums(&m);
            let before = staged_now();
            assert_eq!(cantus::on(1, SumMeddler(m)).join().unwrap(), want);
            assert_eq!(staged_since(before).0, 1);
        },
    );
}

#[test]
fn chant_messages_by_value_are_encoded_in_their_block() {
    common::in_job(
        "chant_messages_by_value_are_encoded_in_their_block",
        2,
        &[],
        || {
            let me = chant::me();
            cantus::begin_on(1, NegateBack { boss: me }).unwrap();
            let echo = chant::recv(Source::Any, Tag::Is(1)).source();
            for (tag, n) in [(2, 10), (3, 131_072), (4, 262_100), (5, 1 << 20)] {
                let v = values(n, tag as u64);
                let before = staged_now();
                chant::send_value(echo, tag, &v).unwrap();
                let back: Vec<f64> = chant::recv(Source::Task(echo), Tag::Is(tag))
                    .decode()
                    .unwrap();
                assert_eq!(back.len(), n);
                assert!(common::negated(&back, &v), "{n} values and back");
                let want = if (8_192..=262_100).contains(&n) { 1 } else { 0 };
                assert_eq!(staged_since(before), (want, want), "{n} values");
            }
            chant::send(echo, 0, &[]).unwrap();
        },
    );
}
