//! An in-process network of many simulated locales, each with one
//! simulated worker, running the real protocol (`protocol.rs`, the same
//! state machine the runtime drives) and the real work type, in one
//! thread, in simulated time: for measuring the protocol at 64 to 256
//! locales on a machine of 2 cores (request traffic with and without
//! lifelines, idle periods, termination), not for speed.
//!
//! Time is in ticks: a step (one call of `Splittable::run`) costs
//! `step_ticks`, a message takes `latency_ticks` to arrive. Events at
//! the same tick run in the order they were made, so a run is
//! deterministic. Pieces move by value (no encoding). A victim splits
//! with `Splittable::split_for(thief)`, the thief a simulated locale's
//! number; work that compares it with `cantus::here()` (the process's
//! own locale) sees every thief as another locale.

use super::protocol::{Protocol, Send, Tuning};
use super::stats::LocaleStats;
use super::work::Splittable;
use std::cmp::Reverse;
use std::collections::BinaryHeap;

/// How the simulated network and workers behave.
#[derive(Clone, Copy, Debug)]
pub struct SimConfig {
    /// How many locales (each one worker).
    pub locales: usize,
    /// The protocol's settings (as `Balance` takes them).
    pub tuning: Tuning,
    /// Ticks a message takes to arrive.
    pub latency_ticks: u64,
    /// Ticks a step takes.
    pub step_ticks: u64,
    /// Up to this many ticks more, at random, for each message (so that
    /// messages overtake each other); 0: none.
    pub jitter_ticks: u64,
    /// The seed of the jitter.
    pub seed: u64,
}

/// What a simulated computation found and did.
#[derive(Debug)]
pub struct SimReport<R> {
    /// The merged result.
    pub result: R,
    /// The tick at which the root knew the computation was over.
    pub ticks: u64,
    /// Each locale's counts (times in ticks).
    pub locales: Vec<LocaleStats>,
    /// Messages of each kind sent: requests (random and lifeline),
    /// "nothing", work, acknowledgments.
    pub messages: MessageCounts,
}

/// Messages sent in a simulated computation, by kind.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MessageCounts {
    /// Random requests.
    pub random_requests: u64,
    /// Lifeline registrations.
    pub lifeline_requests: u64,
    /// "Nothing" answers.
    pub nothing: u64,
    /// Pieces of work.
    pub work: u64,
    /// Acknowledgments (with or without a result).
    pub acks: u64,
}

enum Msg<W: Splittable> {
    Steal { lifeline: bool },
    Nothing,
    Work { lifeline: bool, piece: W },
    Ack { result: Option<W::Result> },
}

enum Event<W: Splittable> {
    Deliver { to: usize, from: usize, msg: Msg<W> },
    Step { locale: usize },
}

struct Locale<W: Splittable> {
    protocol: Protocol,
    /// Pieces alive here; the worker runs the last.
    pieces: Vec<(W, W::Result)>,
    result: W::Result,
    stepping: bool,
    steps: u64,
}

struct Net<W: Splittable> {
    cfg: SimConfig,
    now: u64,
    seq: u64,
    queue: BinaryHeap<Reverse<(u64, u64)>>,
    events: std::collections::HashMap<u64, Event<W>>,
    locales: Vec<Locale<W>>,
    counts: MessageCounts,
    finished_at: Option<u64>,
    rng: u64,
}

impl<W: Splittable> Net<W> {
    fn at(&mut self, delay: u64, e: Event<W>) {
        self.seq += 1;
        self.queue.push(Reverse((self.now + delay, self.seq)));
        self.events.insert(self.seq, e);
    }

    fn send(&mut self, from: usize, to: usize, msg: Msg<W>) {
        match &msg {
            Msg::Steal { lifeline: false } => self.counts.random_requests += 1,
            Msg::Steal { lifeline: true } => self.counts.lifeline_requests += 1,
            Msg::Nothing => self.counts.nothing += 1,
            Msg::Work { .. } => self.counts.work += 1,
            Msg::Ack { .. } => self.counts.acks += 1,
        }
        let mut latency = self.cfg.latency_ticks;
        if self.cfg.jitter_ticks > 0 {
            // splitmix64
            self.rng = self.rng.wrapping_add(0x9e37_79b9_7f4a_7c15);
            let mut z = self.rng;
            z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
            latency += (z ^ (z >> 31)) % (self.cfg.jitter_ticks + 1);
        }
        self.at(latency, Event::Deliver { to, from, msg });
    }

    fn wake(&mut self, l: usize) {
        if !self.locales[l].stepping && !self.locales[l].pieces.is_empty() {
            self.locales[l].stepping = true;
            let d = self.cfg.step_ticks;
            self.at(d, Event::Step { locale: l });
        }
    }

