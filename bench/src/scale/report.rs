//! The sweep's results: `scale.csv`, `scale.md` (the table, also on
//! stderr) and one `scale-<benchmark>.svg` chart of speedup against
//! workers per benchmark, drawn by hand like the suite's chart (and with
//! its SVG header and number format, [`crate::suite::report`]).

use super::{CANTUS, OPENMP, RAYON, SERIAL, Unit};
use crate::suite::median;
use crate::suite::report::{PALETTE, fmt, log2_span, ratio_label, save, svg_open};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

/// One benchmark on one peer at one worker count.
pub(crate) struct Row {
    pub(crate) benchmark: String,
    /// `serial`, `cantus`, `rayon` or `openmp`.
    pub(crate) peer: &'static str,
    /// 1 for the serial row.
    pub(crate) workers: usize,
    pub(crate) unit: Unit,
    /// Seconds, one per repetition (per trial for LCALS).
    pub(crate) secs: Vec<f64>,
    /// The benchmark's median serial time in seconds.
    pub(crate) serial_s: f64,
}

impl Row {
    pub(crate) fn new(
        benchmark: &str,
        peer: &'static str,
        workers: usize,
        unit: Unit,
        secs: Vec<f64>,
        serial_s: f64,
    ) -> Row {
        Row {
            benchmark: benchmark.to_string(),
            peer,
            workers,
            unit,
            secs,
            serial_s,
        }
    }

    pub(crate) fn median_s(&self) -> f64 {
        median(&self.secs)
    }

    /// Serial time over this row's time.
    pub(crate) fn speedup(&self) -> f64 {
        self.serial_s / self.median_s()
    }
}

/// The benchmarks, in the order they ran.
fn benchmarks(rows: &[Row]) -> Vec<&str> {
    let mut v: Vec<&str> = Vec::new();
    for r in rows {
        if !v.contains(&r.benchmark.as_str()) {
            v.push(&r.benchmark);
        }
    }
    v
}

/// The worker counts of a benchmark's parallel rows, ascending.
fn counts(rows: &[&Row]) -> Vec<usize> {
    let mut v: Vec<usize> = rows
        .iter()
        .filter(|r| r.peer != SERIAL)
        .map(|r| r.workers)
        .collect();
    v.sort_unstable();
    v.dedup();
    v
}

fn find<'a>(rows: &[&'a Row], peer: &str, workers: usize) -> Option<&'a Row> {
    rows.iter()
        .find(|r| r.peer == peer && r.workers == workers)
        .copied()
}

/// `benchmark,peer,workers,median_s,speedup`, one line per row.
fn csv(rows: &[Row]) -> String {
    let mut s = String::from("benchmark,peer,workers,median_s,speedup\n");
    for r in rows {
        let _ = writeln!(
            s,
            "{},{},{},{},{}",
            r.benchmark,
            r.peer,
            r.workers,
            r.median_s(),
            r.speedup()
        );
    }
    s
}

/// One table: a line per benchmark and worker count.
fn markdown(rows: &[Row]) -> String {
    let mut s = String::from(
        "| benchmark | workers | unit | serial | cantus | rayon | OpenMP | speedup cantus | rayon | OpenMP | cantus/rayon | cantus/OpenMP |\n\
         |---|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n",
    );
    for b in benchmarks(rows) {
        let mine: Vec<&Row> = rows.iter().filter(|r| r.benchmark == b).collect();
        let Some(first) = mine.first() else { continue };
        let unit = first.unit;
        let time = |r: Option<&Row>| r.map_or("-".to_string(), |r| fmt(r.median_s() * unit.scale));
        let speedup =
            |r: Option<&Row>| r.map_or("-".to_string(), |r| format!("{:.2}", r.speedup()));
        let vs = |c: Option<&Row>, p: Option<&Row>| match (c, p) {
            (Some(c), Some(p)) => format!("{:.3}", c.median_s() / p.median_s()),
            _ => "-".to_string(),
        };
        let serial = time(mine.iter().find(|r| r.peer == SERIAL).copied());
        for w in counts(&mine) {
            let (c, r, o) = (
                find(&mine, CANTUS, w),
                find(&mine, RAYON, w),
                find(&mine, OPENMP, w),
            );
            let _ = writeln!(
                s,
                "| {b} | {w} | {} | {serial} | {} | {} | {} | {} | {} | {} | {} | {} |",
                unit.name,
                time(c),
                time(r),
                time(o),
                speedup(c),
                speedup(r),
                speedup(o),
                vs(c, r),
                vs(c, o)
            );
        }
    }
    s
}

