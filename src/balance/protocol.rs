//! The balancing protocol of one locale in one computation, as a state
//! machine without input or output of its own ("sans I/O"): events go
//! in, the messages to send come out. The runtime (`computation.rs`) feeds it
//! from remote calls under a lock; the simulation (`sim.rs`) feeds it
//! from an in-process network of 64 to 256 locales. The same code runs
//! in both. `README.md` beside this file states the protocol and its
//! invariants; the names here follow it.
//!
//! - Requests (seed 001; GLB): a locale with no work asks one random
//!   victim at a time, up to `random_attempts` times, then registers on
//!   its lifelines and goes quiet until one of them pushes work to it.
//! - Termination: Dijkstra and Scholten's diffusing computation. Every
//!   piece of work sent is acknowledged; a locale's first piece (while it
//!   is disengaged) makes the sender its parent, and that acknowledgment
//!   waits until the locale is idle with none of its own pieces
//!   unacknowledged (and carries the locale's merged result). The root
//!   is done when it is idle with none unacknowledged.

use super::stats::LocaleStats;
use serde::{Deserialize, Serialize};
use std::collections::VecDeque;

/// How a computation balances across locales (the same on every locale:
/// it travels with every message).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Tuning {
    /// Units of work per call of `Splittable::run` (requests are answered
    /// between calls): the first step's, when `step_us` adapts it.
    pub units: u32,
    /// The time a step should take, in microseconds: the units per step
    /// double while a step takes less than half of it and halve while it
    /// takes more than twice, so that a request waits about this long
    /// for a busy victim whatever a unit costs. 0: `units` stays fixed
    /// (the simulation always keeps it fixed).
    pub step_us: u32,
    /// Random victims an idle locale asks before it falls back to its
    /// lifelines.
    pub random_attempts: u32,
    /// Whether idle locales register on lifelines and go quiet (`true`),
    /// or keep asking random victims until work or the end comes.
    pub lifelines: bool,
}

impl Default for Tuning {
    fn default() -> Tuning {
        Tuning {
            units: 64,
            step_us: 10,
            random_attempts: 2,
            lifelines: true,
        }
    }
}

/// What a locale must send (the caller sends it after the event, outside
/// any lock). Work is not among them: the caller splits its own work
/// when [`Protocol::next_request`] says whom for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Send {
    /// A request for work; `lifeline`: a standing one, answered only with
    /// work, whenever there is some.
    Steal { to: usize, lifeline: bool },
    /// "I have nothing": the answer to a random request.
    Nothing { to: usize },
    /// The acknowledgment of a piece of work that did not engage this
    /// locale (it was engaged already): sent at once, carries nothing.
    Ack { to: usize },
    /// This locale is idle with nothing unacknowledged: it leaves the
    /// tree, acknowledging its parent's piece with its merged result.
    Detach { to: usize },
    /// (Root only.) The computation is over: every piece of work was
    /// acknowledged and every locale is idle.
    Finished,
}

/// Where the locale is in asking for work.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Thief {
    /// It has work (or the computation is over).
    Working,
    /// It asked `victim` at random and waits for its answer (its
    /// `attempt`-th in this idle period).
    Asking { victim: usize, attempt: u32 },
    /// It registered on its lifelines and waits quietly.
    Quiet,
}

/// One locale's state in one computation.
pub(crate) struct Protocol {
    here: usize,
    locales: usize,
    is_root: bool,
    tuning: Tuning,
    /// Pieces of work alive here (running or queued as tasks).
    active: usize,
    /// Pieces this locale sent that were not acknowledged yet.
    deficit: u64,
    /// The locale whose piece engaged this one (never the root's).
    parent: Option<usize>,
    /// Random requests waiting for a worker to split for them.
    random_waiting: VecDeque<usize>,
    /// Locales registered on this one's lifeline (each at most once).
    lifeline_thieves: VecDeque<usize>,
    /// This locale's lifelines, and whether it is registered on each.
    lifelines: Vec<(usize, bool)>,
    thief: Thief,
    finished: bool,
    rng: u64,
    /// When (in the caller's clock) the current request and idle period
    /// began.
    asked_at: u64,
    idle_since: u64,
    /// Requests sent in the current idle period.
    period_requests: u64,
    stats: LocaleStats,
}

/// The lifeline graph: locale `l` registers on `l + 2^k (mod p)` for
/// every `k` with `2^k < p` (a low-degree graph: `ceil(log2 p)` edges out
/// of each locale, every locale reaches every other in as many hops).
pub(crate) fn lifelines_of(here: usize, locales: usize) -> Vec<usize> {
    let mut out = Vec::new();
    let mut step = 1;
    while step < locales {
        let to = (here + step) % locales;
        if to != here && !out.contains(&to) {
            out.push(to);
        }
        step *= 2;
    }
    out
}

