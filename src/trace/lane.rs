//! A locale's trace file and its lanes (`README.md`, "The part file").
//!
//! The file is mapped shared: an event is in the file as soon as it is
//! written to memory, so a process that crashes or is killed leaves every
//! event it published. A lane has one writer (the thread that claimed
//! it); it writes the event, then publishes the new count with a Release
//! store, which a reader (the merge, possibly another process) loads
//! with Acquire before reading that many events.

use super::Event;
use super::private::{self, Dir};
use crate::error::{Error, ErrorKind};
use std::cell::Cell;
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::{AtomicI64, AtomicU32, AtomicU64, Ordering};

/// The file's first bytes.
pub(crate) const MAGIC: [u8; 8] = *b"CANTUSTR";
/// The format's version (2: the process, the job and the trace's path in
/// the header).
pub(crate) const VERSION: u32 = 2;
/// Most lanes in one locale's file (workers, outside threads, the MPI
/// thread, blocking-call threads); a thread beyond them records nothing
/// and is counted as dropped.
pub(crate) const LANES_MAX: usize = 64;
/// Bytes of the header, lanes' records included (a page multiple).
pub(crate) const HEADER_BYTES: usize = 8192;
/// Bytes of a lane's name.
pub(crate) const NAME_BYTES: usize = 48;
/// Where the trace's absolute path is, in the header (after the lanes'
/// records).
pub(crate) const PATH_OFFSET: usize = 128 + LANES_MAX * 64;
/// The longest trace path a header holds.
pub(crate) const PATH_BYTES: usize = HEADER_BYTES - PATH_OFFSET;
/// The start of a parts directory's name (`cantus-trace-<stem>-<job>`).
pub(crate) const DIR_PREFIX: &str = "cantus-trace-";

/// The file's header.
#[repr(C)]
pub(crate) struct FileHeader {
    pub(crate) magic: [u8; 8],
    pub(crate) version: u32,
    pub(crate) locale: u32,
    pub(crate) locales: u32,
    pub(crate) workers: u32,
    pub(crate) lanes_max: u32,
    pub(crate) lane_events: u32,
    /// The clock when recording started.
    pub(crate) start_ns: u64,
    /// Added to this file's times to put them on locale 0's clock (0 on
    /// one machine, where every process reads the same clock; measured
    /// by locale 0 over MPI: `remote/clock.rs`).
    pub(crate) clock_offset_ns: AtomicI64,
    /// Lanes claimed so far.
    pub(crate) lanes_used: AtomicU32,
    /// 1 once the locale stopped recording cleanly.
    pub(crate) done: AtomicU32,
    /// The clock when it stopped (0 until then).
    pub(crate) end_ns: AtomicU64,
    /// Events of threads that found no free lane.
    pub(crate) unlaned: AtomicU64,
    /// The clock's ticks when recording started (`start_ns` then).
    pub(crate) tick0: u64,
    /// Nanoseconds per tick, measured at the start (an `f64`'s bits).
    pub(crate) ns_per_tick: u64,
    /// The ticks when it stopped (`end_ns` then; 0 until then): with the
    /// start, the exact rate over the run.
    pub(crate) tick_end: AtomicU64,
    /// How far `clock_offset_ns` may be off (half the shortest round trip
    /// that measured it; 0 on one machine).
    pub(crate) clock_error_ns: AtomicU64,
    /// The process that records (to tell a dead job's parts from a live
    /// one's).
    pub(crate) pid: u32,
    /// Bytes of the trace's absolute path, at [`PATH_OFFSET`].
    pub(crate) path_len: u32,
    /// The job (the random number in its parts directory's name).
    pub(crate) job: u64,
}

/// One lane's record in the header.
#[repr(C)]
pub(crate) struct LaneMeta {
    /// Events published.
    pub(crate) len: AtomicU64,
    /// Events not recorded because the lane was full.
    pub(crate) dropped: AtomicU64,
    /// The thread's name (UTF-8, NUL-padded).
    pub(crate) name: [u8; NAME_BYTES],
}

const _: () = assert!(size_of::<FileHeader>() <= 128);
const _: () = assert!(size_of::<LaneMeta>() == 64);
const _: () = assert!(128 + LANES_MAX * 64 <= HEADER_BYTES);
const _: () = assert!(size_of::<Event>() == 32);
const _: () = assert!(PATH_BYTES >= 2048);

/// Offset of lane `i`'s record in the header.
pub(crate) fn meta_offset(i: usize) -> usize {
    128 + i * size_of::<LaneMeta>()
}

