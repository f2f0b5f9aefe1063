//! The suite's results: figure lines on stdout, a table on stderr, and
//! `suite.csv`, `suite.md` (the table) and `suite.svg` (a chart of the
//! ratios, drawn by hand) in the output directory.

use super::{Sched, median, shown};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

/// How a row turns a time in seconds into the figure it shows.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Value {
    /// `time * scale` in `unit` (e.g. microseconds per trial).
    TimePer { scale: f64, unit: &'static str },
    /// `work / time` in `unit` (e.g. GB/s with `work` in GB).
    Rate { work: f64, unit: &'static str },
}

impl Value {
    pub(crate) fn unit(self) -> &'static str {
        match self {
            Value::TimePer { unit, .. } | Value::Rate { unit, .. } => unit,
        }
    }
}

/// One benchmark under one schedule: the times of every repetition.
pub(crate) struct Row {
    /// `lcals`, `stream`, `stream_ep` or `gups`.
    pub(crate) group: &'static str,
    /// The kernel (`muladdsub`, `triad`, `update`).
    pub(crate) kernel: &'static str,
    /// `short`, `medium`, `long`, or the size in words.
    pub(crate) size: String,
    /// Loop length (LCALS, STREAM) or table words (GUPS).
    pub(crate) n: usize,
    pub(crate) sched: Sched,
    /// The benchmark's name (`lcals.fir.long`): OpenMP's figure is
    /// `<base>.openmp`.
    pub(crate) base: String,
    /// The figure name: `base`, with the schedule appended unless it is
    /// the default (`lcals.fir.long.static`).
    pub(crate) name: String,
    /// Trials per repetition (LCALS), timed iterations (STREAM), 1 (GUPS).
    pub(crate) trials: u64,
    pub(crate) value: Value,
    /// Seconds per trial (per kernel call, per update run), one per rep.
    pub(crate) cantus: Vec<f64>,
    /// The same for OpenMP (empty if the peer did not run).
    pub(crate) openmp: Vec<f64>,
    /// The largest cantus/OpenMP time ratio the issue accepts, if any.
    pub(crate) target: Option<f64>,
    /// With `--baseline`: seconds per trial of the same loops run serially,
    /// Rust (a plain loop, no runtime) and C (one OpenMP thread).
    pub(crate) serial: Option<(Vec<f64>, Vec<f64>)>,
}

impl Row {
    /// Median cantus time over median OpenMP time.
    pub(crate) fn ratio(&self) -> Option<f64> {
        let (c, o) = (median(&self.cantus), median(&self.openmp));
        (c.is_finite() && o.is_finite() && o > 0.0).then(|| c / o)
    }

    /// Median serial Rust time over median serial C time: the compilers'
    /// share of [`ratio`](Row::ratio).
    pub(crate) fn serial_ratio(&self) -> Option<f64> {
        let (c, o) = self.serial.as_ref()?;
        let (c, o) = (median(c), median(o));
        (c.is_finite() && o.is_finite() && o > 0.0).then(|| c / o)
    }

    /// [`ratio`](Row::ratio) over [`serial_ratio`](Row::serial_ratio):
    /// OpenMP's speedup over its serial loop divided by cantus's speedup
    /// over its own, the runtimes' share with the compilers' taken out.
    pub(crate) fn normalized(&self) -> Option<f64> {
        Some(self.ratio()? / self.serial_ratio()?)
    }

    fn met(&self) -> Option<bool> {
        Some(self.ratio()? <= self.target?)
    }

    /// Prints the figure lines on stdout; OpenMP's own figure only if
    /// `with_peer` (once per benchmark, whatever the schedules).
    pub(crate) fn print(&self, with_peer: bool) {
        let unit = self.value.unit();
        let c = shown(self.value, median(&self.cantus));
        if c.is_finite() {
            println!("{}.cantus {} {unit}", self.name, fmt(c));
        }
        let o = shown(self.value, median(&self.openmp));
        if with_peer && o.is_finite() {
            println!("{}.openmp {} {unit}", self.base, fmt(o));
        }
        if let Some(r) = self.ratio() {
            println!("{}/openmp {r:.3}", self.name);
        }
        if let (true, Some((c, o)), Some(r)) = (with_peer, &self.serial, self.serial_ratio()) {
            let (c, o) = (shown(self.value, median(c)), shown(self.value, median(o)));
            println!("{}.serial.cantus {} {unit}", self.base, fmt(c));
            println!("{}.serial.openmp {} {unit}", self.base, fmt(o));
            println!("{}.serial/openmp {r:.3}", self.base);
        }
    }
}

/// Three significant digits at least, no exponent.
pub(crate) fn fmt(v: f64) -> String {
    let a = v.abs();
    if a >= 100.0 {
        format!("{v:.1}")
    } else if a >= 1.0 {
        format!("{v:.2}")
    } else {
        format!("{v:.4}")
    }
}

