//! Repetitions, medians and the output format.
//!
//! Figures go to stdout, one a line: `<name> <value> <unit>`; comparisons
//! as `<name>/<peer> <ratio>` (cantus time / peer time). A peer's own
//! figure is named `<name>.<peer>`. Notes and spreads go to stderr, so
//! stdout stays machine-readable.

use std::time::{Duration, Instant};

/// Repeated measurements of one quantity.
#[derive(Clone, Debug, Default)]
pub(crate) struct Samples {
    values: Vec<f64>,
}

impl Samples {
    pub(crate) fn new() -> Samples {
        Samples::default()
    }

    pub(crate) fn push(&mut self, value: f64) {
        self.values.push(value);
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.values.is_empty()
    }

    /// The median (mean of the middle two for an even count); NaN if empty.
    pub(crate) fn median(&self) -> f64 {
        if self.values.is_empty() {
            return f64::NAN;
        }
        let mut v = self.values.clone();
        v.sort_by(f64::total_cmp);
        let n = v.len();
        if n % 2 == 1 {
            v[n / 2]
        } else {
            (v[n / 2 - 1] + v[n / 2]) / 2.0
        }
    }

    /// The `q` quantile (nearest rank, 0 < q <= 1); NaN if empty.
    pub(crate) fn quantile(&self, q: f64) -> f64 {
        if self.values.is_empty() {
            return f64::NAN;
        }
        let mut v = self.values.clone();
        v.sort_by(f64::total_cmp);
        let rank = ((q * v.len() as f64).ceil() as usize).clamp(1, v.len());
        v[rank - 1]
    }

    fn min(&self) -> f64 {
        self.values.iter().copied().fold(f64::INFINITY, f64::min)
    }

    fn max(&self) -> f64 {
        self.values
            .iter()
            .copied()
            .fold(f64::NEG_INFINITY, f64::max)
    }
}

/// Prints a figure (the median of `samples`) and, on stderr, its spread.
/// Returns the median.
pub(crate) fn figure(name: &str, samples: &Samples, unit: &str) -> f64 {
    let m = samples.median();
    if samples.is_empty() {
        return m;
    }
    println!("{name} {} {unit}", fmt_value(m));
    note(&format!(
        "{name}: median {} {unit} of {} reps (min {}, max {})",
        fmt_value(m),
        samples.values.len(),
        fmt_value(samples.min()),
        fmt_value(samples.max())
    ));
    m
}

/// Prints a single derived value as a figure.
pub(crate) fn value(name: &str, v: f64, unit: &str) {
    println!("{name} {} {unit}", fmt_value(v));
}

/// Prints `<name>/<peer> <ratio>`: cantus time over peer time.
pub(crate) fn ratio(name: &str, peer: &str, cantus: f64, peer_value: f64) {
    if cantus.is_finite() && peer_value.is_finite() && peer_value > 0.0 {
        println!("{name}/{peer} {:.3}", cantus / peer_value);
    }
}

/// A progress note, on stderr.
pub(crate) fn note(msg: &str) {
    eprintln!("# {msg}");
}

/// Three significant digits at least, no exponent.
fn fmt_value(v: f64) -> String {
    let a = v.abs();
    if a >= 100.0 {
        format!("{v:.1}")
    } else if a >= 1.0 {
        format!("{v:.2}")
    } else {
        format!("{v:.4}")
    }
}

/// Runs one benchmark section, noting on stderr how long it took.
pub(crate) fn section<R>(name: &str, f: impl FnOnce() -> R) -> R {
    let (d, r) = time(f);
    note(&format!("{name}: section took {:.1} s", d.as_secs_f64()));
    r
}

/// Wall-clock time of `f`, with its result.
pub(crate) fn time<R>(f: impl FnOnce() -> R) -> (Duration, R) {
    let t = Instant::now();
    let r = f();
    (t.elapsed(), r)
}

/// Nanoseconds per operation.
pub(crate) fn ns_per(d: Duration, ops: u64) -> f64 {
    d.as_nanos() as f64 / ops.max(1) as f64
}

/// Milliseconds.
pub(crate) fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

/// The numbers a child benchmark process printed, one per line; `who`
/// names the child in errors (its exit status and stderr on failure).
pub(crate) fn child_numbers(out: &std::process::Output, who: &str) -> Result<Vec<f64>, String> {
    if !out.status.success() {
        return Err(format!(
            "{who} failed ({}): {}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| {
            l.trim()
                .parse::<f64>()
                .map_err(|e| format!("bad output line {l:?} from {who}: {e}"))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn median_of_odd_and_even_counts() {
        let mut s = Samples::new();
        assert!(s.median().is_nan());
        for v in [5.0, 1.0, 3.0] {
            s.push(v);
        }
        assert_eq!(s.median(), 3.0);
        s.push(100.0);
        assert_eq!(s.median(), 4.0);
    }
}
