//! `cantus-bench stack-memory N`: memory held by N blocked tasks. Starts
//! N tasks that each block on one `SingleVar`, waits until all N are
//! blocked, then reads the process's resident memory and page-table size
//! from /proc, releases them, and checks every task ran. Also reports the
//! root task's stack: a serial recursion 4000 frames deep (about 2 MiB)
//! in the closure given to `block_on`.
//!
//! 10^6 blocked tasks need about 2 * 10^6 memory mappings (a stack and
//! its guard page each): raise `vm.max_map_count` first.

use crate::stats::{note, value};
use std::sync::atomic::{AtomicU64, Ordering};

fn status_kib(field: &str) -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with(field))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|v| v.parse().ok())
        })
        .unwrap_or(0)
}

fn deep(depth: u32) -> u64 {
    let frame = std::hint::black_box([depth as u64; 60]);
    if depth == 0 {
        frame[1]
    } else {
        deep(depth - 1) + frame[7]
    }
}

pub(crate) fn run(args: &[String]) {
    let n: u64 = args.first().and_then(|a| a.parse().ok()).unwrap_or(100_000);
    let rt = crate::start_cantus();
    let before_rss = status_kib("VmRSS:");
    let before_pte = status_kib("VmPTE:");
    let gate = cantus::SingleVar::<u64>::new();
    let ran = AtomicU64::new(0);
    let (rss, pte, blocked) = rt.block_on(|| {
        let mut measured = (0, 0, 0);
        cantus::scope(|s| {
            s.spawn(|| {
                cantus::coforall(n as usize, |_| {
                    ran.fetch_add(*gate.read(), Ordering::Relaxed);
                })
            });
            let t0 = std::time::Instant::now();
            loop {
                let b = cantus::query::snapshot().unwrap().blocked;
                if b >= n {
                    measured = (status_kib("VmRSS:"), status_kib("VmPTE:"), b);
                    break;
                }
                assert!(
                    t0.elapsed().as_secs() < 600,
                    "only {b} of {n} tasks blocked after 10 minutes"
                );
                std::thread::sleep(std::time::Duration::from_millis(20));
            }
            gate.write(1);
        });
        measured
    });
    assert_eq!(ran.load(Ordering::Relaxed), n, "every blocked task ran");
    note(&format!(
        "stack-memory: {blocked} tasks were blocked at once"
    ));
    value("stack_memory.blocked_tasks", n as f64, "tasks");
    value(
        "stack_memory.rss_per_blocked_task",
        (rss.saturating_sub(before_rss)) as f64 * 1024.0 / n as f64,
        "bytes",
    );
    value(
        "stack_memory.page_tables_per_blocked_task",
        (pte.saturating_sub(before_pte)) as f64 * 1024.0 / n as f64,
        "bytes",
    );
    let rss0 = status_kib("VmRSS:");
    let r = rt.block_on(|| deep(4000));
    value(
        "stack_memory.root_recursion_4000_frames",
        r as f64,
        "checksum",
    );
    value(
        "stack_memory.rss_after_root_recursion_kib",
        status_kib("VmRSS:").saturating_sub(rss0) as f64,
        "KiB",
    );
    rt.shutdown();
}
