#!/usr/bin/env bash
# Runs the C deadlock program N times (default 1000) with a 200 ms grace
# period; every run must end with the deadlock report (SIGABRT and the
# message) within 10 s. A run that hangs is killed and counted as a
# failure. Also runs the "busy" variant (a declared outside thread fills
# the word late: no report, clean exit) N/10 times.
# Usage: scripts/deadlock-stress.sh [N]
set -euo pipefail
cd "$(dirname "$0")/.."
n=${1:-1000}
work=target/deadlock-stress
mkdir -p "$work"
sh scripts/install-c.sh --prefix "$work/prefix" --target-dir target/capi >/dev/null
export PKG_CONFIG_PATH="$PWD/$work/prefix/lib/pkgconfig"
# shellcheck disable=SC2046
gcc -O2 -Wall -Werror tests/c/deadlock.c -o "$work/deadlock" $(pkg-config --cflags --libs cantus) \
    -Wl,-rpath,"$PWD/$work/prefix/lib"
reported=0 hung=0 other=0
for i in $(seq 1 "$n"); do
    set +e
    CANTUS_DEADLOCK_MS=200 timeout -s KILL 10 "$work/deadlock" >/dev/null 2>"$work/err"
    rc=$?
    set -e
    if [ $rc -eq 134 ] && grep -q "cantus: deadlock" "$work/err"; then
        reported=$((reported + 1))
    elif [ $rc -eq 137 ]; then
        hung=$((hung + 1)); echo "run $i: hung (killed after 10 s)"
    else
        other=$((other + 1)); echo "run $i: exit $rc"; cat "$work/err"
    fi
done
busy_ok=0 busy_bad=0
for i in $(seq 1 $((n / 10))); do
    set +e
    CANTUS_DEADLOCK_MS=200 timeout -s KILL 10 "$work/deadlock" busy >/dev/null 2>"$work/err"
    rc=$?
    set -e
    if [ $rc -eq 0 ]; then busy_ok=$((busy_ok + 1)); else busy_bad=$((busy_bad + 1)); echo "busy run $i: exit $rc"; cat "$work/err"; fi
done
echo "deadlock reported: $reported/$n, hung: $hung, other: $other; busy variant clean: $busy_ok/$((n / 10))"
[ "$reported" -eq "$n" ] && [ "$busy_bad" -eq 0 ]
