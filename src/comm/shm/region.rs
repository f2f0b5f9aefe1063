//! The job's shared region: one anonymous shared-memory file (`memfd`),
//! created by the job's first process, mapped `MAP_SHARED` by every
//! process of the job, and inherited by the processes the first one
//! starts (re-executions of the same binary). `README.md` beside this
//! file draws the layout.
//!
//! Each process maps the region at an address of its own, so everything
//! in it is named by an offset from the region's start ([`Area`]), never
//! by a pointer. [`Layout`] hands out those offsets; every process runs
//! the same layout code with the same parameters, so they agree on them.

use std::ffi::OsString;
use std::fmt;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::process::CommandExt;
use std::process::Command;
use std::ptr::NonNull;
use std::sync::atomic::AtomicU32;

use crate::error::{Error, ErrorKind};

#[cfg(all(test, not(loom)))]
mod tests;

/// The environment variable that carries the region's descriptor number
/// to a child process.
pub(crate) const SHM_FD_VAR: &str = "CANTUS_SHM_FD";
/// The environment variable that carries the job id (`<pid>-<nanos>`) to
/// a child process; it must match the id in the region's header.
pub(crate) const JOB_VAR: &str = "CANTUS_JOB";

/// The first bytes of every region.
const MAGIC: [u8; 8] = *b"CANTUSHM";
/// The layout version in the header; a process only attaches to a region
/// of the version it was built with.
pub(crate) const VERSION: u32 = 2;
/// A cache line, as far as false sharing goes (two 64-byte lines: the
/// adjacent-line prefetcher pulls pairs on x86).
pub(crate) const LINE: usize = 128;
/// Bytes at offset 0 that belong to the header; [`Layout`] starts after
/// them.
pub(crate) const HEADER_SIZE: usize = LINE;
/// The largest alignment [`Layout::carve`] accepts: the region is mapped
/// at a page boundary, so an offset aligned to at most a page gives an
/// address aligned the same way in every process.
pub(crate) const MAX_ALIGN: usize = 4096;

/// The header at offset 0, written once by the creator before any other
/// process exists, read by each process that attaches.
#[repr(C)]
#[derive(Clone, Copy)]
struct Header {
    magic: [u8; 8],
    version: u32,
    job_pid: u32,
    job_nanos: u64,
    /// The region's length in bytes (the file's size).
    len: u64,
}

const _: () = assert!(size_of::<Header>() <= HEADER_SIZE);

/// Which job a region belongs to: the creator's pid and its start time in
/// nanoseconds since the Unix epoch, written `<pid>-<nanos>`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct JobId {
    pid: u32,
    nanos: u64,
}

impl JobId {
    fn new() -> JobId {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64);
        JobId {
            pid: std::process::id(),
            nanos,
        }
    }

    /// The pid of the process that created the region (locale 0).
    pub(crate) fn creator(self) -> u32 {
        self.pid
    }

    fn parse(s: &str) -> Option<JobId> {
        let (pid, nanos) = s.split_once('-')?;
        Some(JobId {
            pid: pid.parse().ok()?,
            nanos: nanos.parse().ok()?,
        })
    }
}

impl fmt::Display for JobId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}-{}", self.pid, self.nanos)
    }
}

/// A piece of the region, by offset from its start.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Area {
    offset: usize,
    len: usize,
}

impl Area {
    /// The `len` bytes at `offset` (for a piece found inside a carved
    /// area; [`Region::ptr`] checks it lies in the region).
    pub(crate) fn new(offset: usize, len: usize) -> Area {
        Area { offset, len }
    }

    /// Bytes from the start of the region.
    pub(crate) fn offset(self) -> usize {
        self.offset
    }

    /// Length in bytes.
    #[cfg_attr(not(test), allow(dead_code))] // tests check carving with it
    pub(crate) fn len(self) -> usize {
        self.len
    }
}

