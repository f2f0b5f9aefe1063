//! Starting, using and stopping a runtime.

#[cfg(not(loom))]
use crate::comm::driver::CommDriver;
#[cfg(not(loom))]
use crate::comm::job::Job;
use crate::config::{Builder, Config, Launch};
use crate::error::{Error, ErrorKind};
use crate::fiber::guard;
use crate::remote::engine::Engine;
use crate::sched::block::BlockKind;
use crate::sched::deque::Worker;
use crate::sched::worker::{pin_to, worker_main};
use crate::sched::{OutsideBlocked, Registry, WorkerLocal};
use process_turn::Turn;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::thread::JoinHandle;
use std::time::Duration;

#[cfg(all(test, not(loom)))]
mod driver_seam_tests;
mod process_turn;
mod stats_report;

/// A running cantus runtime: worker threads with their task queues. One
/// runs per process at a time (`build` while one runs fails with
/// [`ErrorKind::AlreadyRunning`], except on a test thread of `cargo test`,
/// where it waits for its turn: README, "Testing a program that uses
/// locales"); dropping it shuts it down (waiting for every task, detached
/// ones included).
///
/// ```
/// let rt = cantus::Runtime::builder().workers(2).build().unwrap();
/// let answer = rt.block_on(|| 6 * 7);
/// assert_eq!(answer, 42);
/// rt.shutdown();
/// ```
pub struct Runtime {
    registry: Arc<Registry>,
    threads: Vec<JoinHandle<()>>,
    /// Locale 0 of a job of several locales: its engine and its part of
    /// the job, used at shutdown.
    job: Option<Joined>,
    /// This process's turn to run a runtime, given back at the end of
    /// shutdown (`runtime/process_turn.rs`).
    turn: Option<Turn>,
    /// The thread that hosts worker 0 (`Builder::host_worker`), which
    /// must be the one that stops the runtime.
    host: Option<std::thread::ThreadId>,
}

/// A locale's engine and its part of the job.
struct Joined {
    engine: Arc<Engine>,
    #[cfg(not(loom))]
    job: Box<dyn Job>,
}

impl Builder {
    /// Starts the runtime. (It lives here, with the runtime it starts,
    /// so that the configuration below names no layer above it.)
    pub fn build(self) -> Result<Runtime, Error> {
        let config = self.resolve(&|name| std::env::var(name).ok())?;
        Runtime::start(config)
    }
}

impl Runtime {
    /// Starts a runtime with the default configuration, as overridden by
    /// `CANTUS_*` environment variables.
    pub fn new() -> Result<Runtime, Error> {
        Builder::new().build()
    }

    /// A builder for a configured runtime.
    pub fn builder() -> Builder {
        Builder::new()
    }

    pub(crate) fn start(config: Config) -> Result<Runtime, Error> {
        // Before anything process-wide is touched (the job, the heap).
        let turn = Turn::take()?;
        // The recorder asks the scheduler for the running task's id.
        crate::trace::set_task_ids(crate::query::current_task_id);
        // Settings of layers above the scheduler, validated with the rest.
        crate::remote::chant::configure(config.chant_task_polls);
        // Before any remote call can run: SPMD bodies are told apart.
        #[cfg(not(loom))]
        crate::pgas::attach();
        // A runtime alone, or a locale of a job (whatever its transport).
        let mut rt = if config.launch == Launch::Alone {
            Runtime::start_with_driver(config, None)?
        } else {
            Runtime::start_locale(config)?
        };
        rt.turn = Some(turn);
        Ok(rt)
    }

    /// Starts this process's locale of a job of several: locale 0 starts
    /// the others and returns once all said hello; the others serve until
    /// locale 0 orders shutdown, then exit the process (they never
    /// return).
    #[cfg(loom)]
    fn start_locale(_: Config) -> Result<Runtime, Error> {
        Err(Error::new(
            ErrorKind::Locale,
            "locales are not modelled under loom",
        ))
    }

