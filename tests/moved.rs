//! The names that moved when the API was grouped by concept (README,
//! "Moved") still work at their old paths, as the same items.

#![allow(deprecated)]

use std::time::Duration;

/// Compiles only if both arguments have one type.
fn same_type<T>(_: &T, _: &T) {}

#[test]
fn old_constants_are_the_new_ones() {
    assert_eq!(cantus::DEFAULT_SPIN, cantus::config::DEFAULT_SPIN);
    assert_eq!(
        cantus::DEFAULT_STACK_SIZE,
        cantus::config::DEFAULT_STACK_SIZE
    );
    assert_eq!(cantus::MIN_STACK_SIZE, cantus::config::MIN_STACK_SIZE);
    assert_eq!(cantus::MAX_STACK_SIZE, cantus::config::MAX_STACK_SIZE);
    assert_eq!(
        cantus::DEFAULT_MAX_THREADS,
        cantus::config::DEFAULT_MAX_THREADS
    );
    assert_eq!(
        cantus::DEFAULT_DEADLOCK_MS,
        cantus::config::DEFAULT_DEADLOCK_MS
    );
    assert_eq!(
        cantus::DEFAULT_TRACE_EVENTS,
        cantus::config::DEFAULT_TRACE_EVENTS
    );
    assert_eq!(
        cantus::DEFAULT_RING_BYTES,
        cantus::config::DEFAULT_RING_BYTES
    );
    assert_eq!(
        cantus::DEFAULT_HEAP_BYTES,
        cantus::config::DEFAULT_HEAP_BYTES
    );
    assert_eq!(cantus::DEFAULT_GRAIN, cantus::config::DEFAULT_GRAIN);
}

#[test]
fn old_types_are_the_new_ones() {
    let old: cantus::WaitPolicy = cantus::WaitPolicy::Passive;
    same_type(&old, &cantus::config::WaitPolicy::Passive);
    let rt = cantus::Builder::new()
        .workers(2)
        .wait_policy(old)
        .build()
        .unwrap();
    let (got, id) = rt.block_on(|| {
        let h: cantus::RemoteHandle<u32> = cantus::on(cantus::here(), Twice(21));
        let id: cantus::TaskId = cantus::chant::me();
        (h.join(), id)
    });
    assert_eq!(got.unwrap(), 42);
    let new: cantus::chant::TaskId = id;
    same_type(&id, &new);
    let activity: Option<cantus::OutsideActivity> = cantus::OutsideActivity::begin();
    assert!(activity.is_some(), "a runtime runs");
}

#[derive(serde::Serialize, serde::Deserialize)]
struct Twice(u32);

impl cantus::Remote for Twice {
    type Output = u32;
    fn run(self) -> u32 {
        // The old task-control paths, run in a task.
        cantus::yield_now();
        cantus::query::yield_now();
        cantus::sleep(Duration::from_micros(10));
        cantus::query::sleep(Duration::from_micros(10));
        cantus::blocking(|| cantus::query::blocking(|| 2 * self.0))
    }
}
cantus::remote!(Twice);

#[derive(Clone, Copy, bytemuck::Pod, bytemuck::Zeroable)]
#[repr(C)]
struct Add1(u64);

impl cantus::RemotePod for Add1 {
    type Output = u64;
    fn run(self) -> u64 {
        self.0 + 1
    }
}
cantus::remote_pod!(Add1);

/// The old trait paths name the new traits.
fn old_bound<R: cantus::Registered>(_: &R) {}
fn old_pod_bound<R: cantus::RegisteredPod>(_: &R) {}
fn old_work_bound<W: cantus::balance::Registered>() {}

#[test]
fn old_functions_and_traits_still_work() {
    old_bound(&Twice(1));
    old_pod_bound(&Add1(1));
    old_work_bound::<cantus_programs::fib::Fib>();
    let rt = cantus::Runtime::builder().workers(2).build().unwrap();
    let got = rt.block_on(|| {
        cantus::begin_on_pod(cantus::here(), Add1(1)).unwrap();
        cantus::on_pod(cantus::here(), Add1(41)).join()
    });
    assert_eq!(got.unwrap(), 42);
}
