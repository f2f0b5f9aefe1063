//! Jobs over MPI (the `mpi` feature): each test re-runs this test binary
//! under `mpirun` (one locale per rank, 2 to 4 ranks, oversubscribed on
//! a small machine), whose rank 0 runs the test's body and whose other
//! ranks serve. Every mpirun runs in a process group of its own under a
//! deadline (mpirun's own `--timeout` too), so a hang fails fast with
//! what the ranks printed, and no rank outlives its test. Also run over
//! Open MPI's TCP path (`--mca btl self,tcp`), the path that crosses a
//! network, on one machine.
//!
//! Every job runs on each path a frame can take (`comm/mpi/README.md`,
//! "Ranks of one node"), set by the testing setting `CANTUS_MPI_NODES`:
//! the ranks on one node sharing memory (unset: this machine is one
//! node), every rank a node of its own (everything through MPI), and for
//! 3-4 ranks two nodes (the mixed path); each in both progress modes
//! where it matters ([`paths`]). Each job checks that it took the path
//! it was given ([`job`]).
//!
//! As root, Open MPI needs OMPI_ALLOW_RUN_AS_ROOT(_CONFIRM); the tests set
//! them for the mpirun they start.

#![cfg(feature = "mpi")]

mod common;

/// Fib as splittable work (cut-off 2: one call of the recursion a unit).
use cantus_programs::fib as fib_program;

use cantus::chant::{self, Source, Tag};
use cantus::{ErrorKind, Remote};
use common::calls::{Add, WhoAmI};
use common::held::Held;
use common::{is_child, mpirun};
use serde::{Deserialize, Serialize};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// Adds, inside the poll.
#[derive(Serialize, Deserialize)]
struct AddInline(u64, u64);
impl Remote for AddInline {
    type Output = u64;
    const INLINE: bool = true;
    fn run(self) -> u64 {
        self.0 + self.1
    }
}

static BUMPS: AtomicU64 = AtomicU64::new(0);

#[derive(Serialize, Deserialize)]
struct Bump;
impl Remote for Bump {
    type Output = ();
    fn run(self) {
        BUMPS.fetch_add(1, Ordering::Relaxed);
    }
}

#[derive(Serialize, Deserialize)]
struct Bumps;
impl Remote for Bumps {
    type Output = u64;
    fn run(self) -> u64 {
        BUMPS.load(Ordering::Relaxed)
    }
}

/// A digest of a large argument, and a large result.
#[derive(Serialize, Deserialize)]
struct Digest(Vec<u8>, u64);
impl Remote for Digest {
    type Output = (u64, Vec<u8>);
    fn run(self) -> (u64, Vec<u8>) {
        (fnv(&self.0), pattern(self.1 as usize))
    }
}

/// Says whether its array arrived in place (in the frame the transport
/// lent: a rendezvous block, or the buffer MPI received into, aligned for
/// `f64`), and sends it back negated.
#[derive(Serialize, Deserialize)]
struct InPlaceF64(cantus::Bulk<f64>);
impl Remote for InPlaceF64 {
    type Output = (bool, cantus::Bulk<f64>);
    fn run(mut self) -> (bool, cantus::Bulk<f64>) {
        let in_place = self.0.is_in_place();
        self.0.iter_mut().for_each(|x| *x = -*x);
        (in_place, self.0)
    }
}

/// Sends back its plain `Vec<f64>` negated, with the frames its locale
/// sent from staged blocks so far (`comm/shm/README.md`, rule S).
#[derive(Serialize, Deserialize)]
struct NegateVec(Vec<f64>);
impl Remote for NegateVec {
    type Output = (Vec<f64>, u64);
    fn run(self) -> (Vec<f64>, u64) {
        let staged = cantus::__test::staged_frames();
        (self.0.into_iter().map(|x| -x).collect(), staged)
    }
}

/// [`Digest`] with its bytes as a `Bulk` (one copy to encode, one to
/// decode, where a `Vec<u8>` goes byte by byte).
#[derive(Serialize, Deserialize)]
struct DigestBulk(cantus::Bulk<u8>, u64);
impl Remote for DigestBulk {
    type Output = (u64, cantus::Bulk<u8>);
    fn run(self) -> (u64, cantus::Bulk<u8>) {
        (fnv(&self.0), pattern(self.1 as usize).into())
    }
}

/// Panics where it runs.
#[derive(Serialize, Deserialize)]
struct Explode;
impl Remote for Explode {
    type Output = u64;
    fn run(self) -> u64 {
        panic!("the remote fuse")
    }
}

/// Echoes Chant messages back to `boss` until tag 0.
#[derive(Serialize, Deserialize)]
struct Echo {
    boss: chant::TaskId,
}
impl Remote for Echo {
    type Output = u64;
    fn run(self) -> u64 {
        chant::send(self.boss, HELLO, &[]).expect("hello");
        let mut n = 0;
        loop {
            let m = chant::recv(Source::Task(self.boss), Tag::Any);
            if m.tag() == 0 {
                return n;
            }
            n += 1;
            chant::send(self.boss, m.tag(), m.bytes()).expect("echo");
        }
    }
}

/// The tag of an echo task's first message.
const HELLO: u32 = u32::MAX;

/// A Chant task that negates the array of one message (tag 2) where it
/// arrived and sends it back given up (tag 3): between the ranks of a
/// node, in the very block it came in.
#[derive(Serialize, Deserialize)]
struct NegateBack {
    boss: chant::TaskId,
}
impl Remote for NegateBack {
    type Output = ();
    fn run(self) {
        chant::send(self.boss, HELLO, &[]).expect("hello");
        let m = chant::recv(Source::Task(self.boss), Tag::Is(2));
        let mut v: cantus::Bulk<f64> = m.into_decoded().expect("an array");
        v.iter_mut().for_each(|x| *x = -*x);
        chant::send_value(self.boss, 3, v).expect("back");
    }
}

/// Ends its own process: with a status, or killed by SIGKILL.
#[derive(Serialize, Deserialize)]
struct Die(Option<i32>);
impl Remote for Die {
    type Output = ();
    fn run(self) {
        match self.0 {
            Some(code) => std::process::exit(code),
            None => {
                // SAFETY: sends a signal to this process; no memory involved.
                unsafe { libc::kill(libc::getpid(), libc::SIGKILL) };
            }
        }
    }
}

