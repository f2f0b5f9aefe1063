//! Tests of the region and the futex helpers, including one across two
//! processes: the test binary re-runs itself as the child, which attaches
//! to the region its parent shared (the pattern of
//! `sched/driver/tests.rs`).

use super::*;
use crate::comm::shm::futex::{FutexWait, futex_wait, futex_wake};
use crate::comm::shm::ring::{self, Consumer, Producer};
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

/// Set in the child's environment: "you are the child".
const CHILD_VAR: &str = "CANTUS_SHM_TEST_CHILD";

fn expect_err(r: Result<Option<Region>, Error>, kind: ErrorKind, text: &str) {
    let e = r.expect_err("attach should have failed");
    assert_eq!(e.kind(), kind, "{e}");
    assert!(e.to_string().contains(text), "want {text:?} in: {e}");
}

fn attach(fd: impl ToString, job: impl ToString) -> Result<Option<Region>, Error> {
    Region::attach(Some(fd.to_string().into()), Some(job.to_string().into()))
}

#[test]
fn layout_carves_aligned_areas_after_the_header() {
    let mut l = Layout::new();
    assert_eq!(l.len(), HEADER_SIZE);
    let a = l.carve(10, 8).unwrap();
    assert_eq!((a.offset(), a.len()), (HEADER_SIZE, 10));
    let b = l.carve(1, LINE).unwrap();
    assert_eq!(b.offset(), 2 * LINE);
    let c = l.carve(4, 4).unwrap();
    assert_eq!(c.offset(), 2 * LINE + 4);
    assert_eq!(l.len(), 2 * LINE + 8);
    let e = l.carve(usize::MAX, 8).err().unwrap();
    assert_eq!(e.kind(), ErrorKind::InvalidConfig);
    assert!(e.to_string().contains("overflows"), "{e}");
}

#[test]
fn create_refuses_a_region_too_small_for_its_header() {
    let e = Region::create(HEADER_SIZE - 1).err().unwrap();
    assert_eq!(e.kind(), ErrorKind::InvalidConfig);
    assert!(e.to_string().contains("Layout::len"), "{e}");
}

#[test]
#[should_panic(expected = "outside the 4096-byte shared region")]
fn an_area_outside_the_region_is_refused() {
    let r = Region::create(4096).unwrap();
    r.ptr(Area {
        offset: 4000,
        len: 97,
    });
}

#[test]
fn the_region_is_anonymous_and_not_in_dev_shm() {
    let r = Region::create(1 << 16).unwrap();
    let fd = r.fd.as_raw_fd();
    let link = std::fs::read_link(format!("/proc/self/fd/{fd}")).unwrap();
    assert!(
        link.to_string_lossy().starts_with("/memfd:cantus-shm"),
        "not a memfd: {link:?}"
    );
    // SAFETY: zeroed stat is valid; fstat fills it for an open fd.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: as above.
    assert_eq!(unsafe { libc::fstat(fd, &mut st) }, 0);
    assert_eq!(st.st_size, 1 << 16);
    if let Ok(entries) = std::fs::read_dir("/dev/shm") {
        for e in entries.flatten() {
            // (Other files of cantus may be there: a trace's parts, another
            // job's. The region is none of them.)
            let name = e.file_name();
            assert!(
                !name.to_string_lossy().starts_with("cantus-shm"),
                "found {name:?} in /dev/shm"
            );
            if let Ok(m) = e.metadata() {
                use std::os::unix::fs::MetadataExt;
                assert!(
                    !(m.dev() == st.st_dev && m.ino() == st.st_ino),
                    "the region is visible as /dev/shm/{name:?}"
                );
            }
        }
    }
}

#[test]
fn attach_with_no_environment_is_none() {
    assert!(Region::attach(None, None).unwrap().is_none());
}

