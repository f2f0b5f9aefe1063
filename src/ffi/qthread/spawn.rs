//! `qthread_spawn`, the general task constructor of Qthreads, and the
//! `qthread_fork_*` variants built on it: copied arguments, a return
//! location that is an `aligned_t`, a `syncvar_t` or a sinc, and
//! preconditions (words that must be full before the task runs).
//!
//! A task with preconditions is started at once and first waits (readFF)
//! for each precondition in turn, suspending only itself; Qthreads keeps
//! such a task unstarted instead. The observable order is the same: `f`
//! runs after every precondition has been full.

use super::feb::Syncvar;
use super::sinc::{self, QtSinc};
use super::team::{self, Membership};
use super::{NO_SHEPHERD, QthreadF, buf::AlignedBuf, place, place_task, qt};
use crate::ffi::error::{EINVAL, ENOTSUP, Fail};
use crate::ffi::feb::full_empty::{self, Op};
use crate::ffi::feb::table::{SyncvarSite, WordSite, syncvar};
use crate::ffi::feb::word_at;
use crate::ffi::lifecycle::require_runtime;
use crate::ffi::tasks::Arg;
use crate::sched::new_task::{Action, INLINE_WORDS, Payload, Task};
use crate::sched::task_storage;
use std::ffi::{c_int, c_uint, c_ushort, c_void};
use std::mem::MaybeUninit;
use std::panic::{self, AssertUnwindSafe};
use std::sync::atomic::AtomicU64;

/// `QTHREAD_SPAWN_PARENT`: accepted, without effect (Qthreads 1.23 never
/// reads it).
const SPAWN_PARENT: c_uint = 1 << 0;
/// `QTHREAD_SPAWN_SIMPLE`: the task promises not to block (a hint here).
const SPAWN_SIMPLE: c_uint = 1 << 1;
/// `QTHREAD_SPAWN_NEW_TEAM`.
const SPAWN_NEW_TEAM: c_uint = 1 << 2;
/// `QTHREAD_SPAWN_NEW_SUBTEAM`.
const SPAWN_NEW_SUBTEAM: c_uint = 1 << 3;
/// `QTHREAD_SPAWN_RET_SYNCVAR_T`: `ret` is a `syncvar_t`.
const SPAWN_RET_SYNCVAR_T: c_uint = 1 << 4;
/// `QTHREAD_SPAWN_RET_SINC`: `ret` is a sinc; the result is submitted.
const SPAWN_RET_SINC: c_uint = 1 << 5;
/// `QTHREAD_SPAWN_RET_SINC_VOID`: `ret` is a sinc; NULL is submitted.
const SPAWN_RET_SINC_VOID: c_uint = 1 << 6;
/// `QTHREAD_SPAWN_PC_SYNCVAR_T`: the preconditions are `syncvar_t`s.
const SPAWN_PC_SYNCVAR_T: c_uint = 1 << 7;
/// `QTHREAD_SPAWN_LOCAL_PRIORITY`: run soon, on this worker (a hint here:
/// a task spawned by a task is already the next one its worker runs).
const SPAWN_LOCAL_PRIORITY: c_uint = 1 << 9;
/// `QTHREAD_SPAWN_NETWORK`: accepted, without effect (Qthreads 1.23 marks
/// the task with it and never reads the mark; it has no network layer).
const SPAWN_NETWORK: c_uint = 1 << 10;

const SUPPORTED: c_uint = SPAWN_PARENT
    | SPAWN_NETWORK
    | SPAWN_SIMPLE
    | SPAWN_NEW_TEAM
    | SPAWN_NEW_SUBTEAM
    | SPAWN_RET_SYNCVAR_T
    | SPAWN_RET_SINC
    | SPAWN_RET_SINC_VOID
    | SPAWN_PC_SYNCVAR_T
    | SPAWN_LOCAL_PRIORITY;

