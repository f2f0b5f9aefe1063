#!/bin/sh
# Runs the Qthreads project's own tests (test/basics, test/features and
# test/stress of sandialabs/qthreads) unchanged against cantus's headers
# and library: an outside check that cantus is a drop-in Qthreads. The
# Qthreads source is never part of this repository: give the path of a
# checkout (git clone https://github.com/sandialabs/qthreads).
#
# Usage:
#     scripts/qthreads-suite.sh QTHREADS_DIR [--all | TEST ...]
# (none)        the C tests Qthreads' own CMakeLists.txt lists in the three
#               directories (what its `make test` runs)
# --all         every .c file there, also those Qthreads does not build
#               (guard_pages, wavefront)
# TEST          only these tests (names without .c, e.g. qthread_id)
# Environment:
#     QSUITE_TIMEOUT   seconds each test may run (default 120)
#     QSUITE_DIR       where programs and logs go (default target/qthreads-suite)
#     CARGO_TARGET_DIR cargo's build directory for the library (default target/capi)
#
# Each test is compiled with gcc -std=gnu11 against the installed headers
# (plus the suite's own test/ and test/utils/rng), linked with libcantus
# and the suite's rng helper, and run as the suite's CMake runs it
# (QT_NUM_SHEPHERDS=2, QT_NUM_WORKERS_PER_SHEPHERD=1). A test passes when
# it exits with 0 within the timeout. Prints one line per test and a
# summary; exits 0 when every test that ran passed and none failed to
# compile, 1 otherwise. Logs: QSUITE_DIR/NAME.{build,out}.
set -u

usage() { sed -n '2,26p' "$0" | sed 's/^# \{0,1\}//'; }

[ $# -ge 1 ] || { usage >&2; exit 2; }
case "$1" in -h|--help) usage; exit 0 ;; esac
qt=$(cd "$1" 2>/dev/null && pwd) || { echo "qthreads-suite.sh: no directory '$1'" >&2; exit 2; }
shift
[ -f "$qt/test/argparsing.h" ] || {
    echo "qthreads-suite.sh: '$qt' is not a Qthreads checkout (no test/argparsing.h)" >&2
    exit 2
}

repo=$(cd "$(dirname "$0")/.." && pwd)
timeout_s=${QSUITE_TIMEOUT:-120}
out=${QSUITE_DIR:-"$repo/target/qthreads-suite"}
target=${CARGO_TARGET_DIR:-"$repo/target/capi"}
prefix=$out/prefix
mkdir -p "$out/bin" || exit 2

sh "$repo/scripts/install-c.sh" --prefix "$prefix" --target-dir "$target" >"$out/install.log" 2>&1 || {
    echo "qthreads-suite.sh: building the library failed (log: $out/install.log)" >&2
    tail -n 20 "$out/install.log" >&2
    exit 2
}

rng="$qt/test/utils/rng"
gcc -std=gnu11 -O1 -fPIC -c "$rng/brg_sha1.c" -o "$out/brg_sha1.o" -I "$rng" &&
    gcc -std=gnu11 -O1 -fPIC -c "$rng/rng_brg.c" -o "$out/rng_brg.o" -I "$rng" || {
    echo "qthreads-suite.sh: the suite's rng helper did not compile" >&2
    exit 2
}

if [ "${1:-}" = "--all" ]; then
    tests=$(ls "$qt"/test/basics/*.c "$qt"/test/features/*.c "$qt"/test/stress/*.c)
elif [ $# -gt 0 ]; then
    tests=""
    for name in "$@"; do
        found=$(ls "$qt"/test/basics/"$name".c "$qt"/test/features/"$name".c \
            "$qt"/test/stress/"$name".c "$qt"/test/features/"$name".cpp 2>/dev/null | head -n 1)
        [ -n "$found" ] || { echo "qthreads-suite.sh: no test '$name'" >&2; exit 2; }
        tests="$tests $found"
    done
else
    # The tests of Qthreads' CMake lists: `qthreads_test(NAME ...)` (C)
    # and `qthreads_test_cpp(NAME ...)` (C++).
    tests=""
    for dir in basics features stress; do
        for name in $(sed -n 's/^ *qthreads_test(\([A-Za-z0-9_]*\).*/\1/p' \
            "$qt/test/$dir/CMakeLists.txt"); do
            tests="$tests $qt/test/$dir/$name.c"
        done
        for name in $(sed -n 's/^ *qthreads_test_cpp(\([A-Za-z0-9_]*\).*/\1/p' \
            "$qt/test/$dir/CMakeLists.txt"); do
            tests="$tests $qt/test/$dir/$name.cpp"
        done
    done
    unlisted=""
    for src in "$qt"/test/basics/*.c "$qt"/test/features/*.c "$qt"/test/stress/*.c; do
        case " $tests " in *" $src "*) ;; *) unlisted="$unlisted $(basename "$src" .c)" ;; esac
    done
fi

passed=0 failed=0 uncompiled=0 failed_list="" uncompiled_list=""
for src in $tests; do
    suite=$(basename "$(dirname "$src")")
    case "$src" in
        *.cpp) name=$(basename "$src" .cpp); cc="g++ -std=c++11" ;;
        *) name=$(basename "$src" .c); cc="gcc -std=gnu11" ;;
    esac
    exe=$out/bin/$name
    if ! $cc -O1 -g -w -I "$prefix/include" -I "$qt/test" -I "$rng" \
        "$src" "$out/brg_sha1.o" "$out/rng_brg.o" -o "$exe" \
        -L "$prefix/lib" -Wl,-rpath,"$prefix/lib" -lcantus -lpthread -lm \
        >"$out/$name.build" 2>&1; then
        uncompiled=$((uncompiled + 1))
        uncompiled_list="$uncompiled_list $name"
        first=$(grep -m 1 -E 'error|undefined' "$out/$name.build" | cut -c 1-150)
        printf '%-32s NOT COMPILED  %s\n' "$suite/$name" "$first"
        continue
    fi
    start=$(date +%s.%N)
    QT_NUM_SHEPHERDS=2 QT_NUM_WORKERS_PER_SHEPHERD=1 VERBOSE=0 \
        timeout -s KILL "$timeout_s" "$exe" >"$out/$name.out" 2>&1
    status=$?
    took=$(echo "$(date +%s.%N) - $start" | bc)
    if [ "$status" -eq 0 ]; then
        passed=$((passed + 1))
        printf '%-32s passed        %.2f s\n' "$suite/$name" "$took"
    else
        failed=$((failed + 1))
        failed_list="$failed_list $name"
        why="exit $status"
        [ "$status" -eq 137 ] && why="killed after ${timeout_s} s (exit 137)"
        last=$(tail -n 1 "$out/$name.out" | cut -c 1-100)
        printf '%-32s FAILED        %s: %s\n' "$suite/$name" "$why" "$last"
    fi
done

total=$((passed + failed + uncompiled))
echo "qthreads suite: $passed passed, $failed failed, $uncompiled not compiled, of $total"
[ -z "$failed_list" ] || echo "failed:$failed_list"
[ -z "$uncompiled_list" ] || echo "not compiled:$uncompiled_list"
[ -z "${unlisted:-}" ] || echo "not in Qthreads' CMake lists, not run (--all runs them):$unlisted"
[ "$failed" -eq 0 ] && [ "$uncompiled" -eq 0 ]
