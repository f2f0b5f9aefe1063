//! Inline remote calls (`const INLINE: bool = true`) run inside whatever
//! poll receives them: the poll a balanced piece makes between its steps,
//! an idle worker's poll, and the polls of a task waiting for a reply,
//! for a collective's parcel (`CANTUS_PGAS=messages`) or for a Chant
//! message (`Policy::TaskPolls`). Every public call an inline handler may
//! make (`here`, `num_locales`, puts, gets and atomics on global memory,
//! starting a task that sends a Chant message) answers from inside each
//! of those polls, and what it may not do (a put into another locale's
//! memory where that takes a message; a Chant send of its own, since it
//! is no task) is refused with an error, never with a panic of the
//! runtime's own (issue 25: "RefCell already borrowed" when a poll ran a
//! handler while the locale's engine was borrowed). Also the user's reproductions: two balanced computations
//! at once, and an inline call sent 200 times while one runs.
//!
//! Each job runs in a child process under the kill timeout of
//! `tests/common`: a hang fails fast.

mod common;

use cantus_programs::fib as fib_program;

use cantus::balance::{self, Splittable};
use cantus::chant::{self, Source, Tag, TaskId};
use cantus::pgas::{self, GlobalArray, GlobalPtr};
use cantus::{ErrorKind, Remote};
use common::{is_child, run_child};
use serde::{Deserialize, Serialize};
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

/// The Chant tag of the handlers' messages.
const TAG: u32 = 7;

/// Probes each scenario sends.
const PROBES: u64 = 40;

/// What one probe saw, inside the poll that ran it.
#[derive(Serialize, Deserialize, Debug, PartialEq, Eq)]
struct Seen {
    here: usize,
    locales: usize,
    /// The values read back from the handler's locale's memory: the
    /// probe's number after a put, and after each atomic.
    local: [u64; 4],
    /// An atomic on locale 0's memory, where locales share memory (where
    /// they do not, it would wait for a reply: refused, see
    /// `what_an_inline_call_may_not_do_is_refused`).
    remote: Option<u64>,
    /// The task whose poll ran the handler (`None`: a worker's own poll,
    /// no task).
    driver: Option<u64>,
}

/// The probe: an inline call that makes every call an inline handler may
/// make. `mine` is the handler's locale's part of an array (two
/// elements), `zero` locale 0's (touched where locales share memory),
/// `to` a task of the handler's locale.
#[derive(Serialize, Deserialize)]
struct Probe {
    n: u64,
    mine: GlobalPtr<u64>,
    zero: Option<GlobalPtr<u64>>,
    to: TaskId,
}

impl Remote for Probe {
    type Output = Seen;
    const INLINE: bool = true;
    fn run(self) -> Seen {
        let here = cantus::here();
        let locales = cantus::num_locales();
        self.mine.put(&[self.n]).expect("a put here");
        let mut back = [0u64];
        self.mine.get(&mut back).expect("a get here");
        let count = self.mine.add(1);
        let before = count.fetch_add(1).expect("fetch_add here");
        let swapped = count.swap(before + 1).expect("swap here");
        let cas = count
            .compare_exchange(before + 1, before + 2)
            .expect("compare_exchange here")
            .expect("nobody else counts");
        count.store(before + 1).expect("store here");
        let loaded = count.load().expect("load here");
        assert_eq!((swapped, cas), (before + 1, before + 1));
        let remote = self
            .zero
            .map(|z| z.fetch_add(1).expect("an atomic on shared memory"));
        // A Chant message names the task that sent it: the handler, no
        // task itself, starts one to send it.
        let (to, n) = (self.to, self.n);
        cantus::begin(move || chant::send(to, TAG, &n.to_le_bytes()).expect("a Chant send"));
        Seen {
            here,
            locales,
            local: [
                back[0],
                before,
                loaded,
                self.mine.read().expect("a read here"),
            ],
            remote,
            driver: cantus::query::current_task_id(),
        }
    }
}

