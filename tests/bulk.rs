//! `Bulk<T>` between locales: arrays of plain data as a remote call's
//! argument and result, in a Chant message and in a balanced piece,
//! nested among other fields, at every size around the transport's
//! thresholds (a frame is half a ring: 65,504 payload bytes by default)
//! up to 64 MiB, from many senders at once; they arrive whole, aligned
//! for their type, and the job's locales agree on every byte. Each test
//! runs its body in a child process (locale 0) under the kill timeout of
//! `tests/common`.

mod common;

use cantus::balance::Splittable;
use cantus::chant::{self, Source, Tag, TaskId};
use cantus::{Bulk, Remote};
use common::is_child;
use serde::{Deserialize, Serialize};

/// A particle: a plain-data struct with padding-free fields.
#[derive(
    Clone, Copy, Debug, PartialEq, bytemuck::Pod, bytemuck::Zeroable, Serialize, Deserialize,
)]
#[repr(C)]
struct Particle {
    at: [f64; 3],
    id: u32,
    kind: u32,
}

/// `n` values that differ by position and by `seed`.
fn values(n: usize, seed: u64) -> Vec<f64> {
    (0..n)
        .map(|i| (i as u64).wrapping_mul(0x9e37_79b9).wrapping_add(seed) as f64 * 0.25)
        .collect()
}

/// Checks a block on the remote side and sends back its negation with
/// the sum of what it got, nested beside other fields.
#[derive(Serialize, Deserialize)]
struct Negate {
    tag: String,
    block: Bulk<f64>,
    particles: Bulk<Particle>,
}

#[derive(Serialize, Deserialize)]
struct Negated {
    tag: String,
    sum: f64,
    block: Bulk<f64>,
    aligned: bool,
    particles: usize,
}

impl Remote for Negate {
    type Output = Negated;
    fn run(self) -> Negated {
        let aligned = self.block.as_ptr() as usize % std::mem::align_of::<f64>() == 0
            && self.particles.as_ptr() as usize % std::mem::align_of::<Particle>() == 0;
        let sum = self.block.iter().sum();
        let mut block = self.block;
        block.iter_mut().for_each(|x| *x = -*x);
        Negated {
            tag: self.tag,
            sum,
            block,
            aligned,
            particles: self
                .particles
                .iter()
                .filter(|p| p.at[0] == p.id as f64)
                .count(),
        }
    }
}

/// Echoes every message back to its sender (same tag) until tag 0,
/// decoded as an `M` and encoded again as one.
#[derive(Serialize, Deserialize)]
#[serde(bound = "")]
struct Echo<M> {
    boss: TaskId,
    #[serde(skip)]
    message: std::marker::PhantomData<M>,
}

impl<M> Echo<M> {
    fn to(boss: TaskId) -> Echo<M> {
        Echo {
            boss,
            message: std::marker::PhantomData,
        }
    }
}

impl<M: Serialize + serde::de::DeserializeOwned + Send + 'static> Remote for Echo<M> {
    type Output = ();
    fn run(self) {
        common::serve_chant(self.boss, Source::Any, |m| {
            let back: M = m.decode().unwrap();
            chant::send_value(m.source(), m.tag(), &back).unwrap();
        });
    }
}

cantus::remote!(Negate, Echo<(u64, Bulk<f64>)>, Echo<(u64, Vec<f64>)>);

/// A dot product as splittable work: its pieces carry their halves of
/// both vectors as bulk arrays, so a piece that moves to another locale
/// moves its data as bytes.
#[derive(Clone, Debug, Serialize, Deserialize)]
struct Dot {
    x: Bulk<f64>,
    y: Bulk<f64>,
    done: usize,
}

impl Splittable for Dot {
    type Result = f64;

    fn run(&mut self, budget: usize, acc: &mut f64) -> bool {
        let end = (self.done + budget).min(self.x.len());
        *acc += self.x[self.done..end]
            .iter()
            .zip(&self.y[self.done..end])
            .map(|(a, b)| a * b)
            .sum::<f64>();
        self.done = end;
        self.done < self.x.len()
    }

    fn split(&mut self) -> Option<Self> {
        let left = self.x.len() - self.done;
        if left < 2 {
            return None;
        }
        let mid = self.done + left / 2;
        let mut x = self.x.to_vec();
        let mut y = self.y.to_vec();
        let piece = Dot {
            x: x.split_off(mid).into(),
            y: y.split_off(mid).into(),
            done: 0,
        };
        self.x = x.into();
        self.y = y.into();
        Some(piece)
    }

