#!/usr/bin/env bash
# Programs whose queue waits for their host (host_wait_check.py: a host
# function, a stream wait on a pinned flag, a kernel spinning on that flag,
# which needs CuPy) on a real GPU, without the
# interposer and capped at 30 under it; each under a 60 s hang detector.
# Prints one JSON line a run and whether the limiter gave up a drain
# ("charged as busy until now" in its log). From the repo root, on a GPU
# machine with PyTorch: OUT=DIR bash bench/compute/host_wait_gpu.sh
# (HOST_WAIT_MODES="spin" runs only the modes named).
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-$(mktemp -d)}
mkdir -p "$OUT"
LIB=$(bash bench/build_interposer.sh "$OUT/cmake.log") || exit 1
cc -O2 -shared -fPIC -o build-gpu/libhost_wait_gate.so bench/compute/host_wait_gate.c
export GATE_LIB=$(pwd)/build-gpu/libhost_wait_gate.so
state=$(mktemp -d)
for how in ${HOST_WAIT_MODES:-hostfunc hostwait spin}; do
    for round in 1 2; do
        echo "native $how round $round: $(timeout 60 python3 bench/compute/host_wait_check.py "$how" 3 2>&1 | tail -1) rc=$?"
        log=$OUT/$how-$round.log
        res=$(LD_PRELOAD=$LIB GPUSLICE_REGION=$state/$how-$round.region GPUSLICE_CORES=30 GPUSLICE_LOG_LEVEL=2 \
            timeout 60 python3 bench/compute/host_wait_check.py "$how" 3 2>"$log" | tail -1)
        rc=$?
        echo "cap30 $how round $round: $res rc=$rc (124: hung) given-up drains: $(grep -c 'charged as busy until now' "$log")"
    done
done
rm -rf "$state"
