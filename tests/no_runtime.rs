//! Calls made with no runtime running get a clear error, never undefined
//! behaviour (seed 000, section 4.1); sync variables work without one.

use std::sync::Arc;

#[test]
fn spawning_without_a_runtime_is_a_clear_error() {
    let e = cantus::try_begin(|| ()).unwrap_err();
    assert_eq!(e.kind(), cantus::ErrorKind::NoRuntime);
    assert!(
        e.to_string()
            .contains("cantus::begin called with no runtime running"),
        "{e}"
    );

    let r = std::panic::catch_unwind(|| cantus::coforall(4, |_| ()));
    let msg = r.unwrap_err().downcast::<String>().unwrap();
    assert!(msg.contains("no runtime running"), "{msg}");

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
    cantus::sleep(std::time::Duration::from_millis(1));
    cantus::yield_now();
}