/// Where a task's result goes.
#[derive(Clone, Copy)]
pub(super) enum RetLoc {
    None,
    /// An `aligned_t`: written and filled.
    Word(*mut u64),
    /// A `syncvar_t`: written (60 bits) and filled.
    Syncvar(*mut u64),
    /// A sinc: the result (or NULL, if `void`) is submitted.
    Sinc {
        sinc: *mut QtSinc,
        void: bool,
    },
}

// SAFETY: the caller of qthread_spawn owns the location and keeps it valid
// until the task has filled / submitted to it (qthread.h).
unsafe impl Send for RetLoc {}

impl RetLoc {
    /// Delivers the result `v`. Never inlined: the task may have moved to
    /// another worker since it started (`qthread_migrate_to`), and what it
    /// calls here looks its worker up afresh.
    #[inline(never)]
    fn deliver(self, v: u64) {
        match self {
            RetLoc::None => {}
            RetLoc::Word(w) => {
                // SAFETY: checked non-null and aligned at spawn; the caller
                // keeps it valid until filled.
                let w = unsafe { AtomicU64::from_ptr(w) };
                full_empty::set_word(w, true, Some(v));
            }
            RetLoc::Syncvar(w) => {
                // SAFETY: as for Word.
                let w = unsafe { AtomicU64::from_ptr(w) };
                full_empty::set(&SyncvarSite(w), true, Some(v & syncvar::MAX));
            }
            RetLoc::Sinc { sinc, void: true } if sinc.addr() % 4 == 0 => {
                // Held back while this worker runs more of the sinc's tasks
                // (`sched/worker/deferred.rs`): they all submit with one
                // decrement. The group word is the one a plain fork task
                // of this sinc carries (`to_word`), so its next tasks keep
                // the submission held.
                let group = sinc
                    .cast_const()
                    .map_addr(|a| a | RetLoc::sinc_kind(true))
                    .cast::<()>();
                // SAFETY: submit_held submits `n` times to the sinc named
                // by `group`, on this worker, later; the sinc stays live
                // until then, since its count cannot reach 0 without these
                // submissions (qthread.h: the caller keeps it alive until
                // every expected submission arrived).
                if !unsafe { crate::sched::defer_finish(group, submit_held) } {
                    // Off a worker: at once. SAFETY: the sinc is live.
                    unsafe { submit_held(group, 1) };
                }
            }
            RetLoc::Sinc { sinc, void } => {
                let value: *const c_void = if void {
                    std::ptr::null()
                } else {
                    (&raw const v).cast()
                };
                // SAFETY: the caller keeps the sinc alive until every
                // expected submission arrived (qthread.h); checked live
                // here, and its values checked to fit an aligned_t at spawn.
                let r = unsafe {
                    sinc::sinc_at("qthread_spawn", sinc)
                        .and_then(|_| sinc::submit("qthread_spawn", sinc, value))
                };
                if let Err(f) = r {
                    eprintln!("cantus: {}", f.message);
                }
            }
        }
    }
}

/// Makes `n` held submissions of `QTHREAD_SPAWN_RET_SINC_VOID` tasks to
/// the sinc whose group word is `group` (`RetLoc::deliver`).
///
/// # Safety
/// `group` is a live sinc's address with the low bits 3, and `n` its
/// submissions held (`sched::defer_finish`).
unsafe fn submit_held(group: *const (), n: u64) {
    let sinc = group.map_addr(|a| a & !3).cast::<QtSinc>();
    // SAFETY: the sinc is live until these submissions (deliver).
    let r = unsafe {
        sinc::sinc_at("qthread_spawn", sinc)
            .and_then(|_| sinc::submit_many("qthread_spawn", sinc, n))
    };
    if let Err(f) = r {
        eprintln!("cantus: {}", f.message);
    }
}

