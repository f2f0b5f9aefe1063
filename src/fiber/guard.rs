//! Stack-overflow detection for tasks.
//!
//! A task that runs off its stack hits the guard page below it. A
//! `SIGSEGV`/`SIGBUS` handler, running on the thread's alternate signal
//! stack, compares the fault address with the guard page of the task
//! running on this thread. On a match it writes a message naming the task
//! and the setting to raise, then aborts: memory is never silently
//! corrupted (seed 000, section 4.3). Any other fault is passed to the
//! handler that was installed before ours (Rust's own, which prints its
//! thread-overflow message), or to the default action.

use std::cell::Cell;
use std::mem::MaybeUninit;
use std::ptr;
use std::sync::Once;

thread_local! {
    /// The running task's guard page `[lo, hi)`, its id and stack size.
    /// Const-initialised with no destructor, so reading it from a signal
    /// handler touches only the thread's static TLS block.
    static RUNNING: GuardInfo = const { GuardInfo {
        lo: Cell::new(0), hi: Cell::new(0), task: Cell::new(0), size: Cell::new(0),
    } };
}

struct GuardInfo {
    lo: Cell<usize>,
    hi: Cell<usize>,
    task: Cell<u64>,
    size: Cell<usize>,
}

/// Records which stack the task about to run on this thread uses.
#[inline]
pub(crate) fn set_running(guard: (usize, usize), task: u64, size: usize) {
    RUNNING.with(|g| {
        g.lo.set(guard.0);
        g.hi.set(guard.1);
        g.task.set(task);
        g.size.set(size);
    });
}

/// Updates only the running task id (tasks run one after another on one
/// carrier stack).
#[inline]
pub(crate) fn set_running_task(task: u64) {
    RUNNING.with(|g| g.task.set(task));
}

static INSTALL: Once = Once::new();
static mut PREVIOUS_SEGV: MaybeUninit<libc::sigaction> = MaybeUninit::zeroed();
static mut PREVIOUS_BUS: MaybeUninit<libc::sigaction> = MaybeUninit::zeroed();

/// Installs the fault handler once per process.
pub(crate) fn install_handler() {
    INSTALL.call_once(|| {
        for (sig, prev) in [
            (libc::SIGSEGV, &raw mut PREVIOUS_SEGV),
            (libc::SIGBUS, &raw mut PREVIOUS_BUS),
        ] {
            // SAFETY: sigaction is plain data; zeroed is a valid value that we
            // then fill in. `prev` points at our static, written only here,
            // inside call_once, before the handler can read it.
            unsafe {
                let mut action: libc::sigaction = std::mem::zeroed();
                action.sa_sigaction = on_fault as *const () as usize;
                action.sa_flags = libc::SA_SIGINFO | libc::SA_ONSTACK;
                libc::sigemptyset(&mut action.sa_mask);
                libc::sigaction(sig, &action, (*prev).as_mut_ptr());
            }
        }
    });
}

/// An alternate signal stack owned by a worker thread, so the handler can
/// run when the task's stack is exhausted.
pub(crate) struct AltStack {
    mapping: *mut libc::c_void,
    len: usize,
}

