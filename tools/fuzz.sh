#!/bin/sh
# tools/fuzz.sh SECONDS: builds the libFuzzer targets with clang in build-fuzz/ and runs
# each for SECONDS over the committed seed corpus, two at a time. Exits non-zero if any
# target crashes, fails an invariant, or does not build. New inputs go to build-fuzz/corpus/<target>/,
# so the committed corpus only changes when someone copies interesting inputs back.
set -eu

secs=${1:-}
case $secs in
'' | *[!0-9]*) echo "usage: $0 SECONDS" >&2; exit 2 ;;
esac

root=$(cd "$(dirname "$0")/.." && pwd)
build=$root/build-fuzz
cc=$(command -v clang-14 || command -v clang || true)
[ -n "$cc" ] || { echo "fuzz.sh: clang not found" >&2; exit 2; }
# Longest first (seconds for GS_FUZZ_RUNS=200000 on 2 cores: 95, 73, 44, 43,
# 10, 9, 6 (fuzz_kubeconfig), 4, 1, 1; fuzz_dra_claim not timed yet), so that the two lanes below
# end together.
targets="fuzz_region fuzz_config fuzz_ledger fuzz_admission fuzz_dra_claim fuzz_extender_json fuzz_annotation fuzz_kubeconfig fuzz_trace_csv fuzz_size_parse fuzz_roster"

# BUILD_TESTING=OFF: the fuzz build needs neither cmocka nor the other test suites.
cmake -S "$root" -B "$build" -DCMAKE_C_COMPILER="$cc" -DCMAKE_BUILD_TYPE=Release \
    -DGPUSLICE_FUZZ=ON -DBUILD_TESTING=OFF >/dev/null
# shellcheck disable=SC2086 # targets is a list
cmake --build "$build" -j2 --target $targets

# Runs target $1; prints its header and stats, or its log's last lines if it
# fails (then returns 1), all at once so that two lanes do not interleave.
fuzz_one() {
    t=$1
    work=$build/corpus/$t
    mkdir -p "$work"
    log=$build/$t.log
    runs=${GS_FUZZ_RUNS:-}
    # each fuzz_ledger input maps a file and takes OFD locks (~1200 inputs/s)
    [ -n "$runs" ] && [ "$t" = fuzz_ledger ] && runs=$((runs / 8))
    if [ -n "$runs" ]; then
        head="== $t: $runs inputs, seed 1"
    else
        head="== $t: ${secs}s"
    fi
    # config inputs carry a whole file; give them room past the 8 KiB line limit.
    maxlen=4096
    [ "$t" = fuzz_config ] && maxlen=20000
    dict=$root/tests/fuzz/$t.dict
    [ -f "$dict" ] && dict_opt=-dict=$dict || dict_opt=
    # shellcheck disable=SC2086 # dict_opt is empty or one word
    # GS_FUZZ_RUNS=N: a fixed number of inputs from a fixed seed, the same
    # on every machine (CI), instead of whatever SECONDS happen to cover.
    if [ -n "$runs" ]; then
        budget="-runs=$runs -seed=1"
    else
        budget="-max_total_time=$secs"
    fi
    # shellcheck disable=SC2086 # budget and dict_opt are word lists
    if "$build/tests/fuzz/$t" $budget -max_len="$maxlen" -print_final_stats=1 $dict_opt \
        -artifact_prefix="$build/crash-$t-" "$work" "$root/tests/fuzz/corpus/$t" >"$log" 2>&1; then
        echo "$head"
        grep -aE '^stat::(number_of_executed_units|new_units_added|peak_rss_mb)' "$log" || true
    else
        echo "$head" >&2
        echo "$t FAILED; last lines of $log:" >&2
        tail -n 30 "$log" >&2
        return 1
    fi
}

# Two lanes, each taking the next target not yet taken (mkdir is atomic):
# each target is single threaded, and two cores take two at once.
lanes=$(mktemp -d)
trap 'rm -rf "$lanes"' EXIT
for first in 1 2; do
    (
        status=0
        for t in $targets; do
            mkdir "$lanes/$t" 2>/dev/null || continue
            fuzz_one "$t" || status=1
        done
        echo "$status" >"$lanes/$first"
    ) &
done
wait
status=0
for first in 1 2; do
    [ "$(cat "$lanes/$first" 2>/dev/null || echo 1)" -eq 0 ] || status=1
done
exit $status
