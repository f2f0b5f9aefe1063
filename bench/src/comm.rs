//! `cantus-bench comm`: communication between two locales (processes on
//! this machine, one worker each), side by side in one run:
//!
//! - `am_round_trip`: `on(1, call).join()` from a task on locale 0;
//!   `_pod`: a plain-data call (`on_pod`); `_inline`: calls declared
//!   `INLINE`, run inside the poll that receives them, with no task;
//! - `am_pipelined`: windows of 64 `on` calls in flight, then joined: time
//!   per call (request and reply);
//! - `am_stream`: detached `begin_on` calls back to back: time per call;
//! - `am_chant_8b`: an 8-byte Chant message to a task on locale 1, one
//!   way (half the round trip to a task that echoes it), next to half a
//!   call's round trip;
//! - `transfer_*`: bandwidth of large payloads, 64 KiB and 1 MiB: a
//!   Chant message (ping-pong with an echoing task on locale 1: one way is
//!   half the round trip) and a remote call's `Vec<u8>` argument (a call
//!   carrying it there and 8 bytes back, encoded by cantus's codec, which
//!   copies a `Vec<u8>` whole), the same with the argument a
//!   `serde_bytes::ByteBuf` (a byte string), next to `memcpy` of the same
//!   bytes in this process and postcard encoding and decoding them here
//!   (no locale), as a `Vec<u8>`, as a `ByteBuf` and as a `Bulk<f64>`:
//!   the floor under the call rows; `.codec_vec` and `.codec_vec_f64`:
//!   cantus's codec encoding and decoding a `Vec<u8>` and a `Vec<f64>`
//!   here (and `.codec_vec_u32`, a `Vec<u32>`, whose varints go through
//!   one loop each way), beside postcard's `.postcard_vec`,
//!   `.postcard_vec_f64` and `.postcard_vec_u32`
//!   (`codec_vec/postcard`: the ratio of their bandwidths); `transfer_bulk_arg_*`
//!   and `transfer_vec_f64_arg_*`: a call whose argument and result are
//!   both an array of `f64`s of the size (a `cantus::Bulk<f64>`, a plain
//!   `Vec<f64>`), the bytes moved both ways over the round trip's time;
//!   `transfer_bulk_arg_*.raw_shm`: the bulk round trip's data flow by two
//!   pinned, spinning threads of this process with no runtime (the
//!   argument copied into one block, negated in place there, copied into a
//!   second block for the reply, copied out into a new vector: the
//!   machine's floor for that flow, `raw_bulk.rs`), and `.raw_shm_in_place`
//!   the same with the reply left in the argument's block (one copy fewer:
//!   the floor of a runtime that answered in the request's block);
//!   `transfer_chant_bulk_*`: the bulk round trip through Chant, a
//!   `Bulk<f64>` message to a task on locale 1 that negates it where it
//!   arrived and sends it back given up (`chant::send_value(to, tag, v)`);
//!   `transfer_put_*`, `transfer_get_*`: a one-sided `GlobalPtr` put of
//!   the size into locale 1's heap segment and a get back (the global
//!   address space's memory as the job gives it: shared, or messages);
//! - peers: the raw ring round trip (the same shared-memory rings, two
//!   spinning threads, no active-message layer) and Open MPI between two
//!   ranks (its shared-memory transport), when `mpicc` was there at build
//!   time: ping-pong (the peer of `am_round_trip`), 64 requests and
//!   replies in flight (of `am_pipelined`) and an `MPI_Isend` stream (of
//!   `am_stream`). Every peer runs in every repetition, after the rows.
//!
//! - `chant_sizes_*`: Chant messages of 1 B, 1 KiB, 64 KiB and 1 MiB, one
//!   way (the MPI peer's `oneway_us_*` are the same sizes' ping-pongs).
//! - `chant_stream_*`: Chant messages of 1 KiB, 64 KiB, 1 MiB and 16 MiB
//!   streamed to a task on locale 1, in windows of 64 that it acknowledges (time
//!   per message, and GB/s); the MPI peer's `stream_us_*` are the same
//!   windows of `MPI_Isend` into `MPI_Irecv`s posted before them
//!   (osu_bw's scheme): a bandwidth, where `chant_sizes` is a latency.
//! - `chant_window_*`: the same streams with each window's messages sent
//!   in a `chant::window`, in flight together as the peer's `MPI_Isend`s.
//!
//! - `quiet_*`: each locale's CPU use while nothing happens for 2 s, and
//!   the round trip of inline calls to locale 1 while every worker there
//!   computes for 1 s in a loop that never polls (longest and median).
//!
//! `--only ROW` runs the rows whose name starts with ROW (`am` all of
//! them, `transfer` the transfer rows, `chant_sizes`, `chant_stream` and
//! `chant_window` the sweeps, `chant` all three).
//!
//! The locales are copies of this program: locale 1 re-runs
//! `cantus-bench comm ...` and serves until locale 0 is done.

use crate::Options;
use crate::stats::{Samples, figure, note, ratio, section};
use serde::{Deserialize, Serialize};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// Echoes its number back, one higher.
#[derive(Serialize, Deserialize)]
struct Ping(u64);
impl cantus::Remote for Ping {
    type Output = u64;
    fn run(self) -> u64 {
        self.0 + 1
    }
}

/// [`Ping`] declared inline (`Remote::INLINE`): run inside the poll that
/// receives it, with no task.
#[derive(Serialize, Deserialize)]
struct PingInline(u64);
impl cantus::Remote for PingInline {
    type Output = u64;
    const INLINE: bool = true;
    fn run(self) -> u64 {
        self.0 + 1
    }
}

static ARRIVED: AtomicU64 = AtomicU64::new(0);

/// Counts itself on arrival (sent detached).
#[derive(Serialize, Deserialize)]
struct Tick;
impl cantus::Remote for Tick {
    type Output = ();
    fn run(self) {
        ARRIVED.fetch_add(1, Ordering::Relaxed);
    }
}

/// How many ticks arrived.
#[derive(Serialize, Deserialize)]
struct Arrived;
impl cantus::Remote for Arrived {
    type Output = u64;
    fn run(self) -> u64 {
        ARRIVED.load(Ordering::Relaxed)
    }
}

