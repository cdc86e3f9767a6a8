#!/bin/sh
# tools/test.sh: the whole test suite, as CI runs it (docs/testing.md):
#   1. Release build (-O2, -Werror) and every CTest test; the ones labelled
#      "slow" (compute scenarios on the slowed clock, nearly all waiting) run
#      in the background as soon as what they run is built, beside the rest
#      of the build and the steps after it;
#   2. in the background too, as SCHED_IDLE: each libFuzzer target for a
#      fixed count of inputs, then cppcheck, the .clang-format check and
#      clang-tidy, at once;
#   3. the sanitizer build (ASan + UBSan) and the tests a sanitizer can find
#      something in: all but "timing" and "python-only";
#   4. the background runs' outcome.
# tools/test.sh --quick: the Release build and the tests labelled "unit",
# "simdriver" or "quick" (fast integration tests), for use between edits.
# A test that fails is run once more; one that passes then is named as flaky
# in the summary at the end, and the run passes.
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
jobs=$(nproc)
fuzz_secs=${GS_FUZZ_SECONDS:-30}
# 120 000 inputs per target: in four fresh-clone runs on 2 cores fuzzing
# (144-199 s) and the checkers after it ended 16-99 s before the slow tests,
# which ended the suite (554-564 s; docs/testing.md).
fuzz_runs=${GS_FUZZ_RUNS:-120000}
# The slow tests wait on the slowed clock nearly all the time: four at a
# time, beside the steps after the release build (docs/testing.md, The slow
# tests).
slow_jobs=4

quick=
case ${1:-} in
'') ;;
--quick) quick=1 ;;
*) echo "usage: $0 [--quick]" >&2; exit 2 ;;
esac

work=$(mktemp -d)
flaky=$work/flaky
: >"$flaky"
t0=$(date +%s)
step_name='' step_t=0

# Ends the step that was running; prints the next one's header.
step() {
    now=$(date +%s)
    [ -z "$step_name" ] || printf '%5ds  %s\n' $((now - step_t)) "$step_name" >>"$work/steps"
    step_name=$* step_t=$now
    printf '\n==== %s (%s, %ds in) ====\n' "$*" "$(date -u +%H:%M:%S)" $((now - t0))
}

# At exit, pass or fail: the time of each step and the flaky tests by name.
summary() {
    status=$1 failed_step=$step_name
    for lane in slow checks; do
        [ ! -s "$work/$lane.pid" ] || kill_tree "$(cat "$work/$lane.pid")"
    done
    step "summary"
    cat "$work/steps"
    printf '%5ds  total\n' $(($(date +%s) - t0))
    if [ -s "$flaky" ]; then
        echo "FLAKY (failed once, passed when run again):"
        sed 's/^/  /' "$flaky"
    fi
    [ -z "$ctest_scope" ] || echo "test.sh: tests labelled 'root' were not run (not root)"
    if [ "$status" -eq 0 ]; then echo "all checks passed"; else echo "FAILED in: $failed_step"; fi
    rm -rf "$work"
}
trap 'summary $?' EXIT
trap 'exit 130' INT TERM

# A background run that is still going when the suite stops: its processes,
# children first, so that none is left behind.
kill_tree() {
    for child in $(ps -o pid= --ppid "$1"); do kill_tree "$child"; done
    kill "$1" 2>/dev/null || true
}

# Tests labelled "root" need it (the node agent hands state to pods' uids;
# pid namespaces): a normal user's run leaves them out and says so.
ctest_scope=
if [ "$(id -u)" -ne 0 ]; then
    ctest_scope=root
    echo "test.sh: not root: the tests labelled 'root' (node agent, pid namespaces) are left out;" \
        "run as root to include them"
fi
retry=$root/tools/ctest-retry.sh

# The -LE regular expression that leaves out the labels named and, when not
# root, "root". "^$" (no label is empty) where none is left out: an empty
# expression would match every label.
excluding() {
    labels=$(printf '%s|' "$@" ${ctest_scope:+"$ctest_scope"})
    labels=${labels%|}
    echo "${labels:-^\$}"
}

# await_lane LANE PIPE WHAT: waits for a background lane; fails the run,
# naming WHAT, if the lane failed or left no outcome.
await_lane() {
    wait "$2" || true
    rm -f "$work/$1.pid"
    rc=$(cat "$work/$1.rc" 2>/dev/null || echo 1)
    [ "$rc" -eq 0 ] || { echo "test.sh: $3 failed (lines marked [$1] above)"; exit 1; }
}

