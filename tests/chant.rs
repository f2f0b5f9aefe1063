//! Chant's talking tasks (`cantus::chant`) in jobs of 1 to 3 locales,
//! under both polling policies. Each test runs its body in a child process
//! (locale 0), which starts the other locales as further copies of this
//! binary, as `tests/locales.rs` does; every child runs under the kill
//! timeout of `tests/common`.

mod common;

use cantus::chant::{self, Message, Policy, Source, Tag, TaskId};
use cantus::{ErrorKind, Remote};
use common::calls::Add;
use common::{is_child, run_child};
use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::time::{Duration, Instant};

/// Tags of the tests' own protocol (the data tags are below 100).
const HELLO: u32 = 100;
const GO: u32 = 101;
const STOP: u32 = 102;
const PEER: u32 = 103;
const DONE: u32 = 104;

/// Every agent first tells its boss who it is, with its index.
fn hello(boss: TaskId, index: u32) {
    chant::send_value(boss, HELLO, index).unwrap();
}

/// Echoes every message to its sender, same tag, until `STOP`.
#[derive(Serialize, Deserialize)]
struct Echo {
    boss: TaskId,
    index: u32,
}
impl Remote for Echo {
    type Output = ();
    fn run(self) {
        hello(self.boss, self.index);
        loop {
            let m = chant::recv(Source::Any, Tag::Any);
            if m.tag() == STOP {
                break;
            }
            chant::send(m.source(), m.tag(), m.bytes()).unwrap();
        }
    }
}

/// After `GO`, sends its boss `count` messages, tags cycling through
/// `0..TAGS`, each carrying (index, sequence number within its tag).
#[derive(Serialize, Deserialize)]
struct Burst {
    boss: TaskId,
    index: u32,
    count: u32,
}
const TAGS: u32 = 3;
impl Remote for Burst {
    type Output = ();
    fn run(self) {
        hello(self.boss, self.index);
        chant::recv(Source::Task(self.boss), Tag::Is(GO));
        for i in 0..self.count {
            chant::send_value(self.boss, i % TAGS, (self.index, i / TAGS)).unwrap();
        }
    }
}

/// Gets a peer's id from its boss, pings it `ROUNDS` times (the peer
/// echoes), then reports to the boss.
#[derive(Serialize, Deserialize)]
struct PingPeer {
    boss: TaskId,
    index: u32,
}
const ROUNDS: u32 = 100;
impl Remote for PingPeer {
    type Output = ();
    fn run(self) {
        hello(self.boss, self.index);
        let peer: TaskId = chant::recv(Source::Task(self.boss), Tag::Is(PEER))
            .decode()
            .unwrap();
        for i in 0..ROUNDS {
            chant::send_value(peer, 1, i).unwrap();
            let back: u32 = chant::recv(Source::Task(peer), Tag::Is(1))
                .decode()
                .unwrap();
            assert_eq!(back, i);
        }
        chant::send_value(self.boss, DONE, (chant::me(), ROUNDS)).unwrap();
    }
}

/// Sleeps (its task only), then sends its boss one message.
#[derive(Serialize, Deserialize)]
struct Late {
    boss: TaskId,
    after_ms: u64,
}
impl Remote for Late {
    type Output = ();
    fn run(self) {
        cantus::task::sleep(Duration::from_millis(self.after_ms));
        chant::send(self.boss, 1, b"late").unwrap();
    }
}

/// Reports the locale's polling policy.
#[derive(Serialize, Deserialize)]
struct WhichPolicy;
impl Remote for WhichPolicy {
    type Output = bool;
    fn run(self) -> bool {
        chant::policy() == Policy::TaskPolls
    }
}

cantus::remote!(Echo, Burst, PingPeer, Late, WhichPolicy);

const POLICIES: [&str; 2] = ["scheduler", "task"];

/// Runs `body(locales)` in a child job for every locale count in
/// `locales` and both polling policies (`CANTUS_CHANT_POLL`); returns the
/// children's stderr.
fn in_jobs(test: &str, locales: &[usize], body: impl FnOnce(usize)) -> Vec<String> {
    if is_child() {
        let n = std::env::var("CANTUS_LOCALES").unwrap().parse().unwrap();
        body(n);
        return Vec::new();
    }
    let mut out = Vec::new();
    for &n in locales {
        for policy in POLICIES {
            let (status, stderr) = run_child(
                test,
                &[
                    ("CANTUS_LOCALES", &n.to_string()),
                    ("CANTUS_CHANT_POLL", policy),
                ],
            );
            assert!(
                status.success(),
                "{test} with CANTUS_LOCALES={n}, policy {policy}, failed: {status}\n{stderr}"
            );
            out.push(stderr);
        }
    }
    out
}

