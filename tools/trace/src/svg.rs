//! Drawing a trace as an SVG timeline, and its utilisation summary.

use cantus::trace::merge::{LaneUse, Summary};
use serde_json::Value;
use std::collections::{BTreeMap, HashMap};
use std::fmt::Write as _;

/// A thread's lane: (locale, lane index).
type LaneId = (u64, u64);

/// A span on a lane, in microseconds.
struct Span {
    start: f64,
    end: f64,
    name: String,
    cat: String,
    /// A task's span that resumed it (after it blocked, yielded or
    /// slept), not a task's start.
    resumed: bool,
}

/// One end of a flow arrow.
#[derive(Clone, Copy)]
struct End {
    lane: LaneId,
    t: f64,
}

/// What the SVG and the summary read from the events.
struct Model {
    lanes: BTreeMap<LaneId, String>,
    locales: BTreeMap<u64, String>,
    spans: HashMap<LaneId, Vec<Span>>,
    /// (category, from, to).
    flows: Vec<(String, End, End)>,
    t0: f64,
    t1: f64,
}

fn lane_of(e: &Value) -> Option<LaneId> {
    Some((e["pid"].as_u64()?, e["tid"].as_u64()?))
}

fn model(events: &[Value]) -> Model {
    let mut m = Model {
        lanes: BTreeMap::new(),
        locales: BTreeMap::new(),
        spans: HashMap::new(),
        flows: Vec::new(),
        t0: f64::INFINITY,
        t1: f64::NEG_INFINITY,
    };
    let mut starts: HashMap<(String, u64), End> = HashMap::new();
    for e in events {
        let ph = e["ph"].as_str().unwrap_or("");
        match ph {
            "M" => {
                let name = e["args"]["name"].as_str().unwrap_or("").to_string();
                match e["name"].as_str() {
                    Some("thread_name") => {
                        if let Some(l) = lane_of(e) {
                            m.lanes.insert(l, name);
                        }
                    }
                    Some("process_name") => {
                        if let Some(p) = e["pid"].as_u64() {
                            m.locales.insert(p, name);
                        }
                    }
                    _ => {}
                }
            }
            "X" => {
                let (Some(l), Some(ts)) = (lane_of(e), e["ts"].as_f64()) else {
                    continue;
                };
                let dur = e["dur"].as_f64().unwrap_or(0.0).max(0.0);
                m.t0 = m.t0.min(ts);
                m.t1 = m.t1.max(ts + dur);
                m.lanes.entry(l).or_insert_with(|| format!("lane {}", l.1));
                m.spans.entry(l).or_default().push(Span {
                    start: ts,
                    end: ts + dur,
                    name: e["name"].as_str().unwrap_or("").to_string(),
                    cat: e["cat"].as_str().unwrap_or("").to_string(),
                    resumed: e["args"]["how"] == "resumed",
                });
            }
            "s" | "f" => {
                let (Some(l), Some(ts), Some(id)) =
                    (lane_of(e), e["ts"].as_f64(), e["id"].as_u64())
                else {
                    continue;
                };
                let cat = e["cat"].as_str().unwrap_or("").to_string();
                let end = End { lane: l, t: ts };
                if ph == "s" {
                    starts.insert((cat, id), end);
                } else if let Some(from) = starts.remove(&(cat.clone(), id)) {
                    m.flows.push((cat, from, end));
                }
            }
            _ => {}
        }
    }
    if !m.t0.is_finite() {
        (m.t0, m.t1) = (0.0, 1.0);
    }
    m
}

/// The fill of a span.
fn colour(s: &Span) -> &'static str {
    match (s.cat.as_str(), s.name.as_str()) {
        ("idle", "asleep") => "#b8b8b8",
        ("idle", _) => "#e6e6e6",
        ("away", _) => "#ff9da7",
        (_, "begin") => "#4e79a7",
        (_, "join") => "#59a14f",
        (_, "coforall") => "#76b7b2",
        (_, "forall chunk") => "#8cd17d",
        (_, "remote handler") => "#e15759",
        (_, "stolen work") => "#f28e2b",
        (_, "balanced work") => "#edc948",
        (_, "C task") => "#b07aa1",
        (_, "root") => "#9c755f",
        ("task", _) => "#79706e",
        _ => "#d4a6c8",
    }
}

