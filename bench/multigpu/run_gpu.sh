#!/usr/bin/env bash
# Multi-GPU measurements (issue 15) on 2 GPUs of one host: the device kind
# nvidia-h200-x2, run through the device tool from the repository root.
# Writes $OUT/multigpu.jsonl (one line per rank and result, tagged with its
# mode) and $OUT/device.txt; bench/multigpu/summarize.py turns them into the
# table for bench/results/. `run_gpu.sh ddp|cores|allreduce|tp` runs one part.
#
# The GPU host has no -dev packages, so only libgpuslice.so is built there and
# each limited run sets what `gpuslice run --name NAME` would (gsrun below):
# both ranks that torchrun starts share one container (one region), as two
# ranks of a pod would. STEPS scales every loop down for a short lease.
set -uo pipefail
OUT=${OUT:-/tmp/gpuslice-bench}
mkdir -p "$OUT"
LOG="$OUT/multigpu.jsonl"
[ $# -eq 0 ] && : > "$LOG"
# NVLink multicast can take the host's GPUs out of service: keep it off.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
B=bench/multigpu
cmake -S . -B build-gpu -DCMAKE_BUILD_TYPE=Release -DBUILD_TESTING=OFF -DGPUSLICE_ONLY_INTERPOSER=ON >/dev/null &&
  cmake --build build-gpu -j16 --target gpuslice >/dev/null || exit 1
LIB="$PWD/build-gpu/lib/libgpuslice.so"
STATE=$(mktemp -d)
# gsrun NAME [VAR=VALUE...] CMD...: CMD under the interposer in container NAME.
gsrun() { local name=$1; shift; env LD_PRELOAD="$LIB" GPUSLICE_REGION="$STATE/$name.region" GPUSLICE_CONTAINER="$name" "$@"; }
S=${STEPS:-1}
{ nvidia-smi --query-gpu=index,name,uuid,driver_version,memory.total --format=csv,noheader
  nvidia-smi topo -m
  python3 -c "import torch; print('torch', torch.__version__, 'nccl', torch.cuda.nccl.version())"
  git rev-parse HEAD; date -u +%FT%TZ; } | tee "$OUT/device.txt"

# tag MODE CMD...: runs CMD (timeout 600 s) and appends its JSON lines with "mode": MODE.
tag() {
  local mode=$1; shift
  timeout 600 bash -c '"$@"' _ "$@" 2> >(tail -5 >&2) | sed -n "s/^{/{\"mode\": \"$mode\", /p" | tee -a "$LOG"
  local rc=${PIPESTATUS[0]}
  [ "$rc" -eq 0 ] || echo "{\"mode\": \"$mode\", \"exit\": $rc}" | tee -a "$LOG"
}
trun() { torchrun --standalone --nproc_per_node=2 "$@"; }
export -f trun gsrun
# Real NVML peaks per GPU while "$@" runs (the watcher has no interposer).
# (A stop file, not a coprocess: bash closes a coprocess's pipe when it exits,
# before its last line can be read.)
with_peak() {
  local mode=$1; shift
  local stop out pid
  stop=$(mktemp -u) out=$(mktemp)
  env -u LD_PRELOAD python3 $B/nvml_peak.py "$stop" >"$out" &
  pid=$!
  tag "$mode" "$@"
  touch "$stop"
  wait "$pid"
  sed "s/^{/{\"mode\": \"$mode\", \"test\": \"nvml\", /" "$out" | tee -a "$LOG"
  rm -f "$stop" "$out"
}

part=${1:-all}
if [ "$part" = all ] || [ "$part" = ddp ]; then
  # Same loss curve, each GPU <= 16 GiB in NVML, throughput >= 0.97 of native.
  with_peak ddp_native trun $B/ddp_train.py --steps $((200 * S / 4 + 40))
  with_peak ddp_mem16 gsrun ddp GPUSLICE_MEMORY_LIMIT=16GiB torchrun --standalone --nproc_per_node=2 $B/ddp_train.py --steps $((200 * S / 4 + 40))
fi
if [ "$part" = all ] || [ "$part" = cores ]; then
  # Each rank 0.50 +- 0.03 of its alone throughput on a GPU-bound step.
  tag cores_native trun $B/ddp_train.py --gpu-bound --steps 60
  tag cores_50 gsrun cores GPUSLICE_CORES=50 torchrun --standalone --nproc_per_node=2 $B/ddp_train.py --gpu-bound --steps 60
fi
if [ "$part" = all ] || [ "$part" = allreduce ]; then
  # Bus bandwidth under the interposer with no limit: >= 0.98 of native.
  tag ar_native trun $B/allreduce_bw.py
  tag ar_preload env LD_PRELOAD="$LIB" torchrun --standalone --nproc_per_node=2 $B/allreduce_bw.py
  tag ar_tracked gsrun ar torchrun --standalone --nproc_per_node=2 $B/allreduce_bw.py
fi
if [ "$part" = all ] || [ "$part" = tp ]; then
  # Matmul + all-reduce every step under --cores 40 on both ranks: completes,
  # never hangs (watchdog: exit 3), 0.40 +- 0.05 of alone.
  tag tp_native trun $B/tp_loop.py --steps $((400 * S / 4 + 40))
  tag tp_40 gsrun tp GPUSLICE_CORES=40 torchrun --standalone --nproc_per_node=2 $B/tp_loop.py --steps $((400 * S / 4 + 40))
fi
python3 $B/summarize.py "$LOG" | tee "$OUT/multigpu.md"
