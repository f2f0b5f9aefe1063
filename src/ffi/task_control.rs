//! Task control (yield, sleep) and the queries of seed 000, section 3:
//! workers, running, queued, blocked and idle counts, task and worker ids.

use super::Code;
use super::error::{OK, boundary};
use super::lifecycle::require_runtime;
use crate::query;
use std::time::Duration;

/// `cantus_counts_t`: one snapshot of every count.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct CantusCounts {
    /// Worker threads.
    pub workers: u64,
    /// Tasks running now.
    pub running: u64,
    /// Tasks spawned and not started.
    pub queued: u64,
    /// Tasks blocked on full/empty variables, task lists or joins.
    pub blocked: u64,
    /// Tasks sleeping in `cantus_sleep_ns`.
    pub sleeping: u64,
    /// Outside threads blocked in cantus calls.
    pub blocked_outside_threads: u64,
    /// Workers with nothing to do.
    pub idle_workers: u64,
}

/// cantus_yield: lets other tasks run.
#[unsafe(no_mangle)]
pub extern "C" fn cantus_yield() -> Code {
    boundary("cantus_yield", || {
        require_runtime("cantus_yield")?;
        crate::task::yield_now();
        Ok(OK)
    })
}

/// cantus_sleep_ns: sleeps the calling task (or thread) for `ns` nanoseconds.
#[unsafe(no_mangle)]
pub extern "C" fn cantus_sleep_ns(ns: u64) -> Code {
    boundary("cantus_sleep_ns", || {
        require_runtime("cantus_sleep_ns")?;
        crate::task::sleep(Duration::from_nanos(ns));
        Ok(OK)
    })
}

fn snapshot(call: &str) -> Result<query::Snapshot, super::error::Fail> {
    require_runtime(call)?;
    query::snapshot().ok_or_else(|| super::error::Fail::no_runtime(call))
}

/// cantus_counts: fills `out` with one snapshot of every count.
///
/// # Safety
/// `out` is NULL or valid for writes of a `cantus_counts_t`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cantus_counts(out: *mut CantusCounts) -> Code {
    boundary("cantus_counts", || {
        super::tasks::non_null("cantus_counts", "out", out)?;
        let s = snapshot("cantus_counts")?;
        let c = CantusCounts {
            workers: s.workers as u64,
            running: s.running,
            queued: s.queued,
            blocked: s.blocked,
            sleeping: s.sleeping,
            blocked_outside_threads: s.blocked_outside_threads as u64,
            idle_workers: s.idle_workers as u64,
        };
        // SAFETY: checked non-null; the caller promises it is writable.
        unsafe { out.write(c) };
        Ok(OK)
    })
}

/// One count of a snapshot, as a query returns it.
fn count(call: &str, pick: impl FnOnce(&query::Snapshot) -> u64) -> i64 {
    boundary(call, || {
        Ok(pick(&snapshot(call)?).min(i64::MAX as u64) as i64)
    })
}

/// cantus_num_workers: worker threads, or a negative error code.
#[unsafe(no_mangle)]
pub extern "C" fn cantus_num_workers() -> i64 {
    count("cantus_num_workers", |s| s.workers as u64)
}

/// cantus_num_running: tasks running now, or a negative error code.
#[unsafe(no_mangle)]
pub extern "C" fn cantus_num_running() -> i64 {
    count("cantus_num_running", |s| s.running)
}

/// cantus_num_queued: tasks spawned and not started, or a negative error code.
#[unsafe(no_mangle)]
pub extern "C" fn cantus_num_queued() -> i64 {
    count("cantus_num_queued", |s| s.queued)
}

/// cantus_num_blocked: tasks blocked, or a negative error code.
#[unsafe(no_mangle)]
pub extern "C" fn cantus_num_blocked() -> i64 {
    count("cantus_num_blocked", |s| s.blocked)
}

/// cantus_num_idle_workers: idle workers, or a negative error code.
#[unsafe(no_mangle)]
pub extern "C" fn cantus_num_idle_workers() -> i64 {
    count("cantus_num_idle_workers", |s| s.idle_workers as u64)
}

/// cantus_task_id: the calling task's id (> 0), 0 in an outside thread,
/// or a negative error code.
#[unsafe(no_mangle)]
pub extern "C" fn cantus_task_id() -> i64 {
    boundary("cantus_task_id", || {
        require_runtime("cantus_task_id")?;
        Ok(query::current_task_id().map_or(0, |id| (id & i64::MAX as u64) as i64))
    })
}

/// cantus_worker_id: the index of the worker running the calling task,
/// `CANTUS_ECONTEXT` in an outside thread, or `CANTUS_ENORUNTIME`.
#[unsafe(no_mangle)]
pub extern "C" fn cantus_worker_id() -> i64 {
    boundary("cantus_worker_id", || {
        require_runtime("cantus_worker_id")?;
        query::current_worker().map(|w| w as i64).ok_or_else(|| {
            super::error::Fail::new(
                super::error::ECONTEXT,
                "cantus_worker_id called from an outside thread: only tasks run on workers",
            )
        })
    })
}
