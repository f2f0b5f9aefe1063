//! Collectives: every locale calls them, in the same order, from one task
//! each (the SPMD body, see [`spmd`](super::spmd)). What every memory
//! shares lives here: the rule for who may call them, the messages for
//! locales that disagree, the folding of reductions in locale order, and
//! the SPMD hooks; the installed [`Memory`](super::memory::Memory) moves
//! the data (`README.md` beside this file states each one's protocol).

use super::memory::{
    ALL_GATHER, ALL_REDUCE, BROADCAST, EXCLUSIVE_SCAN, Mismatch, REDUCE, Signature,
};
use super::space::{Space, if_installed, installed, space};
use crate::error::{Error, ErrorKind, Locales};
use bytemuck::Pod;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

/// Whether a task of this process is inside a collective.
static ACTIVE: AtomicBool = AtomicBool::new(false);

/// This locale's participation in one collective call.
pub(crate) struct Collective {
    pub(crate) space: Arc<Space>,
}

impl Collective {
    /// Enters a collective; an error if no runtime runs, this locale's
    /// SPMD body does not run, or another task of this locale is inside
    /// one.
    pub(crate) fn enter(call: &str) -> Result<Collective, Error> {
        let space = space(call)?;
        // Relaxed: set by the handler task of the body before it ran the
        // body, so the body and the tasks it spawns see it; it orders
        // nothing else.
        if !space.in_body.load(Ordering::Relaxed) {
            return Err(Error::new(
                ErrorKind::Locale,
                format!(
                    "cantus::{call}: called outside an SPMD body (locale {}); a collective \
                     runs on every locale at once, so call it only inside the body that \
                     pgas::spmd (or cantus::coforall_locales) runs on every locale, not from \
                     main or a task of its own",
                    space.here
                ),
            ));
        }
        // Acquire/Release: only a flag against misuse; it orders nothing else.
        if ACTIVE.swap(true, Ordering::Acquire) {
            return Err(Error::new(
                ErrorKind::Locale,
                format!(
                    "cantus::{call}: another task of locale {} is inside a pgas collective: \
                     collectives are called by one task per locale (the SPMD body), one at a time",
                    space.here
                ),
            ));
        }
        Ok(Collective { space })
    }

    /// Like [`Collective::enter`], panicking with the error's message.
    #[track_caller]
    fn enter_or_panic(call: &str) -> Collective {
        Collective::enter(call).unwrap_or_else(|e| panic!("{e}"))
    }
}

impl Drop for Collective {
    fn drop(&mut self) {
        ACTIVE.store(false, Ordering::Release);
    }
}

fn describe(sig: Signature) -> String {
    match sig {
        [super::memory::ALLOC, bytes, align] => {
            format!("alloc of {bytes} bytes aligned to {align}")
        }
        [BROADCAST, root, bytes] => format!("broadcast of {bytes} bytes from locale {root}"),
        [REDUCE, root, size] => format!("reduce of a {size}-byte value to locale {root}"),
        [ALL_REDUCE, _, size] => format!("all_reduce of a {size}-byte value"),
        [super::memory::BARRIER, _, _] => "barrier".to_string(),
        [kind @ ALL_GATHER..=EXCLUSIVE_SCAN, size, count] => {
            let names = [
                "all_gather",
                "all_gather_v",
                "all_to_all",
                "all_to_all_v",
                "scan",
                "exclusive_scan",
            ];
            let name = names[(kind - ALL_GATHER) as usize];
            if count > 0 {
                format!("{name} of {count} element(s) of {size} bytes")
            } else {
                format!("{name} of {size}-byte elements")
            }
        }
        _ => "no known collective".to_string(),
    }
}

/// The error every locale reports when the locales' calls of collective
/// `call` did not match (`Mismatch`: the same on every locale).
pub(crate) fn mismatch(call: &str, m: Mismatch) -> Error {
    Error::new(
        ErrorKind::Locale,
        format!(
            "cantus::{call}: the locales' collective calls do not match: locale 0 called {} but \
             locale {} called {}; every locale must make the same collective calls in the same \
             order",
            describe(m.first),
            m.locale,
            describe(m.theirs)
        ),
    )
}