/// Offset of lane `i`'s events.
pub(crate) fn events_offset(i: usize, lane_events: usize) -> usize {
    HEADER_BYTES + i * lane_events * size_of::<Event>()
}

/// The name of locale `here`'s part file in its job's parts directory.
pub(crate) fn part_name(here: usize) -> String {
    format!("locale-{here}.bin")
}

/// The trace's file name, cut to 64 bytes, for the names of its parts
/// directories (only a hint to a person listing them: a directory is
/// matched to its trace by the path its parts record).
fn stem(absolute: &Path) -> String {
    let mut stem = absolute
        .file_name()
        .map_or_else(|| "trace".into(), |n| n.to_string_lossy().into_owned());
    while stem.len() > 64 {
        stem.pop();
    }
    stem
}

/// Where the parts directories of the trace `absolute` are made:
/// `CANTUS_TRACE_PARTS` if set (a directory every locale reaches, across
/// machines); else `/dev/shm` where it exists (memory: no disk writes
/// while recording, and the files outlive a crashed process); else the
/// trace's own directory.
pub(crate) fn parts_base(absolute: &Path) -> PathBuf {
    if let Some(dir) = std::env::var_os("CANTUS_TRACE_PARTS").filter(|d| !d.is_empty()) {
        return PathBuf::from(dir);
    }
    let shm = Path::new("/dev/shm");
    if shm.is_dir() {
        return shm.to_owned();
    }
    absolute
        .parent()
        .map_or_else(|| PathBuf::from("."), Path::to_owned)
}

/// The start of the names of the parts directories of the trace
/// `absolute`: `cantus-trace-<stem>-`, followed by the job's number.
pub(crate) fn parts_prefix(absolute: &Path) -> String {
    format!("{DIR_PREFIX}{}-", stem(absolute))
}

/// Job `job`'s parts directory for the trace `absolute`:
/// `<parts_base>/cantus-trace-<stem>-<job>`. The job's number is random
/// (`private::random`), so that nobody else can make the directory
/// before the job does, and every locale of the job knows it (locale 0
/// hands it to the locales it starts; over MPI, rank 0 broadcasts it).
pub(crate) fn parts_dir(absolute: &Path, job: u64) -> PathBuf {
    parts_base(absolute).join(format!("{}{job:016x}", parts_prefix(absolute)))
}

/// A job's number for its parts directory, new and random.
pub(crate) fn new_job() -> Result<u64, Error> {
    private::random().map_err(|e| {
        Error::new(
            ErrorKind::Os,
            format!("cantus: could not draw a random name for the trace's parts (getrandom): {e}"),
        )
    })
}

/// The mapped file of this process's locale.
struct Recorder {
    base: *mut u8,
    lane_events: usize,
}

// SAFETY: the mapping is shared memory written through lanes, each by its
// one claiming thread, and through atomics in the header.
unsafe impl Send for Recorder {}
// SAFETY: as above.
unsafe impl Sync for Recorder {}

impl Recorder {
    fn header(&self) -> &FileHeader {
        // SAFETY: the mapping starts with a header we wrote, and lives
        // for the process (never unmapped: see `close`).
        unsafe { &*self.base.cast::<FileHeader>() }
    }

    fn meta(&self, i: usize) -> &LaneMeta {
        // SAFETY: lane records follow the header inside the mapping.
        unsafe { &*self.base.add(meta_offset(i)).cast::<LaneMeta>() }
    }

    fn writer(&self, i: usize, name: &str) -> Writer {
        let m = self.meta(i);
        let bytes = name.as_bytes();
        let n = bytes.len().min(NAME_BYTES - 1);
        // SAFETY: the record is ours (lane `i` is being claimed by this
        // thread, before any event); `name` is a plain byte array.
        unsafe {
            let dst = std::ptr::addr_of!(m.name).cast_mut().cast::<u8>();
            std::ptr::write_bytes(dst, 0, NAME_BYTES);
            std::ptr::copy_nonoverlapping(bytes.as_ptr(), dst, n);
        }
        Writer {
            // SAFETY: lane `i`'s events lie inside the mapping.
            events: unsafe { self.base.add(events_offset(i, self.lane_events)) }.cast(),
            cap: self.lane_events as u64,
            meta: m,
        }
    }
}

/// The lane a thread writes.
#[derive(Clone, Copy)]
struct Writer {
    events: *mut Event,
    cap: u64,
    meta: *const LaneMeta,
}

