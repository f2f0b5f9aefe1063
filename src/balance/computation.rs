//! One computation on one locale, in the runtime: the protocol
//! (`protocol.rs`) under a lock, the pieces of work running as tasks,
//! and the messages of `messages.rs` that carry the protocol between
//! locales. The table of this locale's computations lives here too.

use super::messages::{self, Header};
use super::protocol::{Protocol, Send, Tuning};
use super::stats::LocaleStats;
use super::work::{RegisteredWork, Splittable};
use crate::error::{Error, ErrorKind};
use crate::sync::SyncVar;
use serde::{Deserialize, Serialize};
use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};
use std::time::Instant;

/// A computation's name, the same on every locale: the locale that
/// started it and its number there.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub(crate) struct CompId {
    pub(crate) root: u32,
    pub(crate) seq: u32,
}

/// What a locale needs to take part in a computation it hears of.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Setup {
    pub(crate) header: Header,
    pub(crate) here: usize,
    pub(crate) locales: usize,
}

/// A computation of some work type, as the messages see it.
pub(crate) trait Computation: std::marker::Send + Sync {
    /// A request for work (inside the poll: sends are deferred).
    fn on_steal(&self, thief: usize, lifeline: bool);
    /// "Nothing" from a victim (inside the poll: sends are deferred).
    fn on_nothing(&self, victim: usize);
    /// A piece of work: run it here, in the calling task (one that does
    /// not decode is a failure of the computation, and counts as a piece
    /// that ended at once).
    fn on_work(self: Arc<Self>, from: usize, lifeline: bool, piece: &[u8]);
    /// An acknowledgment, with a child's result and failure if it
    /// detached.
    fn on_ack(&self, result: Option<&[u8]>, failure: Option<String>);
    /// Starts asking for work (a locale that is not the root).
    fn start(&self);
    /// The computation is over: this locale's counts. Called once, by
    /// whoever took the computation out of the table (`end`).
    fn finish(&self) -> LocaleStats;
}

/// Nanoseconds since this process first asked.
pub(crate) fn now() -> u64 {
    static START: OnceLock<Instant> = OnceLock::new();
    START.get_or_init(Instant::now).elapsed().as_nanos() as u64
}

struct Table {
    running: HashMap<CompId, Arc<dyn Computation>>,
    /// Computations that ended here: a late message must not bring one
    /// back.
    ended: HashSet<CompId>,
}

fn table() -> MutexGuard<'static, Table> {
    static TABLE: OnceLock<Mutex<Table>> = OnceLock::new();
    TABLE
        .get_or_init(|| {
            Mutex::new(Table {
                running: HashMap::new(),
                ended: HashSet::new(),
            })
        })
        .lock()
        .unwrap_or_else(|p| p.into_inner())
}

/// The computation a message names, made (and started, so that it asks
/// for work) if this is the first this locale hears of it; `None` if it
/// ended here already.
pub(crate) fn find(header: &Header) -> Result<Option<Arc<dyn Computation>>, String> {
    let made = {
        let mut t = table();
        if let Some(c) = t.running.get(&header.comp) {
            return Ok(Some(c.clone()));
        }
        if t.ended.contains(&header.comp) {
            return Ok(None);
        }
        let kind = super::work::lookup(header.kind).ok_or_else(|| {
            format!(
                "no work type with id {:#x} is registered in this binary (computation {:?})",
                header.kind, header.comp
            )
        })?;
        let c = (kind.create)(Setup {
            header: *header,
            here: crate::remote::here(),
            locales: crate::remote::num_locales(),
        });
        t.running.insert(header.comp, c.clone());
        c
    };
    made.start();
    Ok(Some(made))
}

/// Ends a computation here: no message brings it back.
pub(crate) fn end(comp: CompId) -> Option<Arc<dyn Computation>> {
    let mut t = table();
    t.ended.insert(comp);
    t.running.remove(&comp)
}

/// Makes the state of `W`'s computation on this locale (the table's
/// constructor for its work type).
pub(crate) fn create<W: RegisteredWork>(setup: Setup) -> Arc<dyn Computation> {
    Comp::<W>::new(setup)
}

/// One locale's part of a computation of `W`.
pub(crate) struct Comp<W: Splittable> {
    setup: Setup,
    protocol: Mutex<Protocol>,
    /// A hint for the pieces' loops: `Protocol::wanted`, as of the last
    /// event.
    wanted: AtomicBool,
    /// Results of pieces that ended here, and of children that detached.
    result: Mutex<W::Result>,
    /// (Root.) Filled when the computation is over.
    done: SyncVar<()>,
    /// The first failure seen here (or reported by a child that
    /// detached): it travels up the tree with the result.
    failure: Mutex<Option<String>>,
    steps: AtomicU64,
    local_splits: AtomicU64,
    /// Units per step, as adapted to `Tuning::step_us` on this locale.
    units: AtomicU32,
}