impl Protocol {
    /// A locale's state at the start of a computation rooted at `root`;
    /// the root holds the first piece of work.
    pub(crate) fn new(
        here: usize,
        locales: usize,
        root: usize,
        tuning: Tuning,
        now: u64,
    ) -> Protocol {
        let is_root = here == root;
        Protocol {
            here,
            locales,
            is_root,
            tuning,
            active: usize::from(is_root),
            deficit: 0,
            parent: None,
            random_waiting: VecDeque::new(),
            lifeline_thieves: VecDeque::new(),
            lifelines: lifelines_of(here, locales)
                .into_iter()
                .map(|l| (l, false))
                .collect(),
            thief: Thief::Working,
            finished: false,
            // Different on every locale, fixed for a run.
            rng: 0x9e37_79b9_7f4a_7c15 ^ ((here as u64 + 1).wrapping_mul(0xbf58_476d_1ce4_e5b9)),
            asked_at: now,
            idle_since: now,
            period_requests: 0,
            stats: LocaleStats::default(),
        }
    }

    /// A locale that is not the root starts idle: it asks for work.
    pub(crate) fn start(&mut self, now: u64) -> Vec<Send> {
        let mut out = Vec::new();
        if !self.is_root && !self.finished && self.active == 0 && self.thief == Thief::Working {
            self.begin_idle(now, &mut out);
        }
        out
    }

    /// Whether a worker should look at [`next_request`](Self::next_request):
    /// a random request waits, or a lifeline thief does and there is work
    /// here that may be split for it.
    pub(crate) fn wanted(&self) -> bool {
        !self.finished
            && (!self.random_waiting.is_empty()
                || (self.active > 0 && !self.lifeline_thieves.is_empty()))
    }

    /// A request arrived from `thief`. A random one waits for a worker
    /// if there is work here, else is answered "nothing" at once; a
    /// lifeline one is kept until there is work to give.
    pub(crate) fn on_steal(&mut self, thief: usize, lifeline: bool) -> Vec<Send> {
        self.stats.requests_received += 1;
        if lifeline {
            if !self.lifeline_thieves.contains(&thief) {
                self.lifeline_thieves.push_back(thief);
            }
            return Vec::new();
        }
        if self.active > 0 && !self.finished {
            self.random_waiting.push_back(thief);
            Vec::new()
        } else {
            self.stats.nothing_sent += 1;
            vec![Send::Nothing { to: thief }]
        }
    }

    /// The next thief to split work for: random requests first (their
    /// thieves wait), then lifeline thieves. The caller splits and then
    /// calls [`work_sent`](Self::work_sent) (and sends the piece) or
    /// [`split_failed`](Self::split_failed).
    pub(crate) fn next_request(&mut self) -> Option<(usize, bool)> {
        if self.finished {
            return None;
        }
        if let Some(t) = self.random_waiting.pop_front() {
            return Some((t, false));
        }
        if self.active > 0 {
            return self.lifeline_thieves.pop_front().map(|t| (t, true));
        }
        None
    }

    /// A piece of work is on its way to `thief`: counted until
    /// acknowledged.
    pub(crate) fn work_sent(&mut self, _thief: usize, lifeline: bool) {
        self.deficit += 1;
        self.stats.work_sent += 1;
        if lifeline {
            self.stats.lifeline_work_sent += 1;
        }
    }

    /// No piece could be split for `thief`: a random thief hears
    /// "nothing"; a lifeline thief stays registered.
    pub(crate) fn split_failed(&mut self, thief: usize, lifeline: bool) -> Vec<Send> {
        if lifeline {
            self.lifeline_thieves.push_back(thief);
            Vec::new()
        } else {
            self.stats.nothing_sent += 1;
            vec![Send::Nothing { to: thief }]
        }
    }

    /// A piece of work arrived from `from` (it is alive here from now:
    /// the caller runs it). Engages this locale if it was disengaged;
    /// else it is acknowledged at once.
    pub(crate) fn on_work(&mut self, from: usize, lifeline: bool, now: u64) -> Vec<Send> {
        let mut out = Vec::new();
        self.active += 1;
        self.stats.work_received += 1;
        if lifeline {
            self.stats.lifeline_work_received += 1;
            if let Some(e) = self.lifelines.iter_mut().find(|(l, _)| *l == from) {
                e.1 = false;
            }
        }
        if self.is_root || self.parent.is_some() || self.finished {
            out.push(Send::Ack { to: from });
        } else {
            self.parent = Some(from);
        }
        if self.thief_asks(from) && !lifeline {
            self.stats.task_answers += 1;
            self.stats.task_wait += now.saturating_sub(self.asked_at);
        }
        if self.thief != Thief::Working {
            self.end_idle(now);
        }
        out
    }