impl RetLoc {
    /// The location as one word, its kind in the low two bits (every
    /// location is at least 4-aligned: words and syncvars are checked to
    /// be 8-aligned, a sinc is a struct of pointers), or `None` for a sinc
    /// that is not.
    fn to_word(self) -> Option<usize> {
        let (p, kind) = match self {
            RetLoc::None => return Some(0),
            RetLoc::Word(w) => (w.addr(), 0),
            RetLoc::Syncvar(w) => (w.addr(), 1),
            RetLoc::Sinc { sinc, void } => (sinc.addr(), RetLoc::sinc_kind(void)),
        };
        (p % 4 == 0).then_some(p | kind)
    }

    /// The kind bits of a sinc in a location word: 2, 3 for a void one.
    const fn sinc_kind(void: bool) -> usize {
        if void { 3 } else { 2 }
    }

    /// The location [`RetLoc::to_word`] made `w` from.
    fn from_word(w: *const ()) -> RetLoc {
        let p = w.cast_mut().map_addr(|a| a & !3);
        match w.addr() & 3 {
            _ if w.is_null() => RetLoc::None,
            0 => RetLoc::Word(p.cast()),
            1 => RetLoc::Syncvar(p.cast()),
            k => RetLoc::Sinc {
                sinc: p.cast(),
                void: k == RetLoc::sinc_kind(true),
            },
        }
    }
}

/// The two payload words of a plain fork's task.
#[repr(C)]
struct PlainFork {
    f: unsafe extern "C" fn(*mut c_void) -> u64,
    arg: *mut c_void,
}

/// The task of a plain fork: `f(arg)` with no copied argument, no
/// precondition and no team of its own to join, its result delivered to
/// `ret`. Its four words hold all of it (`f` and `arg` in the payload,
/// `ret` in the word where a group's task keeps its group: a detached
/// task has none), so the fork allocates nothing (seed 002: argument
/// bundles). The scheduler reads that word only to compare it with a
/// waiting join's group, the address of a live end count, which no live
/// return word can share: a join never takes this task for its own. `None` where the general task is needed: the forker is in a
/// team, tracing is on (the trace labels spawned tasks), or a sinc is not
/// 4-aligned.
pub(super) fn plain_fork_task(
    f: unsafe extern "C" fn(*mut c_void) -> u64,
    arg: Arg,
    ret: RetLoc,
) -> Option<Task> {
    if crate::trace::on() || !team::forks_join_no_team() {
        return None;
    }
    let ret = ret.to_word()?;
    // Thieves take plain forks in batches (`sched/deque/README.md`,
    // "Batch steals"): a relaxed load per fork once registered.
    crate::sched::new_task::steal_in_batches(run_plain_fork);
    let mut payload: Payload = [MaybeUninit::new(0); INLINE_WORDS];
    // SAFETY: PlainFork is two words with no padding, the payload's size
    // and alignment (a const assertion below), so every payload byte is
    // initialized.
    unsafe {
        payload
            .as_mut_ptr()
            .cast::<PlainFork>()
            .write(PlainFork { f, arg: arg.get() });
    }
    // SAFETY: run_plain_fork reads the PlainFork written above and the
    // location word; f(arg) may run on any worker (qthread_fork's
    // contract), and the return location stays valid until filled.
    Some(unsafe {
        Task::from_raw(
            run_plain_fork,
            std::ptr::without_provenance::<()>(0).with_addr(ret),
            payload,
        )
    })
}

const _: () = assert!(std::mem::size_of::<PlainFork>() == std::mem::size_of::<Payload>());
const _: () = assert!(std::mem::align_of::<PlainFork>() <= std::mem::align_of::<Payload>());

/// The code of a [`plain_fork_task`].
///
/// # Safety
/// `payload` holds a `PlainFork` and `ret` a `RetLoc::to_word`, as
/// `plain_fork_task` wrote them; called once.
unsafe fn run_plain_fork(payload: *mut Payload, ret: *const (), action: Action) {
    if action == Action::Drop {
        // Unrun at shutdown: the return location stays empty, as for a
        // boxed fork.
        return;
    }
    // SAFETY: the caller's contract; read once.
    let PlainFork { f, arg } = unsafe { payload.cast::<PlainFork>().read() };
    let ret = RetLoc::from_word(ret);
    guard("qthread_fork", move || {
        run(f, arg, ret, Membership::Default)
    });
}

