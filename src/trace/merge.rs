//! Reading locales' part files and writing one Chrome trace-event JSON
//! file (`README.md`, "The merged file"), with each worker's utilisation.

use super::lane::{
    self, FileHeader, HEADER_BYTES, LaneMeta, MAGIC, NAME_BYTES, PATH_BYTES, PATH_OFFSET, VERSION,
};
use super::private::{Dir, replace_file};
use super::{Event, how, kind, task_kind, why};
use std::collections::HashMap;
use std::fmt::{self, Write as _};
use std::path::{Path, PathBuf};

/// One lane of a part file, as read.
#[derive(Debug)]
pub struct Lane {
    /// The thread's name ("worker 0", a thread's name).
    pub name: String,
    /// Its events, in the order recorded (times never decrease).
    pub events: Vec<Event>,
    /// Events not recorded because the lane was full.
    pub dropped: u64,
    /// Whether it is a worker's lane.
    pub worker: bool,
}

/// One locale's part file, as read.
#[derive(Debug)]
pub struct Part {
    /// Its locale.
    pub locale: usize,
    /// Locales of the job.
    pub locales: usize,
    /// Its lanes (workers first).
    pub lanes: Vec<Lane>,
    /// Whether the locale stopped recording cleanly (else it died, or
    /// still runs).
    pub complete: bool,
    /// When it started recording.
    pub start_ns: u64,
    /// When it stopped (0 if it did not stop).
    pub end_ns: u64,
    /// Added to its times to align them with locale 0's clock.
    pub clock_offset_ns: i64,
    /// How far that offset may be off.
    pub clock_error_ns: u64,
    /// Events of threads that found no lane.
    pub unlaned: u64,
    /// The process that recorded it.
    pub pid: u32,
    /// The job it belongs to (the number in its directory's name).
    pub job: u64,
    /// The absolute path of the trace it was recorded for.
    pub trace: PathBuf,
}

fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(b[at..at + 4].try_into().unwrap())
}

fn u64_at(b: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(b[at..at + 8].try_into().unwrap())
}

/// Reads a part file; an error says what is wrong with it.
pub fn read_part(path: &Path) -> Result<Part, String> {
    let file = std::fs::File::open(path).map_err(|e| format!("{}: {e}", path.display()))?;
    read_part_with(&file, path, true)
}

