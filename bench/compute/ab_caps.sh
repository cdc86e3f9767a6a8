#!/usr/bin/env bash
# A/B of the cap sweep: this tree's interposer against one built from
# base.tar (git archive <commit> CMakeLists.txt src cmake proto > base.tar,
# untracked, in the repo root), alternating, ROUNDS rounds. From the repo
# root: bash bench/compute/ab_caps.sh LOAD CAPS [ROUNDS]. Lines in
# $OUT/gputime.jsonl tagged new<i> / base<i>.
set -euo pipefail
cd "$(dirname "$0")/../.."
load=$1 caps=$2 rounds=${3:-2}
OUT=${OUT:-$(mktemp -d)}
export OUT
base=$(mktemp -d)
tar -xf base.tar -C "$base"
cmake -S "$base" -B "$base/b" -DBUILD_TESTING=OFF -DGPUSLICE_ONLY_INTERPOSER=ON -DCMAKE_BUILD_TYPE=Release >"$OUT/base-cmake.log" 2>&1
cmake --build "$base/b" --target gpuslice -j"$(nproc)" >>"$OUT/base-cmake.log" 2>&1
for i in $(seq 1 "$rounds"); do
    order="new base"
    [ $((i % 2)) -eq 0 ] && order="base new"
    for which in $order; do
        if [ "$which" = new ]; then
            BENCH_SECS=${BENCH_SECS:-8} bash bench/compute/run_gpu.sh --only "$load" --caps "$caps" --tag "new$i" >"$OUT/new$i.txt" 2>&1
        else
            python3 bench/compute/gputime.py --lib "$base/b/lib/libgpuslice.so" --out "$OUT" --secs "${BENCH_SECS:-8}" \
                --only "$load" --caps "$caps" --tag "base$i" >"$OUT/base$i.txt" 2>&1
        fi
    done
done
