//! `use cantus::*;` must not shadow standard names: a generic bound
//! `F: Fn() + Sync` has to keep meaning `std::marker::Sync`.

use cantus::*;

fn call_shared<F: Fn() -> u32 + Sync + Send>(f: F) -> u32 {
    let (a, b) = join(&f, &f);
    a + b
}

#[test]
fn glob_import_keeps_std_sync() {
    let v: SyncVar<u32> = SyncVar::new();
    let out = run(|| {
        v.write_ef(20);
        call_shared(|| 1) + v.read_fe()
    })
    .unwrap();
    assert_eq!(out, 22);
}