/// On locale 1: the receiver of the probes' Chant messages, its id
/// published for the conductor; it returns the sum of the numbers it
/// received.
static RECEIVER: Mutex<Option<TaskId>> = Mutex::new(None);

/// Receives `self.0` messages (tag [`TAG`]) and sums their numbers.
#[derive(Serialize, Deserialize)]
struct Collect(u64);
impl Remote for Collect {
    type Output = u64;
    fn run(self) -> u64 {
        *RECEIVER.lock().unwrap() = Some(chant::me());
        let mut sum = 0;
        for _ in 0..self.0 {
            let m = chant::recv(Source::Any, Tag::Is(TAG));
            sum += u64::from_le_bytes(m.bytes().try_into().expect("8 bytes"));
        }
        *RECEIVER.lock().unwrap() = None;
        sum
    }
}

/// The receiver's id, once it runs (inline: answers from any poll).
#[derive(Serialize, Deserialize)]
struct ReceiverId;
impl Remote for ReceiverId {
    type Output = Option<TaskId>;
    const INLINE: bool = true;
    fn run(self) -> Option<TaskId> {
        *RECEIVER.lock().unwrap()
    }
}

/// Sets the Chant polling policy of the locale it runs on.
#[derive(Serialize, Deserialize)]
struct SetPolicy(bool);
impl Remote for SetPolicy {
    type Output = ();
    const INLINE: bool = true;
    fn run(self) {
        chant::set_policy(if self.0 {
            chant::Policy::TaskPolls
        } else {
            chant::Policy::SchedulerPolls
        });
    }
}

/// Set by [`Stop`]: ends [`Spin`] and releases [`Hold`].
static STOP: AtomicBool = AtomicBool::new(false);

/// The task running [`Spin`]'s piece (0: none yet).
static SPINNER: AtomicU64 = AtomicU64::new(0);

/// A balanced computation of one piece that never splits and runs until
/// [`Stop`]: the only worker of its locale stays in it, so that the
/// piece's own poll between steps is the one that runs arriving calls.
#[derive(Serialize, Deserialize)]
struct Spin;
impl Splittable for Spin {
    type Result = u64;
    fn run(&mut self, units: usize, steps: &mut u64) -> bool {
        let id = cantus::query::current_task_id().expect("a piece is a task");
        SPINNER.store(id, Ordering::Release);
        for _ in 0..units {
            std::hint::spin_loop();
        }
        *steps += 1;
        !STOP.load(Ordering::Acquire)
    }
    fn split(&mut self) -> Option<Spin> {
        None
    }
    fn merge(into: &mut u64, other: u64) {
        *into += other;
    }
}
cantus::splittable!(Spin);

/// Runs [`Spin`] on the locale it is sent to; answers the steps.
#[derive(Serialize, Deserialize)]
struct RunSpin;
impl Remote for RunSpin {
    type Output = u64;
    fn run(self) -> u64 {
        balance::run(Spin).expect("the spin ends")
    }
}

/// The spinning piece's task, once it runs.
#[derive(Serialize, Deserialize)]
struct Spinner;
impl Remote for Spinner {
    type Output = u64;
    const INLINE: bool = true;
    fn run(self) -> u64 {
        SPINNER.load(Ordering::Acquire)
    }
}

/// Ends the spin and the hold on the locale it runs on.
#[derive(Serialize, Deserialize)]
struct Stop;
impl Remote for Stop {
    type Output = ();
    const INLINE: bool = true;
    fn run(self) {
        STOP.store(true, Ordering::Release);
    }
}

/// On locale 0: holds its caller's reply until [`Stop`] there.
#[derive(Serialize, Deserialize)]
struct Hold;
impl Remote for Hold {
    type Output = ();
    fn run(self) {
        while !STOP.load(Ordering::Acquire) {
            cantus::task::sleep(std::time::Duration::from_micros(200));
        }
    }
}

