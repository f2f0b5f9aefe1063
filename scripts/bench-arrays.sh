#!/usr/bin/env bash
# Distributed-array codes beside their C MPI peers, alternating in one
# session (BENCHMARKS.md, issue 29): examples/jacobi (2-D stencil on a
# pgas::HaloGrid) against bench/c/jacobi_mpi.c (MPI_Sendrecv), the halo
# exchange alone, and examples/sample_sort (all_to_all_v) against
# bench/c/sample_sort_mpi.c (MPI_Alltoallv). cantus runs on shared memory
# (CANTUS_LOCALES), under mpirun with the ranks of this machine as one
# node (its shared memory: "cantus_mpirun"), and under mpirun with every
# rank a node of its own (CANTUS_MPI_NODES=2: everything through MPI,
# "cantus_mpi_nodes"); the C programs under mpirun, bound to cores.
# Needs mpicc and mpirun. ROUNDS=3 rounds; N=2048 ITERS=100 for Jacobi,
# KEYS=4000000 and SORTS=9 sorts per program for the sort (each program
# reports its median sort: the first two or three of a process fault in
# fresh memory, in C as in Rust). Prints "round who row value" lines.
set -uo pipefail
cd "$(dirname "$0")/.."
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
N=${N:-2048} ITERS=${ITERS:-100} KEYS=${KEYS:-4000000} SORTS=${SORTS:-9}
mkdir -p target/c-peers
mpicc -O3 -Wall -o target/c-peers/jacobi_mpi bench/c/jacobi_mpi.c || exit 2
mpicc -O3 -Wall -o target/c-peers/sample_sort_mpi bench/c/sample_sort_mpi.c || exit 2
cargo build --release -q --features mpi --example jacobi --example sample_sort || exit 2
E=target/release/examples C=target/c-peers
# One worker a locale, as each MPI rank bound to its core has.
export CANTUS_WORKERS=1
mpi() { timeout 600 mpirun --bind-to core -x CANTUS_WORKERS "$@" 2>/dev/null; }
nodes() { CANTUS_MPI_NODES=2 mpi -x CANTUS_MPI_NODES "$@"; }
us() { sed -nE 's/.*: ([0-9.]+) us per (iteration|exchange).*/\1/p'; }
exch() { sed -nE 's/.*\(([0-9.]+) us of it.*/\1/p'; }
ms() { sed -nE 's/.*: ([0-9.]+) ms \(([0-9.]+) ms of it.*/\1 \2/p'; }
for round in $(seq 1 "${ROUNDS:-3}"); do
  for l in 1 2; do
    out=$("$E/jacobi" "$N" "$ITERS" "$l")
    echo "$round cantus_shm jacobi_${l}loc_us $(us <<<"$out") exchange_us $(exch <<<"$out")"
    out=$(mpi -n "$l" "$E/jacobi" "$N" "$ITERS")
    echo "$round cantus_mpirun jacobi_${l}loc_us $(us <<<"$out") exchange_us $(exch <<<"$out")"
    if [ "$l" = 2 ]; then
      out=$(nodes -n 2 "$E/jacobi" "$N" "$ITERS")
      echo "$round cantus_mpi_nodes jacobi_2loc_us $(us <<<"$out") exchange_us $(exch <<<"$out")"
    fi
    out=$(mpi -n "$l" "$C/jacobi_mpi" "$N" "$ITERS")
    echo "$round c_mpi jacobi_${l}rank_us $(us <<<"$out") exchange_us $(exch <<<"$out")"
  done
  echo "$round cantus_shm halo_exchange_us $("$E/jacobi" "$N" 2000 2 exchange | us)"
  echo "$round cantus_mpirun halo_exchange_us $(mpi -n 2 "$E/jacobi" "$N" 2000 2 exchange | us)"
  echo "$round cantus_mpi_nodes halo_exchange_us $(nodes -n 2 "$E/jacobi" "$N" 2000 2 exchange | us)"
  echo "$round c_mpi halo_exchange_us $(mpi -n 2 "$C/jacobi_mpi" "$N" 2000 exchange | us)"
  echo "$round cantus_shm sample_sort_ms_alltoallv_ms $("$E/sample_sort" "$KEYS" 2 "$SORTS" | ms)"
  echo "$round cantus_mpirun sample_sort_ms_alltoallv_ms $(mpi -n 2 "$E/sample_sort" "$KEYS" 2 "$SORTS" | ms)"
  echo "$round cantus_mpi_nodes sample_sort_ms_alltoallv_ms $(nodes -n 2 "$E/sample_sort" "$KEYS" 2 "$SORTS" | ms)"
  echo "$round c_mpi sample_sort_ms_alltoallv_ms $(mpi -n 2 "$C/sample_sort_mpi" "$KEYS" "$SORTS" | ms)"
done
