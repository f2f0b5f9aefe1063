//! Futex wait and wake on a 32-bit word that several processes map.
//!
//! These use the plain `FUTEX_WAIT`/`FUTEX_WAKE` operations, *without*
//! `FUTEX_PRIVATE_FLAG`: a private futex is keyed by (process, virtual
//! address), so a wake in one process would never reach a waiter in
//! another, which maps the same word at another address. A shared futex
//! is keyed by the underlying page (here, the memfd's page and offset).
//! See futex(2).

use std::sync::atomic::AtomicU32;
use std::time::Duration;

/// How a [`futex_wait`] ended. A waiter must re-check its condition in
/// every case: a wake is a hint, not a promise that the word changed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[must_use]
pub(crate) enum FutexWait {
    /// A [`futex_wake`] on the word (from any process) woke this waiter.
    Woken,
    /// The word did not hold `expected` when the kernel looked, so the
    /// caller never slept.
    Changed,
    /// The timeout passed with no wake.
    TimedOut,
    /// A signal handler ran while waiting (a spurious return).
    Interrupted,
}

/// Sleeps while `word` holds `expected`, until a [`futex_wake`] on the same
/// word (in this or any process that maps it), `timeout`, or a signal.
///
/// The kernel compares the word with `expected` and queues the caller
/// atomically with respect to wakes, so a wake that follows a store of a
/// new value cannot be lost between the caller's own check and its sleep.
///
/// # Panics
///
/// If the kernel answers with an error other than the four outcomes of
/// [`FutexWait`] (for example `EFAULT`: the word is not mapped), which
/// means a bug in the caller.
pub(crate) fn futex_wait(word: &AtomicU32, expected: u32, timeout: Option<Duration>) -> FutexWait {
    let ts = timeout.map(|t| libc::timespec {
        // Saturate: a timeout of centuries is as good as none.
        tv_sec: libc::time_t::try_from(t.as_secs()).unwrap_or(libc::time_t::MAX),
        tv_nsec: t.subsec_nanos() as libc::c_long,
    });
    let ts_ptr = ts
        .as_ref()
        .map_or(std::ptr::null(), |t| t as *const libc::timespec);
    // SAFETY: `word` is a live, aligned 32-bit atomic for the duration of
    // the call; FUTEX_WAIT only reads it (atomically, in the kernel). The
    // timespec, if any, lives on this stack frame until the call returns.
    // The last two arguments are ignored by FUTEX_WAIT.
    let r = unsafe {
        libc::syscall(
            libc::SYS_futex,
            word.as_ptr(),
            libc::FUTEX_WAIT,
            expected,
            ts_ptr,
            std::ptr::null::<u32>(),
            0u32,
        )
    };
    if r == 0 {
        return FutexWait::Woken;
    }
    let err = std::io::Error::last_os_error();
    match err.raw_os_error() {
        Some(libc::EAGAIN) => FutexWait::Changed,
        Some(libc::ETIMEDOUT) => FutexWait::TimedOut,
        Some(libc::EINTR) => FutexWait::Interrupted,
        _ => panic!("futex wait on a shared word failed: {err}"),
    }
}

/// Wakes up to `n` waiters sleeping in [`futex_wait`] on `word`, in any
/// process that maps it, and returns how many were woken. Store the new
/// value of the word *before* waking, or a waiter may sleep again.
///
/// # Panics
///
/// If the kernel refuses the call (the word is not mapped), a bug in the
/// caller.
pub(crate) fn futex_wake(word: &AtomicU32, n: u32) -> usize {
    let n = i32::try_from(n).unwrap_or(i32::MAX);
    // SAFETY: `word` is a live, aligned 32-bit atomic; FUTEX_WAKE does not
    // access its contents, only its address (to find the queue). The last
    // three arguments are ignored by FUTEX_WAKE.
    let r = unsafe {
        libc::syscall(
            libc::SYS_futex,
            word.as_ptr(),
            libc::FUTEX_WAKE,
            n,
            std::ptr::null::<libc::timespec>(),
            std::ptr::null::<u32>(),
            0u32,
        )
    };
    if r < 0 {
        panic!(
            "futex wake on a shared word failed: {}",
            std::io::Error::last_os_error()
        );
    }
    r as usize
}