/// Prints the table on stderr (stdout keeps the one-figure-a-line form).
pub(crate) fn table(rows: &[Row]) {
    eprintln!("\n{}", markdown(rows));
}

/// Writes `scale.csv`, `scale.md` and `scale-<benchmark>.svg` into `dir`.
pub(crate) fn write_files(dir: &Path, rows: &[Row]) -> std::io::Result<Vec<PathBuf>> {
    let mut files = vec![
        ("scale.csv".to_string(), csv(rows)),
        ("scale.md".to_string(), markdown(rows)),
    ];
    for b in benchmarks(rows) {
        let mine: Vec<&Row> = rows.iter().filter(|r| r.benchmark == b).collect();
        files.push((format!("scale-{b}.svg"), svg(b, &mine)));
    }
    save(dir, files)
}

/// Line colour of a peer.
fn colour(peer: &str) -> &'static str {
    match peer {
        CANTUS => PALETTE[0],
        RAYON => PALETTE[1],
        OPENMP => PALETTE[2],
        _ => PALETTE[3],
    }
}

const WIDTH: f64 = 560.0;
const HEIGHT: f64 = 380.0;
const LEFT: f64 = 60.0;
const RIGHT: f64 = 130.0;
const TOP: f64 = 50.0;
const BOTTOM: f64 = 50.0;