    fn merge(into: &mut f64, other: f64) {
        *into += other;
    }
}

cantus::splittable!(Dot);

/// Runs `body` in a child process whose job has `locales` locales (one
/// worker each); returns its stderr (empty in the child).
fn in_job(test: &str, locales: usize, body: impl FnOnce() + Send) -> String {
    common::in_job(test, locales, &[], body).unwrap_or_default()
}

/// Sums a plain `Vec<f64>` (which the codec moves as its bytes).
#[derive(Serialize, Deserialize)]
struct SumVec(Vec<f64>);

impl Remote for SumVec {
    type Output = f64;
    fn run(self) -> f64 {
        self.0.iter().sum()
    }
}

/// Sums a plain `Vec<u32>` (varints: serde moves it element by element).
#[derive(Serialize, Deserialize)]
struct SumInts(Vec<u32>);

impl Remote for SumInts {
    type Output = u64;
    fn run(self) -> u64 {
        self.0.iter().map(|&x| u64::from(x)).sum()
    }
}

cantus::remote!(SumVec, SumInts);

/// Says whether its arrays arrived in place (in the frame the transport
/// lent), negates the first where it lies, and sends it back.
#[derive(Serialize, Deserialize)]
struct InPlace {
    block: Bulk<f64>,
    ids: Bulk<u32>,
}

#[derive(Serialize, Deserialize)]
struct InPlaceSaid {
    block_in_place: bool,
    ids_in_place: bool,
    changed_where_it_lay: bool,
    ids_sum: u64,
    block: Bulk<f64>,
}

impl Remote for InPlace {
    type Output = InPlaceSaid;
    fn run(mut self) -> InPlaceSaid {
        let (block_in_place, ids_in_place) = (self.block.is_in_place(), self.ids.is_in_place());
        let at = self.block.as_ptr();
        self.block.iter_mut().for_each(|x| *x = -*x);
        InPlaceSaid {
            block_in_place,
            ids_in_place,
            changed_where_it_lay: self.block.as_ptr() == at,
            ids_sum: self.ids.iter().map(|&i| u64::from(i)).sum(),
            block: self.block,
        }
    }
}

/// A block of `n` values made from `seed`, returned.
#[derive(Serialize, Deserialize)]
struct Make {
    n: u64,
    seed: u64,
}

impl Remote for Make {
    type Output = Bulk<f64>;
    fn run(self) -> Bulk<f64> {
        values(self.n as usize, self.seed).into()
    }
}

cantus::remote!(InPlace, Make);

/// Calls `InPlace` on locale 1 with `n` values and 2,048 ids; checks the
/// values came back negated and says (there, here) whether the arrays
/// were in place.
fn call_in_place(n: usize) -> ((bool, bool, bool), bool) {
    let v = values(n, 9);
    let ids: Vec<u32> = (0..2048).collect();
    let said = cantus::on(
        1,
        InPlace {
            block: v.clone().into(),
            ids: ids.into(),
        },
    )
    .join()
    .unwrap();
    assert_eq!(said.ids_sum, 2047 * 2048 / 2, "the ids arrived whole");
    assert!(said.changed_where_it_lay || !said.block_in_place);
    let here = said.block.is_in_place();
    assert!(
        common::negated(&said.block, &v),
        "{n} values came back negated"
    );
    if here {
        // A clone shares the elements; changing one copies them first.
        let mut mine = said.block.clone();
        mine[0] = 12345.0;
        assert!(!mine.is_in_place() && said.block.is_in_place());
        assert_eq!(said.block[0], -v[0], "the shared original is unchanged");
    }
    let back = said.block.into_vec();
    assert_eq!(back.len(), n);
    (
        (
            said.block_in_place,
            said.ids_in_place,
            said.changed_where_it_lay,
        ),
        here,
    )
}

#[test]
fn large_bulks_are_received_in_place_and_changed_there() {
    let _ = in_job(
        "large_bulks_are_received_in_place_and_changed_there",
        2,
        || {
            // 1 MiB: a rendezvous block each way, read where it was
            // written, the argument negated there, the result sent from
            // it; both arrays of the call aligned in place.
            assert_eq!(call_in_place(1 << 17), ((true, true, true), true));
            // In a ring frame (not lent): copied out, as small arrays are.
            assert_eq!(call_in_place(1000), ((false, false, true), false));
        },
    );
}

