//! Millions of tasks in bounded memory. Each pattern runs once to reach
//! its steady state (pools, deque buffers, allocator arenas), then five
//! times more: resident memory must not grow with the number of tasks run. The
//! patterns: tasks that run straight through (coforall, joins), ten
//! thousand tasks queued at once (fifty times), and ten thousand tasks blocked at once.

use cantus::{SingleVar, TaskGroup};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};

fn rt() -> &'static cantus::Runtime {
    static RT: OnceLock<cantus::Runtime> = OnceLock::new();
    RT.get_or_init(|| {
        cantus::Runtime::builder()
            .workers(2)
            .ignore_environment()
            .build()
            .unwrap()
    })
}

fn resident_bytes() -> u64 {
    let statm = std::fs::read_to_string("/proc/self/statm").unwrap();
    let pages: u64 = statm.split_whitespace().nth(1).unwrap().parse().unwrap();
    pages * 4096
}

const MIB: u64 = 1 << 20;

/// Runs `pattern` once, then `RUNS` more times; checks that resident
/// memory after the first run grows by less than `slack` over the rest
/// (a leak of a few bytes per task would exceed it). Returns the tasks the
/// runs reported.
fn bounded(name: &str, runs: u64, slack: u64, pattern: impl Fn() -> u64) -> u64 {
    let mut tasks = pattern();
    let steady = resident_bytes();
    for _ in 0..runs {
        tasks += pattern();
    }
    let after = resident_bytes();
    eprintln!(
        "{name}: after one run {} MiB, after {runs} more {} MiB",
        steady / MIB,
        after / MIB
    );
    assert!(
        after.saturating_sub(steady) < slack,
        "{name}: resident memory grew by {} MiB over {runs} more runs",
        (after - steady) / MIB
    );
    tasks
}

#[test]
fn millions_of_tasks_in_bounded_memory() {
    let ran = bounded("coforall of 2M", 5, 4 * MIB, || {
        let n = AtomicU64::new(0);
        rt().block_on(|| {
            cantus::coforall(2_000_000, |_| {
                n.fetch_add(1, Ordering::Relaxed);
            })
        });
        n.into_inner()
    });
    assert_eq!(ran, 12_000_000);

    // Storage for queued tasks is proportional to how many are queued at
    // once: 64 bytes each, in a deque buffer that doubles and whose old
    // copies crossbeam frees a little later. 10k at once, 50 times.
    let ran = bounded("10k queued at once", 50, 8 * MIB, || {
        let n = Arc::new(AtomicU64::new(0));
        rt().block_on(|| {
            let g = TaskGroup::new();
            for _ in 0..10_000 {
                let n = n.clone();
                g.spawn(move || {
                    n.fetch_add(1, Ordering::Relaxed);
                });
            }
            g.wait();
        });
        n.load(Ordering::Relaxed)
    });
    assert_eq!(ran, 510_000);

    fn tree(depth: u32) -> u64 {
        if depth == 0 {
            return 1;
        }
        let (a, b) = cantus::join(|| tree(depth - 1), || tree(depth - 1));
        a + b
    }
    let ran = bounded("1M joins", 5, 4 * MIB, || rt().block_on(|| tree(20)));
    assert_eq!(ran, 6 << 20);

    let ran = bounded("10k blocked at once", 5, 8 * MIB, || {
        let n = AtomicU64::new(0);
        let gate = SingleVar::new();
        rt().block_on(|| {
            cantus::scope(|s| {
                s.spawn(|| {
                    cantus::coforall(10_000, |_| {
                        n.fetch_add(*gate.read(), Ordering::Relaxed);
                    })
                });
                while cantus::query::snapshot().unwrap().blocked < 9_000 {
                    cantus::task::sleep(std::time::Duration::from_millis(1));
                }
                gate.write(1);
            })
        });
        n.into_inner()
    });
    assert_eq!(ran, 60_000);
}
