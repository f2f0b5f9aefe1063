//! A task not yet started: what sits in deques and the injector.
//!
//! A `Task` is four machine words: a function pointer, the identity of the
//! end count it reports to (so a waiter can recognise its own group's
//! tasks on top of its deque and run them itself), and an inline payload
//! of [`INLINE_WORDS`] words. Closures that fit the payload are stored in
//! it: spawning them allocates nothing (seed 002, argument bundles).
//! Larger closures are boxed. Keeping the task small matters: it is copied
//! into and out of a deque on every spawn.
//!
//! Every word of a task is initialized (the deque copies it word by word
//! with atomic stores, `deque/README.md`): constructors fill both payload
//! words, and a closure stored inline has its words *frozen* ([`freeze`])
//! so that padding bytes inside it become ordinary (arbitrary) bytes. In a
//! deque a task sits as a [`Queued`]: the same four words, `Copy`.
//!
//! What happens after the closure ran is the task's [`Completion`]: report
//! a detached task's panic here, or (completions defined in `par/`) count a
//! group task finished, recording its panic for the waiter. The closure itself captures none of that, so the
//! whole payload is the user's.

use super::deque::Element;
use crossbeam_utils::CachePadded;
use std::any::Any;
use std::mem::{ManuallyDrop, MaybeUninit, align_of, size_of};
use std::panic::{self, AssertUnwindSafe};
use std::ptr;
use std::sync::atomic::{AtomicUsize, Ordering};

/// Payload capacity in machine words.
pub(crate) const INLINE_WORDS: usize = 2;

pub(crate) type Payload = [MaybeUninit<usize>; INLINE_WORDS];

/// What the vtable function is asked to do with the payload.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Action {
    /// Run the task (consumes the payload).
    Run,
    /// Drop the payload without running (the runtime is being torn down).
    Drop,
}

/// `unsafe fn(payload, group, action)`: the task's code. Contract: called
/// exactly once per task, with the payload and group its constructor gave.
pub(crate) type VTable = unsafe fn(*mut Payload, *const (), Action);

pub(crate) struct Task {
    vtable: VTable,
    group: *const (),
    payload: Payload,
}

// SAFETY: every constructor requires the captured data to be Send (or is
// unsafe and states that contract), so moving the task to another worker
// thread is sound.
unsafe impl Send for Task {}

/// What runs after a closure task's body.
pub(crate) trait Completion {
    /// The body finished (`Err` holds its panic).
    ///
    /// # Safety
    /// `group` is the pointer the task was built with.
    unsafe fn finished(group: *const (), result: Result<(), Box<dyn Any + Send>>);
    /// The task was dropped unrun: by default, it finished with the
    /// panic [`UNRUN_AT_SHUTDOWN`], so whoever waits for it learns why.
    ///
    /// # Safety
    /// As for `finished`.
    unsafe fn dropped(group: *const ()) {
        // SAFETY: forwarded contract.
        unsafe { Self::finished(group, Err(Box::new(UNRUN_AT_SHUTDOWN))) }
    }
}

/// The panic payload of a task dropped unrun when the runtime shut down.
pub(crate) const UNRUN_AT_SHUTDOWN: &str = "cantus: the runtime shut down before this task ran";

/// A detached task (`begin`): a panic is reported and counted; nothing
/// waits for it.
pub(crate) enum Detached {}

impl Completion for Detached {
    unsafe fn finished(_: *const (), result: Result<(), Box<dyn Any + Send>>) {
        if result.is_err() {
            if let Some(local) = super::WorkerLocal::current() {
                local.note_detached_panic();
                eprintln!(
                    "cantus: detached task {} panicked (message above); the runtime keeps running",
                    local.current_task_id().unwrap_or(0)
                );
            }
        }
    }
    unsafe fn dropped(_: *const ()) {}
}

impl Task {
    /// The task's group word: the end count it reports to (null for
    /// detached tasks), or what its constructor put there (a plain
    /// Qthreads fork's return location).
    #[inline]
    pub(crate) fn group(&self) -> *const () {
        self.group
    }

    /// A task from raw parts.
    ///
    /// # Safety
    /// `vtable` must accept `payload` and `group` under its contract, and
    /// whatever they refer to must be safe to use from any worker thread
    /// until the vtable has run. Every byte of `payload` must be
    /// initialized (the deque copies it as words).
    pub(crate) unsafe fn from_raw(vtable: VTable, group: *const (), payload: Payload) -> Task {
        Task {
            vtable,
            group,
            payload,
        }
    }

