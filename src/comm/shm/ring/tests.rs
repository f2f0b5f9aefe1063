//! Unit and stress tests of the ring (the loom model is in
//! `loom_tests.rs`). Rings here live in ordinary heap memory aligned like a
//! region's; `region/tests.rs` runs one across two processes.

use super::*;
use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

/// Heap memory laid out as a ring would be in a region, freed on drop.
struct Buf {
    base: NonNull<u8>,
    layout: std::alloc::Layout,
}

// SAFETY: the buffer is plain memory; the handles over it do their own
// synchronization.
unsafe impl Send for Buf {}
// SAFETY: as for Send.
unsafe impl Sync for Buf {}

impl Buf {
    /// A zeroed, initialized ring of `capacity`.
    fn ring(capacity: usize) -> Buf {
        let layout = std::alloc::Layout::from_size_align(footprint(capacity), ALIGN).unwrap();
        // SAFETY: the layout has a non-zero size.
        let p = unsafe { std::alloc::alloc_zeroed(layout) };
        let buf = Buf {
            base: NonNull::new(p).expect("out of memory"),
            layout,
        };
        // SAFETY: freshly allocated, aligned, footprint-sized, no handles.
        unsafe { init(buf.base, capacity) }.unwrap();
        buf
    }

    fn ends(&self, capacity: usize) -> (Producer, Consumer) {
        // SAFETY: `self` outlives the handles in every test (it is dropped
        // last), it was initialized with this capacity, and each test
        // makes one pair.
        unsafe {
            (
                Producer::attach(self.base, capacity).unwrap(),
                Consumer::attach(self.base, capacity).unwrap(),
            )
        }
    }

    /// The data word at `pos`.
    fn word(&self, pos: usize) -> u64 {
        assert!(pos % 8 == 0 && pos < self.layout.size() - RING_HEADER);
        // SAFETY: an aligned word inside the buffer (checked); the tests
        // read it while no handle writes.
        unsafe { self.base.add(RING_HEADER + pos).cast::<u64>().read() }
    }

    /// Overwrites the data word at `pos`, as a corrupting bug would.
    fn set_word(&self, pos: usize, word: u64) {
        assert!(pos % 8 == 0 && pos < self.layout.size() - RING_HEADER);
        // SAFETY: as in `word`; no handle accesses the ring meanwhile.
        unsafe { self.base.add(RING_HEADER + pos).cast::<u64>().write(word) }
    }

    fn tail(&self) -> &AtomicU64 {
        // SAFETY: offset 0 of a live, aligned ring.
        unsafe { self.base.cast::<AtomicU64>().as_ref() }
    }
}

impl Drop for Buf {
    fn drop(&mut self) {
        // SAFETY: allocated in `ring` with this layout.
        unsafe { std::alloc::dealloc(self.base.as_ptr(), self.layout) }
    }
}

/// A small deterministic generator (xorshift64*), so failures replay
/// (the rendezvous tests use it too).
pub(crate) struct Rng(u64);

impl Rng {
    pub(crate) fn new(seed: u64) -> Rng {
        Rng(seed.max(1))
    }