/// An SPMD body over the global address space: allocation, puts and gets
/// to every locale, atomics, a barrier, broadcast and reductions, and a
/// block-distributed array. Returns the sum each locale saw.
#[derive(Clone, Serialize, Deserialize)]
struct GlobalWork(u64);
impl Remote for GlobalWork {
    type Output = u64;
    fn run(self) -> u64 {
        use cantus::pgas::{self, BlockArray};
        let (me, n) = (cantus::here(), cantus::num_locales());
        // Each locale writes its number into every locale's slot `me`.
        // Segments on this rank's node are reached in place, the others
        // by messages.
        assert_eq!(
            cantus::__test::pgas_mapped_locales(),
            Some(node_of(me, n)),
            "locale {me}'s mapped segments"
        );
        let slots = pgas::alloc::<u64>(n).unwrap();
        for l in 0..n {
            slots.ptr(l).add(me).write(me as u64 * self.0).unwrap();
        }
        pgas::barrier();
        let seen: u64 = slots.local().iter().sum();
        assert_eq!(
            seen,
            self.0 * (n * (n - 1) / 2) as u64,
            "locale {me}'s slots"
        );
        // Remote atomics on locale 0's counter, then a read of it.
        let counter = pgas::alloc::<u64>(1).unwrap();
        for _ in 0..10 {
            counter.ptr(0).fetch_add(1).unwrap();
        }
        pgas::barrier();
        assert_eq!(counter.ptr(0).load().unwrap(), 10 * n as u64);
        // A large put and get (several frames: over MPI, a get's pieces
        // are sent from the owner's segment, a put's from the caller's
        // slice), checked.
        let len = (2 << 20) + (300 << 10);
        let big = pgas::alloc::<u8>(len).unwrap();
        let to = (me + 1) % n;
        let mine = pattern(len + me);
        big.ptr(to).put(&mine[..len]).unwrap();
        pgas::barrier();
        let from = (me + n - 1) % n;
        assert!(
            big.local() == &pattern(len + from)[..len],
            "what locale {from} put"
        );
        let mut back = vec![0u8; len];
        big.ptr(to).get(&mut back).unwrap();
        assert!(back == mine[..len], "what locale {me} put, read back");
        // Gets about the least that lands straight in the caller's slice
        // across nodes (64 KiB), at an odd offset, and several at once.
        for (i, n) in [(64 << 10) - 1, 64 << 10, (64 << 10) + 1, (1 << 20) + 7]
            .into_iter()
            .enumerate()
        {
            let mut part = vec![0u8; n];
            big.ptr(to).add(i + 1).get(&mut part).unwrap();
            assert!(part == mine[i + 1..i + 1 + n], "{n} bytes at {}", i + 1);
        }
        let ptr = big.ptr(to);
        cantus::coforall(4, |k| {
            let mut part = vec![0u8; 300_000];
            ptr.add(k * 100_000).get(&mut part).unwrap();
            assert!(
                part == mine[k * 100_000..k * 100_000 + 300_000],
                "get {k} of 4 at once"
            );
        });
        // Puts about the least that lands straight in the owner's segment
        // across nodes (64 KiB), at odd offsets, every locale putting to
        // the next at once; then a large signalling put, whose owner waits
        // for the signal and finds the bytes there.
        let sizes = [(64 << 10) - 1, 64 << 10, (64 << 10) + 1, (1 << 20) + 7];
        let land = pgas::alloc::<u8>(2 << 20).unwrap();
        let mut at = 1;
        for (i, &size) in sizes.iter().enumerate() {
            land.ptr(to).add(at).put(&mine[i..i + size]).unwrap();
            at += size + 1;
        }
        pgas::barrier();
        let theirs = pattern(len + from);
        let mut at = 1;
        for (i, &size) in sizes.iter().enumerate() {
            assert!(
                land.local()[at..at + size] == theirs[i..i + size],
                "{size} bytes at {at} put by locale {from}"
            );
            at += size + 1;
        }
        // A forged `PutAt` (bytes that never came, under a key never
        // sent), detached: its owner refuses it at once rather than wait
        // for them; the job goes on (and ends: a task left waiting would
        // hold it up), and the next put lands.
        let args = [0u64, 64 << 10, 4095, me as u64, 0, 0, 0].map(u64::to_le_bytes);
        let mut forged = vec![1u8, 0, 0, 0];
        forged.extend_from_slice(&(args.as_flattened().len() as u32).to_le_bytes());
        forged.extend_from_slice(&fnv(b"cantus::pgas::messages::PutAt").to_le_bytes());
        forged.extend_from_slice(&0u64.to_le_bytes());
        forged.extend_from_slice(args.as_flattened());
        cantus::__test::send_raw_frame(to, false, &forged).unwrap();
        // Puts of one task to one locale land in the order made, a large
        // one (which lands straight in the segment across nodes) too: a
        // small put after it, over its first bytes, is what stays there.
        // (Over Open MPI's shared-memory BTL a landing's send completes
        // only once its owner received it, so this passes even if the
        // large put did not wait for its answer; over a network whose
        // eager limit reaches 64 KiB it would not.)
        let first = pgas::alloc::<u8>(1 << 20).unwrap();
        let large = first.ptr(to).put_nb(&mine[5..5 + (1 << 20)]).unwrap();
        let small = first.ptr(to).put_nb(&[0xa5; 8]).unwrap();
        large.wait().unwrap();
        small.wait().unwrap();
        pgas::barrier();
        assert_eq!(
            first.local()[..8],
            [0xa5; 8],
            "the later put of locale {from}"
        );
        assert!(
            first.local()[8..] == theirs[5 + 8..5 + (1 << 20)],
            "the earlier put of locale {from}"
        );
        pgas::barrier();
        let flag = pgas::alloc::<u64>(1).unwrap();
        let signalled = pgas::alloc::<u8>(1 << 20).unwrap();
        signalled
            .ptr(to)
            .put_signal(&mine[3..3 + (1 << 20)], flag.ptr(to), pgas::Signal::Add(1))
            .unwrap()
            .wait()
            .unwrap();
        flag.ptr(me).wait_until(|v| v == 1).unwrap();
        assert!(
            signalled.local() == &theirs[3..3 + (1 << 20)],
            "signalled by locale {from}: its bytes came first"
        );
        pgas::barrier();
        // Collectives.
        let mut root_says = [0u64; 3];
        if me == n - 1 {
            root_says = [7, 8, 9];
        }
        pgas::broadcast(n - 1, &mut root_says);
        assert_eq!(root_says, [7, 8, 9]);
        assert_eq!(pgas::all_reduce(me as u64, pgas::max), n as u64 - 1);
        let mut block = BlockArray::<u64>::new(8 * n).unwrap();
        block.forall_local(|i, v| *v = i as u64);
        pgas::barrier();
        assert_eq!(block.read(8 * n - 1).unwrap(), 8 * n as u64 - 1);
        pgas::barrier();
        pgas::all_reduce(seen, pgas::sum)
    }
}

/// Takes `senders * WINDOW_SIZES.len()` messages from any task, checks
/// each sender's come in order (tag: its index in the window) and whole
/// (`pattern` of its size and sender), and returns how many it took.
#[derive(Serialize, Deserialize)]
struct Sink {
    boss: chant::TaskId,
    senders: usize,
}
/// A window's messages: large ones that pass the receiver's open bytes
/// together, with short ones between.
const WINDOW_SIZES: [usize; 7] = [300 << 10, 1, 700 << 10, 100 << 10, 8, 1 << 20, 20 << 10];
impl Remote for Sink {
    type Output = u64;
    fn run(self) -> u64 {
        chant::send(self.boss, HELLO, &[]).expect("hello");
        let mut next = std::collections::HashMap::new();
        let total = self.senders * WINDOW_SIZES.len();
        for _ in 0..total {
            let m = chant::recv(Source::Any, Tag::Any);
            let seq = next.entry(m.source()).or_insert(0u32);
            assert_eq!(m.tag(), *seq, "order from {}", m.source());
            let size = WINDOW_SIZES[*seq as usize];
            assert!(
                m.bytes() == pattern(size + m.source().task as usize % 251).as_slice(),
                "{size} bytes from {}",
                m.source()
            );
            *seq += 1;
        }
        total as u64
    }
}