/// The most units a step adapts to.
const MAX_UNITS: u32 = 1 << 20;

impl<W: RegisteredWork> Comp<W> {
    pub(crate) fn new(setup: Setup) -> Arc<Comp<W>> {
        let h = setup.header;
        let comp = Arc::new(Comp {
            setup,
            protocol: Mutex::new(Protocol::new(
                setup.here,
                setup.locales,
                h.comp.root as usize,
                h.tuning,
                now(),
            )),
            wanted: AtomicBool::new(false),
            result: Mutex::new(W::Result::default()),
            done: SyncVar::new(),
            failure: Mutex::new(None),
            steps: AtomicU64::new(0),
            local_splits: AtomicU64::new(0),
            units: AtomicU32::new(h.tuning.units.max(1)),
        });
        if setup.locales > 1 {
            // Requests may come at any moment until the end: a messaging
            // thread must not sleep through one (lowered in `finish`).
            crate::remote::expect_arrivals(true);
        }
        comp
    }

    fn tuning(&self) -> Tuning {
        self.setup.header.tuning
    }

    /// Runs an event of the protocol and sends what it says. A result
    /// that leaves (detach) or ends (finished) is taken under the lock,
    /// so no piece's result is in two places.
    fn event(&self, f: impl FnOnce(&mut Protocol) -> Vec<Send>, deferred: bool) {
        let mut outgoing = Vec::new();
        {
            let mut p = lock(&self.protocol);
            for s in f(&mut p) {
                let carried = match s {
                    Send::Detach { .. } => Some((
                        std::mem::take(&mut *lock(&self.result)),
                        lock(&self.failure).take(),
                    )),
                    _ => None,
                };
                outgoing.push((s, carried));
            }
            self.wanted.store(p.wanted(), Ordering::Relaxed);
        }
        if outgoing.is_empty() {
            return;
        }
        let header = self.setup.header;
        let here = self.setup.here;
        if deferred {
            // Inside the poll (an inline call) nothing may be sent: a
            // task sends it.
            // (The end is found only by a piece's end or an
            // acknowledgment, never inside the poll.)
            crate::par::begin(move || send_all::<W>(header, here, outgoing, None));
        } else {
            send_all::<W>(header, here, outgoing, Some(&self.done));
        }
    }

    /// Runs one piece of work until it is exhausted, answering requests
    /// and splitting for idle workers of this locale between steps.
    fn run_piece(self: &Arc<Self>, mut work: W) {
        crate::trace::relabel(crate::trace::task_kind::BALANCE);
        let mut result = W::Result::default();
        let target = u64::from(self.tuning().step_us) * 1000;
        let mut units = self.units.load(Ordering::Relaxed).max(1);
        let poll = self.setup.locales > 1;
        // Under a transport with a messaging thread of its own (MPI), a
        // piece gives the core away after each step: without, the
        // thread that moves requests and work waits for the kernel to
        // preempt this one (milliseconds).
        let give_way = poll && crate::sched::driver_has_progress_thread();
        let mut steps = 0u64;
        let mut failed = false;
        loop {
            let began = (target > 0).then(Instant::now);
            let Some(more) = self.guarded("run", || work.run(units as usize, &mut result)) else {
                failed = true;
                break;
            };
            steps += 1;
            if let Some(began) = began {
                // Keep a step near its target time (the units this
                // locale learned are where the next piece starts).
                let took = began.elapsed().as_nanos() as u64;
                if took > 2 * target && units > 1 {
                    units /= 2;
                    self.units.store(units, Ordering::Relaxed);
                } else if took < target / 2 && units < MAX_UNITS {
                    units *= 2;
                    self.units.store(units, Ordering::Relaxed);
                }
            }
            if !more {
                break;
            }
            if poll {
                if give_way {
                    std::thread::yield_now();
                }
                // A worker busy in a long piece may be the only poller
                // of its locale: requests are seen between steps.
                crate::remote::poll_once();
            }
            if self.wanted.load(Ordering::Relaxed) && !self.answer(&mut work) {
                failed = true;
                break;
            }
            if crate::sched::idle_workers() > 0 {
                match self.guarded("split", || work.split_for(self.setup.here)) {
                    Some(Some(piece)) => {
                        lock(&self.protocol).piece_started_here();
                        self.local_splits.fetch_add(1, Ordering::Relaxed);
                        let me = self.clone();
                        crate::par::begin(move || me.run_piece(piece));
                    }
                    Some(None) => {}
                    None => {
                        failed = true;
                        break;
                    }
                }
            }
        }
        self.steps.fetch_add(steps, Ordering::Relaxed);
        if !failed {
            // (A failed piece's result is dropped: the computation's
            // result is lost anyway.)
            let mut all = lock(&self.result);
            self.guarded("merge", || W::merge(&mut all, result));
        }
        self.event(|p| p.piece_ended(now()), false);
    }

