//! Calls made with no runtime running get a clear error, never undefined
//! behaviour (seed 000, section 4.1); sync variables work without one.

use std::sync::Arc;

#[test]
fn spawning_without_a_runtime_is_a_clear_error() {
    let e = cantus::try_begin(|| ()).unwrap_err();
    assert_eq!(e.kind(), cantus::ErrorKind::NoRuntime);
    assert_eq!(
        e.to_string(),
        "cantus::begin called with no runtime running: wrap your program in \
         cantus::run(|| ...) or start a cantus::Runtime first"
    );
    // `unwrap()` prints Debug: the same sentence after the kind.
    assert_eq!(format!("{e:?}"), format!("Error(NoRuntime): {e}"));

    let r = std::panic::catch_unwind(|| cantus::coforall(4, |_| ()));
    let msg = r.unwrap_err().downcast::<String>().unwrap();
    assert!(msg.contains("no runtime running"), "{msg}");
    assert!(msg.contains("cantus::run(|| ...)"), "{msg}");

    let r = std::panic::catch_unwind(|| cantus::scope(|s| s.spawn(|| ())));
    let msg = r.unwrap_err().downcast::<String>().unwrap();
    assert!(
        msg.contains("Scope::spawn called with no runtime running"),
        "{msg}"
    );

    let r = std::panic::catch_unwind(|| cantus::join(|| 1, || 2));
    assert!(r.is_err());
    assert_eq!(cantus::query::snapshot(), None);
    assert_eq!(cantus::query::workers(), None);
}

#[test]
fn sync_variables_work_between_plain_threads() {
    let v = Arc::new(cantus::SyncVar::new());
    let v2 = v.clone();
    let t = std::thread::spawn(move || (0..1000u32).map(|_| v2.read_fe()).sum::<u32>());
    for i in 0..1000 {
        v.write_ef(i);
    }
    assert_eq!(t.join().unwrap(), 999 * 1000 / 2);
    cantus::task::sleep(std::time::Duration::from_millis(1));
    cantus::task::yield_now();
}

/// Runs `f`, which must panic, and returns where the panic was raised
/// (file, line), as a panic hook saw it.
fn panic_at(f: impl FnOnce()) -> Option<(String, u32)> {
    thread_local! {
        static AT: std::cell::RefCell<Option<(String, u32)>> = const { std::cell::RefCell::new(None) };
    }
    static HOOK: std::sync::Once = std::sync::Once::new();
    HOOK.call_once(|| {
        let default = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            let at = info.location().map(|l| (l.file().to_string(), l.line()));
            // The hook runs on the panicking thread: tests running in
            // parallel each see only their own panics.
            AT.with(|a| *a.borrow_mut() = at);
            default(info);
        }));
    });
    AT.with(|a| a.borrow_mut().take());
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(f));
    assert!(r.is_err(), "expected a panic");
    AT.with(|a| a.borrow_mut().take())
}

/// Asserts that the expression panics at its own line of this file: the
/// call's `#[track_caller]` chain reaches the user's code.
macro_rules! assert_panics_here {
    ($e:expr) => {{
        let line = line!();
        let at = panic_at(|| {
            $e;
        });
        assert_eq!(
            at,
            Some((file!().to_string(), line)),
            "{} should panic at the caller's line",
            stringify!($e)
        );
    }};
}

#[test]
fn misuse_panics_point_at_the_callers_line() {
    assert_panics_here!(cantus::begin(|| ()));
    assert_panics_here!(cantus::scope(|s| s.spawn(|| ())));
    assert_panics_here!(cantus::TaskGroup::new().spawn(|| ()));
    assert_panics_here!(cantus::forall_chunks_mut(&mut [0u8; 4], 0, |_, _| ()));
    let once = cantus::SingleVar::new();
    once.write(1);
    assert_panics_here!(once.write(2));
}

/// Entry points that find the runtime through `runtime::on_worker` or
/// `runtime::registry_or_panic` (both `#[track_caller]`).
#[test]
fn no_runtime_panics_of_loops_and_joins_point_at_the_callers_line() {
    assert_panics_here!(cantus::join(|| 1, || 2));
    assert_panics_here!(cantus::coforall(4, |_| ()));
    assert_panics_here!(cantus::forall(0..10).for_each(|_| ()));
    assert_panics_here!(cantus::forall(0..10).sum(|i| i));
    assert_panics_here!(cantus::forall(0..10).max(|i| i));
    assert_panics_here!(cantus::forall_mut(&mut [0u8; 4], |_, _| ()));
    let mut list = cantus::TaskList::new();
    list.add(|| ());
    assert_panics_here!(list.execute());
}