#[test]
fn bulks_with_rendezvous_off_are_copied_and_whole() {
    let _ = common::in_job(
        "bulks_with_rendezvous_off_are_copied_and_whole",
        2,
        &[("CANTUS_RENDEZVOUS_BYTES", "0")],
        || {
            assert_eq!(call_in_place(1 << 17), ((false, false, true), false));
        },
    );
}

/// `count` results of 1 MiB made on locale 1 (seeds 0, 1, ...), each kept
/// where it arrived.
fn made_on_1(count: u64) -> Vec<Bulk<f64>> {
    (0..count)
        .map(|seed| cantus::on(1, Make { n: 1 << 17, seed }).join().unwrap())
        .collect()
}

#[test]
fn results_kept_in_place_do_not_hold_up_their_sender() {
    let _ = in_job(
        "results_kept_in_place_do_not_hold_up_their_sender",
        2,
        || {
            // 24 results of 1 MiB, each kept where it arrived until all
            // came (three times the 8 MiB area): once the area is full
            // the later ones go in ring pieces, and arrive whole.
            let kept = made_on_1(24);
            assert!(kept[0].is_in_place(), "the first arrived in place");
            assert!(
                kept.iter().any(|b| !b.is_in_place()),
                "later ones came in pieces while the first were kept"
            );
            for (i, b) in kept.iter().enumerate() {
                assert!(**b == values(1 << 17, i as u64)[..], "result {i}");
            }
        },
    );
}

/// Negates its array where it lies and returns it, after `note`; `keep`
/// keeps a clone on this locale (`KEPT`) until `ForgetKept`.
#[derive(Serialize, Deserialize)]
struct NegateBack {
    block: Bulk<f64>,
    keep: bool,
    note: String,
}

#[derive(Serialize, Deserialize)]
struct NegatedBack {
    note: String,
    block: Bulk<f64>,
}

/// Clones of arrays `NegateBack` kept.
static KEPT: std::sync::Mutex<Vec<Bulk<f64>>> = std::sync::Mutex::new(Vec::new());

impl Remote for NegateBack {
    type Output = NegatedBack;
    fn run(mut self) -> NegatedBack {
        self.block.iter_mut().for_each(|x| *x = -*x);
        if self.keep {
            KEPT.lock().unwrap().push(self.block.clone());
        }
        NegatedBack {
            note: self.note,
            block: self.block,
        }
    }
}

/// Drops what `NegateBack` kept.
#[derive(Serialize, Deserialize)]
struct ForgetKept;

impl Remote for ForgetKept {
    type Output = ();
    fn run(self) {
        KEPT.lock().unwrap().clear();
    }
}

cantus::remote!(NegateBack, ForgetKept);

/// Calls `NegateBack` on locale 1 with 1 MiB of values from `seed`;
/// checks the note and the values came back, and returns the array.
fn negate_back(seed: u64, keep: bool, note: &str) -> Bulk<f64> {
    let v = values(1 << 17, seed);
    let got = cantus::on(
        1,
        NegateBack {
            block: v.clone().into(),
            keep,
            note: note.into(),
        },
    )
    .join()
    .unwrap();
    assert_eq!(got.note, note);
    assert!(
        common::negated(&got.block, &v),
        "the values of {seed} came back negated"
    );
    got.block
}