/// A task that waits for a reply: calls [`Hold`] on locale 0. Answers
/// its own task id.
#[derive(Serialize, Deserialize)]
struct Caller;
impl Remote for Caller {
    type Output = u64;
    fn run(self) -> u64 {
        *WAITER.lock().unwrap() = cantus::query::current_task_id();
        cantus::on(0, Hold).join().expect("the hold ends");
        cantus::query::current_task_id().expect("a task")
    }
}

/// The task that waits (a [`Caller`], a collective's body, or the Chant
/// receiver), once it runs.
static WAITER: Mutex<Option<u64>> = Mutex::new(None);

#[derive(Serialize, Deserialize)]
struct Waiter;
impl Remote for Waiter {
    type Output = Option<u64>;
    const INLINE: bool = true;
    fn run(self) -> Option<u64> {
        *WAITER.lock().unwrap()
    }
}

/// Resets a locale's flags between scenarios.
#[derive(Serialize, Deserialize)]
struct Reset;
impl Remote for Reset {
    type Output = ();
    fn run(self) {
        STOP.store(false, Ordering::Release);
        SPINNER.store(0, Ordering::Release);
        *WAITER.lock().unwrap() = None;
    }
}

/// Each locale's array of the probes (two elements), kept between
/// SPMD bodies.
static ARRAY: Mutex<Option<GlobalArray<u64>>> = Mutex::new(None);

/// Allocates the probes' array on every locale; answers its pointers.
#[derive(Clone, Serialize, Deserialize)]
struct Setup;
impl Remote for Setup {
    type Output = GlobalPtr<u64>;
    fn run(self) -> GlobalPtr<u64> {
        let a = pgas::alloc::<u64>(2).expect("room for two");
        let p = a.ptr(cantus::here());
        *ARRAY.lock().unwrap() = Some(a);
        p
    }
}

/// Frees the array (every locale at once).
#[derive(Clone, Serialize, Deserialize)]
struct Teardown;
impl Remote for Teardown {
    type Output = ();
    fn run(self) {
        ARRAY.lock().unwrap().take();
        pgas::barrier();
    }
}

/// The SPMD body of the collective scenario: locale 1 waits in a barrier
/// (polling for its parcel, on the message memory) while locale 0 sends
/// it the probes; answers locale 0's sights.
#[derive(Clone, Serialize, Deserialize)]
struct InBarrier {
    mine: GlobalPtr<u64>,
    zero: Option<GlobalPtr<u64>>,
    to: TaskId,
}
impl Remote for InBarrier {
    type Output = Vec<Seen>;
    fn run(self) -> Vec<Seen> {
        let mut seen = Vec::new();
        if cantus::here() == 1 {
            *WAITER.lock().unwrap() = cantus::query::current_task_id();
        } else {
            // Once locale 1's body waits in the barrier.
            while cantus::on(1, Waiter).join().unwrap().is_none() {
                cantus::task::yield_now();
            }
            seen = probes(self.mine, self.zero, self.to, 1000);
        }
        pgas::barrier();
        seen
    }
}

cantus::remote!(
    Probe, Collect, ReceiverId, SetPolicy, RunSpin, Spinner, Stop, Hold, Caller, Waiter, Reset,
    Setup, Teardown, InBarrier
);

/// Sends the probes `base..base + PROBES` to locale 1, one after another.
fn probes(mine: GlobalPtr<u64>, zero: Option<GlobalPtr<u64>>, to: TaskId, base: u64) -> Vec<Seen> {
    (base..base + PROBES)
        .map(|n| {
            cantus::on(1, Probe { n, mine, zero, to })
                .join()
                .unwrap_or_else(|e| panic!("probe {n}: {e}"))
        })
        .collect()
}

