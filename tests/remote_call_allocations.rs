//! Steady-state remote calls allocate nothing (issue 15): after a warm-up,
//! round trips of a plain-data call and of a serde call with fixed-size
//! arguments make no heap allocation on either locale. A counting global
//! allocator counts every allocation of the process (all threads); each
//! test runs its body in a child process (locale 0) under the kill
//! timeout of `tests/common`, and locale 1 reports its own count through
//! a remote call.

mod common;

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicU64, Ordering};

/// The system allocator, counting allocations and reallocations.
struct Counting;

static ALLOCATIONS: AtomicU64 = AtomicU64::new(0);

// SAFETY: every call is passed on to `System` unchanged; the counter has
// no effect on the memory handed out.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        // SAFETY: the caller's contract for `alloc`, passed on.
        unsafe { System.alloc(layout) }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        // SAFETY: the caller's contract for `alloc_zeroed`, passed on.
        unsafe { System.alloc_zeroed(layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        // SAFETY: the caller's contract for `realloc`, passed on.
        unsafe { System.realloc(ptr, layout, new_size) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: the caller's contract for `dealloc`, passed on.
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static COUNTING: Counting = Counting;

fn allocations_here() -> u64 {
    ALLOCATIONS.load(Ordering::Relaxed)
}

cantus::remote_fn! {
    /// This locale's allocations so far.
    fn allocations() -> u64 {
        allocations_here()
    }
}

cantus::remote_fn! {
    /// A serde call with fixed-size arguments.
    fn weigh(seed: u64, weights: [u32; 4]) -> u64 {
        weights.iter().fold(seed, |h, &w| h.wrapping_mul(31).wrapping_add(w as u64))
    }
}

/// A plain-data call.
#[derive(Clone, Copy, bytemuck::Pod, bytemuck::Zeroable)]
#[repr(C)]
struct Bump(u64);
impl cantus::remote::RemotePod for Bump {
    type Output = u64;
    fn run(self) -> u64 {
        self.0 + 1
    }
}
cantus::remote_pod!(Bump);

/// Round trips timed by allocation count, not by clock.
const CALLS: u64 = 4_000;
/// Allocations tolerated over all of `CALLS` calls, on each locale: none
/// per call; a few for anything the runtime does once in a while
/// (a buffer that grows to a new high-water mark).
const SLACK: u64 = 8;

/// Runs `body` in a child process whose job has two locales (one worker
/// each), and asserts it succeeded.
fn in_job(test: &str, body: impl FnOnce() + Send) {
    let _ = common::in_job(test, 2, &[], body);
}

/// Makes `CALLS` calls with `call` after as many to warm up, and asserts
/// that neither locale allocated more than `slack` times for them.
fn assert_allocations_at_most(slack: u64, what: &str, call: impl Fn(u64) -> u64) {
    for i in 0..CALLS {
        call(i);
    }
    let there = cantus::on(1, allocations()).join().unwrap();
    let here = allocations_here();
    for i in 0..CALLS {
        call(i);
    }
    let here = allocations_here() - here;
    let there = cantus::on(1, allocations()).join().unwrap() - there;
    assert!(
        here <= slack && there <= slack,
        "{CALLS} calls of {what} allocated {here} times on locale 0 and {there} times on \
         locale 1 (at most {slack} each allowed)"
    );
}

/// Round trips: none per call.
fn assert_no_allocations(what: &str, call: impl Fn(u64) -> u64) {
    assert_allocations_at_most(SLACK, what, call);
}

#[test]
fn plain_data_round_trips_allocate_nothing() {
    in_job("plain_data_round_trips_allocate_nothing", || {
        assert_no_allocations("on_pod(1, Bump)", |i| {
            let r = cantus::remote::on_pod(1, Bump(i)).join().unwrap();
            assert_eq!(r, i + 1);
            r
        });
    });
}

#[test]
fn serde_round_trips_with_fixed_size_arguments_allocate_nothing() {
    in_job(
        "serde_round_trips_with_fixed_size_arguments_allocate_nothing",
        || {
            assert_no_allocations("on(1, weigh(..))", |i| {
                let w = [i as u32, 1, 2, 3];
                let r = cantus::on(1, weigh(i, w)).join().unwrap();
                assert_eq!(r, cantus::Remote::run(weigh(i, w)));
                r
            });
        },
    );
}

#[test]
fn detached_calls_reuse_their_records() {
    in_job("detached_calls_reuse_their_records", || {
        // Detached calls back to back (the sender polls when the ring is
        // full). Their handler tasks queue up on locale 1 faster than they
        // run, and each queued one holds a record (`remote/serve.rs`): a
        // record is made only when the backlog reaches a new peak, so far
        // fewer than one per call (before records were kept: three).
        assert_allocations_at_most(CALLS / 20, "begin_on_pod(1, Bump)", |i| {
            cantus::remote::begin_on_pod(1, Bump(i)).unwrap();
            i
        });
    });
}