#[test]
fn a_result_changed_in_place_goes_back_in_its_arguments_block() {
    let _ = in_job(
        "a_result_changed_in_place_goes_back_in_its_arguments_block",
        2,
        || {
            // Results kept in place here fill locale 1's 8 MiB area for
            // us: its later large replies go in ring pieces.
            let kept = made_on_1(12);
            assert!(
                !kept.last().unwrap().is_in_place(),
                "locale 1's area for us is full"
            );
            // An argument negated where it lay goes back in its own block,
            // which needs none of that area, and is read in place here;
            // 20 round trips of 1 MiB, more than our own area holds, so
            // each block was taken back once its result was dropped.
            for i in 0..20 {
                assert!(negate_back(i, false, "").is_in_place(), "round trip {i}");
            }
            // Not so (they go as any reply, here in pieces) with no room
            // for the reply in front of the array, or with a clone of it
            // still held there.
            assert!(!negate_back(100, false, &"x".repeat(300)).is_in_place());
            assert!(!negate_back(101, true, "").is_in_place());
            cantus::on(1, ForgetKept).join().unwrap();
            drop(kept);
            // Returned blocks kept here hold our own area: later arguments
            // go in pieces, and every result still comes back whole.
            let held: Vec<Bulk<f64>> = (0..12).map(|i| negate_back(200 + i, false, "")).collect();
            assert!(held[0].is_in_place());
            for (i, b) in held.iter().enumerate() {
                let v = values(1 << 17, 200 + i as u64);
                assert!(common::negated(b, &v), "kept result {i}");
            }
        },
    );
}

/// How `NegateEcho` sends an array back.
#[derive(Clone, Copy, Serialize, Deserialize)]
enum SendBack {
    /// Given up (`send_value(to, tag, value)`).
    Value,
    /// Given up, with a clone kept here.
    KeepingAClone,
    /// By reference (`send_value(to, tag, &value)`).
    Reference,
}

/// A Chant task that negates each array it is sent where it arrived and
/// sends it back to its sender after a note of the length asked for, as
/// it is asked to (`SendBack`), until tag 0.
#[derive(Serialize, Deserialize)]
struct NegateEcho {
    boss: TaskId,
}

impl Remote for NegateEcho {
    type Output = ();
    fn run(self) {
        let mut kept = Vec::new();
        common::serve_chant(self.boss, Source::Task(self.boss), |m| {
            let (how, note_len, mut block): (SendBack, usize, Bulk<f64>) =
                m.into_decoded().unwrap();
            block.iter_mut().for_each(|x| *x = -*x);
            let back = ("x".repeat(note_len), block);
            match how {
                SendBack::Value => chant::send_value(self.boss, 2, back).unwrap(),
                SendBack::KeepingAClone => {
                    kept.push(back.1.clone());
                    chant::send_value(self.boss, 2, back).unwrap();
                }
                SendBack::Reference => chant::send_value(self.boss, 2, &back).unwrap(),
            }
        });
    }
}

cantus::remote!(NegateEcho);

/// Sends `echo` 1 MiB of values from `seed` to send back as `how` says
/// after a note of `note_len` bytes; checks the note and the values came
/// back, and returns the array.
fn echo_negated(echo: TaskId, seed: u64, how: SendBack, note_len: usize) -> Bulk<f64> {
    let v = values(1 << 17, seed);
    chant::send_value(echo, 2, (how, note_len, Bulk::from(v.clone()))).unwrap();
    let (note, block): (String, Bulk<f64>) = chant::recv(Source::Task(echo), Tag::Is(2))
        .into_decoded()
        .unwrap();
    assert_eq!(note.len(), note_len);
    assert!(
        common::negated(&block, &v),
        "the values of {seed} came back negated"
    );
    block
}

#[test]
fn a_chant_array_sent_back_by_value_goes_back_in_its_block() {
    let _ = in_job(
        "a_chant_array_sent_back_by_value_goes_back_in_its_block",
        2,
        || {
            // Results kept in place here fill locale 1's 8 MiB area for
            // us: its later large messages go in ring pieces.
            let kept = made_on_1(12);
            assert!(!kept.last().unwrap().is_in_place(), "the area is full");
            cantus::begin_on(1, NegateEcho { boss: chant::me() }).unwrap();
            let echo = chant::recv(Source::Any, Tag::Is(1)).source();
            // An array negated where it arrived and given back goes back
            // in its own block, which needs none of that area, and is read
            // in place here; 20 round trips of 1 MiB, more than our own
            // area holds, so each block was taken back once dropped.
            for i in 0..20 {
                assert!(
                    echo_negated(echo, i, SendBack::Value, 0).is_in_place(),
                    "round trip {i}"
                );
            }
            // Not so (they go as any message, here in pieces) with no room
            // for the new head in front of the array, with a clone of it
            // still held there, or sent by reference.
            assert!(!echo_negated(echo, 100, SendBack::Value, 300).is_in_place());
            assert!(!echo_negated(echo, 101, SendBack::KeepingAClone, 0).is_in_place());
            assert!(!echo_negated(echo, 102, SendBack::Reference, 0).is_in_place());
            chant::send(echo, 0, &[]).unwrap();
            drop(kept);
        },
    );
}

