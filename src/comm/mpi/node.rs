//! The ranks of one node: which ranks of an MPI job share memory, and
//! the node's shared region, which they talk through instead of MPI
//! (`route.rs`), as GASNet's PSHM, UPC++ and Chapel do.
//!
//! A node is the ranks `MPI_Comm_split_type(MPI_COMM_TYPE_SHARED)` puts
//! together, or, under the testing setting `CANTUS_MPI_NODES=k`, one of
//! `k` blocks of consecutive ranks of each such node (so that one
//! machine can run the mixed path, where some locales share memory and
//! others do not).
//!
//! The region is the shared-memory transport's (`comm/shm/`: rings per
//! pair of members, doorbells, the global address space's areas), made
//! by the node's first rank as an anonymous file (`memfd_create`), never
//! a name in `/dev/shm`: the first rank tells the others, by an MPI
//! broadcast, its pid and the descriptor's number, and each opens
//! `/proc/<pid>/fd/<n>` (`Region::open_handed_over`). So a crash at any
//! moment leaves nothing behind: the file goes with the last process
//! that maps it. (A name unlinked once every rank mapped it leaves a
//! file behind if the job dies between; an MPI shared window is backed
//! by a file the MPI library names, and cannot hold the futex words the
//! doorbells sleep on in every MPI.) If any rank of a node cannot open
//! it (`/proc` mounted with `hidepid`, ranks of different users), the
//! whole node falls back to MPI between its ranks, and says so once.

use super::sys::{self, MPI_Comm};
use crate::comm::shm::region::Region;
use crate::comm::shm::transport::{Shape, ShmTransport};
use crate::config::MPI_NODES_VAR;
use crate::error::{Error, ErrorKind};
use std::sync::Arc;

/// What a node's region is made with.
pub(super) struct NodeSetup {
    /// `CANTUS_MPI_NODES` on this rank: `None`, the real nodes.
    pub(super) nodes: Option<usize>,
    /// Bytes of each ring between two members.
    pub(super) ring_bytes: usize,
    /// Bytes of each member's heap segment (the global address space).
    pub(super) heap_bytes: usize,
    /// Bytes of each ordered pair's rendezvous area (`comm/shm/README.md`,
    /// "Rendezvous"; 0: off), which also sizes MPI's large frames.
    pub(super) rendezvous_bytes: usize,
}

/// This rank's node.
pub(super) struct Node {
    /// The world ranks of the node's members, ascending: member `i` is
    /// locale `members[i]`; just this rank where `shm` is `None`.
    pub(super) members: Vec<usize>,
    /// This rank's place on its real node (`MPI_COMM_TYPE_SHARED`), and
    /// how many ranks that node has: its share of the machine's CPUs.
    pub(super) real_rank: usize,
    pub(super) real_size: usize,
    /// The launcher gave the real node's ranks CPU sets that differ
    /// (`--map-by ...:PE=n`, or Open MPI's default binding of one core
    /// each): each rank's set is its own share, not to be divided again.
    pub(super) bound_apart: bool,
    /// The node's shared-memory transport, with this rank as member
    /// `members.binary_search(rank)`; `None` when the rank is alone on
    /// its node (or the node could not share memory).
    pub(super) shm: Option<Arc<ShmTransport>>,
}

/// Finds this rank's node in `comm` (every rank of `comm` calls it, in
/// the same order as its other collectives) and, where the node has
/// other ranks, makes or opens the node's region. An error on every
/// rank alike where the ranks disagree on `CANTUS_MPI_NODES`.
pub(super) fn join(comm: MPI_Comm, rank: usize, setup: &NodeSetup) -> Result<Node, Error> {
    // Every rank must split alike: compare the setting everywhere.
    let settings = sys::all_gather(&[setup.nodes.map_or(0, |k| k as u64)], comm)?;
    if let Some((other, &theirs)) = settings
        .iter()
        .enumerate()
        .find(|&(_, &k)| k != settings[0])
    {
        let say = |k: u64| {
            if k == 0 {
                "unset".to_string()
            } else {
                k.to_string()
            }
        };
        return Err(Error::new(
            ErrorKind::InvalidConfig,
            format!(
                "cantus: {MPI_NODES_VAR} is {} on rank 0 but {} on rank {other}: every rank \
                 must see the same (pass it to each with mpirun -x {MPI_NODES_VAR})",
                say(settings[0]),
                say(theirs)
            ),
        ));
    }
    let mut real = sys::split_node(comm)?;
    let placed = place(real, rank, setup);
    let freed = sys::free(&mut real);
    let node = placed?;
    freed?;
    Ok(node)
}