fn flow_style(cat: &str) -> (&'static str, f64) {
    match cat {
        "steal-across" => ("#d62728", 1.6),
        "message" => ("#1f77b4", 0.7),
        "steal" => ("#ff7f0e", 0.7),
        "wake" => ("#2ca02c", 0.5),
        _ => ("#555555", 0.5),
    }
}

fn escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

/// Most arrows drawn; beyond, every k-th (the caption says so).
const MAX_ARROWS: usize = 4000;

/// The drawing's font size (the `<svg>` element's), in pixels.
const FONT: f64 = 11.0;
/// The title's font size.
const TITLE_FONT: f64 = 14.0;

/// About how wide `text` is in sans-serif at `font` pixels: 0.62 em a
/// character, 0.68 em bold (above the average of digits and lower-case
/// letters in common sans-serif faces, so that what is laid out by it
/// fits).
fn text_px(text: &str, font: f64, bold: bool) -> f64 {
    text.chars().count() as f64 * font * if bold { 0.68 } else { 0.62 }
}

/// `text`, cut (ending in "…") to fit in `max_px` pixels.
fn fit(text: &str, max_px: f64, font: f64, bold: bool) -> String {
    if text_px(text, font, bold) <= max_px {
        return text.to_string();
    }
    let keep = (max_px / text_px("x", font, bold)).floor() as usize;
    let mut cut: String = text.chars().take(keep.saturating_sub(1)).collect();
    cut.push('…');
    cut
}

/// The legend's entries: a swatch's colour (a span) or a flow's
/// category (an arrow), and the name.
const LEGEND: [(&str, bool, &str); 16] = [
    ("#4e79a7", false, "begin"),
    ("#59a14f", false, "join"),
    ("#76b7b2", false, "coforall"),
    ("#8cd17d", false, "forall"),
    ("#e15759", false, "remote handler"),
    ("#edc948", false, "balanced work"),
    ("#f28e2b", false, "stolen work"),
    ("#b07aa1", false, "C task"),
    ("#9c755f", false, "root"),
    ("#e6e6e6", false, "idle"),
    ("#b8b8b8", false, "asleep"),
    ("#ff9da7", false, "blocking call"),
    ("message", true, "message"),
    ("steal-across", true, "steal across locales"),
    ("steal", true, "steal"),
    ("wake", true, "wake"),
];

/// Draws the legend in rows from `y` between `x0` and `x1`, wrapping
/// where an entry would cross `x1`; returns the last row's `y`.
fn legend(s: &mut String, x0: f64, x1: f64, mut y: f64) -> f64 {
    let mut lx = x0;
    for (what, arrow, name) in LEGEND {
        let mark = if arrow { 20.0 } else { 13.0 };
        let need = mark + text_px(name, FONT, false);
        if lx > x0 && lx + need > x1 {
            (lx, y) = (x0, y + 16.0);
        }
        let label = fit(name, x1 - lx - mark, FONT, false);
        if arrow {
            let (c, w) = flow_style(what);
            let _ = writeln!(
                s,
                r##"<line x1="{lx:.1}" y1="{:.1}" x2="{:.1}" y2="{:.1}" stroke="{c}" stroke-width="{}" marker-end="url(#a)"/>"##,
                y + 5.0,
                lx + 16.0,
                y + 5.0,
                w.max(1.0),
            );
        } else {
            let _ = writeln!(
                s,
                r##"<rect x="{lx:.1}" y="{y:.1}" width="10" height="10" fill="{what}" stroke="#999" stroke-width="0.5"/>"##
            );
        }
        let _ = writeln!(
            s,
            r##"<text x="{:.1}" y="{:.1}">{}</text>"##,
            lx + mark,
            y + 9.0,
            escape(&label)
        );
        lx += mark + text_px(&label, FONT, false) + 12.0;
    }
    y
}

