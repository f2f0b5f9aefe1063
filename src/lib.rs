//! cantus: a runtime for *talking tasks* — millions of lightweight
//! user-level tasks on every core, synchronizing through full/empty
//! variables, in one process or in several *locales* (processes on one
//! machine, or MPI ranks across machines) that talk to each other.
//!
//! On each locale: stackful tasks on pooled stacks with guard pages
//! ([`begin`], [`join`], [`cobegin!`], [`coforall`], [`scope`],
//! [`TaskList`], [`TaskGroup`]), loops ([`forall`]), full/empty
//! synchronization ([`SyncVar`], [`SingleVar`]), task control
//! ([`task`]: yield, sleep, blocking calls) and queries ([`query`]). Between locales:
//! remote calls ([`on`], [`begin_on`], [`coforall_locales`]), Chant's
//! messages between tasks ([`chant`]), a global address space ([`pgas`])
//! and work stealing across locales ([`balance`]). A C ABI ([`ffi`],
//! `include/`) lets a language runtime use it as its tasking layer. See
//! `ARCHITECTURE.md` for the layers and the papers each comes from.
//!
//! ```
//! let total = cantus::run(|| {
//!     let v = cantus::SyncVar::new();
//!     cantus::scope(|s| {
//!         s.spawn(|| v.write_ef(20));
//!         let x = v.read_fe();
//!         let (a, b) = cantus::join(|| x + 1, || x + 1);
//!         a + b
//!     })
//! })
//! .unwrap();
//! assert_eq!(total, 42);
//! ```

#![warn(clippy::undocumented_unsafe_blocks)]
// Under loom only the modelled protocols matter; the rest compiles unused.
#![cfg_attr(loom, allow(dead_code, unused_imports))]

#[cfg(not(loom))]
pub mod balance;
mod comm;
pub mod config;
mod copy;
mod error;
#[doc(hidden)]
#[cfg(not(loom))]
pub mod ffi;
mod fiber;
mod loom;
mod moved;
mod par;
#[cfg(not(loom))]
pub mod pgas;
pub mod query;
pub mod remote;
mod runtime;
mod sched;
mod sync;
pub mod task;
mod test_harness;
pub mod trace;

// The everyday names, at the root (as rayon keeps `join` and `scope`
// there): tasks and loops, sync variables, the runtime, remote calls.
// The rest lives in its module: `config`, `task`, `query`, `remote`,
// `chant`, `pgas`, `balance`, `trace`.
pub use error::{Error, ErrorKind};
pub use par::{
    Forall, Schedule, Scope, TaskGroup, TaskList, begin, coforall, forall, forall_chunks_mut,
    forall_mut, join, scope, try_begin,
};
pub use remote::chant;
pub use remote::{Bulk, Remote, begin_on, coforall_locales, here, num_locales, on};
pub use runtime::{Runtime, run};
pub use sync::{SingleVar, SyncVar};

// Names that lived at the root before the API was grouped by concept
// (README, "Moved"): hidden, deprecated where Rust allows it.
#[allow(deprecated)]
#[doc(hidden)]
pub use moved::*;

/// The README's examples, compiled and run as doctests.
/// Peers for `cantus-bench`; not part of the API.
#[doc(hidden)]
#[cfg(not(loom))]
pub mod __bench {
    pub use crate::comm::shm::bench::raw_ring_round_trip;
    /// The codec alone, measured against postcard's (`cantus-bench comm`,
    /// the transfer rows).
    pub mod codec {
        /// Encodes `value` into a new vector, as a balanced piece is.
        pub fn encode<T: serde::Serialize + ?Sized>(value: &T) -> Vec<u8> {
            crate::remote::encode::encode_to_vec(value).expect("the value encodes")
        }
        /// Decodes a `T` from `bytes`, as a call's arguments are.
        pub fn decode<T: serde::de::DeserializeOwned>(bytes: &[u8]) -> T {
            crate::remote::codec::from_bytes(bytes).expect("the bytes decode")
        }
    }
    /// The scheduler's Chase-Lev deque, measured against crossbeam's
    /// (`cantus-bench deque`).
    pub mod deque {
        pub use crate::sched::deque::{Element, Steal, Stealer, Worker};
    }
}

