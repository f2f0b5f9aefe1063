//! `cantus-bench`: benchmarks of cantus side by side with its peers
//! (GNU OpenMP, rayon, a thread-per-task baseline), measured in one run.
//!
//! Every figure is printed as `<name> <value> <unit>`, and every peer
//! comparison as `<name>/<peer> <ratio>` (cantus time / peer time, so
//! below 1 means cantus is faster). A peer's own figure is named
//! `<name>.<peer>`. Figures are medians over repetitions; progress, notes
//! and spreads go to stderr.
//!
//! ```text
//! cantus-bench micro   spawn (vs OpenMP), spawn+join, yield, hand-off
//! cantus-bench apps    fib30 (vs rayon), quicksort and tree (vs rayon, fifo)
//! cantus-bench all     both
//! cantus-bench comm    two locales: active-message round trip, pipelined and
//!                      streamed calls vs the raw ring and Open MPI
//! cantus-bench suite   LCALS kernels, STREAM, STREAM-EP, RandomAccess vs OpenMP
//!                      (its own options: cantus-bench suite --help)
//! cantus-bench scale   speedup over serial at 1, 2, 4, ... workers up to the CPUs:
//!                      fib, quicksort, tree, UTS, LCALS vs rayon and OpenMP
//!                      (its own options: cantus-bench scale --help)
//! cantus-bench balance     work stealing across locales: fib, N-Queens, UTS T1/T3,
//!                          Pentomino on 1 and 2 locales vs sequential; vs join
//! cantus-bench balance-sim the protocol on 16-256 simulated locales, with and
//!                          without lifelines
//! options: --quick (small sizes, few reps: a smoke run), --reps N,
//!          --fifo-threads N (thread limit of the fifo baseline, 255),
//!          --only SECTION (micro, apps, comm: the sections whose name
//!          starts so; comm has `am` and `transfer`)
//! ```

mod apps;
mod balance;
mod comm;
mod deque;
mod fifo;
mod latency;
mod micro;
mod openmp;
mod raw_bulk;
mod scale;
mod stackmem;
mod stats;
mod suite;
mod trace;

/// Command-line options shared by the subcommands.
pub(crate) struct Options {
    /// Small sizes and few repetitions.
    pub(crate) quick: bool,
    /// Repetitions per figure, overriding the default.
    pub(crate) reps: Option<usize>,
    /// Thread limit of the fifo baseline.
    pub(crate) fifo_threads: usize,
    /// Run only the sections whose name starts with this (`--only`).
    pub(crate) only: Option<String>,
}

impl Options {
    /// Whether the section `name` is to run.
    pub(crate) fn wants(&self, name: &str) -> bool {
        self.only.as_deref().is_none_or(|o| name.starts_with(o))
    }
}

pub(crate) fn usage() -> ! {
    eprintln!(
        "usage: cantus-bench <micro|apps|all|comm|suite|scale|latency|deque|stack-memory N|balance|balance-sim|trace> [--quick] [--reps N] [--fifo-threads N] [--only SECTION]\n\
         \n\
         Prints `<name> <value> <unit>` per figure and `<name>/<peer> <ratio>`\n\
         (cantus time / peer time) per comparison; notes go to stderr."
    );
    std::process::exit(2);
}

/// Starts a cantus runtime configured from the environment (`CANTUS_*`).
pub(crate) fn start_cantus() -> cantus::Runtime {
    cantus::Runtime::builder().build().unwrap_or_else(|e| {
        eprintln!("cantus-bench: cannot start cantus: {e}");
        std::process::exit(2);
    })
}

/// Starts a cantus runtime with `workers` workers, otherwise configured
/// from the environment (which overrides the count if it sets
/// `CANTUS_WORKERS`).
/// A runtime with `workers` workers and, if given, that task stack size
/// (the environment overrides both, as always).
pub(crate) fn start_cantus_with(workers: usize, stack: Option<usize>) -> cantus::Runtime {
    let mut builder = cantus::Runtime::builder().workers(workers);
    if let Some(bytes) = stack {
        builder = builder.stack_size(bytes);
    }
    builder.build().unwrap_or_else(|e| {
        eprintln!("cantus-bench: cannot start cantus with {workers} workers: {e}");
        std::process::exit(2);
    })
}

fn parse_options(args: &[String]) -> Options {
    let mut opts = Options {
        quick: false,
        reps: None,
        fifo_threads: fifo::DEFAULT_THREAD_LIMIT,
        only: None,
    };
    let mut it = args.iter();
    while let Some(a) = it.next() {
        let mut count = |what: &str| -> usize {
            match it.next().and_then(|v| v.parse().ok()) {
                Some(n) if n > 0 => n,
                _ => {
                    eprintln!("cantus-bench: {what} needs a positive integer");
                    usage();
                }
            }
        };
        match a.as_str() {
            "--quick" => opts.quick = true,
            "--reps" => opts.reps = Some(count("--reps")),
            "--fifo-threads" => opts.fifo_threads = count("--fifo-threads"),
            "--only" => match it.next() {
                Some(name) => opts.only = Some(name.clone()),
                None => {
                    eprintln!("cantus-bench: --only needs a section name");
                    usage();
                }
            },
            _ => {
                eprintln!("cantus-bench: unknown option {a}");
                usage();
            }
        }
    }
    opts
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let Some(cmd) = args.first() else { usage() };
    let rest = &args[1..];
    match cmd.as_str() {
        "micro" => micro::run(&parse_options(rest)),
        "deque" => deque::run(&parse_options(rest)),
        "stack-memory" => stackmem::run(rest),
        "latency" => {
            let o = parse_options(rest);
            latency::run(o.reps.unwrap_or(if o.quick { 2 } else { 5 }), o.quick)
        }
        "apps" => apps::run(&parse_options(rest)),
        "comm" => comm::run(&parse_options(rest)),
        "trace" => trace::run(&parse_options(rest)),
        "suite" => suite::run(rest),
        "scale" => scale::run(rest),
        "balance" => balance::run(&parse_options(rest)),
        "balance-sim" => balance::sim(&parse_options(rest)),
        "__balance_child" => balance::child(rest),
        "all" => {
            let opts = parse_options(rest);
            micro::run(&opts);
            apps::run(&opts);
        }
        // Re-executed by `micro` with CANTUS_WORKERS=1.
        "__handoff_child" => micro::handoff_child(rest),
        _ => usage(),
    }
}