/// A precondition: a word (or `syncvar_t`) that must be full.
#[derive(Clone, Copy)]
struct Precond(*mut u64);

// SAFETY: the caller keeps precondition words valid until the task ran
// (qthread.h).
unsafe impl Send for Precond {}

/// The task's argument: the caller's pointer, or a copy the task owns.
enum TaskArg {
    Ptr(Arg),
    Copy(AlignedBuf),
}

/// Runs `f(arg)` as a forked task (labelled so: it draws its
/// `qthread_id` at its first call), in its team, and delivers its result.
fn run(
    f: unsafe extern "C" fn(*mut c_void) -> u64,
    arg: *mut c_void,
    ret: RetLoc,
    team: Membership,
) {
    // A task run inside another (a join that runs what it waits for)
    // shares that task's storage: its label comes back after.
    let outer = task_storage::label();
    task_storage::set_label(super::UNNUMBERED_FORK);
    team.run(
        // SAFETY: the caller of qthread_spawn promises f(arg) may run on
        // a worker.
        || crate::sched::body_may_go_away(|| unsafe { f(arg) }),
        |v| ret.deliver(v),
    );
    task_storage::set_label(outer.unwrap_or(0));
}

/// Runs a task's body; a panic inside cantus is reported (naming the
/// call that made the task), never unwound into the worker.
fn guard(call: &str, body: impl FnOnce()) {
    if panic::catch_unwind(AssertUnwindSafe(body)).is_err() {
        eprintln!("cantus: internal error in a task made by {call} (message above)");
    }
}

/// The body of a task made by `call` without copied arguments or
/// preconditions: `f(arg)` in the forker's team, its result delivered to
/// `ret` (every `qthread_fork*` and the common case of `qthread_spawn`).
pub(super) fn task_body(
    call: &'static str,
    f: unsafe extern "C" fn(*mut c_void) -> u64,
    arg: Arg,
    ret: RetLoc,
    team: Membership,
) -> impl FnOnce() + Send + 'static {
    move || guard(call, move || run(f, arg.get(), ret, team))
}

/// Checks `ret` for `flags` and empties it (aligned_t, syncvar_t).
fn ret_location(call: &str, ret: *mut c_void, flags: c_uint) -> Result<RetLoc, Fail> {
    let kinds = flags & (SPAWN_RET_SYNCVAR_T | SPAWN_RET_SINC | SPAWN_RET_SINC_VOID);
    if kinds.count_ones() > 1 {
        return Err(Fail::new(
            EINVAL,
            format!("{call}: more than one QTHREAD_SPAWN_RET_* flag"),
        ));
    }
    if ret.is_null() {
        return Ok(RetLoc::None);
    }
    let w = ret.cast::<u64>();
    Ok(match kinds {
        SPAWN_RET_SYNCVAR_T => {
            // SAFETY: the caller promises `ret` is a valid syncvar_t.
            let a = unsafe { word_at(call, "ret", w)? };
            full_empty::set(&SyncvarSite(a), false, None);
            RetLoc::Syncvar(w)
        }
        SPAWN_RET_SINC | SPAWN_RET_SINC_VOID => {
            let sinc = ret.cast::<QtSinc>();
            // SAFETY: the caller promises `ret` is a readable qt_sinc_t.
            let live = unsafe { sinc::sinc_at(call, sinc)? };
            if kinds == SPAWN_RET_SINC && live.value_size() > std::mem::size_of::<u64>() {
                return Err(Fail::new(
                    EINVAL,
                    format!(
                        "{call}: QTHREAD_SPAWN_RET_SINC submits an aligned_t, but the sinc's \
                         values are {} bytes",
                        live.value_size()
                    ),
                ));
            }
            RetLoc::Sinc {
                sinc,
                void: kinds == SPAWN_RET_SINC_VOID,
            }
        }
        _ => {
            // SAFETY: the caller promises `ret` is a valid aligned_t.
            let a = unsafe { word_at(call, "ret", w)? };
            full_empty::set_word(a, false, None);
            RetLoc::Word(w)
        }
    })
}

