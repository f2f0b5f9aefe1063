//! `<qthread/io.h>`: `qt_begin_blocking_action` / `qt_end_blocking_action`
//! around a system call that blocks, over the scheduler's blocking calls
//! (`src/sched/worker/blocking_call.rs`, `cantus::task::blocking` in Rust): a task forked
//! through the C ABI moves to a blocking-call thread until the end, so
//! its worker runs other tasks meanwhile; anything else makes the call
//! in place. Either way the call counts as outside activity for the
//! deadlock detector.

use crate::ffi::error::{self, Fail};

/// qt_begin_blocking_action: the caller is about to block in a system
/// call (see io.h).
#[unsafe(no_mangle)]
pub extern "C" fn qt_begin_blocking_action() {
    error::guarded((), crate::sched::begin_blocking)
}

/// qt_end_blocking_action: the system call is done: a task back on its
/// worker. Without a matching begin it prints the reason on stderr.
#[unsafe(no_mangle)]
pub extern "C" fn qt_end_blocking_action() {
    let call = "qt_end_blocking_action";
    error::boundary_void(call, || {
        if crate::sched::end_blocking() {
            Ok(())
        } else {
            Err(Fail::new(
                error::ECONTEXT,
                format!("{call} without qt_begin_blocking_action: ignored"),
            ))
        }
    })
}
