//! Shared helpers: one runtime per test binary (cantus runs one runtime
//! per process), started on first use.

#![allow(dead_code, unreachable_pub)]

use std::sync::OnceLock;

pub fn rt() -> &'static cantus::Runtime {
    static RT: OnceLock<cantus::Runtime> = OnceLock::new();
    RT.get_or_init(|| {
        cantus::Runtime::builder()
            .workers(2)
            .ignore_environment()
            .deadlock_detection(None)
            .build()
            .expect("test runtime")
    })
}

/// Re-runs this test binary with only `test` selected and `env` set; the
/// child sees `CANTUS_CHILD=1`. Returns (exit status, stderr).
pub fn run_child(test: &str, env: &[(&str, &str)]) -> (std::process::ExitStatus, String) {
    let exe = std::env::current_exe().unwrap();
    let mut cmd = std::process::Command::new(exe);
    cmd.args([test, "--exact", "--nocapture", "--test-threads=1"])
        .env("CANTUS_CHILD", "1");
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = cmd.output().expect("re-run test binary");
    (
        out.status,
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

pub fn is_child() -> bool {
    std::env::var_os("CANTUS_CHILD").is_some()
}