/// Lets the active-message layer tell SPMD bodies apart from other remote
/// calls (`remote::SpmdHooks`); called once per runtime, before any remote call
/// runs.
pub(crate) fn attach() {
    crate::remote::set_spmd_hooks(crate::remote::SpmdHooks {
        begin: begin_group,
        end: end_group,
        enter: enter_body,
        leave: leave_body,
    });
}

/// Before the bodies of an SPMD group (handler `id`) are sent: begins
/// the group in the memory (one runs at a time in a job).
fn begin_group(id: u64) -> Result<(), Error> {
    space("pgas::spmd")?.memory.begin_group(id)
}

/// Every body of the group ended: ends it; returns the locale whose body
/// panicked first, if one did.
fn end_group() -> Option<usize> {
    installed().and_then(|s| s.memory.end_group())
}

/// A remote call of handler `id` starts on this locale: it is this
/// locale's SPMD body if a group of that handler runs and no call of this
/// locale claimed its epoch yet (so a stray call of the same handler
/// after the body started is not one).
fn enter_body(id: u64) -> bool {
    if_installed(|s| {
        let Some((running, epoch)) = s.memory.running_group() else {
            return false;
        };
        // Relaxed: `claimed` and `in_body` are this process's alone; the
        // CAS only picks one claimant among concurrent calls.
        let claimed = s.claimed.load(Ordering::Relaxed);
        let ours = running == id
            && claimed < epoch
            && s.claimed
                .compare_exchange(claimed, epoch, Ordering::Relaxed, Ordering::Relaxed)
                .is_ok();
        if ours {
            super::mailbox::body_starts(epoch);
            s.memory.body_started(epoch);
            s.in_body.store(true, Ordering::Relaxed);
        }
        ours
    })
    .unwrap_or(false)
}

/// This locale's SPMD body ended. Either way this locale will arrive at
/// no further collective of the group, so the other locales' waits must
/// end (with a panic naming this locale) instead of waiting forever: the
/// memory is told whether it panicked, and whether a task it started is
/// still inside a collective (then a body that returned may yet arrive).
fn leave_body(panicked: bool) {
    if let Some(s) = installed() {
        // Relaxed: as in `enter_body`.
        s.in_body.store(false, Ordering::Relaxed);
        let group = s.memory.running_group();
        // Relaxed: ACTIVE is a flag against misuse (see `enter`).
        s.memory
            .body_ended(panicked, ACTIVE.load(Ordering::Relaxed));
        // After the memory recorded a panic (so that a panic it causes
        // elsewhere, by a receive that asks, never poisons first).
        super::mailbox::body_ends(group.map(|(_, epoch)| epoch), panicked);
    }
}

/// Waits until every locale called `barrier`. Every locale's writes to
/// global memory before the barrier (puts, atomics, writes to its local
/// part) are visible to every locale after it.
///
/// Call it from the SPMD body on every locale ([`spmd`](super::spmd));
/// it panics if no runtime runs, if called outside an SPMD body (see
/// [the rule](super#the-spmd-model)), or if another task of this locale
/// is in a collective. A waiting task spins for about 20 µs (polling the
/// transport meanwhile where locales share no memory), then sleeps for
/// growing pauses (up to 200 µs), so its worker runs other tasks and
/// serves remote calls meanwhile; an outside thread sleeps. In an MPI job
/// over several nodes the collectives are MPI's own, and a waiting task
/// polls and yields for 10 ms before its first pause.
#[track_caller]
pub fn barrier() {
    let c = Collective::enter_or_panic("pgas::barrier");
    if let Err(m) = c.space.memory.barrier() {
        panic!("{}", mismatch("pgas::barrier", m));
    }
}