/// Sizes of the messages a [`Keeper`] keeps: short ones, lent out of
/// their batch where MPI carries them (`comm/mpi/README.md`, "Messages",
/// 7), and tiny ones between, copied.
const KEPT_SIZES: [usize; 7] = [1024, 1500, 600, 2048, 8, 0, 4000];

/// The `i`th message a [`Keeper`] gets: its size and bytes.
fn kept_message(i: usize) -> Vec<u8> {
    pattern(KEPT_SIZES[i % KEPT_SIZES.len()] + i % 13)
}

/// Receives two windows of `count` messages each (tags in order) and
/// keeps every one until the end: checks them all once the first window
/// is in, drops every other one, checks the rest again while the second
/// window comes in and after it. Returns how many messages this locale
/// kept lent out of a batch meanwhile.
#[derive(Serialize, Deserialize)]
struct Keeper {
    boss: chant::TaskId,
    count: usize,
}
impl Remote for Keeper {
    type Output = u64;
    fn run(self) -> u64 {
        let before = cantus::__test::frames_lent_from_batches();
        chant::send(self.boss, HELLO, &[]).expect("hello");
        let take = |first: usize| -> Vec<chant::Message> {
            (first..first + self.count)
                .map(|i| {
                    let m = chant::recv(Source::Task(self.boss), Tag::Any);
                    assert_eq!(m.tag() as usize, i, "order");
                    m
                })
                .collect()
        };
        let check = |kept: &[(usize, chant::Message)], what: &str| {
            for (i, m) in kept {
                assert!(
                    m.bytes() == kept_message(*i).as_slice(),
                    "message {i} ({} bytes) changed {what}",
                    m.bytes().len()
                );
            }
        };
        let first: Vec<(usize, chant::Message)> = take(0).into_iter().enumerate().collect();
        check(&first, "once all came");
        let odd: Vec<(usize, chant::Message)> =
            first.into_iter().filter(|(i, _)| i % 2 == 1).collect();
        check(&odd, "after the others went");
        chant::send(self.boss, HELLO, &[]).expect("ready for more");
        let second: Vec<(usize, chant::Message)> = take(self.count)
            .into_iter()
            .enumerate()
            .map(|(i, m)| (i + self.count, m))
            .collect();
        check(&odd, "while others came");
        check(&second, "once all came");
        cantus::__test::frames_lent_from_batches() - before
    }
}

cantus::remote!(
    AddInline, Bump, Bumps, Digest, DigestBulk, InPlaceF64, NegateVec, NegateBack, Explode, Echo,
    Sink, Die, GlobalWork, Keeper
);

fn fnv(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, &b| {
        (h ^ b as u64).wrapping_mul(0x100_0000_01b3)
    })
}

fn pattern(n: usize) -> Vec<u8> {
    (0..n).map(|i| (i * 31 + i / 257) as u8).collect()
}

/// The paths a job of `ranks` ranks runs on: (progress mode,
/// `CANTUS_MPI_NODES`, unset for the real node). Every rank its own node
/// (all through MPI) and, with 3 or more ranks, two nodes (the mixed
/// path), in both modes; this machine as one node (all through shared
/// memory) inline, and in `thread` mode too for 2 ranks.
fn paths(ranks: usize) -> Vec<(&'static str, Option<usize>)> {
    let mut p = vec![
        ("inline", Some(ranks)),
        ("thread", Some(ranks)),
        ("inline", None),
    ];
    if ranks >= 3 {
        p.extend([("inline", Some(2)), ("thread", Some(2))]);
    } else {
        p.push(("thread", None));
    }
    p
}

/// The environment that sets a path.
fn path_env(mode: &'static str, nodes: Option<usize>) -> Vec<(&'static str, String)> {
    let mut env = vec![("CANTUS_MPI_PROGRESS", mode.to_string())];
    if let Some(k) = nodes {
        env.push(("CANTUS_MPI_NODES", k.to_string()));
    }
    env
}

/// The locales that share locale `l`'s node in a job of `n` ranks on this
/// one machine, as `CANTUS_MPI_NODES` splits it (blocks of consecutive
/// ranks; unset, one node).
fn node_of(l: usize, n: usize) -> Vec<usize> {
    let k = std::env::var("CANTUS_MPI_NODES")
        .ok()
        .map_or(1, |v| v.parse::<usize>().unwrap())
        .min(n);
    (0..n).filter(|&m| m * k / n == l * k / n).collect()
}

/// Runs `body` on rank 0 of a job of `ranks` ranks (the other ranks serve
/// inside `build`); asserts the job succeeded.
fn on_ranks(test: &str, ranks: &[usize], extra: &[&str], body: impl FnOnce()) {
    if is_child() {
        body();
        return;
    }
    for &n in ranks {
        for (mode, nodes) in paths(n) {
            let (ok, stdout, stderr) = mpirun(test, n, extra, &path_env(mode, nodes));
            assert!(
                ok,
                "{test} under mpirun -n {n} {extra:?}, progress {mode}, CANTUS_MPI_NODES \
                 {nodes:?}, failed:\n{stdout}\n{stderr}"
            );
        }
    }
}

/// Starts this rank's locale of the job (rank 0 returns; the others
/// serve inside `build`), and checks that the job took the path
/// `CANTUS_MPI_NODES` set: this rank shares memory with its node's ranks
/// and no others.
fn job() -> cantus::Runtime {
    let rt = cantus::Runtime::builder()
        .build()
        .expect("a job over MPI starts");
    let (here, n) = (cantus::here(), cantus::num_locales());
    assert_eq!(
        cantus::__test::mpi_node_members(),
        Some(node_of(here, n)),
        "locale {here}'s node"
    );
    rt
}

/// Remote calls of every kind between every pair of ranks.
fn calls_everywhere() {
    let rt = job();
    let n = cantus::num_locales();
    assert_eq!(cantus::here(), 0);
    let pids = rt.block_on(|| {
        let who = cantus::coforall_locales(|_| WhoAmI).unwrap();
        for (l, &(here, count, _)) in who.iter().enumerate() {
            assert_eq!((here, count), (l, n), "locale {l} knows where it is");
        }
        for l in 0..n {
            assert_eq!(
                cantus::on(l, Add(l as u64, 40)).join().unwrap(),
                l as u64 + 40
            );
            assert_eq!(
                cantus::on(l, AddInline(l as u64, 2)).join().unwrap(),
                l as u64 + 2
            );
        }
        // Many calls in flight, detached ones counted behind them.
        for round in 0..20u64 {
            let calls: Vec<_> = (0..64)
                .map(|k| cantus::on((k % n as u64) as usize, Add(round, k)))
                .collect();
            for (k, c) in calls.into_iter().enumerate() {
                assert_eq!(c.join().unwrap(), round + k as u64);
            }
        }
        for l in 0..n {
            for _ in 0..500 {
                cantus::begin_on(l, Bump).unwrap();
            }
        }
        for l in 0..n {
            let deadline = Instant::now() + Duration::from_secs(30);
            while cantus::on(l, Bumps).join().unwrap() != 500 {
                assert!(
                    Instant::now() < deadline,
                    "locale {l}'s bumps never all arrived"
                );
                cantus::task::sleep(Duration::from_millis(1));
            }
        }
        // Arguments and results larger than a frame travel in pieces.
        let last = n - 1;
        for size in [100, 200 << 10, 3 << 20] {
            let arg = pattern(size);
            let (h, back) = cantus::on(last, Digest(arg.clone(), size as u64 / 2))
                .join()
                .unwrap();
            assert_eq!(h, fnv(&arg), "{size}-byte argument");
            assert!(back == pattern(size / 2), "{}-byte result", size / 2);
        }
        // A remote panic is an error naming the call and the locale.
        let e = cantus::on(last, Explode).join().unwrap_err();
        assert_eq!(e.kind(), ErrorKind::RemotePanic);
        assert!(
            e.to_string().contains("Explode") && e.to_string().contains("the remote fuse"),
            "{e}"
        );
        who.iter().map(|w| w.2).collect::<Vec<_>>()
    });
    let mut distinct = pids.clone();
    distinct.sort_unstable();
    distinct.dedup();
    assert_eq!(distinct.len(), n, "each locale is a process of its own");
    // From main, an outside thread, too.
    assert_eq!(cantus::on(n - 1, Add(1, 2)).join().unwrap(), 3);
    rt.shutdown();
}