fn job(locales: usize) -> cantus::Runtime {
    cantus::Runtime::builder()
        .locales(locales)
        .workers(1)
        .build()
        .expect("a job starts")
}

/// [`in_jobs`], with `body` run as a task of a job of one worker per
/// locale.
fn talk(test: &str, locales: &[usize], body: impl FnOnce(usize) + Send) -> Vec<String> {
    in_jobs(test, locales, |n| {
        let rt = job(n);
        rt.block_on(|| body(n));
        rt.shutdown();
    })
}

/// One [`Echo`] per locale, answering to the caller.
fn echoes() -> Vec<TaskId> {
    let boss = chant::me();
    agents(1, |_, index| Echo { boss, index })
}

/// Starts `per_locale` agents on every locale (`make(locale, index)`) and
/// returns their ids by index, from their hellos.
fn agents<R: cantus::remote::RegisteredCall>(
    per_locale: usize,
    make: impl Fn(usize, u32) -> R,
) -> Vec<TaskId> {
    let n = cantus::num_locales();
    let total = n * per_locale;
    for i in 0..total {
        let locale = i / per_locale;
        cantus::begin_on(locale, make(locale, i as u32)).unwrap();
    }
    let mut ids = vec![None; total];
    for _ in 0..total {
        let m = chant::recv(Source::Any, Tag::Is(HELLO));
        let i: u32 = m.decode().unwrap();
        assert!(ids[i as usize].replace(m.source()).is_none());
    }
    let ids: Vec<TaskId> = ids.into_iter().map(Option::unwrap).collect();
    for (i, id) in ids.iter().enumerate() {
        assert_eq!(
            id.locale,
            i / per_locale,
            "agent {i} runs where it was sent"
        );
    }
    ids
}

fn stop_all(ids: &[TaskId]) {
    for &id in ids {
        chant::send(id, STOP, &[]).unwrap();
    }
}

#[test]
fn the_policy_comes_from_the_environment_on_every_locale() {
    in_jobs(
        "the_policy_comes_from_the_environment_on_every_locale",
        &[2],
        |n| {
            let rt = job(n);
            let want = std::env::var("CANTUS_CHANT_POLL").unwrap() == "task";
            let seen = rt.block_on(|| cantus::coforall_locales(|_| WhichPolicy).unwrap());
            assert_eq!(seen, vec![want; n]);
            rt.shutdown();
        },
    );
}

#[test]
fn messages_keep_their_order_per_sender_and_tag() {
    const PER_LOCALE: usize = 3;
    const COUNT: u32 = 600;
    talk(
        "messages_keep_their_order_per_sender_and_tag",
        &[1, 2, 3],
        |_| {
            let boss = chant::me();
            let ids = agents(PER_LOCALE, |_, index| Burst {
                boss,
                index,
                count: COUNT,
            });
            // Round 1: everything from any source with any tag.
            for &id in &ids {
                chant::send(id, GO, &[]).unwrap();
            }
            let mut next: HashMap<(u32, u32), u32> = HashMap::new();
            for _ in 0..ids.len() as u32 * COUNT {
                let m = chant::recv(Source::Any, Tag::Any);
                let (index, seq): (u32, u32) = m.decode().unwrap();
                assert_eq!(m.source(), ids[index as usize], "the source is the sender");
                let want = next.entry((index, m.tag())).or_insert(0);
                assert_eq!(seq, *want, "agent {index}, tag {}: out of order", m.tag());
                *want += 1;
            }
        },
    );
}

