//! Timeline traces (`CANTUS_TRACE=PATH`, `Builder::trace`): what every
//! worker of every locale did, when. The format, the policy when a lane
//! is full, crash safety and clock alignment are in `README.md` beside
//! this file.
//!
//! Recording: each thread that records owns a *lane*, an array of
//! fixed-size [`Event`]s in a file that its locale maps shared
//! (`lane.rs`), written without locks (one writer per lane) and published
//! by a count; so whatever was recorded survives a crash or a kill of the
//! process. When tracing is off, every recording call is one relaxed
//! load of a static and a branch.
//!
//! Merging (`merge/`): at the end of a traced run, locale 0 reads every
//! locale's file and writes one Chrome trace-event JSON file (which
//! Perfetto and `chrome://tracing` open), and prints each worker's
//! utilisation. `cantus-trace` (the workspace's `tools/trace/` crate) merges
//! what a dead job left, and draws a trace as an SVG timeline.

pub(crate) mod lane;
pub mod merge;
mod private;

pub use merge::parts_dirs;
pub use private::replace_file;

use std::sync::atomic::{AtomicBool, Ordering};

/// Tracing is on in this process (a traced runtime runs).
static ON: AtomicBool = AtomicBool::new(false);

/// Whether tracing is on: what every recording call checks first.
#[inline(always)]
pub(crate) fn on() -> bool {
    ON.load(Ordering::Relaxed)
}

/// One recorded event: 32 bytes, the same in memory and in the file
/// (little-endian, as every machine cantus runs on). As recorded, `t` is
/// in the clock's ticks (the time-stamp counter on x86-64); a merged [`merge::Part`] has it in
/// nanoseconds.
///
/// The file format's internals, public for [`merge::Part`]'s readers
/// (the `cantus-trace` tool), hidden from the docs.
#[doc(hidden)]
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Event {
    /// When: clock ticks as recorded, nanoseconds once read back.
    pub t: u64,
    /// What happened ([`kind`]).
    pub kind: u16,
    /// A small argument (a task's kind, a block's kind, a message kind).
    pub small: u16,
    /// A 32-bit argument (a size, a count, a locale).
    pub word: u32,
    /// The first full argument (a task id, an address, a worker).
    pub a: u64,
    /// The second full argument.
    pub b: u64,
}

/// Event kinds and what their fields mean.
#[doc(hidden)]
pub mod kind {
    /// A task starts or resumes running: `a` its id, `small` how it came
    /// to this worker ([`super::how`]), `b` the worker it was stolen from
    /// (stolen tasks) or the task that woke it (resumed tasks), else 0.
    pub const TASK_BEGIN: u16 = 1;
    /// The running task stops: `a` its id, `small` why ([`super::why`]),
    /// `word` what it is ([`super::task_kind`], 0 if not said): set by the
    /// layer that made it, once it runs; `b` the task that spawned it,
    /// where known (0 if not).
    pub const TASK_END: u16 = 2;
    /// The worker enters its idle loop (spinning for work).
    pub const IDLE_BEGIN: u16 = 4;
    /// The worker leaves its idle loop.
    pub const IDLE_END: u16 = 5;
    /// The worker falls asleep (inside an idle period).
    pub const SLEEP_BEGIN: u16 = 6;
    /// The worker wakes.
    pub const SLEEP_END: u16 = 7;
    /// The worker took a task from worker `a`'s deque.
    pub const STEAL: u16 = 8;
    /// The running task blocks on the variable at `a` (`small`: what it
    /// waits for, the scheduler's `BlockKind`).
    pub const BLOCK: u16 = 9;
    /// The running task (or thread) made task `a` runnable again, by a
    /// state change of the variable at `b`.
    pub const WAKE: u16 = 10;
    /// A poll of the driver handled `word` items.
    pub const POLL: u16 = 11;
    /// A message to locale `word`: `small` its kind, `a` its trace
    /// sequence number, `b` its bytes.
    pub const MSG_SEND: u16 = 12;
    /// A message from locale `word`: as [`MSG_SEND`].
    pub const MSG_RECV: u16 = 13;
    /// Work stealing across locales: this locale sends work to locale
    /// `word` (the thief) for computation `a`; the message that carries
    /// it is the next one this lane sends there.
    pub const STEAL_OUT: u16 = 14;
    /// This locale received stolen work from locale `word` (the victim)
    /// for computation `a`.
    pub const STEAL_IN: u16 = 15;
    /// The running task leaves its worker for a blocking call.
    pub const AWAY_BEGIN: u16 = 16;
    /// It is back.
    pub const AWAY_END: u16 = 17;
}

