//! A global address space over the locales of a job: a symmetric heap,
//! typed global pointers with put, get and remote atomics, collectives,
//! and block-distributed arrays.
//!
//! - [`alloc`] places a [`GlobalArray`] at the same offset of every
//!   locale's heap segment (`CANTUS_HEAP_BYTES` /
//!   [`Builder::heap_bytes`](crate::Builder::heap_bytes) bytes each);
//! - [`GlobalPtr`] names an element on some locale; `put`/`get` copy it,
//!   atomics act on it; [`put_nb`](GlobalPtr::put_nb),
//!   [`get_nb`](GlobalPtr::get_nb) and [`quiet`] overlap transfers, and
//!   [`put_signal`](GlobalPtr::put_signal) with
//!   [`wait_until`](GlobalPtr::wait_until) tells a consumer its data came
//!   without a barrier;
//! - [`barrier`], [`broadcast`], [`reduce`], [`all_reduce`],
//!   [`all_gather`], [`all_gather_v`], [`all_to_all`], [`all_to_all_v`],
//!   [`scan`] and [`exclusive_scan`] are collectives;
//! - [`send`], [`recv`] and [`recv_into`] carry plain data between the
//!   SPMD bodies, addressed by locale number;
//! - [`BlockArray`] splits one array into a block per locale.
//!
//! Two memories carry it, with the same API and guarantees
//! (`CANTUS_PGAS`). Where every locale maps every segment (the
//! shared-memory transport's region, the default on one machine), a
//! put or a get is a copy within shared memory and an atomic an atomic
//! instruction on it (seed 003: Duell, "Pthreads or Processes",
//! sections 4.3.2 and 4.3.3), and collectives are atomics and scratch
//! areas in the region. Where locales share no memory (MPI, or
//! `CANTUS_PGAS=messages`), a segment is its owner's alone: an access to
//! another locale's is a remote call its owner runs inside its poll, a
//! put returns once its owner acknowledged it, and collectives are trees
//! of messages.
//!
//! # The SPMD model
//!
//! Locale 0 runs `main`; the other locales serve remote calls. Code that
//! calls collectives ([`alloc`], [`barrier`], [`broadcast`], [`reduce`],
//! [`all_reduce`], [`BlockArray::new`]) runs as one task on every locale
//! at once, the **SPMD body**: a [`Remote`](crate::Remote) call started
//! on all locales by [`spmd`] (or [`coforall_locales`](crate::coforall_locales),
//! which is the same). Inside it every locale makes the same collective
//! calls in the same order; between them, each does its own part of the
//! work and may spawn tasks, run `forall`s, put, get and make remote
//! calls. A mismatch (one locale allocates while another reduces, or two
//! ask for different sizes) is detected by `alloc`, `broadcast`,
//! `reduce` and `all_reduce` and reported on every locale alike; a
//! `barrier` against another collective is not detected.
//!
//! The rule: a collective is called only while this locale's SPMD body
//! runs, by the body or by a task it started (one task at a time per
//! locale). Called from anywhere else (`main`'s
//! [`block_on`](crate::Runtime::block_on) or [`run`](crate::run)
//! closure, a task of its own, a plain [`on`](crate::on) call) it is an
//! error ([`alloc`], [`BlockArray::new`]) or a panic (the others) at
//! once, naming `pgas::spmd`, on one locale as on several: a program that
//! works on one locale never waits forever on two. One SPMD group runs at
//! a time: [`spmd`] inside a body is an error, and
//! [`coforall_locales`](crate::coforall_locales) inside one runs plain
//! calls, without collectives.
//!
//! ```
//! use cantus::pgas;
//! use serde::{Deserialize, Serialize};
//!
//! /// Each locale writes its number into its right neighbour's slot.
//! #[derive(Clone, Serialize, Deserialize)]
//! struct Ring;
//!
//! impl cantus::Remote for Ring {
//!     type Output = u64;
//!     fn run(self) -> u64 {
//!         let (me, n) = (cantus::here(), cantus::num_locales());
//!         let slots = pgas::alloc::<u64>(1).unwrap();
//!         slots.ptr((me + 1) % n).write(me as u64).unwrap();
//!         pgas::barrier();
//!         let left = slots.local()[0];
//!         pgas::all_reduce(left, pgas::sum)
//!     }
//! }
//! cantus::remote!(Ring);
//!
//! let sums = cantus::run(|| pgas::spmd(Ring).unwrap()).unwrap();
//! let n = sums.len() as u64;
//! assert!(sums.iter().all(|&s| s == n * (n - 1) / 2));
//! ```
//!
//! With `CANTUS_LOCALES=4` the same program runs on four processes.
//! `README.md` beside this file states the two memories, the heap layout,
//! the allocation rule, the atomics' orderings and each memory's
//! collective protocols.