fn spread(row: &Row, times: &[f64]) -> (f64, f64) {
    let vals = times.iter().map(|&t| shown(row.value, t));
    (
        vals.clone().fold(f64::INFINITY, f64::min),
        vals.fold(f64::NEG_INFINITY, f64::max),
    )
}

/// The table as Markdown; the serial columns only with `--baseline`.
fn markdown(rows: &[Row]) -> String {
    let baseline = rows.iter().any(|r| r.serial.is_some());
    let mut s = String::new();
    let _ = writeln!(
        s,
        "| benchmark | size | n | schedule | cantus | OpenMP | unit | ratio | target |{}",
        if baseline {
            " serial ratio | normalized |"
        } else {
            ""
        }
    );
    let _ = writeln!(
        s,
        "|---|---|---:|---|---:|---:|---|---:|---|{}",
        if baseline { "---:|---:|" } else { "" }
    );
    for r in rows {
        let c = shown(r.value, median(&r.cantus));
        let o = shown(r.value, median(&r.openmp));
        let ratio = r.ratio().map_or("-".to_string(), |x| format!("{x:.3}"));
        let target = match (r.target, r.met()) {
            (Some(t), Some(true)) => format!("<= {t:.2} met"),
            (Some(t), Some(false)) => format!("<= {t:.2} MISSED"),
            (Some(t), None) => format!("<= {t:.2} ?"),
            (None, _) => String::new(),
        };
        let three = |v: Option<f64>| v.map_or(String::new(), |x| format!("{x:.3}"));
        let serial = if baseline {
            format!(" {} | {} |", three(r.serial_ratio()), three(r.normalized()))
        } else {
            String::new()
        };
        let _ = writeln!(
            s,
            "| {}.{} | {} | {} | {} | {} | {} | {} | {ratio} | {target} |{serial}",
            r.group,
            r.kernel,
            r.size,
            r.n,
            r.sched.name(),
            fmt(c),
            if o.is_finite() { fmt(o) } else { "-".into() },
            r.value.unit()
        );
    }
    s
}

/// Prints the table on stderr (stdout keeps the one-figure-a-line form).
pub(crate) fn table(rows: &[Row]) {
    eprintln!("\n{}", markdown(rows));
}

/// The CSV: one line per row, medians and spreads of the shown values.
fn csv(rows: &[Row]) -> String {
    let mut s = String::from(
        "group,kernel,size,n,schedule,trials,reps,unit,cantus,openmp,ratio,target,met,\
         cantus_min,cantus_max,openmp_min,openmp_max,serial_cantus,serial_openmp,serial_ratio,\
         normalized\n",
    );
    for r in rows {
        let opt = |v: Option<f64>| v.map_or(String::new(), |x| format!("{x}"));
        let fin = |v: f64| {
            if v.is_finite() {
                format!("{v}")
            } else {
                String::new()
            }
        };
        let (cmin, cmax) = spread(r, &r.cantus);
        let (omin, omax) = spread(r, &r.openmp);
        let (sc, so) = match &r.serial {
            Some((c, o)) => (
                fin(shown(r.value, median(c))),
                fin(shown(r.value, median(o))),
            ),
            None => (String::new(), String::new()),
        };
        let _ = writeln!(
            s,
            "{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{sc},{so},{},{}",
            r.group,
            r.kernel,
            r.size,
            r.n,
            r.sched.name(),
            r.trials,
            r.cantus.len(),
            r.value.unit(),
            fin(shown(r.value, median(&r.cantus))),
            fin(shown(r.value, median(&r.openmp))),
            opt(r.ratio()),
            opt(r.target),
            r.met().map_or(String::new(), |m| m.to_string()),
            fin(cmin),
            fin(cmax),
            fin(omin),
            fin(omax),
            opt(r.serial_ratio()),
            opt(r.normalized())
        );
    }
    s
}

/// Writes `suite.csv`, `suite.md` and `suite.svg` into `dir`.
pub(crate) fn write_files(dir: &Path, rows: &[Row]) -> std::io::Result<Vec<PathBuf>> {
    save(
        dir,
        [
            ("suite.csv", csv(rows)),
            ("suite.md", markdown(rows)),
            ("suite.svg", svg(rows)),
        ],
    )
}

/// Writes each `(name, text)` into `dir` (created if missing); returns
/// the paths written.
pub(crate) fn save<N: AsRef<Path>>(
    dir: &Path,
    files: impl IntoIterator<Item = (N, String)>,
) -> std::io::Result<Vec<PathBuf>> {
    std::fs::create_dir_all(dir)?;
    let mut written = Vec::new();
    for (name, text) in files {
        let path = dir.join(name);
        std::fs::write(&path, text)?;
        written.push(path);
    }
    Ok(written)
}