#[test]
fn a_window_sends_to_every_locale_in_order_and_waits_even_when_it_panics() {
    talk(
        "a_window_sends_to_every_locale_in_order_and_waits_even_when_it_panics",
        &[1, 2, 3],
        |_| {
            let ids = echoes();
            // Large and small, to every locale at once (this one too).
            let sizes = [300usize << 10, 1, 100 << 10, 0, 3 << 20, 8];
            let messages: Vec<Vec<u8>> = sizes
                .iter()
                .enumerate()
                .map(|(i, &n)| (0..n).map(|b| (b * 7 + i) as u8).collect())
                .collect();
            chant::window(|w| {
                for (tag, m) in messages.iter().enumerate() {
                    for &id in &ids {
                        w.send(id, tag as u32, m).unwrap();
                    }
                }
            });
            for &id in &ids {
                for (tag, sent) in messages.iter().enumerate() {
                    let m = chant::recv(Source::Task(id), Tag::Any);
                    assert_eq!(m.tag(), tag as u32, "order from {id}");
                    assert!(
                        m.bytes() == sent.as_slice(),
                        "{} bytes from {id}",
                        sent.len()
                    );
                }
            }
            // A panic inside the window comes out of it, after its sends.
            let caught = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                chant::window(|w| {
                    for &id in &ids {
                        w.send(id, 7, &messages[0]).unwrap();
                    }
                    panic!("a panic inside a window");
                })
            }));
            let panic = caught.expect_err("the window's panic comes out of it");
            assert_eq!(
                panic.downcast_ref::<&str>(),
                Some(&"a panic inside a window")
            );
            for &id in &ids {
                let m = chant::recv(Source::Task(id), Tag::Is(7));
                assert!(m.bytes() == messages[0].as_slice());
            }
            // What a window returns, it returns.
            assert_eq!(chant::window(|_| 42), 42);
            stop_all(&ids);
        },
    );
}

#[test]
fn receives_pick_by_source_and_tag_from_queued_messages() {
    const COUNT: u32 = 90;
    talk(
        "receives_pick_by_source_and_tag_from_queued_messages",
        &[1, 2, 3],
        |_| {
            let boss = chant::me();
            let ids = agents(2, |_, index| Burst {
                boss,
                index,
                count: COUNT,
            });
            for &id in &ids {
                chant::send(id, GO, &[]).unwrap();
            }
            // Last agent first, highest tag first: most messages wait in
            // the mailbox for a receive that matches them.
            for (index, &id) in ids.iter().enumerate().rev() {
                for tag in (0..TAGS).rev() {
                    for seq in 0..COUNT / TAGS {
                        let m = chant::recv(Source::Task(id), Tag::Is(tag));
                        assert_eq!((m.source(), m.tag()), (id, tag));
                        assert_eq!(m.decode::<(u32, u32)>().unwrap(), (index as u32, seq));
                    }
                }
            }
            // Nothing is left: a probe with any source finds nothing.
            let probe = chant::irecv(Source::Any, Tag::Any);
            cantus::task::sleep(Duration::from_millis(20));
            assert!(!probe.test(), "a message was left over");
        },
    );
}

#[test]
fn irecv_test_try_take_and_wait() {
    talk("irecv_test_try_take_and_wait", &[1, 2], |_| {
        let ids = echoes();
        let echo = *ids.last().unwrap();
        // Posted before anything was sent: not there.
        let h = chant::irecv(Source::Task(echo), Tag::Is(5));
        assert!(!h.test());
        let h = h.try_take().expect_err("nothing was sent");
        chant::send(echo, 5, b"five").unwrap();
        assert_eq!(h.wait().bytes(), b"five");
        // try_take until it comes.
        chant::send(echo, 6, b"six").unwrap();
        let mut h = chant::irecv(Source::Any, Tag::Is(6));
        let m: Message = loop {
            match h.try_take() {
                Ok(m) => break m,
                Err(back) => h = back,
            }
            cantus::task::yield_now();
        };
        assert_eq!((m.source(), m.tag(), m.bytes()), (echo, 6, &b"six"[..]));
        // Two receives posted, answered in post order.
        let a = chant::irecv(Source::Any, Tag::Is(7));
        let b = chant::irecv(Source::Any, Tag::Is(7));
        chant::send(echo, 7, b"first").unwrap();
        chant::send(echo, 7, b"second").unwrap();
        assert_eq!(b.wait().bytes(), b"second");
        assert_eq!(a.wait().bytes(), b"first");
        // A dropped handle cancels its receive; a message it had taken
        // goes back to the mailbox, ahead of later ones.
        let dropped = chant::irecv(Source::Any, Tag::Is(8));
        chant::send(echo, 8, b"taken").unwrap();
        chant::send(echo, 8, b"later").unwrap();
        while !dropped.test() {
            cantus::task::yield_now();
        }
        drop(dropped);
        assert_eq!(chant::recv(Source::Any, Tag::Is(8)).bytes(), b"taken");
        assert_eq!(chant::recv(Source::Any, Tag::Is(8)).bytes(), b"later");
        drop(chant::irecv(Source::Any, Tag::Is(9)));
        chant::send(echo, 9, b"nine").unwrap();
        assert_eq!(chant::recv(Source::Any, Tag::Is(9)).bytes(), b"nine");
        // A handle that found its message queued holds it; dropped, it
        // puts it back ahead of later ones too.
        chant::send(echo, 10, b"queued").unwrap();
        chant::send(echo, 10, b"later").unwrap();
        chant::send(echo, 11, b"marker").unwrap();
        // The marker came after both on the same path.
        assert_eq!(chant::recv(Source::Any, Tag::Is(11)).bytes(), b"marker");
        let found = chant::irecv(Source::Any, Tag::Is(10));
        assert!(found.test(), "the message was queued");
        drop(found);
        let found = chant::irecv(Source::Any, Tag::Is(10));
        assert_eq!(found.try_take().ok().unwrap().bytes(), b"queued");
        assert_eq!(chant::recv(Source::Any, Tag::Is(10)).bytes(), b"later");
        stop_all(&ids);
    });
}