/// A bump allocator of offsets: carves aligned areas one after another,
/// starting after the header. It computes offsets only; it touches no
/// memory. Every process of a job runs the same sequence of `carve` calls
/// to find the same areas.
#[derive(Clone, Debug)]
pub(crate) struct Layout {
    next: usize,
}

impl Layout {
    /// An empty layout: the next area starts right after the header.
    pub(crate) fn new() -> Layout {
        Layout { next: HEADER_SIZE }
    }

    /// The next `len` bytes aligned to `align` (a power of two, at most
    /// [`MAX_ALIGN`]). Use [`LINE`] for anything two processes write, so
    /// that no two writers share a cache line.
    ///
    /// # Errors
    ///
    /// [`ErrorKind::InvalidConfig`] if the region would grow beyond the
    /// address space (a layout computed from absurd sizes).
    ///
    /// # Panics
    ///
    /// If `align` is not a power of two or exceeds [`MAX_ALIGN`].
    pub(crate) fn carve(&mut self, len: usize, align: usize) -> Result<Area, Error> {
        assert!(
            align.is_power_of_two() && align <= MAX_ALIGN,
            "Layout::carve: alignment {align} is not a power of two up to {MAX_ALIGN}"
        );
        let overflow = || {
            Error::new(
                ErrorKind::InvalidConfig,
                format!(
                    "the shared-memory layout overflows the address space when adding \
                     {len} bytes at offset {}: ask for fewer locales or smaller rings",
                    self.next
                ),
            )
        };
        let offset = self
            .next
            .checked_next_multiple_of(align)
            .ok_or_else(overflow)?;
        let end = offset.checked_add(len).ok_or_else(overflow)?;
        self.next = end;
        Ok(Area { offset, len })
    }

    /// The region length this layout needs (pass it to [`Region::create`]).
    pub(crate) fn len(&self) -> usize {
        self.next
    }
}

/// This process's mapping of the job's shared region.
///
/// Memory in the region is reached through [`Region::ptr`] (raw bytes,
/// for structures such as rings that state their own protocol) or
/// [`Region::atomic_u32`] (futex words). The mapping lives as long as the
/// `Region`; the file lives until the last process that maps it or holds
/// its descriptor lets go.
pub(crate) struct Region {
    /// The memfd, close-on-exec; [`Region::share_with`] gives a child an
    /// inheritable duplicate.
    fd: OwnedFd,
    base: NonNull<u8>,
    len: usize,
    job: JobId,
}

// SAFETY: a Region is a mapping and a descriptor, both usable from any
// thread. It hands out only atomics (which are Sync) and raw pointers,
// whose users are responsible for synchronizing what they do through them
// (the same memory is written by other processes anyway).
unsafe impl Send for Region {}
// SAFETY: as for Send: `&Region` gives access only to atomics and to raw
// pointers; nothing in `Region` itself is mutated after construction.
unsafe impl Sync for Region {}