/// The exponents `(lo, hi)` of the powers of two that span `values` and
/// at least `at_least` (as values), clamped to `clamp` (as exponents): a
/// logarithmic axis around every value plotted.
pub(crate) fn log2_span(values: &[f64], at_least: (f64, f64), clamp: (f64, f64)) -> (f64, f64) {
    let lo = values
        .iter()
        .fold(at_least.0, |m, &v| m.min(v))
        .log2()
        .floor();
    let hi = values
        .iter()
        .fold(at_least.1, |m, &v| m.max(v))
        .log2()
        .ceil();
    (lo.max(clamp.0), hi.min(clamp.1))
}

/// Opens an SVG document of `width` x `height` pixels on a white
/// background (this chart and `cantus-bench scale`'s); the caller closes
/// it with `</svg>`.
pub(crate) fn svg_open(s: &mut String, width: f64, height: f64) {
    let _ = writeln!(
        s,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{width:.0}" height="{height:.0}" viewBox="0 0 {width:.0} {height:.0}" font-family="sans-serif" font-size="11">"#
    );
    let _ = writeln!(s, r#"<rect width="100%" height="100%" fill="white"/>"#);
}

/// Bar colour of a size.
fn colour(size: &str) -> &'static str {
    match size {
        "short" => PALETTE[0],
        "medium" => PALETTE[1],
        "long" => PALETTE[2],
        _ => PALETTE[3],
    }
}

/// The charts' series colours (the scaling sweep uses them too).
pub(crate) const PALETTE: [&str; 4] = ["#4e79a7", "#f28e2b", "#59a14f", "#9c755f"];

const BAR: f64 = 14.0;
const GAP: f64 = 12.0;
const PANEL_H: f64 = 260.0;
const TOP: f64 = 60.0;
const LEFT: f64 = 70.0;
const LABELS_H: f64 = 90.0;

/// Grouped bars of the ratio per kernel and size, one panel per schedule,
/// on a log scale with a line at 1.0 (below it, cantus is faster).
pub(crate) fn svg(rows: &[Row]) -> String {
    let mut scheds: Vec<Sched> = Vec::new();
    for r in rows {
        if !scheds.contains(&r.sched) {
            scheds.push(r.sched);
        }
    }
    let ratios: Vec<f64> = rows.iter().filter_map(Row::ratio).collect();
    // The axis: powers of two around every ratio, at least 1/4..4.
    let (lo, hi) = log2_span(&ratios, (0.25, 4.0), (-6.0, 6.0));
    let plot_h = PANEL_H - 40.0;
    let y_of = |ratio: f64, top: f64| {
        let l = ratio.log2().clamp(lo, hi);
        top + 20.0 + plot_h * (hi - l) / (hi - lo)
    };
    // Groups (group.kernel) in order of first appearance, per panel.
    let mut groups: Vec<(&'static str, &'static str)> = Vec::new();
    for r in rows {
        if !groups.contains(&(r.group, r.kernel)) {
            groups.push((r.group, r.kernel));
        }
    }
    let bars_in = |g: (&'static str, &'static str), s: Sched| {
        rows.iter()
            .filter(move |r| (r.group, r.kernel) == g && r.sched == s)
    };
    let widest = groups
        .iter()
        .map(|&g| {
            scheds
                .iter()
                .map(|&s| bars_in(g, s).count())
                .max()
                .unwrap_or(0)
        })
        .collect::<Vec<_>>();
    let width = LEFT + widest.iter().map(|&k| k as f64 * BAR + GAP).sum::<f64>() + 40.0;
    let panel_total = PANEL_H + LABELS_H;
    let height = TOP + panel_total * scheds.len() as f64 + 30.0;
    let mut s = String::new();
    svg_open(&mut s, width, height);
    let _ = writeln!(
        s,
        r#"<text x="{LEFT}" y="22" font-size="15" font-weight="bold">cantus / GNU OpenMP time ratio (log scale; below 1 = cantus faster)</text>"#
    );
    // Legend.
    let mut lx = LEFT;
    for (label, size) in [
        ("short (171)", "short"),
        ("medium (5001)", "medium"),
        ("long (44217)", "long"),
        ("STREAM / GUPS", "other"),
    ] {
        let _ = writeln!(
            s,
            r#"<rect x="{lx}" y="32" width="12" height="12" fill="{}"/><text x="{}" y="42">{label}</text>"#,
            colour(size),
            lx + 16.0
        );
        lx += 130.0;
    }
    for (p, &sched) in scheds.iter().enumerate() {
        let top = TOP + panel_total * p as f64;
        let _ = writeln!(
            s,
            r#"<text x="{LEFT}" y="{:.1}" font-size="13" font-weight="bold">schedule: {}</text>"#,
            top + 12.0,
            sched.name()
        );
        // Grid lines at powers of two, the 1.0 line stronger.
        let mut e = lo;
        while e <= hi {
            let y = y_of(2f64.powf(e), top);
            let (stroke, w) = if e == 0.0 {
                ("#d62728", 1.5)
            } else {
                ("#dddddd", 1.0)
            };
            let _ = writeln!(
                s,
                r#"<line x1="{LEFT}" x2="{:.1}" y1="{y:.1}" y2="{y:.1}" stroke="{stroke}" stroke-width="{w}"/><text x="{:.1}" y="{:.1}" text-anchor="end">{}</text>"#,
                width - 30.0,
                LEFT - 6.0,
                y + 4.0,
                ratio_label(2f64.powf(e))
            );
            e += 1.0;
        }
        let y1 = y_of(1.0, top);
        let mut x = LEFT + GAP / 2.0;
        for (gi, &g) in groups.iter().enumerate() {
            let mut bx = x;
            for r in bars_in(g, sched) {
                if let Some(ratio) = r.ratio() {
                    let y = y_of(ratio, top);
                    let (ytop, h) = if y < y1 { (y, y1 - y) } else { (y1, y - y1) };
                    let _ = writeln!(
                        s,
                        r#"<rect x="{bx:.1}" y="{ytop:.1}" width="{:.1}" height="{:.1}" fill="{}"><title>{} {}: {ratio:.3}</title></rect>"#,
                        BAR - 2.0,
                        h.max(0.5),
                        colour(&r.size),
                        r.name,
                        r.size
                    );
                    if ratio.log2() > hi || ratio.log2() < lo {
                        let _ = writeln!(
                            s,
                            r#"<text x="{:.1}" y="{:.1}" text-anchor="middle" font-size="9">{ratio:.1}</text>"#,
                            bx + BAR / 2.0,
                            if y < y1 { ytop - 3.0 } else { ytop + h + 10.0 }
                        );
                    }
                }
                bx += BAR;
            }
            let gw = widest[gi] as f64 * BAR;
            let lx = x + gw / 2.0;
            let ly = top + PANEL_H - 10.0;
            let _ = writeln!(
                s,
                r#"<text x="{lx:.1}" y="{ly:.1}" transform="rotate(-40 {lx:.1} {ly:.1})" text-anchor="end">{}.{}</text>"#,
                g.0, g.1
            );
            x += gw + GAP;
        }
    }
    s.push_str("</svg>\n");
    s
}

