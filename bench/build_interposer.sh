#!/usr/bin/env bash
# Builds the interposer alone (Release, no tests) into build-gpu/ for the GPU
# benchmarks and prints the library's path; the build's output goes to LOG
# (default: discarded). Exits 1, saying so, when it did not build. From the
# repo root: LIB=$(bash bench/build_interposer.sh [LOG]) || exit 1
set -uo pipefail
log=${1:-/dev/null}
cmake -S . -B build-gpu -DBUILD_TESTING=OFF -DGPUSLICE_ONLY_INTERPOSER=ON -DCMAKE_BUILD_TYPE=Release >"$log" 2>&1 &&
    cmake --build build-gpu --target gpuslice -j"$(nproc)" >>"$log" 2>&1
lib=$PWD/build-gpu/lib/libgpuslice.so
if [ ! -f "$lib" ]; then
    echo "build_interposer.sh: libgpuslice.so not built${1:+; see $log}" >&2
    exit 1
fi
echo "$lib"