impl Region {
    /// Creates the job's shared region of `len` bytes (zero-filled) and
    /// writes its header with a fresh job id. The file is anonymous
    /// (`memfd_create`): it has no name in `/dev/shm` or anywhere else,
    /// so nothing is left behind when the job ends, however it ends.
    ///
    /// # Errors
    ///
    /// [`ErrorKind::InvalidConfig`] if `len` cannot hold the header;
    /// [`ErrorKind::Os`] if the kernel refuses the file, its size or the
    /// mapping.
    pub(crate) fn create(len: usize) -> Result<Region, Error> {
        if len < HEADER_SIZE {
            return Err(Error::new(
                ErrorKind::InvalidConfig,
                format!(
                    "a shared region of {len} bytes cannot hold its {HEADER_SIZE}-byte header: \
                     size it with Layout::len"
                ),
            ));
        }
        let size = libc::off_t::try_from(len).map_err(|_| {
            Error::new(
                ErrorKind::InvalidConfig,
                format!("a shared region of {len} bytes is larger than a file can be"),
            )
        })?;
        // SAFETY: the name is a NUL-terminated string literal; the flags
        // are valid for memfd_create.
        let raw = unsafe { libc::memfd_create(c"cantus-shm".as_ptr(), libc::MFD_CLOEXEC) };
        if raw < 0 {
            return Err(os_error(
                "could not create the job's shared memory (memfd_create)",
                "check the open-file limit (ulimit -n)",
            ));
        }
        // SAFETY: memfd_create just returned this descriptor; nothing else
        // owns it.
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        // SAFETY: `fd` is an open memfd; ftruncate takes it and a size.
        if unsafe { libc::ftruncate(fd.as_raw_fd(), size) } != 0 {
            return Err(os_error(
                &format!("could not size the job's shared memory to {len} bytes (ftruncate)"),
                "lower the ring sizes or the number of locales, or raise the memory limit",
            ));
        }
        let job = JobId::new();
        let region = Region {
            base: map(&fd, len)?,
            fd,
            len,
            job,
        };
        let header = Header {
            magic: MAGIC,
            version: VERSION,
            job_pid: job.pid,
            job_nanos: job.nanos,
            len: len as u64,
        };
        // SAFETY: the mapping is at least HEADER_SIZE bytes (checked
        // above), page-aligned, and no other process can see it yet (the
        // descriptor has not been shared), so this write races with
        // nothing.
        unsafe { region.base.cast::<Header>().as_ptr().write(header) };
        Ok(region)
    }

    /// Prepares `cmd` to start a process that will attach to this region
    /// with [`Region::attach_from_env`]: sets [`SHM_FD_VAR`] and
    /// [`JOB_VAR`], and arranges for the child, between `fork` and `exec`,
    /// to clear close-on-exec on a duplicate of the region's descriptor.
    ///
    /// The duplicate is owned by `cmd` (it is closed when `cmd` is
    /// dropped), and it is inheritable only in children spawned from
    /// `cmd`: other processes this process starts meanwhile, from other
    /// threads, do not receive the region.
    ///
    /// # Errors
    ///
    /// [`ErrorKind::Os`] if the descriptor cannot be duplicated.
    pub(crate) fn share_with(&self, cmd: &mut Command) -> Result<(), Error> {
        // SAFETY: `self.fd` is open; F_DUPFD_CLOEXEC returns a new
        // descriptor (or -1) and touches nothing else.
        let raw = unsafe { libc::fcntl(self.fd.as_raw_fd(), libc::F_DUPFD_CLOEXEC, 3) };
        if raw < 0 {
            return Err(os_error(
                "could not duplicate the shared region's descriptor for a child (fcntl)",
                "check the open-file limit (ulimit -n)",
            ));
        }
        // SAFETY: fcntl just returned this descriptor; nothing else owns it.
        let dup = unsafe { OwnedFd::from_raw_fd(raw) };
        cmd.env(SHM_FD_VAR, raw.to_string())
            .env(JOB_VAR, self.job.to_string());
        let pre_exec = move || {
            // SAFETY: runs in the child between fork and exec, where only
            // async-signal-safe calls are allowed: fcntl is one. `dup` is
            // open in the child, since fork copied the descriptor table
            // and `cmd` (which owns `dup`) was alive when it forked.
            if unsafe { libc::fcntl(dup.as_raw_fd(), libc::F_SETFD, 0) } != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        };
        // SAFETY: the closure calls only fcntl (async-signal-safe), does
        // not allocate, and touches no lock.
        unsafe { cmd.pre_exec(pre_exec) };
        Ok(())
    }

    /// Attaches to the region this process's parent shared with
    /// [`Region::share_with`], or returns `None` if the environment names
    /// none (this process is the first of its job).
    ///
    /// Validates before trusting anything: the descriptor must be an open
    /// regular file at least a header long; the header must carry
    /// [`MAGIC`], [`VERSION`], the job id of [`JOB_VAR`] and the file's
    /// size. The inherited descriptor is then marked close-on-exec, so
    /// this process's own children receive the region only through
    /// `share_with`.
    ///
    /// # Errors
    ///
    /// [`ErrorKind::SharedMemory`] naming what was wrong: one variable
    /// set without the other, a value that does not parse, a descriptor
    /// that is not open or not a region, a header that does not match;
    /// [`ErrorKind::Os`] if the mapping fails.
    pub(crate) fn attach_from_env() -> Result<Option<Region>, Error> {
        Region::attach(std::env::var_os(SHM_FD_VAR), std::env::var_os(JOB_VAR))
    }