/// How a task came to run on its worker (`TASK_BEGIN`'s `small`).
#[doc(hidden)]
pub mod how {
    /// From the worker's own deque.
    pub const OWN: u16 = 0;
    /// Stolen from another worker's deque.
    pub const STOLEN: u16 = 1;
    /// From the shared queue (spawned by an outside thread, a remote
    /// call's handler, a task aimed at another shepherd).
    pub const INJECTED: u16 = 2;
    /// A root task (`block_on`, `run`, a call from an outside thread).
    pub const ROOT: u16 = 3;
    /// Resumed after it blocked, yielded or slept.
    pub const RESUMED: u16 = 4;
}

/// Why a task stopped running (`TASK_END`'s `small`).
#[doc(hidden)]
pub mod why {
    /// It returned.
    pub const DONE: u16 = 0;
    /// It blocked on a variable.
    pub const BLOCKED: u16 = 1;
    /// It yielded.
    pub const YIELDED: u16 = 2;
    /// It sleeps.
    pub const SLEPT: u16 = 3;
    /// It left for a blocking call.
    pub const AWAY: u16 = 4;
}

/// What a task is (`LABEL`'s `small`).
#[doc(hidden)]
pub mod task_kind {
    /// `begin`, a scope's `spawn`.
    pub const BEGIN: u16 = 1;
    /// The second half of a `join` (run by a thief).
    pub const JOIN: u16 = 2;
    /// A range of a `coforall`.
    pub const COFORALL: u16 = 3;
    /// A chunk of a `forall`.
    pub const FORALL: u16 = 4;
    /// A remote call's handler.
    pub const REMOTE: u16 = 5;
    /// A piece of a balanced computation (`balance/`) split off on this
    /// locale.
    pub const BALANCE: u16 = 6;
    /// A task forked through the C ABI.
    pub const C_TASK: u16 = 7;
    /// A root task.
    pub const ROOT: u16 = 8;
    /// A piece of a balanced computation stolen from another locale.
    pub const STOLEN: u16 = 9;
}

/// The recording clock, in ticks: the time-stamp counter on x86-64 (a
/// third of `clock_gettime`'s cost here; invariant and synchronized
/// across the cores of one machine wherever Linux uses it as its clock
/// source), else `CLOCK_MONOTONIC` nanoseconds. Each part file records
/// how ticks map to `CLOCK_MONOTONIC` (`lane.rs`).
#[inline]
pub(crate) fn ticks() -> u64 {
    #[cfg(target_arch = "x86_64")]
    {
        // SAFETY: rdtsc has no preconditions.
        unsafe { core::arch::x86_64::_rdtsc() }
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        now()
    }
}

/// The monotonic clock, in nanoseconds (`CLOCK_MONOTONIC`: the same
/// clock in every process of one machine).
#[inline]
pub(crate) fn now() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes the timespec we pass; CLOCK_MONOTONIC
    // always exists on Linux.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// Records an event on the calling thread's lane, now. Inline, only the
/// check: the recording itself is out of line, so that the hot paths it
/// sits in stay as small as without it.
#[inline(always)]
pub(crate) fn record(kind: u16, small: u16, word: u32, a: u64, b: u64) {
    if on() {
        record_now(kind, small, word, a, b);
    }
}

#[cold]
#[inline(never)]
fn record_now(kind: u16, small: u16, word: u32, a: u64, b: u64) {
    lane::append(Event {
        t: ticks(),
        kind,
        small,
        word,
        a,
        b,
    });
}