/// Speedup over serial against workers for one benchmark, both axes
/// log2 (the ideal speedup, = workers, is the dashed diagonal; 1, as fast
/// as serial, is marked): a line per peer.
fn svg(bench: &str, rows: &[&Row]) -> String {
    let counts = counts(rows);
    let top_w = counts.last().copied().unwrap_or(1);
    let peers: Vec<&'static str> = [CANTUS, RAYON, OPENMP]
        .into_iter()
        .filter(|p| rows.iter().any(|r| r.peer == *p))
        .collect();
    let speedups: Vec<f64> = rows
        .iter()
        .filter(|r| r.peer != SERIAL)
        .map(|r| r.speedup())
        .filter(|v| v.is_finite() && *v > 0.0)
        .collect();
    // Powers of two around every speedup and the ideal, at least 1/2..2.
    let (lo, hi) = log2_span(&speedups, (0.5, (top_w as f64).max(2.0)), (-8.0, 12.0));
    let (pw, ph) = (WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM);
    let x_span = (top_w as f64).log2().max(1.0);
    let x_of = |w: usize| LEFT + pw * (w as f64).log2() / x_span;
    let y_of = |v: f64| TOP + ph * (hi - v.log2().clamp(lo, hi)) / (hi - lo);
    let serial = rows.iter().find(|r| r.peer == SERIAL);
    let mut s = String::new();
    svg_open(&mut s, WIDTH, HEIGHT);
    let _ = writeln!(
        s,
        r#"<text x="{LEFT}" y="20" font-size="14" font-weight="bold">{bench}: speedup over serial</text>"#
    );
    if let Some(r) = serial {
        let _ = writeln!(
            s,
            r#"<text x="{LEFT}" y="36">serial {} {}; log-log, higher is better</text>"#,
            fmt(r.median_s() * r.unit.scale),
            r.unit.name
        );
    }
    // Horizontal grid at powers of two; the line at 1 (as fast as
    // serial) stronger.
    let mut e = lo;
    while e <= hi {
        let y = y_of(2f64.powf(e));
        let _ = writeln!(
            s,
            r##"<line x1="{LEFT}" x2="{:.1}" y1="{y:.1}" y2="{y:.1}" stroke="#dddddd"/><text x="{:.1}" y="{:.1}" text-anchor="end">{}</text>"##,
            LEFT + pw,
            LEFT - 6.0,
            y + 4.0,
            ratio_label(2f64.powf(e))
        );
        e += 1.0;
    }
    let y1 = y_of(1.0);
    let _ = writeln!(
        s,
        r##"<line x1="{LEFT}" x2="{:.1}" y1="{y1:.1}" y2="{y1:.1}" stroke="#d62728" stroke-width="1.2"/>"##,
        LEFT + pw
    );
    // Vertical grid at the worker counts measured.
    for &w in &counts {
        let x = x_of(w);
        let _ = writeln!(
            s,
            r##"<line x1="{x:.1}" x2="{x:.1}" y1="{TOP}" y2="{:.1}" stroke="#eeeeee"/><text x="{x:.1}" y="{:.1}" text-anchor="middle">{w}</text>"##,
            TOP + ph,
            TOP + ph + 16.0
        );
    }
    let _ = writeln!(
        s,
        r#"<text x="{:.1}" y="{:.1}" text-anchor="middle">workers (threads)</text>"#,
        LEFT + pw / 2.0,
        HEIGHT - 12.0
    );
    let _ = writeln!(
        s,
        r##"<rect x="{LEFT}" y="{TOP}" width="{pw:.1}" height="{ph:.1}" fill="none" stroke="#888888"/>"##
    );
    // The ideal speedup.
    let _ = writeln!(
        s,
        r##"<line x1="{:.1}" x2="{:.1}" y1="{:.1}" y2="{:.1}" stroke="#999999" stroke-dasharray="5,4"/>"##,
        x_of(1),
        x_of(top_w),
        y_of(1.0),
        y_of(top_w as f64)
    );
    // A line and dots per peer.
    for &p in &peers {
        let pts: Vec<(usize, f64)> = counts
            .iter()
            .filter_map(|&w| find(rows, p, w).map(|r| (w, r.speedup())))
            .filter(|(_, v)| v.is_finite())
            .collect();
        let line: Vec<String> = pts
            .iter()
            .map(|&(w, v)| format!("{:.1},{:.1}", x_of(w), y_of(v)))
            .collect();
        let _ = writeln!(
            s,
            r#"<polyline points="{}" fill="none" stroke="{}" stroke-width="2"/>"#,
            line.join(" "),
            colour(p)
        );
        for &(w, v) in &pts {
            let _ = writeln!(
                s,
                r#"<circle cx="{:.1}" cy="{:.1}" r="3.5" fill="{}"><title>{p}, {w} workers: {v:.2}x</title></circle>"#,
                x_of(w),
                y_of(v),
                colour(p)
            );
        }
    }
    // Legend.
    let lx = LEFT + pw + 14.0;
    let mut ly = TOP + 10.0;
    for &p in &peers {
        let _ = writeln!(
            s,
            r#"<line x1="{lx:.1}" x2="{:.1}" y1="{ly:.1}" y2="{ly:.1}" stroke="{}" stroke-width="2"/><text x="{:.1}" y="{:.1}">{p}</text>"#,
            lx + 20.0,
            colour(p),
            lx + 26.0,
            ly + 4.0
        );
        ly += 18.0;
    }
    let _ = writeln!(
        s,
        r##"<line x1="{lx:.1}" x2="{:.1}" y1="{ly:.1}" y2="{ly:.1}" stroke="#999999" stroke-dasharray="5,4"/><text x="{:.1}" y="{:.1}">ideal</text>"##,
        lx + 20.0,
        lx + 26.0,
        ly + 4.0
    );
    s.push_str("</svg>\n");
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    const U: Unit = Unit {
        scale: 1e3,
        name: "ms",
    };

    fn rows() -> Vec<Row> {
        let mut v = vec![Row::new("fib30", SERIAL, 1, U, vec![2.0], 2.0)];
        for (w, c, r) in [(1, 4.0, 3.0), (2, 2.0, 1.5), (4, 1.0, 0.8)] {
            v.push(Row::new("fib30", CANTUS, w, U, vec![c, c, c], 2.0));
            v.push(Row::new("fib30", RAYON, w, U, vec![r], 2.0));
        }
        v
    }

    #[test]
    fn csv_table_and_chart() {
        let rows = rows();
        let c = csv(&rows);
        assert_eq!(c.lines().count(), 8);
        assert!(c.contains("\nfib30,cantus,4,1,2\n"), "{c}");
        assert!(c.contains("\nfib30,serial,1,2,1\n"), "{c}");
        let md = markdown(&rows);
        assert_eq!(md.lines().count(), 2 + 3);
        assert!(
            md.contains(
                "| fib30 | 2 | ms | 2000.0 | 2000.0 | 1500.0 | - | 1.00 | 1.33 | - | 1.333 | - |"
            ),
            "{md}"
        );
        let mine: Vec<&Row> = rows.iter().collect();
        let svg = svg("fib30", &mine);
        assert!(svg.starts_with("<svg") && svg.trim_end().ends_with("</svg>"));
        assert_eq!(svg.matches("<circle").count(), 6);
        assert_eq!(svg.matches("<polyline").count(), 2);
        // Grid from 1/2 (the slowest speedup, 0.5) to 4 (the ideal).
        for label in [">1/2<", ">1<", ">2<", ">4<"] {
            assert!(svg.contains(label), "{label}");
        }
        assert!(!svg.contains(">8<") && !svg.contains(">1/4<"));
    }
}
