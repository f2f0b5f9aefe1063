//! Drawing a trace as an SVG timeline, and its utilisation summary.

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

/// The SVG timeline of a trace, `width` pixels wide.
pub(crate) fn draw(events: &[Value], width: u32) -> String {
    let m = model(events);
    let (left, right, top, lane_h, gap) = (170.0, 20.0, 58.0, 16.0, 14.0);
    let plot = width as f64 - left - right;
    let x = |t: f64| left + (t - m.t0) / (m.t1 - m.t0).max(1e-9) * plot;
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
    let height = y + 40.0;
    let mut s = String::new();
    let _ = writeln!(
        s,
        r##"<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height:.0}" font-family="sans-serif" font-size="11">"##
    );
    s.push_str(
        r##"<defs><marker id="a" viewBox="0 0 6 6" refX="6" refY="3" markerWidth="5" markerHeight="5" orient="auto"><path d="M0,0 L6,3 L0,6 z" fill="context-stroke"/></marker></defs>"##,
    );
    s.push_str("\n<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n");
    let drawn_arrows = m.flows.len().min(MAX_ARROWS);
    let _ = writeln!(
        s,
        r##"<text x="10" y="20" font-size="14" font-weight="bold">cantus trace: {} locale(s), {} lane(s), {:.3} ms</text>"##,
        m.locales.len().max(1),
        m.lanes.len(),
        (m.t1 - m.t0) / 1000.0
    );
    // Legend.
    let legend = [
        ("begin", "#4e79a7"),
        ("join", "#59a14f"),
        ("coforall", "#76b7b2"),
        ("forall", "#8cd17d"),
        ("remote handler", "#e15759"),
        ("balanced work", "#edc948"),
        ("stolen work", "#f28e2b"),
        ("C task", "#b07aa1"),
        ("root", "#9c755f"),
        ("idle", "#e6e6e6"),
        ("asleep", "#b8b8b8"),
        ("blocking call", "#ff9da7"),
    ];
    let mut lx = 10.0;
    for (name, c) in legend {
        let _ = writeln!(
            s,
            r##"<rect x="{lx}" y="30" width="10" height="10" fill="{c}" stroke="#999" stroke-width="0.5"/><text x="{}" y="39">{name}</text>"##,
            lx + 13.0
        );
        lx += 24.0 + 6.2 * name.len() as f64;
    }
    for (cat, label) in [
        ("message", "message"),
        ("steal-across", "steal across locales"),
        ("steal", "steal"),
        ("wake", "wake"),
    ] {
        let (c, w) = flow_style(cat);
        let _ = writeln!(
            s,
            r##"<line x1="{lx}" y1="35" x2="{}" y2="35" stroke="{c}" stroke-width="{}" marker-end="url(#a)"/><text x="{}" y="39">{label}</text>"##,
            lx + 16.0,
            w.max(1.0),
            lx + 20.0
        );
        lx += 30.0 + 6.2 * label.len() as f64;
    }
    // Locale headers and lane labels.
    for (pid, hy) in &headers {
        let name = m
            .locales
            .get(pid)
            .cloned()
            .unwrap_or_else(|| format!("locale {pid}"));
        let _ = writeln!(
            s,
            r##"<text x="10" y="{:.1}" font-weight="bold">{}</text><line x1="10" y1="{:.1}" x2="{}" y2="{:.1}" stroke="#888" stroke-width="0.5"/>"##,
            hy + 11.0,
            escape(&name),
            hy + 14.0,
            width as f64 - right,
            hy + 14.0
        );
    }
    for (lane, name) in &m.lanes {
        let _ = writeln!(
            s,
            r##"<text x="18" y="{:.1}">{}</text>"##,
            row[lane] + 12.0,
            escape(name)
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
                    s,
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
                    s,
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
            s,
            r##"<line x1="{:.1}" y1="{:.1}" x2="{:.1}" y2="{:.1}" stroke="{c}" stroke-width="{w}" stroke-opacity="0.8" marker-end="url(#a)"/>"##,
            x(from.t),
            y0 + lane_h / 2.0,
            x(to.t),
            y1 + lane_h / 2.0
        );
    }
    // Time axis.
    let axis_y = y + 12.0;
    let span_ms = (m.t1 - m.t0) / 1000.0;
    let tick = nice_tick(span_ms / 8.0);
    let _ = writeln!(
        s,
        r##"<line x1="{left}" y1="{axis_y:.1}" x2="{}" y2="{axis_y:.1}" stroke="#444"/>"##,
        width as f64 - right
    );
    let mut t = 0.0;
    while t <= span_ms + 1e-9 {
        let tx = left + t / span_ms.max(1e-9) * plot;
        let _ = writeln!(
            s,
            r##"<line x1="{tx:.1}" y1="{axis_y:.1}" x2="{tx:.1}" y2="{:.1}" stroke="#444"/><text x="{tx:.1}" y="{:.1}" text-anchor="middle">{} ms</text>"##,
            axis_y + 4.0,
            axis_y + 16.0,
            trim(t)
        );
        t += tick;
    }
    if step > 1 {
        let _ = writeln!(
            s,
            r##"<text x="{left}" y="{:.1}">{} arrows, every {step}th drawn</text>"##,
            axis_y + 30.0,
            m.flows.len()
        );
    } else {
        let _ = writeln!(
            s,
            r##"<text x="{left}" y="{:.1}">{drawn_arrows} arrows</text>"##,
            axis_y + 30.0
        );
    }
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

fn trim(v: f64) -> String {
    let s = format!("{v:.3}");
    s.trim_end_matches('0').trim_end_matches('.').to_string()
}

/// Each worker lane's utilisation: busy (running tasks), idle, asleep.
pub(crate) fn summary(events: &[Value]) -> String {
    let m = model(events);
    let mut out = String::from("locale lane          busy    idle  asleep   span(ms)\n");
    for (lane, name) in &m.lanes {
        if !name.starts_with("worker") {
            continue;
        }
        let spans = m.spans.get(lane).map(Vec::as_slice).unwrap_or(&[]);
        let (mut busy, mut idle, mut asleep) = (0.0, 0.0, 0.0);
        let (mut a, mut b) = (f64::INFINITY, f64::NEG_INFINITY);
        for sp in spans {
            a = a.min(sp.start);
            b = b.max(sp.end);
            let d = sp.end - sp.start;
            match (sp.cat.as_str(), sp.name.as_str()) {
                ("task", _) => busy += d,
                ("idle", "asleep") => asleep += d,
                ("idle", _) => idle += d,
                _ => {}
            }
        }
        let total = (b - a).max(1e-9);
        let _ = writeln!(
            out,
            "{:>6} {:<12} {:>5.1}%  {:>5.1}%  {:>5.1}%  {:>9.3}",
            lane.0,
            name,
            100.0 * busy / total,
            100.0 * idle / total,
            100.0 * asleep / total,
            if total > 1e-6 { total / 1000.0 } else { 0.0 }
        );
    }
    out
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

    #[test]
    fn the_summary_adds_each_lane_s_states() {
        let s = summary(&sample());
        let w0 = s.lines().find(|l| l.contains("worker 0")).unwrap();
        let w1 = s.lines().find(|l| l.contains("worker 1")).unwrap();
        assert!(w0.contains("75.0%") && w0.contains("25.0%"), "{s}");
        // worker 1: busy 50, idle 50 (asleep 20 of it)
        assert!(w1.contains("50.0%") && w1.contains("20.0%"), "{s}");
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
