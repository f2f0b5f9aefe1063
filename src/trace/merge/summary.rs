//! Each worker's utilisation, and the table `CANTUS_TRACE` prints.

use std::collections::HashMap;
use std::fmt;
use std::path::PathBuf;

/// Time spent per state on one worker lane.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct LaneUse {
    /// The lane's name.
    pub name: String,
    /// Nanoseconds running tasks.
    pub busy_ns: u64,
    /// Nanoseconds in the idle loop (sleep included: see
    /// [`LaneUse::awake_idle_ns`]).
    pub idle_ns: u64,
    /// Of which asleep.
    pub sleep_ns: u64,
    /// From the lane's first event to its last (or the locale's end).
    pub span_ns: u64,
    /// Tasks started on it.
    pub tasks: u64,
    /// Tasks it stole.
    pub steals: u64,
    /// Events it dropped (full).
    pub dropped: u64,
}

impl LaneUse {
    /// Nanoseconds in the idle loop awake (not asleep).
    pub fn awake_idle_ns(&self) -> u64 {
        self.idle_ns.saturating_sub(self.sleep_ns)
    }

    /// Nanoseconds in none of the states: the scheduler's own work
    /// between them (finding the next task, spawning, polling).
    pub fn other_ns(&self) -> u64 {
        self.span_ns
            .saturating_sub(self.busy_ns)
            .saturating_sub(self.idle_ns.max(self.sleep_ns))
    }
}

/// What a merge found: per locale, its workers' use.
#[derive(Clone, Debug, Default)]
pub struct Summary {
    /// (locale, complete, lanes).
    pub locales: Vec<(usize, bool, Vec<LaneUse>)>,
    /// Flows written, by category ("message", "steal", "steal-across",
    /// "wake").
    pub flows: HashMap<String, u64>,
    /// What was wrong (missing or damaged parts).
    pub problems: Vec<String>,
    /// The parts directory merged (empty when made from a merged trace).
    pub parts: PathBuf,
    /// The merged trace written (empty when made from a merged trace).
    pub output: PathBuf,
    /// Locales whose part is not complete and whose process still runs
    /// (locale, process id): their job may still be recording.
    pub running: Vec<(usize, u32)>,
}

/// The heading of the utilisation table: what its columns are.
pub(super) const TABLE_HEAD: &str = "cantus trace: worker utilisation, in shares of each worker's time \
                          (a row adds up to 100%):\n  busy = running tasks; idle = in the idle \
                          loop, awake; asleep = asleep in the idle loop; other = the scheduler \
                          between them (finding work, spawning, polling)\n";

impl fmt::Display for Summary {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(TABLE_HEAD)?;
        writeln!(
            f,
            "  {:>6} {:<12} {:>7} {:>7} {:>7} {:>7} {:>9} {:>7} {:>9}",
            "locale", "lane", "busy", "idle", "asleep", "other", "tasks", "steals", "dropped"
        )?;
        for (l, complete, lanes) in &self.locales {
            for u in lanes {
                let pct = |x: u64| 100.0 * x as f64 / u.span_ns.max(1) as f64;
                writeln!(
                    f,
                    "  {:>6} {:<12} {:>6.1}% {:>6.1}% {:>6.1}% {:>6.1}% {:>9} {:>7} {:>9}",
                    l,
                    u.name,
                    pct(u.busy_ns),
                    pct(u.awake_idle_ns()),
                    pct(u.sleep_ns),
                    pct(u.other_ns()),
                    u.tasks,
                    u.steals,
                    u.dropped
                )?;
            }
            if !complete {
                writeln!(
                    f,
                    "  locale {l} did not stop cleanly: its lanes end where it died"
                )?;
            }
        }
        for p in &self.problems {
            writeln!(f, "  problem: {p}")?;
        }
        Ok(())
    }
}
