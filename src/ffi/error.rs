//! Error codes of the C ABI, the per-thread message of the last failed
//! call, and the boundary every `extern "C"` function goes through: a
//! panic never unwinds into C, it becomes `EPANIC`.

use super::Code;
use std::cell::RefCell;
use std::ffi::{CStr, CString, c_char};
use std::panic::{self, AssertUnwindSafe};

/// Success.
pub(crate) const OK: Code = 0;
/// No runtime is running (call `cantus_init` first).
pub(crate) const ENORUNTIME: Code = -1;
/// A runtime is already running in this process.
pub(crate) const EALREADY: Code = -2;
/// An argument is invalid (a NULL pointer, a zero count where one is needed).
pub(crate) const EINVAL: Code = -3;
/// A full/empty address is not aligned to 8 bytes.
pub(crate) const EALIGN: Code = -4;
/// The call is not allowed from the calling context (e.g. finalize from a task).
pub(crate) const ECONTEXT: Code = -5;
/// A configuration value (argument or `CANTUS_*` variable) is invalid.
pub(crate) const ECONFIG: Code = -6;
/// The configuration asks for more threads than the thread limit allows.
pub(crate) const ETHREADS: Code = -7;
/// The operating system refused a resource (a thread, memory).
pub(crate) const EOS: Code = -8;
/// Tasks are still queued on a variable that is being destroyed.
pub(crate) const EBUSY: Code = -9;
/// The behaviour asked for is one cantus leaves out (see the header).
pub(crate) const ENOTSUP: Code = -10;
/// An internal error (a bug in cantus) was caught at the C boundary.
pub(crate) const EPANIC: Code = -11;

/// A failed call: its code and a message a user can act on.
pub(crate) struct Fail {
    pub(crate) code: Code,
    pub(crate) message: String,
}

impl Fail {
    pub(crate) fn new(code: Code, message: impl Into<String>) -> Fail {
        Fail {
            code,
            message: message.into(),
        }
    }

    pub(crate) fn no_runtime(call: &str) -> Fail {
        Fail::new(
            ENORUNTIME,
            format!(
                "{call} called with no runtime running: call cantus_init() (or \
                 qthread_initialize()) first, and no tasking call after finalize"
            ),
        )
    }

    pub(crate) fn null(call: &str, arg: &str) -> Fail {
        Fail::new(EINVAL, format!("{call}: `{arg}` is NULL"))
    }

    pub(crate) fn from_error(call: &str, e: &crate::error::Error) -> Fail {
        use crate::error::ErrorKind;
        let code = match e.kind() {
            ErrorKind::InvalidConfig => ECONFIG,
            ErrorKind::TooManyThreads => ETHREADS,
            ErrorKind::NoRuntime => ENORUNTIME,
            ErrorKind::AlreadyRunning => EALREADY,
            ErrorKind::Os => EOS,
            _ => EPANIC,
        };
        Fail::new(code, format!("{call}: {e}"))
    }
}

thread_local! {
    static LAST: RefCell<CString> = RefCell::new(CString::default());
}

/// Records `f` as this thread's last error and returns its code.
pub(crate) fn record(f: Fail) -> Code {
    let msg = CString::new(f.message.replace('\0', " ")).unwrap_or_default();
    LAST.with(|l| *l.borrow_mut() = msg);
    f.code
}

/// Runs `body` at the C boundary: `Ok` becomes its value, `Err` is
/// recorded and becomes its code, a panic becomes [`EPANIC`].
#[inline]
pub(crate) fn boundary<T: From<Code>>(call: &str, body: impl FnOnce() -> Result<T, Fail>) -> T {
    match panic::catch_unwind(AssertUnwindSafe(body)) {
        Ok(Ok(v)) => v,
        Ok(Err(f)) => T::from(record(f)),
        Err(p) => T::from(record(Fail::new(
            EPANIC,
            format!(
                "{call}: internal error (a cantus bug, please report it): {}",
                panic_message(&*p)
            ),
        ))),
    }
}

/// Like [`boundary`] for calls that cannot return a code: a failure is
/// recorded and printed on stderr.
pub(crate) fn boundary_void(call: &str, body: impl FnOnce() -> Result<(), Fail>) {
    let code: Code = boundary(call, || body().map(|()| OK));
    if code != OK {
        LAST.with(|l| eprintln!("cantus: {}", l.borrow().to_string_lossy()));
    }
}

/// Runs a call that has no error to report; a panic (a cantus bug) is
/// recorded and printed, and `fallback` returned.
pub(crate) fn guarded<T>(fallback: T, body: impl FnOnce() -> T) -> T {
    match panic::catch_unwind(AssertUnwindSafe(body)) {
        Ok(v) => v,
        Err(p) => {
            eprintln!(
                "cantus: internal error (a cantus bug, please report it): {}",
                panic_message(&*p)
            );
            record(Fail::new(EPANIC, "internal error in cantus (a bug)"));
            fallback
        }
    }
}

fn panic_message(p: &(dyn std::any::Any + Send)) -> &str {
    crate::error::panic_text(p).unwrap_or("(no message)")
}

/// The static description of a code.
fn describe(code: Code) -> &'static CStr {
    match code {
        OK => c"success",
        ENORUNTIME => c"no cantus runtime is running (call cantus_init first)",
        EALREADY => c"a cantus runtime is already running in this process",
        EINVAL => c"invalid argument (a NULL pointer or an out-of-range value)",
        EALIGN => c"full/empty address not aligned to 8 bytes",
        ECONTEXT => c"call not allowed from this context",
        ECONFIG => c"invalid configuration value",
        ETHREADS => c"configuration exceeds the thread limit (CANTUS_MAX_THREADS)",
        EOS => c"the operating system refused a resource",
        EBUSY => c"tasks or threads are still waiting on the variable",
        ENOTSUP => c"behaviour not supported by cantus (see the header)",
        EPANIC => c"internal error in cantus (a bug)",
        _ => c"unknown cantus error code",
    }
}

/// cantus_strerror: a static description of an error code.
#[unsafe(no_mangle)]
pub extern "C" fn cantus_strerror(code: Code) -> *const c_char {
    describe(code).as_ptr()
}

/// cantus_last_error: the message of this thread's last failed call.
#[unsafe(no_mangle)]
pub extern "C" fn cantus_last_error() -> *const c_char {
    // The pointer stays valid until the next failed call on this thread
    // replaces the CString (documented in the header).
    LAST.try_with(|l| l.borrow().as_ptr())
        .unwrap_or(c"".as_ptr())
}
