//! The statistics report of `CANTUS_STATS=1`, printed at shutdown: per
//! worker counters from the scheduler and, in a job of several locales,
//! the message and work-stealing counts of the layers above it. It lives
//! with the composition root because it reads every layer.

use crate::sched::registry::Registry;
use std::fmt::Write;
use std::sync::atomic::Ordering;

/// The report for the runtime of `r`.
pub(crate) fn stats_report(r: &Registry) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "cantus stats: {} workers, stack size {} KiB",
        r.config.workers,
        r.config.stack_size / 1024
    );
    let _ = writeln!(
        s,
        "  {:>6} {:>12} {:>12} {:>10} {:>12} {:>9} {:>8} {:>8} {:>9} {:>7} {:>14} {:>8}",
        "worker",
        "spawned",
        "ran",
        "steals",
        "failed steal",
        "retries",
        "sleeps",
        "woken",
        "carriers",
        "stacks",
        "max stack use",
        "panics"
    );
    for (i, w) in r.workers.iter().enumerate() {
        let c = &w.counters;
        let _ = writeln!(
            s,
            "  {:>6} {:>12} {:>12} {:>10} {:>12} {:>9} {:>8} {:>8} {:>9} {:>7} {:>11} KiB {:>8}",
            i,
            c.spawned.load(Ordering::Relaxed),
            c.finished.load(Ordering::Relaxed),
            c.steals.load(Ordering::Relaxed),
            c.failed_steal_rounds.load(Ordering::Relaxed),
            c.steal_retries.load(Ordering::Relaxed),
            c.parks.load(Ordering::Relaxed),
            c.woken.load(Ordering::Relaxed),
            c.carriers.load(Ordering::Relaxed),
            c.stacks.load(Ordering::Relaxed),
            c.max_stack_resident.load(Ordering::Relaxed) / 1024,
            c.detached_panics.load(Ordering::Relaxed),
        );
    }
    let _ = writeln!(
        s,
        "  tasks spawned from outside threads: {}; driver items handled: {}",
        r.outside.injected.load(Ordering::Relaxed),
        r.driver_slot.handled.load(Ordering::Relaxed)
    );
    if r.config.locales > 1 {
        let (sent, received) = crate::remote::message_counts();
        let _ = writeln!(
            s,
            "  locale {}: messages to other locales {sent}, from them {received}",
            r.config.here
        );
        #[cfg(not(loom))]
        {
            let (out, into) = crate::balance::steal_counts();
            let _ = writeln!(
                s,
                "  locale {}: work stolen from here by other locales {out}, stolen by here {into}",
                r.config.here
            );
        }
    }
    s
}