#[test]
fn attach_names_what_is_wrong() {
    let r = Region::create(4096).unwrap();
    let fd = r.fd.as_raw_fd();
    let job = r.job();
    let one = Region::attach(Some("3".into()), None);
    expect_err(
        one,
        ErrorKind::SharedMemory,
        "only one of CANTUS_SHM_FD and CANTUS_JOB",
    );
    expect_err(
        attach("x7", job),
        ErrorKind::SharedMemory,
        "CANTUS_SHM_FD=x7 is not a descriptor",
    );
    expect_err(
        attach(-1, job),
        ErrorKind::SharedMemory,
        "CANTUS_SHM_FD=-1 is not a descriptor",
    );
    expect_err(
        attach(fd, "12_34"),
        ErrorKind::SharedMemory,
        "CANTUS_JOB=12_34 is not a job id",
    );
    expect_err(
        attach(1 << 20, job),
        ErrorKind::SharedMemory,
        "does not name an open descriptor",
    );

    let mut pipe = [0; 2];
    // SAFETY: pipe writes two descriptors into the array.
    assert_eq!(unsafe { libc::pipe(pipe.as_mut_ptr()) }, 0);
    expect_err(
        attach(pipe[0], job),
        ErrorKind::SharedMemory,
        "not a shared-memory file",
    );
    for p in pipe {
        // SAFETY: the pipe's descriptors, closed once.
        unsafe { libc::close(p) };
    }

    let other = JobId {
        pid: job.pid,
        nanos: job.nanos + 1,
    };
    expect_err(
        attach(fd, other),
        ErrorKind::SharedMemory,
        &format!("belongs to job {job}"),
    );

    // A file of the right size that is not a region.
    let f = tempfile_of(4096);
    expect_err(
        attach(f.as_raw_fd(), job),
        ErrorKind::SharedMemory,
        "not a cantus shared region",
    );
    let tiny = tempfile_of(HEADER_SIZE as i64 - 1);
    expect_err(
        attach(tiny.as_raw_fd(), job),
        ErrorKind::SharedMemory,
        "too small",
    );

    // Another layout version.
    let v = Region::create(4096).unwrap();
    // SAFETY: the header's version field; no other process maps `v`.
    unsafe { (*v.base.cast::<Header>().as_ptr()).version = VERSION + 1 };
    expect_err(
        attach(v.fd.as_raw_fd(), v.job()),
        ErrorKind::SharedMemory,
        "layout version",
    );

    // A file resized behind the header's back.
    let g = Region::create(4096).unwrap();
    // SAFETY: ftruncate on an open memfd.
    assert_eq!(unsafe { libc::ftruncate(g.fd.as_raw_fd(), 8192) }, 0);
    expect_err(
        attach(g.fd.as_raw_fd(), g.job()),
        ErrorKind::SharedMemory,
        "header says 4096",
    );

    // And the right one attaches, sharing memory with the original.
    let same = attach(fd, job).unwrap().unwrap();
    assert_eq!((same.len(), same.job()), (4096, job));
    r.atomic_u32(HEADER_SIZE).store(77, Ordering::Relaxed);
    assert_eq!(same.atomic_u32(HEADER_SIZE).load(Ordering::Relaxed), 77);
}

/// A memfd of `len` bytes that is not a region.
fn tempfile_of(len: i64) -> OwnedFd {
    // SAFETY: string literal name, valid flags.
    let raw = unsafe { libc::memfd_create(c"not-a-region".as_ptr(), libc::MFD_CLOEXEC) };
    assert!(raw >= 0);
    // SAFETY: just created, owned by nobody else.
    let fd = unsafe { OwnedFd::from_raw_fd(raw) };
    // SAFETY: ftruncate on an open memfd.
    assert_eq!(unsafe { libc::ftruncate(raw, len) }, 0);
    fd
}

#[test]
fn futex_outcomes_within_a_process() {
    let r = Region::create(4096).unwrap();
    let w = r.atomic_u32(HEADER_SIZE);
    assert_eq!(
        futex_wait(w, 1, Some(Duration::from_millis(1))),
        FutexWait::Changed
    );
    let t0 = Instant::now();
    assert_eq!(
        futex_wait(w, 0, Some(Duration::from_millis(20))),
        FutexWait::TimedOut
    );
    assert!(t0.elapsed() >= Duration::from_millis(20));
    assert_eq!(futex_wake(w, 1), 0);
}

/// Everything the two processes share, by offset.
struct Shared {
    ready: Area,
    go: Area,
    done: Area,
    before: Area,
    after: Area,
    reply: Area,
    ring: Area,
}

const RING_CAPACITY: usize = 4096;
const RING_FRAMES: u64 = 20_000;

impl Shared {
    /// The layout both processes compute.
    fn layout() -> (Shared, usize) {
        let mut l = Layout::new();
        let s = Shared {
            ready: l.carve(4, LINE).unwrap(),
            go: l.carve(4, LINE).unwrap(),
            done: l.carve(4, LINE).unwrap(),
            before: l.carve(1000, 8).unwrap(),
            after: l.carve(1000, 8).unwrap(),
            reply: l.carve(1000, 8).unwrap(),
            ring: l
                .carve(ring::footprint(RING_CAPACITY), ring::ALIGN)
                .unwrap(),
        };
        (s, l.len())
    }
}