/// A Chant task that passes the array of each message it gets (tag 2)
/// on, given up, to `next` (tag 2), or, with no `next`, negates it where
/// it arrived and gives it up to `boss` (tag 3), until tag 0.
#[derive(Serialize, Deserialize)]
struct PassOn {
    boss: TaskId,
    next: Option<TaskId>,
}

impl Remote for PassOn {
    type Output = ();
    fn run(self) {
        common::serve_chant(self.boss, Source::Any, |m| {
            let mut block: Bulk<f64> = m.into_decoded().unwrap();
            match self.next {
                Some(next) => chant::send_value(next, 2, block).unwrap(),
                None => {
                    block.iter_mut().for_each(|x| *x = -*x);
                    chant::send_value(self.boss, 3, block).unwrap();
                }
            }
        });
    }
}

cantus::remote!(PassOn);

#[test]
fn a_chant_array_given_up_to_a_third_locale_goes_as_any_message() {
    let _ = in_job(
        "a_chant_array_given_up_to_a_third_locale_goes_as_any_message",
        3,
        || {
            // 0 -> 1 -> 2 -> 0: each hop gives the array up to a locale
            // other than the one whose block it arrived in, which cannot
            // take it back; it goes as any message, and comes back whole.
            let boss = chant::me();
            cantus::begin_on(2, PassOn { boss, next: None }).unwrap();
            let last = chant::recv(Source::Any, Tag::Is(1)).source();
            cantus::begin_on(
                1,
                PassOn {
                    boss,
                    next: Some(last),
                },
            )
            .unwrap();
            let middle = chant::recv(Source::Any, Tag::Is(1)).source();
            for seed in 0..12 {
                let v = values(1 << 17, seed);
                chant::send_value(middle, 2, Bulk::from(v.clone())).unwrap();
                let back: Bulk<f64> = chant::recv(Source::Task(last), Tag::Is(3))
                    .into_decoded()
                    .unwrap();
                assert!(
                    common::negated(&back, &v),
                    "the values of {seed} came back negated"
                );
            }
            chant::send(middle, 0, &[]).unwrap();
            chant::send(last, 0, &[]).unwrap();
        },
    );
}

#[test]
fn a_large_vec_of_varints_gets_a_hint_naming_bulk_in_debug_builds_once() {
    let stderr = in_job(
        "a_large_vec_of_varints_gets_a_hint_naming_bulk_in_debug_builds_once",
        2,
        || {
            for _ in 0..3 {
                let v: Vec<u32> = (0..1 << 16).map(|i| i * 7919).collect();
                let want: u64 = v.iter().map(|&x| u64::from(x)).sum();
                assert_eq!(cantus::on(1, SumInts(v)).join().unwrap(), want);
            }
            // A plain Vec<f64> and a bulk array of the same size, and a
            // small vector: no hint.
            let v = values(1 << 16, 5);
            let want: f64 = v.iter().sum();
            assert_eq!(cantus::on(1, SumVec(v)).join().unwrap(), want);
            let got = cantus::on(
                1,
                Negate {
                    tag: String::new(),
                    block: values(1 << 16, 5).into(),
                    particles: Bulk::new(),
                },
            )
            .join()
            .unwrap();
            assert_eq!(got.block.len(), 1 << 16);
            assert_eq!(cantus::on(1, SumInts(vec![1; 100])).join().unwrap(), 100);
        },
    );
    if is_child() {
        return;
    }
    let hints: Vec<&str> = stderr.lines().filter(|l| l.contains("hint")).collect();
    if cfg!(debug_assertions) {
        assert_eq!(hints.len(), 1, "one hint, for SumInts only:\n{stderr}");
        assert!(
            hints[0].contains("SumInts") && hints[0].contains("cantus::Bulk"),
            "{stderr}"
        );
    } else {
        assert!(hints.is_empty(), "no hint in a release build:\n{stderr}");
    }
}

/// Sizes in f64s: empty, one, around a frame's payload (65,504 bytes,
/// less the call's own fields), 1 MiB, and 64 MiB.
fn sizes(big: bool) -> Vec<usize> {
    let frame = 65_504 / 8;
    let mut s = vec![0, 1, frame - 20, frame - 2, frame, frame + 2, 1 << 17];
    if big {
        s.push(8 << 20);
    }
    s
}