    /// A task running `f`, then `C`'s completion; `f` is stored inline if
    /// it fits, boxed otherwise.
    ///
    /// # Safety
    /// Everything `f` borrows must outlive the task's execution (for
    /// `F: 'static` this holds trivially), and `group` must satisfy `C`'s
    /// contract.
    pub(crate) unsafe fn closure<F: FnOnce() + Send, C: Completion>(
        f: F,
        group: *const (),
    ) -> Task {
        let mut payload: Payload = [MaybeUninit::new(0); INLINE_WORDS];
        if CAN_FREEZE
            && size_of::<F>() <= size_of::<Payload>()
            && align_of::<F>() <= align_of::<Payload>()
        {
            // SAFETY: F fits the payload in size and alignment (checked above).
            unsafe { ptr::write(payload.as_mut_ptr().cast::<F>(), f) };
            // F may have padding, which the write left uninitialized.
            let words = payload.as_mut_ptr().cast::<*mut ()>();
            for i in 0..INLINE_WORDS {
                // SAFETY: word i is in bounds and word-aligned; `freeze`
                // reads it and the result is written back in place, as a
                // pointer so that a pointer stored in F keeps provenance.
                unsafe { words.add(i).write(freeze(words.add(i).cast_const().cast())) };
            }
            // SAFETY: call_inline::<F, C> reads exactly the F written above
            // (freezing keeps every initialized byte, pointer provenance
            // included, and only gives padding a value).
            unsafe { Task::from_raw(call_inline::<F, C>, group, payload) }
        } else {
            payload[0] = MaybeUninit::new(Box::into_raw(Box::new(f)) as usize);
            // SAFETY: call_boxed::<F, C> reads the Box<F> pointer written above.
            unsafe { Task::from_raw(call_boxed::<F, C>, group, payload) }
        }
    }

    /// A detached task running `f` (a panic is reported, not propagated).
    ///
    /// # Safety
    /// As for [`Task::closure`].
    pub(crate) unsafe fn from_closure<F: FnOnce() + Send>(f: F, group: *const ()) -> Task {
        // SAFETY: forwarded contract; Detached ignores `group`.
        unsafe { Task::closure::<F, Detached>(f, group) }
    }

    /// Runs the task, consuming it.
    #[inline]
    pub(crate) fn run(self) {
        let mut me = ManuallyDrop::new(self);
        // SAFETY: the vtable is called exactly once (the task is consumed
        // and its Drop is suppressed), with its constructor's arguments.
        unsafe { (me.vtable)(&mut me.payload, me.group, Action::Run) }
    }
}

/// A task as it sits in a deque: its four words, all initialized, and
/// `Copy`, so the deque can copy it word by word. A `Queued` owns its task
/// the way a `Task` does, but without a destructor: whoever takes one out
/// of a deque turns it back into a `Task` exactly once
/// ([`Queued::into_task`]) or, for a job it recognises as its own, calls
/// the job directly and lets the `Queued` go.
#[derive(Clone, Copy)]
#[repr(C)]
pub(crate) struct Queued {
    vtable: VTable,
    group: *const (),
    payload: [*mut (); INLINE_WORDS],
}

// SAFETY: a Queued is a Task in transit; Task is Send (see there).
unsafe impl Send for Queued {}
// SAFETY: four pointer-sized fields (a function pointer and three raw
// pointers), so no padding; every constructor path (`Task::into_queued`)
// copies a task whose words are all initialized (Task's invariant).
unsafe impl Element for Queued {}

impl Task {
    /// The task as deque words; it is not dropped.
    #[inline(always)]
    pub(crate) fn into_queued(self) -> Queued {
        let me = ManuallyDrop::new(self);
        let words = me.payload.as_ptr().cast::<*mut ()>();
        Queued {
            vtable: me.vtable,
            group: me.group,
            // SAFETY: the payload is INLINE_WORDS initialized words (Task's
            // invariant, kept by every constructor), read as pointers so
            // that a pointer stored there keeps its provenance.
            payload: std::array::from_fn(|i| unsafe { words.add(i).read() }),
        }
    }
}