/// Reads the part file `file` (at `path`): its header and lanes'
/// records, and their events if `with_events` (else every lane reads as
/// empty): only what was written is read, never the sparse file's
/// unwritten space.
fn read_part_with(file: &std::fs::File, path: &Path, with_events: bool) -> Result<Part, String> {
    use std::os::unix::fs::FileExt;
    let io = |e: std::io::Error| format!("{}: {e}", path.display());
    let size = file.metadata().map_err(io)?.len() as usize;
    let mut b = vec![0u8; HEADER_BYTES.min(size)];
    file.read_exact_at(&mut b, 0).map_err(io)?;
    let bad = |what: &str| format!("{}: not a cantus trace part: {what}", path.display());
    if b.len() < HEADER_BYTES || b[..8] != MAGIC {
        return Err(bad("no header"));
    }
    if u32_at(&b, 8) != VERSION {
        return Err(bad(&format!("format version {}", u32_at(&b, 8))));
    }
    // FileHeader's fields, in order (repr(C), little-endian).
    let (locale, locales, workers) = (u32_at(&b, 12), u32_at(&b, 16), u32_at(&b, 20));
    let (lanes_max, lane_events) = (u32_at(&b, 24) as usize, u32_at(&b, 28) as usize);
    let start_ns = u64_at(&b, 32);
    let clock_offset_ns = u64_at(&b, 40) as i64;
    let lanes_used = u32_at(&b, 48) as usize;
    let done = u32_at(&b, 52);
    let end_ns = u64_at(&b, 56);
    let unlaned = u64_at(&b, 64);
    let tick0 = u64_at(&b, 72);
    let mut ns_per_tick = f64::from_bits(u64_at(&b, 80));
    let tick_end = u64_at(&b, 88);
    let clock_error_ns = u64_at(&b, 96);
    let pid = u32_at(&b, std::mem::offset_of!(FileHeader, pid));
    let path_len = u32_at(&b, std::mem::offset_of!(FileHeader, path_len)) as usize;
    let job = u64_at(&b, std::mem::offset_of!(FileHeader, job));
    if path_len > PATH_BYTES {
        return Err(bad("trace path"));
    }
    let trace = PathBuf::from(
        <std::ffi::OsStr as std::os::unix::ffi::OsStrExt>::from_bytes(
            &b[PATH_OFFSET..PATH_OFFSET + path_len],
        ),
    );
    debug_assert_eq!(std::mem::offset_of!(FileHeader, unlaned), 64);
    debug_assert_eq!(std::mem::offset_of!(FileHeader, tick_end), 88);
    if done == 1 && tick_end > tick0 && end_ns > start_ns {
        ns_per_tick = (end_ns - start_ns) as f64 / (tick_end - tick0) as f64;
    }
    if !ns_per_tick.is_finite() || ns_per_tick <= 0.0 {
        return Err(bad("clock rate"));
    }
    let to_ns =
        |t: u64| start_ns.wrapping_add(((t as f64 - tick0 as f64) * ns_per_tick) as i64 as u64);
    if lanes_max != lane::LANES_MAX || lane_events == 0 {
        return Err(bad("lane geometry"));
    }
    let mut lanes = Vec::new();
    for i in 0..lanes_used.min(lanes_max) {
        let m = lane::meta_offset(i);
        let len = u64_at(&b, m) as usize;
        let dropped = u64_at(&b, m + 8);
        let name_bytes = &b[m + 16..m + 16 + NAME_BYTES];
        debug_assert_eq!(std::mem::offset_of!(LaneMeta, name), 16);
        let end = name_bytes
            .iter()
            .position(|&c| c == 0)
            .unwrap_or(NAME_BYTES);
        let name = String::from_utf8_lossy(&name_bytes[..end]).into_owned();
        if len > lane_events {
            return Err(bad(&format!("lane {i} claims {len} events")));
        }
        let at = lane::events_offset(i, lane_events);
        let len = if with_events { len } else { 0 };
        if at + len * 32 > size {
            return Err(bad(&format!("lane {i} is cut short")));
        }
        let mut raw = vec![0u8; len * 32];
        file.read_exact_at(&mut raw, at as u64).map_err(io)?;
        let events: Vec<Event> = raw
            .chunks_exact(32)
            .map(|r| Event {
                t: to_ns(u64_at(r, 0)),
                kind: u16::from_le_bytes([r[8], r[9]]),
                small: u16::from_le_bytes([r[10], r[11]]),
                word: u32_at(r, 12),
                a: u64_at(r, 16),
                b: u64_at(r, 24),
            })
            .collect();
        if name.is_empty() && events.is_empty() {
            continue; // a worker lane never claimed
        }
        lanes.push(Lane {
            name,
            events,
            dropped,
            worker: i < workers as usize,
        });
    }
    Ok(Part {
        locale: locale as usize,
        locales: locales as usize,
        lanes,
        complete: done == 1,
        start_ns,
        end_ns,
        clock_offset_ns,
        clock_error_ns,
        unlaned,
        pid,
        job,
        trace,
    })
}

/// Reads every part file in the parts directory `dir` (`locale-N.bin`),
/// by locale; a locale whose file is missing or unreadable is reported.
/// The directory must be this user's and private, and each part a
/// regular file of this user (never a link): anything else is reported
/// and not read (`private.rs`).
pub fn read_parts(dir: &Path) -> (Vec<Part>, Vec<String>) {
    match Dir::open(dir) {
        Ok(d) => read_parts_in(&d, true),
        Err(e) => (Vec::new(), vec![e]),
    }
}

/// How many locales' parts in `dir` are complete (read from the headers
/// only).
pub(crate) fn parts_complete(dir: &Path) -> usize {
    let Ok(d) = Dir::open(dir) else {
        return 0;
    };
    read_parts_in(&d, false)
        .0
        .iter()
        .filter(|p| p.complete)
        .count()
}

fn read_parts_in(dir: &Dir, with_events: bool) -> (Vec<Part>, Vec<String>) {
    let mut parts: Vec<Part> = Vec::new();
    let mut problems = Vec::new();
    let mut names: Vec<(usize, String)> = match std::fs::read_dir(&dir.path) {
        Ok(d) => d
            .filter_map(|e| e.ok()?.file_name().into_string().ok())
            .filter_map(|n| {
                let l = n
                    .strip_prefix("locale-")?
                    .strip_suffix(".bin")?
                    .parse()
                    .ok()?;
                Some((l, n))
            })
            .collect(),
        Err(e) => {
            problems.push(format!("{}: {e}", dir.path.display()));
            return (parts, problems);
        }
    };
    names.sort();
    for (locale, name) in names {
        let path = dir.path.join(&name);
        let read = dir
            .open_file(&name)
            .and_then(|f| read_part_with(&f, &path, with_events));
        match read {
            Ok(p) if p.locale != locale => problems.push(format!(
                "{}: the part of locale {}, not {locale}",
                path.display(),
                p.locale
            )),
            Ok(p) => match parts.first() {
                Some(first) if (first.job, &first.trace) != (p.job, &p.trace) => {
                    problems.push(format!(
                        "{}: a part of another job (of {}), not merged",
                        path.display(),
                        p.trace.display()
                    ))
                }
                _ => parts.push(p),
            },
            Err(e) => problems.push(e),
        }
    }
    if let Some(n) = parts.first().map(|p| p.locales) {
        for l in 0..n {
            if !parts.iter().any(|p| p.locale == l) {
                problems.push(format!("locale {l}: no part file"));
            }
        }
    }
    (parts, problems)
}