    pub(crate) fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    pub(crate) fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

/// Frame `i`'s payload of `len` bytes.
fn payload(i: u64, len: usize) -> Vec<u8> {
    (0..len)
        .map(|j| (i.wrapping_mul(131) as usize + j * 7) as u8)
        .collect()
}

fn recv(c: &mut Consumer) -> Option<(u32, Vec<u8>)> {
    let f = c.try_peek().unwrap()?;
    let got = (f.tag(), f.payload().to_vec());
    f.release();
    Some(got)
}

#[test]
fn empty_ring_has_nothing() {
    let buf = Buf::ring(64);
    let (_p, mut c) = buf.ends(64);
    assert!(c.try_peek().unwrap().is_none());
    assert!(c.try_peek().unwrap().is_none());
}

#[test]
fn fills_to_exactly_the_capacity_then_reports_full() {
    let buf = Buf::ring(64);
    let (mut p, mut c) = buf.ends(64);
    assert_eq!(p.max_payload(), 24);
    // Eight empty frames of 8 bytes fill 64 bytes exactly.
    for i in 0..8 {
        p.try_send(i, &[]).unwrap();
    }
    assert_eq!(p.try_send(8, &[]), Err(Full));
    assert!(p.try_reserve(9, 0).is_err());
    for i in 0..8 {
        assert_eq!(recv(&mut c), Some((i, vec![])));
    }
    assert_eq!(recv(&mut c), None);
    // Two largest frames (8 + 24 = 32 bytes each) fill it again.
    p.try_send(1, &[1; 24]).unwrap();
    p.try_send(2, &[2; 24]).unwrap();
    assert_eq!(p.try_send(3, &[3]), Err(Full));
    assert_eq!(recv(&mut c), Some((1, vec![1; 24])));
    // That release (32 bytes) reached a batch (a quarter: 16): room again.
    p.try_send(3, &[3; 24]).unwrap();
    assert_eq!(recv(&mut c), Some((2, vec![2; 24])));
    assert_eq!(recv(&mut c), Some((3, vec![3; 24])));
    assert_eq!(recv(&mut c), None);
}

#[test]
fn releases_are_published_in_batches_or_when_empty() {
    let cap = 256; // batch: 64 bytes = eight 8-byte frames
    let buf = Buf::ring(cap);
    let (mut p, mut c) = buf.ends(cap);
    for i in 0..32 {
        p.try_send(i, &[]).unwrap();
    }
    assert_eq!(p.try_send(99, &[]), Err(Full));
    for i in 0..7 {
        assert_eq!(recv(&mut c), Some((i, vec![])));
        assert_eq!(
            p.try_send(99, &[]),
            Err(Full),
            "published before a batch filled"
        );
    }
    assert_eq!(recv(&mut c), Some((7, vec![])));
    for i in 32..40 {
        p.try_send(i, &[]).unwrap();
    }
    assert_eq!(p.try_send(99, &[]), Err(Full));
    // Drain: the peek that finds the ring empty publishes the rest.
    for i in 8..40 {
        assert_eq!(recv(&mut c), Some((i, vec![])));
    }
    assert_eq!(recv(&mut c), None);
    for i in 0..32 {
        p.try_send(i, &[]).unwrap();
    }
    // An explicit publish also returns room.
    assert_eq!(recv(&mut c), Some((0, vec![])));
    c.publish();
    p.try_send(32, &[]).unwrap();
}

#[test]
fn a_frame_that_does_not_fit_before_the_end_wraps_behind_padding() {
    let buf = Buf::ring(64);
    let (mut p, mut c) = buf.ends(64);
    p.try_send(1, &[1; 24]).unwrap(); // bytes 0..32
    p.try_send(2, &[2; 3]).unwrap(); // 32..48
    assert_eq!(recv(&mut c), Some((1, vec![1; 24])));
    assert_eq!(recv(&mut c), Some((2, vec![2; 3])));
    assert_eq!(recv(&mut c), None);
    // 16 bytes left before the end; a 32-byte frame goes to 0 behind a
    // 16-byte padding frame.
    p.try_send(3, &[3; 24]).unwrap();
    assert_eq!(buf.tail().load(Ordering::Relaxed), 48 + 16 + 32);
    assert_eq!(decode(buf.word(48)), (8, PAD_TAG));
    assert_eq!(decode(buf.word(0)), (24, 3));
    assert_eq!(recv(&mut c), Some((3, vec![3; 24])));
    assert_eq!(recv(&mut c), None);
}

#[test]
fn a_wrapping_frame_waits_for_room_at_the_start() {
    let buf = Buf::ring(64);
    let (mut p, mut c) = buf.ends(64);
    p.try_send(1, &[1; 24]).unwrap(); // 0..32
    p.try_send(2, &[2; 8]).unwrap(); // 32..48
    // 48..64 is free, and so would 0..32 be once frame 1 is released; a
    // 32-byte frame needs padding (16) + 32 = 48 bytes: only 16 are free.
    assert_eq!(p.try_send(3, &[3; 24]), Err(Full));
    assert_eq!(recv(&mut c), Some((1, vec![1; 24])));
    p.try_send(3, &[3; 24]).unwrap();
    assert_eq!(recv(&mut c), Some((2, vec![2; 8])));
    assert_eq!(recv(&mut c), Some((3, vec![3; 24])));
}

#[test]
fn uncommitted_slots_and_unreleased_frames_leave_no_trace() {
    let buf = Buf::ring(64);
    let (mut p, mut c) = buf.ends(64);
    {
        let mut slot = p.try_reserve(5, 4).unwrap();
        slot.payload_mut().copy_from_slice(&[5; 4]);
        // dropped, not committed
    }
    assert!(c.try_peek().unwrap().is_none());
    let mut slot = p.try_reserve(6, 4).unwrap();
    assert_eq!(slot.len(), 4);
    slot.copy_from(&[6; 4]);
    slot.commit();
    let f = c.try_peek().unwrap().unwrap();
    assert_eq!((f.tag(), f.len(), f.to_vec()), (6, 4, vec![6; 4]));
    drop(f);
    // Still there.
    assert_eq!(recv(&mut c), Some((6, vec![6; 4])));
    assert_eq!(recv(&mut c), None);
}

#[test]
#[should_panic(expected = "exceeds the ring's limit")]
fn a_payload_over_the_limit_is_refused() {
    let buf = Buf::ring(64);
    let (mut p, _c) = buf.ends(64);
    let _ = p.try_reserve(0, 25);
}

#[test]
#[should_panic(expected = "reserved for padding")]
fn the_padding_tag_is_reserved() {
    let buf = Buf::ring(64);
    let (mut p, _c) = buf.ends(64);
    let _ = p.try_reserve(PAD_TAG, 0);
}

#[test]
fn attach_checks_what_init_recorded() {
    let buf = Buf::ring(64);
    // SAFETY: the buffer is live and large enough for both capacities
    // tried (only the header is read before the check fails).
    let e = unsafe { Producer::attach(buf.base, 32) }.err().unwrap();
    assert_eq!(e.kind(), ErrorKind::SharedMemory);
    assert!(e.to_string().contains("capacity of 64 bytes"), "{e}");
    // SAFETY: as above.
    let e = unsafe { Consumer::attach(buf.base, 48) }.err().unwrap();
    assert_eq!(e.kind(), ErrorKind::InvalidConfig);
    assert!(e.to_string().contains("power of two"), "{e}");

    let raw = Buf::ring(64);
    // SAFETY: the ring's header word; no handles exist.
    unsafe { raw.base.add(MAGIC_AT).cast::<u64>().write(0) };
    // SAFETY: live buffer of the right size.
    let e = unsafe { Consumer::attach(raw.base, 64) }.err().unwrap();
    assert_eq!(e.kind(), ErrorKind::SharedMemory);
    assert!(e.to_string().contains("never initialized"), "{e}");
}

/// Sends one frame, corrupts the ring with `corrupt`, and returns the
/// consumer's error.
fn corrupted(setup: impl FnOnce(&mut Producer), corrupt: impl FnOnce(&Buf)) -> Error {
    let buf = Buf::ring(64);
    let (mut p, mut c) = buf.ends(64);
    setup(&mut p);
    corrupt(&buf);
    let e = c.try_peek().err().expect("corruption not detected");
    assert_eq!(e.kind(), ErrorKind::SharedMemory);
    // Reported again, not skipped.
    assert!(c.try_peek().is_err());
    e
}

/// Something that breaks a ring's memory.
type Corruption = fn(&Buf);

#[test]
fn corrupt_headers_and_indices_are_errors() {
    let send = |p: &mut Producer| p.try_send(1, &[1; 8]).unwrap();
    let cases: [(&str, Corruption); 6] = [
        ("claims a 25-byte payload", |b| b.set_word(0, encode(25, 1))),
        ("claims a 4294967295-byte payload", |b| {
            b.set_word(0, encode(u32::MAX as usize, 1))
        }),
        // Published 16 bytes, header says 24 bytes of payload (32 total).
        ("past the published index", |b| b.set_word(0, encode(24, 1))),
        ("padding frame at byte 0 covers 16", |b| {
            b.set_word(0, encode(8, PAD_TAG))
        }),
        ("not an 8-aligned index", |b| {
            b.tail().store(13, Ordering::Relaxed)
        }),
        ("at most 64 bytes ahead", |b| {
            b.tail().store(72, Ordering::Relaxed)
        }),
    ];
    for (expect, corrupt) in cases {
        let e = corrupted(send, corrupt);
        assert!(e.to_string().contains(expect), "want {expect:?}: {e}");
        assert!(e.to_string().contains("ring corrupt"), "{e}");
    }
}

#[test]
fn a_frame_straddling_the_end_is_an_error() {
    let buf = Buf::ring(64);
    let (mut p, mut c) = buf.ends(64);
    for _ in 0..5 {
        p.try_send(1, &[]).unwrap(); // 0..40
    }
    for _ in 0..5 {
        assert!(recv(&mut c).is_some());
    }
    assert!(recv(&mut c).is_none());
    p.try_send(2, &[2; 8]).unwrap(); // 40..56
    p.try_send(3, &[]).unwrap(); // 56..64
    // Make the frame at 40 claim 24 bytes: it would run to 72.
    buf.set_word(40, encode(24, 2));
    let e = c.try_peek().err().unwrap();
    assert!(e.to_string().contains("past the end of the buffer"), "{e}");
}

#[test]
#[should_panic(expected = "consumer's index")]
fn the_producer_refuses_an_impossible_consumer_index() {
    let buf = Buf::ring(64);
    let (mut p, _c) = buf.ends(64);
    for _ in 0..8 {
        p.try_send(1, &[]).unwrap();
    }
    // The consumer's line, as a broken consumer might leave it.
    // SAFETY: offset HEAD_AT of a live, aligned ring.
    unsafe { buf.base.add(HEAD_AT).cast::<AtomicU64>().as_ref() }.store(1000, Ordering::Relaxed);
    let _ = p.try_send(1, &[]);
}

/// Random operations on one thread against a `VecDeque`: order, tags and
/// contents agree, and a drained and published ring always takes a
/// largest frame.
#[test]
fn random_operations_match_a_reference_queue() {
    let cap = 256;
    let buf = Buf::ring(cap);
    let (mut p, mut c) = buf.ends(cap);
    let mut reference = VecDeque::new();
    let mut rng = Rng::new(7);
    let mut sent = 0u64;
    for _ in 0..200_000 {
        match rng.below(10) {
            0..5 => {
                let len = rng.below(p.max_payload() + 1);
                let data = payload(sent, len);
                if p.try_send(sent as u32, &data).is_ok() {
                    reference.push_back((sent as u32, data));
                    sent += 1;
                }
            }
            5..9 => assert_eq!(recv(&mut c), reference.pop_front()),
            _ => {
                while let Some(got) = recv(&mut c) {
                    assert_eq!(Some(got), reference.pop_front());
                }
                assert!(reference.is_empty());
                let max = p.max_payload();
                p.try_send(0, &payload(0, max)).unwrap();
                assert_eq!(recv(&mut c), Some((0, payload(0, max))));
            }
        }
    }
    assert!(sent > 10_000);
}

/// 10^6 frames of random sizes through a 1 KiB ring (so it wraps about
/// every ten frames) from one thread to another; the producer records each
/// frame in a reference queue before committing it, the consumer checks
/// each frame it receives against the queue's front.
#[test]
fn a_million_frames_cross_threads_in_order() {
    const FRAMES: u64 = 1_000_000;
    let cap = 1024;
    let buf = Arc::new(Buf::ring(cap));
    let (mut p, mut c) = buf.ends(cap);
    let reference = Arc::new(Mutex::new(VecDeque::new()));
    let producer = {
        let reference = reference.clone();
        let buf = buf.clone();
        std::thread::spawn(move || {
            let _keep = buf;
            let mut rng = Rng::new(42);
            for i in 0..FRAMES {
                // Mostly small, sometimes up to the limit.
                let len = if rng.below(8) == 0 {
                    rng.below(p.max_payload() + 1)
                } else {
                    rng.below(40)
                };
                let data = payload(i, len);
                let mut slot = loop {
                    match p.try_reserve(i as u32, len) {
                        Ok(slot) => break slot,
                        Err(Full) => std::thread::yield_now(),
                    }
                };
                slot.payload_mut().copy_from_slice(&data);
                reference.lock().unwrap().push_back((i as u32, data));
                slot.commit();
            }
        })
    };
    let mut received = 0;
    while received < FRAMES {
        let Some(f) = c.try_peek().unwrap() else {
            std::thread::yield_now();
            continue;
        };
        let want = reference.lock().unwrap().pop_front();
        assert_eq!(
            Some((f.tag(), f.payload())),
            want.as_ref().map(|(t, d)| (*t, &d[..])),
            "frame {received}"
        );
        f.release();
        received += 1;
    }
    producer.join().unwrap();
    assert!(c.try_peek().unwrap().is_none());
    assert!(reference.lock().unwrap().is_empty());
}

/// Pins the calling thread to `cpu`; false if the affinity mask forbids.
fn pin(cpu: usize) -> bool {
    // SAFETY: an all-zero cpu_set_t is the empty set; CPU_SET writes a bit
    // inside it (cpu < CPU_SETSIZE, checked); sched_setaffinity reads it.
    unsafe {
        if cpu >= libc::CPU_SETSIZE as usize {
            return false;
        }
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut set);
        libc::sched_setaffinity(0, size_of::<libc::cpu_set_t>(), &set) == 0
    }
}