#[test]
fn bulk_arguments_and_results_arrive_whole_and_aligned() {
    let _ = in_job(
        "bulk_arguments_and_results_arrive_whole_and_aligned",
        2,
        || {
            for n in sizes(true) {
                let v = values(n, n as u64);
                let particles: Vec<Particle> = (0..n.min(1000))
                    .map(|i| Particle {
                        at: [i as f64, 0.5, -1.0],
                        id: i as u32,
                        kind: 7,
                    })
                    .collect();
                let got = cantus::on(
                    1,
                    Negate {
                        tag: format!("n={n}"),
                        block: Bulk::from(v.clone()),
                        particles: particles.into(),
                    },
                )
                .join()
                .unwrap();
                assert_eq!(got.tag, format!("n={n}"));
                assert_eq!(got.sum, v.iter().sum::<f64>(), "{n} values arrived intact");
                assert!(got.aligned, "decoded arrays are aligned for their type");
                assert_eq!(got.particles, n.min(1000));
                let back = got.block.into_vec();
                assert_eq!(back.len(), n);
                assert!(common::negated(&back, &v), "{n} values came back");
            }
        },
    );
}

#[test]
fn bulk_calls_from_many_senders_never_mix() {
    let _ = in_job("bulk_calls_from_many_senders_never_mix", 3, || {
        // Tasks on locale 0 call locales 1 and 2 at once with arrays of
        // different sizes and contents.
        let handles: Vec<_> = (0..12u64)
            .map(|i| {
                let n = (1 << 16) + 997 * i as usize;
                let v = values(n, i);
                let want: f64 = v.iter().sum();
                let h = cantus::on(
                    1 + i as usize % 2,
                    Negate {
                        tag: i.to_string(),
                        block: v.into(),
                        particles: Bulk::new(),
                    },
                );
                (h, want, n, i)
            })
            .collect();
        for (h, want, n, i) in handles {
            let got = h.join().unwrap();
            assert_eq!(got.tag, i.to_string());
            assert_eq!(got.sum, want, "call {i}'s {n} values");
            assert_eq!(got.block.len(), n);
        }
    });
}

#[test]
fn bulk_chant_messages_arrive_whole() {
    let _ = in_job("bulk_chant_messages_arrive_whole", 2, || {
        cantus::begin_on(1, Echo::<(u64, Bulk<f64>)>::to(chant::me())).unwrap();
        let echo = chant::recv(Source::Any, Tag::Is(1)).source();
        for n in sizes(false) {
            let v = values(n, 3);
            chant::send_value(echo, 2, &(n as u64, Bulk::from(v.clone()))).unwrap();
            let (m, back): (u64, Bulk<f64>) = chant::recv(Source::Task(echo), Tag::Is(2))
                .decode()
                .unwrap();
            assert_eq!(m, n as u64);
            assert_eq!(back.into_vec(), v, "{n} values");
        }
        chant::send(echo, 0, &[]).unwrap();
    });
}

/// Receives one message, decodes it consuming it, and answers whether
/// its array was in place and what it summed to.
#[derive(Serialize, Deserialize)]
struct TakeInPlace {
    boss: TaskId,
}

impl Remote for TakeInPlace {
    type Output = ();
    fn run(self) {
        chant::send(self.boss, 1, &[]).unwrap();
        let m = chant::recv(Source::Task(self.boss), Tag::Is(2));
        let (n, block): (u64, Bulk<f64>) = m.into_decoded().unwrap();
        let sum: f64 = block.iter().sum();
        chant::send_value(self.boss, 3, (n, block.is_in_place(), sum)).unwrap();
    }
}

cantus::remote!(TakeInPlace);

#[test]
fn bulk_chant_messages_decoded_whole_are_read_in_place() {
    let _ = in_job(
        "bulk_chant_messages_decoded_whole_are_read_in_place",
        2,
        || {
            // 1 MiB: a rendezvous block, kept in the mailbox, then read
            // where it arrived; 100 values: a ring frame, copied.
            for (n, in_place) in [(1usize << 17, true), (100, false)] {
                cantus::begin_on(1, TakeInPlace { boss: chant::me() }).unwrap();
                let taker = chant::recv(Source::Any, Tag::Is(1)).source();
                let v = values(n, 5);
                chant::send_value(taker, 2, &(n as u64, Bulk::from(v.clone()))).unwrap();
                let said: (u64, bool, f64) = chant::recv(Source::Task(taker), Tag::Is(3))
                    .decode()
                    .unwrap();
                assert_eq!(
                    said,
                    (n as u64, in_place, v.iter().sum::<f64>()),
                    "{n} values"
                );
            }
        },
    );
}

