//! A thread-per-task baseline modelled on Chapel's default `fifo` tasking
//! layer, which seed 000 measures cantus's model against:
//!
//! - every task runs on an OS thread of its own while it runs, and a task
//!   that waits blocks its thread (mutex and condition variable);
//! - a process-wide pool of tasks in FIFO order, under one lock;
//! - threads are started on demand, when a task is queued and no idle
//!   thread is left, up to a thread limit (Chapel's default: 255); a thread
//!   that finishes a task takes the oldest queued one, or waits idle;
//! - `cobegin` queues all its children, then the parent runs those that no
//!   thread has started yet itself, then waits for the rest (so a full
//!   pool cannot deadlock).
//!
//! Queued tasks are linked through headers on the parent's stack (an
//! intrusive doubly-linked list), so the parent can unlink a child that
//! was not started in O(1); Chapel's pool allocates a descriptor per task,
//! so this is if anything kinder to the baseline.

use std::cell::{Cell, UnsafeCell};
use std::panic::{self, AssertUnwindSafe};
use std::ptr;
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError, Weak};
use std::thread::{self, JoinHandle};

/// Chapel's default limit on threads.
pub(crate) const DEFAULT_THREAD_LIMIT: usize = 255;

thread_local! {
    /// The pool the calling thread belongs to (or runs `install` in).
    static CURRENT: Cell<*const Shared> = const { Cell::new(ptr::null()) };
}

/// A thread-per-task pool; dropping it stops and joins its threads.
pub(crate) struct Pool {
    shared: Arc<Shared>,
}

struct Shared {
    state: Mutex<State>,
    /// Idle threads wait here for a queued task.
    work: Condvar,
    limit: usize,
    handles: Mutex<Vec<JoinHandle<()>>>,
    /// This pool, for the threads it starts.
    me: Weak<Shared>,
}

/// Everything under the pool lock.
struct State {
    /// Oldest queued task (taken first) and newest.
    head: *const Header,
    tail: *const Header,
    /// Threads waiting on `work`.
    idle: usize,
    /// Notifications sent to idle threads that no thread has taken yet.
    wakes: usize,
    /// Threads started (or being started).
    threads: usize,
    shutdown: bool,
}

// SAFETY: the raw pointers name headers of queued tasks; they are only
// followed under the pool lock, and a header stays alive while queued
// (its parent does not return before the task was unlinked and has run).
unsafe impl Send for State {}

/// A queued task as the pool sees it. Lives in a [`StackJob`] on the
/// stack of the parent, which does not return before the job has run.
struct Header {
    /// Links of the FIFO list; `queued` says whether the header is in it.
    /// All three are read and written under the pool lock only.
    prev: Cell<*const Header>,
    next: Cell<*const Header>,
    queued: Cell<bool>,
    /// Runs the job: reads its closure, writes its result, then counts
    /// down `count`. Called once, by whoever unlinked the header.
    run: unsafe fn(*const Header),
    count: *const EndCount,
}

/// A cobegin's end count: a mutex and condition variable, as a Chapel
/// sync variable is in the fifo layer.
struct EndCount {
    left: Mutex<usize>,
    done: Condvar,
}

impl EndCount {
    fn new(n: usize) -> EndCount {
        EndCount {
            left: Mutex::new(n),
            done: Condvar::new(),
        }
    }

    fn done_one(&self) {
        let mut left = self.left.lock().unwrap_or_else(PoisonError::into_inner);
        *left -= 1;
        if *left == 0 {
            // Notify under the lock: the waiter cannot see zero and free
            // the count before we are done with the condition variable.
            // (Unlocking may still pass the mutex's address to a futex
            // wake after the waiter took the lock; the kernel only hashes
            // that address, as with rayon's LockLatch on a stack.)
            self.done.notify_one();
        }
    }

    fn wait(&self) {
        let mut left = self.left.lock().unwrap_or_else(PoisonError::into_inner);
        while *left != 0 {
            left = self.done.wait(left).unwrap_or_else(PoisonError::into_inner);
        }
    }
}

#[repr(C)]
struct StackJob<F, R> {
    /// First field, so a `*const Header` is a `*const StackJob`.
    header: Header,
    func: UnsafeCell<Option<F>>,
    result: UnsafeCell<Option<thread::Result<R>>>,
}