/// Takes a large argument, answers its length.
#[derive(Serialize, Deserialize)]
struct Sink(Vec<u8>);
impl cantus::Remote for Sink {
    type Output = u64;
    fn run(self) -> u64 {
        self.0.len() as u64
    }
}

/// Echoes Chant messages to their sender until tag 0.
#[derive(Serialize, Deserialize)]
struct Echo {
    boss: cantus::chant::TaskId,
}
impl cantus::Remote for Echo {
    type Output = ();
    fn run(self) {
        serve_boss(self.boss, |m| {
            cantus::chant::send(self.boss, m.tag(), m.bytes()).expect("echo");
        });
    }
}

/// The loop of a Chant task that serves `boss`: a hello (tag 1), then
/// each message from `boss` to `each`, until tag 0.
fn serve_boss(boss: cantus::chant::TaskId, mut each: impl FnMut(cantus::chant::Message)) {
    use cantus::chant::{self, Source, Tag};
    chant::send(boss, 1, &[]).expect("hello");
    loop {
        let m = chant::recv(Source::Task(boss), Tag::Any);
        if m.tag() == 0 {
            return;
        }
        each(m);
    }
}

/// Takes Chant messages of tag 2 from its boss and acknowledges every
/// `window` of them (tag 3, empty), until tag 0.
#[derive(Serialize, Deserialize)]
struct Drain {
    boss: cantus::chant::TaskId,
    window: usize,
}
impl cantus::Remote for Drain {
    type Output = ();
    fn run(self) {
        use cantus::chant::{self, Source, Tag};
        chant::send(self.boss, 1, &[]).expect("hello");
        let mut taken = 0;
        let mut len = None;
        loop {
            let m = chant::recv(Source::Task(self.boss), Tag::Any);
            if m.tag() == 0 {
                return;
            }
            // Every message of a stream is whole: as long as the first.
            assert_eq!(*len.get_or_insert(m.bytes().len()), m.bytes().len());
            taken += 1;
            if taken == self.window {
                taken = 0;
                chant::send(self.boss, 3, &[]).expect("ack");
            }
        }
    }
}

/// [`Sink`] with the bytes as one byte string (`serde_bytes`).
#[derive(Serialize, Deserialize)]
struct SinkBytes(serde_bytes::ByteBuf);
impl cantus::Remote for SinkBytes {
    type Output = u64;
    fn run(self) -> u64 {
        self.0.len() as u64
    }
}

/// Sends its array back negated: a round trip that moves an array of
/// `f64`s both ways, as a [`cantus::Bulk`] (its bytes).
#[derive(Serialize, Deserialize)]
struct NegateBulk(cantus::Bulk<f64>);
impl cantus::Remote for NegateBulk {
    type Output = cantus::Bulk<f64>;
    fn run(mut self) -> cantus::Bulk<f64> {
        self.0.iter_mut().for_each(|x| *x = -*x);
        self.0
    }
}

/// [`NegateBulk`] with a plain `Vec<f64>` (serde's element by element).
#[derive(Serialize, Deserialize)]
struct NegateVec(Vec<f64>);
impl cantus::Remote for NegateVec {
    type Output = Vec<f64>;
    fn run(mut self) -> Vec<f64> {
        self.0.iter_mut().for_each(|x| *x = -*x);
        self.0
    }
}

/// A Chant task: negates the `Bulk<f64>` of each message (tag 2) where it
/// arrived and sends it back given up (tag 3), until tag 0.
#[derive(Serialize, Deserialize)]
struct NegateChant {
    boss: cantus::chant::TaskId,
}
impl cantus::Remote for NegateChant {
    type Output = ();
    fn run(self) {
        serve_boss(self.boss, |m| {
            let mut v: cantus::Bulk<f64> = m.into_decoded().expect("an array");
            v.iter_mut().for_each(|x| *x = -*x);
            cantus::chant::send_value(self.boss, 3, v).expect("back");
        });
    }
}

/// [`round_trip_f64`] through a [`NegateChant`] task on locale 1.
fn chant_round_trip_f64(size: usize, rounds: u64) -> Duration {
    use cantus::chant::{self, Source, Tag};
    cantus::begin_on(1, NegateChant { boss: chant::me() }).expect("negate task");
    let task = chant::recv(Source::Any, Tag::Is(1)).source();
    let took = round_trip_f64(size, rounds, |v| {
        chant::send_value(task, 2, cantus::Bulk::from(v)).expect("send");
        chant::recv(Source::Task(task), Tag::Is(3))
            .into_decoded::<cantus::Bulk<f64>>()
            .expect("an array")
            .into_vec()
    });
    chant::send(task, 0, &[]).expect("stop");
    took
}

/// One-sided transfers (SPMD body): locale 0 puts `size` bytes into
/// locale 1's heap segment `rounds` times, then gets them back as often;
/// returns (put, get) seconds per transfer on locale 0 (zeros elsewhere).
#[derive(Clone, Serialize, Deserialize)]
struct PgasTransfer {
    size: usize,
    rounds: u64,
}
impl cantus::Remote for PgasTransfer {
    type Output = (f64, f64);
    fn run(self) -> (f64, f64) {
        let words = cantus::pgas::alloc::<u64>(self.size / 8).expect("room in the heap");
        let mut times = (0.0, 0.0);
        if cantus::here() == 0 {
            let far = words.ptr(1);
            let mut buf: Vec<u64> = (0..self.size as u64 / 8).collect();
            let per = |t: Instant| t.elapsed().as_secs_f64() / self.rounds as f64;
            far.put(&buf).expect("put");
            let t = Instant::now();
            for _ in 0..self.rounds {
                far.put(std::hint::black_box(&buf)).expect("put");
            }
            times.0 = per(t);
            let t = Instant::now();
            for _ in 0..self.rounds {
                far.get(std::hint::black_box(&mut buf)).expect("get");
            }
            times.1 = per(t);
            assert_eq!(buf.last().copied(), Some(self.size as u64 / 8 - 1));
        }
        cantus::pgas::barrier();
        times
    }
}

/// This process's CPU time so far (user and system), in seconds.
fn cpu_seconds() -> f64 {
    let mut u = std::mem::MaybeUninit::<libc::rusage>::zeroed();
    // SAFETY: `u` is a valid out-parameter for getrusage.
    let u = unsafe {
        libc::getrusage(libc::RUSAGE_SELF, u.as_mut_ptr());
        u.assume_init()
    };
    let tv = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 * 1e-6;
    tv(u.ru_utime) + tv(u.ru_stime)
}