/// The recorder of the traced runtime, if any.
static RECORDER: Mutex<Option<&'static Recorder>> = Mutex::new(None);
/// Bumped at each start and stop: a lane claimed under an older
/// generation is claimed again.
static GENERATION: AtomicU64 = AtomicU64::new(0);

thread_local! {
    /// This thread's lane and the generation it was claimed in.
    static LANE: Cell<(Option<Writer>, u64)> = const { Cell::new((None, u64::MAX)) };
}

/// Appends an event to the calling thread's lane (claiming one first if
/// it has none).
#[inline]
pub(crate) fn append(e: Event) {
    let (w, generation) = LANE.with(|l| l.get());
    let w = match w {
        Some(w) if generation == GENERATION.load(Ordering::Relaxed) => w,
        _ => match claim_other() {
            Some(w) => w,
            None => return,
        },
    };
    // SAFETY: `meta` and `events` point into the mapping, which is never
    // unmapped; this thread is the lane's one writer.
    unsafe {
        let m = &*w.meta;
        let n = m.len.load(Ordering::Relaxed);
        if n < w.cap {
            w.events.add(n as usize).write(e);
            // Release: a reader that sees the count sees the event.
            m.len.store(n + 1, Ordering::Release);
        } else {
            m.dropped
                .store(m.dropped.load(Ordering::Relaxed) + 1, Ordering::Relaxed);
        }
    }
}

fn recorder() -> Option<&'static Recorder> {
    *RECORDER.lock().unwrap_or_else(|p| p.into_inner())
}

/// Sets this locale's clock offset to locale 0's, and its error bound.
pub(crate) fn set_clock_offset(offset_ns: i64, error_ns: u64) {
    if let Some(r) = recorder() {
        let h = r.header();
        h.clock_offset_ns.store(offset_ns, Ordering::Relaxed);
        h.clock_error_ns.store(error_ns, Ordering::Relaxed);
    }
}

/// Whether a traced runtime's file is open in this process.
pub(crate) fn recording() -> bool {
    recorder().is_some()
}

/// Touches every page of a lane once, as its thread claims it: a page
/// first touched while recording costs a page fault (the zeroing of a
/// fresh page), which made recording five times dearer; so a lane's
/// memory, `CANTUS_TRACE_EVENTS` x 32 bytes, is committed when claimed.
fn prefault(w: &Writer) {
    let bytes = w.cap as usize * size_of::<Event>();
    let base = w.events.cast::<u8>();
    for off in (0..bytes).step_by(4096) {
        // SAFETY: inside the lane (which lies inside the mapping); the
        // bytes are zero and no event is there yet (the lane is being
        // claimed), so writing a zero changes nothing but residency.
        unsafe { std::ptr::write_volatile(base.add(off), 0) };
    }
}

/// Claims lane `index` (worker `index`'s) for the calling thread.
pub(crate) fn claim_worker(index: usize) {
    let Some(r) = recorder() else {
        return;
    };
    if index >= LANES_MAX {
        return;
    }
    let w = r.writer(index, &format!("worker {index}"));
    prefault(&w);
    LANE.with(|l| l.set((Some(w), GENERATION.load(Ordering::Relaxed))));
}

/// Claims the next free lane (past the workers') for a thread that is not
/// a worker; `None` when all are taken (its events are counted dropped).
#[cold]
fn claim_other() -> Option<Writer> {
    let r = recorder()?;
    let h = r.header();
    let i = h.lanes_used.fetch_add(1, Ordering::Relaxed) as usize;
    if i >= LANES_MAX {
        h.unlaned.fetch_add(1, Ordering::Relaxed);
        return None;
    }
    let name = std::thread::current()
        .name()
        .map_or_else(|| format!("thread {i}"), str::to_owned);
    let w = r.writer(i, &name);
    prefault(&w);
    LANE.with(|l| l.set((Some(w), GENERATION.load(Ordering::Relaxed))));
    Some(w)
}

/// The clock now, its ticks now, and nanoseconds per tick (measured over
/// 2 ms: a part whose locale dies before it stops keeps this rate).
fn calibrate() -> (u64, u64, f64) {
    let (ns0, t0) = (super::now(), super::ticks());
    std::thread::sleep(std::time::Duration::from_millis(2));
    let (ns1, t1) = (super::now(), super::ticks());
    let rate = if t1 > t0 {
        (ns1 - ns0) as f64 / (t1 - t0) as f64
    } else {
        1.0
    };
    (ns0, t0, rate)
}