    /// Sends what the protocol said.
    fn act(&mut self, l: usize, sends: Vec<Send>) {
        for s in sends {
            match s {
                Send::Steal { to, lifeline } => self.send(l, to, Msg::Steal { lifeline }),
                Send::Nothing { to } => self.send(l, to, Msg::Nothing),
                Send::Ack { to } => self.send(l, to, Msg::Ack { result: None }),
                Send::Detach { to } => {
                    let r = std::mem::take(&mut self.locales[l].result);
                    self.send(l, to, Msg::Ack { result: Some(r) });
                }
                Send::Finished => self.finished_at = Some(self.now),
            }
        }
    }

    fn step(&mut self, l: usize) {
        let units = self.cfg.tuning.units.max(1) as usize;
        let now = self.now;
        let loc = &mut self.locales[l];
        loc.stepping = false;
        loc.steps += 1;
        let Some((work, result)) = loc.pieces.last_mut() else {
            return;
        };
        if !work.run(units, result) {
            let (_, r) = loc.pieces.pop().expect("the piece just run");
            W::merge(&mut loc.result, r);
            let sends = loc.protocol.piece_ended(now);
            self.act(l, sends);
        } else {
            // Requests are answered between steps.
            while self.locales[l].protocol.wanted() {
                let Some((thief, lifeline)) = self.locales[l].protocol.next_request() else {
                    break;
                };
                let loc = &mut self.locales[l];
                let split = loc.pieces.last_mut().and_then(|(w, _)| w.split_for(thief));
                match split {
                    Some(piece) => {
                        loc.protocol.work_sent(thief, lifeline);
                        self.send(l, thief, Msg::Work { lifeline, piece });
                    }
                    None => {
                        let sends = loc.protocol.split_failed(thief, lifeline);
                        self.act(l, sends);
                        break;
                    }
                }
            }
        }
        self.wake(l);
    }

    fn deliver(&mut self, to: usize, from: usize, msg: Msg<W>) {
        let now = self.now;
        let sends = match msg {
            Msg::Steal { lifeline } => self.locales[to].protocol.on_steal(from, lifeline),
            Msg::Nothing => self.locales[to].protocol.on_nothing(from, now),
            Msg::Work { lifeline, piece } => {
                let sends = self.locales[to].protocol.on_work(from, lifeline, now);
                self.locales[to].pieces.push((piece, W::Result::default()));
                self.wake(to);
                sends
            }
            Msg::Ack { result } => {
                if let Some(r) = result {
                    W::merge(&mut self.locales[to].result, r);
                }
                self.locales[to].protocol.on_ack()
            }
        };
        self.act(to, sends);
    }
}

