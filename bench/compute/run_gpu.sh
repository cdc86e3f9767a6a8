#!/usr/bin/env bash
# GPU benchmark of the compute limiter (docs/compute.md, issue 12's table). From the repo root:
#   bash bench/compute/run_gpu.sh [--only LOADS,SCENARIOS] [--caps 10,30,50,70] [--log DIR]
#        [--rounds N] [--coloc-modes plain,plain-shallow,share70/30,share70/30-yieldY,cap70/30,free/cap30,free/share30,mps70/30,mps-plain,mps-share70/30]
#        [--share-yield 100,250,500] [--inf-load decoder|decoder-heavy] [--turn-cycles N] [--turn-yield 250,500]
#        [--copies N] [--plain-copies N] [--turn-cpus shared|own] [--base-lib LIB]
# LOADS: matmul matmul-dense small decoder train graphinf jax cupy; SCENARIOS: coloc mps decoverhead fresh turns capturns two four launch launchc
# (mps with two: the two containers again, one directory, as clients of an MPS daemon; pod with two:
# the agent's layout beside the same with each tenant in a pid namespace of its own, as a pod without
# hostPID, instead of one directory)
# (--base-lib LIB, an A/B in the same turns: the device tool's copy of .git may predate recent
# commits, so build an older library where the commit is, and carry it)
# (turns: the co-location scenarios in alternating 2.5 s turns, every tenant started once; the share
# pair also in the node agent's layout, each its own state directory, one ledger directory).
# --log DIR keeps each limited tenant's debug log (and packs DIR into $OUT/logs.tgz at the end, also
# when killed by a time limit: the device tool brings back only a few files), whose last lines say where the limiter spent
# the tenant's host time (probes, drains, outer loop and its NVML reads, token and turn waits,
# progress markers, yields, the launch gate's fast path).
# Needs an NVIDIA GPU, PyTorch with CUDA (transformers for the decoder), cmake and a C compiler.
# Builds the interposer alone and the driver-API launch loop (launch_rate.c), then runs
# bench/compute/gputime.py: $OUT/gputime.jsonl, one JSON line per scenario (bench/compute/summarize.py
# prints the capturns lines and the --log DIR's waits and costs). Everything at
# BENCH_SECS=20 takes well over one 10-minute device call: split it with --only
# (bench/compute/table.sh does, for docs/compute.md's results table).
# (clock_settle.py times how fast the clock follows a change of load, no interposer; grow.py, a
# light load that turns GPU-bound, how a cap running free holds once it grows;
# event_cost.c, the GPU time an event record adds between a step's kernels, on the bare driver;
# graph_step_cost.py, what records, a CPU gap, a probe and an idle add to a CUDA-graph step;
# bench.py, diag.py, trace.py and small_load.py are the earlier window-time benchmarks that
# bench/results/compute-2026-11-2[12]-* name.)
set -euo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-$(mktemp -d)}
mkdir -p "$OUT"
LIB=$(bash bench/build_interposer.sh "$OUT/cmake.log") || exit 1
cc -O2 -Isrc bench/compute/launch_rate.c -ldl -o build-gpu/launch_rate
nvidia-smi --query-gpu=name,uuid,driver_version --format=csv,noheader | tee "$OUT/gpu.txt" || true
LOGDIR=
for ((i = 1; i < $#; i++)); do
    [ "${!i}" = --log ] && { j=$((i + 1)); LOGDIR=${!j}; }
done
pack_logs() {
    if [ -n "$LOGDIR" ] && [ -d "$LOGDIR" ]; then
        tar czf "$OUT/logs.tgz" -C "$LOGDIR" . || true
    fi
}
PY=
trap pack_logs EXIT
trap '[ -n "$PY" ] && kill "$PY" 2>/dev/null; pack_logs; trap - EXIT; exit 143' TERM
# in the background, so that a TERM (timeout) interrupts the wait and the logs are packed
python3 bench/compute/gputime.py --lib "$LIB" --out "$OUT" --secs "${BENCH_SECS:-20}" \
    --launch-bin "$(pwd)/build-gpu/launch_rate" "$@" &
PY=$!
wait "$PY"