/// A power of two as an axis label: `4`, `1`, `1/4`.
pub(crate) fn ratio_label(r: f64) -> String {
    if r >= 1.0 {
        format!("{r:.0}")
    } else {
        format!("1/{:.0}", 1.0 / r)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(kernel: &'static str, size: &str, c: f64, o: f64) -> Row {
        Row {
            group: "lcals",
            kernel,
            size: size.into(),
            n: 171,
            sched: Sched::Adaptive,
            base: format!("lcals.{kernel}.{size}"),
            name: format!("lcals.{kernel}.{size}"),
            trials: 10,
            value: Value::TimePer {
                scale: 1e6,
                unit: "us/trial",
            },
            cantus: vec![c, c, c],
            openmp: vec![o],
            target: Some(1.2),
            serial: None,
        }
    }

    #[test]
    fn ratio_and_target() {
        let r = row("fir", "short", 2e-6, 1e-6);
        assert_eq!(r.ratio(), Some(2.0));
        assert_eq!(r.met(), Some(false));
        assert_eq!(row("fir", "short", 1e-6, 1e-6).met(), Some(true));
    }

    #[test]
    fn csv_and_svg_have_a_line_and_a_bar_per_row() {
        let rows = [
            row("fir", "short", 2e-6, 1e-6),
            row("fir", "long", 1e-6, 2e-6),
        ];
        assert_eq!(csv(&rows).lines().count(), 3);
        let svg = svg(&rows);
        assert!(svg.starts_with("<svg") && svg.trim_end().ends_with("</svg>"));
        let head: Vec<&str> = svg.lines().take(3).collect();
        assert_eq!(
            head[0],
            r#"<svg xmlns="http://www.w3.org/2000/svg" width="150" height="440" viewBox="0 0 150 440" font-family="sans-serif" font-size="11">"#
        );
        assert_eq!(
            head[1],
            r#"<rect width="100%" height="100%" fill="white"/>"#
        );
        assert!(head[2].starts_with(r#"<text x="70" y="22" font-size="15""#));
        assert_eq!(svg.matches("<title>").count(), 2);
    }
}
