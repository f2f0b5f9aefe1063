//! `cantus-bench trace`: what recording a timeline trace costs
//! (`CANTUS_TRACE`, issue 19), against the same run not recording, in one
//! process: a traced runtime whose recording is paused
//! (`cantus::trace::pause`) and resumed between measurements, one
//! repetition of each in turn.
//!
//! - `fib30`: `fib(30)` with `join` on 2 workers;
//! - `am_round_trip`: `on(1, Ping).join()` between 2 locales (recording
//!   paused and resumed on both, by a remote call).
//!
//! What tracing costs when it is off (no `CANTUS_TRACE`) is the figure
//! of `apps`/`comm` against the build before tracing: see BENCHMARKS.md.

use crate::Options;
use crate::stats::{Samples, figure, note, ratio, section, time};
use serde::{Deserialize, Serialize};

/// Pauses (false) or resumes (true) recording on the locale it runs on.
#[derive(Serialize, Deserialize)]
struct SetRecording(bool);
impl cantus::Remote for SetRecording {
    type Output = bool;
    fn run(self) -> bool {
        if self.0 {
            cantus::trace::resume();
        } else {
            cantus::trace::pause();
        }
        cantus::trace::is_recording()
    }
}

/// Echoes its number back, one higher.
#[derive(Serialize, Deserialize)]
struct TracePing(u64);
impl cantus::Remote for TracePing {
    type Output = u64;
    fn run(self) -> u64 {
        self.0 + 1
    }
}

cantus::remote!(SetRecording, TracePing);

fn set_everywhere(on: bool) {
    for l in 0..cantus::num_locales() {
        let now = cantus::on(l, SetRecording(on))
            .join()
            .expect("set recording");
        assert_eq!(now, on, "locale {l} records as asked");
    }
}

fn trace_path(what: &str) -> std::path::PathBuf {
    std::env::temp_dir().join(format!(
        "cantus-bench-trace-{what}-{}.json",
        std::process::id()
    ))
}

fn remove(path: &std::path::Path) {
    let _ = std::fs::remove_file(path);
    for d in cantus::trace::parts_dirs(path) {
        let _ = std::fs::remove_dir_all(d);
    }
}

pub(crate) fn run(opts: &Options) {
    let reps = opts.reps.unwrap_or(if opts.quick { 3 } else { 7 });
    if opts.wants("fib30") {
        section("trace fib30", || {
            fib(reps, if opts.quick { 25 } else { 30 })
        });
    }
    if opts.wants("am_round_trip") {
        section("trace am_round_trip", || {
            round_trip(reps, if opts.quick { 2_000 } else { 50_000 })
        });
    }
}

/// Alternates `once()` with recording off and on (`set(false)`,
/// `set(true)`), `reps` times after a warm-up pair; the samples of each.
fn alternate(reps: usize, set: impl Fn(bool), once: impl Fn() -> f64) -> (Samples, Samples) {
    let (mut off, mut on) = (Samples::new(), Samples::new());
    for rep in 0..=reps {
        set(false);
        let a = once();
        set(true);
        let b = once();
        if rep > 0 {
            off.push(a);
            on.push(b);
        }
    }
    (off, on)
}

/// Prints both figures and their ratio.
fn report(name: &str, unit: &str, off: &Samples, on: &Samples) {
    let a = figure(&format!("{name}.trace_off"), off, unit);
    let b = figure(&format!("{name}.trace_on"), on, unit);
    ratio(&format!("{name}.trace_on"), "trace_off", b, a);
}

fn fib(reps: usize, n: u32) {
    let path = trace_path("fib");
    let rt = cantus::Runtime::builder()
        .workers(2)
        .trace(&path)
        .build()
        .unwrap_or_else(|e| {
            eprintln!("cantus-bench trace: cannot start a traced runtime: {e}");
            std::process::exit(2)
        });
    let set = |on: bool| {
        if on {
            cantus::trace::resume();
        } else {
            cantus::trace::pause();
        }
    };
    let (off, on) = rt.block_on(|| {
        alternate(reps, set, || {
            let (d, v) = time(|| crate::apps::fib::<crate::apps::CantusWith<0>>(n));
            std::hint::black_box(v);
            d.as_secs_f64() * 1e3
        })
    });
    rt.shutdown();
    remove(&path);
    report(&format!("fib{n}"), "ms", &off, &on);
}

fn round_trip(reps: usize, rounds: u64) {
    let path = trace_path("comm");
    // Large lanes: every traced round trip records about ten events.
    let rt = cantus::Runtime::builder()
        .default_locales(2)
        .workers(1)
        .trace(&path)
        .trace_events(1 << 22)
        .build()
        .unwrap_or_else(|e| {
            eprintln!("cantus-bench trace: cannot start two traced locales: {e}");
            std::process::exit(2)
        });
    note(&format!(
        "trace am_round_trip: 2 locales, 1 worker each, {rounds} calls per repetition"
    ));
    let (off, on) = rt.block_on(|| {
        alternate(reps, set_everywhere, || {
            let mut v = 0;
            let (d, ()) = time(|| {
                for _ in 0..rounds {
                    v = cantus::on(1, TracePing(v)).join().expect("ping");
                }
            });
            assert_eq!(v, rounds);
            d.as_secs_f64() * 1e6 / rounds as f64
        })
    });
    rt.shutdown();
    remove(&path);
    report("am_round_trip", "us", &off, &on);
}
