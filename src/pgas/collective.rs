//! Collectives: every locale calls them, in the same order, from one task
//! each (the SPMD body, see [`spmd`](super::spmd)). The barrier is a
//! counter and a generation word in the control page; broadcast and
//! reductions pass data through the locales' scratch areas between
//! barriers. `README.md` beside this file states the protocol.

use super::space::{
    BARRIER_COUNT, BARRIER_GEN, SCRATCH_DATA_BYTES, SPMD_EPOCH, SPMD_ID, SPMD_POISON,
    SPMD_RETURNED, SPMD_RUNNING, Space, if_installed, space,
};
use crate::error::{Error, ErrorKind, Locales};
use bytemuck::Pod;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// How long a waiter spins before it starts sleeping.
const SPIN_FOR: Duration = Duration::from_micros(20);
/// The first and the longest sleep of a waiter that stopped spinning.
const MIN_PAUSE: Duration = Duration::from_micros(5);
const MAX_PAUSE: Duration = Duration::from_micros(200);

/// Whether a task of this process is inside a collective.
static ACTIVE: AtomicBool = AtomicBool::new(false);

/// What a collective call was, published by each locale so that all can
/// check they called the same thing: (kind, two arguments).
pub(crate) type Signature = [u64; 3];
pub(crate) const ALLOC: u64 = 1;
const BROADCAST: u64 = 2;
const REDUCE: u64 = 3;
const ALL_REDUCE: u64 = 4;

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

    /// Publishes this locale's signature (before the first barrier).
    pub(crate) fn publish(&self, sig: Signature) {
        for (i, w) in sig.into_iter().enumerate() {
            // Relaxed: the barrier that follows publishes it.
            self.space
                .signature(self.space.here, i)
                .store(w, Ordering::Relaxed);
        }
    }

    /// After the first barrier: whether every locale published the same
    /// signature. Every locale compares locale 0's with each other's, so
    /// all reach the same verdict and the same message.
    pub(crate) fn agree(&self, call: &str) -> Result<(), Error> {
        let s = &self.space;
        let sig = |l: usize| -> Signature {
            // Relaxed: published before the barrier we passed.
            std::array::from_fn(|i| s.signature(l, i).load(Ordering::Relaxed))
        };
        let first = sig(0);
        for l in 1..s.locales {
            let theirs = sig(l);
            if theirs != first {
                return Err(Error::new(
                    ErrorKind::Locale,
                    format!(
                        "cantus::{call}: the locales' collective calls do not match: locale 0 \
                         called {} but locale {l} called {}; every locale must make the same \
                         collective calls in the same order",
                        describe(first),
                        describe(theirs)
                    ),
                ));
            }
        }
        Ok(())
    }

    /// Waits until every locale arrived at this barrier.
    pub(crate) fn barrier(&self) {
        barrier_in(&self.space);
    }
}

impl Drop for Collective {
    fn drop(&mut self) {
        ACTIVE.store(false, Ordering::Release);
    }
}

fn describe(sig: Signature) -> String {
    match sig {
        [ALLOC, bytes, align] => format!("alloc of {bytes} bytes aligned to {align}"),
        [BROADCAST, root, bytes] => format!("broadcast of {bytes} bytes from locale {root}"),
        [REDUCE, root, size] => format!("reduce of a {size}-byte value to locale {root}"),
        [ALL_REDUCE, _, size] => format!("all_reduce of a {size}-byte value"),
        _ => "no known collective".to_string(),
    }
}

/// The barrier: a counter of arrivals and a generation number.
fn barrier_in(s: &Space) {
    let count = s.control32(BARRIER_COUNT);
    let generation = s.control32(BARRIER_GEN);
    // Acquire: we left the previous barrier having seen this generation;
    // this load cannot see a later one before we arrive.
    let g = generation.load(Ordering::Acquire);
    // AcqRel: Release publishes our writes made before the barrier to the
    // last arriver (the count's modifications form one release sequence);
    // Acquire, for the last arriver, takes every locale's.
    if count.fetch_add(1, Ordering::AcqRel) + 1 == s.locales as u32 {
        // Reset before opening: a locale arrives at the next barrier only
        // after it saw the new generation (Release below).
        count.store(0, Ordering::Relaxed);
        // Release: pairs with the waiters' Acquire load of the generation,
        // passing on what the last arriver acquired above.
        generation.store(g.wrapping_add(1), Ordering::Release);
        return;
    }
    // Acquire: pairs with the Release store of the last arriver.
    wait_until(|| generation.load(Ordering::Acquire) != g || poisoned(s) != 0 || returned(s) != 0);
    // Seeing the poison or the return (Acquire) we also see a generation
    // stored before them: a body that returned after opening this barrier
    // as its last arriver is no reason to panic.
    if generation.load(Ordering::Acquire) == g {
        let p = poisoned(s);
        if p != 0 {
            panic!(
                "cantus: locale {} panicked in the SPMD body, so this barrier can never \
                 complete (see that locale's error)",
                p - 1
            );
        }
        panic!(
            "cantus: the SPMD body of locale {} returned while locale {} waits in a \
             collective, which can therefore never complete: every locale's body must make \
             the same collective calls (barrier, alloc, broadcast, reduce, ...) in the same order",
            returned(s) - 1,
            s.here
        );
    }
}