    /// "Nothing" from `from`: ask the next victim, or fall back to the
    /// lifelines.
    pub(crate) fn on_nothing(&mut self, from: usize, now: u64) -> Vec<Send> {
        let mut out = Vec::new();
        if let Thief::Asking { victim, attempt } = self.thief {
            if victim == from {
                self.stats.nothing_answers += 1;
                self.stats.nothing_wait += now.saturating_sub(self.asked_at);
                if !self.finished {
                    self.ask(attempt + 1, now, &mut out);
                }
            }
        }
        out
    }

    /// A piece this locale sent was acknowledged.
    pub(crate) fn on_ack(&mut self) -> Vec<Send> {
        debug_assert!(self.deficit > 0, "an acknowledgment nobody waits for");
        self.deficit = self.deficit.saturating_sub(1);
        let mut out = Vec::new();
        self.check_idle(&mut out);
        out
    }

    /// A piece of work ended here (its result is merged into the
    /// locale's). At the last one, waiting random thieves hear "nothing",
    /// the locale may leave the tree, and it starts asking for work.
    pub(crate) fn piece_ended(&mut self, now: u64) -> Vec<Send> {
        debug_assert!(self.active > 0, "a piece ended that never began");
        self.active = self.active.saturating_sub(1);
        let mut out = Vec::new();
        if self.active == 0 {
            for t in self.random_waiting.drain(..) {
                self.stats.nothing_sent += 1;
                out.push(Send::Nothing { to: t });
            }
            self.check_idle(&mut out);
            if !self.finished && self.thief == Thief::Working {
                self.begin_idle(now, &mut out);
            }
        }
        out
    }

    /// A piece of work was made here for a worker of this locale (split
    /// off locally): alive from now.
    pub(crate) fn piece_started_here(&mut self) {
        self.active += 1;
    }

    /// The computation is over (the root said so, or this is the root):
    /// no more requests; the statistics of this locale.
    pub(crate) fn finish(&mut self, now: u64) -> LocaleStats {
        if !self.finished {
            self.finished = true;
            if self.thief != Thief::Working {
                self.end_idle(now);
            }
        }
        self.random_waiting.clear();
        self.lifeline_thieves.clear();
        self.stats.clone()
    }

    /// Idle with nothing unacknowledged: the root is done; another
    /// locale leaves the tree.
    fn check_idle(&mut self, out: &mut Vec<Send>) {
        if self.active > 0 || self.deficit > 0 || self.finished {
            return;
        }
        if self.is_root {
            self.finished = true;
            self.random_waiting.clear();
            self.lifeline_thieves.clear();
            out.push(Send::Finished);
        } else if let Some(p) = self.parent.take() {
            out.push(Send::Detach { to: p });
        }
    }

    fn begin_idle(&mut self, now: u64, out: &mut Vec<Send>) {
        self.idle_since = now;
        self.period_requests = 0;
        self.stats.idle_periods += 1;
        self.ask(0, now, out);
    }

    fn end_idle(&mut self, now: u64) {
        self.stats.idle_wait += now.saturating_sub(self.idle_since);
        self.stats.requests_per_period.record(self.period_requests);
        self.thief = Thief::Working;
    }

    /// Whether this locale waits for the answer of a random request to
    /// `victim`.
    fn thief_asks(&self, victim: usize) -> bool {
        matches!(self.thief, Thief::Asking { victim: v, .. } if v == victim)
    }

    /// The `attempt`-th request of this idle period.
    fn ask(&mut self, attempt: u32, now: u64, out: &mut Vec<Send>) {
        if self.locales < 2 {
            self.thief = Thief::Quiet;
            return;
        }
        if attempt < self.tuning.random_attempts || !self.tuning.lifelines {
            let victim = self.random_victim();
            self.thief = Thief::Asking { victim, attempt };
            self.asked_at = now;
            self.period_requests += 1;
            self.stats.random_requests += 1;
            out.push(Send::Steal {
                to: victim,
                lifeline: false,
            });
            return;
        }
        self.thief = Thief::Quiet;
        for (l, registered) in &mut self.lifelines {
            if !*registered {
                *registered = true;
                self.period_requests += 1;
                self.stats.lifeline_requests += 1;
                out.push(Send::Steal {
                    to: *l,
                    lifeline: true,
                });
            }
        }
    }

