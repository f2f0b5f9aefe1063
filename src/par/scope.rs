//! Structured task scopes: tasks that may borrow from the caller's stack,
//! all finished before `scope` returns.

use super::completion::{Scoped, push_group_task};
use super::join::wait_group;
use crate::sched::WorkerLocal;
use crate::sync::end_count::EndCount;
use crate::sync::wait::BlockKind;
use std::marker::PhantomData;
use std::panic::{self, AssertUnwindSafe};

/// A scope for spawning tasks that borrow from the enclosing stack; see
/// [`scope`].
pub struct Scope<'scope, 'env: 'scope> {
    count: EndCount,
    scope: PhantomData<&'scope mut &'scope ()>,
    env: PhantomData<&'env mut &'env ()>,
}

/// Creates a scope, runs `f` in it, and waits for every task spawned in it
/// (including tasks spawned by those tasks) before returning. The first
/// panic, of `f` or of a task, is re-raised here once all are done.
///
/// ```
/// let rt = cantus::Runtime::builder().workers(2).build().unwrap();
/// let mut halves = [0u64; 2];
/// let data: Vec<u64> = (1..=100).collect();
/// rt.block_on(|| {
///     let (lo, hi) = halves.split_at_mut(1);
///     cantus::scope(|s| {
///         s.spawn(|| lo[0] = data[..50].iter().sum());
///         s.spawn(|| hi[0] = data[50..].iter().sum());
///     });
/// });
/// assert_eq!(halves[0] + halves[1], 5050);
/// ```
pub fn scope<'env, F, R>(f: F) -> R
where
    F: for<'scope> FnOnce(&'scope Scope<'scope, 'env>) -> R,
{
    let s = Scope {
        count: EndCount::new(0),
        scope: PhantomData,
        env: PhantomData,
    };
    let r = panic::catch_unwind(AssertUnwindSafe(|| f(&s)));
    s.wait_all();
    let task_panic = s.count.take_panic();
    match r {
        Err(p) => panic::resume_unwind(p),
        Ok(v) => {
            if let Some(p) = task_panic {
                panic::resume_unwind(p);
            }
            v
        }
    }
}

impl<'scope> Scope<'scope, '_> {
    /// Spawns a task that may borrow anything that outlives the scope.
    /// Closures of up to four words are stored in the task itself: no
    /// allocation. Panics if no runtime is running (the panic names the
    /// caller's line).
    #[track_caller]
    pub fn spawn<F>(&'scope self, f: F)
    where
        F: FnOnce() + Send + 'scope,
    {
        self.count.add(1);
        let count = &self.count as *const EndCount as *const ();
        // SAFETY: everything `f` borrows outlives 'scope, and the scope
        // does not end (wait_all) before the count, which this task
        // decrements last, is zero.
        unsafe { push_group_task::<F, Scoped>(f, count, "Scope::spawn") }
    }

    /// Tasks spawned in this scope that have not finished.
    pub fn pending(&self) -> usize {
        self.count.count()
    }

    fn wait_all(&self) {
        let group = &self.count as *const EndCount as *const ();
        match WorkerLocal::current().filter(|l| l.in_task()) {
            Some(local) => wait_group(local, &self.count, group),
            None => self.count.wait_blocking(BlockKind::GroupWait),
        }
    }
}