/// Frame `i`'s payload: `i` mod 200 bytes.
fn frame_payload(i: u64) -> Vec<u8> {
    (0..i % 200).map(|j| (i as u8) ^ (j as u8)).collect()
}

fn pattern(seed: u8) -> Vec<u8> {
    (0..1000).map(|i| (i as u8).wrapping_mul(seed)).collect()
}

/// # Safety
///
/// `area` is in `r` and nothing writes it concurrently.
unsafe fn bytes(r: &Region, area: Area) -> &[u8] {
    // SAFETY: in bounds by `ptr`; the caller rules out concurrent writes.
    unsafe { std::slice::from_raw_parts(r.ptr(area).as_ptr(), area.len()) }
}

/// # Safety
///
/// `area` is in `r` and nothing else accesses it concurrently.
unsafe fn write(r: &Region, area: Area, src: &[u8]) {
    // SAFETY: in bounds by `ptr` (src is at most area.len()); exclusive by
    // the caller's contract.
    unsafe { std::ptr::copy_nonoverlapping(src.as_ptr(), r.ptr(area).as_ptr(), src.len()) }
}

/// Waits (on the futex) until `word` holds `value`, for at most 30 s.
fn await_value(word: &AtomicU32, value: u32) {
    let t0 = Instant::now();
    loop {
        // Acquire: pairs with the other process's Release store of
        // `value`, so its writes before that store are visible.
        let v = word.load(Ordering::Acquire);
        if v == value {
            return;
        }
        assert!(
            t0.elapsed() < Duration::from_secs(30),
            "the other process never signalled"
        );
        let _ = futex_wait(word, v, Some(Duration::from_millis(100)));
    }
}

