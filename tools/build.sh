#!/bin/sh
# Release build (-O2) into build/: build/bin/gpuslice, build/lib/libgpuslice.so.
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
cmake -S "$root" -B "$root/build" -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$root/build" -j"$(nproc)"