    fn attach(
        fd_var: Option<OsString>,
        job_var: Option<OsString>,
    ) -> Result<Option<Region>, Error> {
        let (fd_var, job_var) = match (fd_var, job_var) {
            (None, None) => return Ok(None),
            (Some(fd), Some(job)) => (fd, job),
            (Some(_), None) | (None, Some(_)) => {
                return Err(bad(format!(
                    "only one of {SHM_FD_VAR} and {JOB_VAR} is set: a locale needs both, \
                     as Region::share_with sets them; unset the stray one"
                )));
            }
        };
        let fd_str = fd_var.to_string_lossy();
        let fd: RawFd = fd_str.parse().ok().filter(|&fd| fd >= 0).ok_or_else(|| {
            bad(format!(
                "{SHM_FD_VAR}={fd_str} is not a descriptor number (a non-negative integer)"
            ))
        })?;
        let job_str = job_var.to_string_lossy();
        let job = JobId::parse(&job_str).ok_or_else(|| {
            bad(format!(
                "{JOB_VAR}={job_str} is not a job id (expected <pid>-<nanos>, \
                 as the job's first process sets it)"
            ))
        })?;

        // SAFETY: an all-zero `stat` is a valid value of the plain C struct.
        let mut st: libc::stat = unsafe { std::mem::zeroed() };
        // SAFETY: fstat writes only into `st`; an fd that is not open is
        // reported as EBADF, not undefined behaviour.
        if unsafe { libc::fstat(fd, &mut st) } != 0 {
            return Err(bad(format!(
                "{SHM_FD_VAR}={fd} does not name an open descriptor in this process ({}): \
                 start locales through the job's first process, which shares the region \
                 with Region::share_with",
                std::io::Error::last_os_error()
            )));
        }
        // Our own descriptor for the region, close-on-exec; the inherited
        // one is left open (another attach may still want it) but is no
        // longer inherited, below.
        // SAFETY: `fd` is open (fstat succeeded); F_DUPFD_CLOEXEC returns
        // a new descriptor or -1.
        let raw = unsafe { libc::fcntl(fd, libc::F_DUPFD_CLOEXEC, 3) };
        if raw < 0 {
            return Err(os_error(
                "could not duplicate the inherited shared-region descriptor (fcntl)",
                "check the open-file limit (ulimit -n)",
            ));
        }
        // SAFETY: fcntl just returned this descriptor; nothing else owns it.
        let own = unsafe { OwnedFd::from_raw_fd(raw) };
        let region = Region::adopt(own, job, &format!("{SHM_FD_VAR}={fd}"), JOB_VAR)?;
        // SAFETY: `fd` is open; F_SETFD only changes its flags.
        unsafe { libc::fcntl(fd, libc::F_SETFD, libc::FD_CLOEXEC) };
        Ok(Some(region))
    }