/// Runs `work` rooted at locale 0 on `cfg.locales` simulated locales
/// until the protocol says it is over, and returns the result, the time
/// and the counts.
///
/// Panics if the protocol loses track (the event queue empties before
/// the end: a computation that would hang), naming what each locale
/// still held.
pub fn simulate<W: Splittable>(work: W, cfg: SimConfig) -> SimReport<W::Result> {
    assert!(cfg.locales >= 1, "a simulation needs a locale");
    let mut net = Net {
        cfg,
        now: 0,
        seq: 0,
        queue: BinaryHeap::new(),
        events: std::collections::HashMap::new(),
        locales: (0..cfg.locales)
            .map(|l| Locale {
                protocol: Protocol::new(l, cfg.locales, 0, cfg.tuning, 0),
                pieces: Vec::new(),
                result: W::Result::default(),
                stepping: false,
                steps: 0,
            })
            .collect(),
        counts: MessageCounts::default(),
        finished_at: None,
        rng: cfg.seed,
    };
    net.locales[0].pieces.push((work, W::Result::default()));
    net.wake(0);
    for l in 1..cfg.locales {
        // Every other locale hears of the computation after one latency
        // (the root's start message) and starts asking.
        let sends = net.locales[l].protocol.start(cfg.latency_ticks);
        net.now = cfg.latency_ticks;
        net.act(l, sends);
        net.now = 0;
    }
    while net.finished_at.is_none() {
        let Some(Reverse((t, seq))) = net.queue.pop() else {
            let held: Vec<String> = net
                .locales
                .iter()
                .enumerate()
                .filter(|(_, l)| !l.pieces.is_empty())
                .map(|(i, l)| format!("locale {i}: {} pieces", l.pieces.len()))
                .collect();
            panic!("simulation: no event left before the end; {held:?}");
        };
        net.now = t;
        match net.events.remove(&seq).expect("an event for every entry") {
            Event::Deliver { to, from, msg } => net.deliver(to, from, msg),
            Event::Step { locale } => net.step(locale),
        }
    }
    let end = net.finished_at.expect("finished");
    // Termination concluded exactly when it should (README, T3): no
    // piece alive anywhere, and no work or acknowledgment in flight.
    for (l, loc) in net.locales.iter().enumerate() {
        assert!(
            loc.pieces.is_empty(),
            "the end was found while locale {l} held work"
        );
    }
    for e in net.events.values() {
        if let Event::Deliver {
            to,
            msg: Msg::Work { .. } | Msg::Ack { .. },
            ..
        } = e
        {
            panic!(
                "the end was found while work or an acknowledgment to locale {to} was in flight"
            );
        }
    }
    let locales = net
        .locales
        .iter_mut()
        .map(|l| {
            let mut s = l.protocol.finish(end);
            s.steps = l.steps;
            s
        })
        .collect();
    SimReport {
        result: std::mem::take(&mut net.locales[0].result),
        ticks: end,
        locales,
        messages: net.counts,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde::{Deserialize, Serialize};

    /// A complete binary tree of the given depth, one node a unit.
    #[derive(Serialize, Deserialize)]
    struct Tree(Vec<u32>);

    impl Splittable for Tree {
        type Result = u64;
        fn run(&mut self, units: usize, leaves: &mut u64) -> bool {
            for _ in 0..units {
                match self.0.pop() {
                    Some(0) => *leaves += 1,
                    Some(d) => self.0.extend([d - 1, d - 1]),
                    None => return false,
                }
            }
            !self.0.is_empty()
        }
        fn split(&mut self) -> Option<Tree> {
            (self.0.len() >= 2).then(|| Tree(self.0.drain(..self.0.len() / 2).collect()))
        }
        fn merge(into: &mut u64, other: u64) {
            *into += other;
        }
    }

    fn cfg(locales: usize, lifelines: bool) -> SimConfig {
        SimConfig {
            locales,
            tuning: Tuning {
                units: 16,
                step_us: 0,
                random_attempts: 1,
                lifelines,
            },
            latency_ticks: 10,
            step_ticks: 1,
            jitter_ticks: 0,
            seed: 0,
        }
    }

    #[test]
    fn termination_is_exact_when_messages_overtake_each_other() {
        // Random trees, locale counts and latencies: every run ends with
        // the right count, and the end is checked (in `simulate`) to
        // come when no piece is alive and no work is in flight.
        let mut seed = 1u64;
        for round in 0..200u64 {
            seed = seed
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let p = 1 + (seed >> 33) as usize % 40;
            let depth = (seed >> 20) as u32 % 12;
            let mut c = cfg(p, round % 3 != 0);
            c.tuning.units = 1 + (seed >> 40) as u32 % 8;
            c.tuning.random_attempts = (seed >> 50) as u32 % 3;
            c.latency_ticks = 1 + (seed >> 12) % 20;
            c.jitter_ticks = (seed >> 5) % 50;
            c.seed = seed;
            let r = simulate(Tree(vec![depth]), c);
            assert_eq!(r.result, 1 << depth, "round {round}: {p} locales, {c:?}");
        }
    }

    #[test]
    fn the_answer_is_right_and_work_spreads_to_every_locale() {
        for p in [1, 2, 3, 64, 100] {
            let r = simulate(Tree(vec![16]), cfg(p, true));
            assert_eq!(r.result, 1 << 16, "{p} locales");
            let idle: Vec<usize> = (0..p).filter(|&l| r.locales[l].steps == 0).collect();
            assert!(
                p < 64 || idle.is_empty(),
                "{p} locales: never worked: {idle:?}"
            );
            assert_eq!(
                r.messages.work,
                r.locales.iter().map(|s| s.work_received).sum::<u64>()
            );
        }
    }

    #[test]
    fn a_single_leaf_ends_on_many_locales() {
        let r = simulate(Tree(vec![0]), cfg(256, true));
        assert_eq!(r.result, 1);
        assert_eq!(r.messages.work, 0);
    }

    #[test]
    fn lifelines_bound_requests_per_idle_period() {
        for p in [64, 256] {
            let with = simulate(Tree(vec![14]), cfg(p, true));
            let bound = 1 + (p as f64).log2().ceil() as u64;
            for (l, s) in with.locales.iter().enumerate() {
                assert!(
                    s.requests_per_period.max <= bound,
                    "{p} locales, locale {l}: {} requests in one idle period (bound {bound})",
                    s.requests_per_period.max
                );
            }
            let without = simulate(Tree(vec![14]), cfg(p, false));
            assert_eq!(without.result, with.result);
            assert!(
                without.messages.random_requests
                    > with.messages.random_requests + with.messages.lifeline_requests,
                "{p} locales: without lifelines {:?}, with {:?}",
                without.messages,
                with.messages
            );
        }
    }
}