/// The SVG timeline of a trace, `width` pixels wide (any width: what
/// does not fit is cut or wrapped, never drawn outside the picture).
pub(crate) fn draw(events: &[Value], width: u32) -> String {
    let m = model(events);
    let w = f64::from(width);
    // The lanes' names on the left (narrower in a narrow picture), the
    // plot to the right margin.
    let (left, right, margin, lane_h, gap) = ((w * 0.3).clamp(60.0, 170.0), 20.0, 10.0, 16.0, 14.0);
    let plot = (w - left - right).max(1.0);
    let x = |t: f64| left + ((t - m.t0) / (m.t1 - m.t0).max(1e-9)).clamp(0.0, 1.0) * plot;
    let mut body = String::new();
    let title = format!(
        "cantus trace: {} locale(s), {} lane(s), {:.3} ms",
        m.locales.len().max(1),
        m.lanes.len(),
        (m.t1 - m.t0) / 1000.0
    );
    let _ = writeln!(
        body,
        r##"<text x="{margin}" y="20" font-size="{TITLE_FONT}" font-weight="bold">{}</text>"##,
        escape(&fit(&title, w - 2.0 * margin, TITLE_FONT, true))
    );
    let top = legend(&mut body, margin, w - margin, 30.0) + 28.0;
    // Lane rows, locale by locale.
    let mut row: HashMap<LaneId, f64> = HashMap::new();
    let mut y = top;
    let mut headers = Vec::new();
    let mut last_pid = None;
    for &lane in m.lanes.keys() {
        if last_pid != Some(lane.0) {
            if last_pid.is_some() {
                y += gap;
            }
            headers.push((lane.0, y));
            y += 16.0;
            last_pid = Some(lane.0);
        }
        row.insert(lane, y);
        y += lane_h + 2.0;
    }
    // Locale headers and lane labels.
    for (pid, hy) in &headers {
        let name = m
            .locales
            .get(pid)
            .cloned()
            .unwrap_or_else(|| format!("locale {pid}"));
        let _ = writeln!(
            body,
            r##"<text x="{margin}" y="{:.1}" font-weight="bold">{}</text><line x1="{margin}" y1="{:.1}" x2="{}" y2="{:.1}" stroke="#888" stroke-width="0.5"/>"##,
            hy + 11.0,
            escape(&fit(&name, w - 2.0 * margin, FONT, true)),
            hy + 14.0,
            w - right,
            hy + 14.0
        );
    }
    for (lane, name) in &m.lanes {
        let _ = writeln!(
            body,
            r##"<text x="18" y="{:.1}">{}</text>"##,
            row[lane] + 12.0,
            escape(&fit(name, left - 18.0 - 4.0, FONT, false))
        );
    }
    // Spans: a rectangle each if at least a pixel wide; narrower ones
    // add to their pixel column, drawn in the colour covering it most.
    for (lane, spans) in &m.spans {
        let ly = row[lane];
        let mut columns: HashMap<i64, HashMap<&'static str, f64>> = HashMap::new();
        for sp in spans {
            if sp.end <= sp.start {
                continue; // zero-length marks: the arrows show them
            }
            let (x0, x1) = (x(sp.start), x(sp.end));
            let c = colour(sp);
            let (yy, hh) = if sp.name == "asleep" {
                (ly + lane_h * 0.35, lane_h * 0.3)
            } else {
                (ly, lane_h)
            };
            if x1 - x0 >= 1.0 {
                let _ = writeln!(
                    body,
                    r##"<rect x="{x0:.1}" y="{yy:.1}" width="{:.1}" height="{hh:.1}" fill="{c}"><title>{} ({:.1} us)</title></rect>"##,
                    x1 - x0,
                    escape(&sp.name),
                    sp.end - sp.start
                );
            } else {
                *columns
                    .entry(x0.floor() as i64)
                    .or_default()
                    .entry(c)
                    .or_default() += x1 - x0;
            }
        }
        let mut cols: Vec<_> = columns.into_iter().collect();
        cols.sort_by_key(|(c, _)| *c);
        for (col, cover) in cols {
            let (c, f) = cover
                .into_iter()
                .max_by(|a, b| a.1.total_cmp(&b.1))
                .unwrap();
            if f >= 0.2 {
                let _ = writeln!(
                    body,
                    r##"<rect x="{col}" y="{ly:.1}" width="1" height="{lane_h}" fill="{c}"/>"##
                );
            }
        }
    }
    // Arrows.
    let step = m.flows.len().div_ceil(MAX_ARROWS).max(1);
    for (cat, from, to) in m.flows.iter().step_by(step) {
        let (Some(y0), Some(y1)) = (row.get(&from.lane), row.get(&to.lane)) else {
            continue;
        };
        let (c, w) = flow_style(cat);
        let _ = writeln!(
            body,
            r##"<line x1="{:.1}" y1="{:.1}" x2="{:.1}" y2="{:.1}" stroke="{c}" stroke-width="{w}" stroke-opacity="0.8" marker-end="url(#a)"/>"##,
            x(from.t),
            y0 + lane_h / 2.0,
            x(to.t),
            y1 + lane_h / 2.0
        );
    }
    // Time axis: a tick about every 90 pixels, each label inside the
    // picture.
    let axis_y = y + 12.0;
    let span_ms = (m.t1 - m.t0) / 1000.0;
    let tick = nice_tick(span_ms / (plot / 90.0).floor().max(1.0));
    let _ = writeln!(
        body,
        r##"<line x1="{left}" y1="{axis_y:.1}" x2="{}" y2="{axis_y:.1}" stroke="#444"/>"##,
        w - right
    );
    let mut t = 0.0;
    while t <= span_ms + 1e-9 {
        let tx = left + t / span_ms.max(1e-9) * plot;
        let label = format!("{} ms", trim(t, tick));
        let half = text_px(&label, FONT, false) / 2.0;
        let lx = tx.clamp(half + 1.0, (w - half - 1.0).max(half + 1.0));
        let _ = writeln!(
            body,
            r##"<line x1="{tx:.1}" y1="{axis_y:.1}" x2="{tx:.1}" y2="{:.1}" stroke="#444"/><text x="{lx:.1}" y="{:.1}" text-anchor="middle">{label}</text>"##,
            axis_y + 4.0,
            axis_y + 16.0,
        );
        t += tick;
    }
    let caption = if step > 1 {
        format!("{} arrows; 1 in {step} drawn", m.flows.len())
    } else {
        format!("{} arrows", m.flows.len())
    };
    let caption_y = axis_y + 32.0;
    let _ = writeln!(
        body,
        r##"<text x="{margin}" y="{caption_y:.1}">{}</text>"##,
        escape(&fit(&caption, w - 2.0 * margin, FONT, false))
    );
    // The picture ends below the caption's descenders.
    let height = (caption_y + 8.0).ceil();
    let mut s = String::new();
    let _ = writeln!(
        s,
        r##"<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" viewBox="0 0 {width} {height}" font-family="sans-serif" font-size="{FONT}">"##
    );
    s.push_str(
        r##"<defs><marker id="a" viewBox="0 0 6 6" refX="6" refY="3" markerWidth="5" markerHeight="5" orient="auto"><path d="M0,0 L6,3 L0,6 z" fill="context-stroke"/></marker></defs>"##,
    );
    s.push_str("\n<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n");
    s.push_str(&body);
    s.push_str("</svg>\n");
    s
}