/// This user's parts directories of the trace `path`, newest first, and
/// what was passed over: every directory named as one of its parts
/// directories is opened without following a link and used only if it is
/// this user's and private and its parts record this trace; one that is
/// not is named in `ignored` with why.
#[derive(Debug, Default)]
pub struct Found {
    /// The trace's parts directories, newest first.
    pub dirs: Vec<PathBuf>,
    /// Directories of the trace's names that are not used, and why.
    pub ignored: Vec<String>,
}

/// Finds the parts directories of the trace `path` ([`Found`]), in the
/// directory where its parts are made (`CANTUS_TRACE_PARTS`, else
/// `/dev/shm`, else the trace's own directory).
pub fn find_parts(path: &Path) -> Found {
    let mut found = Found::default();
    let absolute = std::path::absolute(path).unwrap_or_else(|_| path.to_owned());
    let base = lane::parts_base(&absolute);
    let prefix = lane::parts_prefix(&absolute);
    let Ok(entries) = std::fs::read_dir(&base) else {
        return found;
    };
    let mut dirs = Vec::new();
    for e in entries.filter_map(Result::ok) {
        if !e.file_name().to_string_lossy().starts_with(&prefix) {
            continue;
        }
        match Dir::open(&e.path()) {
            Ok(d) => {
                let (parts, _) = read_parts_in(&d, false);
                if parts.iter().any(|p| p.trace == absolute) {
                    dirs.push((d.changed_ns, d.path));
                }
            }
            Err(why) => found.ignored.push(why),
        }
    }
    dirs.sort_by(|a, b| b.cmp(a));
    found.dirs = dirs.into_iter().map(|(_, d)| d).collect();
    found
}

/// This user's parts directories of the trace `path`, newest first
/// ([`find_parts`]).
pub fn parts_dirs(path: &Path) -> Vec<PathBuf> {
    find_parts(path).dirs
}

/// Removes the parts directory `dir`, once checked to be this user's
/// private directory (a link there is not followed).
pub fn remove_parts(dir: &Path) -> Result<(), String> {
    Dir::open(dir)?;
    std::fs::remove_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))
}

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
const TABLE_HEAD: &str = "cantus trace: worker utilisation, in shares of each worker's time \
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

fn task_kind_name(k: u16) -> &'static str {
    match k {
        task_kind::BEGIN => "begin",
        task_kind::JOIN => "join",
        task_kind::COFORALL => "coforall",
        task_kind::FORALL => "forall chunk",
        task_kind::REMOTE => "remote handler",
        task_kind::BALANCE => "balanced work",
        task_kind::STOLEN => "stolen work",
        task_kind::C_TASK => "C task",
        task_kind::ROOT => "root",
        _ => "task",
    }
}

fn how_name(h: u16) -> &'static str {
    match h {
        how::OWN => "own",
        how::STOLEN => "stolen",
        how::INJECTED => "injected",
        how::ROOT => "root",
        how::RESUMED => "resumed",
        _ => "?",
    }
}

fn why_name(w: u16) -> &'static str {
    match w {
        why::DONE => "done",
        why::BLOCKED => "blocked",
        why::YIELDED => "yielded",
        why::SLEPT => "slept",
        why::AWAY => "away",
        _ => "?",
    }
}

fn msg_kind_name(k: u16) -> &'static str {
    match k {
        1 => "request",
        2 => "reply",
        4 => "chant message",
        _ => "message",
    }
}

/// Writes a JSON string (escaped).
fn json_str(out: &mut String, s: &str) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if (c as u32) < 0x20 => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

/// The JSON being written, event after event.
struct Out {
    json: String,
    first: bool,
    t0: i128,
    flow_id: u64,
    flows: HashMap<String, u64>,
}