/// Checks what the probes of one scenario saw: every call answered, each
/// handler ran in a poll of one of `drivers` (`None`: a worker's own).
fn check(scenario: &str, seen: &[Seen], base: u64, shared: bool, drivers: &[Option<u64>]) {
    assert_eq!(seen.len() as u64, PROBES, "{scenario}");
    for (i, s) in seen.iter().enumerate() {
        let n = base + i as u64;
        assert_eq!((s.here, s.locales), (1, 2), "{scenario}, probe {n}");
        assert_eq!(
            s.local[0], n,
            "{scenario}, probe {n}: the put was read back"
        );
        assert_eq!(s.local[2], s.local[1] + 1, "{scenario}, probe {n}: atomics");
        assert_eq!(s.local[3], n, "{scenario}, probe {n}");
        assert_eq!(s.remote.is_some(), shared, "{scenario}, probe {n}");
        assert!(
            drivers.contains(&s.driver),
            "{scenario}, probe {n}: ran in the poll of {:?}, not one of {drivers:?}",
            s.driver
        );
    }
}

/// A scenario: locale 1's receiver collects the probes' messages while
/// `start` keeps locale 1 in the poll under test; `start` returns the
/// drivers allowed (besides the receiver, which polls before it blocks)
/// and a closure that ends the scenario.
fn scenario(
    name: &str,
    arrays: &[GlobalPtr<u64>],
    base: u64,
    shared: bool,
    start: impl FnOnce() -> (Vec<Option<u64>>, Box<dyn FnOnce()>),
) {
    cantus::on(1, Reset).join().unwrap();
    cantus::on(0, Reset).join().unwrap();
    let collect = cantus::on(1, Collect(PROBES));
    let to = loop {
        if let Some(t) = cantus::on(1, ReceiverId).join().unwrap() {
            break t;
        }
        cantus::task::yield_now();
    };
    let (mut drivers, end) = start();
    // The receiver, waiting on its message's variable, polls too before
    // it blocks.
    drivers.push(Some(to.task));
    let seen = probes(arrays[1], shared.then_some(arrays[0]), to, base);
    check(name, &seen, base, shared, &drivers);
    end();
    assert_eq!(
        collect.join().unwrap(),
        (base..base + PROBES).sum::<u64>(),
        "{name}: every Chant message arrived"
    );
}

/// Every scenario, on a job of two locales of one worker each.
fn every_poll(shared: bool) {
    let arrays = pgas::spmd(Setup).expect("the array");
    let zero_before = arrays[0].add(0).load().unwrap();
    // An idle worker's poll.
    scenario("idle worker", &arrays, 0, shared, || {
        (vec![None], Box::new(|| ()))
    });
    // A piece's poll between its steps.
    scenario("balanced piece", &arrays, 100, shared, || {
        let run = cantus::on(1, RunSpin);
        let spinner = loop {
            match cantus::on(1, Spinner).join().unwrap() {
                0 => cantus::task::yield_now(),
                id => break id,
            }
        };
        let end = move || {
            cantus::on(1, Stop).join().unwrap();
            assert!(run.join().unwrap() > 0, "the piece stepped");
        };
        (vec![Some(spinner)], Box::new(end))
    });
    // A task waiting for a reply (it polls before it blocks; blocked, its
    // worker's poll runs the probes).
    scenario("waiting caller", &arrays, 200, shared, || {
        let call = cantus::on(1, Caller);
        let waiter = loop {
            match cantus::on(1, Waiter).join().unwrap() {
                None => cantus::task::yield_now(),
                w => break w,
            }
        };
        let end = move || {
            cantus::on(0, Stop).join().unwrap();
            assert_eq!(Some(call.join().unwrap()), waiter);
        };
        (vec![waiter, None], Box::new(end))
    });
    // The receiver itself polls (Chant's "the task polls"), and its own
    // handlers' messages come to it from inside its poll.
    cantus::on(1, SetPolicy(true)).join().unwrap();
    scenario("Chant receiver that polls", &arrays, 300, shared, || {
        let to = cantus::on(1, ReceiverId).join().unwrap().unwrap();
        (vec![Some(to.task), None], Box::new(|| ()))
    });
    cantus::on(1, SetPolicy(false)).join().unwrap();
    // A task waiting in a collective (on the message memory, it polls for
    // its parcel).
    cantus::on(1, Reset).join().unwrap();
    let collect = cantus::on(1, Collect(PROBES));
    let to = loop {
        if let Some(t) = cantus::on(1, ReceiverId).join().unwrap() {
            break t;
        }
        cantus::task::yield_now();
    };
    let seen = pgas::spmd(InBarrier {
        mine: arrays[1],
        zero: shared.then_some(arrays[0]),
        to,
    })
    .expect("the collective scenario");
    let body = cantus::on(1, Waiter).join().unwrap();
    check(
        "body in a barrier",
        &seen[0],
        1000,
        shared,
        &[body, None, Some(to.task)],
    );
    assert_eq!(collect.join().unwrap(), (1000..1000 + PROBES).sum::<u64>());
    // Where locales share memory, every probe's remote atomic counted.
    let zero_after = arrays[0].add(0).load().unwrap();
    let expected = if shared { 5 * PROBES } else { 0 };
    assert_eq!(zero_after - zero_before, expected);
    pgas::spmd(Teardown).expect("teardown");
}

