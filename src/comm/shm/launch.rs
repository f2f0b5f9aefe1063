//! Starting a job's locales on one machine and watching them: locale 0
//! starts locales 1..N as copies of its own program (same binary, same
//! arguments; inside a `cargo test` test, only that test: `program.rs`),
//! hands them the shared region, and ends the whole job if
//! one of them dies; each of them dies with locale 0 (`PR_SET_PDEATHSIG`).
//! Nothing outlives the job: the region is an anonymous memfd (no name
//! in /dev/shm), and no locale survives locale 0.
//!
//! A locale that dies ends the job with a status that says how
//! ([`job_status`]): its own exit status, or 128 + the signal that killed
//! it, as shells report. Locales 1..N name their process after the
//! program and their number (`myprog-loc2` in `ps` and `top`).

use super::program::Program;
use super::region::Region;
use super::transport::{Shape, ShmTransport};
use crate::error::{Error, ErrorKind};
use std::process::{Child, Command};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, mpsc};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::comm::job::Job;
use crate::comm::symmetric::SymmetricAreas;
use crate::comm::transport::Transport;
use crate::config::{Config, LOCALE_VAR, LOCALES_VAR, TRACE_JOB_VAR};

/// How often the monitor looks at the other locales.
const WATCH_EVERY: Duration = Duration::from_millis(10);
/// ... and once shutdown is ordered, when locale 0 waits for their exits
/// (10 ms here was most of a short job's end).
const WATCH_ENDING_EVERY: Duration = Duration::from_micros(200);
/// How long locale 0 waits for the others to exit after ordering shutdown.
const EXIT_GRACE: Duration = Duration::from_secs(10);

/// `eprintln!` to the process's stderr itself: from a test, `eprintln!`
/// goes into the test's captured output, which is lost when the job
/// ends the process.
macro_rules! say {
    ($($arg:tt)*) => {{
        use std::io::Write;
        let _ = writeln!(std::io::stderr(), $($arg)*);
    }};
}

/// This process's part of a job of locales on this machine.
struct ShmJob {
    transport: Arc<ShmTransport>,
    /// Locale 0's watch over the others (`None` on the others).
    monitor: Option<Monitor>,
}

/// Starts the job `config` describes (locale 0) or joins it (the others).
pub(crate) fn start(config: &mut Config) -> Result<Box<dyn Job>, Error> {
    let job = if config.here == 0 {
        let (transport, monitor) = start_job(
            Shape {
                locales: config.locales,
                ring_bytes: config.ring_bytes,
                heap_bytes: config.heap_bytes,
                rendezvous_bytes: config.rendezvous_bytes,
            },
            config.trace.clone().map(|t| (t, config.trace_job)),
        )?;
        ShmJob {
            transport,
            monitor: Some(monitor),
        }
    } else {
        ShmJob {
            transport: join_job(config.here)?,
            monitor: None,
        }
    };
    Ok(Box::new(job))
}

impl Job for ShmJob {
    fn transport(&self) -> Arc<dyn Transport> {
        self.transport.clone()
    }

    fn shared_memory(&self) -> Option<Arc<dyn SymmetricAreas>> {
        Some(self.transport.clone())
    }

    fn shutdown_ordered(&self) {
        if let Some(m) = &self.monitor {
            m.expect_ends();
        }
    }

    fn finish(self: Box<Self>) {
        if let Some(m) = self.monitor {
            m.finish();
        }
    }

    fn abandon(self: Box<Self>, _why: &Error) {
        if let Some(m) = self.monitor {
            m.abandon();
        }
    }

    fn abort(&self, message: &str) -> ! {
        say!("{message}");
        // Locale 0's exit ends the others (PR_SET_PDEATHSIG); another
        // locale's is seen by locale 0's monitor, which ends the job.
        std::process::exit(1)
    }
}