impl Out {
    /// Starts the next event (after a comma, unless it is the first).
    fn next(&mut self) -> &mut String {
        if !std::mem::take(&mut self.first) {
            self.json.push_str(",\n");
        }
        &mut self.json
    }

    /// Microseconds since the trace's start (Chrome's unit).
    fn us(&self, t: i128) -> f64 {
        (t - self.t0) as f64 / 1000.0
    }

    /// Names a locale (`tid` none) or a lane, and orders it by its
    /// number.
    fn name(&mut self, pid: usize, tid: Option<usize>, name: &str) {
        let (what, sort, tid_field) = match tid {
            None => ("process", pid, String::new()),
            Some(t) => ("thread", t, format!(",\"tid\":{t}")),
        };
        let j = self.next();
        let _ = write!(
            j,
            "{{\"ph\":\"M\",\"name\":\"{what}_name\",\"pid\":{pid}{tid_field},\"args\":{{\"name\":"
        );
        json_str(j, name);
        j.push_str("}}");
        let _ = write!(
            self.next(),
            "{{\"ph\":\"M\",\"name\":\"{what}_sort_index\",\"pid\":{pid}{tid_field},\"args\":{{\"sort_index\":{sort}}}}}"
        );
    }

    #[allow(clippy::too_many_arguments)]
    fn slice(
        &mut self,
        pid: usize,
        tid: usize,
        name: &str,
        cat: &str,
        start: i128,
        end: i128,
        args: &str,
    ) {
        let (ts, dur) = (self.us(start), (end - start).max(0) as f64 / 1000.0);
        let j = self.next();
        j.push_str("{\"ph\":\"X\",\"name\":");
        json_str(j, name);
        let _ = write!(
            j,
            ",\"cat\":\"{cat}\",\"pid\":{pid},\"tid\":{tid},\"ts\":{ts:.3},\"dur\":{dur:.3}"
        );
        if !args.is_empty() {
            let _ = write!(j, ",\"args\":{{{args}}}");
        }
        j.push('}');
    }

    /// Ends the period `open` (idle, asleep, a blocking call) at `end`, if
    /// one is open: its slice, and its nanoseconds (0 if none was open).
    fn period(
        &mut self,
        (pid, tid): (usize, usize),
        (name, cat): (&str, &str),
        open: &mut Option<i128>,
        end: i128,
    ) -> u64 {
        let Some(start) = open.take() else {
            return 0;
        };
        self.slice(pid, tid, name, cat, start, end, "");
        (end - start).max(0) as u64
    }

    /// A flow arrow (category `cat`) from (pid, tid) at `from` to (pid2,
    /// tid2) at `to`, bound to the slices enclosing those points (a task
    /// or an idle period, on a worker's lane); with `source`, a
    /// zero-length slice of that name at the start carries `args`.
    fn flow(
        &mut self,
        cat: &str,
        (pid, tid, from): (usize, usize, i128),
        (pid2, tid2, to): (usize, usize, i128),
        source: Option<&str>,
        args: &str,
    ) {
        self.flow_id += 1;
        let id = self.flow_id;
        if let Some(name) = source {
            self.slice(pid, tid, name, cat, from, from, args);
        }
        let (a, b) = (self.us(from), self.us(to));
        let _ = write!(
            self.next(),
            "{{\"ph\":\"s\",\"name\":\"{cat}\",\"cat\":\"{cat}\",\"id\":{id},\"pid\":{pid},\"tid\":{tid},\"ts\":{a:.3}}}"
        );
        let _ = write!(
            self.next(),
            "{{\"ph\":\"f\",\"bp\":\"e\",\"name\":\"{cat}\",\"cat\":\"{cat}\",\"id\":{id},\"pid\":{pid2},\"tid\":{tid2},\"ts\":{b:.3}}}"
        );
        *self.flows.entry(cat.to_string()).or_default() += 1;
    }
}

/// What a task's `TASK_END` says (`value`, 0 for nothing), else what an
/// earlier span of the same task said: a task's later spans (after it
/// blocked) keep its label and spawner.
fn remembered<T: Copy + Default + PartialEq>(
    known: &mut HashMap<u64, T>,
    task: u64,
    value: T,
) -> T {
    if value != T::default() {
        known.insert(task, value);
        value
    } else {
        known.get(&task).copied().unwrap_or_default()
    }
}

/// A message end, for pairing sends with receives.
#[derive(Clone, Copy)]
struct MsgEnd {
    pid: usize,
    tid: usize,
    t: i128,
    bytes: u64,
    kind: u16,
    steal: bool,
}