#[test]
fn every_call_an_inline_handler_may_make_answers_from_every_poll() {
    const TEST: &str = "every_call_an_inline_handler_may_make_answers_from_every_poll";
    if is_child() {
        let shared = std::env::var("CANTUS_PGAS").unwrap() == "shared";
        let rt = cantus::Runtime::builder()
            .locales(2)
            .workers(1)
            .heap_bytes(1 << 20)
            .build()
            .expect("a job starts");
        rt.block_on(|| every_poll(shared));
        rt.shutdown();
        return;
    }
    for memory in ["shared", "messages"] {
        let (status, stderr) = run_child(TEST, &[("CANTUS_PGAS", memory)]);
        assert!(
            status.success() && !stderr.contains("panicked"),
            "CANTUS_PGAS={memory}: {status}\n{stderr}"
        );
    }
}

fn fib(n: u64) -> u64 {
    let (mut a, mut b) = (0u64, 1u64);
    for _ in 0..n {
        (a, b) = (b, a + b);
    }
    a
}

/// The user's first reproduction: two balanced computations at once,
/// 10 times, on 2 and 3 locales; nothing panics anywhere (the inline
/// messages of one computation arrive in the pieces' polls of the
/// other).
#[test]
fn two_balanced_computations_at_once() {
    const TEST: &str = "two_balanced_computations_at_once";
    if is_child() {
        let rt = cantus::Runtime::builder()
            .workers(1)
            .build()
            .expect("a job starts");
        rt.block_on(|| {
            for _ in 0..10 {
                let (a, b) = cantus::join(
                    || balance::run(fib_program::Fib::with_cutoff(22, 2)),
                    || balance::run(fib_program::Fib::with_cutoff(23, 2)),
                );
                assert_eq!((a.unwrap(), b.unwrap()), (fib(22), fib(23)));
            }
        });
        rt.shutdown();
        return;
    }
    for locales in ["2", "3"] {
        let (status, stderr) = run_child(TEST, &[("CANTUS_LOCALES", locales)]);
        assert!(
            status.success() && !stderr.contains("panicked"),
            "{locales} locales: {status}\n{stderr}"
        );
    }
}

/// Answers where it ran (the user's inline call).
#[derive(Serialize, Deserialize)]
struct Where;
impl Remote for Where {
    type Output = usize;
    const INLINE: bool = true;
    fn run(self) -> usize {
        cantus::here()
    }
}
cantus::remote!(Where);

/// An inline call that sends a Chant message itself, or asks its id.
#[derive(Serialize, Deserialize)]
struct SendItself(TaskId, bool);
impl Remote for SendItself {
    type Output = Option<TaskId>;
    const INLINE: bool = true;
    fn run(self) -> Option<TaskId> {
        if self.1 {
            chant::send(self.0, TAG, b"no task sent this").unwrap();
        }
        chant::try_me()
    }
}
cantus::remote!(SendItself);

/// An atomic on another locale's memory, where that takes a message.
#[derive(Serialize, Deserialize)]
struct TouchZero(GlobalPtr<u64>);
impl Remote for TouchZero {
    type Output = u64;
    const INLINE: bool = true;
    fn run(self) -> u64 {
        self.0.fetch_add(1).unwrap()
    }
}
cantus::remote!(TouchZero);

