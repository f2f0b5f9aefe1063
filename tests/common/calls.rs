//! The remote calls several test files make: which locale runs a call,
//! and a sum computed on the remote side. Registered once here, for
//! every test binary that uses `common`.

use cantus::Remote;
use serde::{Deserialize, Serialize};

/// Which locale runs the call: (locale, locales, process id).
#[derive(Serialize, Deserialize)]
pub struct WhoAmI;
impl Remote for WhoAmI {
    type Output = (usize, usize, u32);
    fn run(self) -> (usize, usize, u32) {
        (cantus::here(), cantus::num_locales(), std::process::id())
    }
}

/// Adds on the remote side (a task).
#[derive(Serialize, Deserialize)]
pub struct Add(pub u64, pub u64);
impl Remote for Add {
    type Output = u64;
    fn run(self) -> u64 {
        self.0 + self.1
    }
}

cantus::remote!(WhoAmI, Add);