/// Frees a precondition array that cantus owns (allocated by the caller
/// with malloc, as Qthreads requires).
struct OwnedArray(*mut c_void);

impl Drop for OwnedArray {
    fn drop(&mut self) {
        // SAFETY: the array came from the caller's malloc and, per
        // qthread.h, is owned (and freed once) by qthread_spawn.
        unsafe { libc::free(self.0) };
    }
}

/// Reads the addresses of Qthreads' precondition array `[n, p1, ..., pn]`,
/// checking each (the caller's `OwnedArray` frees the array).
///
/// # Safety
/// `preconds` holds `npreconds + 1` pointers.
unsafe fn read_preconds(
    call: &str,
    npreconds: usize,
    preconds: *mut c_void,
) -> Result<Vec<Precond>, Fail> {
    let a = preconds.cast::<*mut u64>().cast_const();
    let mut out = Vec::with_capacity(npreconds);
    for i in 1..=npreconds {
        // SAFETY: i <= npreconds; the array holds npreconds + 1 pointers.
        let p = unsafe { a.add(i).read() };
        // SAFETY: the caller promises each is a valid word; only its
        // address is checked here.
        unsafe { word_at(call, "precondition", p)? };
        out.push(Precond(p));
    }
    Ok(out)
}

/// Waits until each precondition is full (as readFF, value dropped).
fn await_preconds(preconds: &[Precond], syncvars: bool) {
    for p in preconds {
        // SAFETY: checked non-null and aligned at spawn; the caller keeps
        // it valid until the task ran.
        let w = unsafe { AtomicU64::from_ptr(p.0) };
        if syncvars {
            full_empty::perform(&SyncvarSite(w), Op::ReadFF, 0);
        } else {
            full_empty::perform(&WordSite(w), Op::ReadFF, 0);
        }
    }
}