impl<F: FnOnce() -> R + Send, R: Send> StackJob<F, R> {
    fn new(f: F, count: &EndCount) -> StackJob<F, R> {
        StackJob {
            header: Header {
                prev: Cell::new(ptr::null()),
                next: Cell::new(ptr::null()),
                queued: Cell::new(false),
                run: run_job::<F, R>,
                count,
            },
            func: UnsafeCell::new(Some(f)),
            result: UnsafeCell::new(None),
        }
    }

    /// The result, once the job's end count reached zero.
    fn into_result(self) -> R {
        match self.result.into_inner() {
            Some(Ok(r)) => r,
            Some(Err(p)) => panic::resume_unwind(p),
            None => unreachable!("a fifo job finished without a result"),
        }
    }
}

/// # Safety
/// `h` is the header of a live `StackJob<F, R>` that the caller unlinked
/// from the pool (or never queued); called once per job.
unsafe fn run_job<F: FnOnce() -> R + Send, R: Send>(h: *const Header) {
    let job = h.cast::<StackJob<F, R>>();
    // SAFETY: per the contract the job is live and only we access its
    // closure and result now (its parent reads the result only after the
    // end count, which we decrement last).
    let f = unsafe { (*(*job).func.get()).take() }.expect("a fifo job runs once");
    let r = panic::catch_unwind(AssertUnwindSafe(f));
    // SAFETY: as above.
    let count = unsafe {
        *(*job).result.get() = Some(r);
        &*(*h).count
    };
    // The last access to the job: after this the parent may return.
    count.done_one();
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Queues jobs at the tail, waking an idle thread or starting a new
    /// one (below the limit) for each.
    fn enqueue(&self, jobs: &[&Header]) {
        let mut start = 0;
        {
            let mut st = self.lock();
            for &h in jobs {
                h.prev.set(st.tail);
                h.next.set(ptr::null());
                h.queued.set(true);
                if st.tail.is_null() {
                    st.head = h;
                } else {
                    // SAFETY: the tail is a queued, live header (State's
                    // invariant) and we hold the lock.
                    unsafe { (*st.tail).next.set(h) };
                }
                st.tail = h;
                if st.idle > st.wakes {
                    st.wakes += 1;
                    self.work.notify_one();
                } else if st.threads < self.limit {
                    st.threads += 1;
                    start += 1;
                }
            }
        }
        // Start threads outside the lock: starting one takes microseconds.
        for _ in 0..start {
            let shared = self.me.upgrade().expect("a pool in use is alive");
            let spawned = thread::Builder::new()
                .name("fifo-task".into())
                .spawn(move || thread_main(shared));
            match spawned {
                Ok(h) => self
                    .handles
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .push(h),
                // The task stays queued; its parent will run it.
                Err(_) => self.lock().threads -= 1,
            }
        }
    }

    /// Unlinks `h` if it is still queued; true if the caller now owns it.
    fn claim(&self, h: &Header) -> bool {
        let mut st = self.lock();
        if !h.queued.get() {
            return false;
        }
        st.unlink(h);
        true
    }
}

impl State {
    /// Unlinks a queued header. The caller holds the lock.
    fn unlink(&mut self, h: &Header) {
        let (prev, next) = (h.prev.get(), h.next.get());
        if prev.is_null() {
            self.head = next;
        } else {
            // SAFETY: linked neighbours are queued, live headers.
            unsafe { (*prev).next.set(next) };
        }
        if next.is_null() {
            self.tail = prev;
        } else {
            // SAFETY: as above.
            unsafe { (*next).prev.set(prev) };
        }
        h.queued.set(false);
    }

    /// Unlinks and returns the oldest queued header.
    fn pop_front(&mut self) -> Option<*const Header> {
        let h = self.head;
        if h.is_null() {
            return None;
        }
        // SAFETY: the head is a queued, live header.
        self.unlink(unsafe { &*h });
        Some(h)
    }
}