mod array;
mod block_array;
mod collective;
mod exchange;
mod halo;
mod heap;
mod mailbox;
mod memory;
mod messages;
mod nonblocking;
mod ptr;
mod shared;
mod space;

pub use array::{GlobalArray, alloc};
pub use block_array::BlockArray;
pub(crate) use collective::attach;
pub use collective::{all_reduce, barrier, broadcast, max, min, reduce, sum};
pub use exchange::{all_gather, all_gather_v, all_to_all, all_to_all_v, exclusive_scan, scan};
pub use halo::{HaloExchange, HaloGrid};
pub use mailbox::{recv, recv_into, send};
pub use nonblocking::{Completion, GetHandle, Signal, quiet};
pub use ptr::GlobalPtr;
pub(crate) use space::{
    install, installed_collectives, installed_memory, mapped_locales, uninstall,
};

use crate::error::Error;
use crate::remote::RegisteredCall;

/// Exchanges this process made as the transport's own collective (a test
/// hook).
pub(crate) fn native_exchanges() -> u64 {
    messages::native::NATIVE_EXCHANGES.load(std::sync::atomic::Ordering::Relaxed)
}

/// Runs `work` on every locale at once, as one task each (a clone per
/// locale, sent as a remote call), and returns the results in locale
/// order: the SPMD body from which collectives are called. The first
/// failure (a panic on some locale) is returned once all finished.
///
/// Call it from `main` (on locale 0), as in the [module](self) example.
///
/// If the body panics on one locale, the collectives the others wait in
/// end with a panic naming that locale, so `spmd` returns an error rather
/// than waiting forever: the error of the locale that panicked first,
/// quoting its own panic message. Likewise, if the body returns on one
/// locale while the others wait in a collective it did not call, their
/// waits end with a panic naming it.
///
/// A plain function made a remote call with
/// [`remote_fn!`](crate::remote_fn) is a body too, with its arguments:
///
/// ```
/// use cantus::pgas;
///
/// cantus::remote_fn! {
///     /// Sums `k * here()` over the locales.
///     fn step(k: u64) -> u64 {
///         pgas::all_reduce(k * cantus::here() as u64, pgas::sum)
///     }
/// }
///
/// let sums = cantus::run(|| pgas::spmd(step(3)).unwrap()).unwrap();
/// let n = sums.len() as u64;
/// assert!(sums.iter().all(|&s| s == 3 * n * (n - 1) / 2));
/// ```
///
/// # Errors
///
/// [`ErrorKind::RemotePanic`](crate::ErrorKind::RemotePanic) as above;
/// [`ErrorKind::Locale`](crate::ErrorKind::Locale) if an SPMD group
/// already runs (`spmd` inside a body, or beside another), and nothing
/// runs; [`ErrorKind::NoRuntime`](crate::ErrorKind::NoRuntime).
pub fn spmd<W: RegisteredCall + Clone>(work: W) -> Result<Vec<W::Output>, Error> {
    let calls = (0..crate::remote::num_locales())
        .map(|_| work.clone())
        .collect();
    crate::remote::spmd_group(calls)
}