/// The common body of every spawn entry point.
///
/// # Safety
/// As for `qthread_spawn` (qthread.h).
#[allow(clippy::too_many_arguments)]
unsafe fn spawn(
    call: &str,
    f: QthreadF,
    arg: *const c_void,
    arg_size: usize,
    ret: *mut c_void,
    npreconds: usize,
    preconds: *mut c_void,
    target: c_ushort,
    flags: c_uint,
) -> Result<(), Fail> {
    // Take ownership of Qthreads' precondition array first (so it is freed
    // on every path), if it has Qthreads' layout.
    let _owned = if npreconds > 0 {
        if preconds.is_null() {
            return Err(Fail::null(call, "preconds"));
        }
        // SAFETY: the caller promises a Qthreads precondition array.
        let n = unsafe { preconds.cast::<usize>().read() };
        if n != npreconds {
            return Err(Fail::new(
                EINVAL,
                format!(
                    "{call}: preconds[0] = {n} but npreconds = {npreconds} (Qthreads' layout: \
                     preconds[0] holds the count, then the addresses); array not freed"
                ),
            ));
        }
        Some(OwnedArray(preconds))
    } else {
        None
    };
    let f = f.ok_or_else(|| Fail::null(call, "f"))?;
    require_runtime(call)?;
    if flags & !SUPPORTED != 0 {
        let unsupported = flags & !SUPPORTED;
        return Err(Fail::new(
            ENOTSUP,
            format!(
                "{call}: feature flags {unsupported:#x} are not Qthreads' (unknown bits; see \
                 QTHREAD_SPAWN_* in qthread.h)"
            ),
        ));
    }
    if arg_size > 0 && arg.is_null() {
        return Err(Fail::new(
            EINVAL,
            format!("{call}: arg_size = {arg_size} but `arg` is NULL"),
        ));
    }
    let pre = if npreconds > 0 {
        // SAFETY: a Qthreads array whose count was checked above.
        unsafe { read_preconds(call, npreconds, preconds)? }
    } else {
        Vec::new()
    };
    if flags & SPAWN_NEW_TEAM != 0 && flags & SPAWN_NEW_SUBTEAM != 0 {
        return Err(Fail::new(
            EINVAL,
            format!("{call}: QTHREAD_SPAWN_NEW_TEAM and QTHREAD_SPAWN_NEW_SUBTEAM together"),
        ));
    }
    let ret = ret_location(call, ret, flags)?;
    let syncvars = flags & SPAWN_PC_SYNCVAR_T != 0;
    let new_team = flags & (SPAWN_NEW_TEAM | SPAWN_NEW_SUBTEAM) != 0;
    if pre.is_empty() && arg_size == 0 && !new_team {
        if let Some(task) = plain_fork_task(f, Arg(arg.cast_mut()), ret) {
            return place_task(call, target, task);
        }
    }
    let team = team::for_fork(flags & SPAWN_NEW_TEAM != 0, flags & SPAWN_NEW_SUBTEAM != 0);
    if pre.is_empty() && arg_size == 0 {
        // The common case: no allocation beyond the task's own.
        return place(
            call,
            target,
            task_body("qthread_spawn", f, Arg(arg.cast_mut()), ret, team),
        );
    }
    let mut targ = if arg_size > 0 {
        // SAFETY: the caller promises `arg` holds arg_size readable bytes.
        TaskArg::Copy(unsafe { AlignedBuf::copy_of(arg.cast(), arg_size) })
    } else {
        TaskArg::Ptr(Arg(arg.cast_mut()))
    };
    let body = move || {
        guard("qthread_spawn", move || {
            await_preconds(&pre, syncvars);
            let argp = match &mut targ {
                TaskArg::Ptr(a) => a.get(),
                TaskArg::Copy(b) => b.as_mut_ptr().cast(),
            };
            run(f, argp, ret, team);
        })
    };
    place(call, target, body)
}

/// qthread_spawn: the general form of every fork (see qthread.h).
///
/// # Safety
/// See qthread.h.
#[allow(clippy::too_many_arguments)]
#[unsafe(no_mangle)]
pub unsafe extern "C" fn qthread_spawn(
    f: QthreadF,
    arg: *const c_void,
    arg_size: usize,
    ret: *mut c_void,
    npreconds: usize,
    preconds: *mut c_void,
    target_shep: c_ushort,
    feature_flag: c_uint,
) -> c_int {
    qt("qthread_spawn", || {
        // SAFETY: forwarded contract.
        unsafe {
            spawn(
                "qthread_spawn",
                f,
                arg,
                arg_size,
                ret,
                npreconds,
                preconds,
                target_shep,
                feature_flag,
            )
        }
    })
}

/// qthread_fork_copyargs: as `qthread_fork`, but `f` gets a pointer to a
/// copy of the `arg_size` bytes at `arg`, owned by the task.
///
/// # Safety
/// See qthread.h.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn qthread_fork_copyargs(
    f: QthreadF,
    arg: *const c_void,
    arg_size: usize,
    ret: *mut u64,
) -> c_int {
    // SAFETY: forwarded contract.
    unsafe {
        fork_plain(
            "qthread_fork_copyargs",
            f,
            arg,
            arg_size,
            ret.cast(),
            NO_SHEPHERD,
            0,
        )
    }
}

/// qthread_fork_copyargs_to: as `qthread_fork_copyargs`, preferring
/// shepherd `shep` (a hint, as for `qthread_fork_to`).
///
/// # Safety
/// See qthread.h.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn qthread_fork_copyargs_to(
    f: QthreadF,
    arg: *const c_void,
    arg_size: usize,
    ret: *mut u64,
    shep: c_ushort,
) -> c_int {
    // SAFETY: forwarded contract.
    unsafe {
        fork_plain(
            "qthread_fork_copyargs_to",
            f,
            arg,
            arg_size,
            ret.cast(),
            shep,
            0,
        )
    }
}

