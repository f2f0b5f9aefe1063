//! Carriers: coroutines on pooled, guarded stacks that run tasks one
//! after another as plain calls until one blocks (`sched/README.md`).
//! Making, resuming, parking and retiring them, and the root stacks that
//! root tasks run on.

use super::*;

impl WorkerLocal {
    pub(super) fn new_carrier(&self, root: bool) -> u32 {
        let reg = &*self.registry;
        let c = &self.shared().counters;
        let (pooled, size) = if root {
            (self.root_stack.borrow_mut().take(), root_stack_size(reg))
        } else {
            (self.stacks.borrow_mut().pop(), reg.config.stack_size)
        };
        let stack = match pooled {
            Some(s) => s,
            None => match TaskStack::new(size, reg.page) {
                Ok(s) => {
                    bump(&c.stacks, 1);
                    s
                }
                Err(e) => {
                    eprintln!(
                        "cantus: cannot map a task stack of {} KiB ({e}); {} carriers are in use on worker {}. \
                         Lower CANTUS_STACK_SIZE, block fewer tasks at once, or raise vm.max_map_count. Aborting.",
                        size / 1024,
                        self.slots.borrow().len(),
                        self.index
                    );
                    std::process::abort();
                }
            },
        };
        bump(&c.carriers, 1);
        let guard = stack.guard();
        let slot = match self.free_slots.borrow_mut().pop() {
            Some(s) => s,
            None => {
                let mut slots = self.slots.borrow_mut();
                slots.push(Slot {
                    carrier: None,
                    guard: (0, 0),
                    root,
                    waiting: None,
                });
                (slots.len() - 1) as u32
            }
        };
        let carrier = Coroutine::with_stack(stack, carrier_main);
        let mut slots = self.slots.borrow_mut();
        slots[slot as usize] = Slot {
            carrier: Some(carrier),
            guard,
            root,
            waiting: None,
        };
        slot
    }

    pub(super) fn resume(&self, slot: u32) {
        let (mut carrier, guard) = {
            let mut slots = self.slots.borrow_mut();
            let s = &mut slots[slot as usize];
            let carrier = match s.carrier.take() {
                Some(c) => c,
                // Back from a blocking call (`blocking_call.rs`).
                None => self.registry.blocking.take_home(self.index, slot),
            };
            (carrier, s.guard)
        };
        guard::set_running(guard, self.task_id.get(), self.stack_size_of(slot));
        // The carrier learns its slot here (it may have come from another
        // worker: `migrate.rs`).
        self.current_slot.set(slot);
        let result = carrier.resume(Resume::Run);
        self.current_slot.set(NO_SLOT);
        guard::set_running((0, 0), 0, 0);
        match result {
            CoroutineResult::Yield(Suspend::Offload(errno)) => self.send_away(carrier, slot, errno),
            CoroutineResult::Yield(Suspend::Migrate(to)) => self.send_migrant(carrier, slot, to),
            CoroutineResult::Yield(why) => {
                self.slots.borrow_mut()[slot as usize].carrier = Some(carrier);
                match why {
                    Suspend::Idle => self.park_idle(slot),
                    Suspend::Blocked => {}
                    Suspend::Yielded => self.yielded.borrow_mut().push_back(slot),
                    Suspend::Sleep(deadline) => {
                        self.timers.borrow_mut().push(Reverse((deadline, slot)))
                    }
                    Suspend::Offload(_) | Suspend::Migrate(_) | Suspend::Home => {
                        unreachable!("handled above / only on a blocking-call thread")
                    }
                }
            }
            CoroutineResult::Return(()) => self.recycle(carrier, slot),
        }
    }

    pub(super) fn stack_size_of(&self, slot: u32) -> usize {
        if self.slots.borrow()[slot as usize].root {
            root_stack_size(&self.registry)
        } else {
            self.registry.config.stack_size
        }
    }

