//! The CPUs this process may use (its affinity mask), and each rank's
//! share of its node's when several share a machine.

use super::*;

impl Config {
    /// Places this process in an MPI job once MPI told it where it is:
    /// locale `rank` of `size`, rank `node_rank` of the `node_size` on
    /// its node. The CPUs are shared among the node's ranks (not by the
    /// global locale number), and unless the worker count was given, a
    /// rank with an MPI thread (`progress_thread`) runs one worker fewer
    /// than its share of CPUs (at least one), leaving room for that
    /// thread; a rank that progresses inline runs its whole share.
    #[cfg_attr(not(feature = "mpi"), allow(dead_code))]
    pub(crate) fn place(
        &mut self,
        rank: usize,
        size: usize,
        node_rank: usize,
        node_size: usize,
        progress_thread: bool,
    ) {
        self.here = rank;
        self.locales = size;
        self.cpus = cpu_share(&affinity_cpus(), node_rank, node_size);
        if !self.workers_given {
            self.workers = if progress_thread {
                self.cpus.len().saturating_sub(1).max(1)
            } else {
                self.cpus.len().max(1)
            };
        }
    }

    /// This rank's share of its node's CPUs, from what the MPI launcher
    /// says before MPI starts (its node-local rank and size), or `None`
    /// if the launcher does not say (`CANTUS_MPI_PROGRESS=auto` then
    /// progresses inline).
    #[cfg_attr(not(feature = "mpi"), allow(dead_code))]
    pub(crate) fn cpu_share_before_mpi(&self) -> Option<usize> {
        launcher_cpu_share(&|v| std::env::var(v).ok(), &affinity_cpus())
    }
}

/// A rank's share of `cpus` by the node-local rank and size its launcher
/// put in the environment (Open MPI, MPICH's Hydra, PMIx), if it did.
#[cfg_attr(not(feature = "mpi"), allow(dead_code))]
pub(super) fn launcher_cpu_share(
    env: &dyn Fn(&str) -> Option<String>,
    cpus: &[usize],
) -> Option<usize> {
    let var = |names: &[&str]| {
        names
            .iter()
            .find_map(|n| env(n)?.trim().parse::<usize>().ok())
    };
    let rank = var(&[
        "OMPI_COMM_WORLD_LOCAL_RANK",
        "MPI_LOCALRANKID",
        "PMIX_LOCAL_RANK",
    ])?;
    let size = var(&[
        "OMPI_COMM_WORLD_LOCAL_SIZE",
        "MPI_LOCALNRANKS",
        "PMIX_LOCAL_SIZE",
    ])?;
    (rank < size).then(|| cpu_share(cpus, rank, size).len())
}

/// Locale `here`'s share of `cpus` when `locales` locales split them: a
/// contiguous slice, so N locales never start more workers than CPUs
/// (unless there are more locales than CPUs: then one CPU each, shared).
pub(super) fn cpu_share(cpus: &[usize], here: usize, locales: usize) -> Vec<usize> {
    if locales <= 1 || cpus.is_empty() {
        return cpus.to_vec();
    }
    let (lo, hi) = (
        here * cpus.len() / locales,
        (here + 1) * cpus.len() / locales,
    );
    if lo < hi {
        cpus[lo..hi].to_vec()
    } else {
        vec![cpus[here % cpus.len()]]
    }
}

pub(crate) fn page_size() -> usize {
    // SAFETY: sysconf has no preconditions.
    let p = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    if p > 0 { p as usize } else { 4096 }
}

/// The CPUs this process may run on, from its affinity mask.
pub(crate) fn affinity_cpus() -> Vec<usize> {
    // SAFETY: cpu_set_t is plain data; zeroed is a valid empty set.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: `set` is a valid, writable cpu_set_t of the size we pass.
    let rc =
        unsafe { libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) };
    if rc != 0 {
        let n = std::thread::available_parallelism().map_or(1, |n| n.get());
        return (0..n).collect();
    }
    (0..libc::CPU_SETSIZE as usize)
        // SAFETY: `i` is below CPU_SETSIZE, the set's capacity.
        .filter(|&i| unsafe { libc::CPU_ISSET(i, &set) })
        .collect()
}