    /// Runs a call of the user's code; a panic becomes this
    /// computation's failure (reported to the root) and `None`.
    fn guarded<T>(&self, what: &str, f: impl FnOnce() -> T) -> Option<T> {
        match std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)) {
            Ok(v) => Some(v),
            Err(p) => {
                let msg =
                    crate::error::panic_text(&*p).unwrap_or("a panic with a non-string payload");
                self.fail(format!("{}::{what} panicked: {msg}", W::NAME));
                None
            }
        }
    }

    /// Records a failure that happened here (the first one is kept).
    fn fail(&self, what: String) {
        let mut f = lock(&self.failure);
        if f.is_none() {
            *f = Some(format!("on locale {}: {what}", self.setup.here));
        }
    }

    /// Splits for the thieves that wait, while pieces can be split;
    /// `false` if the piece failed (its `split` panicked) and must stop.
    fn answer(&self, work: &mut W) -> bool {
        loop {
            let request = {
                let mut p = lock(&self.protocol);
                let r = p.next_request();
                self.wanted.store(p.wanted(), Ordering::Relaxed);
                r
            };
            let Some((thief, lifeline)) = request else {
                return true;
            };
            let Some(split) = self.guarded("split", || work.split_for(thief)) else {
                // The thief still gets its answer.
                self.event(|p| p.split_failed(thief, lifeline), false);
                return false;
            };
            let Some(piece) = split else {
                self.event(|p| p.split_failed(thief, lifeline), false);
                return true;
            };
            let bytes = match crate::remote::encode::encode_to_vec(&piece) {
                Ok(b) => b,
                Err(e) => {
                    self.fail(format!("a piece of {} could not be encoded: {e}", W::NAME));
                    self.event(|p| p.split_failed(thief, lifeline), false);
                    return false;
                }
            };
            // Counted before it leaves: its acknowledgment may come back
            // before this task runs again.
            lock(&self.protocol).work_sent(thief, lifeline);
            let msg = messages::Work {
                header: self.setup.header,
                from: self.setup.here as u32,
                lifeline,
                piece: messages::Bytes(bytes),
            };
            super::STEALS_SENT.fetch_add(1, Ordering::Relaxed);
            // The next message this thread sends to the thief carries the
            // piece (`trace::kind::STEAL_OUT`).
            crate::trace::record(
                crate::trace::kind::STEAL_OUT,
                0,
                thief as u32,
                u64::from(self.setup.header.comp.root) << 32
                    | u64::from(self.setup.header.comp.seq),
                0,
            );
            if let Err(e) = crate::remote::begin_on(thief, msg) {
                // The thief is gone (and the job ends): the piece is no
                // longer in flight.
                self.fail(format!("work for locale {thief} could not be sent: {e}"));
                self.event(|p| p.on_ack(), false);
                return false;
            }
        }
    }
}

/// What an event sends: each message, and for a detach the result and
/// failure it carries.
type Outgoing<R> = Vec<(Send, Option<(R, Option<String>)>)>;

