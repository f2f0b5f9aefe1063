//! The C ABI (issue 4): cantus as the tasking layer of a language runtime
//! (`include/cantus.h`, seed 000 section 3), and a Qthreads-compatible
//! subset (`include/qthread/*.h`). The library itself is built by the
//! `capi/` workspace member; `README.md` beside this file describes the
//! layout, the rules every function follows and the full/empty protocol.
//!
//! Every `extern "C"` function goes through `error::boundary` (or
//! `guarded`): a panic never unwinds into C.
//!
//! Not compiled under `--cfg loom`: the C ABI runs on real threads only.

#![cfg(not(loom))]

pub mod error;
pub mod feb;
pub mod lifecycle;
pub mod qthread;
pub mod task_control;
pub mod tasks;

/// The C `int` every call returns: 0 or a negative `CANTUS_E*` code.
pub type Code = std::ffi::c_int;