/// Locale 0's watch over the others.
pub(crate) struct Monitor {
    /// Set before shutdown is ordered: exits from then on are expected.
    ending: Arc<AtomicBool>,
    /// Set to end the other locales at once (locale 0 could not start).
    kill: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

/// A traced job's trace and the number of its parts directory.
type Trace = (std::path::PathBuf, u64);

/// Locale 0: creates the region, starts locales `1..locales` and a thread
/// that watches them.
pub(crate) fn start_job(
    shape: Shape,
    trace: Option<Trace>,
) -> Result<(Arc<ShmTransport>, Monitor), Error> {
    let locales = shape.locales;
    let transport = Arc::new(ShmTransport::create(shape)?);
    let ending = Arc::new(AtomicBool::new(false));
    let kill = Arc::new(AtomicBool::new(false));
    let (tx, rx) = mpsc::channel();
    let t = transport.clone();
    let (e, k) = (ending.clone(), kill.clone());
    // Decided here, on the thread building the runtime (the test's own).
    let mut program = Program::of_caller();
    // The locales are started from this thread and it lives until they
    // exited: PR_SET_PDEATHSIG fires when the *thread* that started a
    // child ends, so it must not be a thread that may end first.
    let thread = std::thread::Builder::new()
        .name("cantus-locales".into())
        .spawn(move || {
            let children = match spawn_all(t.region(), locales, &mut program, trace.as_ref()) {
                Ok(c) => {
                    let _ = tx.send(Ok(()));
                    c
                }
                Err((e, started)) => {
                    kill_all(started);
                    let _ = tx.send(Err(e));
                    return;
                }
            };
            watch(children, &e, &k);
            program.finish_output();
        })
        .map_err(|e| {
            Error::new(
                ErrorKind::Os,
                format!("cantus: could not start the thread that watches the locales: {e}"),
            )
        })?;
    match rx.recv() {
        Ok(Ok(())) => Ok((
            transport,
            Monitor {
                ending,
                kill,
                thread: Some(thread),
            },
        )),
        Ok(Err(e)) => {
            let _ = thread.join();
            Err(e)
        }
        Err(_) => Err(Error::new(
            ErrorKind::Locale,
            "cantus: the thread starting the locales ended without a word",
        )),
    }
}

/// Locales other than 0: attaches to the region locale 0 handed down.
pub(crate) fn join_job(here: usize) -> Result<Arc<ShmTransport>, Error> {
    let region = Region::attach_from_env()?.ok_or_else(|| {
        Error::new(
            ErrorKind::Locale,
            format!(
                "cantus: {LOCALE_VAR} is set but no shared region was handed down; \
                 {LOCALE_VAR} is for the locales cantus starts, so unset it"
            ),
        )
    })?;
    // Locale 0 may have died between starting us and our PR_SET_PDEATHSIG.
    // SAFETY: getppid has no preconditions.
    if unsafe { libc::getppid() } as u32 != region.job().creator() {
        std::process::exit(1);
    }
    name_process(here);
    Ok(Arc::new(ShmTransport::attach(region, here)?))
}

impl Monitor {
    /// Locale 0, ordering shutdown: the others' exits are expected now.
    pub(crate) fn expect_ends(&self) {
        self.ending.store(true, Ordering::Release);
        // The watch sleeps between looks: from now on it looks often.
        if let Some(t) = &self.thread {
            t.thread().unpark();
        }
    }

    /// Locale 0, after ordering shutdown: waits for the others to exit.
    pub(crate) fn finish(mut self) {
        self.expect_ends();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }

    /// Locale 0, when its runtime cannot start after all: ends the others
    /// at once.
    pub(crate) fn abandon(self) {
        self.kill.store(true, Ordering::Release);
        self.finish();
    }
}

/// Locales started so far, with their numbers.
type Started = Vec<(usize, Child)>;

fn spawn_all(
    region: &Region,
    locales: usize,
    program: &mut Program,
    trace: Option<&Trace>,
) -> Result<Started, (Error, Started)> {
    let mut children = Vec::with_capacity(locales - 1);
    for locale in 1..locales {
        let mut cmd = Command::new("/proc/self/exe");
        program.configure(&mut cmd);
        cmd.env(LOCALE_VAR, locale.to_string())
            .env(LOCALES_VAR, locales.to_string())
            // Every locale traces into locale 0's trace, or none does (an
            // empty value is off): a path a locale's own builder computed
            // (say, with its process id in it) would never be merged. Its
            // part goes into the job's parts directory, which the job's
            // number names.
            .env(
                "CANTUS_TRACE",
                trace.map_or_else(Default::default, |(p, _)| p.as_os_str().to_owned()),
            )
            .env(
                TRACE_JOB_VAR,
                trace.map_or_else(String::new, |(_, job)| format!("{job:016x}")),
            );
        if let Some(arg0) = std::env::args_os().next() {
            use std::os::unix::process::CommandExt;
            cmd.arg0(arg0);
        }
        if let Err(e) = region.share_with(&mut cmd) {
            return Err((e, children));
        }
        {
            use std::os::unix::process::CommandExt;
            // SAFETY: runs between fork and exec in the child, where only
            // async-signal-safe calls are allowed: prctl is one; nothing
            // allocates or locks.
            unsafe {
                cmd.pre_exec(|| {
                    if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL, 0, 0, 0) != 0 {
                        return Err(std::io::Error::last_os_error());
                    }
                    Ok(())
                })
            };
        }
        match cmd.spawn() {
            Ok(mut c) => {
                program.forward(&mut c);
                children.push((locale, c));
            }
            Err(e) => {
                return Err((
                    Error::new(
                        ErrorKind::Locale,
                        format!("cantus: could not start locale {locale}: {e}"),
                    ),
                    children,
                ));
            }
        }
    }
    Ok(children)
}

