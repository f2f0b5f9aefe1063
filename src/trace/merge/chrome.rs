//! The Chrome trace-event JSON of the parts: names of the event kinds,
//! messages paired across locales, and the writer ([`to_json`]: each
//! part's locale and lanes, a [`LaneWriter`] per lane, then the message
//! flows, then the trailer).

use super::super::{Event, how, kind, task_kind, why};
use std::collections::HashMap;
use std::fmt::Write as _;

use super::read::{Lane, Part};
use super::summary::{LaneUse, Summary};

pub(super) fn task_kind_name(k: u16) -> &'static str {
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

pub(super) fn how_name(h: u16) -> &'static str {
    match h {
        how::OWN => "own",
        how::STOLEN => "stolen",
        how::INJECTED => "injected",
        how::ROOT => "root",
        how::RESUMED => "resumed",
        _ => "?",
    }
}

pub(super) fn why_name(w: u16) -> &'static str {
    match w {
        why::DONE => "done",
        why::BLOCKED => "blocked",
        why::YIELDED => "yielded",
        why::SLEPT => "slept",
        why::AWAY => "away",
        _ => "?",
    }
}

pub(super) fn msg_kind_name(k: u16) -> &'static str {
    match k {
        1 => "request",
        2 => "reply",
        4 => "chant message",
        _ => "message",
    }
}

