#!/bin/sh
# The cost of a task through the Qthreads API, cantus against Qthreads
# itself, in one run (issue 30). Builds Qthreads from a checkout whose
# path it is given (its source is never part of this repository: git
# clone https://github.com/sandialabs/qthreads, then check out the
# release to compare, e.g. `git checkout 1.23`), builds cantus's C
# library, compiles bench/c/qthread_tasks.c against each (the same file,
# Qthreads' API only; cantus's build adds the cantus_coforall row), and
# runs the two in turn.
#
# Usage:
#     scripts/bench-qthreads.sh QTHREADS_DIR [-n ROUNDS] [-w WORKERS] [N]
# QTHREADS_DIR  a Qthreads checkout (CMake build, 1.20 or later)
# -n ROUNDS     runs of each program, alternated (default 3); medians
# -w WORKERS    shepherds (one worker each) for both (default: the cores)
# N             tasks per row (default 1000000)
# Environment:
#     QTHREADS_SCHEDULER  Qthreads' scheduler (default its own: nemesis)
#     BENCH_DIR           where builds go (default target/bench-qthreads)
#
# Both run with QT_NUM_SHEPHERDS=WORKERS and QT_NUM_WORKERS_PER_SHEPHERD=1
# (nemesis runs one worker per shepherd). Prints each program's rows
# (ns per task, best of the program's 7 inner runs; median over rounds),
# cantus/Qthreads per row, and fork_readff/coforall for cantus.
set -u

usage() { sed -n '2,25p' "$0" | sed 's/^# \{0,1\}//'; }

[ $# -ge 1 ] || { usage >&2; exit 2; }
case "$1" in -h|--help) usage; exit 0 ;; esac
qt=$(cd "$1" 2>/dev/null && pwd) || { echo "bench-qthreads.sh: no directory '$1'" >&2; exit 2; }
shift
[ -f "$qt/include/qthread/qthread.h" ] && [ -f "$qt/CMakeLists.txt" ] || {
    echo "bench-qthreads.sh: '$qt' is not a Qthreads checkout with CMake (no include/qthread/qthread.h, CMakeLists.txt)" >&2
    exit 2
}
rounds=3
workers=$(nproc)
n=1000000
while [ $# -gt 0 ]; do
    case "$1" in
        -n) rounds=${2:?-n needs a count}; shift 2 ;;
        -w) workers=${2:?-w needs a count}; shift 2 ;;
        -*) echo "bench-qthreads.sh: unknown option $1" >&2; exit 2 ;;
        *) n=$1; shift ;;
    esac
done
command -v cmake >/dev/null || { echo "bench-qthreads.sh: needs cmake (apt-get install cmake)" >&2; exit 2; }

repo=$(cd "$(dirname "$0")/.." && pwd)
out=${BENCH_DIR:-"$repo/target/bench-qthreads"}
sched=${QTHREADS_SCHEDULER:-nemesis}
qbuild=$out/qthreads-$sched-build
qprefix=$out/qthreads-$sched
mkdir -p "$out" "$qbuild" || exit 2

echo "== Qthreads ($qt, scheduler $sched) -> $qprefix"
if [ ! -f "$qprefix/lib/libqthread.so" ]; then
    (cd "$qbuild" &&
        cmake "$qt" -DCMAKE_BUILD_TYPE=Release -DCMAKE_INSTALL_PREFIX="$qprefix" \
            -DQTHREADS_SCHEDULER="$sched" >"$out/qthreads-cmake.log" 2>&1 &&
        make -j"$(nproc)" qthread >"$out/qthreads-make.log" 2>&1 &&
        make install >>"$out/qthreads-make.log" 2>&1) || {
        echo "bench-qthreads.sh: building Qthreads failed (logs: $out/qthreads-*.log)" >&2
        exit 2
    }
fi

echo "== cantus -> $out/cantus"
sh "$repo/scripts/install-c.sh" --prefix "$out/cantus" >"$out/cantus-install.log" 2>&1 || {
    echo "bench-qthreads.sh: building cantus failed (log: $out/cantus-install.log)" >&2
    exit 2
}

src=$repo/bench/c/qthread_tasks.c
gcc -O2 -std=c11 -Wall "$src" -I"$qprefix/include" -L"$qprefix/lib" -Wl,-rpath,"$qprefix/lib" \
    -lqthread -o "$out/qthread_tasks_qthreads" || exit 2
gcc -O2 -std=c11 -Wall -DWITH_CANTUS "$src" -I"$out/cantus/include" -L"$out/cantus/lib" \
    -Wl,-rpath,"$out/cantus/lib" -lcantus -o "$out/qthread_tasks_cantus" || exit 2

echo "== $rounds rounds, $workers shepherds, N=$n ($(date -u +%Y-%m-%d), $(nproc) cores)"
: >"$out/results"
r=1
while [ "$r" -le "$rounds" ]; do
    for who in qthreads cantus; do
        QT_NUM_SHEPHERDS=$workers QT_NUM_WORKERS_PER_SHEPHERD=1 \
            timeout 600 "$out/qthread_tasks_$who" "$n" >"$out/run.$who.$r" 2>&1 || {
            echo "bench-qthreads.sh: $who round $r failed:" >&2
            cat "$out/run.$who.$r" >&2
            exit 1
        }
        awk -v who="$who" '$3 == "ns" { print who, $1, $2 }' "$out/run.$who.$r" >>"$out/results"
    done
    r=$((r + 1))
done

awk '
    { v[$1 " " $2, ++k[$1 " " $2]] = $3; rows[$2] = 1 }
    function median(key,   n, i, j, t, a) {
        n = k[key]
        for (i = 1; i <= n; i++) a[i] = v[key, i]
        for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (a[j] < a[i]) { t = a[i]; a[i] = a[j]; a[j] = t }
        return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
    }
    END {
        printf "%-16s %12s %12s %10s\n", "row (ns/task)", "Qthreads", "cantus", "ratio"
        split("fork_readff fork_readff_one fork_sinc qt_loop fib_tasks coforall", order, " ")
        for (i = 1; i <= 6; i++) {
            r = order[i]
            if (!(r in rows)) continue
            q = ("qthreads " r) in k ? median("qthreads " r) : 0
            c = ("cantus " r) in k ? median("cantus " r) : 0
            if (q > 0) printf "%-16s %12.1f %12.1f %9.2fx\n", r, q, c, c / q
            else printf "%-16s %12s %12.1f %10s\n", r, "-", c, "-"
        }
        if (("cantus fork_readff") in k && ("cantus coforall") in k)
            printf "cantus fork_readff / coforall: %.2fx (issue 30 target <= 2x)\n",
                median("cantus fork_readff") / median("cantus coforall")
    }' "$out/results"