/// 0, or 1 + the first locale whose SPMD body returned (normally).
fn returned(s: &Space) -> u64 {
    // Acquire: pairs with the Release CAS in `leave_body`.
    s.control64(SPMD_RETURNED).load(Ordering::Acquire)
}

/// 0, or 1 + the locale whose SPMD body panicked.
fn poisoned(s: &Space) -> u64 {
    // Acquire: pairs with the Release CAS in `leave_body`.
    s.control64(SPMD_POISON).load(Ordering::Acquire)
}

/// Lets the active-message layer tell SPMD bodies apart from other remote
/// calls (`am::SpmdHooks`); called once per runtime, before any remote call
/// runs.
pub(crate) fn attach() {
    crate::am::set_spmd_hooks(crate::am::SpmdHooks {
        begin: begin_group,
        end: end_group,
        enter: enter_body,
        leave: leave_body,
    });
}

/// Before the bodies of an SPMD group (handler `id`) are sent: claims the
/// group word, records the handler, clears the poison and return words
/// of an earlier group and the barrier's count (which a barrier that
/// ended by a panic may have left part-way; nothing waits in one now: the
/// earlier group ended only after every body had), and starts a new
/// epoch. Any locale may begin a group; one runs at a time.
fn begin_group(id: u64) -> Result<(), Error> {
    let s = space("pgas::spmd")?;
    // Acquire: pairs with `end_group`'s Release store, so the last
    // group's writes to these words are behind us.
    if s.control64(SPMD_RUNNING)
        .compare_exchange(0, 1, Ordering::Acquire, Ordering::Relaxed)
        .is_err()
    {
        return Err(Error::new(
            ErrorKind::Locale,
            "cantus::pgas::spmd: an SPMD group is already running (spmd and coforall_locales \
             bodies that call collectives neither nest nor run side by side); call the \
             collectives from the running body instead"
                .to_string(),
        ));
    }
    s.control32(BARRIER_COUNT).store(0, Ordering::Relaxed);
    s.control64(SPMD_ID).store(id, Ordering::Relaxed);
    s.control64(SPMD_POISON).store(0, Ordering::Relaxed);
    s.control64(SPMD_RETURNED).store(0, Ordering::Relaxed);
    // Release: pairs with `enter_body`'s Acquire load: a body that sees
    // this epoch sees the words above. (The requests that start the
    // bodies are sent after this, and carry it anyway.)
    s.control64(SPMD_EPOCH).fetch_add(1, Ordering::Release);
    Ok(())
}

/// Every body of the group ended: frees the group word; returns the
/// locale whose body panicked first, if one did.
fn end_group() -> Option<usize> {
    if_installed(|s| {
        // Acquire: pairs with the Release CAS of `leave_body` (which
        // also happened before its body's reply, which we joined).
        let p = s.control64(SPMD_POISON).load(Ordering::Acquire);
        // Release: pairs with `begin_group`'s Acquire CAS.
        s.control64(SPMD_RUNNING).store(0, Ordering::Release);
        (p as usize).checked_sub(1)
    })
    .flatten()
}

