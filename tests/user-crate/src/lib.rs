//! A library with a remote call, tested in `tests/jobs.rs` as a user
//! would test it.

use serde::{Deserialize, Serialize};

/// Squares a number on the locale that runs it, and says which locale
/// (and process) that was.
#[derive(Serialize, Deserialize)]
pub struct Square(pub u64);

impl cantus::Remote for Square {
    type Output = (u64, usize, u32);
    fn run(self) -> (u64, usize, u32) {
        println!(
            "user-crate: squaring {} on locale {}",
            self.0,
            cantus::here()
        );
        (self.0 * self.0, cantus::here(), std::process::id())
    }
}
cantus::remote!(Square);

/// Starts a job of two locales, squares `n` on locale 1, keeps the job
/// running for `hold`, and shuts it down.
pub fn square_on_locale_1(n: u64, hold: std::time::Duration) -> u64 {
    let rt = cantus::Runtime::builder().locales(2).build().unwrap();
    let (sq, at, pid) = rt.block_on(|| cantus::on(1, Square(n)).join()).unwrap();
    assert_eq!(at, 1);
    assert_ne!(pid, std::process::id(), "locale 1 is another process");
    std::thread::sleep(hold);
    rt.shutdown();
    sq
}