    /// Validates the region file `own` (an open descriptor of this
    /// process's, close-on-exec) and maps it: a regular file at least a
    /// header long, whose header carries [`MAGIC`], [`VERSION`], the job
    /// id `job` (which `job_from` gave) and the file's size. `source`
    /// names where the descriptor came from, for the errors.
    fn adopt(own: OwnedFd, job: JobId, source: &str, job_from: &str) -> Result<Region, Error> {
        // SAFETY: an all-zero `stat` is a valid value of the plain C struct.
        let mut st: libc::stat = unsafe { std::mem::zeroed() };
        // SAFETY: fstat writes only into `st`; `own` is open.
        if unsafe { libc::fstat(own.as_raw_fd(), &mut st) } != 0 {
            return Err(os_error(
                &format!("could not inspect the shared region from {source} (fstat)"),
                "the descriptor must be a cantus region",
            ));
        }
        if st.st_mode & libc::S_IFMT != libc::S_IFREG {
            return Err(bad(format!(
                "{source} names a descriptor that is not a shared-memory file \
                 (a pipe, socket or device)"
            )));
        }
        let size = usize::try_from(st.st_size).unwrap_or(0);
        if size < HEADER_SIZE {
            return Err(bad(format!(
                "the file behind {source} is {} bytes, too small for a region \
                 header ({HEADER_SIZE} bytes): it is not a cantus region",
                st.st_size
            )));
        }

        let region = Region {
            base: map(&own, size)?,
            fd: own,
            len: size,
            job,
        };
        // SAFETY: the mapping is at least HEADER_SIZE bytes (checked
        // above) and page-aligned. The creator wrote the header before
        // this process existed and never writes it again.
        let header = unsafe { region.base.cast::<Header>().as_ptr().read() };
        if header.magic != MAGIC {
            return Err(bad(format!(
                "the file behind {source} is not a cantus shared region (its first \
                 bytes are {:?}, not {:?}): the variable names an unrelated descriptor",
                String::from_utf8_lossy(&header.magic),
                String::from_utf8_lossy(&MAGIC)
            )));
        }
        if header.version != VERSION {
            return Err(bad(format!(
                "the shared region behind {source} has layout version {}, but this \
                 binary uses version {VERSION}: every locale of a job must run the same \
                 cantus build",
                header.version
            )));
        }
        let theirs = JobId {
            pid: header.job_pid,
            nanos: header.job_nanos,
        };
        if theirs != job {
            return Err(bad(format!(
                "the shared region behind {source} belongs to job {theirs}, but \
                 {job_from}={job}: the environment comes from another job; start locales \
                 only through the job's first process"
            )));
        }
        if header.len != size as u64 {
            return Err(bad(format!(
                "the shared region behind {source} is {size} bytes, but its header \
                 says {}: the file was resized or its header overwritten",
                header.len
            )));
        }
        Ok(region)
    }

    /// What another process of this machine needs to open this region
    /// with [`Region::open_handed_over`] while this process lives: (this
    /// process's pid, the descriptor's number here, the job id's pid and
    /// nanoseconds). No name is made anywhere: the other process opens
    /// the descriptor through `/proc` (a ranks' node region, handed over
    /// by MPI, `comm/mpi/node.rs`).
    #[cfg_attr(not(feature = "mpi"), allow(dead_code))]
    pub(crate) fn handover(&self) -> [u64; 4] {
        [
            u64::from(std::process::id()),
            self.fd.as_raw_fd() as u64,
            u64::from(self.job.pid),
            self.job.nanos,
        ]
    }

    /// Opens and maps the region another process of this machine described
    /// with [`Region::handover`], opening its descriptor through
    /// `/proc/<pid>/fd/<fd>` (allowed to a process of the same user that
    /// may read the other's state: the same check as `/proc/<pid>/mem`'s
    /// read mode, which Yama's ptrace scope does not restrict), and
    /// validating it as [`Region::attach_from_env`] does.
    ///
    /// # Errors
    ///
    /// [`ErrorKind::SharedMemory`] naming what failed: the path cannot be
    /// opened (another user, `/proc` mounted with `hidepid`, the process
    /// gone), or the file is not the region described.
    #[cfg_attr(not(feature = "mpi"), allow(dead_code))]
    pub(crate) fn open_handed_over(words: [u64; 4]) -> Result<Region, Error> {
        let [pid, fd, job_pid, nanos] = words;
        let path = format!("/proc/{pid}/fd/{fd}");
        let cpath = std::ffi::CString::new(path.clone()).expect("a path without NUL");
        // SAFETY: a NUL-terminated path; the flags are valid for open; the
        // result is checked.
        let raw = unsafe { libc::open(cpath.as_ptr(), libc::O_RDWR | libc::O_CLOEXEC) };
        if raw < 0 {
            return Err(bad(format!(
                "could not open the node's shared region at {path}: {} (the ranks of a node \
                 must run as one user, with /proc readable to each other)",
                std::io::Error::last_os_error()
            )));
        }
        // SAFETY: open just returned this descriptor; nothing else owns it.
        let own = unsafe { OwnedFd::from_raw_fd(raw) };
        let job = JobId {
            pid: u32::try_from(job_pid).unwrap_or(u32::MAX),
            nanos,
        };
        Region::adopt(own, job, &path, "the node's handover")
    }