/// Locale 1's CPU time so far, in seconds.
#[derive(Serialize, Deserialize)]
struct CpuSeconds;
impl cantus::Remote for CpuSeconds {
    type Output = f64;
    fn run(self) -> f64 {
        cpu_seconds()
    }
}

/// Keeps every worker of its locale in a loop that never polls for
/// `ms` milliseconds.
#[derive(Serialize, Deserialize)]
struct Compute {
    ms: u64,
}
impl cantus::Remote for Compute {
    type Output = ();
    fn run(self) {
        let n = cantus::query::workers().unwrap_or(1);
        cantus::coforall(n, |_| {
            let until = Instant::now() + Duration::from_millis(self.ms);
            while Instant::now() < until {
                std::hint::spin_loop();
            }
        });
    }
}

cantus::remote!(
    Ping,
    PingInline,
    Tick,
    Drain,
    NegateChant,
    Arrived,
    Sink,
    SinkBytes,
    NegateBulk,
    NegateVec,
    PgasTransfer,
    Echo,
    CpuSeconds,
    Compute
);

/// `quiet_*` rows. `quiet_idle_cpu`: the share of one CPU each locale
/// uses while nothing happens for 2 s (locale 0's main sleeps). And
/// `quiet_busy_answer_*`: while every worker of locale 1 computes for
/// 1 s in a loop that never polls, inline calls from locale 0 back to
/// back: the longest and the median round trip (the time a locale whose
/// workers never poll takes to answer).
fn quiet(rt: &cantus::Runtime, reps: usize) {
    let (mut idle0, mut idle1, mut worst, mut median) = (
        Samples::new(),
        Samples::new(),
        Samples::new(),
        Samples::new(),
    );
    section("quiet", || {
        for _ in 0..reps {
            let (a, b) = rt.block_on(|| {
                let (c0, c1) = (cpu_seconds(), cantus::on(1, CpuSeconds).join().unwrap());
                let t = Instant::now();
                cantus::task::sleep(Duration::from_secs(2));
                let wall = t.elapsed().as_secs_f64();
                let (d0, d1) = (cpu_seconds(), cantus::on(1, CpuSeconds).join().unwrap());
                ((d0 - c0) / wall * 100.0, (d1 - c1) / wall * 100.0)
            });
            idle0.push(a);
            idle1.push(b);
            let mut times = rt.block_on(|| {
                let busy = cantus::on(1, Compute { ms: 1000 });
                // Let the compute loops start on locale 1's workers.
                cantus::task::sleep(Duration::from_millis(50));
                let mut times = Vec::new();
                let t = Instant::now();
                while t.elapsed() < Duration::from_millis(800) {
                    let c = Instant::now();
                    cantus::on(1, PingInline(1)).join().unwrap();
                    times.push(c.elapsed().as_secs_f64() * 1e6);
                }
                busy.join().unwrap();
                times
            });
            times.sort_by(f64::total_cmp);
            worst.push(*times.last().unwrap());
            median.push(times[times.len() / 2]);
        }
    });
    figure("quiet_idle_cpu_locale0", &idle0, "%");
    figure("quiet_idle_cpu_locale1", &idle1, "%");
    figure("quiet_busy_answer_worst", &worst, "us");
    figure("quiet_busy_answer_median", &median, "us");
}

/// `Ping` as plain data: no encoding on either side.
#[derive(Clone, Copy, bytemuck::Pod, bytemuck::Zeroable)]
#[repr(C)]
struct PodPing(u64);
impl cantus::remote::RemotePod for PodPing {
    type Output = u64;
    fn run(self) -> u64 {
        self.0 + 1
    }
}

/// [`PodPing`] declared inline.
#[derive(Clone, Copy, bytemuck::Pod, bytemuck::Zeroable)]
#[repr(C)]
struct PodPingInline(u64);
impl cantus::remote::RemotePod for PodPingInline {
    type Output = u64;
    const INLINE: bool = true;
    fn run(self) -> u64 {
        self.0 + 1
    }
}
cantus::remote_pod!(PodPing, PodPingInline);

const WINDOW: u64 = 64;

/// Where build.rs put the MPI peer (empty if mpicc was missing).
const MPI_PEER: &str = env!("CANTUS_BENCH_MPI");

