//! What the balanced programs' examples print besides their answers
//! (each locale's counts, `cantus::balance::Outcome::table`): the time,
//! the sequential reference's time (`--seq`), and the parsing of their
//! optional arguments.
//!
//! Shared by `examples/{uts,nqueens,pentomino,fib_balanced}.rs`.

/// The program's positional argument `index` (1 is the first; options
/// starting with `--` are not counted), parsed, or `None` if absent;
/// exits with `usage` if it does not parse, or an option is not `--seq`.
pub fn arg<T: std::str::FromStr>(index: usize, usage: &str) -> Option<T> {
    if std::env::args()
        .skip(1)
        .any(|a| a.starts_with("--") && a != "--seq")
    {
        eprintln!("usage: {usage}");
        std::process::exit(2)
    }
    let a = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with("--"))
        .nth(index.checked_sub(1)?)?;
    Some(a.parse().unwrap_or_else(|_| {
        eprintln!("usage: {usage}");
        std::process::exit(2)
    }))
}

/// Whether the program was called with the option `name` (`--seq`).
pub fn flag(name: &str) -> bool {
    std::env::args().skip(1).any(|a| a == name)
}

/// Runs `sequential` (the program's sequential reference), timed, after
/// the runtime has shut down, when the program was called with `--seq`:
/// prints its time and the balanced run's speedup over it, and exits 1
/// if its answer is not `balanced`.
pub fn compare_sequential<R: PartialEq + std::fmt::Debug>(
    program: &str,
    balanced: &R,
    balanced_secs: f64,
    sequential: impl FnOnce() -> R,
) {
    if !flag("--seq") {
        return;
    }
    let start = std::time::Instant::now();
    let answer = sequential();
    let secs = start.elapsed().as_secs_f64();
    println!(
        "{program}: sequential reference {secs:.3} s: the balanced run's speedup over it {:.2}x",
        secs / balanced_secs
    );
    if answer != *balanced {
        eprintln!(
            "{program}: WRONG: the sequential reference found {answer:?}, the balanced run {balanced:?}"
        );
        std::process::exit(1);
    }
}

/// Exits with the runtime's error, naming the program.
pub fn fail(program: &str, e: cantus::Error) -> ! {
    eprintln!("{program}: {e}");
    std::process::exit(2)
}

/// A balanced run: what it found, how long it took (inside the runtime,
/// start-up excluded), and on how many locales and workers.
pub struct Run<R> {
    /// The result and each locale's counts.
    pub outcome: cantus::balance::Outcome<R>,
    /// Seconds from the start of the computation to its end.
    pub secs: f64,
    /// Locales of the job.
    pub locales: usize,
    /// Workers of this locale.
    pub workers: usize,
}

/// Runs `work` balanced inside `cantus::run` (with the units per step
/// of the program's second argument, `UNITS`, if given), then `after` in
/// the same runtime; exits naming `program` if the runtime or the
/// computation fails, or with `usage` if `UNITS` does not parse.
pub fn run_balanced<W: cantus::balance::RegisteredWork, T: Send + 'static>(
    program: &str,
    usage: &str,
    work: W,
    after: impl FnOnce() -> T + Send + 'static,
) -> (Run<W::Result>, T) {
    let units: Option<u32> = arg(2, usage);
    let (outcome, secs, locales, workers, then) = cantus::run(move || {
        let mut balance = cantus::balance::Balance::new(work);
        if let Some(units) = units {
            balance = balance.units(units);
        }
        let start = std::time::Instant::now();
        let outcome = balance.run();
        let secs = start.elapsed().as_secs_f64();
        let then = after();
        let workers = cantus::query::workers().unwrap_or(0);
        (outcome, secs, cantus::num_locales(), workers, then)
    })
    .unwrap_or_else(|e| fail(program, e));
    let outcome = outcome.unwrap_or_else(|e| fail(program, e));
    let run = Run {
        outcome,
        secs,
        locales,
        workers,
    };
    (run, then)
}

impl<R> Run<R> {
    /// Prints `program: found in S s on L locale(s) of W worker(s)`, then
    /// each locale's counts.
    pub fn print(&self, program: &str, found: &str) {
        println!(
            "{program}: {found} in {:.3} s on {} locale(s) of {} worker(s)",
            self.secs, self.locales, self.workers
        );
        print!("{}", self.outcome.table());
    }
}
