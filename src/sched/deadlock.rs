//! The deadlock check and report. A blocked outside thread samples the
//! runtime once per grace period (`outside_wait.rs`); when two samples agree
//! that nothing can make progress, it asks the idle workers to list their
//! blocked tasks, prints who waits on what and how to silence a false
//! alarm, then aborts rather than hang. The protocol and its invariant are
//! in `sleep/README.md`, "Deadlock detection".

use super::block::BlockKind;
use super::deadlock_wave::{Answer, Look};
use super::outside_wait::{OUTSIDE_WAKES, OutsideWaiter, StuckSample, outside_waiters};
use super::registry::Registry;
use std::fmt::Write;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

/// The runtime is stuck when every worker sits in its idle loop, nothing
/// is queued anywhere, no task sleeps on a timer, and no outside thread
/// declared activity. The sample holds what must not change across the
/// grace period for the state to count as a deadlock: idle-loop entries
/// (a worker that left its idle loop and came back bumped them), wake-ups
/// of blocked outside threads, and tasks injected from outside.
///
/// In a job of several locales this process alone cannot tell a deadlock
/// from waiting for another locale: the driver runs one wave of the
/// job-wide check instead (`Driver::job_stuck_sample`, `deadlock_wave.rs`).
pub(crate) fn stuck_sample(reg: &Registry) -> StuckSample {
    if super::driver::others_may_send(reg) {
        return super::driver::job_stuck_sample(reg);
    }
    let entries = reg.idle.all_idle()?;
    let quiet =
        nothing_queued(reg) && super::driver::in_flight(reg) == 0 && !super::driver::ready(reg);
    quiet.then(|| {
        (
            entries,
            OUTSIDE_WAKES.load(Ordering::Acquire),
            local_progress(reg),
        )
    })
}

/// No task queued or sleeping on a timer, no outside activity declared.
fn nothing_queued(reg: &Registry) -> bool {
    reg.outside.active.load(Ordering::SeqCst) == 0
        && reg.sleeping_tasks() == 0
        && reg.injector.is_empty()
        && reg.roots.is_empty()
        && reg
            .workers
            .iter()
            .all(|w| w.stealer.is_empty() && w.resume.is_empty())
}

/// Tasks injected from outside plus program frames handled by polls
/// (control frames are not counted: `comm::driver::poll_transport`).
fn local_progress(reg: &Registry) -> u64 {
    reg.outside
        .injected
        .load(Ordering::Acquire)
        .wrapping_add(reg.driver_slot.handled.load(Ordering::Acquire))
}

/// This locale's answer to a wave of the job-wide deadlock check
/// (`deadlock_wave.rs`). `messages` gives the program messages sent and
/// received; `unsent` says a frame waits to be sent. The caller holds the
/// poll token (or is the poll), so no frame is delivered while this
/// reads.
pub(crate) fn locale_answer(
    reg: &Registry,
    messages: impl FnOnce() -> (u64, u64),
    unsent: bool,
) -> Answer {
    super::deadlock_wave::answer(&reg.idle, || {
        let (sent, received) = messages();
        Look {
            quiet: !unsent && nothing_queued(reg),
            outstanding: !reg.quiescent() || reg.outside_blocked() > 0,
            sent,
            received,
            progress: OUTSIDE_WAKES
                .load(Ordering::Acquire)
                .wrapping_add(local_progress(reg)),
        }
    })
}

/// Most waiters listed one by one; the rest are counted.
const LISTED: usize = 16;

/// Asks every (idle) worker to describe its blocked tasks; waits for the
/// answers a short while.
fn blocked_task_lines(reg: &Registry) -> Vec<String> {
    {
        let mut r = reg.report.lock().unwrap_or_else(|e| e.into_inner());
        r.lines.clear();
        r.answered = 0;
    }
    reg.report_gen.fetch_add(1, Ordering::AcqRel);
    // A hosted worker reports from its own idle loop (`worker/host.rs`):
    // it answers for itself, since it is busy here.
    if let Some(local) = super::WorkerLocal::current() {
        local.answer_report();
    }
    reg.sleep.notify_all();
    let deadline = Instant::now() + Duration::from_millis(500);
    loop {
        {
            let r = reg.report.lock().unwrap_or_else(|e| e.into_inner());
            if r.answered >= reg.workers.len() || Instant::now() >= deadline {
                let mut lines = r.lines.clone();
                if r.answered < reg.workers.len() {
                    lines.push(format!(
                        "({} worker(s) did not answer in time; their tasks are not listed)",
                        reg.workers.len() - r.answered
                    ));
                }
                return lines;
            }
        }
        std::thread::sleep(Duration::from_millis(1));
    }
}

fn describe_outside(w: &OutsideWaiter) -> String {
    format!(
        "outside thread {}: {}",
        w.thread,
        super::block::describe_wait(w.kind, w.addr)
    )
}