/// A remote call of handler `id` starts on this locale: it is this
/// locale's SPMD body if a group of that handler runs and no call of this
/// locale claimed its epoch yet (so a stray call of the same handler
/// after the body started is not one).
fn enter_body(id: u64) -> bool {
    if_installed(|s| {
        // Acquire: pairs with `begin_group`'s Release increment.
        let epoch = s.control64(SPMD_EPOCH).load(Ordering::Acquire);
        // Relaxed: published with the epoch (above).
        let ours = s.control64(SPMD_RUNNING).load(Ordering::Relaxed) == 1
            && s.control64(SPMD_ID).load(Ordering::Relaxed) == id;
        // Relaxed: `claimed` and `in_body` are this process's alone; the
        // CAS only picks one claimant among concurrent calls.
        let claimed = s.claimed.load(Ordering::Relaxed);
        let ours = ours
            && claimed < epoch
            && s.claimed
                .compare_exchange(claimed, epoch, Ordering::Relaxed, Ordering::Relaxed)
                .is_ok();
        if ours {
            s.in_body.store(true, Ordering::Relaxed);
        }
        ours
    })
    .unwrap_or(false)
}

/// This locale's SPMD body ended. Either way this locale will arrive at
/// no further barrier of the group, so the other locales' waits must end
/// (with a panic naming this locale) instead of waiting forever: if it
/// panicked, poison the collectives; if it returned, record that (unless
/// a task it started is still inside a collective: that task may yet
/// arrive).
fn leave_body(panicked: bool) {
    if_installed(|s| {
        // Relaxed: as in `enter_body`.
        s.in_body.store(false, Ordering::Relaxed);
        // Relaxed: ACTIVE is a flag against misuse (see `enter`).
        let word = if panicked {
            SPMD_POISON
        } else if !ACTIVE.load(Ordering::Relaxed) {
            SPMD_RETURNED
        } else {
            return;
        };
        // Release: pairs with the Acquire loads of `poisoned`/`returned`
        // (and `end_group`), after our writes of the body. Only the first
        // panic poisons, so the poison names an original panic, never a
        // follow-on one.
        let _ = s.control64(word).compare_exchange(
            0,
            s.here as u64 + 1,
            Ordering::Release,
            Ordering::Relaxed,
        );
    });
}

/// Spins for [`SPIN_FOR`], then sleeps (as a task, so its worker runs
/// other tasks and serves remote calls; as an outside thread, the OS
/// thread sleeps) for growing pauses until `done`.
fn wait_until(done: impl Fn() -> bool) {
    let start = Instant::now();
    let mut spins = 0u32;
    while !done() {
        std::hint::spin_loop();
        spins += 1;
        if spins % 64 == 0 && start.elapsed() > SPIN_FOR {
            let mut pause = MIN_PAUSE;
            while !done() {
                crate::sleep(pause);
                pause = (pause * 2).min(MAX_PAUSE);
            }
            return;
        }
    }
}

/// Waits until every locale called `barrier`. Every locale's writes to
/// global memory before the barrier (puts, atomics, writes to its local
/// part) are visible to every locale after it.
///
/// Call it from the SPMD body on every locale ([`spmd`](super::spmd));
/// it panics if no runtime runs, if called outside an SPMD body (see
/// [the rule](super#the-spmd-model)), or if another task of this locale
/// is in a collective. A waiting task spins for about 20 µs, then sleeps for
/// growing pauses (up to 200 µs), so its worker runs other tasks and
/// serves remote calls meanwhile; an outside thread sleeps.
#[track_caller]
pub fn barrier() {
    Collective::enter_or_panic("pgas::barrier").barrier();
}

/// Copies `buf` from locale `root` into `buf` on every other locale.
/// Every locale passes a slice of the same length; the data travels
/// through `root`'s scratch area, in pieces of up to 16 KiB with two
/// barriers each.
///
/// # Panics
///
/// If `root` is not a locale, if the locales disagree on `root` or the
/// length (all locales panic alike), or as [`barrier`] does.
#[track_caller]
pub fn broadcast<T: Pod>(root: usize, buf: &mut [T]) {
    let c = Collective::enter_or_panic("pgas::broadcast");
    let s = c.space.clone();
    assert!(
        root < s.locales,
        "cantus::pgas::broadcast: locale {root} does not exist (the job has {})",
        Locales(s.locales)
    );
    let bytes: &mut [u8] = bytemuck::cast_slice_mut(buf);
    let len = bytes.len();
    let piece = SCRATCH_DATA_BYTES;
    let area = s.scratch_data(root).as_ptr();
    let fill = |at: usize, bytes: &[u8]| {
        let n = piece.min(len - at);
        // SAFETY: `area` is root's scratch data, SCRATCH_DATA_BYTES long,
        // `n` at most that; between the barriers around this piece only
        // the root writes it, and no locale reads it.
        unsafe { std::ptr::copy_nonoverlapping(bytes[at..].as_ptr(), area, n) };
    };
    c.publish([BROADCAST, root as u64, len as u64]);
    if s.here == root {
        fill(0, bytes);
    }
    c.barrier();
    c.agree("pgas::broadcast").unwrap_or_else(|e| panic!("{e}"));
    let mut at = 0;
    loop {
        let n = piece.min(len - at);
        if s.here != root {
            // SAFETY: as in `fill`; the root wrote this piece before the
            // barrier we passed and will not write again before the next.
            unsafe { std::ptr::copy_nonoverlapping(area, bytes[at..].as_mut_ptr(), n) };
        }
        at += n;
        c.barrier();
        if at >= len {
            break;
        }
        if s.here == root {
            fill(at, bytes);
        }
        c.barrier();
    }
}