/// The rest of [`join`], on the real node's communicator `real`.
fn place(real: MPI_Comm, rank: usize, setup: &NodeSetup) -> Result<Node, Error> {
    let (real_rank, real_size) = sys::rank_and_size(real)?;
    let mask = affinity_words(&crate::config::affinity_cpus());
    let masks = sys::all_gather(&mask, real)?;
    let bound_apart = bound_apart(&masks, &mask);
    // `k` blocks of consecutive ranks (at most one rank each).
    let k = setup.nodes.unwrap_or(1).min(real_size);
    let block = real_rank * k / real_size;
    let mut part = sys::split(real, block, real_rank)?;
    let made = share(part, rank, setup);
    let freed = sys::free(&mut part);
    let (members, shm) = made?;
    freed?;
    Ok(Node {
        members,
        real_rank,
        real_size,
        bound_apart,
        shm,
    })
}

/// Whether any rank's CPU set among the gathered `masks` (each as long as
/// `mine`) differs from this rank's.
fn bound_apart(masks: &[u64], mine: &[u64]) -> bool {
    masks.chunks(mine.len()).any(|m| m != mine)
}

/// A CPU set as words of bits (CPU `c` is bit `c % 64` of word `c / 64`),
/// of a fixed length whatever the set (every rank gathers as many).
fn affinity_words(cpus: &[usize]) -> Vec<u64> {
    let mut words = vec![0u64; libc::CPU_SETSIZE as usize / 64];
    for &c in cpus.iter().filter(|&&c| c < libc::CPU_SETSIZE as usize) {
        words[c / 64] |= 1 << (c % 64);
    }
    words
}

/// The node's members and, if it has several, its region: made by its
/// first member, opened by the others, kept only if every one has it.
fn share(
    part: MPI_Comm,
    rank: usize,
    setup: &NodeSetup,
) -> Result<(Vec<usize>, Option<Arc<ShmTransport>>), Error> {
    let (index, size) = sys::rank_and_size(part)?;
    let members: Vec<usize> = sys::all_gather(&[rank as u64], part)?
        .into_iter()
        .map(|r| r as usize)
        .collect();
    debug_assert!(members.windows(2).all(|w| w[0] < w[1]));
    if size == 1 {
        return Ok((members, None));
    }
    // [made, pid, fd, job pid, job nanos] from the first member.
    let mut words = [0u64; 5];
    let mut mine: Result<Option<ShmTransport>, Error> = Ok(None);
    if index == 0 {
        match ShmTransport::create(Shape {
            locales: size,
            ring_bytes: setup.ring_bytes,
            heap_bytes: setup.heap_bytes,
            rendezvous_bytes: setup.rendezvous_bytes,
        }) {
            Ok(t) => {
                words[0] = 1;
                words[1..].copy_from_slice(&t.region().handover());
                mine = Ok(Some(t));
            }
            Err(e) => mine = Err(e),
        }
    }
    sys::broadcast(&mut words, part)?;
    if index != 0 && words[0] == 1 {
        let handed = [words[1], words[2], words[3], words[4]];
        mine = Region::open_handed_over(handed)
            .and_then(|region| ShmTransport::attach(region, index))
            .map(Some);
    }
    let ok = matches!(mine, Ok(Some(_)));
    // Everyone opened it before this returns, so the first member may
    // drop its end afterwards (nobody opens it through /proc any more).
    let all = sys::all_gather(&[u64::from(ok)], part)?;
    if all.iter().all(|&o| o == 1) {
        let shm = mine.ok().flatten().map(Arc::new);
        return Ok((members, shm));
    }
    if let Err(e) = &mine {
        // Each rank that failed says why; then the node's ranks talk
        // through MPI, as ranks on different nodes do.
        if index == 0 || words[0] == 1 {
            eprintln!(
                "cantus: rank {rank}: the ranks {members:?} share a node but cannot share \
                 memory ({e}); they talk through MPI instead"
            );
        }
    }
    Ok((vec![rank], None))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_sets_compare_as_words() {
        let both = affinity_words(&[0, 1, 70]);
        assert_eq!(both[0], 0b11);
        assert_eq!(both[1], 1 << 6);
        let (a, b) = (affinity_words(&[0]), affinity_words(&[1]));
        // Ranks that may all use the same CPUs share them; ranks bound to
        // sets of their own keep theirs.
        assert!(!bound_apart(&[both.clone(), both.clone()].concat(), &both));
        assert!(bound_apart(&[a.clone(), b].concat(), &a));
    }
}