/// Labels the running task (a [`task_kind`]), from the layer that made
/// it, as it starts: its next `TASK_END` carries the label. The first
/// label wins (a task run inline later inside this one does not rename
/// it).
#[inline(always)]
pub(crate) fn label(task_kind: u16) {
    if on() {
        label_now(task_kind, 0);
    }
}

/// [`label`], and the task that spawned the running one, in one check
/// (a spawner of 0, unknown, is not recorded).
#[inline(always)]
pub(crate) fn label_spawned_by(task_kind: u16, parent: u64) {
    if on() {
        label_now(task_kind, parent);
    }
}

#[cold]
#[inline(never)]
fn label_now(task_kind: u16, parent: u64) {
    LABEL.with(|l| {
        if l.get() == 0 {
            l.set(task_kind);
        }
    });
    if parent != 0 {
        SPAWNER.with(|s| {
            if s.get() == 0 {
                s.set(parent);
            }
        });
    }
}

/// Labels the running task as what it turned out to be, over a generic
/// label its spawner gave (`begin`, a remote handler, a join half, a
/// coforall range): a balanced computation's piece, a forall's chunk.
#[inline(always)]
pub(crate) fn relabel(task_kind: u16) {
    if on() {
        relabel_now(task_kind);
    }
}

#[cold]
#[inline(never)]
fn relabel_now(kind: u16) {
    LABEL.with(|l| {
        if matches!(
            l.get(),
            0 | task_kind::BEGIN | task_kind::REMOTE | task_kind::JOIN | task_kind::COFORALL
        ) {
            l.set(kind);
        }
    });
}

/// Where the running task's id comes from: the scheduler's answer,
/// handed down by the composition root when a runtime starts
/// ([`set_task_ids`]), so that this layer imports none above it.
static TASK_IDS: std::sync::OnceLock<fn() -> Option<u64>> = std::sync::OnceLock::new();

/// Tells the recorder how to ask for the running task's id (the first
/// answer given stands: it is the same function for every runtime).
pub(crate) fn set_task_ids(current: fn() -> Option<u64>) {
    let _ = TASK_IDS.set(current);
}

/// The running task's id, when recording, for [`label_spawned_by`] in
/// what it spawns.
#[cold]
#[inline(never)]
fn current_task() -> u64 {
    TASK_IDS.get().and_then(|ask| ask()).unwrap_or(0)
}

/// The running task's id, to hand to [`label_spawned_by`] in what it
/// spawns: only while recording (0 otherwise, and outside tasks).
#[inline(always)]
pub(crate) fn spawner() -> u64 {
    if on() { current_task() } else { 0 }
}

/// Records the running task's end: `TASK_END` with `why`, its label and
/// its spawner (the first label and spawner given since its start win).
#[inline(always)]
pub(crate) fn task_end(id: u64, why: u16) {
    if on() {
        task_end_now(id, why);
    }
}

#[cold]
#[inline(never)]
fn task_end_now(id: u64, why: u16) {
    let label = LABEL.with(|l| l.replace(0));
    let spawner = SPAWNER.with(|s| s.replace(0));
    record_now(kind::TASK_END, why, u32::from(label), id, spawner);
}

thread_local! {
    /// The running task's label until its next `TASK_END`.
    static LABEL: std::cell::Cell<u16> = const { std::cell::Cell::new(0) };
    /// The running task's spawner until its next `TASK_END`.
    static SPAWNER: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
}

/// A new job's number for the names of its trace's parts (random: see
/// `lane::parts_dir`), which every locale of the job must be given.
pub(crate) fn new_job() -> Result<u64, crate::error::Error> {
    lane::new_job()
}

/// Starts recording for this process's runtime (locale `here` of
/// `locales`) into its part file of the trace `path`, in job `job`'s
/// parts directory (0: a job of its own); `workers` lanes are the
/// workers'. An error if the files cannot be made.
pub(crate) fn start(
    path: &std::path::Path,
    here: usize,
    locales: usize,
    workers: usize,
    lane_events: usize,
    job: u64,
) -> Result<(), crate::error::Error> {
    let job = if job == 0 { lane::new_job()? } else { job };
    let dir = lane::open(path, here, locales, workers, lane_events, job)?;
    *TRACED.lock().unwrap_or_else(|p| p.into_inner()) = Some(Traced {
        path: path.to_owned(),
        dir,
        here,
        locales,
    });
    ON.store(true, Ordering::Release);
    Ok(())
}