#[test]
fn a_task_blocked_in_recv_does_not_block_its_worker() {
    talk(
        "a_task_blocked_in_recv_does_not_block_its_worker",
        &[1, 2],
        |n| {
            // One Echo per locale, each waiting in recv on a locale of
            // one worker.
            let ids = echoes();
            for l in 0..n {
                // Locale l's only worker still runs remote calls...
                assert_eq!(
                    cantus::on(l, Add(l as u64, 1)).join().unwrap(),
                    l as u64 + 1
                );
            }
            // ... and local tasks, here.
            let (a, b) = cantus::join(|| 20, || 22);
            assert_eq!(a + b, 42);
            // A local task waiting in recv while this one goes on.
            let me = chant::me();
            let waiter = cantus::SingleVar::new();
            cantus::scope(|s| {
                s.spawn(|| {
                    waiter.write(chant::me());
                    let m = chant::recv(Source::Task(me), Tag::Is(3));
                    chant::send(me, 4, m.bytes()).unwrap();
                });
                let w = *waiter.read();
                cantus::task::sleep(Duration::from_millis(5));
                chant::send(w, 3, b"wake").unwrap();
                assert_eq!(chant::recv(Source::Task(w), Tag::Is(4)).bytes(), b"wake");
            });
            for &id in &ids {
                chant::send(id, 1, b"x").unwrap();
                assert_eq!(chant::recv(Source::Task(id), Tag::Is(1)).bytes(), b"x");
            }
            stop_all(&ids);
        },
    );
}

#[test]
fn tasks_of_one_locale_talk_without_the_transport() {
    talk(
        "tasks_of_one_locale_talk_without_the_transport",
        &[1, 3],
        |n| {
            let boss = chant::me();
            // Two agents per locale: the even one pings the odd one,
            // its neighbour on the same locale.
            let pingers = agents(2, |_, index| PingPeer { boss, index });
            let echoes = agents(2, |_, index| Echo { boss, index });
            for l in 0..n {
                let (pinger, echo) = (pingers[2 * l], echoes[2 * l + 1]);
                assert_eq!(pinger.locale, echo.locale);
                chant::send_value(pinger, PEER, echo).unwrap();
            }
            for l in 0..n {
                let m = chant::recv(Source::Task(pingers[2 * l]), Tag::Is(DONE));
                assert_eq!(
                    m.decode::<(TaskId, u32)>().unwrap(),
                    (pingers[2 * l], ROUNDS)
                );
            }
            // The others, odd pingers and even echoes, pair across
            // locales (or here, with 1 locale).
            for l in 0..n {
                let (pinger, echo) = (pingers[2 * l + 1], echoes[2 * ((l + 1) % n)]);
                chant::send_value(pinger, PEER, echo).unwrap();
            }
            for l in 0..n {
                let m = chant::recv(Source::Any, Tag::Is(DONE));
                assert!(m.source().task != 0 && m.source().locale < n);
                let _ = l;
            }
            stop_all(&echoes);
            // The task itself is a valid destination.
            chant::send(boss, 9, b"self").unwrap();
            assert_eq!(chant::recv(Source::Task(boss), Tag::Is(9)).bytes(), b"self");
        },
    );
}