fn thread_main(shared: Arc<Shared>) {
    CURRENT.with(|c| c.set(Arc::as_ptr(&shared)));
    let mut st = shared.lock();
    loop {
        if let Some(h) = st.pop_front() {
            drop(st);
            // SAFETY: we unlinked `h` under the lock, so it is ours to run,
            // and its parent keeps it alive until it has run.
            unsafe { ((*h).run)(h) };
            st = shared.lock();
            continue;
        }
        if st.shutdown {
            break;
        }
        st.idle += 1;
        st = shared.work.wait(st).unwrap_or_else(PoisonError::into_inner);
        st.idle -= 1;
        st.wakes = st.wakes.saturating_sub(1);
    }
    drop(st);
    CURRENT.with(|c| c.set(ptr::null()));
}

impl Pool {
    /// A pool that starts at most `limit` threads.
    pub(crate) fn new(limit: usize) -> Pool {
        Pool {
            shared: Arc::new_cyclic(|me| Shared {
                state: Mutex::new(State {
                    head: ptr::null(),
                    tail: ptr::null(),
                    idle: 0,
                    wakes: 0,
                    threads: 0,
                    shutdown: false,
                }),
                work: Condvar::new(),
                limit: limit.max(1),
                handles: Mutex::new(Vec::new()),
                me: me.clone(),
            }),
        }
    }

    /// Runs `f` on the calling thread as the pool's main task: [`join`]
    /// called inside uses this pool.
    pub(crate) fn install<R>(&self, f: impl FnOnce() -> R) -> R {
        struct Restore(*const Shared);
        impl Drop for Restore {
            fn drop(&mut self) {
                CURRENT.with(|c| c.set(self.0));
            }
        }
        let _restore = Restore(CURRENT.with(|c| c.replace(Arc::as_ptr(&self.shared))));
        f()
    }

    /// Threads started so far.
    pub(crate) fn threads(&self) -> usize {
        self.shared.lock().threads
    }
}

impl Drop for Pool {
    fn drop(&mut self) {
        self.shared.lock().shutdown = true;
        self.shared.work.notify_all();
        let handles = std::mem::take(
            &mut *self
                .shared
                .handles
                .lock()
                .unwrap_or_else(PoisonError::into_inner),
        );
        for h in handles {
            let _ = h.join();
        }
    }
}

/// `cobegin { a; b; }` on the fifo layer: queues both, runs the ones not
/// started yet on this thread, waits for the others.
///
/// # Panics
/// Outside [`Pool::install`] and the pool's threads.
pub(crate) fn join<A, B, RA, RB>(a: A, b: B) -> (RA, RB)
where
    A: FnOnce() -> RA + Send,
    B: FnOnce() -> RB + Send,
    RA: Send,
    RB: Send,
{
    let p = CURRENT.with(|c| c.get());
    assert!(!p.is_null(), "fifo::join outside a fifo pool");
    // SAFETY: CURRENT is set only while an Arc<Shared> is held: by
    // thread_main for its whole life, by install for its duration.
    let shared = unsafe { &*p };
    let count = EndCount::new(2);
    let ja = StackJob::new(a, &count);
    let jb = StackJob::new(b, &count);
    shared.enqueue(&[&ja.header, &jb.header]);
    for h in [&ja.header, &jb.header] {
        if shared.claim(h) {
            // SAFETY: we unlinked it, so no thread runs it; it is live.
            unsafe { (h.run)(h) };
        }
    }
    // No early return above (run_job catches panics), so both jobs have
    // been unlinked and will count down before `count` goes away.
    count.wait();
    (ja.into_result(), jb.into_result())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fib(n: u64) -> u64 {
        if n < 2 {
            return n;
        }
        let (a, b) = join(|| fib(n - 1), || fib(n - 2));
        a + b
    }

    #[test]
    fn fib_on_a_small_pool() {
        let pool = Pool::new(8);
        assert_eq!(pool.install(|| fib(18)), 2584);
        assert!(pool.threads() <= 8);
    }

    #[test]
    fn a_pool_of_one_thread_cannot_deadlock() {
        let pool = Pool::new(1);
        assert_eq!(pool.install(|| fib(15)), 610);
    }

    #[test]
    fn panics_reach_the_parent() {
        let pool = Pool::new(4);
        let r = panic::catch_unwind(AssertUnwindSafe(|| {
            pool.install(|| join(|| 1, || panic!("boom")))
        }));
        assert!(r.is_err());
        assert_eq!(pool.install(|| join(|| 1, || 2)), (1, 2));
    }
}
