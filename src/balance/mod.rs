//! Load balancing across locales: splittable work, stolen on request.
//!
//! A computation is one value of a [`Splittable`] type, started with
//! [`run`] (or [`Balance`]) on one locale. Its pieces run as ordinary
//! tasks; a piece is split only when a worker of this locale is idle
//! (then the piece goes to it as a task) or another locale asks for work
//! (then it travels there encoded). Idle locales ask random victims, then
//! register on lifelines and go quiet until work comes (seed 001's
//! "any" requests; GLB's lifelines). The computation ends, exactly once,
//! when every piece was acknowledged (Dijkstra and Scholten's diffusing
//! computation), with every locale's result merged on the locale that
//! started it.
//!
//! The protocol is a state machine without I/O of its own
//! (`protocol.rs`), driven by remote calls in a job (`computation.rs`,
//! `messages.rs`) and by an in-process network of many simulated
//! locales ([`sim`]). `README.md` beside this file states it with its
//! invariants.

mod computation;
mod messages;
mod protocol;
pub mod sim;
mod stats;
mod work;

pub use protocol::Tuning;
pub use stats::{LocaleStats, Spread, Table};
pub use work::{RegisteredWork, Splittable, WorkType, split_stack};

/// The old name of [`RegisteredWork`] (a remote call's is
/// [`RegisteredCall`](crate::remote::RegisteredCall)); kept so that code
/// written against it still compiles.
#[doc(hidden)]
pub use work::RegisteredWork as Registered;

use crate::error::Error;
use std::sync::atomic::{AtomicU64, Ordering};

/// Pieces of work this process sent to thieves of other locales, and
/// received from victims: steals across locales, as `CANTUS_STATS`
/// prints them.
static STEALS_SENT: AtomicU64 = AtomicU64::new(0);
static STEALS_RECEIVED: AtomicU64 = AtomicU64::new(0);

/// (sent, received) pieces of work across locales in this process.
pub(crate) fn steal_counts() -> (u64, u64) {
    (
        STEALS_SENT.load(Ordering::Relaxed),
        STEALS_RECEIVED.load(Ordering::Relaxed),
    )
}

/// Balances `work` across the workers of every locale of the job and
/// returns its merged result. Call it from a task (inside
/// [`run`](crate::run), [`Runtime::block_on`](crate::Runtime::block_on)
/// or a remote call) on any locale; the calling task runs the first
/// piece. Every locale takes part; on one locale it balances across the
/// workers only.
///
/// An error if no runtime runs, or a locale could not be reached.
pub fn run<W: RegisteredWork>(work: W) -> Result<W::Result, Error> {
    Balance::new(work).run().map(|o| o.result)
}

/// A balanced computation with settings: `Balance::new(work).units(64).run()`.
pub struct Balance<W> {
    work: W,
    tuning: Tuning,
}

/// What a balanced computation found, and what the balancing did on
/// each locale.
#[derive(Debug)]
pub struct Outcome<R> {
    /// The merged result.
    pub result: R,
    /// Each locale's counts, by locale.
    pub locales: Vec<LocaleStats>,
}

impl<R> Outcome<R> {
    /// Each locale's counts as a printable table
    /// (`print!("{}", outcome.table())`).
    pub fn table(&self) -> Table<'_> {
        Table(&self.locales)
    }
}

impl<W: RegisteredWork> Balance<W> {
    /// A computation of `work` with the default tuning.
    pub fn new(work: W) -> Balance<W> {
        Balance {
            work,
            tuning: Tuning::default(),
        }
    }

    /// Units of work per step, fixed: requests are answered, and idle
    /// workers of this locale served, between steps. The default adapts
    /// the units so that a step takes about [`step_us`](Self::step_us).
    pub fn units(mut self, units: u32) -> Balance<W> {
        self.tuning.units = units.max(1);
        self.tuning.step_us = 0;
        self
    }

    /// The time a step should take (default 10 us): the units per step
    /// adapt to it, starting from 64 (see [`Tuning::step_us`]).
    pub fn step_us(mut self, us: u32) -> Balance<W> {
        self.tuning.step_us = us;
        self
    }

    /// Random victims an idle locale asks before its lifelines (default
    /// 2).
    pub fn random_attempts(mut self, n: u32) -> Balance<W> {
        self.tuning.random_attempts = n;
        self
    }

    /// Whether idle locales fall back to lifelines (default `true`);
    /// without, they keep asking random victims until work or the end.
    pub fn lifelines(mut self, on: bool) -> Balance<W> {
        self.tuning.lifelines = on;
        self
    }

    /// Runs the computation (see [`run`]).
    pub fn run(self) -> Result<Outcome<W::Result>, Error> {
        let (result, locales) = computation::run_root(self.work, self.tuning)?;
        Ok(Outcome { result, locales })
    }
}