/// Stops recording for a while in this process (a traced runtime keeps
/// its trace; events meanwhile are not recorded): to trace only the part
/// of a run that matters, or to measure what tracing costs. Does nothing
/// without a traced runtime.
pub fn pause() {
    ON.store(false, Ordering::Release);
}

/// Records again after [`pause`]; does nothing unless the running runtime
/// was started with a trace (`CANTUS_TRACE`, `Builder::trace`).
pub fn resume() {
    if lane::recording() {
        ON.store(true, Ordering::Release);
    }
}

/// Whether this process records trace events now.
pub fn is_recording() -> bool {
    on()
}

/// Sets this locale's offset to locale 0's clock (`remote/clock.rs`).
pub(crate) fn set_clock_offset(offset_ns: i64, error_ns: u64) {
    lane::set_clock_offset(offset_ns, error_ns);
}

/// Claims lane `index` (a worker's) for the calling thread.
pub(crate) fn enter_worker(index: usize) {
    if on() {
        lane::claim_worker(index);
    }
}

/// The running traced runtime's trace.
struct Traced {
    /// Where the merged trace goes.
    path: std::path::PathBuf,
    /// The job's parts directory.
    dir: std::path::PathBuf,
    here: usize,
    locales: usize,
}

/// The running traced runtime's trace, while it runs.
static TRACED: std::sync::Mutex<Option<Traced>> = std::sync::Mutex::new(None);

/// Locale 0, as the job ends because a locale died: merges what every
/// locale recorded so far (the dead one's lanes end where it died) into
/// the trace, so that the failure can be looked at. Locale 0's own part
/// is closed first: it stopped recording, it did not die.
pub(crate) fn merge_after_failure() {
    let traced = TRACED.lock().unwrap_or_else(|p| p.into_inner()).take();
    if let Some(t @ Traced { here: 0, .. }) = traced {
        ON.store(false, Ordering::Release);
        lane::close();
        finish_with(&t, false);
    }
}

/// Locale 0, at the end of a traced run: waits (a while) for every
/// locale's part to be complete, merges them into the trace, removes the
/// parts if all were, and prints the utilisation summary on stderr.
pub(crate) fn finish() {
    if let Some(t) = TRACED.lock().unwrap_or_else(|p| p.into_inner()).take() {
        finish_with(&t, true);
    }
}

fn finish_with(t: &Traced, wait: bool) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(2);
    loop {
        let complete = merge::parts_complete(&t.dir);
        if !wait || complete >= t.locales || std::time::Instant::now() > deadline {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    match merge::merge_dir(&t.dir, Some(&t.path)) {
        Ok(summary) => {
            let all = summary.problems.is_empty()
                && summary.locales.len() == t.locales
                && summary.locales.iter().all(|(_, complete, _)| *complete);
            let parts = if !all {
                format!(
                    "; the part files stay in {} (not every locale stopped cleanly): \
                     `cantus-trace merge` merges them again",
                    t.dir.display()
                )
            } else {
                match merge::remove_parts(&t.dir) {
                    Ok(()) => String::new(),
                    Err(e) => format!("; could not remove the part files: {e}"),
                }
            };
            eprint!("{summary}");
            eprintln!(
                "cantus trace: wrote {} (open it in https://ui.perfetto.dev, or draw it with \
                 `cantus-trace svg`){parts}",
                t.path.display(),
            );
        }
        Err(e) => eprintln!(
            "cantus trace: could not merge the parts in {}: {e}",
            t.dir.display()
        ),
    }
}

/// Stops recording: marks this locale's file complete and unmaps it.
pub(crate) fn stop() {
    ON.store(false, Ordering::Release);
    lane::close();
}