/// The code of the tasks that thieves take in batches (0: none yet): a
/// plain Qthreads fork's (`ffi/qthread/spawn.rs`), registered by the C
/// ABI, which lies above this layer. Such a task is never popped back by
/// its forker (its result goes to a full/empty word or a sinc), and a
/// program forks it in loops, many at a time: taken one steal each, the
/// forker's deque is the one line every idle worker fights over
/// (`deque/README.md`, "Batch steals"). Every other task is taken one at
/// a time: the oldest of a recursion's joins is already the largest
/// piece, and taking the younger ones too would leave its owner's joins
/// waiting on a thief instead of popping their jobs back.
///
/// On a line of its own: every steal reads it, and a static written
/// often beside it would make each of those reads a miss.
static BATCHED_CODE: CachePadded<AtomicUsize> = CachePadded::new(AtomicUsize::new(0));

/// Registers `code` as the code of tasks stolen in batches (see
/// [`BATCHED_CODE`]); one kind at a time, the last registered.
pub(crate) fn steal_in_batches(code: VTable) {
    if BATCHED_CODE.load(Ordering::Relaxed) != code as usize {
        BATCHED_CODE.store(code as usize, Ordering::Relaxed);
    }
}

impl Queued {
    /// The end count this task reports to (null for detached tasks).
    #[inline]
    pub(crate) fn group(&self) -> *const () {
        self.group
    }

    /// Whether thieves take this task in a batch with the ones queued
    /// after it ([`steal_in_batches`]). A policy, not a rule: whatever the
    /// answer, each task is taken once.
    #[inline]
    pub(crate) fn stolen_in_batches(&self) -> bool {
        self.vtable as usize == BATCHED_CODE.load(Ordering::Relaxed)
    }

    /// The task again.
    ///
    /// # Safety
    /// At most one `Task` may be made from the `Queued` of one
    /// [`Task::into_queued`] (the copies a deque makes included).
    #[inline(always)]
    pub(crate) unsafe fn into_task(self) -> Task {
        let mut payload: Payload = [MaybeUninit::new(0); INLINE_WORDS];
        let words = payload.as_mut_ptr().cast::<*mut ()>();
        for (i, w) in self.payload.into_iter().enumerate() {
            // SAFETY: word i of the payload is in bounds and word-aligned;
            // written as a pointer to keep its provenance.
            unsafe { words.add(i).write(w) };
        }
        Task {
            vtable: self.vtable,
            group: self.group,
            payload,
        }
    }
}

/// Whether [`freeze`] is available on this target. Where it is not,
/// every closure task is boxed, so no payload holds uninitialized bytes.
const CAN_FREEZE: bool = cfg!(any(target_arch = "x86_64", target_arch = "aarch64"));

/// The one-word load instruction `freeze` runs.
#[cfg(target_arch = "x86_64")]
macro_rules! load_word {
    () => {
        "mov {out}, qword ptr [{p}]"
    };
}
#[cfg(target_arch = "aarch64")]
macro_rules! load_word {
    () => {
        "ldr {out}, [{p}]"
    };
}

/// The word at `p`, with any uninitialized byte in it given an arbitrary
/// value (LLVM's `freeze`): a load the compiler cannot see through.
/// Initialized bytes come back unchanged, a pointer's provenance
/// included, as with a `ptr::read` of a pointer.
///
/// # Safety
/// `p` points to a live, word-aligned word.
#[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
#[inline(always)]
unsafe fn freeze(p: *const MaybeUninit<usize>) -> *mut () {
    let out: *mut ();
    // SAFETY: the assembly loads one aligned word from `p` (caller's
    // contract); it writes no memory and touches no flags or stack.
    // Loading uninitialized memory is defined at the machine level, and an
    // asm output is always an initialized value.
    unsafe {
        std::arch::asm!(
            load_word!(),
            p = in(reg) p,
            out = lateout(reg) out,
            options(nostack, readonly, preserves_flags, pure)
        );
    }
    out
}

/// Never called: every closure is boxed where `CAN_FREEZE` is false.
#[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
unsafe fn freeze(_: *const MaybeUninit<usize>) -> *mut () {
    unreachable!("freeze is used only where CAN_FREEZE")
}

impl Drop for Task {
    fn drop(&mut self) {
        // SAFETY: a task that is dropped has not run; this is the one call.
        unsafe { (self.vtable)(&mut self.payload, self.group, Action::Drop) }
    }
}

unsafe fn call_inline<F: FnOnce(), C: Completion>(
    payload: *mut Payload,
    group: *const (),
    action: Action,
) {
    // SAFETY: the payload holds an F written by `closure`; read once.
    let f = unsafe { ptr::read(payload.cast::<F>()) };
    finish::<F, C>(f, group, action);
}

