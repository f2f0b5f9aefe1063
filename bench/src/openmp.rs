//! The GNU OpenMP peer: `c/spawn_omp.c`, built by `build.rs` into a
//! separate executable and run as a child process, so that OpenMP's
//! spinning threads never share the process with cantus workers.

use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

/// Where build.rs put the executable (empty if gcc could not build it).
const BUILT: &str = env!("CANTUS_BENCH_OPENMP");

/// How idle OpenMP threads wait (`OMP_WAIT_POLICY`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum WaitPolicy {
    /// Spin: GNU OpenMP's fastest setting for this benchmark.
    Active,
    /// The variable unset: libgomp spins for `GOMP_SPINCOUNT`, then sleeps.
    Default,
    /// Sleep at once.
    Passive,
}

impl WaitPolicy {
    /// The peer name used in figure lines.
    pub(crate) fn peer(self) -> &'static str {
        match self {
            WaitPolicy::Active => "openmp",
            WaitPolicy::Default => "openmp_default",
            WaitPolicy::Passive => "openmp_passive",
        }
    }
}

/// The spawn benchmark's executable, if there is one. The environment
/// variable `CANTUS_BENCH_OPENMP` overrides the path built in.
pub(crate) fn executable() -> Result<PathBuf, String> {
    let path = match std::env::var_os("CANTUS_BENCH_OPENMP") {
        Some(p) if !p.is_empty() => PathBuf::from(p),
        _ if BUILT.is_empty() => {
            return Err("not built (gcc with -fopenmp was not available at build time)".into());
        }
        _ => PathBuf::from(BUILT),
    };
    if path.is_file() {
        Ok(path)
    } else {
        Err(format!("{} does not exist", path.display()))
    }
}

/// One run of the child: `reps` measurements of `trials` trials (fewer if
/// a repetition exceeds `budget`), each a parallel loop of `threads`
/// iterations doing `work_iters` of work. Returns nanoseconds per trial,
/// one value per repetition.
pub(crate) fn spawn_trials(
    exe: &PathBuf,
    policy: WaitPolicy,
    threads: usize,
    trials: u64,
    reps: usize,
    work_iters: u64,
    budget: Duration,
) -> Result<Vec<f64>, String> {
    let mut cmd = Command::new(exe);
    cmd.args([
        threads.to_string(),
        trials.to_string(),
        reps.to_string(),
        work_iters.to_string(),
        budget.as_millis().max(1).to_string(),
    ]);
    match policy {
        WaitPolicy::Active => cmd.env("OMP_WAIT_POLICY", "active"),
        WaitPolicy::Passive => cmd.env("OMP_WAIT_POLICY", "passive"),
        WaitPolicy::Default => cmd.env_remove("OMP_WAIT_POLICY"),
    };
    let out = cmd
        .output()
        .map_err(|e| format!("cannot run {}: {e}", exe.display()))?;
    crate::stats::child_numbers(&out, &exe.display().to_string())
}
