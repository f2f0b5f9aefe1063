//! The idle loop: spin with backoff, then yield, then sleep per the wait
//! policy (`sleep/README.md`), and answer deadlock-report requests.

use super::*;

impl WorkerLocal {
    /// Adds this worker's blocked tasks to a requested deadlock report.
    pub(crate) fn answer_report(&self) {
        let reg = &*self.registry;
        let gen_now = reg.report_gen.load(Ordering::Acquire);
        if gen_now == self.report_seen.get() {
            return;
        }
        self.report_seen.set(gen_now);
        let mine: Vec<String> = self
            .slots
            .borrow()
            .iter()
            .filter_map(|s| s.waiting)
            .map(|(id, addr, kind)| {
                format!(
                    "task {id} (worker {}): {}",
                    self.index,
                    crate::sched::block::describe_wait(kind, addr)
                )
            })
            .collect();
        let mut r = reg.report.lock().unwrap_or_else(|e| e.into_inner());
        r.lines.extend(mine);
        r.answered += 1;
    }

    /// Spins, then sleeps, per the wait policy, until there may be work.
    pub(super) fn idle_wait(&self) {
        let reg = &*self.registry;
        let c = &self.shared().counters;
        c.idle.store(true, Ordering::Relaxed);
        reg.idle.enter(self.index);
        crate::trace::record(crate::trace::kind::IDLE_BEGIN, 0, 0, 0, 0);
        let budget = match reg.config.wait_policy {
            WaitPolicy::Active => u32::MAX,
            _ => reg.config.spin,
        };
        let mut spins = 0u32;
        let mut backoff = 1u32;
        let workers = reg.workers.len();
        let mut victim = self.index;
        loop {
            self.answer_report();
            // Disabled: wait for its own work only (read each round, so
            // that enabling it, which wakes it, takes effect).
            let disabled = self.disabled();
            // Leaves only for program work: a poll that took only control
            // frames (a deadlock probe) counts 0, and a frame still in the
            // driver is taken by the next round's poll, not by leaving
            // (`has_work_probing` ignores the driver). So the idle-entry
            // counts stay still while locale 0's deadlock waves come and
            // go (`sleep/README.md`, "Deadlock detection across locales").
            // `ready` first: a few loads, where a poll takes the poll
            // token (a read-modify-write on a line every worker touches).
            if crate::sched::driver::ready(reg) && crate::sched::driver::poll(reg) > 0 {
                break;
            }
            victim = (victim + 1) % workers;
            let work = if disabled {
                self.has_own_work()
            } else {
                self.has_work_probing(victim)
            };
            if work || reg.terminate.load(Ordering::Acquire) || self.until_met() {
                break;
            }
            // While an outside thread waits for a short operation (e.g.
            // `main` waiting for a forall), a hybrid worker sleeps after a
            // short spin: its spinning would take the core the outside
            // thread needs to notice the end of its wait (seed 000, 7.3:
            // STREAM vs STREAM-EP). `active` keeps spinning, as asked; the
            // whole-program wait of `block_on`/`run` does not count.
            let budget = if reg.config.wait_policy == WaitPolicy::Hybrid
                && reg.outside.prompt.load(Ordering::Relaxed) > 0
            {
                budget.min(OUTSIDE_WAIT_SPIN)
            } else {
                budget
            };
            if spins < budget {
                // Back off between polls: every poll reads the other
                // workers' deque ends, and polling them nonstop makes each
                // push and pop of a busy worker miss in its cache. Once
                // backed off fully, give the core away between polls
                // (`sched_yield`): a thread that was just woken (an
                // outside thread whose `block_on` finished, say) may be
                // queued on this core, and a spinning worker would keep it
                // off the core until the next scheduler tick (4 ms).
                spins = spins.saturating_add(1);
                // A host's wait checks for a deadlock while its worker
                // spins too (an `active` worker never sleeps).
                if spins % 1024 == 0 && matches!(self.until.get(), host::Until::Woken(_)) {
                    self.host_nap();
                }
                // A driver with a thread of its own (MPI) may share this
                // core: then give the core away between polls from the
                // start.
                if backoff >= IDLE_BACKOFF || reg.progress_thread {
                    std::thread::yield_now();
                } else if reg.driver.is_some() {
                    // An arrival ends the backoff at once.
                    for _ in 0..backoff {
                        std::hint::spin_loop();
                        if crate::sched::driver::ready(reg) {
                            break;
                        }
                    }
                    backoff *= 2;
                } else {
                    for _ in 0..backoff {
                        std::hint::spin_loop();
                    }
                    backoff *= 2;
                }
                continue;
            }
            let mut timeout = self
                .timers
                .borrow()
                .peek()
                .map(|Reverse((d, _))| d.saturating_duration_since(Instant::now()));
            // A hosted worker's loop returns to its host's wait: sleep no
            // longer than that wait allows (`host.rs`).
            if self.hosted.get() {
                if let Some(nap) = self.host_nap() {
                    timeout = Some(timeout.map_or(nap, |t| t.min(nap)));
                }
            }
            bump(&c.parks, 1);
            crate::trace::record(crate::trace::kind::SLEEP_BEGIN, 0, 0, 0, 0);
            let has_work = || {
                (if disabled {
                    self.has_own_work()
                } else {
                    self.has_work()
                }) || reg.terminate.load(Ordering::Acquire)
                    || reg.report_gen.load(Ordering::Acquire) != self.report_seen.get()
                    || self.until_met()
            };
            // One sleeping worker at a time parks in the driver (when it
            // can park), so that whenever every worker sleeps, an arrival
            // wakes one directly (`driver/README.md`).
            if reg.driver.as_ref().is_some_and(|d| d.can_park())
                && reg
                    .driver_parked
                    .compare_exchange(false, true, Ordering::AcqRel, Ordering::Relaxed)
                    .is_ok()
            {
                let woke = reg.sleep.sleep_in(self.index, has_work, timeout);
                reg.driver_parked.store(false, Ordering::Release);
                if woke == crate::sched::sleep::Woke::Notified {
                    bump(&c.woken, 1);
                }
            } else if reg.sleep.sleep(self.index, has_work, timeout)
                == crate::sched::sleep::Woke::Notified
            {
                bump(&c.woken, 1);
            }
            crate::trace::record(crate::trace::kind::SLEEP_END, 0, 0, 0, 0);
            let work = if disabled {
                self.has_own_work()
            } else {
                self.has_task_work()
            };
            if work || reg.terminate.load(Ordering::Acquire) || self.until_met() {
                break;
            }
            // Woken for a frame in the driver (the next round polls it),
            // a report request, or nothing: spin again before sleeping.
            spins = 0;
            backoff = 1;
        }
        reg.idle.leave();
        c.idle.store(false, Ordering::Relaxed);
        crate::trace::record(crate::trace::kind::IDLE_END, 0, 0, 0, 0);
    }
}