/// Sends `v` as an 8-byte frame, spinning while the ring is full.
fn spin_send(p: &mut Producer, v: u64) {
    while p.try_send(0, &v.to_le_bytes()).is_err() {
        std::hint::spin_loop();
    }
}

/// Receives an 8-byte frame, spinning while the ring is empty.
fn spin_recv(c: &mut Consumer) -> u64 {
    loop {
        if let Some(f) = c.try_peek().unwrap() {
            let v = u64::from_le_bytes(f.payload().try_into().unwrap());
            f.release();
            return v;
        }
        std::hint::spin_loop();
    }
}

/// Round trip of an 8-byte frame between two threads on different cores,
/// one ring each way. Prints the mean over 10^6 round trips (after 10^5
/// warm-up ones). Run alone, in release:
/// `cargo test --release --lib comm::shm::ring::tests::ping_pong -- --ignored --nocapture`
#[test]
#[ignore = "a measurement: run alone, in release, with --ignored --nocapture"]
fn ping_pong_round_trip() {
    const WARM: u64 = 100_000;
    const ROUNDS: u64 = 1_000_000;
    let cap = 4096;
    let (there, back) = (Arc::new(Buf::ring(cap)), Arc::new(Buf::ring(cap)));
    let (mut ping, mut ping_in) = there.ends(cap);
    let (mut pong, mut pong_in) = back.ends(cap);
    let echo = {
        let keep = (there.clone(), back.clone());
        std::thread::spawn(move || {
            let _keep = keep;
            assert!(pin(1), "cannot pin to CPU 1");
            for _ in 0..WARM + ROUNDS {
                let v = spin_recv(&mut ping_in);
                spin_send(&mut pong, v + 1);
            }
        })
    };
    assert!(pin(0), "cannot pin to CPU 0");
    let mut t0 = std::time::Instant::now();
    for i in 0..WARM + ROUNDS {
        if i == WARM {
            t0 = std::time::Instant::now();
        }
        spin_send(&mut ping, i);
        let v = spin_recv(&mut pong_in);
        assert_eq!(v, i + 1, "wrong answer in round {i}");
    }
    let rtt = t0.elapsed() / ROUNDS as u32;
    echo.join().unwrap();
    println!("ring ping-pong: 8-byte frame round trip {rtt:?} (mean of {ROUNDS}, CPUs 0 and 1)");
}