if [ -n "$quick" ]; then
    step "release build"
    cmake -S "$root" -B "$root/build" -DCMAKE_BUILD_TYPE=Release >/dev/null
    cmake --build "$root/build" -j"$jobs"
    step "quick tests (labels unit, simdriver, quick)"
    "$retry" "$root/build" release "$flaky" -j"$jobs" -L "unit|simdriver|quick" -LE "$(excluding)"
    exit 0
fi

# The slow tests bound the run: build what they run first (the interposer,
# the simulated driver and clock, the test client, the CLI and the
# driver-API benchmarks), start them, then build the rest beside them.
step "release build: what the slow tests run"
cmake -S "$root" -B "$root/build" -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$root/build" -j"$jobs" --target gpuslice gpuslice-cli gs_client gpuslice_simclock \
    gpuslice_sim_cuda gpuslice_sim_nvml gpuslice-simctl gpuslice-launch-rate gpuslice-probe-cost

step "slow tests start (label slow, in the background; lines marked [slow])"
(
    sh -c 'echo $PPID' >"$work/slow.pid"
    rc=0
    "$retry" "$root/build" release-slow "$flaky" -j"$slow_jobs" -L slow -LE "$(excluding)" || rc=$?
    echo "$rc" >"$work/slow.rc"
) 2>&1 | sed -u 's/^/[slow] /' &
slow_pipe=$!
# The slow tests' tenants must wake on time: everything from here on runs at
# the lowest priority, so that they take a core at once when they need one.
# Beside builds at the same priority, share pairs lost a tenth of the device.
renice -n 19 -p $$ >/dev/null

# Fuzzing and the checkers only compute, and nothing waits for them: they run
# in the background as SCHED_IDLE, which takes a core only when no other
# process wants it (one that wakes preempts it at once), and so fill the
# time the steps below leave idle while their tests wait. Fuzzing first (its
# own build): its targets are long and single threaded, clang-tidy's files
# short, which end the run on both cores; clang-tidy also needs the Release
# build's compile_commands.json and generated headers.
step "fuzz and checkers start (in the background, SCHED_IDLE; lines marked [checks])"
(
    sh -c 'echo $PPID' >"$work/checks.pid"
    chrt --idle -p 0 "$(cat "$work/checks.pid")"
    rc=0 t=$(date +%s)
    # A fixed count of inputs from a fixed seed: the run is the same on every
    # machine, so CI checks exactly what was checked before the commit.
    # Longer, exploring runs: tools/fuzz.sh SECONDS.
    echo "fuzz ($fuzz_runs inputs per target, seed 1)"
    GS_FUZZ_RUNS=$fuzz_runs "$root/tools/fuzz.sh" "$fuzz_secs" || rc=1
    printf '%5ds  fuzz (in the background from %ds in)\n' $(($(date +%s) - t)) $((t - t0)) >>"$work/steps"
    while [ ! -e "$work/release.built" ]; do sleep 1; done
    t=$(date +%s)
    echo "checkers at once: cppcheck, format, clang-tidy"
    "$root/tools/checkers.sh" "$root" || rc=1
    printf '%5ds  checkers (in the background from %ds in)\n' $(($(date +%s) - t)) $((t - t0)) >>"$work/steps"
    echo "$rc" >"$work/checks.rc"
) 2>&1 | sed -u 's/^/[checks] /' &
checks_pipe=$!

step "release build: the rest"
cmake --build "$root/build" -j"$jobs"
: >"$work/release.built"

step "release tests (all but slow)"
"$retry" "$root/build" release "$flaky" -j"$jobs" -LE "$(excluding slow)"

step "sanitizer build (ASan + UBSan)"
cmake -S "$root" -B "$root/build-asan" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DGPUSLICE_SANITIZE=ON >/dev/null
cmake --build "$root/build-asan" -j"$jobs"
step "sanitizer tests (all but timing and python-only)"
"$retry" "$root/build-asan" sanitizer "$flaky" -j"$jobs" -LE "$(excluding timing python-only)"

step "fuzz and checkers (waiting for the background run)"
await_lane checks "$checks_pipe" "fuzzing or the checkers"

step "slow tests (waiting for the background run)"
await_lane slow "$slow_pipe" "the slow tests"
