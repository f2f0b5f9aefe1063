//! The scheduler's driver seam (`sched/driver/`) exercised by a test
//! driver under a whole runtime (hence here, with the composition root:
//! the tests use the layers above the scheduler): an in-process queue of
//! handler calls fed by outside threads. Floods of 10^6 handler calls while the
//! workers are busy, asleep, parked in the driver, and shutting down:
//! every call runs exactly once and no wake-up is lost (a lost one would
//! leave a call unrun and the test would time out with a message).

use crate::config::{Builder, WaitPolicy};
use crate::runtime::Runtime;
use crate::sched::driver::{Driver, DriverContext, DriverWaker};
use crossbeam_queue::SegQueue;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

type Handler = Box<dyn FnOnce() + Send>;

/// Most handlers one poll turns into tasks (a poll is bounded work).
const BATCH: usize = 256;

/// An in-process "transport": producers push handler calls; `poll` turns
/// them into tasks. `in_flight` counts queued calls plus open producers
/// (a producer still running may still send).
struct QueueDriver {
    queue: SegQueue<Handler>,
    queued: AtomicU64,
    producers: AtomicU64,
    /// Polls that handled something while no worker was idle.
    busy_polls: AtomicU64,
    parking: bool,
    /// The park token and its condition variable (parking variant).
    token: Mutex<bool>,
    arrived: Condvar,
}

impl QueueDriver {
    fn new(parking: bool) -> Arc<QueueDriver> {
        Arc::new(QueueDriver {
            queue: SegQueue::new(),
            queued: AtomicU64::new(0),
            producers: AtomicU64::new(0),
            busy_polls: AtomicU64::new(0),
            parking,
            token: Mutex::new(false),
            arrived: Condvar::new(),
        })
    }

    /// Publishes a call, then tells whoever listens: a parked worker
    /// through the driver's own signal (as a transport's futex word
    /// would), else a sleeping worker through the runtime's waker.
    fn send(&self, h: Handler, waker: &DriverWaker) {
        // Counted before it is visible, so `in_flight` never misses it.
        self.queued.fetch_add(1, Ordering::AcqRel);
        self.queue.push(h);
        if self.parking {
            self.unpark();
        } else {
            waker.wake();
        }
    }
}

impl Driver for QueueDriver {
    fn poll(&self, cx: &DriverContext<'_>) -> usize {
        let mut n = 0;
        while n < BATCH {
            let Some(h) = self.queue.pop() else { break };
            cx.spawn(h);
            // After the spawn is counted by the runtime (contract).
            self.queued.fetch_sub(1, Ordering::AcqRel);
            n += 1;
        }
        if n > 0 && cx.idle_workers() == 0 {
            self.busy_polls.fetch_add(1, Ordering::Relaxed);
        }
        n
    }

    fn ready(&self) -> bool {
        !self.queue.is_empty()
    }

    fn in_flight(&self) -> u64 {
        self.producers.load(Ordering::Acquire) + self.queued.load(Ordering::Acquire)
    }

    fn can_park(&self) -> bool {
        self.parking
    }

    fn park(&self, timeout: Option<Duration>) {
        let deadline = timeout.map(|t| Instant::now() + t);
        let mut token = self.token.lock().unwrap();
        while !*token && self.queue.is_empty() {
            token = match deadline {
                None => self.arrived.wait(token).unwrap(),
                Some(d) => {
                    let left = d.saturating_duration_since(Instant::now());
                    if left.is_zero() {
                        break;
                    }
                    self.arrived.wait_timeout(token, left).unwrap().0
                }
            };
        }
        *token = false;
    }

    fn unpark(&self) {
        *self.token.lock().unwrap() = true;
        self.arrived.notify_one();
    }
}

/// A producer's registration: counted in `in_flight` while it lives.
struct Producer(Arc<QueueDriver>);

impl Producer {
    fn open(d: &Arc<QueueDriver>) -> Producer {
        d.producers.fetch_add(1, Ordering::AcqRel);
        Producer(d.clone())
    }
}

impl Drop for Producer {
    fn drop(&mut self) {
        self.0.producers.fetch_sub(1, Ordering::AcqRel);
    }
}