#[test]
fn balanced_pieces_carry_bulk_arrays_between_locales() {
    let _ = in_job(
        "balanced_pieces_carry_bulk_arrays_between_locales",
        2,
        || {
            let n = 200_000;
            let x = values(n, 1);
            let y = values(n, 2);
            let want: f64 = x.iter().zip(&y).map(|(a, b)| a * b).sum();
            let outcome = cantus::balance::Balance::new(Dot {
                x: x.into(),
                y: y.into(),
                done: 0,
            })
            .run()
            .unwrap();
            // Summed in another order: equal to rounding.
            let got = outcome.result;
            assert!(
                (got - want).abs() <= want.abs() * 1e-9,
                "dot product {got}, serially {want}"
            );
        },
    );
}

/// Negates every plain vector it is given (which the codec moves as
/// their bytes, not element by element) and sends them back.
#[derive(Serialize, Deserialize)]
struct NegatePlain {
    floats: Vec<f64>,
    singles: Vec<f32>,
    bytes: Vec<u8>,
    signed: Box<[i8]>,
}

impl Remote for NegatePlain {
    type Output = NegatePlain;
    fn run(mut self) -> NegatePlain {
        self.floats.iter_mut().for_each(|x| *x = -*x);
        self.singles.iter_mut().for_each(|x| *x = -*x);
        self.bytes.iter_mut().for_each(|x| *x = !*x);
        self.signed.iter_mut().for_each(|x| *x = x.wrapping_neg());
        self
    }
}

cantus::remote!(NegatePlain);

#[test]
fn plain_vecs_as_arguments_and_results_arrive_whole() {
    let _ = in_job(
        "plain_vecs_as_arguments_and_results_arrive_whole",
        2,
        || {
            for n in sizes(true) {
                let floats = values(n, n as u64 + 1);
                let singles: Vec<f32> = floats.iter().map(|&x| x as f32).collect();
                let bytes: Vec<u8> = (0..n).map(|i| (i * 31) as u8).collect();
                let signed: Vec<i8> = (0..n).map(|i| (i * 7) as i8).collect();
                let got = cantus::on(
                    1,
                    NegatePlain {
                        floats: floats.clone(),
                        singles: singles.clone(),
                        bytes: bytes.clone(),
                        signed: signed.clone().into_boxed_slice(),
                    },
                )
                .join()
                .unwrap();
                assert_eq!(got.floats.len(), n);
                assert!(common::negated(&got.floats, &floats), "{n} f64s");
                assert!(common::negated(&got.singles, &singles), "{n} f32s");
                assert!(
                    got.bytes.iter().zip(&bytes).all(|(b, a)| *b == !*a),
                    "{n} u8s"
                );
                assert!(
                    got.signed
                        .iter()
                        .zip(&signed)
                        .all(|(b, a)| *b == a.wrapping_neg()),
                    "{n} i8s"
                );
                assert_eq!(
                    (got.singles.len(), got.bytes.len(), got.signed.len()),
                    (n, n, n)
                );
            }
        },
    );
}

#[test]
fn plain_vecs_in_chant_messages_arrive_whole() {
    let _ = in_job("plain_vecs_in_chant_messages_arrive_whole", 2, || {
        cantus::begin_on(1, Echo::<(u64, Vec<f64>)>::to(chant::me())).unwrap();
        let echo = chant::recv(Source::Any, Tag::Is(1)).source();
        for n in sizes(false) {
            let v = values(n, 9);
            chant::send_value(echo, 2, (n as u64, &v)).unwrap();
            let (m, back): (u64, Vec<f64>) = chant::recv(Source::Task(echo), Tag::Is(2))
                .decode()
                .unwrap();
            assert_eq!(m, n as u64);
            assert_eq!(back, v, "{n} values");
        }
        chant::send(echo, 0, &[]).unwrap();
    });
}