fn push_listed(msg: &mut String, lines: &[String]) {
    for l in lines.iter().take(LISTED) {
        let _ = writeln!(msg, "  {l}");
    }
    if lines.len() > LISTED {
        let _ = writeln!(msg, "  ... and {} more", lines.len() - LISTED);
    }
}

const REMEDY: &str = "If another OS thread will still fill or empty one of these variables, \
     declare it: hold a cantus::task::OutsideActivity in that thread while it works \
     (C: cantus_outside_activity_begin()/cantus_outside_activity_end()), or turn \
     detection off with CANTUS_DEADLOCK_MS=0 (or raise it).";

/// This locale's waiters for the report of a deadlock across locales:
/// its blocked tasks (asking its idle workers) and blocked outside
/// threads, at most `LISTED` of them, the rest counted.
pub(crate) fn waiter_lines(reg: &Registry) -> Vec<String> {
    let mut lines = blocked_task_lines(reg);
    lines.extend(outside_waiters().iter().map(describe_outside));
    if lines.len() > LISTED {
        let more = lines.len() - LISTED;
        lines.truncate(LISTED);
        lines.push(format!("... and {more} more"));
    }
    lines
}

const JOB_REMEDY: &str = "If an OS thread of some locale will still fill or empty one of these \
     variables or send a message, declare it: hold a cantus::task::OutsideActivity in that thread \
     while it works (C: cantus_outside_activity_begin()/cantus_outside_activity_end()), or turn \
     detection off with CANTUS_DEADLOCK_MS=0 (or raise it).";

/// The report of a deadlock across the locales of a job (on locale 0):
/// every locale's waiters, gathered by the driver, then abort (the other
/// locales end with locale 0).
fn report_job(reg: &Registry, after: Duration) -> ! {
    let mut waiters = vec![(0, waiter_lines(reg))];
    waiters.extend(super::driver::job_waiters(reg));
    let mut msg = String::new();
    let _ = writeln!(
        msg,
        "cantus: deadlock across the job's {} locales: no task of any locale can make progress \
         and no message is in flight. Who waits on what:",
        waiters.len()
    );
    for (locale, lines) in &waiters {
        if lines.is_empty() {
            let _ = writeln!(msg, "  locale {locale}: nothing blocked");
        }
        for l in lines {
            let _ = writeln!(msg, "  locale {locale}: {l}");
        }
    }
    let _ = writeln!(
        msg,
        "Every locale sat idle for {} ms with nothing queued, nothing woken and every message \
         delivered (CANTUS_DEADLOCK_MS sets this period). {JOB_REMEDY} Aborting the job instead \
         of hanging.",
        after.as_millis()
    );
    eprint!("{msg}");
    std::process::abort();
}

/// Prints who waits on what, and aborts.
pub(crate) fn report(reg: &Registry, after: Duration) -> ! {
    if super::driver::others_may_send(reg) {
        report_job(reg, after);
    }
    let tasks = reg.blocked_tasks();
    let outside = outside_waiters();
    let mut msg = String::new();
    let _ = writeln!(
        msg,
        "cantus: deadlock: no task can make progress. {tasks} task(s) and {} outside thread(s) are blocked:",
        outside.len()
    );
    for kind in BlockKind::ALL {
        let t = reg.blocked_tasks_of(kind as usize);
        if t > 0 {
            let _ = writeln!(msg, "  {t} task(s) {}", kind.describe());
        }
        let o = outside.iter().filter(|w| w.kind == kind).count();
        if o > 0 {
            let _ = writeln!(msg, "  {o} outside thread(s) {}", kind.describe());
        }
    }
    let _ = writeln!(msg, "Who waits on what:");
    let mut lines = blocked_task_lines(reg);
    lines.extend(outside.iter().map(describe_outside));
    push_listed(&mut msg, &lines);
    let _ = writeln!(
        msg,
        "Every worker sat idle for {} ms with nothing queued and nothing woken \
         (CANTUS_DEADLOCK_MS sets this period). {REMEDY} Aborting instead of hanging.",
        after.as_millis()
    );
    eprint!("{msg}");
    std::process::abort();
}

/// With no runtime: every thread of the process is blocked on a cantus
/// variable.
pub(crate) fn report_without_runtime(after: Duration) -> ! {
    let outside = outside_waiters();
    let mut msg = String::new();
    let _ = writeln!(
        msg,
        "cantus: deadlock: every thread of this process ({}) is blocked on a cantus variable \
         and no cantus runtime is running, so nothing can fill or empty them:",
        outside.len()
    );
    let lines: Vec<String> = outside.iter().map(describe_outside).collect();
    push_listed(&mut msg, &lines);
    let _ = writeln!(
        msg,
        "Nothing changed for {} ms. Start a runtime (cantus::run) if tasks were meant to fill them; \
         CANTUS_DEADLOCK_MS=0 turns this check off. Aborting instead of hanging.",
        after.as_millis()
    );
    eprint!("{msg}");
    std::process::abort();
}