/// What an inline call may not do, from a piece's poll: a Chant send is
/// refused with an error saying why (it runs in no task, whichever
/// task's poll ran it; `try_me` says it has no id), and so is an atomic
/// on another locale's memory where locales share none (it would wait
/// for the reply); the locale goes on.
#[test]
fn what_an_inline_call_may_not_do_is_refused() {
    const TEST: &str = "what_an_inline_call_may_not_do_is_refused";
    if is_child() {
        let rt = cantus::Runtime::builder()
            .locales(2)
            .workers(1)
            .build()
            .expect("a job starts");
        rt.block_on(|| {
            let zero = pgas::spmd(Setup).expect("the array")[0];
            let collect = cantus::on(1, Collect(1));
            let to = loop {
                if let Some(t) = cantus::on(1, ReceiverId).join().unwrap() {
                    break t;
                }
                cantus::task::yield_now();
            };
            let run = cantus::on(1, RunSpin);
            while cantus::on(1, Spinner).join().unwrap() == 0 {
                cantus::task::yield_now();
            }
            // In the piece's poll: no id, and no send.
            assert_eq!(cantus::on(1, SendItself(to, false)).join().unwrap(), None);
            let e = cantus::on(1, SendItself(to, true)).join().unwrap_err();
            assert_eq!(e.kind(), ErrorKind::RemotePanic);
            let msg = e.to_string();
            assert!(
                msg.contains("SendItself")
                    && msg.contains("called cantus::chant::send, which only a task may call")
                    && msg.contains("cantus::begin"),
                "{msg}"
            );
            let e = cantus::on(1, TouchZero(zero)).join().unwrap_err();
            assert_eq!(e.kind(), ErrorKind::RemotePanic);
            let msg = e.to_string();
            assert!(
                msg.contains("TouchZero") && msg.contains("tried to send to locale 0"),
                "{msg}"
            );
            cantus::on(1, Stop).join().unwrap();
            assert!(run.join().unwrap() > 0);
            // The receiver still takes a message from a task.
            let me = chant::me();
            assert_eq!(me.locale, 0);
            chant::send(to, TAG, &5u64.to_le_bytes()).unwrap();
            assert_eq!(collect.join().unwrap(), 5);
            pgas::spmd(Teardown).expect("teardown");
        });
        rt.shutdown();
        return;
    }
    let (status, stderr) = run_child(TEST, &[("CANTUS_PGAS", "messages")]);
    assert!(status.success(), "{status}\n{stderr}");
}

/// The user's second reproduction: an inline call that asks `here()`,
/// sent 200 times to locale 1 while a balanced computation runs.
#[test]
fn an_inline_call_during_a_balanced_computation() {
    const TEST: &str = "an_inline_call_during_a_balanced_computation";
    if is_child() {
        let rt = cantus::Runtime::builder()
            .locales(2)
            .workers(1)
            .build()
            .expect("a job starts");
        rt.block_on(|| {
            let (fib_of, wheres) = cantus::join(
                || balance::run(fib_program::Fib::with_cutoff(27, 2)).unwrap(),
                || {
                    (0..200)
                        .map(|_| cantus::on(1, Where).join())
                        .collect::<Vec<_>>()
                },
            );
            assert_eq!(fib_of, fib(27));
            for (i, w) in wheres.into_iter().enumerate() {
                match w {
                    Ok(l) => assert_eq!(l, 1, "call {i}"),
                    Err(e) => {
                        assert_ne!(e.kind(), ErrorKind::RemotePanic, "call {i}: {e}");
                        panic!("call {i}: {e}");
                    }
                }
            }
        });
        rt.shutdown();
        return;
    }
    let (status, stderr) = run_child(TEST, &[]);
    assert!(
        status.success() && !stderr.contains("panicked"),
        "{status}\n{stderr}"
    );
}