/// Entry points for `cargo fuzz` (`fuzz/`); not part of the API.
#[cfg(not(loom))]
#[doc(hidden)]
pub mod __fuzz {
    /// Decodes one active-message frame (and checks it re-encodes).
    pub fn am_frame(bytes: &[u8]) {
        crate::remote::wire::fuzz_frame(bytes)
    }

    /// Feeds arbitrary fragments to a locale's reassembly.
    pub fn am_fragments(bytes: &[u8]) {
        crate::remote::fragment::fuzz_fragments(bytes)
    }

    /// Reads a shared-memory ring whose indices and data are `bytes`.
    pub fn ring_frames(bytes: &[u8]) {
        crate::comm::shm::ring::fuzz_consumer(bytes)
    }

    /// Decodes `bytes` with the codec as values of many shapes (and
    /// checks what decodes re-encodes stably).
    pub fn codec_values(bytes: &[u8]) {
        crate::remote::codec::fuzz_values(bytes)
    }

    /// Checks rendezvous notes and block headers made of `bytes`.
    pub fn rendezvous_notes(bytes: &[u8]) {
        crate::comm::shm::rendezvous::fuzz_notes(bytes)
    }
}

/// Hooks for tests that play a faulty peer; not part of the API.
#[doc(hidden)]
pub mod __test {
    #[cfg(all(feature = "mpi", not(loom)))]
    pub use crate::comm::mpi::{finalize_mpi_for_test, init_mpi_for_test};
    pub use crate::remote::{limit_message_bytes, send_raw_frame};

    /// Which memory this locale's global address space uses once it has
    /// one: `"shared"` or `"messages"` (`CANTUS_PGAS`).
    #[cfg(not(loom))]
    pub fn pgas_memory() -> Option<&'static str> {
        crate::pgas::installed_memory()
    }

    /// How many exchanges (`pgas::all_to_all` and its kind) this process
    /// made as the transport's own collective (MPI's all-to-all).
    #[cfg(not(loom))]
    pub fn native_exchanges() -> u64 {
        crate::pgas::native_exchanges()
    }

    /// How the global address space makes its barrier, broadcast and
    /// reductions: `"memory"`, `"messages"` or `"transport"` (MPI's
    /// non-blocking collectives), once it has one.
    #[cfg(not(loom))]
    pub fn pgas_collectives() -> Option<&'static str> {
        crate::pgas::installed_collectives()
    }

    /// The locales whose global-address-space segments this process
    /// reaches in place (maps), once it has a global address space.
    #[cfg(not(loom))]
    pub fn pgas_mapped_locales() -> Option<Vec<usize>> {
        crate::pgas::mapped_locales()
    }

    /// How many frames this process sent from shared-memory rendezvous
    /// blocks their encoder wrote in place (`comm/shm/README.md`,
    /// "Rendezvous", rule S).
    #[cfg(not(loom))]
    pub fn staged_frames() -> u64 {
        crate::comm::shm::transport::staged_frames()
    }

    /// How many Chant messages this process kept where MPI received them,
    /// lent out of a batch of several frames (`comm/mpi/README.md`,
    /// "Messages", 7).
    #[cfg(not(loom))]
    pub fn frames_lent_from_batches() -> u64 {
        crate::remote::engine::frames_lent_from_batches()
    }

    /// In an MPI job, the locales this rank shares a node's memory with
    /// (itself included; just itself where it is alone on its node or
    /// every frame goes through MPI), once the job started.
    #[cfg(all(feature = "mpi", not(loom)))]
    pub fn mpi_node_members() -> Option<Vec<usize>> {
        crate::comm::mpi::node_members()
    }
}

/// Re-exports for the expansion of [`remote!`]; not part of the API.
#[doc(hidden)]
pub mod __private {
    pub use crate::remote::handlers::{Handler, RemoteData};
    pub use inventory;
}

#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;