impl AltStack {
    /// Ensures this thread has an alternate signal stack; returns one to
    /// drop at thread exit if we had to install it.
    pub(crate) fn ensure() -> Option<AltStack> {
        // SAFETY: querying the current alternate stack has no preconditions.
        let mut old: libc::stack_t = unsafe { std::mem::zeroed() };
        // SAFETY: passing null as the new stack only reads the current one.
        unsafe { libc::sigaltstack(ptr::null(), &mut old) };
        if old.ss_flags & libc::SS_DISABLE == 0 {
            return None; // Rust's runtime already gave this thread one.
        }
        let len = 64 * 1024;
        // SAFETY: anonymous mapping; checked before use.
        let mapping = unsafe {
            libc::mmap(
                ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        if mapping == libc::MAP_FAILED {
            return None;
        }
        let st = libc::stack_t {
            ss_sp: mapping,
            ss_flags: 0,
            ss_size: len,
        };
        // SAFETY: `st` describes a valid writable mapping we own until drop.
        unsafe { libc::sigaltstack(&st, ptr::null_mut()) };
        Some(AltStack { mapping, len })
    }
}

impl Drop for AltStack {
    fn drop(&mut self) {
        let disable = libc::stack_t {
            ss_sp: ptr::null_mut(),
            ss_flags: libc::SS_DISABLE,
            ss_size: 0,
        };
        // SAFETY: the alternate stack is ours; we disable it before unmapping
        // so no signal can land on freed memory.
        unsafe {
            libc::sigaltstack(&disable, ptr::null_mut());
            libc::munmap(self.mapping, self.len);
        }
    }
}

extern "C" fn on_fault(sig: libc::c_int, info: *mut libc::siginfo_t, ctx: *mut libc::c_void) {
    // SAFETY: the kernel passes a valid siginfo for SA_SIGINFO handlers.
    let addr = unsafe { (*info).si_addr() } as usize;
    let (lo, hi, task, size) =
        RUNNING.with(|g| (g.lo.get(), g.hi.get(), g.task.get(), g.size.get()));
    if lo != 0 && addr >= lo && addr < hi {
        report_overflow(task, size, addr);
        // SAFETY: abort is async-signal-safe.
        unsafe { libc::abort() };
    }
    // Not ours: hand the fault to whoever handled it before us.
    let prev = if sig == libc::SIGBUS {
        &raw const PREVIOUS_BUS
    } else {
        &raw const PREVIOUS_SEGV
    };
    // SAFETY: written once in install_handler before this handler existed.
    let prev = unsafe { (*prev).assume_init_ref() };
    let handler = prev.sa_sigaction;
    if handler == libc::SIG_DFL || handler == libc::SIG_IGN {
        // Restore the default action and return: the faulting instruction
        // runs again and the process dies of the signal, as without us.
        // SAFETY: sigaction with a zeroed (SIG_DFL) action is always valid.
        unsafe {
            let mut dfl: libc::sigaction = std::mem::zeroed();
            dfl.sa_sigaction = libc::SIG_DFL;
            libc::sigaction(sig, &dfl, ptr::null_mut());
        }
    } else if prev.sa_flags & libc::SA_SIGINFO != 0 {
        // SAFETY: the previous handler was installed with SA_SIGINFO, so it
        // has this signature and expects these arguments.
        let f: extern "C" fn(libc::c_int, *mut libc::siginfo_t, *mut libc::c_void) =
            unsafe { std::mem::transmute(handler) };
        f(sig, info, ctx);
    } else {
        // SAFETY: a plain (non-SA_SIGINFO) handler takes only the signal.
        let f: extern "C" fn(libc::c_int) = unsafe { std::mem::transmute(handler) };
        f(sig);
    }
}

/// Writes the overflow message with `write(2)` only (async-signal-safe: no
/// allocation, no locks).
fn report_overflow(task: u64, size: usize, addr: usize) {
    let mut buf = [0u8; 320];
    let mut w = Cursor {
        buf: &mut buf,
        len: 0,
    };
    w.put(b"cantus: task ");
    w.num(task);
    w.put(b" overflowed its ");
    w.num((size / 1024) as u64);
    w.put(b" KiB stack (fault at 0x");
    w.hex(addr);
    w.put(b" in its guard page); raise CANTUS_STACK_SIZE (or Builder::stack_size). Aborting: no memory was corrupted.\n");
    let len = w.len;
    // SAFETY: write(2) on stderr with a valid buffer is async-signal-safe.
    unsafe { libc::write(2, buf.as_ptr().cast(), len) };
}

struct Cursor<'a> {
    buf: &'a mut [u8],
    len: usize,
}

impl Cursor<'_> {
    fn put(&mut self, s: &[u8]) {
        let n = s.len().min(self.buf.len() - self.len);
        self.buf[self.len..self.len + n].copy_from_slice(&s[..n]);
        self.len += n;
    }
    fn num(&mut self, mut v: u64) {
        let mut d = [0u8; 20];
        let mut i = d.len();
        loop {
            i -= 1;
            d[i] = b'0' + (v % 10) as u8;
            v /= 10;
            if v == 0 {
                break;
            }
        }
        self.put(&d[i..]);
    }
    fn hex(&mut self, v: usize) {
        let digits = b"0123456789abcdef";
        let mut d = [0u8; 16];
        for (i, slot) in d.iter_mut().enumerate() {
            *slot = digits[(v >> ((15 - i) * 4)) & 0xf];
        }
        self.put(&d);
    }
}
