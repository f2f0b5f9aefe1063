//! The scheduler's inbox and migrations (`sched/worker/migrate.rs`), on
//! which `qthread_fork_to` and `qthread_migrate_to` stand: tested here,
//! above the layers they use (tasks, variables), on the unit tests'
//! shared runtime.

use crate::sched::worker::migrate::{Unmoved, migrate_current, place_on};
use crate::sync::SyncVar;
use std::sync::Arc;

/// The worker running the caller, looked up by a call that is never
/// inlined (a test body spans a migration: `sched/worker/migrate.rs`).
#[inline(never)]
fn worker_now() -> Option<usize> {
    std::hint::black_box(crate::query::current_worker())
}

/// Where a migrant was: before, right after the move, after a yield
/// and after blocking on a variable another task writes.
type Trail = (usize, usize, usize, usize);

/// The unit tests' shared runtime has two workers.
const WORKERS: usize = 2;

#[test]
fn a_task_moves_to_every_worker_and_goes_on_there() {
    let _rt = crate::ffi::lifecycle::shared_test_runtime();
    let mut all = Vec::new();
    for to in 0..WORKERS {
        for _ in 0..8 {
            let done: Arc<SyncVar<Trail>> = Arc::new(SyncVar::new());
            let gate: Arc<SyncVar<()>> = Arc::new(SyncVar::new());
            let (d, g) = (done.clone(), gate.clone());
            // Detached tasks: nothing but the scheduler's frames lie
            // below their bodies.
            crate::par::begin(move || {
                let before = worker_now().unwrap();
                migrate_current(to).unwrap();
                let moved = worker_now().unwrap();
                crate::task::yield_now();
                let yielded = worker_now().unwrap();
                g.read_fe();
                d.write_ef((before, moved, yielded, worker_now().unwrap()));
            });
            let g = gate.clone();
            crate::par::begin(move || g.write_ef(()));
            all.push((to, done));
        }
    }
    // This (outside) thread waits as a thread.
    for (to, done) in all {
        let (before, moved, yielded, woken) = done.read_fe();
        assert!(before < WORKERS);
        assert_eq!((moved, yielded, woken), (to, to, to), "from {before}");
    }
}

#[test]
fn placed_tasks_run_on_their_worker_and_bad_moves_are_refused() {
    let _rt = crate::ffi::lifecycle::shared_test_runtime();
    let reg = crate::sched::Registry::current().unwrap();
    let mut cells = Vec::new();
    for round in 0..50 {
        let w = round % WORKERS;
        let cell: Arc<SyncVar<(usize, usize)>> = Arc::new(SyncVar::new());
        let c = cell.clone();
        // SAFETY: the closure is 'static.
        let task = unsafe {
            crate::sched::new_task::Task::from_closure(
                move || c.write_ef((w, worker_now().unwrap())),
                std::ptr::null(),
            )
        };
        place_on(&reg, w, task);
        cells.push(cell);
    }
    for c in cells {
        let (aimed, ran) = c.read_fe();
        assert_eq!(aimed, ran);
    }
    let refused: Arc<SyncVar<Result<(), Unmoved>>> = Arc::new(SyncVar::new());
    let r = refused.clone();
    crate::par::begin(move || r.write_ef(migrate_current(WORKERS)));
    assert_eq!(refused.read_fe(), Err(Unmoved::NoWorker));
    // Outside any task.
    assert_eq!(migrate_current(0), Err(Unmoved::NotATask));
}