    #[cfg(not(loom))]
    fn start_locale(mut config: Config) -> Result<Runtime, Error> {
        let table = crate::remote::handlers::table()?;
        // Every locale of a traced job writes into one parts directory,
        // named by a random number: locale 0's (a locale it starts is
        // handed it; over MPI, rank 0's is broadcast as the job starts).
        if config.trace.is_some() && config.trace_job == 0 {
            config.trace_job = crate::trace::new_job()?;
        }
        // Over MPI this also places `config` (its locale, the number of
        // locales, its CPUs).
        let job = crate::comm::job::start(&mut config)?;
        let here = config.here;
        let transport = job.transport();
        // Memory every locale maps, if the transport has it; else the
        // global address space works by messages.
        if let Err(e) = crate::pgas::install(
            &config,
            job.shared_memory(),
            job.node_memory(),
            job.collectives(),
        ) {
            job.abandon(&e);
            return Err(e);
        }
        let engine = Engine::new(transport.clone(), table);
        let driver = Arc::new(CommDriver::new(transport.clone(), engine.clone()));
        let mut rt = match Runtime::start_with_driver(config, Some(driver)) {
            Ok(rt) => rt,
            Err(e) => {
                crate::pgas::uninstall();
                job.abandon(&e);
                return Err(e);
            }
        };
        engine.attach(&rt.registry);
        transport.attach_poller(crate::sched::driver::DriverPoller::new(&rt.registry));
        crate::remote::count_messages(
            rt.registry.config.stats || rt.registry.config.trace.is_some(),
        );
        crate::remote::install(engine.clone());
        if here == 0 {
            if let Err(e) = engine.await_hellos() {
                crate::remote::uninstall();
                rt.stop();
                job.abandon(&e);
                return Err(e);
            }
            // Locales on other machines have other clocks: put their traces
            // on locale 0's.
            if rt.registry.config.trace.is_some() && job.clocks_may_differ() {
                crate::remote::clock::align_trace_clocks();
            }
            rt.job = Some(Joined { engine, job });
            Ok(rt)
        } else {
            if let Err(e) = engine.say_hello() {
                job.abort(&format!(
                    "cantus: locale {here} could not reach locale 0: {e}"
                ));
            }
            engine.await_shutdown();
            rt.stop();
            crate::remote::uninstall();
            job.finish();
            std::process::exit(0);
        }
    }

    /// Starts a runtime whose workers poll `driver` (the communication
    /// seam, `sched/driver/README.md`).
    pub(crate) fn start_with_driver(
        config: Config,
        driver: Option<Arc<dyn crate::sched::driver::Driver>>,
    ) -> Result<Runtime, Error> {
        let n = config.workers;
        #[cfg(not(loom))]
        if let Some(path) = &config.trace {
            crate::trace::start(
                path,
                config.here,
                config.locales,
                n,
                config.trace_events,
                config.trace_job,
            )?;
        }
        // Worker 0 hosted by this thread (Qthreads' main task of shepherd
        // 0, `sched/worker/host.rs`): for a runtime of one locale only (a
        // locale's driver is polled by workers that wait, which the host
        // does only when its program waits), and of two workers or more
        // (a lone hosted worker would run nothing while the host waits
        // outside the runtime: spinning on a queue, joining a thread).
        let hosted = config.host_worker && driver.is_none() && n >= 2;
        let deques: Vec<Worker<crate::sched::new_task::Queued>> =
            (0..n).map(|_| Worker::new()).collect();
        let stealers = deques.iter().map(|d| d.stealer()).collect();
        let registry = Arc::new(Registry::new(config, stealers, driver));
        Registry::install(&registry)?;
        guard::install_handler();
        let mut rt = Runtime {
            registry: registry.clone(),
            threads: Vec::with_capacity(n),
            job: None,
            turn: None,
            host: None,
        };
        for (i, deque) in deques.into_iter().enumerate() {
            let r = registry.clone();
            if hosted && i == 0 {
                crate::sched::worker::host::start(r, i, deque);
                rt.host = Some(std::thread::current().id());
                continue;
            }
            let cpu = (r.config.pin && !r.config.cpus.is_empty())
                .then(|| r.config.cpus[i % r.config.cpus.len()]);
            let spawned = std::thread::Builder::new()
                .name(format!("cantus-worker-{i}"))
                .spawn(move || {
                    if let Some(cpu) = cpu {
                        pin_to(cpu);
                    }
                    worker_main(r, i, deque);
                });
            match spawned {
                Ok(h) => rt.threads.push(h),
                Err(e) => {
                    rt.stop();
                    return Err(Error::new(
                        ErrorKind::Os,
                        format!("cantus could not start worker thread {i}: {e}"),
                    ));
                }
            }
        }
        Ok(rt)
    }

    /// Runs `f` as a task and returns its result; a panic in `f` is
    /// re-raised here. Called from inside a task, runs `f` directly.
    pub fn block_on<R, F>(&self, f: F) -> R
    where
        F: FnOnce() -> R + Send,
        R: Send,
    {
        if WorkerLocal::current().is_some_and(|l| l.in_task()) {
            return f();
        }
        crate::sched::outside_wait::long_wait(|| crate::par::run_as_task(&self.registry, f))
    }

