//! What a Chapel-style shim asks of the runtime's state:
//! `qthread_readstate` with every selector of Qthreads' `enum
//! introspective_state`, `qthread_cacheline` (`<qthread/cacheline.h>`)
//! and `qtimer_fastrand` (`<qthread/qtimer.h>`).

use super::NO_SHEPHERD;
use std::cell::Cell;
use std::ffi::{c_int, c_ulong};

/// `enum introspective_state`, as C passes it.
pub type IntrospectiveState = c_int;

/// The selectors, in the order of Qthreads' header.
const STACK_SIZE: c_int = 0;
const RUNTIME_DATA_SIZE: c_int = 1;
const BUSYNESS: c_int = 2;
const NODE_BUSYNESS: c_int = 3;
const ACTIVE_SHEPHERDS: c_int = 4;
const TOTAL_SHEPHERDS: c_int = 5;
const ACTIVE_WORKERS: c_int = 6;
const TOTAL_WORKERS: c_int = 7;
const WORKER_OCCUPATION: c_int = 8;
const CURRENT_SHEPHERD: c_int = 9;
const CURRENT_WORKER: c_int = 10;
const CURRENT_UNIQUE_WORKER: c_int = 11;
const CURRENT_TEAM: c_int = 12;
const PARENT_TEAM: c_int = 13;

/// What `qthread_readstate` answers for a selector it does not know, and
/// for `BUSYNESS` outside a worker (as Qthreads).
const UNKNOWN: usize = usize::MAX;

/// qthread_readstate: the runtime's state, by selector (qthread.h says
/// what each means on cantus).
#[unsafe(no_mangle)]
pub extern "C" fn qthread_readstate(which: IntrospectiveState) -> usize {
    crate::ffi::error::guarded(UNKNOWN, || readstate(which))
}

fn readstate(which: c_int) -> usize {
    let worker = super::current_shepherd();
    let no_worker = usize::from(NO_SHEPHERD);
    match which {
        STACK_SIZE => crate::sched::stack_size().unwrap_or(0),
        // Beside its stack, a task's runtime data: its guard page (the
        // stack's mapping) and the record its carrier keeps.
        RUNTIME_DATA_SIZE => crate::sched::task_runtime_bytes(),
        BUSYNESS => match (worker, crate::sched::current_queue_len()) {
            (Some(_), Some(queued)) => queued + 1,
            // The main task, on shepherd 0 (`main_task.rs`).
            (Some(w), None) => crate::sched::queue_len_of(w).map_or(UNKNOWN, |q| q + 1),
            _ => UNKNOWN,
        },
        // Qthreads counts its main task as running on shepherd 0.
        NODE_BUSYNESS => crate::query::snapshot().map_or(0, |s| {
            (s.queued + s.running) as usize + super::main_task::alive()
        }),
        WORKER_OCCUPATION => {
            crate::query::snapshot().map_or(0, |s| s.running as usize + super::main_task::alive())
        }
        TOTAL_SHEPHERDS | TOTAL_WORKERS => super::worker_count(false),
        // One worker per shepherd: a disabled shepherd's worker is idle.
        ACTIVE_SHEPHERDS | ACTIVE_WORKERS => super::worker_count(true),
        CURRENT_SHEPHERD | CURRENT_UNIQUE_WORKER => worker.unwrap_or(no_worker),
        // One worker per shepherd: a task's worker is its shepherd's 0th.
        CURRENT_WORKER => worker.map_or(no_worker, |_| 0),
        // The default team is 1, whose parent is none (0) (`team.rs`).
        CURRENT_TEAM => super::team::team_id() as usize,
        PARENT_TEAM => super::team::parent_team_id() as usize,
        _ => UNKNOWN,
    }
}

/// qthread_cacheline: the cache line size in bytes (the processor's
/// level-1 data cache line as the C library reports it; 64 if it does
/// not).
#[unsafe(no_mangle)]
pub extern "C" fn qthread_cacheline() -> c_int {
    crate::ffi::error::guarded(64, || {
        // SAFETY: sysconf has no preconditions.
        let n = unsafe { libc::sysconf(libc::_SC_LEVEL1_DCACHE_LINESIZE) };
        if n > 0 { n as c_int } else { 64 }
    })
}

thread_local! {
    /// This thread's state for `qtimer_fastrand` (0: not seeded yet).
    static FASTRAND: Cell<u64> = const { Cell::new(0) };
}

/// qtimer_fastrand: a cheap pseudo-random number (xorshift64* per
/// thread, seeded from the clock and the thread; Qthreads hashes the
/// clock). Not for cryptography.
#[unsafe(no_mangle)]
pub extern "C" fn qtimer_fastrand() -> c_ulong {
    crate::ffi::error::guarded(0, || {
        FASTRAND.with(|s| {
            let mut x = s.get();
            if x == 0 {
                let t = std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map_or(0, |d| d.as_nanos() as u64);
                let here = &x as *const u64 as u64;
                x = (t ^ here.rotate_left(32)) | 1;
            }
            x ^= x >> 12;
            x ^= x << 25;
            x ^= x >> 27;
            s.set(x);
            (x.wrapping_mul(0x2545_f491_4f6c_dd1d) >> 1) as c_ulong
        })
    })
}