#[test]
fn remote_calls_cross_every_pair_of_ranks() {
    on_ranks(
        "remote_calls_cross_every_pair_of_ranks",
        &[2, 3, 4],
        &[],
        calls_everywhere,
    );
}

#[test]
fn remote_calls_cross_ranks_over_tcp() {
    on_ranks(
        "remote_calls_cross_ranks_over_tcp",
        &[2, 3],
        &["--mca", "btl", "self,tcp"],
        calls_everywhere,
    );
}

/// Large arguments and results between every pair of ranks: sizes on
/// both sides of each threshold (a batch-sized frame, 64 KiB; the largest
/// rendezvous block between the ranks of a node, 2 MiB less 64 bytes,
/// past which messages go there in pieces of that size, and over MPI
/// still whole), 3 MiB, and many at once from concurrent tasks.
fn large_messages_everywhere() {
    let rt = job();
    let n = cantus::num_locales();
    rt.block_on(|| {
        let mut sizes = vec![0, 1];
        for edge in [64 << 10, (2 << 20) - 64] {
            sizes.extend([edge - 80, edge - 40, edge - 20, edge, edge + 1, edge + 40]);
        }
        sizes.push(3 << 20);
        for l in 1..n {
            for &size in &sizes {
                let arg = pattern(size);
                let (h, back) = cantus::on(l, DigestBulk(arg.clone().into(), size as u64))
                    .join()
                    .unwrap();
                assert_eq!(h, fnv(&arg), "{size}-byte argument to locale {l}");
                assert!(*back == pattern(size), "{size}-byte result from locale {l}");
            }
        }
        // A 1 MiB array of f64 is read where it arrived, aligned, on
        // every path (through MPI: placed in MPI's receive buffer).
        let v: Vec<f64> = (0..1 << 17).map(|i| i as f64 * 0.5).collect();
        for l in 1..n {
            let (in_place, back) = cantus::on(l, InPlaceF64(v.clone().into())).join().unwrap();
            assert!(in_place, "1 MiB of f64 received in place on locale {l}");
            assert!(common::negated(&back, &v), "from locale {l}");
        }
        let node = cantus::__test::mpi_node_members().expect("the job started");
        // Past the node's largest rendezvous block: to another node still
        // one MPI message, read where it arrived; between the ranks of a
        // node in blocks' worth of fragments, copied back together.
        let big: Vec<f64> = (0..(3 << 17) + 5).map(|i| i as f64 - 7.5).collect();
        for l in 1..n {
            let (in_place, back) = cantus::on(l, InPlaceF64(big.clone().into()))
                .join()
                .unwrap();
            assert_eq!(
                in_place,
                !node.contains(&l),
                "3 MiB of f64 to locale {l}: whole over MPI, in pieces within a node"
            );
            assert!(common::negated(&back, &big), "3 MiB from locale {l}");
        }
        // As a plain `Vec`, both ways: encoded straight into its block
        // between the ranks of a node (rule S), through MPI otherwise.
        for l in 1..n {
            let before = cantus::__test::staged_frames();
            let (back, there) = cantus::on(l, NegateVec(v.clone())).join().unwrap();
            assert!(common::negated(&back, &v), "a Vec from locale {l}");
            let (_, after_there) = cantus::on(l, NegateVec(Vec::new())).join().unwrap();
            let staged = (
                cantus::__test::staged_frames() - before,
                after_there - there,
            );
            let want = u64::from(node.contains(&l));
            assert_eq!(staged, (want, want), "a Vec to locale {l}, staged or not");
        }
        // The same array through Chant, negated and sent back given up.
        for l in 1..n {
            cantus::begin_on(l, NegateBack { boss: chant::me() }).unwrap();
            let task = chant::recv(Source::Any, Tag::Is(HELLO)).source();
            chant::send_value(task, 2, cantus::Bulk::from(v.clone())).unwrap();
            let back: cantus::Bulk<f64> = chant::recv(Source::Task(task), Tag::Is(3))
                .into_decoded()
                .unwrap();
            assert!(back.is_in_place(), "1 MiB of f64 back in place from {l}");
            assert!(common::negated(&back, &v), "through Chant from locale {l}");
        }
        let calls: Vec<_> = (0..12u64)
            .map(|k| {
                let size = [70_000, 1 << 20, 3 << 20][k as usize % 3] + k as usize;
                let to = 1 + k as usize % (n - 1);
                (
                    k,
                    size,
                    cantus::on(to, DigestBulk(pattern(size).into(), size as u64 / 3)),
                )
            })
            .collect();
        for (k, size, c) in calls {
            let (h, back) = c.join().unwrap();
            assert_eq!(h, fnv(&pattern(size)), "call {k}'s argument");
            assert!(*back == pattern(size / 3), "call {k}'s result");
        }
    });
    rt.shutdown();
}

#[test]
fn large_messages_cross_ranks_whole() {
    on_ranks(
        "large_messages_cross_ranks_whole",
        &[2, 3],
        &[],
        large_messages_everywhere,
    );
}

/// Sends `messages` to the echo task `to` in one window, tagged from
/// `first_tag` in order, and checks that each comes back whole, in order.
fn echoed_in_window(to: chant::TaskId, first_tag: u32, messages: &[Vec<u8>], what: &str) {
    chant::window(|w| {
        for (i, m) in messages.iter().enumerate() {
            w.send(to, first_tag + i as u32, m).unwrap();
        }
    });
    for (i, sent) in messages.iter().enumerate() {
        let m = chant::recv(Source::Task(to), Tag::Any);
        assert_eq!(m.tag(), first_tag + i as u32, "order: {what}");
        assert!(
            m.bytes() == sent.as_slice(),
            "message {i} ({} bytes) changed: {what}",
            sent.len()
        );
    }
}

