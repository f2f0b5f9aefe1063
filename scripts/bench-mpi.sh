#!/usr/bin/env bash
# cantus over MPI in each progress mode beside raw MPI, alternating in one
# session (BENCHMARKS.md, issue 26). Build first:
#   cargo build --release -p cantus-bench --features cantus/mpi --examples
#   cargo build --release --features mpi --examples
# ROUNDS=3 rounds; BTLS="vader tcp" Open MPI's shared-memory and TCP paths.
# Each round runs, per path: `cantus-bench comm` (calls, Chant sizes, quiet
# rows) under each mode, the putget example under each mode, and UTS T1 on
# 2 ranks under each mode; then UTS T1 on 1 rank and the raw MPI peer
# (bench/c/mpi_pingpong.c: ping-pong, pipelined, MPI_Barrier on 2 and 4;
# over vader also without its single-copy mechanism, raw_mpi_no_cma).
# The paths (CANTUS_MPI_NODES, src/comm/mpi/README.md): "other" = every
# rank a node of its own, so cantus goes through MPI over the BTL; "same"
# = this machine as one node, cantus's ranks through shared memory (the
# BTL then only carries the raw peer). Prints one line per figure:
# path round who row value, path being "<btl>-other" or "<btl>-same".
# BIND="--bind-to none" where a rank's share is several cores: Open MPI
# binds each of 2 ranks to one core by default, and a rank runs as many
# workers as the CPUs it may use (README, "Across machines: MPI").
set -uo pipefail
cd "$(dirname "$0")/.."
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
B=target/release/cantus-bench
E=target/release/examples
PEER=$(find target/release/build -name mpi_pingpong -type f | head -1)
[ -x "$B" ] && [ -x "$E/uts" ] && [ -n "$PEER" ] || { echo "build first (see the header)"; exit 2; }
run() { timeout 600 mpirun ${BIND:-} --mca btl "self,$btl" -x CANTUS_MPI_PROGRESS "$@" 2>/dev/null; }
for btl in ${BTLS:-vader tcp}; do
  for round in $(seq 1 "${ROUNDS:-3}"); do
    for where in other same; do
      p="$btl-$where"
      for mode in inline thread; do
        export CANTUS_MPI_PROGRESS=$mode
        if [ "$where" = other ]; then n2=2; n4=4; else n2=1; n4=1; fi
        r2() { CANTUS_MPI_NODES=$n2 run -x CANTUS_MPI_NODES "$@"; }
        r4() { CANTUS_MPI_NODES=$n4 run -x CANTUS_MPI_NODES "$@"; }
        r2 -n 2 "$B" comm --only am --reps 5 | awk -v p="$p $round $mode" '/^am_[a-z_0-9]+ [0-9.]+ us$/ {print p, $1, $2}'
        r2 -n 2 "$B" comm --only chant_sizes --reps 3 | awk -v p="$p $round $mode" '/^chant_sizes_(1|8|1048576) [0-9.]+ us$/ {print p, $1, $2}'
        [ "$btl" = vader ] && r2 -n 2 "$B" comm --only quiet --reps 3 | awk -v p="$p $round $mode" '/^quiet_/ {print p, $1, $2}'
        r2 -n 2 "$E/putget" 20000 | sed -nE "s/.*8-byte put to locale 1 ([0-9.]+) ns, get ([0-9.]+) ns.*/$p $round $mode put_8b_ns \1\n$p $round $mode get_8b_ns \2/p; s/.*barrier of 2 locales ([0-9.]+) ns.*/$p $round $mode barrier_2_ns \1/p"
        r4 --oversubscribe -n 4 "$E/putget" 2000 | sed -nE "s/.*barrier of 4 locales ([0-9.]+) ns.*/$p $round $mode barrier_4_ns \1/p"
        r2 -n 2 "$E/uts" T1 | sed -nE "s/.* in ([0-9.]+) s on 2 locale.*/$p $round $mode uts_t1_2ranks_s \1/p; s/^ +1 +[0-9]+ +[0-9]+ +[0-9]+ +[0-9]+ +[0-9]+ +[0-9]+ \([0-9]+\) +[0-9]+ \([0-9]+\) +([0-9.]+) .*/$p $round $mode uts_t1_wait_for_work_us \1/p"
      done
      # The same node's path does not depend on the BTL: once, under vader.
      [ "$btl" = vader ] || break
    done
    unset CANTUS_MPI_PROGRESS
    run -n 1 "$E/uts" T1 | sed -nE "s/.* in ([0-9.]+) s on 1 locale.*/$btl $round one_rank uts_t1_1rank_s \1/p"
    mpirun --mca btl "self,$btl" -np 2 --bind-to core "$PEER" 50000 | awk -v p="$btl $round raw_mpi" '{print p, $1, $2}'
    # The shared-memory BTL without its single-copy mechanism (CMA), which
    # some VMs run 2.7x slower for large messages: the peer's best is the
    # faster of the two (BENCHMARKS.md, issue 28).
    [ "$btl" = vader ] && mpirun --mca btl "self,$btl" --mca btl_vader_single_copy_mechanism none \
        -np 2 --bind-to core "$PEER" 50000 | awk -v p="$btl $round raw_mpi_no_cma" '{print p, $1, $2}'
    mpirun --mca btl "self,$btl" --oversubscribe -np 4 --bind-to none "$PEER" 5000 barrier 2>/dev/null | awk -v p="$btl $round raw_mpi_4" '/barrier/ {print p, $1, $2}'
  done
done