/// qthread_fork_syncvar: as `qthread_fork`, with a `syncvar_t` result.
///
/// # Safety
/// See qthread.h.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn qthread_fork_syncvar(
    f: QthreadF,
    arg: *const c_void,
    ret: *mut Syncvar,
) -> c_int {
    // SAFETY: forwarded contract.
    unsafe {
        fork_plain(
            "qthread_fork_syncvar",
            f,
            arg,
            0,
            ret.cast(),
            NO_SHEPHERD,
            SPAWN_RET_SYNCVAR_T,
        )
    }
}

/// qthread_fork_syncvar_copyargs: `qthread_fork_copyargs` with a
/// `syncvar_t` result.
///
/// # Safety
/// See qthread.h.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn qthread_fork_syncvar_copyargs(
    f: QthreadF,
    arg: *const c_void,
    arg_size: usize,
    ret: *mut Syncvar,
) -> c_int {
    // SAFETY: forwarded contract.
    unsafe {
        fork_plain(
            "qthread_fork_syncvar_copyargs",
            f,
            arg,
            arg_size,
            ret.cast(),
            NO_SHEPHERD,
            SPAWN_RET_SYNCVAR_T,
        )
    }
}

/// qthread_fork_net: as `qthread_fork`, with `QTHREAD_SPAWN_NETWORK`
/// (without effect, as in Qthreads 1.23).
///
/// # Safety
/// See qthread.h.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn qthread_fork_net(f: QthreadF, arg: *const c_void, ret: *mut u64) -> c_int {
    // SAFETY: forwarded contract.
    unsafe {
        fork_plain(
            "qthread_fork_net",
            f,
            arg,
            0,
            ret.cast(),
            NO_SHEPHERD,
            SPAWN_NETWORK,
        )
    }
}

/// qthread_fork_syncvar_to: `qthread_fork_syncvar` on shepherd
/// `shepherd` (as for `qthread_fork_to`: taken modulo the shepherd count).
///
/// # Safety
/// See qthread.h.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn qthread_fork_syncvar_to(
    f: QthreadF,
    arg: *const c_void,
    ret: *mut Syncvar,
    shepherd: c_ushort,
) -> c_int {
    // SAFETY: forwarded contract.
    unsafe {
        fork_plain(
            "qthread_fork_syncvar_to",
            f,
            arg,
            0,
            ret.cast(),
            shepherd,
            SPAWN_RET_SYNCVAR_T,
        )
    }
}

/// qthread_fork_syncvar_copyargs_simple: `qthread_fork_syncvar_copyargs`
/// with `QTHREAD_SPAWN_SIMPLE` (an ordinary task here).
///
/// # Safety
/// See qthread.h.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn qthread_fork_syncvar_copyargs_simple(
    f: QthreadF,
    arg: *const c_void,
    arg_size: usize,
    ret: *mut Syncvar,
) -> c_int {
    // SAFETY: forwarded contract.
    unsafe {
        fork_plain(
            "qthread_fork_syncvar_copyargs_simple",
            f,
            arg,
            arg_size,
            ret.cast(),
            NO_SHEPHERD,
            SPAWN_SIMPLE | SPAWN_RET_SYNCVAR_T,
        )
    }
}

/// A fork with no preconditions (and a shepherd hint, or `NO_SHEPHERD`):
/// `qthread_spawn`'s arguments for the `qthread_fork*` family.
///
/// # Safety
/// As for [`spawn`] with those arguments.
unsafe fn fork_plain(
    call: &'static str,
    f: QthreadF,
    arg: *const c_void,
    arg_size: usize,
    ret: *mut c_void,
    shep: c_ushort,
    flags: u32,
) -> c_int {
    qt(call, || {
        // SAFETY: forwarded contract.
        unsafe {
            spawn(
                call,
                f,
                arg,
                arg_size,
                ret,
                0,
                std::ptr::null_mut(),
                shep,
                flags,
            )
        }
    })
}
