//! The Chrome trace-event JSON of the parts: names of the event kinds,
//! messages paired across locales, and the writer.

use super::super::{how, kind, task_kind, why};
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
/// between two locales, far apart in time.
pub(super) fn pair_messages<'a>(
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
