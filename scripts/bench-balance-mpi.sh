#!/bin/bash
# Build first: cargo build --release -p cantus-bench --features mpi --target-dir target/mpi
# (BENCHMARKS.md, issue 17). PROGS="fib uts_t1" narrows the programs.
# Whole-process time (s) and mean TASK / NONE waits (us) of cantus-bench __balance_child PROG:
# shm 1 locale, shm 2 locales, MPI 2 ranks; 3 runs each, alternating.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
B=${B:-target/mpi/release/cantus-bench}
for prog in ${PROGS:-fib nqueens uts_t1 uts_large_t1l pentomino}; do
  for rep in 1 2 3; do
    for mode in shm1 shm2 mpi2; do
      case $mode in
        shm1) cmd="env CANTUS_LOCALES=1 CANTUS_WORKERS=1 $B __balance_child $prog";;
        shm2) cmd="env CANTUS_LOCALES=2 CANTUS_WORKERS=1 $B __balance_child $prog";;
        mpi2) cmd="mpirun -n 2 $B __balance_child $prog";;
      esac
      s=$(date +%s.%N); out=$(timeout 300 $cmd 2>/dev/null); e=$(date +%s.%N)
      echo "$prog $mode $(echo "$e - $s" | bc) $(echo $out | awk '{n=$3+0; t=$5+0; printf "none_us %.1f task_us %.1f", (n? $2/n/1000:0), (t? $4/t/1000:0)}')"
    done
  done
done
