#!/usr/bin/env bash
# Issue 27 items 1-3 on a real GPU: the same gs_client commands under the
# interposer before (base) and after (fix) the fixes, 2 GiB limit, context
# overhead measured (auto). Real usage from nvidia-smi while the client holds.
#
# The GPU host has no -dev packages: build the pieces on a CPU host into one
# directory D (default build-mem/gpucheck), then carry D to the device:
#   libgpuslice-base.so, libgpuslice-fix.so: cmake -DGPUSLICE_ONLY_INTERPOSER=ON
#     -DBUILD_TESTING=OFF, target gpuslice, at the commits to compare;
#   gs_client: gcc -O2 tests/integration/gs_client*.c <build>/src/core/libgpuslice_core.a
#     -ldl -lpthread -lm.
# Run from the repository root: bench/memory/escapes_gpu.sh [D]
set -u
D=${1:-build-mem/gpucheck}
OUT=${OUT:-/tmp/out}
C=$D/gs_client
real() { nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits -i 0; }
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader -i 0
echo "idle real MiB: $(real)"
for v in base fix; do
  S=$(mktemp -d)
  E=(env "LD_PRELOAD=$PWD/$D/libgpuslice-$v.so" "GPUSLICE_REGION=$S/c.region" CUDA_DEVICE_MEMORY_LIMIT=2GiB)
  echo "== $v: item 1, vmmleak 16 x 256 MiB after init"
  { echo init; echo info; echo "vmmleak 16 268435456"; echo info; sleep 4; echo vmmspanunmap; echo info;
    echo "vmmspan 4 67108864"; echo info; echo vmmspanunmap; echo info; echo exit; } | "${E[@]}" "$C" getproc &
  sleep 3; echo "real MiB while held: $(real)"; wait
  echo "== $v: item 2, ctxcreate v2 8"
  { echo "ctxcreate v2 8"; echo info; sleep 4; echo "ctxdestroy v2 all"; echo exit; } | "${E[@]}" "$C" getproc &
  sleep 3; echo "real MiB while held: $(real)"; wait
  echo "== $v: item 2, legacy cuCtxCreate (v1) and v4"
  { echo "ctxcreate v1 2"; echo "ctxcreate v4 8"; echo "ctxdestroy v1 all"; echo exit; } | "${E[@]}" "$C" getproc
  echo "== $v: item 3, 6 processes init"
  pids=()
  for i in 1 2 3 4 5 6; do
    { echo init; sleep 6; echo exit; } | "${E[@]}" "$C" getproc > "$S/p$i.out" &
    pids+=($!); sleep 0.7
  done
  sleep 1; echo "real MiB while held: $(real)"; wait; cat "$S"/p*.out
  echo "idle real MiB: $(real)"
done 2>&1
