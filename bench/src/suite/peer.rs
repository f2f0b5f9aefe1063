//! The OpenMP peer of the suite: `c/suite/suite_omp.c`, built by
//! `build.rs` with `gcc -O3 -fopenmp` into its own executable and run as a
//! child process, so that OpenMP's spinning threads never share a process
//! with cantus workers. It runs with `OMP_NUM_THREADS` = cantus workers,
//! `OMP_WAIT_POLICY=active` and `OMP_PROC_BIND=true` (its fastest setting
//! for these loops) unless those variables are already set.

use std::path::PathBuf;
use std::process::Command;

/// Where build.rs put the executable (empty if gcc could not build it).
const BUILT: &str = env!("CANTUS_BENCH_SUITE_OMP");

/// The peer executable and how it is run.
pub(crate) struct Peer {
    exe: PathBuf,
    threads: usize,
    wait_policy: String,
    proc_bind: String,
}

/// What one run of the peer printed.
#[derive(Debug, Default)]
pub(crate) struct PeerRun {
    /// `time <part> <seconds>` lines, in order.
    pub(crate) times: Vec<(String, f64)>,
    /// `checksum <value>` (LCALS).
    pub(crate) checksum: Option<f64>,
    /// `errors <count> <words>` (RandomAccess), one per repetition.
    pub(crate) errors: Vec<(u64, u64)>,
}

impl PeerRun {
    /// The seconds of every `time <part> ...` line.
    pub(crate) fn times_of(&self, part: &str) -> Vec<f64> {
        self.times
            .iter()
            .filter(|(p, _)| p == part)
            .map(|&(_, t)| t)
            .collect()
    }
}

impl Peer {
    /// The built peer, run with `threads` OpenMP threads. The environment
    /// variable `CANTUS_BENCH_SUITE_OMP` overrides the path built in.
    pub(crate) fn find(threads: usize) -> Result<Peer, String> {
        let exe = match std::env::var_os("CANTUS_BENCH_SUITE_OMP") {
            Some(p) if !p.is_empty() => PathBuf::from(p),
            _ if BUILT.is_empty() => {
                return Err("not built (gcc with -fopenmp was not available at build time)".into());
            }
            _ => PathBuf::from(BUILT),
        };
        if !exe.is_file() {
            return Err(format!("{} does not exist", exe.display()));
        }
        let var = |name: &str, default: &str| {
            std::env::var(name)
                .ok()
                .filter(|v| !v.is_empty())
                .unwrap_or_else(|| default.to_string())
        };
        Ok(Peer {
            exe,
            threads,
            wait_policy: var("OMP_WAIT_POLICY", "active"),
            proc_bind: var("OMP_PROC_BIND", "true"),
        })
    }

    /// One line saying how the peer runs.
    pub(crate) fn describe(&self) -> String {
        format!(
            "OpenMP peer {} with OMP_NUM_THREADS={} OMP_WAIT_POLICY={} OMP_PROC_BIND={}",
            self.exe.display(),
            self.threads,
            self.wait_policy,
            self.proc_bind
        )
    }

    /// Runs the peer with `args` and parses its output. A failed
    /// verification in the peer is an error.
    pub(crate) fn run(&self, args: &[String]) -> Result<PeerRun, String> {
        self.run_with(args, self.threads)
    }

    /// [`run`](Peer::run) with `threads` OpenMP threads.
    pub(crate) fn run_with(&self, args: &[String], threads: usize) -> Result<PeerRun, String> {
        let out = Command::new(&self.exe)
            .args(args)
            .env("OMP_NUM_THREADS", threads.to_string())
            .env("OMP_WAIT_POLICY", &self.wait_policy)
            .env("OMP_PROC_BIND", &self.proc_bind)
            .output()
            .map_err(|e| format!("cannot run {}: {e}", self.exe.display()))?;
        if !out.status.success() {
            return Err(format!(
                "suite_omp {} failed ({}): {}",
                args.join(" "),
                out.status,
                String::from_utf8_lossy(&out.stderr).trim()
            ));
        }
        parse(&String::from_utf8_lossy(&out.stdout))
    }
}

fn parse(text: &str) -> Result<PeerRun, String> {
    let mut run = PeerRun::default();
    for line in text.lines() {
        let f: Vec<&str> = line.split_whitespace().collect();
        let bad = || format!("bad line {line:?} from suite_omp");
        let num = |s: &str| s.parse::<f64>().map_err(|_| bad());
        let int = |s: &str| s.parse::<u64>().map_err(|_| bad());
        match f.as_slice() {
            ["time", part, secs] => run.times.push((part.to_string(), num(secs)?)),
            ["checksum", v] => run.checksum = Some(num(v)?),
            ["errors", e, n] => run.errors.push((int(e)?, int(n)?)),
            [] => {}
            _ => return Err(bad()),
        }
    }
    Ok(run)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_line_format() {
        let r = parse("time trials 0.5\ntime trials 0.25\nchecksum -1.5\nerrors 3 1024\n").unwrap();
        assert_eq!(r.times_of("trials"), vec![0.5, 0.25]);
        assert_eq!(r.checksum, Some(-1.5));
        assert_eq!(r.errors, vec![(3, 1024)]);
        assert!(parse("time trials x\n").is_err());
        assert!(parse("hello\n").is_err());
    }
}