    /// The region's length in bytes.
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// The job this region belongs to.
    pub(crate) fn job(&self) -> JobId {
        self.job
    }

    /// This process's address of `area`. The address differs between
    /// processes: never store it in the region.
    ///
    /// # Panics
    ///
    /// If `area` does not lie inside the region (a layout that does not
    /// match the region's size).
    pub(crate) fn ptr(&self, area: Area) -> NonNull<u8> {
        assert!(
            area.offset
                .checked_add(area.len)
                .is_some_and(|end| end <= self.len),
            "area {area:?} lies outside the {}-byte shared region: the layout does not \
             match the region",
            self.len
        );
        // SAFETY: offset <= len (checked), so the result stays within (or
        // one past) the mapping, which cannot wrap the address space.
        unsafe { self.base.add(area.offset) }
    }

    /// The 32-bit atomic word at `offset` (a futex word, a flag).
    ///
    /// # Panics
    ///
    /// If the word is misaligned or not inside the region.
    pub(crate) fn atomic_u32(&self, offset: usize) -> &AtomicU32 {
        assert!(
            offset % align_of::<AtomicU32>() == 0,
            "offset {offset} of a 32-bit atomic word is not 4-byte aligned"
        );
        let p = self.ptr(Area { offset, len: 4 });
        // SAFETY: in bounds (checked by `ptr`), aligned (the mapping is
        // page-aligned and the offset is a multiple of 4), and valid for
        // the lifetime of `&self` (the mapping lives as long as the
        // Region). Any bit pattern is a valid AtomicU32. Every process
        // accesses these words only atomically.
        unsafe { p.cast::<AtomicU32>().as_ref() }
    }
}

impl Drop for Region {
    fn drop(&mut self) {
        // SAFETY: `base`/`len` is exactly the mapping made at
        // construction, and nothing borrowed from `self` outlives it.
        unsafe { libc::munmap(self.base.as_ptr().cast(), self.len) };
    }
}

impl fmt::Debug for Region {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Region")
            .field("fd", &self.fd.as_raw_fd())
            .field("len", &self.len)
            .field("job", &self.job)
            .finish_non_exhaustive()
    }
}

/// Maps `len` bytes of `fd` shared, readable and writable.
fn map(fd: &OwnedFd, len: usize) -> Result<NonNull<u8>, Error> {
    // SAFETY: a fresh mapping (null hint) of an open file descriptor; it
    // overlaps no existing Rust object.
    let p = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            len,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_SHARED,
            fd.as_raw_fd(),
            0,
        )
    };
    if p == libc::MAP_FAILED {
        return Err(os_error(
            &format!("could not map the job's {len}-byte shared region (mmap)"),
            "check the address-space limit (ulimit -v)",
        ));
    }
    Ok(NonNull::new(p.cast()).expect("mmap returned a null mapping"))
}

fn bad(message: String) -> Error {
    Error::new(ErrorKind::SharedMemory, message)
}

/// An [`ErrorKind::Os`] error for the call that just failed (reads
/// `errno`, so call it before anything else can change it).
fn os_error(what: &str, remedy: &str) -> Error {
    let err = std::io::Error::last_os_error();
    Error::new(ErrorKind::Os, format!("{what}: {err}; {remedy}"))
}