/// Makes and maps locale `here`'s part file of the trace `path`, in the
/// parts directory of job `job` (made if no other locale of the job made
/// it yet); returns the directory.
pub(crate) fn open(
    path: &Path,
    here: usize,
    locales: usize,
    workers: usize,
    lane_events: usize,
    job: u64,
) -> Result<PathBuf, Error> {
    let fail = |what: &str, e: &dyn std::fmt::Display| {
        Error::new(
            ErrorKind::InvalidConfig,
            format!(
                "cantus: CANTUS_TRACE={}: could not {what}: {e}",
                path.display()
            ),
        )
    };
    let absolute = std::path::absolute(path).map_err(|e| fail("find its absolute path", &e))?;
    let trace_path = absolute.as_os_str().as_encoded_bytes();
    if trace_path.len() > PATH_BYTES {
        return Err(fail(
            "record it",
            &format!("the path is longer than {PATH_BYTES} bytes"),
        ));
    }
    let base = parts_base(&absolute);
    std::os::unix::fs::DirBuilderExt::mode(std::fs::DirBuilder::new().recursive(true), 0o700)
        .create(&base)
        .map_err(|e| fail(&format!("make {}", base.display()), &e))?;
    let dir = Dir::make(&parts_dir(&absolute, job))
        .map_err(|e| fail("make the private directory of part files", &e))?;
    let file = dir
        .create(&part_name(here))
        .map_err(|e| fail("create the part file", &e))?;
    let fd = file.as_raw_fd();
    let bytes = HEADER_BYTES + LANES_MAX * lane_events * size_of::<Event>();
    // A sparse file of `bytes` (pages are backed only when written).
    file.set_len(bytes as u64)
        .map_err(|e| fail("size the part file", &e))?;
    // SAFETY: maps the whole file shared; checked below.
    let base = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            bytes,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_SHARED,
            fd,
            0,
        )
    };
    let e = std::io::Error::last_os_error();
    // The mapping keeps the file; the descriptor is not needed.
    drop(file);
    if base == libc::MAP_FAILED {
        return Err(fail("map the part file", &e));
    }
    let (start_ns, tick0, ns_per_tick) = calibrate();
    let header = FileHeader {
        magic: MAGIC,
        version: VERSION,
        locale: here as u32,
        locales: locales as u32,
        workers: workers as u32,
        lanes_max: LANES_MAX as u32,
        lane_events: lane_events as u32,
        start_ns,
        clock_offset_ns: AtomicI64::new(0),
        lanes_used: AtomicU32::new(workers.min(LANES_MAX) as u32),
        done: AtomicU32::new(0),
        end_ns: AtomicU64::new(0),
        unlaned: AtomicU64::new(0),
        tick0,
        ns_per_tick: ns_per_tick.to_bits(),
        tick_end: AtomicU64::new(0),
        clock_error_ns: AtomicU64::new(0),
        pid: std::process::id(),
        path_len: trace_path.len() as u32,
        job,
    };
    // SAFETY: the mapping is at least HEADER_BYTES long, zeroed (a fresh
    // file), and page aligned; the path fits after the lanes' records
    // (checked above).
    unsafe {
        base.cast::<FileHeader>().write(header);
        std::ptr::copy_nonoverlapping(
            trace_path.as_ptr(),
            base.cast::<u8>().add(PATH_OFFSET),
            trace_path.len(),
        );
    }
    let r: &'static Recorder = Box::leak(Box::new(Recorder {
        base: base.cast(),
        lane_events,
    }));
    GENERATION.fetch_add(1, Ordering::Relaxed);
    *RECORDER.lock().unwrap_or_else(|p| p.into_inner()) = Some(r);
    Ok(dir.path)
}

/// Marks this locale's file complete. The mapping stays (a thread that
/// checked `on()` just before may still write one event into it); the
/// kernel writes it back to the file.
pub(crate) fn close() {
    let r = RECORDER.lock().unwrap_or_else(|p| p.into_inner()).take();
    GENERATION.fetch_add(1, Ordering::Relaxed);
    if let Some(r) = r {
        let h = r.header();
        h.tick_end.store(super::ticks(), Ordering::Relaxed);
        h.end_ns.store(super::now(), Ordering::Relaxed);
        // Release: the merge loads `done` (Acquire) before trusting the
        // counts as final.
        h.done.store(1, Ordering::Release);
    }
}
