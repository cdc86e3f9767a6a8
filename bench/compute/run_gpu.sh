#!/usr/bin/env bash
# GPU benchmark of the compute limiter (docs/compute.md). Run from the repo root:
#   bash bench/compute/run_gpu.sh [--only scenario,scenario...]
# Needs an NVIDIA GPU, PyTorch with CUDA, cmake and a C compiler. Writes
# $OUT/compute_results.jsonl (one JSON line per scenario) and prints a table.
# All scenarios take ~15 minutes at BENCH_SECS=20 (the issue asks for >= 20 s
# per run): on a 10-minute device call, run them in two halves with --only.
set -euo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-$(mktemp -d)}
mkdir -p "$OUT"
cmake -S . -B build-gpu -DBUILD_TESTING=OFF -DGPUSLICE_ONLY_INTERPOSER=ON -DCMAKE_BUILD_TYPE=Release >"$OUT/cmake.log" 2>&1
cmake --build build-gpu --target gpuslice -j"$(nproc)" >>"$OUT/cmake.log" 2>&1
LIB=$(pwd)/build-gpu/lib/libgpuslice.so
test -f "$LIB" || { echo "libgpuslice.so not built; see $OUT/cmake.log" >&2; exit 1; }
nvidia-smi --query-gpu=name,uuid,driver_version --format=csv,noheader | tee "$OUT/gpu.txt" || true
exec python3 bench/compute/bench.py --lib "$LIB" --out "$OUT" --secs "${BENCH_SECS:-20}" --budget "${BENCH_BUDGET:-490}" "$@"