pub(crate) fn run(opts: &Options) {
    let reps = opts.reps.unwrap_or(if opts.quick { 3 } else { 7 });
    let rounds: u64 = if opts.quick { 2_000 } else { 50_000 };
    let rt = cantus::Runtime::builder()
        .default_locales(2)
        .workers(1)
        .build()
        .unwrap_or_else(|e| {
            eprintln!("cantus-bench comm: cannot start two locales: {e}");
            std::process::exit(2)
        });
    note(&format!(
        "comm: 2 locales, 1 worker each, {rounds} calls per repetition, {reps} reps"
    ));
    // The call rows (each may be picked alone with `--only <row>`), and
    // their peers, measured in every repetition, one after another.
    type Row = (&'static str, fn(u64) -> f64);
    let rows: [Row; 7] = [
        ("am_round_trip", round_trip),
        ("am_round_trip_pod", round_trip_pod),
        ("am_round_trip_inline", round_trip_inline),
        ("am_round_trip_pod_inline", round_trip_pod_inline),
        ("am_pipelined", pipelined),
        ("am_stream", streamed),
        ("am_chant_8b", chant_8b_one_way),
    ];
    let rows: Vec<Row> = rows.into_iter().filter(|(n, _)| opts.wants(n)).collect();
    let mut samples: Vec<Samples> = rows.iter().map(|_| Samples::new()).collect();
    let mut raw = Samples::new();
    let (mut mpi_rt, mut mpi_rr, mut mpi_stream) = (Samples::new(), Samples::new(), Samples::new());
    let mut mpi_error = None;
    let calls = !rows.is_empty();
    section("comm", || {
        for _ in 0..if calls { reps } else { 0 } {
            let figures: Vec<f64> = rt.block_on(|| rows.iter().map(|(_, f)| f(rounds)).collect());
            for (s, f) in samples.iter_mut().zip(figures) {
                s.push(f);
            }
            let d = cantus::__bench::raw_ring_round_trip(rounds, (0, 1)).expect("raw rings");
            raw.push(d.as_secs_f64() * 1e6 / rounds as f64);
            if mpi_error.is_none() {
                match mpi(rounds) {
                    Ok(m) => {
                        mpi_rt.push(m.round_trip);
                        mpi_rr.push(m.request_reply);
                        mpi_stream.push(m.stream);
                    }
                    Err(e) => mpi_error = Some(e),
                }
            }
        }
    });
    if opts.wants("transfer") {
        transfers(&rt, reps, opts.quick);
    }
    if opts.wants("chant_sizes") {
        chant_sizes(&rt, reps, opts.quick);
    }
    if opts.wants("chant_stream") {
        chant_stream(&rt, reps, opts.quick);
    }
    if opts.wants("chant_window") {
        chant_window(&rt, reps, opts.quick);
    }
    if opts.wants("quiet") {
        quiet(&rt, if opts.quick { 1 } else { reps.min(3) });
    }
    rt.shutdown();
    if !calls {
        return;
    }
    let mut got = std::collections::HashMap::new();
    for ((name, _), s) in rows.iter().zip(&samples) {
        got.insert(*name, figure(name, s, "us"));
    }
    let r = figure("am_round_trip.raw_ring", &raw, "us");
    let mpi = mpi_error.is_none().then(|| {
        (
            figure("am_round_trip.mpi", &mpi_rt, "us"),
            figure("am_pipelined.mpi", &mpi_rr, "us"),
            figure("am_stream.mpi", &mpi_stream, "us"),
        )
    });
    let row = |n: &str| got.get(n).copied();
    if let Some(a) = row("am_round_trip") {
        ratio("am_round_trip", "raw_ring", a, r);
        if let Some((m, _, _)) = mpi {
            ratio("am_round_trip", "mpi", a, m);
        }
    }
    if let Some(pod) = row("am_round_trip_pod") {
        ratio("am_round_trip_pod", "raw_ring", pod, r);
    }
    for name in ["am_round_trip_inline", "am_round_trip_pod_inline"] {
        if let Some(a) = row(name) {
            ratio(name, "raw_ring", a, r);
            if let Some((m, _, _)) = mpi {
                ratio(name, "mpi", a, m);
            }
        }
    }
    if let (Some(p), Some((_, m, _))) = (row("am_pipelined"), mpi) {
        ratio("am_pipelined", "mpi", p, m);
    }
    if let (Some(s), Some((_, _, m))) = (row("am_stream"), mpi) {
        ratio("am_stream", "mpi", s, m);
    }
    if let (Some(c), Some(a)) = (row("am_chant_8b"), row("am_round_trip")) {
        // A call's one-way time: half its round trip.
        ratio("am_chant_8b", "am_call_one_way", c, a / 2.0);
    }
    if let Some(e) = mpi_error {
        note(&format!("MPI peer unavailable: {e}"));
    }
}

/// Microseconds per round trip of `ping` (a call to locale 1 that
/// returns its argument plus one), after `rounds / 10` to warm up.
fn round_trips(rounds: u64, ping: impl Fn(u64) -> u64) -> f64 {
    let mut v = 0;
    for _ in 0..rounds / 10 {
        v = ping(v);
    }
    let start = Instant::now();
    for _ in 0..rounds {
        v = ping(v);
    }
    let took = start.elapsed();
    assert_eq!(v, rounds + rounds / 10, "every ping added one");
    us_per(took, rounds)
}

/// Microseconds per `on(1, Ping).join()`.
fn round_trip(rounds: u64) -> f64 {
    round_trips(rounds, |v| cantus::on(1, Ping(v)).join().expect("ping"))
}

/// Microseconds per `on_pod(1, PodPing).join()`.
fn round_trip_pod(rounds: u64) -> f64 {
    round_trips(rounds, |v| {
        cantus::remote::on_pod(1, PodPing(v)).join().expect("ping")
    })
}

/// Microseconds per `on(1, PingInline).join()` (run in the poll there).
fn round_trip_inline(rounds: u64) -> f64 {
    round_trips(rounds, |v| {
        cantus::on(1, PingInline(v)).join().expect("ping")
    })
}

/// Microseconds per `on_pod(1, PodPingInline).join()`.
fn round_trip_pod_inline(rounds: u64) -> f64 {
    round_trips(rounds, |v| {
        cantus::remote::on_pod(1, PodPingInline(v))
            .join()
            .expect("ping")
    })
}

/// Microseconds per call with `WINDOW` calls in flight.
fn pipelined(rounds: u64) -> f64 {
    let start = Instant::now();
    let mut sum = 0;
    for w in 0..rounds / WINDOW {
        let handles: Vec<_> = (0..WINDOW)
            .map(|k| cantus::on(1, Ping(w * WINDOW + k)))
            .collect();
        for h in handles {
            sum += h.join().expect("ping");
        }
    }
    let took = start.elapsed();
    let n = rounds / WINDOW * WINDOW;
    assert_eq!(sum, n * (n + 1) / 2, "every pipelined ping answered");
    us_per(took, n)
}

/// Microseconds per detached call, until all arrived.
fn streamed(rounds: u64) -> f64 {
    let before = cantus::on(1, Arrived).join().expect("count");
    let start = Instant::now();
    for _ in 0..rounds {
        cantus::begin_on(1, Tick).expect("tick");
    }
    while cantus::on(1, Arrived).join().expect("count") < before + rounds {
        cantus::task::yield_now();
    }
    us_per(start.elapsed(), rounds)
}

/// Microseconds per one-way 8-byte Chant message to a task on locale 1
/// (half the round trip to a task that echoes it).
fn chant_8b_one_way(rounds: u64) -> f64 {
    chant_one_way(8, rounds).as_secs_f64() * 1e6
}

/// Sizes of the `chant_sizes` rows (the MPI peer's `oneway_us_SIZE`).
const CHANT_SIZES: [usize; 4] = [1, 1 << 10, 64 << 10, 1 << 20];

/// `chant_sizes`: microseconds one way of a Chant message of each size
/// (half a ping-pong's round trip with an echoing task on locale 1),
/// beside Open MPI's ping-pong of the same sizes when the peer runs here.
fn chant_sizes(rt: &cantus::Runtime, reps: usize, quick: bool) {
    sweep(
        rt,
        "chant_sizes",
        &CHANT_SIZES,
        reps,
        quick,
        |m| m.one_way,
        false,
        |size, base| {
            let rounds = (base / (1 + size as u64 / 1024)).max(20);
            chant_one_way(size, rounds).as_secs_f64() * 1e6
        },
    );
}

/// Sizes of the `chant_stream` rows (the MPI peer's `stream_us_SIZE`).
const STREAM_SIZES: [usize; 4] = [1 << 10, 64 << 10, 1 << 20, STREAM_MAX];
/// The largest stream size: 16 MiB, the top of issue 28's range for Chant
/// over MPI. A window of it moves 1 GiB, so a quick run takes 2 windows
/// of it, not 10 (the MPI peer's `stream_windows` does the same).
const STREAM_MAX: usize = 16 << 20;
/// Messages in flight in a stream, before the receiver's acknowledgement
/// (osu_bw's window; the MPI peer's too).
const STREAM_WINDOW: usize = 64;

/// `chant_stream`: microseconds per message, and GB/s, of a stream of
/// Chant messages of each size to a task on locale 1, in windows of
/// [`STREAM_WINDOW`] that it acknowledges, beside Open MPI's stream of the
/// same windows when the peer runs here.
fn chant_stream(rt: &cantus::Runtime, reps: usize, quick: bool) {
    stream_sweep(rt, "chant_stream", reps, quick, false);
}

/// `chant_window`: [`chant_stream`] with each window's messages sent in a
/// [`cantus::chant::window`], in flight together as the MPI peer's
/// `MPI_Isend`s are before their `MPI_Waitall`.
fn chant_window(rt: &cantus::Runtime, reps: usize, quick: bool) {
    stream_sweep(rt, "chant_window", reps, quick, true);
}

/// The streams' sweep: rows `NAME_SIZE` of [`streamed_to_drain`].
fn stream_sweep(rt: &cantus::Runtime, name: &str, reps: usize, quick: bool, in_window: bool) {
    sweep(
        rt,
        name,
        &STREAM_SIZES,
        reps,
        quick,
        |m| m.stream_sizes,
        true,
        |size, base| {
            // Messages per size: as the MPI peer's (ROUNDS / (1 + KiB)),
            // at least 10 windows (2 of the largest in a quick run).
            let least = if quick && size >= STREAM_MAX { 2 } else { 10 };
            let windows = (base / (STREAM_WINDOW as u64 * (1 + size as u64 / 1024))).max(least);
            streamed_to_drain(size, windows, in_window).as_secs_f64() * 1e6
        },
    );
}

/// A sweep over message sizes: in each of `reps` repetitions the MPI
/// peer (`mpi(base)`, its figures per size taken by `peer_of`) and then
/// `measure(size, base)` for every size, in microseconds, in a task
/// (`base`: 200 rounds if `quick`, else 20,000, scaled down by size as
/// each row says); then the rows `NAME_SIZE` (and, if `gb_per_s`,
/// `NAME_SIZE.gb_per_s`), beside `NAME_SIZE.mpi` and their ratio while
/// the peer runs.
#[allow(clippy::too_many_arguments)]
fn sweep(
    rt: &cantus::Runtime,
    name: &str,
    sizes: &[usize],
    reps: usize,
    quick: bool,
    peer_of: fn(Mpi) -> Vec<f64>,
    gb_per_s: bool,
    measure: impl Fn(usize, u64) -> f64 + Sync,
) {
    let base: u64 = if quick { 200 } else { 20_000 };
    let mut samples: Vec<Samples> = sizes.iter().map(|_| Samples::new()).collect();
    let mut gb: Vec<Samples> = sizes.iter().map(|_| Samples::new()).collect();
    let mut peer: Vec<Samples> = sizes.iter().map(|_| Samples::new()).collect();
    let mut peer_error = None;
    section(name, || {
        for _ in 0..reps {
            if peer_error.is_none() {
                match mpi(base) {
                    Ok(m) => {
                        for (s, f) in peer.iter_mut().zip(peer_of(m)) {
                            s.push(f);
                        }
                    }
                    Err(e) => peer_error = Some(e),
                }
            }
            let figures: Vec<f64> =
                rt.block_on(|| sizes.iter().map(|&size| measure(size, base)).collect());
            for (((s, g), f), &size) in samples.iter_mut().zip(&mut gb).zip(figures).zip(sizes) {
                s.push(f);
                g.push(size as f64 / f / 1e3);
            }
        }
    });
    for (((size, s), g), p) in sizes.iter().zip(&samples).zip(&gb).zip(&peer) {
        let c = figure(&format!("{name}_{size}"), s, "us");
        if gb_per_s {
            figure(&format!("{name}_{size}.gb_per_s"), g, "GB/s");
        }
        if peer_error.is_none() {
            let m = figure(&format!("{name}_{size}.mpi"), p, "us");
            ratio(&format!("{name}_{size}"), "mpi", c, m);
        }
    }
    if let Some(e) = peer_error {
        note(&format!("MPI peer unavailable: {e}"));
    }
}

/// Time per message of `windows` windows of [`STREAM_WINDOW`] Chant
/// messages of `size` bytes to a [`Drain`] on locale 1, each window
/// acknowledged before the next (after one untimed window); each window's
/// sends in one [`cantus::chant::window`] if `in_window`, else plain
/// sends.
fn streamed_to_drain(size: usize, windows: u64, in_window: bool) -> Duration {
    use cantus::chant::{self, Source, Tag};
    cantus::begin_on(
        1,
        Drain {
            boss: chant::me(),
            window: STREAM_WINDOW,
        },
    )
    .expect("drain");
    let drain = chant::recv(Source::Any, Tag::Is(1)).source();
    let msg: Vec<u8> = (0..size).map(|i| i as u8).collect();
    let window = || {
        if in_window {
            chant::window(|w| {
                for _ in 0..STREAM_WINDOW {
                    w.send(drain, 2, &msg).expect("send");
                }
            });
        } else {
            for _ in 0..STREAM_WINDOW {
                chant::send(drain, 2, &msg).expect("send");
            }
        }
        chant::recv(Source::Task(drain), Tag::Is(3));
    };
    window();
    let start = Instant::now();
    for _ in 0..windows {
        window();
    }
    let took = start.elapsed();
    chant::send(drain, 0, &[]).expect("stop");
    took / (windows as usize * STREAM_WINDOW) as u32
}

/// Sizes of the transfer rows.
const TRANSFER_SIZES: [(usize, &str); 2] = [(64 << 10, "64k"), (1 << 20, "1m")];

/// The transfer rows: GB/s of Chant messages and remote-call arguments
/// of each size, with memcpy of the same size measured in the same run.
fn transfers(rt: &cantus::Runtime, reps: usize, quick: bool) {
    for (size, name) in TRANSFER_SIZES {
        let rounds: u64 = if quick {
            20
        } else {
            (256 << 20) as u64 / size as u64
        };
        let mut chant_bw = Samples::new();
        let mut arg_bw = Samples::new();
        let mut bytes_bw = Samples::new();
        let mut copy_bw = Samples::new();
        let mut codec_vec = Samples::new();
        let mut ours_vec = Samples::new();
        let mut ours_vec_f64 = Samples::new();
        let mut codec_vec_f64 = Samples::new();
        let mut ours_vec_u32 = Samples::new();
        let mut codec_vec_u32 = Samples::new();
        let mut codec_bytes = Samples::new();
        let mut bulk_bw = Samples::new();
        let mut vec_f64_bw = Samples::new();
        let mut chant_bulk_bw = Samples::new();
        let mut codec_bulk = Samples::new();
        let mut raw_copied = Samples::new();
        let mut raw_in_place = Samples::new();
        let mut put_bw = Samples::new();
        let mut get_bw = Samples::new();
        section(&format!("transfer {name}"), || {
            for _ in 0..reps {
                let (put, get) = rt
                    .block_on(|| cantus::pgas::spmd(PgasTransfer { size, rounds }))
                    .expect("pgas transfers")[0];
                put_bw.push(size as f64 / put / 1e9);
                get_bw.push(size as f64 / get / 1e9);
                let (c, a, b, bulk, vec_f64, chant_bulk) = rt.block_on(|| {
                    (
                        chant_one_way(size, rounds),
                        call_arg(size, rounds, |v| cantus::on(1, Sink(v))),
                        call_arg(size, rounds, |v| {
                            cantus::on(1, SinkBytes(serde_bytes::ByteBuf::from(v)))
                        }),
                        round_trip_f64(size, rounds, |v| {
                            cantus::on(1, NegateBulk(v.into()))
                                .join()
                                .expect("negate")
                                .into_vec()
                        }),
                        round_trip_f64(size, rounds, |v| {
                            cantus::on(1, NegateVec(v)).join().expect("negate")
                        }),
                        chant_round_trip_f64(size, rounds),
                    )
                });
                chant_bw.push(gb_per_s(size, c));
                arg_bw.push(gb_per_s(size, a));
                bytes_bw.push(gb_per_s(size, b));
                // Both ways: the argument there, the result back.
                bulk_bw.push(gb_per_s(2 * size, bulk));
                vec_f64_bw.push(gb_per_s(2 * size, vec_f64));
                chant_bulk_bw.push(gb_per_s(2 * size, chant_bulk));
                codec_bulk.push(gb_per_s(
                    size,
                    codec(size, rounds, |v| {
                        v.chunks_exact(8)
                            .map(|c| f64::from_le_bytes(c.try_into().expect("8 bytes")))
                            .collect::<cantus::Bulk<f64>>()
                    }),
                ));
                for (samples, flow) in [
                    (&mut raw_copied, crate::raw_bulk::Flow::ReplyCopied),
                    (&mut raw_in_place, crate::raw_bulk::Flow::ReplyInPlace),
                ] {
                    samples.push(gb_per_s(
                        2 * size,
                        crate::raw_bulk::round_trip(size, rounds, flow),
                    ));
                }
                copy_bw.push(gb_per_s(size, memcpy(size, rounds)));
                codec_vec.push(gb_per_s(size, codec(size, rounds, |v| v)));
                ours_vec.push(gb_per_s(size, ours(size, rounds, |v| v)));
                ours_vec_f64.push(gb_per_s(size, ours(size, rounds, to_f64s)));
                codec_vec_f64.push(gb_per_s(size, codec(size, rounds, to_f64s)));
                ours_vec_u32.push(gb_per_s(size, ours(size, rounds, to_u32s)));
                codec_vec_u32.push(gb_per_s(size, codec(size, rounds, to_u32s)));
                codec_bytes.push(gb_per_s(
                    size,
                    codec(size, rounds, serde_bytes::ByteBuf::from),
                ));
            }
        });
        let c = figure(&format!("transfer_chant_{name}"), &chant_bw, "GB/s");
        let a = figure(&format!("transfer_arg_{name}"), &arg_bw, "GB/s");
        let b = figure(&format!("transfer_bytes_arg_{name}"), &bytes_bw, "GB/s");
        let m = figure(&format!("transfer_{name}.memcpy"), &copy_bw, "GB/s");
        let pv = figure(&format!("transfer_{name}.postcard_vec"), &codec_vec, "GB/s");
        let cv = figure(&format!("transfer_{name}.codec_vec"), &ours_vec, "GB/s");
        let pf = figure(
            &format!("transfer_{name}.postcard_vec_f64"),
            &codec_vec_f64,
            "GB/s",
        );
        let cf = figure(
            &format!("transfer_{name}.codec_vec_f64"),
            &ours_vec_f64,
            "GB/s",
        );
        let pu = figure(
            &format!("transfer_{name}.postcard_vec_u32"),
            &codec_vec_u32,
            "GB/s",
        );
        let cu = figure(
            &format!("transfer_{name}.codec_vec_u32"),
            &ours_vec_u32,
            "GB/s",
        );
        ratio(
            &format!("transfer_{name}.codec_vec_u32"),
            "postcard",
            cu,
            pu,
        );
        // Bandwidths, as the other transfer ratios: above 1 is faster.
        ratio(&format!("transfer_{name}.codec_vec"), "postcard", cv, pv);
        ratio(
            &format!("transfer_{name}.codec_vec_f64"),
            "postcard",
            cf,
            pf,
        );
        figure(
            &format!("transfer_{name}.postcard_bytes"),
            &codec_bytes,
            "GB/s",
        );
        let bulk = figure(&format!("transfer_bulk_arg_{name}"), &bulk_bw, "GB/s");
        let vec_f64 = figure(&format!("transfer_vec_f64_arg_{name}"), &vec_f64_bw, "GB/s");
        let chant_bulk = figure(
            &format!("transfer_chant_bulk_{name}"),
            &chant_bulk_bw,
            "GB/s",
        );
        let raw = figure(
            &format!("transfer_bulk_arg_{name}.raw_shm"),
            &raw_copied,
            "GB/s",
        );
        let raw_one = figure(
            &format!("transfer_bulk_arg_{name}.raw_shm_in_place"),
            &raw_in_place,
            "GB/s",
        );
        figure(
            &format!("transfer_{name}.postcard_bulk"),
            &codec_bulk,
            "GB/s",
        );
        let put = figure(&format!("transfer_put_{name}"), &put_bw, "GB/s");
        let get = figure(&format!("transfer_get_{name}"), &get_bw, "GB/s");
        ratio(&format!("transfer_put_{name}"), "memcpy", put, m);
        ratio(&format!("transfer_get_{name}"), "memcpy", get, m);
        ratio(&format!("transfer_chant_{name}"), "memcpy", c, m);
        ratio(&format!("transfer_arg_{name}"), "memcpy", a, m);
        ratio(&format!("transfer_bytes_arg_{name}"), "memcpy", b, m);
        ratio(&format!("transfer_bulk_arg_{name}"), "memcpy", bulk, m);
        ratio(&format!("transfer_bulk_arg_{name}"), "raw_shm", bulk, raw);
        ratio(
            &format!("transfer_bulk_arg_{name}.raw_shm"),
            "memcpy",
            raw,
            m,
        );
        ratio(
            &format!("transfer_bulk_arg_{name}.raw_shm_in_place"),
            "memcpy",
            raw_one,
            m,
        );
        ratio(
            &format!("transfer_vec_f64_arg_{name}"),
            "memcpy",
            vec_f64,
            m,
        );
        ratio(
            &format!("transfer_chant_bulk_{name}"),
            "memcpy",
            chant_bulk,
            m,
        );
        ratio(
            &format!("transfer_chant_bulk_{name}"),
            "raw_shm_in_place",
            chant_bulk,
            raw_one,
        );
    }
}

/// Time of a round trip that carries `size` bytes of `f64`s to locale 1
/// and `size` bytes back (`call` makes the call and returns the array
/// it got back), from the call to its result: the argument is made (a
/// copy of one vector) before each call's clock starts.
pub(crate) fn round_trip_f64(
    size: usize,
    rounds: u64,
    call: impl Fn(Vec<f64>) -> Vec<f64>,
) -> Duration {
    let arg: Vec<f64> = (0..size / 8).map(|i| i as f64).collect();
    let one = || {
        let v = arg.clone();
        let start = Instant::now();
        let back = call(v);
        let took = start.elapsed();
        assert_eq!(back.len(), arg.len());
        assert_eq!(
            back.last().copied(),
            arg.last().map(|x| -x),
            "came back negated"
        );
        took
    };
    for _ in 0..rounds.div_ceil(10) {
        one();
    }
    (0..rounds).map(|_| one()).sum::<Duration>() / rounds as u32
}

fn gb_per_s(bytes: usize, d: Duration) -> f64 {
    bytes as f64 / d.as_secs_f64() / 1e9
}

/// One-way time of a `size`-byte Chant message to a task on locale 1:
/// half the round trip to a task that echoes it.
fn chant_one_way(size: usize, rounds: u64) -> Duration {
    use cantus::chant::{self, Source, Tag};
    cantus::begin_on(1, Echo { boss: chant::me() }).expect("echo");
    let echo = chant::recv(Source::Any, Tag::Is(1)).source();
    let msg: Vec<u8> = (0..size).map(|i| i as u8).collect();
    let ping = || {
        chant::send(echo, 2, &msg).expect("send");
        let back = chant::recv(Source::Task(echo), Tag::Is(2));
        assert_eq!(back.bytes().len(), size, "the echo is whole");
    };
    for _ in 0..rounds.div_ceil(10) {
        ping();
    }
    let start = Instant::now();
    for _ in 0..rounds {
        ping();
    }
    let took = start.elapsed();
    chant::send(echo, 0, &[]).expect("stop");
    took / (2 * rounds as u32)
}

/// Time of a call (`on`: a call made of a `Vec<u8>`) carrying a
/// `size`-byte argument to locale 1 and its length back, from the call
/// to its result: the argument is made (a clone of one vector) before
/// each call's clock starts, as a caller hands over data it already has.
fn call_arg(
    size: usize,
    rounds: u64,
    on: impl Fn(Vec<u8>) -> cantus::remote::RemoteHandle<u64>,
) -> Duration {
    let arg: Vec<u8> = (0..size).map(|i| i as u8).collect();
    let call = || {
        let v = arg.clone();
        let start = Instant::now();
        let n = on(v).join().expect("sink");
        let took = start.elapsed();
        assert_eq!(n, size as u64);
        took
    };
    for _ in 0..rounds.div_ceil(10) {
        call();
    }
    (0..rounds).map(|_| call()).sum::<Duration>() / rounds as u32
}

/// A `size`-byte vector's bytes as `f64`s.
fn to_f64s(v: Vec<u8>) -> Vec<f64> {
    v.chunks_exact(8)
        .map(|c| f64::from_le_bytes(c.try_into().expect("8 bytes")))
        .collect()
}

/// A `size`-byte vector's bytes as `u32`s (varints of 1 to 5 bytes in
/// the format: element by element in either codec).
fn to_u32s(v: Vec<u8>) -> Vec<u32> {
    v.chunks_exact(4)
        .map(|c| u32::from_le_bytes(c.try_into().expect("4 bytes")))
        .collect()
}

/// Time of encoding (cantus's codec, into a fresh vector) and decoding
/// a `size`-byte argument made by `wrap`, in this process: `codec`'s
/// peer.
fn ours<T: Serialize + serde::de::DeserializeOwned>(
    size: usize,
    rounds: u64,
    wrap: impl Fn(Vec<u8>) -> T,
) -> Duration {
    use cantus::__bench::codec::{decode, encode};
    encode_and_decode(size, rounds, wrap, encode, decode)
}

/// Time of encoding (postcard, into a fresh vector) and decoding a
/// `size`-byte argument made by `wrap`, in this process.
fn codec<T: Serialize + serde::de::DeserializeOwned>(
    size: usize,
    rounds: u64,
    wrap: impl Fn(Vec<u8>) -> T,
) -> Duration {
    encode_and_decode(
        size,
        rounds,
        wrap,
        |v| postcard::to_allocvec(v).expect("encodes"),
        |b| postcard::from_bytes(b).expect("decodes"),
    )
}

/// Time of `encode` and `decode` of a `size`-byte argument made by
/// `wrap`, a round of each, averaged over `rounds`.
fn encode_and_decode<T>(
    size: usize,
    rounds: u64,
    wrap: impl Fn(Vec<u8>) -> T,
    encode: impl Fn(&T) -> Vec<u8>,
    decode: impl Fn(&[u8]) -> T,
) -> Duration {
    let arg = wrap((0..size).map(|i| i as u8).collect());
    let start = Instant::now();
    for _ in 0..rounds {
        let bytes = encode(std::hint::black_box(&arg));
        let back: T = decode(&bytes);
        std::hint::black_box(back);
    }
    start.elapsed() / rounds as u32
}

/// Time of copying `size` bytes from one buffer to another (both warm),
/// at memcpy's best: the faster of two placements of the destination.
/// glibc copies a few KiB to a few hundred KiB with `rep movsb`, which
/// some machines run 20x slower when the destination sits less than a
/// cache line past the source modulo 4 KiB (an AMD EPYC VM: 64 KiB at
/// 1.5 GB/s instead of 36), as two buffers of one size allocated one
/// after the other may; so it also copies to a destination placed half
/// a page from the source.
fn memcpy(size: usize, rounds: u64) -> Duration {
    let src: Vec<u8> = (0..size).map(|i| i as u8).collect();
    let mut fresh = vec![0u8; size];
    let mut room = vec![0u8; size + 4096];
    let apart = (room.as_ptr() as usize).wrapping_sub(src.as_ptr() as usize) % 4096;
    let at = (2048 + 4096 - apart) % 4096;
    let rounds = rounds * 10;
    let time = |dst: &mut [u8]| {
        let start = Instant::now();
        for i in 0..rounds {
            dst.copy_from_slice(std::hint::black_box(&src));
            std::hint::black_box(&mut *dst)[i as usize % size] ^= 1;
        }
        start.elapsed() / rounds as u32
    };
    let next = time(&mut fresh);
    let placed = time(&mut room[at..at + size]);
    next.min(placed)
}

fn us_per(d: Duration, n: u64) -> f64 {
    d.as_secs_f64() * 1e6 / n.max(1) as f64
}

/// Open MPI's figures, in us (`c/mpi_pingpong.c`).
struct Mpi {
    /// Per ping-pong round trip.
    round_trip: f64,
    /// Per request and reply, 64 in flight.
    request_reply: f64,
    /// Per message of a one-way `MPI_Isend` stream.
    stream: f64,
    /// One way, half a ping-pong, per size of `CHANT_SIZES`.
    one_way: Vec<f64>,
    /// Per message of a stream in windows, per size of `STREAM_SIZES`.
    stream_sizes: Vec<f64>,
}

/// Runs the MPI peer at its best: with Open MPI's shared-memory
/// single-copy mechanism (CMA) and without it (on some VMs 2.7x faster
/// for large messages, BENCHMARKS.md), keeping each figure's faster.
fn mpi(rounds: u64) -> Result<Mpi, String> {
    let with = mpi_run(rounds, &[])?;
    let Ok(without) = mpi_run(
        rounds,
        &["--mca", "btl_vader_single_copy_mechanism", "none"],
    ) else {
        return Ok(with);
    };
    Ok(Mpi {
        round_trip: with.round_trip.min(without.round_trip),
        request_reply: with.request_reply.min(without.request_reply),
        stream: with.stream.min(without.stream),
        one_way: with
            .one_way
            .iter()
            .zip(&without.one_way)
            .map(|(a, b)| a.min(*b))
            .collect(),
        stream_sizes: with
            .stream_sizes
            .iter()
            .zip(&without.stream_sizes)
            .map(|(a, b)| a.min(*b))
            .collect(),
    })
}

/// Runs the MPI peer once, with `mca` among mpirun's arguments.
fn mpi_run(rounds: u64, mca: &[&str]) -> Result<Mpi, String> {
    if MPI_PEER.is_empty() {
        return Err("not built (no mpicc at build time)".into());
    }
    if std::env::var_os("OMPI_COMM_WORLD_SIZE").is_some() || std::env::var_os("PMI_SIZE").is_some()
    {
        // This bench runs under mpirun itself (cantus over MPI): a nested
        // mpirun cannot start; the peer runs beside it (BENCHMARKS.md).
        return Err("not run from inside an MPI job; run it alone".into());
    }
    let out = std::process::Command::new("mpirun")
        .args(["-np", "2", "--bind-to", "core", "--oversubscribe"])
        .args(mca)
        .env("OMPI_ALLOW_RUN_AS_ROOT", "1")
        .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
        .arg(MPI_PEER)
        .arg(rounds.to_string())
        .output()
        .map_err(|e| format!("cannot run mpirun: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "mpirun failed ({}): {}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
                .lines()
                .take(5)
                .collect::<Vec<_>>()
                .join(" | ")
        ));
    }
    let text = String::from_utf8_lossy(&out.stdout);
    let get = |key: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix(key))
            .and_then(|v| v.trim().parse::<f64>().ok())
            .ok_or_else(|| format!("no {key} in the MPI peer's output: {text}"))
    };
    Ok(Mpi {
        round_trip: get("rtt_us")?,
        request_reply: get("request_reply_us")?,
        stream: get("pipelined_us")?,
        one_way: CHANT_SIZES
            .iter()
            .map(|s| get(&format!("oneway_us_{s}")))
            .collect::<Result<_, _>>()?,
        stream_sizes: STREAM_SIZES
            .iter()
            .map(|s| get(&format!("stream_us_{s}")))
            .collect::<Result<_, _>>()?,
    })
}