/// Copies `buf` from locale `root` into `buf` on every other locale.
/// Every locale passes a slice of the same length. With memory every
/// locale maps, the data travels through `root`'s scratch area, in
/// pieces of up to 16 KiB with two barriers each; over messages, down a
/// tree from `root`.
///
/// # Panics
///
/// If `root` is not a locale, if the locales disagree on `root` or the
/// length (all locales panic alike), or as [`barrier`] does.
#[track_caller]
pub fn broadcast<T: Pod>(root: usize, buf: &mut [T]) {
    let c = Collective::enter_or_panic("pgas::broadcast");
    let s = &c.space;
    assert!(
        root < s.locales,
        "cantus::pgas::broadcast: locale {root} does not exist (the job has {})",
        Locales(s.locales)
    );
    let bytes: &mut [u8] = bytemuck::cast_slice_mut(buf);
    let sig = [BROADCAST, root as u64, bytes.len() as u64];
    if let Err(m) = s.memory.broadcast(sig, root, bytes) {
        panic!("{}", mismatch("pgas::broadcast", m));
    }
}

/// Combines every locale's `value` with `op` at locale `root`, in locale
/// order (`op(op(v0, v1), v2)...`); returns `Some` there and `None`
/// elsewhere. `op` is typically [`sum`], [`min`] or [`max`].
///
/// `T` may have any size: the values travel in pieces (through the
/// scratch areas, 16 KiB and two barriers a piece, or in messages), and
/// the root gathers all `num_locales()` values into a buffer before
/// folding them (it holds `num_locales() * size_of::<T>()` bytes
/// meanwhile; `op` takes values by value, so the task stack must hold a
/// few of them).
///
/// # Panics
///
/// If `root` is not a locale, the locales disagree on `root` or `T`'s
/// size, or as [`barrier`] does.
#[track_caller]
pub fn reduce<T: Pod>(root: usize, value: T, op: impl Fn(T, T) -> T) -> Option<T> {
    let c = Collective::enter_or_panic("pgas::reduce");
    assert!(
        root < c.space.locales,
        "cantus::pgas::reduce: locale {root} does not exist (the job has {})",
        Locales(c.space.locales)
    );
    combine(&c.space, REDUCE, Some(root), value, &op, "pgas::reduce")
}

/// Combines every locale's `value` with `op`, in locale order, and
/// returns the result on every locale (the same bits everywhere, floats
/// included: the same values are folded in the same order).
///
/// # Panics
///
/// As [`reduce`].
#[track_caller]
pub fn all_reduce<T: Pod>(value: T, op: impl Fn(T, T) -> T) -> T {
    let c = Collective::enter_or_panic("pgas::all_reduce");
    combine(&c.space, ALL_REDUCE, None, value, &op, "pgas::all_reduce")
        .expect("every locale gets the result")
}

/// Gathers every locale's value at `root` (or at every locale: `None`)
/// and folds them there in locale order, so `T` may have any size and a
/// fold's result is the same bits wherever it is made.
fn combine<T: Pod>(
    s: &Space,
    kind: u64,
    root: Option<usize>,
    value: T,
    op: &dyn Fn(T, T) -> T,
    call: &str,
) -> Option<T> {
    let size = size_of::<T>();
    let locales = s.locales;
    let sig = [kind, root.map_or(0, |r| r as u64), size as u64];
    let fold = |values: &[u8]| -> Vec<u8> {
        let folded = (0..locales)
            .map(|l| bytemuck::pod_read_unaligned::<T>(&values[l * size..][..size]))
            .reduce(op)
            .expect("a job has at least one locale");
        bytemuck::bytes_of(&folded).to_vec()
    };
    match s
        .memory
        .reduce(sig, root, bytemuck::bytes_of(&value), &fold)
    {
        Ok(folded) => folded.map(|bytes| bytemuck::pod_read_unaligned(&bytes)),
        Err(m) => panic!("{}", mismatch(call, m)),
    }
}

/// `a + b`: an operation for [`reduce`] and [`all_reduce`].
pub fn sum<T: std::ops::Add<Output = T>>(a: T, b: T) -> T {
    a + b
}

/// The smaller of `a` and `b` (`a` if unordered): for [`reduce`] and
/// [`all_reduce`].
pub fn min<T: PartialOrd>(a: T, b: T) -> T {
    if b < a { b } else { a }
}

/// The larger of `a` and `b` (`a` if unordered): for [`reduce`] and
/// [`all_reduce`].
pub fn max<T: PartialOrd>(a: T, b: T) -> T {
    if b > a { b } else { a }
}