unsafe fn call_boxed<F: FnOnce(), C: Completion>(
    payload: *mut Payload,
    group: *const (),
    action: Action,
) {
    // SAFETY: payload[0] holds a Box<F> pointer from `closure`; read once.
    let f = unsafe { Box::from_raw((*payload)[0].assume_init() as *mut F) };
    finish::<F, C>(*f, group, action);
}

#[inline(always)]
fn finish<F: FnOnce(), C: Completion>(f: F, group: *const (), action: Action) {
    match action {
        Action::Run => {
            let r = panic::catch_unwind(AssertUnwindSafe(f));
            // SAFETY: `group` is the task's own, per `closure`'s contract.
            unsafe { C::finished(group, r) }
        }
        Action::Drop => {
            drop(f);
            // SAFETY: as above.
            unsafe { C::dropped(group) }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};

    #[test]
    fn a_task_is_four_words() {
        assert_eq!(size_of::<Task>(), 4 * size_of::<usize>());
    }

    #[test]
    fn small_closures_run_inline_and_large_ones_boxed() {
        fn vtables<F: FnOnce() + Send>(_: &F) -> (usize, usize) {
            (
                call_inline::<F, Detached> as VTable as usize,
                call_boxed::<F, Detached> as VTable as usize,
            )
        }
        let hits = Arc::new(AtomicUsize::new(0));
        let h = hits.clone();
        let small = move || {
            h.fetch_add(1, Ordering::Relaxed);
        };
        let (inline, _) = vtables(&small);
        // SAFETY: the closure is 'static.
        let t = unsafe { Task::from_closure(small, ptr::null()) };
        assert_eq!(
            t.vtable as usize, inline,
            "a one-word closure is stored inline"
        );
        t.run();
        let table = [7u64; 16];
        let h = hits.clone();
        let big = move || {
            h.fetch_add(table.iter().sum::<u64>() as usize, Ordering::Relaxed);
        };
        let (_, boxed) = vtables(&big);
        // SAFETY: the closure is 'static.
        let t = unsafe { Task::from_closure(big, ptr::null()) };
        assert_eq!(t.vtable as usize, boxed, "a 17-word closure is boxed");
        t.run();
        assert_eq!(hits.load(Ordering::Relaxed), 1 + 7 * 16);
    }

    // A real deque and threads: not a loom model (under `--cfg loom` the
    // deque's atomics are loom's, usable only inside one).
    #[cfg(not(loom))]
    #[test]
    fn closures_with_padding_cross_a_deque_intact() {
        use crate::sched::deque::{Steal, Worker};
        // (u8, &AtomicUsize) has seven padding bytes: the case `freeze`
        // exists for. The reference checks that provenance survives.
        let sum = Arc::new(AtomicUsize::new(0));
        let w = Worker::<Queued>::new();
        let s = w.stealer();
        for i in 0..200u8 {
            let (tag, hits): (u8, &AtomicUsize) = (i, &sum);
            let f = move || {
                hits.fetch_add(tag as usize, Ordering::Relaxed);
            };
            assert_eq!(size_of_val(&f), 2 * size_of::<usize>());
            // SAFETY: `sum` outlives every task (all run before the end).
            let t = unsafe { Task::from_closure(f, ptr::null()) };
            w.push(t.into_queued());
        }
        std::thread::scope(|scope| {
            scope.spawn(|| {
                loop {
                    match s.steal() {
                        // SAFETY: our steal took it: the one Task made.
                        Steal::Success(q) => unsafe { q.into_task() }.run(),
                        Steal::Retry => {}
                        Steal::Empty => break,
                    }
                }
            });
        });
        while let Some(q) = w.pop() {
            // SAFETY: popped: the one Task made from it.
            unsafe { q.into_task() }.run();
        }
        assert_eq!(sum.load(Ordering::Relaxed), (0..200).sum::<usize>());
    }

    #[test]
    fn dropping_an_unrun_task_drops_its_captures() {
        let token = Arc::new(());
        for big in [false, true] {
            let t2 = token.clone();
            let pad = [0u8; 64];
            // SAFETY: the closures are 'static.
            let t = unsafe {
                if big {
                    Task::from_closure(move || drop((t2, pad)), ptr::null())
                } else {
                    Task::from_closure(move || drop(t2), ptr::null())
                }
            };
            assert_eq!(Arc::strong_count(&token), 2);
            drop(t);
            assert_eq!(Arc::strong_count(&token), 1);
        }
    }
}