    /// The registry (tests of the driver seam).
    #[cfg(test)]
    pub(crate) fn registry(&self) -> &Arc<Registry> {
        &self.registry
    }

    /// Number of worker threads.
    pub fn workers(&self) -> usize {
        self.registry.config.workers
    }

    /// The limit on threads this runtime may start (`CANTUS_MAX_THREADS`).
    pub fn max_threads(&self) -> usize {
        self.registry.config.max_threads
    }

    /// Waits for every task to finish, then stops the workers.
    pub fn shutdown(mut self) {
        self.stop();
    }

    /// The thread that hosts worker 0, if one does (`Builder::host_worker`).
    pub(crate) fn host_thread(&self) -> Option<std::thread::ThreadId> {
        self.host
    }

    fn stop(&mut self) {
        assert!(
            WorkerLocal::current().is_none(),
            "cantus: a runtime cannot be shut down from one of its own tasks"
        );
        assert!(
            self.host.is_none_or(|h| h == std::thread::current().id()),
            "cantus: a runtime whose worker 0 runs on the thread that started it must be shut \
             down by that thread"
        );
        let here = crate::remote::here();
        #[cfg_attr(loom, allow(unused_variables))]
        let job = self.job.take().inspect(|j| {
            // Every locale's work, and every message between them, is done
            // before any locale stops its workers.
            j.engine.terminate(&self.registry);
            #[cfg(not(loom))]
            j.job.shutdown_ordered();
            crate::remote::uninstall();
        });
        if !self.threads.is_empty() || self.host.is_some() {
            let _blocked = crate::sched::outside_wait::long_wait(|| {
                OutsideBlocked::enter(BlockKind::GroupWait, Arc::as_ptr(&self.registry) as usize)
            });
            match crate::sched::worker::host::hosted() {
                // Worker 0's tasks run on this thread: run them until all
                // are done.
                Some(local) => crate::sched::worker::host::run_until_quiescent(local),
                None => {
                    let mut pause = Duration::from_micros(10);
                    while !self.registry.quiescent() {
                        std::thread::sleep(pause);
                        pause = (pause * 2).min(Duration::from_millis(5));
                    }
                }
            }
        }
        self.registry.terminate.store(true, Ordering::Release);
        self.registry.sleep.notify_all();
        let mut worker_panicked = false;
        for h in self.threads.drain(..) {
            worker_panicked |= h.join().is_err();
        }
        if self.host.take().is_some() {
            crate::sched::worker::host::finish();
        }
        self.registry.blocking.shutdown();
        #[cfg(not(loom))]
        crate::trace::stop();
        Registry::uninstall();
        crate::remote::chant::at_shutdown(here);
        #[cfg(not(loom))]
        crate::pgas::uninstall();
        // Last of the job: the others end (locale 0 waits for them; over
        // MPI, every locale finalizes).
        #[cfg(not(loom))]
        if let Some(j) = job {
            j.job.finish();
        }
        if self.registry.config.stats {
            eprint!("{}", stats_report::stats_report(&self.registry));
        }
        // Locale 0 merges the trace, once every locale has ended.
        #[cfg(not(loom))]
        if let (Some(_), 0) = (&self.registry.config.trace, here) {
            crate::trace::finish();
        }
        // Last: everything process-wide is released.
        self.turn.take();
        if worker_panicked && !std::thread::panicking() {
            panic!("cantus: a worker thread panicked (a runtime bug); see the message above");
        }
    }
}

impl Drop for Runtime {
    fn drop(&mut self) {
        if !self.threads.is_empty()
            || Registry::current().is_some_and(|r| Arc::ptr_eq(&r, &self.registry))
        {
            self.stop();
        }
    }
}

/// Starts a runtime configured from the environment, runs `main` as its
/// first task, shuts the runtime down and returns `main`'s result.
///
/// ```
/// let sum = cantus::run(|| {
///     let (a, b) = cantus::join(|| 1 + 1, || 2 + 2);
///     a + b
/// }).unwrap();
/// assert_eq!(sum, 6);
/// ```
pub fn run<R, F>(main: F) -> Result<R, Error>
where
    F: FnOnce() -> R + Send,
    R: Send,
{
    let rt = Runtime::new()?;
    let r = rt.block_on(main);
    rt.shutdown();
    Ok(r)
}