/// Combines every locale's `value` with `op` at locale `root`, in locale
/// order (`op(op(v0, v1), v2)...`); returns `Some` there and `None`
/// elsewhere. `op` is typically [`sum`], [`min`] or [`max`].
///
/// `T` may have any size: the values travel through the scratch areas in
/// pieces of up to 16 KiB (two barriers each), and the root gathers all
/// `num_locales()` values into a buffer before folding them (it holds
/// `num_locales() * size_of::<T>()` bytes meanwhile; `op` takes values by
/// value, so the task stack must hold a few of them).
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
    combine(&c, REDUCE, root, value, &op, "pgas::reduce")
}

/// Combines every locale's `value` with `op`, in locale order, and
/// returns the result on every locale (the same bits everywhere, floats
/// included: each locale folds the same values in the same order).
///
/// # Panics
///
/// As [`reduce`].
#[track_caller]
pub fn all_reduce<T: Pod>(value: T, op: impl Fn(T, T) -> T) -> T {
    let c = Collective::enter_or_panic("pgas::all_reduce");
    let here = c.space.here;
    combine(&c, ALL_REDUCE, here, value, &op, "pgas::all_reduce").expect("every locale folds")
}

/// Gathers every locale's value at the locales that want the result
/// (`root`, or all), piece by piece through the scratch areas: each
/// locale writes a piece of its value into its own scratch area; after a
/// barrier the locales that want the result copy that piece of every
/// locale's value into a buffer of `locales` values; a second barrier
/// frees the scratch areas for the next piece (or collective). Then they
/// fold the buffer in locale order. So `T` may have any size; a folding
/// locale holds `locales` values of `T` meanwhile.
fn combine<T: Pod>(
    c: &Collective,
    kind: u64,
    root: usize,
    value: T,
    op: &dyn Fn(T, T) -> T,
    call: &str,
) -> Option<T> {
    let s = &c.space;
    let size = size_of::<T>();
    let wants = kind == ALL_REDUCE || s.here == root;
    c.publish([
        kind,
        if kind == REDUCE { root as u64 } else { 0 },
        size as u64,
    ]);
    let mine = bytemuck::bytes_of(&value);
    // values[l * size..][..size] is locale l's value.
    let mut values = vec![0u8; if wants { s.locales * size } else { 0 }];
    let mut at = 0;
    loop {
        let n = SCRATCH_DATA_BYTES.min(size - at);
        // SAFETY: our scratch data, SCRATCH_DATA_BYTES long, `n` at most
        // that; only we write it, and no locale reads it between the
        // barrier that followed every read of the last piece (or
        // collective) and the barrier below.
        unsafe {
            std::ptr::copy_nonoverlapping(mine[at..].as_ptr(), s.scratch_data(s.here).as_ptr(), n)
        };
        c.barrier();
        if at == 0 {
            c.agree(call).unwrap_or_else(|e| panic!("{e}"));
        }
        if wants {
            for l in 0..s.locales {
                let to = &mut values[l * size + at..][..n];
                // SAFETY: locale l wrote this piece (`n` bytes: the sizes
                // agree) at the start of its scratch data before the
                // barrier we passed, and writes it again only after the
                // next one; `to` is `n` bytes of our own buffer.
                unsafe {
                    std::ptr::copy_nonoverlapping(s.scratch_data(l).as_ptr(), to.as_mut_ptr(), n)
                };
            }
        }
        at += n;
        c.barrier();
        if at >= size {
            break;
        }
    }
    wants.then(|| {
        (0..s.locales)
            .map(|l| bytemuck::pod_read_unaligned::<T>(&values[l * size..][..size]))
            .reduce(op)
            .expect("a job has at least one locale")
    })
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