/// Chant messages of every size, in order, between a task of rank 0 and
/// an echoing task of every other rank.
fn chant_both_ways() {
    let rt = job();
    let n = cantus::num_locales();
    rt.block_on(|| {
        let me = chant::me();
        let echoes: Vec<_> = (1..n).map(|l| cantus::on(l, Echo { boss: me })).collect();
        // Each echo task says hello first, so its id is known.
        let mut ids = vec![None; n];
        for _ in 1..n {
            let m = chant::recv(Source::Any, Tag::Is(HELLO));
            ids[m.source().locale] = Some(m.source());
        }
        let sizes = [0usize, 1, 8, 4096, 100 << 10, 2 << 20];
        for (l, to) in ids.iter().enumerate().skip(1) {
            let to = to.expect("every echo said hello");
            // Several in flight at once: they come back in order.
            for (i, &size) in sizes.iter().enumerate() {
                chant::send(to, i as u32 + 1, &pattern(size + l)).unwrap();
            }
            for (i, &size) in sizes.iter().enumerate() {
                let m = chant::recv(Source::Task(to), Tag::Any);
                assert_eq!(m.tag(), i as u32 + 1, "order from locale {l}");
                assert!(
                    m.bytes() == pattern(size + l).as_slice(),
                    "{size} bytes via locale {l}"
                );
            }
            // In a window: large messages in flight together, small ones
            // sent behind them still come (and come back) in order.
            let mixed = [
                300usize << 10,
                1,
                100 << 10,
                0,
                70 << 10,
                8,
                4096,
                1 << 20,
                3,
            ];
            let messages: Vec<Vec<u8>> = mixed.iter().map(|&size| pattern(size + l)).collect();
            echoed_in_window(to, 100, &messages, &format!("mixed sizes via locale {l}"));
            // Large messages of one size in a window, four in flight and
            // received at once, each its own bytes: their receive buffers
            // are recycled at both ends (`comm/mpi/spare.rs`), and none
            // shows another's bytes.
            let same_size: Vec<Vec<u8>> = (0..12u8)
                .map(|i| {
                    pattern((600 << 10) + l)
                        .iter()
                        .map(|b| b.wrapping_add(i.wrapping_mul(37)))
                        .collect()
                })
                .collect();
            echoed_in_window(to, 500, &same_size, &format!("one size via locale {l}"));
            // Many short messages in a window: copied onto each other in
            // the sender's queue (up to 4 KiB a frame), held until 16 KiB
            // or 64 wait, cut at 64 KiB batches; longer ones between. All
            // come back whole and in order.
            let short: Vec<Vec<u8>> = (0..300)
                .map(|i| pattern([0, 1, 100, 1000, 3990, 4096, 4200, 9000][i % 8] + i + l))
                .collect();
            echoed_in_window(to, 1000, &short, &format!("short messages via locale {l}"));
            // A window's small messages may be held back to go together,
            // but any pass sends them: a receive inside the window gets
            // the echo of one sent in it.
            chant::window(|w| {
                w.send(to, 300, b"ping").unwrap();
                let m = chant::recv(Source::Task(to), Tag::Is(300));
                assert_eq!(m.bytes(), b"ping");
            });
            // So may its large ones (queued, to leave together at the
            // window's next wait), and any wait of the calling task sends
            // them too: a receive inside the window gets the echo of
            // each, of sizes on both sides of the window's 512 KiB.
            let large: Vec<Vec<u8>> = [200usize << 10, 70 << 10, 1 << 20]
                .iter()
                .map(|&size| pattern(size + l))
                .collect();
            chant::window(|w| {
                for (i, m) in large.iter().enumerate() {
                    w.send(to, 310 + i as u32, m).unwrap();
                    let back = chant::recv(Source::Task(to), Tag::Is(310 + i as u32));
                    assert!(
                        back.bytes() == m.as_slice(),
                        "a large message echoed inside its window via locale {l}"
                    );
                }
            });
            // A panic inside a window waits for its sends before it goes
            // on: the bytes arrive whole.
            let big = pattern((512 << 10) + l);
            let caught = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                chant::window(|w| {
                    w.send(to, 200, &big).unwrap();
                    w.send(to, 201, &big).unwrap();
                    panic!("a panic inside a window");
                })
            }));
            assert!(caught.is_err());
            for tag in [200, 201] {
                let m = chant::recv(Source::Task(to), Tag::Any);
                assert_eq!(m.tag(), tag);
                assert!(
                    m.bytes() == big.as_slice(),
                    "a window's bytes after its panic"
                );
            }
            chant::send(to, 0, &[]).unwrap();
        }
        for e in echoes {
            assert_eq!(
                e.join().unwrap(),
                (sizes.len() + 9 + 12 + 300 + 1 + 3 + 2) as u64
            );
        }
    });
    rt.shutdown();
}

/// Several tasks of rank 0 send windows of large and short messages to
/// one task of every other rank at once: each arrives whole, each
/// sender's in order.
fn chant_windows_at_once() {
    const SENDERS: usize = 4;
    let rt = job();
    let n = cantus::num_locales();
    rt.block_on(|| {
        let me = chant::me();
        for l in 1..n {
            let sink = cantus::on(
                l,
                Sink {
                    boss: me,
                    senders: SENDERS,
                },
            );
            let to = chant::recv(Source::Any, Tag::Is(HELLO)).source();
            cantus::coforall(SENDERS, |_| {
                let salt = chant::me().task as usize % 251;
                let messages: Vec<Vec<u8>> = WINDOW_SIZES
                    .iter()
                    .map(|&size| pattern(size + salt))
                    .collect();
                chant::window(|w| {
                    for (i, m) in messages.iter().enumerate() {
                        w.send(to, i as u32, m).unwrap();
                    }
                });
            });
            assert_eq!(sink.join().unwrap(), (SENDERS * WINDOW_SIZES.len()) as u64);
        }
    });
    rt.shutdown();
}

#[test]
fn chant_windows_from_many_tasks_at_once_arrive_whole_and_in_order() {
    on_ranks(
        "chant_windows_from_many_tasks_at_once_arrive_whole_and_in_order",
        &[2, 3],
        &[],
        chant_windows_at_once,
    );
}

/// Short Chant messages sent in windows (so in batches over MPI) and
/// kept by their receiver, some while later batches come in: each stays
/// whole; where the ranks talk through MPI, messages were kept where
/// they arrived, lent out of their batch.
fn chant_messages_kept() {
    const COUNT: usize = 300;
    let rt = job();
    let n = cantus::num_locales();
    rt.block_on(|| {
        let me = chant::me();
        let messages: Vec<Vec<u8>> = (0..2 * COUNT).map(kept_message).collect();
        for l in 1..n {
            let keeper = cantus::on(
                l,
                Keeper {
                    boss: me,
                    count: COUNT,
                },
            );
            let to = chant::recv(Source::Any, Tag::Is(HELLO)).source();
            for half in 0..2 {
                if half == 1 {
                    chant::recv(Source::Task(to), Tag::Is(HELLO));
                }
                chant::window(|w| {
                    let first = half * COUNT;
                    for (i, m) in messages[first..first + COUNT].iter().enumerate() {
                        w.send(to, (first + i) as u32, m).unwrap();
                    }
                });
            }
            let lent = keeper.join().unwrap();
            if !node_of(0, n).contains(&l) {
                assert!(
                    lent > 0,
                    "locale {l} received through MPI: some messages lent out of their batch"
                );
            }
        }
    });
    rt.shutdown();
}

#[test]
fn chant_messages_kept_where_they_arrived_stay_whole() {
    on_ranks(
        "chant_messages_kept_where_they_arrived_stay_whole",
        &[2, 3],
        &[],
        chant_messages_kept,
    );
}

#[test]
fn chant_messages_cross_ranks_in_order() {
    on_ranks(
        "chant_messages_cross_ranks_in_order",
        &[2, 3],
        &[],
        chant_both_ways,
    );
}

