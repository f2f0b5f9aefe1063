#!/usr/bin/env bash
# The test command: every test of the workspace, the loom models, and a
# quick smoke run of the examples and benchmarks (which check their own
# results).
set -euo pipefail
cd "$(dirname "$0")/.."

echo "== unit, integration, C ABI and doc tests"
cargo test --workspace

echo "== the API docs build without a warning (broken or private links)"
RUSTDOCFLAGS="-D warnings" cargo doc --no-deps --workspace

echo "== loom models"
RUSTFLAGS="--cfg loom" cargo test --release --lib --target-dir target/loom loom

echo "== examples (each checks its answer against a serial computation)"
cargo build --release --examples
./target/release/examples/fib 27
./target/release/examples/quicksort 1000000
./target/release/examples/tree 1000000
./target/release/examples/pingpong 20000
./target/release/examples/random_access 14 2
./target/release/examples/chant_polling 200
./target/release/examples/token_ring 200
./target/release/examples/block_farm 1024
./target/release/examples/chant_pingpong 1000
./target/release/examples/histogram 100000 2
./target/release/examples/stream_ep 1000000 2
./target/release/examples/putget 1000
# Work stealing across locales (balance/): each program checks its count.
./target/release/examples/uts T1
CANTUS_LOCALES=2 ./target/release/examples/uts T3
CANTUS_LOCALES=3 ./target/release/examples/nqueens 12
CANTUS_LOCALES=4 ./target/release/examples/pentomino 5x12
CANTUS_LOCALES=2 ./target/release/examples/fib_balanced 32
CANTUS_LOCALES=2 ./target/release/examples/lu 512
# Distributed-array codes (pgas/): a halo grid, an all-to-all-v.
./target/release/examples/jacobi 256 50 2
CANTUS_LOCALES=3 ./target/release/examples/jacobi 100 30
./target/release/examples/jacobi 256 200 2 exchange
CANTUS_LOCALES=4 ./target/release/examples/sample_sort 200000
./target/release/examples/sample_sort 100000 2 3
# A traced run of 2 locales, drawn and summed up by cantus-trace (each
# step fails on a trace it cannot read).
rm -f target/trace-uts.json
CANTUS_LOCALES=2 CANTUS_WORKERS=2 CANTUS_TRACE=target/trace-uts.json ./target/release/examples/uts T3
cargo run --release -q -p cantus-trace -- svg target/trace-uts.json target/trace-uts.svg
cargo run --release -q -p cantus-trace -- summary target/trace-uts.json
# The global address space's examples again on the message memory (each
# segment its owner's alone, reached by remote calls: pgas/README.md).
for example in "histogram 100000 2" "stream_ep 1000000 2" "putget 1000" "jacobi 256 30 3" \
               "sample_sort 100000 3"; do
    CANTUS_PGAS=messages ./target/release/examples/$example
done
# LU's pieces over messages start the next job's gets early (GlobalPtr::is_mapped).
CANTUS_PGAS=messages CANTUS_LOCALES=2 ./target/release/examples/lu 256

echo "== the Qthreads project's own tests against cantus (QTHREADS_SRC: a checkout)"
if [ -n "${QTHREADS_SRC:-}" ]; then
    ./scripts/qthreads-suite.sh "$QTHREADS_SRC"
else
    echo "skipped: set QTHREADS_SRC to a sandialabs/qthreads checkout to run them"
fi

echo "== the MPI transport (feature mpi): tests and examples under mpirun"
if command -v mpirun >/dev/null && command -v mpicc >/dev/null; then
    # Open MPI refuses root unless told; past 2 ranks on a small machine
    # it must oversubscribe.
    export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
    cargo test --features mpi --test mpi
    # The global address space's suite again, each job also as MPI ranks
    # over the message memory (MPI's own collectives).
    cargo test --features mpi --test pgas
    RUSTDOCFLAGS="-D warnings" cargo doc --no-deps --features mpi
    cargo build --release --features mpi --examples
    # Each progress mode (CANTUS_MPI_PROGRESS) on each path a frame takes
    # (CANTUS_MPI_NODES, src/comm/mpi/README.md): every rank a node of its
    # own (all through MPI), two nodes (the mixed job), this machine as
    # one node (all through shared memory, "-").
    for run in "inline 2 2" "inline 3 2" "inline 4 -" "thread 2 -" "thread 3 3" "thread 4 2"; do
        read -r mode n nodes <<<"$run"
        for ex in "pingpong 2000" "token_ring 100" "chant_pingpong 200" "fib 24" \
                  "histogram 20000" "stream_ep 100000" "putget 200" "uts T3" \
                  "nqueens 11" "pentomino 5x12" "fib_balanced 30" "lu 256" "jacobi 128 20" \
                  "sample_sort 50000" "block_farm 512"; do
            if [ "$nodes" = - ]; then unset CANTUS_MPI_NODES; else export CANTUS_MPI_NODES=$nodes; fi
            # shellcheck disable=SC2086
            CANTUS_MPI_PROGRESS=$mode timeout 120 mpirun --oversubscribe -x CANTUS_MPI_PROGRESS \
                ${CANTUS_MPI_NODES:+-x CANTUS_MPI_NODES} -n "$n" ./target/release/examples/$ex
        done
    done
    unset CANTUS_MPI_NODES
    # A traced run under mpirun: every rank's part merged by rank 0.
    rm -f target/trace-mpi.json
    CANTUS_TRACE=target/trace-mpi.json timeout 120 mpirun --oversubscribe -n 3 ./target/release/examples/uts T3
    cargo run --release -q -p cantus-trace -- summary target/trace-mpi.json | grep -cE "^ +[0-9]+ worker 0 " | grep -qx 3
    for n in 2 4; do  # random_access splits its table by a power of two
        timeout 120 mpirun --oversubscribe -n "$n" ./target/release/examples/random_access 12
    done
    # Open MPI's TCP path, the one that crosses a network, on this machine:
    # every rank a node (all through TCP), and two nodes of 3 ranks.
    for mode in inline thread; do
        CANTUS_MPI_PROGRESS=$mode CANTUS_MPI_NODES=3 timeout 120 mpirun --oversubscribe \
            --mca btl self,tcp -x CANTUS_MPI_PROGRESS -x CANTUS_MPI_NODES -n 3 \
            ./target/release/examples/token_ring 50
        CANTUS_MPI_PROGRESS=$mode CANTUS_MPI_NODES=2 timeout 120 mpirun --oversubscribe \
            --mca btl self,tcp -x CANTUS_MPI_PROGRESS -x CANTUS_MPI_NODES -n 3 \
            ./target/release/examples/token_ring 50
        CANTUS_MPI_PROGRESS=$mode CANTUS_MPI_NODES=2 timeout 120 mpirun --oversubscribe \
            --mca btl self,tcp -x CANTUS_MPI_PROGRESS -x CANTUS_MPI_NODES -n 2 \
            ./target/release/examples/putget 100
    done
else
    echo "(skipped: MPI is not installed; .ci/run installs Open MPI and libclang)"
fi

echo "== benchmark smoke runs (every benchmark checks its own result)"
cargo run --release -q -p cantus-bench -- all --quick
cargo run --release -q -p cantus-bench -- comm --quick
cargo run --release -q -p cantus-bench -- balance --quick --only uts_t1
cargo run --release -q -p cantus-bench -- balance-sim --quick
cargo run --release -q -p cantus-bench -- suite --quick --out target/bench-out
cargo run --release -q -p cantus-bench -- scale --quick --out target/bench-out