/// A message's key: (source locale, destination locale, kind, trace
/// sequence number).
type MsgKey = (usize, usize, u16, u64);

/// Pairs each send with the receive of the same key nearest to it in
/// time (taking it), for the flows. Not "first after it": each part
/// converts its own time-stamp counter to CLOCK_MONOTONIC, and two
/// calibrations may disagree by more than a message's flight over shared
/// memory (a fraction of a microsecond), so that a receive reads as a
/// little earlier than its send; a key recurs only every 65,536 messages
/// between two locales, far apart in time.
fn pair_messages<'a>(
    sends: &'a HashMap<MsgKey, Vec<MsgEnd>>,
    recvs: &mut HashMap<MsgKey, Vec<MsgEnd>>,
) -> Vec<(&'a MsgKey, &'a MsgEnd, MsgEnd)> {
    let mut pairs = Vec::new();
    for (key, ss) in sends {
        let Some(rs) = recvs.get_mut(key) else {
            continue;
        };
        for s in ss {
            let nearest = rs
                .iter()
                .enumerate()
                .min_by_key(|(_, r)| r.t.abs_diff(s.t))
                .map(|(i, _)| i);
            if let Some(i) = nearest {
                pairs.push((key, s, rs.swap_remove(i)));
            }
        }
    }
    pairs
}

/// Merges this user's newest parts of the trace `path` ([`find_parts`])
/// into the Chrome JSON file `path` (replacing it), and returns what it
/// found. Parts stay in place.
pub fn merge(path: &Path) -> Result<Summary, String> {
    let found = find_parts(path);
    let dir = found.dirs.first().ok_or_else(|| no_parts(path, &found))?;
    merge_dir(dir, Some(path))
}

/// The error when the trace `path` has no parts of this user.
fn no_parts(path: &Path, found: &Found) -> String {
    let absolute = std::path::absolute(path).unwrap_or_else(|_| path.to_owned());
    let mut e = format!(
        "{}: no parts of it to merge: no directory of this user named {}* in {} holds parts \
         of it",
        path.display(),
        lane::parts_prefix(&absolute),
        lane::parts_base(&absolute).display()
    );
    for i in &found.ignored {
        let _ = write!(e, "; ignored {i}");
    }
    e
}

/// Merges the parts in the parts directory `dir` into the Chrome JSON
/// file `out`, or the trace they were recorded for (replacing it:
/// [`replace_file`]), and returns what it found. Parts stay in place.
pub fn merge_dir(dir: &Path, out: Option<&Path>) -> Result<Summary, String> {
    let (parts, problems) = read_parts(dir);
    let Some(first) = parts.first() else {
        return Err(format!(
            "{}: no part files to merge ({})",
            dir.display(),
            problems.join("; ")
        ));
    };
    let output = out.map_or_else(|| first.trace.clone(), Path::to_owned);
    let (json, mut summary) = to_json(&parts);
    summary.problems.extend(problems);
    summary.parts = dir.to_owned();
    summary.running = parts
        .iter()
        .filter(|p| !p.complete && alive(p.pid))
        .map(|p| (p.locale, p.pid))
        .collect();
    replace_file(&output, json.as_bytes()).map_err(|e| format!("{}: {e}", output.display()))?;
    summary.output = output;
    Ok(summary)
}

/// Whether process `pid` runs (on this machine): it exists and is not a
/// zombie (a dead locale whose parent has not reaped it yet).
pub fn alive(pid: u32) -> bool {
    if pid == 0 {
        return false;
    }
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        // The state follows the command's closing parenthesis.
        Ok(stat) => stat
            .rsplit_once(')')
            .and_then(|(_, rest)| rest.trim_start().chars().next())
            .is_some_and(|state| !matches!(state, 'Z' | 'X' | 'x')),
        Err(e) => e.kind() != std::io::ErrorKind::NotFound,
    }
}

/// What `cantus-trace merge` did ([`merge_job`]); its `Display` is the
/// report.
#[derive(Debug)]
pub struct Merged {
    /// The merge's summary (the parts and the trace written among it).
    pub summary: Summary,
    /// Whether the parts were removed.
    pub removed: bool,
    /// Why they were kept, if they were.
    pub kept: Option<String>,
    /// Other parts directories of the same trace (older jobs), left.
    pub others: Vec<PathBuf>,
    /// Directories named as the trace's parts that were not used, and why.
    pub ignored: Vec<String>,
}