#[test]
fn the_global_address_space_works_across_ranks() {
    on_ranks(
        "the_global_address_space_works_across_ranks",
        &[2, 3, 4],
        &[],
        || {
            let rt = job();
            let n = cantus::num_locales() as u64;
            let sums = rt.block_on(|| cantus::pgas::spmd(GlobalWork(3)).unwrap());
            let each = 3 * n * (n - 1) / 2;
            assert_eq!(sums, vec![each * n; n as usize]);
            // One node: the shared memory (every segment mapped, the
            // collectives in memory); several: messages, with the node's
            // segments mapped.
            let one_node = node_of(0, n as usize).len() == n as usize;
            assert_eq!(
                cantus::__test::pgas_memory(),
                Some(if one_node { "shared" } else { "messages" })
            );
            // Its barrier, broadcast and reductions: in the node's memory,
            // or MPI's own collectives across nodes.
            assert_eq!(
                cantus::__test::pgas_collectives(),
                Some(if one_node { "memory" } else { "transport" })
            );
            rt.shutdown();
        },
    );
}

#[test]
fn balanced_work_is_stolen_across_ranks() {
    on_ranks(
        "balanced_work_is_stolen_across_ranks",
        &[2, 3, 4],
        &[],
        || {
            let rt = job();
            let n = cantus::num_locales();
            for (k, fib) in [(0u32, 0u64), (1, 1), (25, 75025)] {
                let out = rt
                    .block_on(|| {
                        // Held until another rank takes a piece: fib(25)
                        // moves whatever the schedule (`common::held`).
                        cantus::balance::Balance::new(Held::new(fib_program::Fib::with_cutoff(
                            k, 2,
                        )))
                        .units(64)
                        .run()
                    })
                    .unwrap();
                assert_eq!(out.result, fib, "fib({k}) on {n} ranks");
                let moved: u64 = out.locales.iter().map(|s| s.work_received).sum();
                if k == 25 {
                    assert!(
                        moved > 0,
                        "no work moved across {n} ranks: {:?}",
                        out.locales
                    );
                }
            }
            rt.shutdown();
        },
    );
}

cantus::splittable!(Held<fib_program::Fib>);
cantus::remote!(Where);

/// Answers where it ran, inside the poll (a user's inline call).
#[derive(Serialize, Deserialize)]
struct Where;
impl Remote for Where {
    type Output = usize;
    const INLINE: bool = true;
    fn run(self) -> usize {
        cantus::here()
    }
}

/// Issue 25's reproductions over MPI: an inline call that asks `here()`
/// sent 200 times to rank 1 while a balanced computation runs (its
/// pieces' polls run the call), and two computations at once (each
/// one's inline messages run in the other's pieces' polls). Nothing
/// panics on any rank.
#[test]
fn inline_calls_run_inside_balanced_pieces_across_ranks() {
    const TEST: &str = "inline_calls_run_inside_balanced_pieces_across_ranks";
    if is_child() {
        let rt = job();
        rt.block_on(|| {
            let (f, wheres) = cantus::join(
                || cantus::balance::run(fib_program::Fib::with_cutoff(25, 2)).unwrap(),
                || {
                    (0..200)
                        .map(|_| cantus::on(1, Where).join().unwrap())
                        .collect::<Vec<_>>()
                },
            );
            assert_eq!(f, 75025);
            assert!(wheres.iter().all(|&l| l == 1), "{wheres:?}");
            for _ in 0..5 {
                let (a, b) = cantus::join(
                    || cantus::balance::run(fib_program::Fib::with_cutoff(20, 2)),
                    || cantus::balance::run(fib_program::Fib::with_cutoff(21, 2)),
                );
                assert_eq!((a.unwrap(), b.unwrap()), (6765, 10946));
            }
        });
        rt.shutdown();
        return;
    }
    for n in [2, 3] {
        for (mode, nodes) in paths(n) {
            let (ok, stdout, stderr) = mpirun(TEST, n, &[], &path_env(mode, nodes));
            assert!(
                ok && !stderr.contains("panicked"),
                "{TEST} under mpirun -n {n}, progress {mode}, CANTUS_MPI_NODES {nodes:?}:\n\
                 {stdout}\n{stderr}"
            );
        }
    }
}

/// The names of this process's threads.
fn thread_names() -> Vec<String> {
    std::fs::read_dir("/proc/self/task")
        .unwrap()
        .filter_map(|t| std::fs::read_to_string(t.ok()?.path().join("comm")).ok())
        .map(|n| n.trim().to_string())
        .collect()
}

/// What a rank runs besides its workers, and how many workers.
#[derive(Serialize, Deserialize)]
struct Threads;
impl Remote for Threads {
    type Output = (usize, Vec<String>);
    fn run(self) -> (usize, Vec<String>) {
        (cantus::query::workers().unwrap(), thread_names())
    }
}

/// Each progress mode runs the threads it says: `inline` no MPI thread,
/// a helper, and as many workers as the rank's share of CPUs; `thread`
/// an MPI thread and one worker fewer (with a share of one CPU, one);
/// and `auto` on this small machine is `inline`. A bad value is refused.
#[test]
fn each_progress_mode_runs_the_threads_it_says() {
    const TEST: &str = "each_progress_mode_runs_the_threads_it_says";
    if is_child() {
        let mode = std::env::var("CANTUS_MPI_PROGRESS").unwrap_or_default();
        if mode == "bogus" {
            let e = cantus::Runtime::builder().build().err().expect("refused");
            assert_eq!(e.kind(), ErrorKind::InvalidConfig);
            let msg = e.to_string();
            assert!(
                msg.contains("CANTUS_MPI_PROGRESS") && msg.contains("auto, inline or thread"),
                "{msg}"
            );
            return;
        }
        let rt = job();
        let inline = mode != "thread";
        let cpus = std::thread::available_parallelism().unwrap().get();
        rt.block_on(|| {
            for l in 0..cantus::num_locales() {
                let (workers, names) = cantus::on(l, Threads).join().unwrap();
                let mpi = names.iter().filter(|n| *n == "cantus-mpi").count();
                let helper = names.iter().filter(|n| *n == "cantus-mpi-help").count();
                // (Open MPI's own threads take the name of the thread
                // that initialized MPI: the MPI thread's in `thread` mode.)
                assert_eq!(
                    (mpi > 0, helper),
                    if inline { (false, 1) } else { (true, 0) },
                    "locale {l}, progress {mode:?}: {names:?}"
                );
                // Each rank's share of this machine's CPUs (bound or not).
                let share = (cpus / cantus::num_locales()).max(1);
                let want = if inline { share } else { (share - 1).max(1) };
                assert_eq!(workers, want, "locale {l}, progress {mode:?}");
            }
        });
        rt.shutdown();
        return;
    }
    for mode in ["inline", "thread", "auto"] {
        let (ok, stdout, stderr) = mpirun(TEST, 2, &[], &[("CANTUS_MPI_PROGRESS", mode)]);
        assert!(ok, "progress {mode}:\n{stdout}\n{stderr}");
    }
    let (ok, stdout, stderr) = mpirun(TEST, 2, &[], &[("CANTUS_MPI_PROGRESS", "bogus")]);
    assert!(ok, "a bad mode:\n{stdout}\n{stderr}");
}

