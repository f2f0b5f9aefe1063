//! `<qthread/qt_syscalls.h>`: Qthreads' system calls that block only the
//! calling task (`qt_read`, `qt_write`, `qt_pread`, `qt_pwrite`,
//! `qt_accept`, `qt_connect`, `qt_poll`, `qt_select`, `qt_system`,
//! `qt_wait4`). Qthreads hands each call to one of its I/O threads and
//! switches the task out until the call is done. Here each is the plain
//! call as a blocking action (`io.rs`: `qt_begin_blocking_action` ...
//! `qt_end_blocking_action`): a task forked through the C ABI makes it
//! on a blocking-call thread while its worker runs other tasks, and comes
//! back with the call's result and its `errno`; any other caller makes it
//! in place. Results and `errno` are the system call's, as in Qthreads.

use libc::{c_char, c_int, c_void};

/// C's `ssize_t`.
pub type SsizeT = libc::ssize_t;
/// C's `pid_t`.
pub type PidT = libc::pid_t;
/// C's `socklen_t`.
pub type SocklenT = libc::socklen_t;
/// C's `nfds_t`.
pub type NfdsT = libc::nfds_t;
/// C's `struct sockaddr`.
pub type Sockaddr = libc::sockaddr;
/// C's `struct pollfd`.
pub type Pollfd = libc::pollfd;
/// C's `fd_set`.
pub type FdSet = libc::fd_set;
/// C's `struct timeval`.
pub type Timeval = libc::timeval;
/// C's `struct rusage`.
pub type Rusage = libc::rusage;

/// Makes `call` as a blocking action and returns its result, with
/// `errno` as the call left it (the blocking call brings it home; this
/// keeps it from the end's own work too). In a frame of its own that
/// touches no thread-local across the switches (`errno` is read and
/// written through functions of their own, on whichever thread runs
/// them).
#[inline(never)]
fn blocking<R>(call: impl FnOnce() -> R) -> R {
    crate::sched::begin_blocking();
    let r = call();
    let e = crate::sched::errno();
    crate::sched::end_blocking();
    crate::sched::set_errno(e);
    r
}

/// qt_accept: `accept(2)` as a blocking action.
///
/// # Safety
///
/// As `accept(2)`: `address` and `address_len` are null or valid.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn qt_accept(
    socket: c_int,
    address: *mut Sockaddr,
    address_len: *mut SocklenT,
) -> c_int {
    // SAFETY: the caller's pointers, passed on as `accept(2)` takes them.
    blocking(|| unsafe { libc::accept(socket, address, address_len) })
}

/// qt_connect: `connect(2)` as a blocking action.
///
/// # Safety
///
/// As `connect(2)`: `address` holds `address_len` bytes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn qt_connect(
    socket: c_int,
    address: *const Sockaddr,
    address_len: SocklenT,
) -> c_int {
    // SAFETY: as `connect(2)` takes them.
    blocking(|| unsafe { libc::connect(socket, address, address_len) })
}

/// qt_poll: `poll(2)` as a blocking action.
///
/// # Safety
///
/// As `poll(2)`: `fds` holds `nfds` entries.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn qt_poll(fds: *mut Pollfd, nfds: NfdsT, timeout: c_int) -> c_int {
    // SAFETY: as `poll(2)` takes them.
    blocking(|| unsafe { libc::poll(fds, nfds, timeout) })
}

/// qt_pread: `pread(2)` as a blocking action.
///
/// # Safety
///
/// As `pread(2)`: `buf` has room for `nbyte` bytes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn qt_pread(
    filedes: c_int,
    buf: *mut c_void,
    nbyte: usize,
    offset: i64,
) -> SsizeT {
    // SAFETY: as `pread(2)` takes them (`off_t` is 64 bits here).
    blocking(|| unsafe { libc::pread(filedes, buf, nbyte, offset as libc::off_t) })
}

/// qt_pwrite: `pwrite(2)` as a blocking action.
///
/// # Safety
///
/// As `pwrite(2)`: `buf` holds `nbyte` bytes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn qt_pwrite(
    filedes: c_int,
    buf: *const c_void,
    nbyte: usize,
    offset: i64,
) -> SsizeT {
    // SAFETY: as `pwrite(2)` takes them.
    blocking(|| unsafe { libc::pwrite(filedes, buf, nbyte, offset as libc::off_t) })
}

/// qt_read: `read(2)` as a blocking action.
///
/// # Safety
///
/// As `read(2)`: `buf` has room for `nbyte` bytes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn qt_read(filedes: c_int, buf: *mut c_void, nbyte: usize) -> SsizeT {
    // SAFETY: as `read(2)` takes them.
    blocking(|| unsafe { libc::read(filedes, buf, nbyte) })
}

/// qt_select: `select(2)` as a blocking action.
///
/// # Safety
///
/// As `select(2)`: each pointer null or valid.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn qt_select(
    nfds: c_int,
    readfds: *mut FdSet,
    writefds: *mut FdSet,
    errorfds: *mut FdSet,
    timeout: *mut Timeval,
) -> c_int {
    // SAFETY: as `select(2)` takes them.
    blocking(|| unsafe { libc::select(nfds, readfds, writefds, errorfds, timeout) })
}

/// qt_system: `system(3)` as a blocking action.
///
/// # Safety
///
/// As `system(3)`: `command` is null or a C string.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn qt_system(command: *const c_char) -> c_int {
    // SAFETY: as `system(3)` takes it.
    blocking(|| unsafe { libc::system(command) })
}

/// qt_wait4: `wait4(2)` as a blocking action.
///
/// # Safety
///
/// As `wait4(2)`: `stat_loc` and `rusage` null or valid.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn qt_wait4(
    pid: PidT,
    stat_loc: *mut c_int,
    options: c_int,
    rusage: *mut Rusage,
) -> PidT {
    // SAFETY: as `wait4(2)` takes them.
    blocking(|| unsafe { libc::wait4(pid, stat_loc, options, rusage) })
}

/// qt_write: `write(2)` as a blocking action.
///
/// # Safety
///
/// As `write(2)`: `buf` holds `nbyte` bytes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn qt_write(filedes: c_int, buf: *const c_void, nbyte: usize) -> SsizeT {
    // SAFETY: as `write(2)` takes them.
    blocking(|| unsafe { libc::write(filedes, buf, nbyte) })
}