fn kill_all(children: Started) {
    for (_, mut c) in children {
        let _ = c.kill();
        let _ = c.wait();
    }
}

/// Watches the locales until they all exited. One that exits before
/// shutdown was ordered takes the job down: a message naming it and how
/// it ended, the others killed, and this process exits with the status
/// [`job_status`] gives.
fn watch(mut children: Started, ending: &AtomicBool, kill: &AtomicBool) {
    let mut deadline: Option<Instant> = None;
    while !children.is_empty() {
        if kill.load(Ordering::Acquire) {
            kill_all(children);
            return;
        }
        let ordered = ending.load(Ordering::Acquire);
        if ordered && deadline.is_none() {
            deadline = Some(Instant::now() + EXIT_GRACE);
        }
        let mut i = 0;
        while i < children.len() {
            let (locale, child) = &mut children[i];
            match child.try_wait() {
                Ok(Some(status)) => {
                    let ok = status.success();
                    let (locale, pid) = (*locale, child.id());
                    children.swap_remove(i);
                    if !(ok && ending.load(Ordering::Acquire)) {
                        let code = job_status(status);
                        say!(
                            "cantus: locale {locale} (pid {pid}) {} before the job ended; \
                             ending the job with status {code}",
                            describe(status)
                        );
                        kill_all(children);
                        crate::trace::merge_after_failure();
                        std::process::exit(code);
                    }
                }
                Ok(None) => i += 1,
                Err(e) => {
                    say!("cantus: cannot watch locale {locale}: {e}; ending the job");
                    kill_all(children);
                    std::process::exit(1);
                }
            }
        }
        if deadline.is_some_and(|d| Instant::now() > d) {
            say!(
                "cantus: {} locale(s) did not exit within {} s of shutdown; killing them",
                children.len(),
                EXIT_GRACE.as_secs()
            );
            kill_all(children);
            return;
        }
        // Parked, so that `expect_ends` (or `abandon`) wakes it at once.
        std::thread::park_timeout(if ordered {
            WATCH_ENDING_EVERY
        } else {
            WATCH_EVERY
        });
    }
}

/// The status the job exits with when a locale ended with `status`
/// before the job did: the locale's own status if it is not 0, 128 + the
/// signal if a signal killed it (as shells report it), else 1 (a locale
/// that exits with 0 before the job ended still failed it).
fn job_status(status: std::process::ExitStatus) -> i32 {
    use std::os::unix::process::ExitStatusExt;
    match (status.code(), status.signal()) {
        (Some(code), _) if code != 0 => code,
        (None, Some(sig)) => 128 + sig,
        _ => 1,
    }
}

/// Names this process (its main thread, which `ps` and `top` show) after
/// the program and the locale: `myprog-loc2`, the program's name cut so
/// that the whole fits the kernel's 15 bytes. Without it every locale
/// would show as `exe` (they are started through /proc/self/exe). A name
/// is a convenience: failing to set one is ignored.
fn name_process(here: usize) {
    const COMM_MAX: usize = 15;
    let suffix = format!("-loc{here}");
    let program = std::env::current_exe()
        .ok()
        .and_then(|p| p.file_name().map(|n| n.as_encoded_bytes().to_vec()))
        .unwrap_or_default();
    let mut name = program;
    name.truncate(COMM_MAX.saturating_sub(suffix.len()));
    name.extend_from_slice(suffix.as_bytes());
    name.truncate(COMM_MAX);
    // /proc/self/comm is the main thread's name, whichever thread writes it.
    let _ = std::fs::write("/proc/self/comm", name);
}

/// "exited with status 3", "was killed by signal 9 (SIGKILL)".
fn describe(status: std::process::ExitStatus) -> String {
    use std::os::unix::process::ExitStatusExt;
    if let Some(code) = status.code() {
        return format!("exited with status {code}");
    }
    match status.signal() {
        Some(sig) => {
            // SAFETY: strsignal returns a pointer to a static or
            // thread-local string, valid until the next call on this
            // thread; we copy it at once.
            let name = unsafe {
                let p = libc::strsignal(sig);
                if p.is_null() {
                    String::new()
                } else {
                    std::ffi::CStr::from_ptr(p).to_string_lossy().into_owned()
                }
            };
            format!("was killed by signal {sig} ({name})")
        }
        None => "ended".to_string(),
    }
}