fn runtime(driver: &Arc<QueueDriver>, policy: WaitPolicy) -> Runtime {
    let config = Builder::new()
        .ignore_environment()
        .workers(2)
        .wait_policy(policy)
        .deadlock_detection(Some(Duration::from_millis(300)))
        .resolve(&|_| None)
        .unwrap();
    let d: Arc<dyn Driver> = driver.clone();
    Runtime::start_with_driver(config, Some(d)).unwrap()
}

/// Feeds `n` counting handlers from an outside thread, pausing every
/// `burst` calls for `pause` (so the workers fall asleep in between).
fn feed(
    driver: &Arc<QueueDriver>,
    waker: DriverWaker,
    count: &Arc<AtomicU64>,
    n: u64,
    (burst, pause): (u64, Duration),
) -> std::thread::JoinHandle<()> {
    let producer = Producer::open(driver);
    let (d, c) = (driver.clone(), count.clone());
    std::thread::spawn(move || {
        let _producer = producer;
        for i in 0..n {
            let c = c.clone();
            d.send(
                Box::new(move || {
                    c.fetch_add(1, Ordering::Relaxed);
                }),
                &waker,
            );
            if burst > 0 && i % burst == burst - 1 {
                std::thread::sleep(pause);
            }
        }
    })
}

fn wait_for(count: &AtomicU64, n: u64, what: &str) {
    let t0 = Instant::now();
    while count.load(Ordering::Relaxed) < n {
        assert!(
            t0.elapsed() < Duration::from_secs(120),
            "{what}: only {} of {n} handler calls ran after 120 s (a lost wake-up?)",
            count.load(Ordering::Relaxed)
        );
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// Runs `body` in a child process of this test binary (one runtime per
/// process, and other unit tests keep theirs running), under a timeout.
fn in_child(test: &str, body: impl FnOnce()) {
    if std::env::var_os("CANTUS_DRIVER_CHILD").is_some() {
        body();
        return;
    }
    let exe = std::env::current_exe().unwrap();
    let mut child = std::process::Command::new(exe)
        .args([
            &format!("sched::driver::tests::{test}"),
            "--exact",
            "--nocapture",
            "--test-threads=1",
        ])
        .env("CANTUS_DRIVER_CHILD", "1")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("re-run the test binary");
    let mut err = child.stderr.take().unwrap();
    let reader = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = std::io::Read::read_to_string(&mut err, &mut s);
        s
    });
    let t0 = Instant::now();
    let status = loop {
        if let Some(st) = child.try_wait().unwrap() {
            break st;
        }
        if t0.elapsed() > Duration::from_secs(240) {
            let _ = child.kill();
            let _ = child.wait();
            panic!(
                "{test}: still running after 240 s; killed\n{}",
                reader.join().unwrap()
            );
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    let stderr = reader.join().unwrap();
    assert!(
        status.success(),
        "{test} failed in its child process:\n{stderr}"
    );
}

const FLOOD: u64 = 1_000_000;

#[test]
fn flood_while_workers_are_busy() {
    in_child("flood_while_workers_are_busy", || {
        let driver = QueueDriver::new(false);
        let rt = runtime(&driver, WaitPolicy::Hybrid);
        let count = Arc::new(AtomicU64::new(0));
        let feeder = feed(
            &driver,
            DriverWaker::new(rt.registry()),
            &count,
            FLOOD,
            (0, Duration::ZERO),
        );
        // Keep both workers busy with rounds of short tasks meanwhile:
        // they must poll between tasks (at a bounded rate), not only when
        // idle. (Handlers are tasks: they run when a worker picks a task,
        // as an owner between its own tasks or a thief from the bottom of
        // a deque; a task that never ends would starve them, as it would
        // any task: there is no preemption.)
        let done = AtomicBool::new(false);
        rt.block_on(|| {
            let t0 = Instant::now();
            while count.load(Ordering::Relaxed) < FLOOD / 2
                && t0.elapsed() < Duration::from_secs(60)
            {
                crate::par::coforall(64, |i| {
                    let mut x = i as u64;
                    for _ in 0..200 {
                        x = std::hint::black_box(x.wrapping_mul(31).wrapping_add(7));
                    }
                });
            }
            done.store(true, Ordering::Relaxed);
        });
        assert!(done.load(Ordering::Relaxed));
        assert!(
            driver.busy_polls.load(Ordering::Relaxed) > 0,
            "no poll ran while every worker was busy"
        );
        assert!(
            count.load(Ordering::Relaxed) >= FLOOD / 2,
            "busy workers did not serve the driver"
        );
        feeder.join().unwrap();
        wait_for(&count, FLOOD, "busy");
        rt.shutdown();
        assert_eq!(
            count.load(Ordering::Relaxed),
            FLOOD,
            "every call ran exactly once"
        );
    });
}

#[test]
fn bursts_wake_sleeping_workers() {
    in_child("bursts_wake_sleeping_workers", || {
        for policy in [WaitPolicy::Passive, WaitPolicy::Hybrid] {
            let driver = QueueDriver::new(false);
            let rt = runtime(&driver, policy);
            let count = Arc::new(AtomicU64::new(0));
            // Bursts of 1000 with pauses long enough for the workers to sleep.
            let n = 50_000;
            let feeder = feed(
                &driver,
                DriverWaker::new(rt.registry()),
                &count,
                n,
                (1000, Duration::from_millis(2)),
            );
            feeder.join().unwrap();
            wait_for(&count, n, "sleeping");
            rt.shutdown();
            assert_eq!(count.load(Ordering::Relaxed), n);
        }
    });
}

#[test]
fn a_worker_parked_in_the_driver_is_woken_by_arrivals() {
    in_child("a_worker_parked_in_the_driver_is_woken_by_arrivals", || {
        let driver = QueueDriver::new(true);
        let rt = runtime(&driver, WaitPolicy::Passive);
        let count = Arc::new(AtomicU64::new(0));
        // Single calls with pauses: every one finds all workers asleep, one
        // of them parked in the driver; nothing but the driver's own signal
        // (no DriverWaker) announces them.
        let n = 2_000;
        let feeder = feed(
            &driver,
            DriverWaker::new(rt.registry()),
            &count,
            n,
            (1, Duration::from_micros(200)),
        );
        feeder.join().unwrap();
        wait_for(&count, n, "parked");
        // And local work still wakes the worker parked in the driver.
        let v = crate::sync::SyncVar::new();
        rt.block_on(|| {
            crate::par::scope(|s| {
                s.spawn(|| v.write_ef(5u32));
            })
        });
        assert_eq!(v.read_fe(), 5);
        let flood = feed(
            &driver,
            DriverWaker::new(rt.registry()),
            &count,
            FLOOD,
            (0, Duration::ZERO),
        );
        flood.join().unwrap();
        wait_for(&count, n + FLOOD, "parked flood");
        rt.shutdown();
        assert_eq!(count.load(Ordering::Relaxed), n + FLOOD);
    });
}

#[test]
fn shutdown_waits_for_work_in_flight() {
    in_child("shutdown_waits_for_work_in_flight", || {
        let driver = QueueDriver::new(false);
        let rt = runtime(&driver, WaitPolicy::Hybrid);
        let count = Arc::new(AtomicU64::new(0));
        // Shut down while the producer is still sending: the producer counts
        // as in flight, so shutdown waits for it and for every call it sent.
        let feeder = feed(
            &driver,
            DriverWaker::new(rt.registry()),
            &count,
            FLOOD,
            (100_000, Duration::from_millis(20)),
        );
        rt.shutdown();
        assert_eq!(
            count.load(Ordering::Relaxed),
            FLOOD,
            "shutdown returned with calls unrun"
        );
        feeder.join().unwrap();
    });
}

#[test]
fn work_in_flight_is_not_a_deadlock() {
    in_child("work_in_flight_is_not_a_deadlock", || {
        let driver = QueueDriver::new(false);
        // Grace period 300 ms; the reply arrives after 1.2 s.
        let rt = runtime(&driver, WaitPolicy::Hybrid);
        let answer = Arc::new(crate::sync::SingleVar::<u32>::new());
        let producer = Producer::open(&driver);
        let (d, a) = (driver.clone(), answer.clone());
        let waker = DriverWaker::new(rt.registry());
        let late = std::thread::spawn(move || {
            let _producer = producer;
            std::thread::sleep(Duration::from_millis(1200));
            d.send(Box::new(move || a.write(42)), &waker);
        });
        // main blocks, every worker idles: but a message is in flight.
        let got = rt.block_on(|| *answer.read());
        assert_eq!(got, 42);
        late.join().unwrap();
        rt.shutdown();
    });
}