fn nice_tick(raw: f64) -> f64 {
    if raw <= 0.0 {
        return 1.0;
    }
    let p = 10f64.powf(raw.log10().floor());
    for m in [1.0, 2.0, 5.0, 10.0] {
        if raw <= m * p {
            return m * p;
        }
    }
    10.0 * p
}

/// `v` with as many decimals as a tick of `tick` needs, trailing zeros
/// cut.
fn trim(v: f64, tick: f64) -> String {
    let decimals = (-tick.log10().floor()).clamp(0.0, 9.0) as usize;
    let s = format!("{v:.decimals$}");
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        s
    }
}

/// Each worker lane's utilisation, as the merge prints it
/// (`cantus::trace::merge::Summary`: busy, idle awake, asleep and other
/// add up to each lane's time), read from a merged trace: its spans,
/// its steal arrows, the lanes' and locales' names (what a full lane
/// dropped, a locale that did not stop cleanly).
pub(crate) fn summary(events: &[Value]) -> Summary {
    let m = model(events);
    let mut steals: HashMap<LaneId, u64> = HashMap::new();
    for (cat, _, to) in &m.flows {
        if cat == "steal" {
            *steals.entry(to.lane).or_default() += 1;
        }
    }
    let mut summary = Summary::default();
    for (lane, name) in &m.lanes {
        if !name.starts_with("worker") {
            continue;
        }
        let (plain, dropped) = match name.split_once(" (full: ") {
            Some((plain, rest)) => (
                plain.to_string(),
                rest.split(' ')
                    .next()
                    .and_then(|n| n.parse().ok())
                    .unwrap_or(0),
            ),
            None => (name.clone(), 0),
        };
        let mut u = LaneUse {
            name: plain,
            dropped,
            steals: steals.get(lane).copied().unwrap_or(0),
            ..LaneUse::default()
        };
        let ns = |us: f64| (us * 1000.0).round().max(0.0) as u64;
        let (mut a, mut b) = (f64::INFINITY, f64::NEG_INFINITY);
        for sp in m.spans.get(lane).map(Vec::as_slice).unwrap_or(&[]) {
            a = a.min(sp.start);
            b = b.max(sp.end);
            let d = ns(sp.end - sp.start);
            match (sp.cat.as_str(), sp.name.as_str()) {
                ("task", _) => {
                    u.busy_ns += d;
                    u.tasks += u64::from(!sp.resumed);
                }
                ("idle", "asleep") => u.sleep_ns += d,
                ("idle", _) => u.idle_ns += d,
                _ => {}
            }
        }
        u.span_ns = if b > a { ns(b - a) } else { 0 };
        let complete = !m
            .locales
            .get(&lane.0)
            .is_some_and(|n| n.contains("did not stop cleanly"));
        match summary.locales.last_mut() {
            Some((l, _, lanes)) if *l == lane.0 as usize => lanes.push(u),
            _ => summary.locales.push((lane.0 as usize, complete, vec![u])),
        }
    }
    summary
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Vec<Value> {
        serde_json::from_str::<Value>(
            r##"{"traceEvents":[
            {"ph":"M","name":"process_name","pid":0,"args":{"name":"locale 0"}},
            {"ph":"M","name":"thread_name","pid":0,"tid":0,"args":{"name":"worker 0"}},
            {"ph":"M","name":"thread_name","pid":0,"tid":1,"args":{"name":"worker 1"}},
            {"ph":"X","name":"begin","cat":"task","pid":0,"tid":0,"ts":0,"dur":75},
            {"ph":"X","name":"idle","cat":"idle","pid":0,"tid":0,"ts":75,"dur":25},
            {"ph":"X","name":"idle","cat":"idle","pid":0,"tid":1,"ts":0,"dur":50},
            {"ph":"X","name":"asleep","cat":"idle","pid":0,"tid":1,"ts":10,"dur":20},
            {"ph":"X","name":"join","cat":"task","pid":0,"tid":1,"ts":50,"dur":50},
            {"ph":"s","cat":"steal","name":"steal","id":1,"pid":0,"tid":0,"ts":50},
            {"ph":"f","bp":"e","cat":"steal","name":"steal","id":1,"pid":0,"tid":1,"ts":50}
            ]}"##,
        )
        .unwrap()["traceEvents"]
            .as_array()
            .unwrap()
            .clone()
    }

    /// The percentages of a summary row (busy, idle, asleep, other).
    fn shares(table: &str, lane: &str) -> Vec<f64> {
        let row = table.lines().find(|l| l.contains(lane)).unwrap();
        row.split_whitespace()
            .filter_map(|w| w.strip_suffix('%')?.parse().ok())
            .collect()
    }

    #[test]
    fn the_summary_s_columns_add_up_to_each_lane_s_time() {
        let s = summary(&sample()).to_string();
        // worker 0: busy 75, idle 25 of 100 us.
        assert_eq!(shares(&s, "worker 0"), [75.0, 25.0, 0.0, 0.0], "{s}");
        // worker 1: idle 50, of which asleep 20; busy 50.
        assert_eq!(shares(&s, "worker 1"), [50.0, 30.0, 20.0, 0.0], "{s}");
        assert!(
            s.contains("a row adds up to 100%") && s.contains("asleep = asleep"),
            "{s}"
        );
        let row = s.lines().find(|l| l.contains("worker 1")).unwrap();
        let tasks: Vec<&str> = row.split_whitespace().collect();
        assert_eq!(
            &tasks[tasks.len() - 3..],
            ["1", "1", "0"],
            "tasks, steals, dropped: {s}"
        );
    }

    /// A trace with what stretches a drawing: two locales (one with a long
    /// name), lanes with long names, spans of every kind to the trace's
    /// ends, marks and sub-pixel spans, and more arrows than are drawn.
    fn crowded() -> Vec<Value> {
        let mut ev = vec![
            serde_json::json!({"ph":"M","name":"process_name","pid":0,"args":{"name":"locale 0"}}),
            serde_json::json!({"ph":"M","name":"process_name","pid":1,"args":{"name":
                "locale 1 (clock aligned to locale 0's within 12.5 us) (did not stop cleanly)"}}),
        ];
        let names = [
            "worker 0",
            "worker 1 (full: 1234567 events dropped)",
            "cantus-blocking-12",
            "an outside thread with a long name of its own",
        ];
        let kinds = [
            ("begin", "task"),
            ("join", "task"),
            ("stolen work", "task"),
            ("remote handler", "task"),
            ("idle", "idle"),
            ("asleep", "idle"),
            ("blocking call", "away"),
        ];
        for pid in 0..2u64 {
            for (tid, name) in names.iter().enumerate() {
                ev.push(
                    serde_json::json!({"ph":"M","name":"thread_name","pid":pid,"tid":tid,
                    "args":{"name":name}}),
                );
                for i in 0..400u64 {
                    let (name, cat) = kinds[(i as usize + tid) % kinds.len()];
                    let ts = i as f64 * 25.0;
                    let dur = if i % 3 == 0 { 0.01 } else { 20.0 };
                    ev.push(serde_json::json!({"ph":"X","name":name,"cat":cat,"pid":pid,
                        "tid":tid,"ts":ts,"dur":dur}));
                    ev.push(
                        serde_json::json!({"ph":"X","name":"poll","cat":"driver","pid":pid,
                        "tid":tid,"ts":ts,"dur":0}),
                    );
                }
            }
        }
        for id in 0..5000u64 {
            let t = (id % 1000) as f64 * 10.0;
            let cat = ["message", "steal-across", "steal", "wake"][id as usize % 4];
            ev.push(
                serde_json::json!({"ph":"s","cat":cat,"name":cat,"id":id,"pid":id % 2,
                "tid":id % 4,"ts":t}),
            );
            ev.push(
                serde_json::json!({"ph":"f","bp":"e","cat":cat,"name":cat,"id":id,
                "pid":(id + 1) % 2,"tid":(id + 1) % 4,"ts":t + 5.0}),
            );
        }
        ev
    }

    /// An element's attribute as a number.
    fn num(attrs: &HashMap<String, String>, k: &str, default: f64) -> f64 {
        attrs
            .get(k)
            .map_or(default, |v| v.parse().unwrap_or_else(|_| panic!("{k}={v}")))
    }

    /// An element: its tag, its attributes, its text.
    type Element = (String, HashMap<String, String>, String);

    /// Every element of `svg` drawn on the canvas (outside `<defs>`), and
    /// the canvas's width and height.
    fn elements(svg: &str) -> ((f64, f64), Vec<Element>) {
        let mut out = Vec::new();
        let mut canvas = None;
        let mut defs = 0;
        let mut rest = svg;
        while let Some(i) = rest.find('<') {
            rest = &rest[i + 1..];
            let end = rest.find('>').expect("a tag ends");
            let tag = &rest[..end];
            if let Some(closing) = tag.strip_prefix('/') {
                defs -= i32::from(closing == "defs");
                continue;
            }
            let name: String = tag
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric())
                .collect();
            let mut attrs = HashMap::new();
            let mut a = &tag[name.len()..];
            while let Some(eq) = a.find("=\"") {
                let key = a[..eq].trim().to_string();
                let v = &a[eq + 2..];
                let close = v.find('"').unwrap();
                attrs.insert(key, v[..close].to_string());
                a = &v[close + 1..];
            }
            let text = if name == "text" {
                let close = rest.find("</text>").unwrap();
                rest[end + 1..close]
                    .replace("&lt;", "<")
                    .replace("&gt;", ">")
                    .replace("&amp;", "&")
            } else {
                String::new()
            };
            match name.as_str() {
                "svg" => canvas = Some((num(&attrs, "width", 0.0), num(&attrs, "height", 0.0))),
                "defs" => defs += i32::from(!tag.ends_with('/')),
                // A tooltip, not drawn.
                "title" => {}
                _ if defs > 0 => {}
                _ => out.push((name, attrs, text)),
            }
        }
        (canvas.expect("an <svg> element"), out)
    }

    /// The box an element covers: (x0, y0, x1, y1). Text's width is
    /// estimated at 0.6 em a character (0.66 em bold), its height from
    /// 0.8 em above the baseline to 0.25 em below.
    fn extent((w, h): (f64, f64), (name, a, text): &Element) -> Vec<(f64, f64)> {
        let size = |k: &str, whole: f64| match a.get(k).map(String::as_str) {
            Some("100%") => whole,
            _ => num(a, k, 0.0),
        };
        let pairs = |v: &str| -> Vec<(f64, f64)> {
            let n: Vec<f64> = v
                .split(|c: char| !(c.is_ascii_digit() || c == '.' || c == '-'))
                .filter(|t| !t.is_empty())
                .map(|t| t.parse().unwrap())
                .collect();
            n.chunks(2).map(|p| (p[0], p[1])).collect()
        };
        match name.as_str() {
            "rect" => {
                let (x, y) = (num(a, "x", 0.0), num(a, "y", 0.0));
                vec![(x, y), (x + size("width", w), y + size("height", h))]
            }
            "line" => vec![
                (num(a, "x1", 0.0), num(a, "y1", 0.0)),
                (num(a, "x2", 0.0), num(a, "y2", 0.0)),
            ],
            "text" => {
                let font = num(a, "font-size", 11.0);
                let em = if a.get("font-weight").is_some_and(|v| v == "bold") {
                    0.66
                } else {
                    0.6
                };
                let tw = text.chars().count() as f64 * font * em;
                let x = num(a, "x", 0.0);
                let x0 = match a.get("text-anchor").map(String::as_str) {
                    Some("middle") => x - tw / 2.0,
                    Some("end") => x - tw,
                    _ => x,
                };
                let y = num(a, "y", 0.0);
                vec![(x0, y - 0.8 * font), (x0 + tw, y + 0.25 * font)]
            }
            "path" => pairs(&a["d"]),
            "polyline" | "polygon" => pairs(&a["points"]),
            other => panic!("an element the check does not know: {other}"),
        }
    }

    #[test]
    fn every_element_lies_inside_the_canvas_at_every_width() {
        for events in [crowded(), sample(), Vec::new()] {
            for width in [200, 320, 640, 1200, 1600, 4000] {
                let svg = draw(&events, width);
                let ((w, h), els) = elements(&svg);
                assert_eq!(w, width as f64);
                assert!(els.len() > 3, "{svg}");
                for el in &els {
                    for (x, y) in extent((w, h), el) {
                        assert!(
                            (-0.5..=w + 0.5).contains(&x) && (-0.5..=h + 0.5).contains(&y),
                            "width {width}: ({x:.1}, {y:.1}) of <{} {:?}>{} lies outside \
                             {w}x{h}",
                            el.0,
                            el.1,
                            el.2
                        );
                    }
                }
            }
        }
    }

    #[test]
    fn the_picture_has_a_lane_per_worker_spans_and_an_arrow() {
        let svg = draw(&sample(), 800);
        assert!(svg.starts_with("<svg") && svg.trim_end().ends_with("</svg>"));
        assert!(svg.contains(">worker 0<") && svg.contains(">worker 1<"));
        assert!(svg.contains("fill=\"#4e79a7\""), "the begin task is drawn");
        assert!(svg.contains("fill=\"#59a14f\""), "the join task is drawn");
        assert_eq!(
            svg.matches("marker-end").count(),
            4 + 1,
            "legend arrows + one steal"
        );
    }
}