/// Merges what a job left: `input` is a parts directory, or a trace whose
/// newest parts of this user are merged ([`find_parts`]); into `out`, or
/// the trace. Then removes the parts, unless `keep`, or some could not
/// be read, or a locale's process still runs (its job may still record):
/// [`Merged`] says which, and where they are.
pub fn merge_job(input: &Path, out: Option<&Path>, keep: bool) -> Result<Merged, String> {
    let is_dir = std::fs::symlink_metadata(input)
        .is_ok_and(|m| m.is_dir() || (m.file_type().is_symlink() && input.is_dir()));
    let (dir, others, ignored, out) = if is_dir {
        (input.to_owned(), Vec::new(), Vec::new(), out)
    } else {
        let found = find_parts(input);
        let mut dirs = found.dirs.iter();
        let dir = dirs.next().ok_or_else(|| no_parts(input, &found))?.clone();
        (
            dir,
            dirs.cloned().collect(),
            found.ignored,
            Some(out.unwrap_or(input)),
        )
    };
    let summary = merge_dir(&dir, out)?;
    let mut kept = if keep {
        Some("kept as asked".to_string())
    } else if !summary.problems.is_empty() {
        Some("some parts could not be merged (the problems above)".to_string())
    } else {
        summary.running.first().map(|(l, pid)| {
            format!("locale {l}'s process (pid {pid}) still runs, so its job may still record")
        })
    };
    let mut removed = false;
    if kept.is_none() {
        match remove_parts(&dir) {
            Ok(()) => removed = true,
            Err(e) => kept = Some(format!("could not remove them: {e}")),
        }
    }
    Ok(Merged {
        summary,
        removed,
        kept,
        others,
        ignored,
    })
}

impl fmt::Display for Merged {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let s = &self.summary;
        write!(f, "{s}")?;
        writeln!(f, "cantus trace: wrote {}", s.output.display())?;
        match &self.kept {
            None => writeln!(
                f,
                "cantus trace: removed the part files in {}",
                s.parts.display()
            )?,
            Some(why) => writeln!(
                f,
                "cantus trace: the part files stay in {}: {why}",
                s.parts.display()
            )?,
        }
        if !self.others.is_empty() {
            writeln!(
                f,
                "cantus trace: {} older parts directories of this trace remain (merge one with \
                 `cantus-trace merge DIR`): {}",
                self.others.len(),
                self.others
                    .iter()
                    .map(|d| d.display().to_string())
                    .collect::<Vec<_>>()
                    .join(", ")
            )?;
        }
        for i in &self.ignored {
            writeln!(f, "cantus trace: ignored {i}")?;
        }
        Ok(())
    }
}