#[test]
fn a_message_that_arrives_before_its_receive_waits_in_the_mailbox() {
    talk(
        "a_message_that_arrives_before_its_receive_waits_in_the_mailbox",
        &[1, 2],
        |_| {
            let ids = echoes();
            let echo = *ids.last().unwrap();
            chant::send(echo, 1, b"early").unwrap();
            chant::send(echo, 2, b"marker").unwrap();
            // The marker came after the early one on the same path: once
            // it is here, so is the early one, with no receive posted.
            assert_eq!(chant::recv(Source::Any, Tag::Is(2)).bytes(), b"marker");
            let h = chant::irecv(Source::Any, Tag::Is(1));
            assert!(h.test(), "a queued message completes the receive at once");
            assert_eq!(h.wait().bytes(), b"early");
            stop_all(&ids);
        },
    );
}

#[test]
fn a_receive_waiting_for_another_locale_is_not_a_deadlock() {
    in_jobs(
        "a_receive_waiting_for_another_locale_is_not_a_deadlock",
        &[2],
        |n| {
            let rt = cantus::Runtime::builder()
                .locales(n)
                .workers(1)
                .deadlock_detection(Some(Duration::from_millis(50)))
                .build()
                .unwrap();
            let start = Instant::now();
            rt.block_on(|| {
                // Detached: no remote call stays pending while we wait.
                cantus::begin_on(
                    1,
                    Late {
                        boss: chant::me(),
                        after_ms: 600,
                    },
                )
                .unwrap();
                assert_eq!(chant::recv(Source::Any, Tag::Any).bytes(), b"late");
            });
            assert!(start.elapsed() >= Duration::from_millis(600));
            rt.shutdown();
        },
    );
}

#[test]
fn errors_name_what_went_wrong() {
    let out = talk("errors_name_what_went_wrong", &[2], |_| {
        let me = chant::me();
        // A task of this locale that never existed.
        let e = chant::send(
            TaskId {
                locale: 0,
                task: 1 << 40,
            },
            1,
            b"?",
        )
        .unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Message);
        assert!(e.to_string().contains("never existed"), "{e}");
        // Messages between locales go up to 4 GiB, in fragments past a
        // frame (half a ring); a longer one (here: past a lowered limit)
        // is an error saying so, and loses nothing.
        assert_eq!(chant::max_message_len(), u32::MAX as usize - 4);
        let big = vec![0u8; 65_501];
        let ids = agents(1, |_, index| Echo { boss: me, index });
        cantus::__test::limit_message_bytes(1000);
        let e = chant::send(ids[1], 1, &[1u8; 1001]).unwrap_err();
        assert!(e.to_string().contains("larger than the 1000 bytes"), "{e}");
        cantus::__test::limit_message_bytes(usize::MAX);
        let kib16 = vec![7u8; 16 << 10];
        for m in [&kib16, &big] {
            chant::send(ids[1], 1, m).unwrap();
            assert_eq!(
                chant::recv(Source::Task(ids[1]), Tag::Is(1)).bytes(),
                &m[..]
            );
        }
        chant::send(ids[0], 1, &big).unwrap();
        assert_eq!(
            chant::recv(Source::Task(ids[0]), Tag::Is(1)).bytes().len(),
            big.len()
        );
        stop_all(&ids);
        // A remote task id that never existed: locale 1 says so.
        chant::send(
            TaskId {
                locale: 1,
                task: 1 << 40,
            },
            3,
            b"lost",
        )
        .unwrap();
        // Messages nobody receives: dropped at shutdown with a note.
        chant::send(me, 55, b"never read").unwrap();
        chant::send(ids[1], STOP, b"").unwrap();
        // A value that does not decode as asked.
        chant::send(me, 56, b"").unwrap();
        let e = chant::recv(Source::Any, Tag::Is(56))
            .decode::<u64>()
            .unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Message);
    });
    for stderr in out {
        assert!(
            stderr.contains("locale 0 sent a message")
                && stderr.contains("on locale 1, which never existed"),
            "{stderr}"
        );
        assert!(
            stderr.contains("never received; dropped at shutdown")
                && stderr.contains("tag 55, 10 bytes"),
            "{stderr}"
        );
    }
}

#[test]
fn outside_threads_have_no_task_id() {
    if is_child() {
        let payload = std::panic::catch_unwind(chant::me).unwrap_err();
        let msg = payload
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| payload.downcast_ref::<String>().cloned())
            .unwrap();
        assert!(msg.contains("outside a task"), "{msg}");
        assert!(chant::try_me().is_none());
        return;
    }
    let (status, stderr) = run_child("outside_threads_have_no_task_id", &[]);
    assert!(status.success(), "{stderr}");
}
