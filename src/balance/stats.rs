//! What the balancing did on each locale: requests, answers, pieces of
//! work moved, and how long idle workers waited (seed 001, table 2:
//! NONE, TASK, NONE+TASK).

use serde::{Deserialize, Serialize};
use std::fmt;

/// One locale's counts in one computation. Times are in nanoseconds
/// (the simulation's are in its own ticks).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct LocaleStats {
    /// Random requests this locale sent.
    pub random_requests: u64,
    /// Lifeline registrations this locale sent.
    pub lifeline_requests: u64,
    /// Requests of either kind this locale received.
    pub requests_received: u64,
    /// Pieces of work this locale sent to other locales.
    pub work_sent: u64,
    /// ... of which to a lifeline thief.
    pub lifeline_work_sent: u64,
    /// Pieces of work this locale received.
    pub work_received: u64,
    /// ... of which from a lifeline.
    pub lifeline_work_received: u64,
    /// "Nothing" answers this locale sent.
    pub nothing_sent: u64,
    /// Random requests answered "nothing", and their total wait (NONE).
    pub nothing_answers: u64,
    /// Total time random requests waited for a "nothing".
    pub nothing_wait: u64,
    /// Random requests answered with work, and their total wait (TASK).
    pub task_answers: u64,
    /// Total time random requests waited for work.
    pub task_wait: u64,
    /// Periods in which the locale had no work, and the time spent in
    /// them (up to work or the end).
    pub idle_periods: u64,
    /// Total time in idle periods.
    pub idle_wait: u64,
    /// Requests sent per idle period.
    pub requests_per_period: Spread,
    /// Local splits: pieces handed to another worker of this locale.
    pub local_splits: u64,
    /// Calls of `Splittable::run` on this locale.
    pub steps: u64,
}

/// Count, sum and maximum of a quantity.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Spread {
    /// How many values.
    pub count: u64,
    /// Their sum.
    pub sum: u64,
    /// The largest.
    pub max: u64,
}

impl Spread {
    /// Adds a value.
    pub fn record(&mut self, v: u64) {
        self.count += 1;
        self.sum += v;
        self.max = self.max.max(v);
    }

    /// Adds the values of `other`.
    pub fn add(&mut self, other: &Spread) {
        self.count += other.count;
        self.sum += other.sum;
        self.max = self.max.max(other.max);
    }

    /// The mean (0 with no values).
    pub fn mean(&self) -> f64 {
        if self.count == 0 {
            0.0
        } else {
            self.sum as f64 / self.count as f64
        }
    }
}

impl LocaleStats {
    /// Mean wait of a random request answered "nothing" (NONE).
    pub fn mean_nothing_wait(&self) -> f64 {
        mean(self.nothing_wait, self.nothing_answers)
    }

    /// Mean wait of a random request answered with work (TASK).
    pub fn mean_task_wait(&self) -> f64 {
        mean(self.task_wait, self.task_answers)
    }

    /// Mean wait of any random request (NONE+TASK).
    pub fn mean_request_wait(&self) -> f64 {
        mean(
            self.nothing_wait + self.task_wait,
            self.nothing_answers + self.task_answers,
        )
    }

    /// Sums the counts of `other` into these.
    pub fn add(&mut self, o: &LocaleStats) {
        self.random_requests += o.random_requests;
        self.lifeline_requests += o.lifeline_requests;
        self.requests_received += o.requests_received;
        self.work_sent += o.work_sent;
        self.lifeline_work_sent += o.lifeline_work_sent;
        self.work_received += o.work_received;
        self.lifeline_work_received += o.lifeline_work_received;
        self.nothing_sent += o.nothing_sent;
        self.nothing_answers += o.nothing_answers;
        self.nothing_wait += o.nothing_wait;
        self.task_answers += o.task_answers;
        self.task_wait += o.task_wait;
        self.idle_periods += o.idle_periods;
        self.idle_wait += o.idle_wait;
        self.requests_per_period.add(&o.requests_per_period);
        self.local_splits += o.local_splits;
        self.steps += o.steps;
    }
}

/// Each locale's counts as a printable table, one line per locale and a
/// legend: steps (calls of `Splittable::run`), local splits, random and
/// lifeline requests sent, requests received, pieces of work sent and
/// received between locales (in parentheses, over lifelines), the mean
/// wait of a random request answered with work (TASK) and with nothing
/// (NONE), and the total idle time.
///
/// ```
/// use cantus::balance::{LocaleStats, Table};
///
/// let mut one = LocaleStats::default();
/// one.steps = 40;
/// one.work_sent = 3;
/// let text = Table(&[one, LocaleStats::default()]).to_string();
/// assert!(text.lines().nth(1).unwrap().split_whitespace().eq(
///     ["0", "40", "0", "0", "0", "0", "3", "(0)", "0", "(0)", "0.0", "0.0", "0.0"]
/// ));
/// ```
///
/// [`Outcome::table`](super::Outcome::table) gives a computation's.
pub struct Table<'a>(pub &'a [LocaleStats]);

impl fmt::Display for Table<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "  {:>6} {:>10} {:>8} {:>8} {:>8} {:>8} {:>10} {:>10} {:>9} {:>9} {:>9}",
            "locale",
            "steps",
            "splits",
            "random",
            "lifeline",
            "received",
            "work sent",
            "work recv",
            "TASK us",
            "NONE us",
            "idle ms"
        )?;
        for (l, s) in self.0.iter().enumerate() {
            writeln!(
                f,
                "  {:>6} {:>10} {:>8} {:>8} {:>8} {:>8} {:>10} {:>10} {:>9.1} {:>9.1} {:>9.1}",
                l,
                s.steps,
                s.local_splits,
                s.random_requests,
                s.lifeline_requests,
                s.requests_received,
                format!("{} ({})", s.work_sent, s.lifeline_work_sent),
                format!("{} ({})", s.work_received, s.lifeline_work_received),
                s.mean_task_wait() / 1e3,
                s.mean_nothing_wait() / 1e3,
                s.idle_wait as f64 / 1e6,
            )?;
        }
        writeln!(
            f,
            "  (splits: pieces handed to another worker of the locale; random, lifeline: \
             requests sent; received: requests received; work sent/recv: pieces moved between \
             locales, in parentheses over lifelines; TASK, NONE: mean wait of a random request \
             answered with work, with nothing)"
        )
    }
}

fn mean(sum: u64, n: u64) -> f64 {
    if n == 0 { 0.0 } else { sum as f64 / n as f64 }
}