    fn random_victim(&mut self) -> usize {
        // xorshift64*: a victim other than this locale.
        self.rng ^= self.rng >> 12;
        self.rng ^= self.rng << 25;
        self.rng ^= self.rng >> 27;
        let r = self.rng.wrapping_mul(0x2545_f491_4f6c_dd1d) >> 11;
        let v = (r % (self.locales as u64 - 1)) as usize;
        if v >= self.here { v + 1 } else { v }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t() -> Tuning {
        Tuning {
            units: 1,
            step_us: 0,
            random_attempts: 1,
            lifelines: true,
        }
    }

    #[test]
    fn lifeline_graph_is_low_degree_and_connected() {
        for p in 1..=300 {
            let mut reached = vec![false; p];
            reached[0] = true;
            let mut frontier = vec![0];
            let mut hops = 0;
            while !frontier.is_empty() {
                let mut next = Vec::new();
                for v in frontier {
                    // v pushes work to the locales registered on it.
                    for (t, r) in reached.iter_mut().enumerate() {
                        if !*r && lifelines_of(t, p).contains(&v) {
                            *r = true;
                            next.push(t);
                        }
                    }
                }
                if !next.is_empty() {
                    hops += 1;
                }
                frontier = next;
            }
            assert!(
                reached.iter().all(|&r| r),
                "p = {p}: not every locale is reachable"
            );
            let log = (p as f64).log2().ceil() as usize;
            assert!(hops <= log.max(1), "p = {p}: {hops} hops");
            for l in 0..p {
                assert!(lifelines_of(l, p).len() <= log);
            }
        }
    }

    #[test]
    fn a_random_request_to_an_idle_locale_is_answered_at_once() {
        let mut v = Protocol::new(1, 4, 0, t(), 0);
        v.start(0);
        assert_eq!(v.on_steal(2, false), vec![Send::Nothing { to: 2 }]);
        assert!(!v.wanted());
    }

    #[test]
    fn a_busy_victim_queues_random_requests_and_refuses_them_when_it_ends() {
        let mut root = Protocol::new(0, 3, 0, t(), 0);
        assert!(root.on_steal(1, false).is_empty());
        assert!(root.wanted());
        let out = root.piece_ended(5);
        assert!(out.contains(&Send::Nothing { to: 1 }));
        assert!(out.contains(&Send::Finished));
    }

    #[test]
    fn idle_locales_ask_randomly_then_register_on_lifelines() {
        let mut l = Protocol::new(
            3,
            8,
            0,
            Tuning {
                units: 1,
                step_us: 0,
                random_attempts: 2,
                lifelines: true,
            },
            0,
        );
        let out = l.start(0);
        let Send::Steal {
            to: v1,
            lifeline: false,
        } = out[0]
        else {
            panic!("{out:?}")
        };
        assert_ne!(v1, 3);
        let out = l.on_nothing(v1, 1);
        let Send::Steal {
            to: v2,
            lifeline: false,
        } = out[0]
        else {
            panic!("{out:?}")
        };
        let out = l.on_nothing(v2, 2);
        let lifelines: Vec<usize> = out
            .iter()
            .map(|s| match s {
                Send::Steal { to, lifeline: true } => *to,
                other => panic!("{other:?}"),
            })
            .collect();
        assert_eq!(lifelines, lifelines_of(3, 8));
        // Quiet: a stale "nothing" sends nothing more.
        assert!(l.on_nothing(v2, 3).is_empty());
    }

    #[test]
    fn diffusing_termination_waits_for_every_piece() {
        // Root 0 gives a piece to 1, which gives one to 2.
        let tuning = t();
        let mut p: Vec<Protocol> = (0..3).map(|h| Protocol::new(h, 3, 0, tuning, 0)).collect();
        p[0].on_steal(1, false);
        assert_eq!(p[0].next_request(), Some((1, false)));
        p[0].work_sent(1, false);
        assert!(p[1].on_work(0, false, 1).is_empty(), "engages: no ack yet");
        p[1].on_steal(2, false);
        assert_eq!(p[1].next_request(), Some((2, false)));
        p[1].work_sent(2, false);
        assert!(p[2].on_work(1, false, 2).is_empty());
        // The root's own piece ends: not finished, 1 is unacknowledged.
        let out = p[0].piece_ended(3);
        assert!(!out.contains(&Send::Finished));
        // 1 ends its piece: it still waits for 2.
        let out = p[1].piece_ended(4);
        assert!(!out.iter().any(|s| matches!(s, Send::Detach { .. })));
        // 2 ends: detaches from 1; 1 then detaches from 0; 0 is done.
        let out = p[2].piece_ended(5);
        assert!(out.contains(&Send::Detach { to: 1 }));
        let out = p[1].on_ack();
        assert_eq!(out, vec![Send::Detach { to: 0 }]);
        assert_eq!(p[0].on_ack(), vec![Send::Finished]);
    }

    #[test]
    fn work_to_an_engaged_locale_is_acknowledged_at_once() {
        let mut l = Protocol::new(1, 3, 0, t(), 0);
        assert!(l.on_work(0, false, 0).is_empty());
        assert_eq!(l.on_work(2, true, 0), vec![Send::Ack { to: 2 }]);
        assert_eq!(l.active, 2);
    }
}
