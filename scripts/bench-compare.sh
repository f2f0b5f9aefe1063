#!/usr/bin/env bash
# Compares two builds of cantus on this machine, in one session: the
# working tree and a given revision, each built in release as it is,
# their benchmark runs alternated (base first in odd rounds, the working
# tree first in even ones) so that the machine's drift falls on both.
#
#   scripts/bench-compare.sh [-n ROUNDS] REV [SUBCOMMAND ...]
#
# REV is any git revision (a commit, HEAD~3, main). The SUBCOMMANDs are
# cantus-bench's (default: `micro` and `apps`), each run with `--quick`
# unless FULL=1. Prints, per figure, the median of each build over the
# rounds and the working tree's over the base's (above 1: the working
# tree is slower or larger). Every change to sched/, sync/ or remote/ runs
# it against the revision before (BENCHMARKS.md, "Comparing two builds").
#
# The revision is checked out as a worktree in target/compare/ and built
# there with a target directory of its own; later runs reuse both.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)

rounds=5
if [ "${1:-}" = "-n" ]; then
    rounds=$2
    shift 2
fi
if [ $# -lt 1 ]; then
    echo "usage: scripts/bench-compare.sh [-n ROUNDS] REV [SUBCOMMAND ...]" >&2
    exit 2
fi
rev=$1
shift
subcommands=("$@")
[ ${#subcommands[@]} -gt 0 ] || subcommands=(micro apps)
quick=--quick
[ "${FULL:-0}" = 1 ] && quick=

sha=$(git rev-parse --verify --short=12 "$rev^{commit}")
out=$root/target/compare
src=$out/src-$sha
mkdir -p "$out/bin" "$out/runs"
if [ ! -d "$src" ]; then
    git worktree add --detach "$src" "$sha" >/dev/null
fi

echo "# building $rev ($sha) in $src" >&2
(cd "$src" && CARGO_TARGET_DIR=$out/target-$sha cargo build --release -q -p cantus-bench)
cp "$out/target-$sha/release/cantus-bench" "$out/bin/base"
echo "# building the working tree" >&2
cargo build --release -q -p cantus-bench
cp "$root/target/release/cantus-bench" "$out/bin/head"

runs=$out/runs/$(date +%Y%m%d-%H%M%S)
mkdir -p "$runs"
for round in $(seq 1 "$rounds"); do
    if [ $((round % 2)) = 1 ]; then order=(base head); else order=(head base); fi
    for sub in "${subcommands[@]}"; do
        tag=${sub// /_}
        for build in "${order[@]}"; do
            echo "# round $round/$rounds: $build $sub" >&2
            # shellcheck disable=SC2086
            "$out/bin/$build" $sub $quick > "$runs/$build.$tag.$round" 2>/dev/null ||
                echo "# $build $sub failed in round $round" >&2
        done
    done
done

echo "# figures: median over $rounds rounds; head = the working tree, base = $rev ($sha)"
printf '%-44s %14s %14s %9s\n' figure base head head/base
for sub in "${subcommands[@]}"; do
    tag=${sub// /_}
    for build in base head; do
        for f in "$runs/$build.$tag".*; do
            # "name value [unit]" lines; ratios ("name/peer value") too.
            awk -v b="$build" -v s="${sub%% *}" 'NF >= 2 && $2 ~ /^-?[0-9.]+$/ { print s ":" $1, b, $2 }' "$f"
        done
    done
done | sort -k1,1 -k2,2 -k3,3g | awk '
    function median(list, n,   a, k) {
        n = split(list, a, " ")
        if (n % 2) return a[(n + 1) / 2]
        return (a[n / 2] + a[n / 2 + 1]) / 2
    }
    { v[$1, $2] = (($1, $2) in v) ? v[$1, $2] " " $3 : $3; names[$1] = 1 }
    END {
        for (name in names) {
            base = (name, "base") in v ? median(v[name, "base"]) : "";
            head = (name, "head") in v ? median(v[name, "head"]) : "";
            r = (base != "" && head != "" && base + 0 != 0) ? sprintf("%.3f", head / base) : "-";
            printf "%-44s %14s %14s %9s\n", name, base, head, r
        }
    }' | sort
echo "# raw outputs: $runs"