/// Writes a JSON string (escaped).
pub(super) fn json_str(out: &mut String, s: &str) {
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
pub(super) struct Out {
    json: String,
    first: bool,
    t0: i128,
    flow_id: u64,
    flows: HashMap<String, u64>,
}

impl Out {
    /// The start of the JSON, its times counted from `t0`.
    fn new(t0: i128) -> Out {
        Out {
            json: String::from("{\"traceEvents\":[\n"),
            first: true,
            t0,
            flow_id: 0,
            flows: HashMap::new(),
        }
    }

    /// The whole JSON: the events written and the trailer (`locales` in
    /// the job).
    fn finish(self, locales: usize) -> String {
        let mut json = self.json;
        json.push_str("\n],\"displayTimeUnit\":\"ns\",\"otherData\":{\"producer\":\"cantus\",");
        let _ = writeln!(
            json,
            "\"locales\":{locales},\"full_policy\":\"stop: a full lane records no more and counts what it dropped\",\"clocks\":\"CLOCK_MONOTONIC of each machine, plus each part's offset to locale 0's\"}}}}"
        );
        json
    }

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

    /// A slice `name` (category `cat`) on lane (pid, tid) from `start` to
    /// `end`, with `args` (JSON members, none if empty).
    fn slice(
        &mut self,
        (pid, tid): (usize, usize),
        (name, cat): (&str, &str),
        (start, end): (i128, i128),
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
        self.slice((pid, tid), (name, cat), (start, end), "");
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
            self.slice((pid, tid), (name, cat), (from, from), args);
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
pub(super) fn remembered<T: Copy + Default + PartialEq>(
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
pub(super) struct MsgEnd {
    pub(super) pid: usize,
    pub(super) tid: usize,
    pub(super) t: i128,
    pub(super) bytes: u64,
    pub(super) kind: u16,
    pub(super) steal: bool,
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
/// between two locales, far apart in time. The pairs come in key order.
pub(super) fn pair_messages<'a>(
    sends: &'a HashMap<MsgKey, Vec<MsgEnd>>,
    recvs: &mut HashMap<MsgKey, Vec<MsgEnd>>,
) -> Vec<(&'a MsgKey, &'a MsgEnd, MsgEnd)> {
    let mut pairs = Vec::new();
    // In key order, so that the same parts give the same file (a map's
    // own order differs from run to run).
    let mut keys: Vec<&MsgKey> = sends.keys().collect();
    keys.sort_unstable();
    for key in keys {
        let ss = &sends[key];
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

/// The Chrome JSON of `parts` and their summary.
pub fn to_json(parts: &[Part]) -> (String, Summary) {
    let mut out = Out::new(first_event_time(parts));
    let mut summary = Summary::default();
    let mut messages = Messages::default();
    for p in parts {
        let uses = write_part(&mut out, p, &mut messages);
        summary.locales.push((p.locale, p.complete, uses));
    }
    write_message_flows(&mut out, messages);
    summary.flows = out.flows.clone();
    let json = out.finish(parts.first().map_or(0, |p| p.locales));
    (json, summary)
}

/// The part's time `t` on locale 0's clock.
fn aligned(p: &Part, t: u64) -> i128 {
    t as i128 + p.clock_offset_ns as i128
}

/// The earliest event of all parts (the trace's time 0), 0 if none.
fn first_event_time(parts: &[Part]) -> i128 {
    parts
        .iter()
        .filter_map(|p| {
            p.lanes
                .iter()
                .filter_map(|l| l.events.first())
                .map(|e| aligned(p, e.t))
                .min()
        })
        .min()
        .unwrap_or(0)
}

/// Where the lane `l` of `p` ends: its last event, or the part's end if
/// later and the part is complete.
fn lane_end(p: &Part, l: &Lane) -> i128 {
    let last = l.events.last().map_or(0, |e| aligned(p, e.t));
    if p.complete {
        last.max(aligned(p, p.end_ns))
    } else {
        last
    }
}

/// The locale's name in the trace: its number, its clock's error and
/// whether it stopped cleanly.
fn locale_label(p: &Part) -> String {
    let mut label = format!("locale {}", p.locale);
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
    label
}

/// Writes one part: its locale's name, then each lane's name and events;
/// returns the use of its workers' lanes.
fn write_part(out: &mut Out, p: &Part, messages: &mut Messages) -> Vec<LaneUse> {
    out.name(p.locale, None, &locale_label(p));
    let mut tasks = PartTasks::new(p);
    let mut uses = Vec::new();
    for (tid, l) in p.lanes.iter().enumerate() {
        let lane_use = write_lane(out, p, (tid, l), &mut tasks, messages);
        if l.worker {
            uses.push(lane_use);
        }
    }
    uses
}

/// Writes the lane `l` (number `tid`) of `p`: its name, its events'
/// slices and flows, and the periods still open at its end; returns its
/// use.
fn write_lane(
    out: &mut Out,
    p: &Part,
    (tid, l): (usize, &Lane),
    tasks: &mut PartTasks,
    messages: &mut Messages,
) -> LaneUse {
    let mut name = l.name.clone();
    if l.dropped > 0 {
        let _ = write!(name, " (full: {} events dropped)", l.dropped);
    }
    out.name(p.locale, Some(tid), &name);
    let end = lane_end(p, l);
    let mut lane = LaneWriter::new(
        (p.locale, tid),
        LaneUse {
            name: l.name.clone(),
            dropped: l.dropped,
            span_ns: l
                .events
                .first()
                .map_or(0, |e| (end - aligned(p, e.t)).max(0) as u64),
            ..LaneUse::default()
        },
    );
    for e in &l.events {
        lane.event(out, e, aligned(p, e.t), tasks, messages);
    }
    lane.finish(out, end)
}

/// Writes the flows of the messages sent and received (a `message` flow
/// each, and a `steal-across` flow for one that carried stolen work).
fn write_message_flows(out: &mut Out, mut messages: Messages) {
    for (key, s, r) in pair_messages(&messages.sends, &mut messages.recvs) {
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
}

/// Messages' sends and receives by (src, dst, kind, seq), in order, to
/// pair once every part is read.
#[derive(Default)]
struct Messages {
    sends: HashMap<MsgKey, Vec<MsgEnd>>,
    recvs: HashMap<MsgKey, Vec<MsgEnd>>,
}

/// What the lanes of one part share about its tasks.
struct PartTasks {
    /// Each task's label, from the end of its first span.
    labels: HashMap<u64, u16>,
    /// Each task's spawner, from the end of its first span.
    spawners: HashMap<u64, u64>,
    /// Resumptions per task, for wake flows: (time, lane).
    resumed: HashMap<u64, Vec<(i128, usize)>>,
}

impl PartTasks {
    /// No labels or spawners yet; the resumptions of every lane of `p`.
    fn new(p: &Part) -> PartTasks {
        let mut resumed: HashMap<u64, Vec<(i128, usize)>> = HashMap::new();
        for (tid, l) in p.lanes.iter().enumerate() {
            for e in &l.events {
                // Keyed by the (worker, slot) its waker named.
                if e.kind == kind::TASK_BEGIN && e.small == how::RESUMED {
                    resumed.entry(e.b).or_default().push((aligned(p, e.t), tid));
                }
            }
        }
        PartTasks {
            labels: HashMap::new(),
            spawners: HashMap::new(),
            resumed,
        }
    }
}

/// A task span begun and not yet ended.
#[derive(Clone, Copy)]
struct OpenTask {
    start: i128,
    id: u64,
    how: u16,
    /// The worker it was stolen from, or the task that woke it.
    from: u64,
    /// What it is ([`task_kind`]), 0 until its end says.
    label: u16,
    spawner: u64,
}

/// One lane being written: its use so far and what is open on it.
struct LaneWriter {
    /// (locale, lane).
    at: (usize, usize),
    lane_use: LaneUse,
    task: Option<OpenTask>,
    idle: Option<i128>,
    sleep: Option<i128>,
    away: Option<i128>,
    /// Stolen work sent out, (thief locale, computation), each carried by
    /// the next message to that locale.
    steal_out: Vec<(usize, u64)>,
}

impl LaneWriter {
    /// Nothing open yet on lane `at`, whose use starts as `lane_use`.
    fn new(at: (usize, usize), lane_use: LaneUse) -> LaneWriter {
        LaneWriter {
            at,
            lane_use,
            task: None,
            idle: None,
            sleep: None,
            away: None,
            steal_out: Vec::new(),
        }
    }

    /// Writes (or notes, for messages and open periods) the event `e` at
    /// aligned time `t`.
    fn event(
        &mut self,
        out: &mut Out,
        e: &Event,
        t: i128,
        tasks: &mut PartTasks,
        messages: &mut Messages,
    ) {
        let (pid, tid) = self.at;
        match e.kind {
            kind::TASK_BEGIN => {
                if let Some(open) = self.task.take() {
                    self.close_task(out, open, t, "cut");
                }
                self.task = Some(OpenTask {
                    start: t,
                    id: e.a,
                    how: e.small,
                    from: e.b,
                    label: 0,
                    spawner: 0,
                });
                if e.small != how::RESUMED {
                    self.lane_use.tasks += 1;
                }
            }
            kind::TASK_END => {
                if let Some(mut open) = self.task.take() {
                    // The label comes with the end; a task's later
                    // spans (after it blocked) keep it.
                    open.label = remembered(&mut tasks.labels, e.a, e.word as u16);
                    open.spawner = remembered(&mut tasks.spawners, e.a, e.b);
                    self.close_task(out, open, t, why_name(e.small));
                }
            }
            kind::IDLE_BEGIN => self.idle = Some(t),
            kind::IDLE_END => {
                self.lane_use.idle_ns += out.period(self.at, ("idle", "idle"), &mut self.idle, t)
            }
            kind::SLEEP_BEGIN => self.sleep = Some(t),
            kind::SLEEP_END => {
                self.lane_use.sleep_ns +=
                    out.period(self.at, ("asleep", "idle"), &mut self.sleep, t)
            }
            kind::AWAY_BEGIN => self.away = Some(t),
            kind::AWAY_END => {
                out.period(self.at, ("blocking call", "away"), &mut self.away, t);
            }
            kind::STEAL => {
                self.lane_use.steals += 1;
                let victim = e.a as usize;
                out.flow("steal", (pid, victim, t), (pid, tid, t), None, "");
            }
            kind::BLOCK => {
                let args = format!("\"variable\":\"{:#x}\",\"kind\":{}", e.a, e.small);
                out.slice(self.at, ("block", "sync"), (t, t), &args);
            }
            kind::WAKE => {
                let target = tasks
                    .resumed
                    .get(&e.a)
                    .and_then(|v| v.iter().find(|(rt, _)| *rt >= t).copied());
                if let Some((rt, rtid)) = target {
                    out.flow("wake", (pid, tid, t), (pid, rtid, rt), None, "");
                }
            }
            kind::POLL => {
                let args = format!("\"items\":{}", e.word);
                out.slice(self.at, ("poll", "driver"), (t, t), &args);
            }
            kind::STEAL_OUT => self.steal_out.push((e.word as usize, e.a)),
            kind::STEAL_IN => {}
            kind::MSG_SEND => self.note_send(e, t, messages),
            kind::MSG_RECV => self.note_receive(e, t, messages),
            _ => {}
        }
    }

    /// Notes the message sent by event `e` at `t` (to locale `word`),
    /// and whether it carries stolen work.
    fn note_send(&mut self, e: &Event, t: i128, messages: &mut Messages) {
        let dst = e.word as usize;
        let steal = self.take_steal_out(dst);
        let sent = self.message_end(e, t, steal);
        messages
            .sends
            .entry((self.at.0, dst, e.small, e.a))
            .or_default()
            .push(sent);
    }

    /// Notes the message received by event `e` at `t` (from locale
    /// `word`).
    fn note_receive(&self, e: &Event, t: i128, messages: &mut Messages) {
        let src = e.word as usize;
        let received = self.message_end(e, t, false);
        messages
            .recvs
            .entry((src, self.at.0, e.small, e.a))
            .or_default()
            .push(received);
    }

    /// Whether stolen work was sent out to locale `dst` (forgetting it:
    /// the message being sent there carries it).
    fn take_steal_out(&mut self, dst: usize) -> bool {
        match self.steal_out.iter().position(|&(d, _)| d == dst) {
            Some(i) => {
                self.steal_out.remove(i);
                true
            }
            None => false,
        }
    }

    /// This lane's end of the message of event `e`, at `t`.
    fn message_end(&self, e: &Event, t: i128, steal: bool) -> MsgEnd {
        MsgEnd {
            pid: self.at.0,
            tid: self.at.1,
            t,
            bytes: e.b,
            kind: e.small,
            steal,
        }
    }

    /// Writes the slice of the task span `task` ended at `end` for
    /// `reason`, and counts it busy.
    fn close_task(&mut self, out: &mut Out, task: OpenTask, end: i128, reason: &str) {
        let name = if task.how == how::ROOT {
            "root"
        } else if task.label != 0 {
            task_kind_name(task.label)
        } else {
            "task"
        };
        let OpenTask {
            start,
            id,
            from,
            spawner,
            ..
        } = task;
        let args = format!(
            "\"task\":{id},\"spawner\":{spawner},\"how\":\"{}\",\"from\":{from},\"end\":\"{reason}\"",
            how_name(task.how)
        );
        out.slice(self.at, (name, "task"), (start, end), &args);
        self.lane_use.busy_ns += (end - start).max(0) as u64;
    }

    /// Ends at the lane's `end` the task span and the periods asleep and
    /// idle still open, and returns the lane's use.
    fn finish(mut self, out: &mut Out, end: i128) -> LaneUse {
        if let Some(open) = self.task.take() {
            self.close_task(out, open, end, "cut");
        }
        self.lane_use.sleep_ns += out.period(self.at, ("asleep", "idle"), &mut self.sleep, end);
        self.lane_use.idle_ns += out.period(self.at, ("idle", "idle"), &mut self.idle, end);
        self.lane_use
    }
}