/// Workers of locale 1 that spin without polling, until told to stop.
static SPINNING: AtomicU64 = AtomicU64::new(0);
static RELEASED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Occupies every worker of its locale with a loop that never polls (up
/// to 60 s), until `Release` comes.
#[derive(Serialize, Deserialize)]
struct OccupyEveryWorker;
impl Remote for OccupyEveryWorker {
    type Output = bool;
    fn run(self) -> bool {
        let n = cantus::query::workers().unwrap();
        cantus::coforall(n, |_| {
            SPINNING.fetch_add(1, Ordering::SeqCst);
            let until = Instant::now() + Duration::from_secs(60);
            while !RELEASED.load(Ordering::SeqCst) && Instant::now() < until {
                std::hint::spin_loop();
            }
            SPINNING.fetch_sub(1, Ordering::SeqCst);
        });
        RELEASED.load(Ordering::SeqCst)
    }
}

/// How many workers spin, and their number, answered inside the poll.
#[derive(Serialize, Deserialize)]
struct HowManySpin;
impl Remote for HowManySpin {
    type Output = (u64, usize);
    const INLINE: bool = true;
    fn run(self) -> (u64, usize) {
        (
            SPINNING.load(Ordering::SeqCst),
            cantus::query::workers().unwrap(),
        )
    }
}

/// Ends `OccupyEveryWorker`, answered inside the poll.
#[derive(Serialize, Deserialize)]
struct Release;
impl Remote for Release {
    type Output = u64;
    const INLINE: bool = true;
    fn run(self) -> u64 {
        RELEASED.store(true, Ordering::SeqCst);
        SPINNING.load(Ordering::SeqCst)
    }
}

cantus::remote!(Threads, OccupyEveryWorker, HowManySpin, Release);

/// Inline progress: a locale whose every worker runs a task that never
/// polls still answers (its helper polls when no one has), so a call
/// made while they all spin is answered while they spin, not after.
#[test]
fn a_locale_whose_workers_never_poll_still_answers_inline() {
    const TEST: &str = "a_locale_whose_workers_never_poll_still_answers_inline";
    if is_child() {
        let rt = job();
        rt.block_on(|| {
            let busy = cantus::on(1, OccupyEveryWorker);
            // Answered by locale 1's helper once every worker spins.
            loop {
                let (spinning, workers) = cantus::on(1, HowManySpin).join().unwrap();
                if spinning as usize == workers {
                    break;
                }
                cantus::task::sleep(Duration::from_millis(5));
            }
            let spinning = cantus::on(1, Release).join().unwrap();
            assert!(spinning > 0, "answered while the workers spun");
            assert!(
                busy.join().unwrap(),
                "the spin ended by Release, not its cap"
            );
        });
        rt.shutdown();
        return;
    }
    // Locale 1 shares memory with locale 0, then not, then (3 ranks,
    // two nodes: {0, 1} and {2}) with locale 0 but not 2: the helper
    // hands on what its node's rings hold as it does MPI's arrivals.
    for (n, nodes) in [(2, None), (2, Some(2)), (3, Some(2))] {
        let (ok, stdout, stderr) = mpirun(TEST, n, &[], &path_env("inline", nodes));
        assert!(
            ok,
            "mpirun -n {n}, CANTUS_MPI_NODES {nodes:?}:\n{stdout}\n{stderr}"
        );
    }
}

/// A traced job over MPI: every rank writes its part into the one parts
/// directory whose random name rank 0 broadcast, so rank 0 merges them
/// all, and removes them.
#[test]
fn a_traced_job_merges_every_rank_s_part() {
    let test = "a_traced_job_merges_every_rank_s_part";
    if is_child() {
        let rt = job();
        let n = cantus::num_locales();
        rt.block_on(|| {
            for l in 0..n {
                assert_eq!(cantus::on(l, WhoAmI).join().unwrap().0, l);
            }
        });
        rt.shutdown();
        return;
    }
    // One node, and the mixed job ({0, 1} and {2}).
    for nodes in [None, Some(2)] {
        let path = std::env::temp_dir().join(format!(
            "cantus-mpi-trace-{}-{nodes:?}.json",
            std::process::id()
        ));
        let _ = std::fs::remove_file(&path);
        let mut env = vec![("CANTUS_TRACE", path.to_str().unwrap().to_string())];
        if let Some(k) = nodes {
            env.push(("CANTUS_MPI_NODES", k.to_string()));
        }
        let (ok, stdout, stderr) = mpirun(test, 3, &[], &env);
        assert!(ok, "{test}, nodes {nodes:?}, failed:\n{stdout}\n{stderr}");
        let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{e}: {stderr}"));
        let trace: serde_json::Value = serde_json::from_str(&text).expect("the trace is JSON");
        let mut locales: Vec<u64> = trace["traceEvents"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|e| e["ph"] == "M" && e["name"] == "process_name")
            .map(|e| e["pid"].as_u64().unwrap())
            .collect();
        locales.sort();
        assert_eq!(locales, [0, 1, 2], "every rank's part is merged: {stderr}");
        assert!(
            cantus::trace::parts_dirs(&path).is_empty(),
            "the parts are removed: {stderr}"
        );
        let _ = std::fs::remove_file(&path);
    }
}

/// Runs `test` under mpirun expecting the job to fail, in each progress
/// mode and on each path (every rank through MPI, one node through
/// shared memory, and with 3 or more ranks the mixed job); returns each
/// run's stderr (none in a rank). No rank outlives a failed job, and no
/// name of cantus's is left in `/dev/shm` (the node's region is an
/// anonymous file: `comm/mpi/node.rs`).
fn failing_job(test: &str, ranks: usize, env: &[(&str, &str)], body: impl FnOnce()) -> Vec<String> {
    if is_child() {
        body();
        return Vec::new();
    }
    let mut paths = vec![("inline", Some(ranks)), ("thread", None)];
    if ranks >= 3 {
        paths.push(("inline", Some(2)));
    }
    paths
        .into_iter()
        .map(|(mode, nodes)| {
            let mut env: Vec<(&str, String)> =
                env.iter().map(|&(k, v)| (k, v.to_string())).collect();
            env.extend(path_env(mode, nodes));
            let start = Instant::now();
            let (ok, _, stderr) = mpirun(test, ranks, &[], &env);
            assert!(
                !ok,
                "{test}, progress {mode}: the job should have failed:\n{stderr}"
            );
            assert!(
                start.elapsed() < Duration::from_secs(60),
                "{test}, progress {mode}: the job took {:?} to end",
                start.elapsed()
            );
            let left = ranks_left(test);
            assert!(
                left.is_empty(),
                "{test}, progress {mode}: ranks outlived the failed job: {left:?}"
            );
            // (Trace parts' directories, `cantus-trace-*`, belong to the
            // traced jobs of other tests that run meanwhile; these jobs
            // are not traced.)
            let named: Vec<_> = std::fs::read_dir("/dev/shm")
                .map(|d| {
                    d.filter_map(|e| e.ok()?.file_name().into_string().ok())
                        .filter(|n| {
                            n.to_ascii_lowercase().contains("cantus")
                                && !n.starts_with("cantus-trace-")
                        })
                        .collect()
                })
                .unwrap_or_default();
            assert!(named.is_empty(), "{test}: left in /dev/shm: {named:?}");
            stderr
        })
        .collect()
}

/// Processes still running this test binary for `test` (the ranks of
/// its jobs), other than this one: none may outlive a job's end.
fn ranks_left(test: &str) -> Vec<String> {
    let me = std::process::id().to_string();
    std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(|e| {
            let e = e.ok()?;
            let pid = e.file_name().into_string().ok()?;
            if pid == me || !pid.bytes().all(|b| b.is_ascii_digit()) {
                return None;
            }
            let cmd = std::fs::read(e.path().join("cmdline")).ok()?;
            let cmd = String::from_utf8_lossy(&cmd).replace('\0', " ");
            cmd.split_whitespace()
                .any(|a| a == test)
                .then(|| format!("{pid}: {cmd}"))
        })
        .collect()
}

#[test]
fn a_rank_killed_by_sigkill_ends_the_job() {
    let stderr = failing_job("a_rank_killed_by_sigkill_ends_the_job", 3, &[], || {
        let rt = job();
        rt.block_on(|| {
            assert_eq!(cantus::on(2, Add(1, 1)).join().unwrap(), 2);
            cantus::begin_on(1, Die(None)).unwrap();
            // Locale 1 is gone: the job ends under us (mpirun stops it).
            loop {
                let _ = cantus::on(2, Add(1, 1)).join();
                cantus::task::sleep(Duration::from_millis(10));
            }
        });
    });
    for stderr in stderr {
        assert!(
            stderr.contains("signal 9") || stderr.contains("Killed"),
            "{stderr}"
        );
    }
}

#[test]
fn a_rank_that_exits_early_ends_the_job() {
    let stderr = failing_job("a_rank_that_exits_early_ends_the_job", 2, &[], || {
        let rt = job();
        rt.block_on(|| {
            cantus::begin_on(1, Die(Some(3))).unwrap();
            loop {
                cantus::task::sleep(Duration::from_millis(10));
            }
        });
    });
    for stderr in stderr {
        assert!(
            stderr.contains("exit") || stderr.contains("status"),
            "{stderr}"
        );
    }
}

#[test]
fn a_panic_in_main_ends_the_job_with_its_message() {
    let stderr = failing_job(
        "a_panic_in_main_ends_the_job_with_its_message",
        3,
        &[],
        || {
            let rt = job();
            assert_eq!(rt.block_on(|| cantus::on(1, Add(2, 2)).join().unwrap()), 4);
            panic!("main gives up on locale {}", cantus::here());
        },
    );
    for stderr in stderr {
        assert!(stderr.contains("main gives up on locale 0"), "{stderr}");
    }
}

#[test]
fn cantus_locales_that_disagree_with_the_ranks_is_an_error() {
    let stderr = failing_job(
        "cantus_locales_that_disagree_with_the_ranks_is_an_error",
        2,
        &[("CANTUS_LOCALES", "3")],
        || {
            let e = cantus::Runtime::builder().build().err().expect("refused");
            assert!(e.to_string().contains("CANTUS_LOCALES=3"), "{e}");
            eprintln!("refused: {e}");
            std::process::exit(7);
        },
    );
    for stderr in stderr {
        assert!(stderr.contains("2 ranks"), "{stderr}");
    }
}

/// A variable no task of any locale ever fills.
static NEVER: std::sync::LazyLock<cantus::SyncVar<u64>> =
    std::sync::LazyLock::new(cantus::SyncVar::new);

/// Blocks its handler task forever on its locale's `NEVER`.
#[derive(Serialize, Deserialize)]
struct AwaitNever;
impl Remote for AwaitNever {
    type Output = u64;
    fn run(self) -> u64 {
        NEVER.read_fe()
    }
}
cantus::remote!(AwaitNever);

/// Every locale's tasks wait for something no locale will do: the
/// deadlock check across locales (`sched/sleep/README.md`) reports it and
/// ends the job, on every path (one node, every rank through MPI, the
/// mixed job), instead of the job hanging.
#[test]
fn a_deadlock_across_ranks_is_reported() {
    let stderr = failing_job(
        "a_deadlock_across_ranks_is_reported",
        3,
        &[("CANTUS_DEADLOCK_MS", "200")],
        || {
            let rt = job();
            rt.block_on(|| {
                for l in 1..cantus::num_locales() {
                    cantus::begin_on(l, AwaitNever).unwrap();
                }
                NEVER.read_fe();
            });
        },
    );
    for stderr in stderr {
        assert!(
            stderr.contains("cantus: deadlock across the job's 3 locales"),
            "{stderr}"
        );
    }
}

/// `CANTUS_MPI_NODES` must be the same on every rank (ranks that split
/// differently could not agree on who shares memory): refused at start on
/// every rank alike, naming the rank that differs.
#[test]
fn cantus_mpi_nodes_that_differ_across_ranks_is_an_error() {
    let stderr = failing_job(
        "cantus_mpi_nodes_that_differ_across_ranks_is_an_error",
        2,
        &[],
        || {
            let rank: usize = std::env::var("OMPI_COMM_WORLD_RANK")
                .expect("started by Open MPI's mpirun")
                .parse()
                .unwrap();
            // SAFETY: no other thread of this process reads or writes the
            // environment meanwhile (the harness waits for this test, the
            // only one it runs, and no runtime has started).
            unsafe { std::env::set_var("CANTUS_MPI_NODES", (rank + 1).to_string()) };
            let e = cantus::Runtime::builder().build().err().expect("refused");
            assert_eq!(e.kind(), ErrorKind::InvalidConfig);
            let msg = e.to_string();
            assert!(
                msg.contains("CANTUS_MPI_NODES is 1 on rank 0 but 2 on rank 1")
                    && msg.contains("mpirun -x"),
                "{msg}"
            );
            eprintln!("refused: {e}");
            std::process::exit(7);
        },
    );
    // (The first rank to exit ends the job: the other may be stopped
    // before it says so.)
    for stderr in stderr {
        assert!(stderr.contains("refused: "), "{stderr}");
    }
}

/// The builder's locale count is held to the ranks as the variable is
/// (it was once ignored under MPI).
#[test]
fn builder_locales_that_disagree_with_the_ranks_is_an_error() {
    let stderr = failing_job(
        "builder_locales_that_disagree_with_the_ranks_is_an_error",
        2,
        &[],
        || {
            let e = cantus::Runtime::builder()
                .locales(3)
                .build()
                .err()
                .expect("refused");
            assert_eq!(e.kind(), ErrorKind::InvalidConfig);
            let msg = e.to_string();
            assert!(
                msg.contains("Builder::locales(3)")
                    && msg.contains("started 2 ranks")
                    && msg.contains("drop Builder::locales"),
                "{msg}"
            );
            eprintln!("refused: {e}");
            std::process::exit(7);
        },
    );
    for stderr in stderr {
        assert!(stderr.contains("refused: "), "{stderr}");
    }
}

#[test]
fn mpi_initialized_by_the_program_without_multiple_is_refused() {
    on_ranks(
        "mpi_initialized_by_the_program_without_multiple_is_refused",
        &[2],
        &[],
        || {
            cantus::__test::init_mpi_for_test(false);
            let e = cantus::Runtime::builder().build().err().expect("refused");
            let msg = e.to_string();
            assert!(
                msg.contains("MPI_THREAD_FUNNELED") && msg.contains("MPI_THREAD_MULTIPLE"),
                "{msg}"
            );
            // A second runtime in this process is refused too.
            let e = cantus::Runtime::builder().build().err().expect("refused");
            assert!(e.to_string().contains("once per process"), "{e}");
            cantus::__test::finalize_mpi_for_test();
        },
    );
}