fn send_all<W: RegisteredWork>(
    header: Header,
    here: usize,
    outgoing: Outgoing<W::Result>,
    done: Option<&SyncVar<()>>,
) {
    for (s, carried) in outgoing {
        let r = match s {
            Send::Steal { to, lifeline } => crate::remote::begin_on(
                to,
                messages::Steal {
                    header,
                    thief: here as u32,
                    lifeline,
                },
            ),
            Send::Nothing { to } => crate::remote::begin_on(
                to,
                messages::Nothing {
                    header,
                    victim: here as u32,
                },
            ),
            Send::Ack { to } => crate::remote::begin_on(
                to,
                messages::Ack {
                    header,
                    result: None,
                    failure: None,
                },
            ),
            Send::Detach { to } => {
                let (result, mut failure) = carried.unwrap_or_default();
                let bytes = crate::remote::encode::encode_to_vec(&result).unwrap_or_else(|e| {
                    failure.get_or_insert_with(|| {
                        format!(
                            "on locale {here}: a result of {} could not be encoded: {e}",
                            W::NAME
                        )
                    });
                    Vec::new()
                });
                crate::remote::begin_on(
                    to,
                    messages::Ack {
                        header,
                        result: Some(messages::Bytes(bytes)),
                        failure,
                    },
                )
            }
            Send::Finished => {
                match done {
                    Some(d) => d.write_ef(()),
                    None => unreachable!("the end is never found inside the poll"),
                }
                Ok(())
            }
        };
        if let Err(e) = r {
            // The locale is gone; the job ends (the transport reports
            // which locale), and this computation cannot conclude.
            panic!(
                "cantus: balancing {} could not reach another locale: {e}",
                W::NAME
            );
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl<W: RegisteredWork> Computation for Comp<W> {
    fn on_steal(&self, thief: usize, lifeline: bool) {
        self.event(|p| p.on_steal(thief, lifeline), true);
    }

    fn on_nothing(&self, victim: usize) {
        self.event(|p| p.on_nothing(victim, now()), true);
    }

    fn on_work(self: Arc<Self>, from: usize, lifeline: bool, piece: &[u8]) {
        super::STEALS_RECEIVED.fetch_add(1, Ordering::Relaxed);
        crate::trace::relabel(crate::trace::task_kind::STOLEN);
        crate::trace::record(
            crate::trace::kind::STEAL_IN,
            0,
            from as u32,
            u64::from(self.setup.header.comp.root) << 32 | u64::from(self.setup.header.comp.seq),
            0,
        );
        self.event(|p| p.on_work(from, lifeline, now()), false);
        match crate::remote::codec::from_bytes::<W>(piece) {
            Ok(work) => self.run_piece(work),
            Err(e) => {
                self.fail(format!(
                    "a piece of {} from locale {from} could not be decoded: {e}",
                    W::NAME
                ));
                self.event(|p| p.piece_ended(now()), false);
            }
        }
    }

    fn on_ack(&self, result: Option<&[u8]>, failure: Option<String>) {
        if let Some(f) = failure {
            lock(&self.failure).get_or_insert(f);
        }
        if let Some(bytes) = result {
            match crate::remote::codec::from_bytes::<W::Result>(bytes) {
                Ok(r) => {
                    let mut all = lock(&self.result);
                    self.guarded("merge", || W::merge(&mut all, r));
                }
                Err(e) => self.fail(format!("a result of {} could not be decoded: {e}", W::NAME)),
            }
        }
        self.event(|p| p.on_ack(), false);
    }

    fn start(&self) {
        self.event(|p| p.start(now()), true);
    }

    fn finish(&self) -> LocaleStats {
        if self.setup.locales > 1 {
            crate::remote::expect_arrivals(false);
        }
        let mut s = lock(&self.protocol).finish(now());
        self.wanted.store(false, Ordering::Relaxed);
        s.steps = self.steps.load(Ordering::Relaxed);
        s.local_splits = self.local_splits.load(Ordering::Relaxed);
        s
    }
}

/// Starts a computation of `work` rooted here, runs its first piece in
/// the calling task, waits until it is over on every locale, and
/// returns the merged result and every locale's counts.
pub(crate) fn run_root<W: RegisteredWork>(
    work: W,
    tuning: Tuning,
) -> Result<(W::Result, Vec<LocaleStats>), Error> {
    if !crate::sched::in_runtime() {
        return Err(Error::no_runtime("balance::run"));
    }
    static SEQ: AtomicU64 = AtomicU64::new(0);
    let here = crate::remote::here();
    let locales = crate::remote::num_locales();
    let header = Header {
        comp: CompId {
            root: here as u32,
            seq: SEQ.fetch_add(1, Ordering::Relaxed) as u32,
        },
        kind: W::ID,
        tuning,
    };
    let comp = Comp::<W>::new(Setup {
        header,
        here,
        locales,
    });
    table()
        .running
        .insert(header.comp, comp.clone() as Arc<dyn Computation>);
    for l in (0..locales).filter(|&l| l != here) {
        crate::remote::begin_on(l, messages::Start { header }).map_err(|e| {
            Error::new(
                ErrorKind::Locale,
                format!("cantus: balance::run could not start on locale {l}: {e}"),
            )
        })?;
    }
    comp.run_piece(work);
    comp.done.read_fe();
    // Over: every piece was acknowledged. Gather every locale's counts
    // (and end the computation there).
    let handles: Vec<_> = (0..locales)
        .filter(|&l| l != here)
        .map(|l| (l, crate::remote::on(l, messages::Finish { header })))
        .collect();
    end(header.comp);
    let mut stats = vec![LocaleStats::default(); locales];
    stats[here] = comp.finish();
    for (l, h) in handles {
        stats[l] = h.join()?;
    }
    if let Some(f) = lock(&comp.failure).take() {
        return Err(Error::new(
            ErrorKind::WorkFailed,
            format!("cantus: balance::run of {} failed {f}", W::NAME),
        ));
    }
    let result = std::mem::take(&mut *lock(&comp.result));
    Ok((result, stats))
}