/// The Chrome JSON of `parts` and their summary.
pub fn to_json(parts: &[Part]) -> (String, Summary) {
    let aligned = |p: &Part, t: u64| t as i128 + p.clock_offset_ns as i128;
    let t0 = parts
        .iter()
        .filter_map(|p| {
            p.lanes
                .iter()
                .filter_map(|l| l.events.first())
                .map(|e| aligned(p, e.t))
                .min()
        })
        .min()
        .unwrap_or(0);
    let mut out = Out {
        json: String::from("{\"traceEvents\":[\n"),
        first: true,
        t0,
        flow_id: 0,
        flows: HashMap::new(),
    };
    let mut summary = Summary::default();
    // Messages: sends and receives by (src, dst, kind, seq), in order.
    let mut sends: HashMap<MsgKey, Vec<MsgEnd>> = HashMap::new();
    let mut recvs: HashMap<MsgKey, Vec<MsgEnd>> = HashMap::new();
    for p in parts {
        let pid = p.locale;
        let mut label = format!("locale {pid}");
        if p.clock_error_ns > 0 {
            let _ = write!(
                label,
                " (clock aligned to locale 0's within {:.1} us)",
                p.clock_error_ns as f64 / 1000.0
            );
        }
        if !p.complete {
            label.push_str(" (did not stop cleanly)");
        }
        out.name(pid, None, &label);
        let lane_end = |l: &Lane| {
            let last = l.events.last().map_or(0, |e| aligned(p, e.t));
            if p.complete {
                last.max(aligned(p, p.end_ns))
            } else {
                last
            }
        };
        // Each task's label and spawner, from the end of its first span.
        let mut labels: HashMap<u64, u16> = HashMap::new();
        let mut spawners: HashMap<u64, u64> = HashMap::new();
        // Resumptions per task, for wake flows: (time, lane).
        let mut resumed: HashMap<u64, Vec<(i128, usize)>> = HashMap::new();
        for (tid, l) in p.lanes.iter().enumerate() {
            for e in &l.events {
                // Keyed by the (worker, slot) its waker named.
                if e.kind == kind::TASK_BEGIN && e.small == how::RESUMED {
                    resumed.entry(e.b).or_default().push((aligned(p, e.t), tid));
                }
            }
        }
        let mut uses = Vec::new();
        for (tid, l) in p.lanes.iter().enumerate() {
            let mut name = l.name.clone();
            if l.dropped > 0 {
                let _ = write!(name, " (full: {} events dropped)", l.dropped);
            }
            out.name(pid, Some(tid), &name);
            let end = lane_end(l);
            let mut u = LaneUse {
                name: l.name.clone(),
                dropped: l.dropped,
                span_ns: l
                    .events
                    .first()
                    .map_or(0, |e| (end - aligned(p, e.t)).max(0) as u64),
                ..LaneUse::default()
            };
            // The open task span: (start, id, how, from, label, spawner).
            let mut task: Option<(i128, u64, u16, u64, u16, u64)> = None;
            let mut idle: Option<i128> = None;
            let mut sleep: Option<i128> = None;
            let mut away: Option<i128> = None;
            let mut steal_out: Vec<(usize, u64)> = Vec::new();
            let close_task = |out: &mut Out,
                              u: &mut LaneUse,
                              (s, id, h, from, label, spawner): (i128, u64, u16, u64, u16, u64),
                              t: i128,
                              reason: &str| {
                let name = if h == how::ROOT {
                    "root"
                } else if label != 0 {
                    task_kind_name(label)
                } else {
                    "task"
                };
                out.slice(
                    pid,
                    tid,
                    name,
                    "task",
                    s,
                    t,
                    &format!(
                        "\"task\":{id},\"spawner\":{spawner},\"how\":\"{}\",\"from\":{from},\"end\":\"{reason}\"",
                        how_name(h)
                    ),
                );
                u.busy_ns += (t - s).max(0) as u64;
            };
            for e in &l.events {
                let t = aligned(p, e.t);
                match e.kind {
                    kind::TASK_BEGIN => {
                        if let Some(open) = task.take() {
                            close_task(&mut out, &mut u, open, t, "cut");
                        }
                        task = Some((t, e.a, e.small, e.b, 0, 0));
                        if e.small != how::RESUMED {
                            u.tasks += 1;
                        }
                    }
                    kind::TASK_END => {
                        if let Some(mut open) = task.take() {
                            // The label comes with the end; a task's later
                            // spans (after it blocked) keep it.
                            open.4 = remembered(&mut labels, e.a, e.word as u16);
                            open.5 = remembered(&mut spawners, e.a, e.b);
                            close_task(&mut out, &mut u, open, t, why_name(e.small));
                        }
                    }
                    kind::IDLE_BEGIN => idle = Some(t),
                    kind::IDLE_END => {
                        u.idle_ns += out.period((pid, tid), ("idle", "idle"), &mut idle, t)
                    }
                    kind::SLEEP_BEGIN => sleep = Some(t),
                    kind::SLEEP_END => {
                        u.sleep_ns += out.period((pid, tid), ("asleep", "idle"), &mut sleep, t)
                    }
                    kind::AWAY_BEGIN => away = Some(t),
                    kind::AWAY_END => {
                        out.period((pid, tid), ("blocking call", "away"), &mut away, t);
                    }
                    kind::STEAL => {
                        u.steals += 1;
                        let victim = e.a as usize;
                        out.flow("steal", (pid, victim, t), (pid, tid, t), None, "");
                    }
                    kind::BLOCK => {
                        out.slice(
                            pid,
                            tid,
                            "block",
                            "sync",
                            t,
                            t,
                            &format!("\"variable\":\"{:#x}\",\"kind\":{}", e.a, e.small),
                        );
                    }
                    kind::WAKE => {
                        let target = resumed
                            .get(&e.a)
                            .and_then(|v| v.iter().find(|(rt, _)| *rt >= t).copied());
                        if let Some((rt, rtid)) = target {
                            out.flow("wake", (pid, tid, t), (pid, rtid, rt), None, "");
                        }
                    }
                    kind::POLL => {
                        out.slice(
                            pid,
                            tid,
                            "poll",
                            "driver",
                            t,
                            t,
                            &format!("\"items\":{}", e.word),
                        );
                    }
                    kind::STEAL_OUT => steal_out.push((e.word as usize, e.a)),
                    kind::STEAL_IN => {}
                    kind::MSG_SEND => {
                        let dst = e.word as usize;
                        let steal = match steal_out.iter().position(|&(d, _)| d == dst) {
                            Some(i) => {
                                steal_out.remove(i);
                                true
                            }
                            None => false,
                        };
                        sends
                            .entry((pid, dst, e.small, e.a))
                            .or_default()
                            .push(MsgEnd {
                                pid,
                                tid,
                                t,
                                bytes: e.b,
                                kind: e.small,
                                steal,
                            });
                    }
                    kind::MSG_RECV => {
                        let src = e.word as usize;
                        recvs
                            .entry((src, pid, e.small, e.a))
                            .or_default()
                            .push(MsgEnd {
                                pid,
                                tid,
                                t,
                                bytes: e.b,
                                kind: e.small,
                                steal: false,
                            });
                    }
                    _ => {}
                }
            }
            if let Some(open) = task.take() {
                close_task(&mut out, &mut u, open, end, "cut");
            }
            u.sleep_ns += out.period((pid, tid), ("asleep", "idle"), &mut sleep, end);
            u.idle_ns += out.period((pid, tid), ("idle", "idle"), &mut idle, end);
            if l.worker {
                uses.push(u);
            }
        }
        summary.locales.push((p.locale, p.complete, uses));
    }
    for (key, s, r) in pair_messages(&sends, &mut recvs) {
        let (src, dst) = (key.0, key.1);
        let what = msg_kind_name(s.kind);
        let args = format!("\"bytes\":{},\"kind\":\"{what}\"", s.bytes);
        out.flow(
            "message",
            (s.pid, s.tid, s.t),
            (r.pid, r.tid, r.t),
            Some(&format!("send {what} to locale {dst}")),
            &format!("{args},\"from\":{src}"),
        );
        if s.steal {
            out.flow(
                "steal-across",
                (s.pid, s.tid, s.t),
                (r.pid, r.tid, r.t),
                Some(&format!("work stolen by locale {dst}")),
                &args,
            );
        }
    }
    summary.flows = out.flows.clone();
    let mut json = out.json;
    json.push_str("\n],\"displayTimeUnit\":\"ns\",\"otherData\":{\"producer\":\"cantus\",");
    let _ = writeln!(
        json,
        "\"locales\":{},\"full_policy\":\"stop: a full lane records no more and counts what it dropped\",\"clocks\":\"CLOCK_MONOTONIC of each machine, plus each part's offset to locale 0's\"}}}}",
        parts.first().map_or(0, |p| p.locales)
    );
    (json, summary)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The percentages of each row of a utilisation table.
    fn rows(table: &str) -> Vec<Vec<f64>> {
        table
            .lines()
            .map(|l| {
                l.split_whitespace()
                    .filter_map(|w| w.strip_suffix('%')?.parse().ok())
                    .collect::<Vec<f64>>()
            })
            .filter(|r| !r.is_empty())
            .collect()
    }

    fn end(pid: usize, t: i128) -> MsgEnd {
        MsgEnd {
            pid,
            tid: 0,
            t,
            bytes: 8,
            kind: 0,
            steal: false,
        }
    }

    #[test]
    fn a_receive_stamped_before_its_send_still_pairs_with_it() {
        // Two parts' clocks disagree by 300 ns: the message flew in 200.
        // Two messages of the same key (its sequence number wrapped) pair
        // each with its own receive.
        let key = (0, 1, 0, 7);
        let sends = HashMap::from([(key, vec![end(0, 1_000), end(0, 9_000_000)])]);
        let mut recvs = HashMap::from([(key, vec![end(1, 9_000_150), end(1, 900)])]);
        let mut pairs: Vec<(i128, i128)> = pair_messages(&sends, &mut recvs)
            .into_iter()
            .map(|(_, s, r)| (s.t, r.t))
            .collect();
        pairs.sort();
        assert_eq!(pairs, [(1_000, 900), (9_000_000, 9_000_150)]);
        assert!(recvs[&key].is_empty());
    }

    #[test]
    fn a_utilisation_row_adds_up_to_the_lane_s_time() {
        let lane = LaneUse {
            name: "worker 0".into(),
            busy_ns: 60,
            idle_ns: 35,
            sleep_ns: 30,
            span_ns: 100,
            ..LaneUse::default()
        };
        let s = Summary {
            locales: vec![(0, true, vec![lane])],
            ..Summary::default()
        }
        .to_string();
        // busy 60, idle awake 5, asleep 30, other 5.
        assert_eq!(rows(&s), [[60.0, 5.0, 30.0, 5.0]], "{s}");
        assert!(s.contains("a row adds up to 100%"), "{s}");
    }
}