/// The parent creates the region and writes to it, then starts the child,
/// which attaches through the environment and checks it sees the writes
/// made before and after it started; futex wakes go both ways (the
/// parent's wake is counted as waking the child, which sleeps on a word
/// that does not change); a ring in the region carries frames from parent
/// to child.
#[test]
fn a_child_process_attaches_and_shares_memory_and_wakes() {
    if std::env::var_os(CHILD_VAR).is_some() {
        child();
        return;
    }
    let (s, len) = Shared::layout();
    let r = Region::create(len).unwrap();
    // SAFETY: no other process maps the region yet.
    unsafe { write(&r, s.before, &pattern(3)) };
    // SAFETY: the ring area lies in the region (aligned by the layout),
    // and no process has attached to it yet.
    unsafe { ring::init(r.ptr(s.ring), RING_CAPACITY) }.unwrap();

    let mut cmd = std::process::Command::new(std::env::current_exe().unwrap());
    cmd.args([
        "comm::shm::region::tests::a_child_process_attaches_and_shares_memory_and_wakes",
        "--exact",
        "--nocapture",
        "--test-threads=1",
    ])
    .env(CHILD_VAR, "1")
    .stdout(std::process::Stdio::null())
    .stderr(std::process::Stdio::piped());
    r.share_with(&mut cmd).unwrap();
    let mut child = cmd.spawn().expect("re-run the test binary");
    drop(cmd);
    let mut err = child.stderr.take().unwrap();
    let reader = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = std::io::Read::read_to_string(&mut err, &mut s);
        s
    });

    let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| parent(&r, &s)));
    let t0 = Instant::now();
    let status = loop {
        if let Some(st) = child.try_wait().unwrap() {
            break Some(st);
        }
        if t0.elapsed() > Duration::from_secs(60) {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    let stderr = reader.join().unwrap();
    assert!(status.is_some(), "the child ran for 60 s; killed\n{stderr}");
    assert!(status.unwrap().success(), "the child failed:\n{stderr}");
    if let Err(e) = outcome {
        std::panic::resume_unwind(e);
    }
    // SAFETY: the child has exited.
    assert_eq!(unsafe { bytes(&r, s.reply) }, &pattern(7)[..]);
}

fn parent(r: &Region, s: &Shared) {
    let (ready, go, done) = (
        r.atomic_u32(s.ready.offset()),
        r.atomic_u32(s.go.offset()),
        r.atomic_u32(s.done.offset()),
    );
    await_value(ready, 1);
    // The child sleeps on `go` == 0 from now on: write the second pattern
    // (after the child started, so it cannot be a copy made at spawn).
    // SAFETY: the child reads `after` only once `go` is 1, below.
    unsafe { write(r, s.after, &pattern(5)) };
    // Wake it without changing `go`: only a wake that crosses processes
    // ends its wait, and the count says it reached a sleeper. Retry until
    // one finds it asleep.
    let t0 = Instant::now();
    while futex_wake(go, 1) == 0 {
        assert!(
            t0.elapsed() < Duration::from_secs(30),
            "the child never slept on `go`"
        );
        std::thread::sleep(Duration::from_millis(1));
    }
    // Release: pairs with the child's Acquire load in `await_value`, so
    // it sees `after`.
    go.store(1, Ordering::Release);
    futex_wake(go, 1);
    // SAFETY: the child attached the consumer before signalling `ready`;
    // this is the ring's only producer.
    let mut p = unsafe { Producer::attach(r.ptr(s.ring), RING_CAPACITY) }.unwrap();
    for i in 0..RING_FRAMES {
        let data = frame_payload(i);
        while p.try_send(i as u32, &data).is_err() {
            std::thread::yield_now();
        }
    }
    await_value(done, 1);
}

fn child() {
    let r = Region::attach_from_env()
        .unwrap()
        .expect("the child found no region in its environment");
    let (s, len) = Shared::layout();
    assert_eq!(r.len(), len);
    // SAFETY: written by the parent before this process started.
    assert_eq!(unsafe { bytes(&r, s.before) }, &pattern(3)[..]);
    // SAFETY: the ring is initialized; this is its only consumer.
    let mut c = unsafe { Consumer::attach(r.ptr(s.ring), RING_CAPACITY) }.unwrap();
    let (ready, go, done) = (
        r.atomic_u32(s.ready.offset()),
        r.atomic_u32(s.go.offset()),
        r.atomic_u32(s.done.offset()),
    );
    // Release: pairs with the parent's Acquire load in `await_value`.
    ready.store(1, Ordering::Release);
    futex_wake(ready, 1);
    loop {
        match futex_wait(go, 0, Some(Duration::from_secs(30))) {
            FutexWait::Woken | FutexWait::Changed => break,
            FutexWait::Interrupted => continue,
            FutexWait::TimedOut => panic!("the parent's wake never came"),
        }
    }
    await_value(go, 1);
    // SAFETY: the parent wrote `after` before its Release store of `go`
    // (seen by the Acquire load in `await_value`) and never again.
    assert_eq!(unsafe { bytes(&r, s.after) }, &pattern(5)[..]);
    let mut got = 0;
    let t0 = Instant::now();
    while got < RING_FRAMES {
        assert!(
            t0.elapsed() < Duration::from_secs(30),
            "frames stopped at {got}"
        );
        let Some(f) = c.try_peek().unwrap() else {
            std::thread::yield_now();
            continue;
        };
        let want = frame_payload(got);
        assert_eq!(
            (f.tag(), f.payload()),
            (got as u32, &want[..]),
            "frame {got}"
        );
        f.release();
        got += 1;
    }
    // SAFETY: the parent reads `reply` only after we exit.
    unsafe { write(&r, s.reply, &pattern(7)) };
    // Release: pairs with the parent's Acquire load in `await_value`.
    done.store(1, Ordering::Release);
    futex_wake(done, 1);
}

/// A region handed over through `/proc` (the ranks of one MPI node): the
/// opener maps the same memory; a wrong job id, a descriptor that is not
/// the region, or one that does not exist is refused, naming what.
#[test]
fn a_region_handed_over_through_proc_is_the_same_memory() {
    let mut layout = Layout::new();
    let word = layout.carve(4, LINE).unwrap();
    let region = Region::create(layout.len()).unwrap();
    let words = region.handover();
    assert_eq!(words[0], u64::from(std::process::id()));
    let opened = Region::open_handed_over(words).unwrap();
    assert_eq!(opened.job(), region.job());
    region
        .atomic_u32(word.offset())
        .store(0xC0FFEE, Ordering::Release);
    assert_eq!(
        opened.atomic_u32(word.offset()).load(Ordering::Acquire),
        0xC0FFEE,
        "one file, two mappings"
    );

    let mut other_job = words;
    other_job[3] += 1;
    let Err(e) = Region::open_handed_over(other_job) else {
        panic!("another job's region was opened")
    };
    assert_eq!(e.kind(), ErrorKind::SharedMemory, "{e}");
    assert!(e.to_string().contains("belongs to job"), "{e}");

    // Standard input (a pipe or a terminal here, or nothing): never a
    // region.
    let mut not_a_region = words;
    not_a_region[1] = 0;
    assert!(Region::open_handed_over(not_a_region).is_err());

    let mut gone = words;
    gone[1] = 1 << 20;
    let Err(e) = Region::open_handed_over(gone) else {
        panic!("a descriptor that does not exist was opened")
    };
    assert!(e.to_string().contains("could not open"), "{e}");
}