    pub(super) fn park_idle(&self, slot: u32) {
        if self.slots.borrow()[slot as usize].root {
            if self.idle_root.get().is_none() {
                self.idle_root.set(Some(slot));
                return;
            }
            let carrier = self.slots.borrow_mut()[slot as usize]
                .carrier
                .take()
                .expect("idle carrier");
            return self.retire(carrier, slot);
        }
        let mut idle = self.idle.borrow_mut();
        if idle.len() < IDLE_CARRIERS {
            idle.push(slot);
            return;
        }
        drop(idle);
        let carrier = self.slots.borrow_mut()[slot as usize]
            .carrier
            .take()
            .expect("idle carrier");
        self.retire(carrier, slot);
    }

    /// Finishes an idle carrier and keeps or frees its stack.
    pub(super) fn retire(&self, mut carrier: Carrier, slot: u32) {
        match carrier.resume(Resume::Exit) {
            CoroutineResult::Return(()) => self.recycle(carrier, slot),
            CoroutineResult::Yield(_) => unreachable!("an exiting carrier returns"),
        }
    }

    pub(super) fn recycle(&self, carrier: Carrier, slot: u32) {
        let stack = carrier.into_stack();
        let root = std::mem::replace(&mut self.slots.borrow_mut()[slot as usize].root, false);
        if root {
            // Root stacks are not measured (they are the program's main
            // stack, not a task's) and never mix with the task pool.
            let mut keep = self.root_stack.borrow_mut();
            if keep.is_none() {
                *keep = Some(stack);
            }
        } else {
            let resident = stack.resident_bytes(self.registry.page);
            self.max_resident.set(self.max_resident.get().max(resident));
            let mut stacks = self.stacks.borrow_mut();
            if stacks.len() < POOLED_STACKS {
                stacks.push(stack);
            }
        }
        self.free_slots.borrow_mut().push(slot);
    }

    pub(super) fn start(&self, task: Task) {
        self.handoff.set(Some(task));
        let slot = self
            .idle
            .borrow_mut()
            .pop()
            .unwrap_or_else(|| self.new_carrier(false));
        self.resume(slot);
    }

    /// Starts a root task on a carrier with a root stack.
    pub(super) fn start_root(&self, task: Task) {
        self.handoff.set(Some(task));
        let slot = self
            .idle_root
            .take()
            .unwrap_or_else(|| self.new_carrier(true));
        self.resume(slot);
    }
}

/// A carrier's body: runs tasks until none is left, then parks idle
/// until its worker resumes it (or tells it to exit). It looks its worker
/// up (the worker resuming it set its slot, `resume`), and again after a
/// task that migrated (`migrate.rs`) or whenever it was parked: a carrier
/// ends up on the worker its last task moved to.
pub(super) fn carrier_main(y: &Yielder<Resume, Suspend>, input: Resume) {
    if input == Resume::Exit {
        return;
    }
    loop {
        let mut local = migrate::current_afresh().expect("a carrier runs on a worker");
        local.yielder.set(y);
        let mut home = migrate::here();
        while let Some(task) = local.find_task() {
            // Finishes held for another group are made before this task
            // starts (`deferred.rs`). Only here, not in `run_task` (where
            // the check cost `spawn_coforall` 16%): a join that runs tasks
            // inline (`par/join.rs`) does so inside a task this loop
            // started, so anything held then waits behind a task of its
            // own group that has yet to report, which the rule allows.
            local.finish_deferred_unless(task.group());
            local.run_task(task);
            if migrate::moved_from(home) {
                local = migrate::current_afresh().expect("a migrated carrier runs on a worker");
                local.yielder.set(y);
                home = migrate::here();
            }
            if local.resumable_pending() {
                break;
            }
        }
        // Nothing left to run: finishes held while its tasks ran are
        // made before the worker goes on (`deferred.rs`).
        local.finish_deferred_now();
        if y.suspend(Suspend::Idle) == Resume::Exit {
            return;
        }
    }
}

/// Usable size of a root stack: `ROOT_STACK_SIZE`, or the task stack size
/// if that is larger.
pub(super) fn root_stack_size(reg: &Registry) -> usize {
    ROOT_STACK_SIZE.max(reg.config.stack_size)
}
