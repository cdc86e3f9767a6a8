#!/usr/bin/env bash
# Multi-GPU measurements on 2 GPUs of one host (device kinds nvidia-h100-x2,
# nvidia-h200-x2), run through the device tool from the repository root.
# Writes $OUT/multigpu.jsonl (one line per rank and result, tagged with its
# mode) and $OUT/device.txt; bench/multigpu/summarize.py turns them into the
# table for bench/results/. `run_gpu.sh PART...` runs some parts (ddp cores
# allreduce tp tpgraph tpinfer two ncclmem); every cell runs ROUNDS times (default 2).
#
# The GPU host has no -dev packages, so only libgpuslice.so is built there and
# each limited run sets what `gpuslice run --name NAME` would (gsrun below):
# both ranks that torchrun starts share one container (one region), as two
# ranks of a pod would. STEPS scales every loop down for a short lease.
set -uo pipefail
OUT=${OUT:-/tmp/gpuslice-bench}
mkdir -p "$OUT"
LOG="$OUT/multigpu.jsonl"
: > "$LOG"
# NVLink multicast can take the host's GPUs out of service: keep it off.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
B=bench/multigpu
bash bench/build_interposer.sh >/dev/null || exit 1
# exported: gsrun runs in the `bash -c` of tag (unexported, the limited runs
# had an empty LD_PRELOAD and ran without the interposer: issue 26)
# BENCH_LIB: another build of the interposer to measure (an A/B in one call)
export LIB="${BENCH_LIB:-$PWD/build-gpu/lib/libgpuslice.so}"
STATE=$(mktemp -d)
export STATE
# gsrun NAME [VAR=VALUE...] CMD...: CMD under the interposer in container NAME.
gsrun() {
  local name=$1; shift
  [ -f "$LIB" ] && [ -d "$STATE" ] || { echo "gsrun: no interposer ($LIB) or state dir ($STATE)" >&2; return 97; }
  env LD_PRELOAD="$LIB" GPUSLICE_REGION="$STATE/$name.region" GPUSLICE_CONTAINER="$name" "$@"
}
S=${STEPS:-1}
export NP=${NPROC:-2} # ranks (GPUs) per job
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
trun() { torchrun --standalone --nproc_per_node=$NP "$@"; }
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

parts=${*:-ddp cores allreduce tp tpgraph tpinfer two ncclmem}
has() { case " $parts " in *" $1 "*) return 0 ;; esac; return 1; }
for round in $(seq 1 "${ROUNDS:-2}"); do
if has ddp; then
  # Same loss curve, each GPU <= 16 GiB in NVML, throughput >= 0.97 of native.
  with_peak ddp_native trun $B/ddp_train.py --steps $((200 * S / 4 + 40))
  with_peak ddp_mem16 gsrun ddp$round GPUSLICE_MEMORY_LIMIT=16GiB torchrun --standalone --nproc_per_node=$NP $B/ddp_train.py --steps $((200 * S / 4 + 40))
fi
if has cores; then
  # Each rank 0.50 +- 0.03 of its alone throughput on a GPU-bound step.
  tag cores_native trun $B/ddp_train.py --gpu-bound --steps 24
  tag cores_50 gsrun cores$round GPUSLICE_CORES=50 torchrun --standalone --nproc_per_node=$NP $B/ddp_train.py --gpu-bound --steps 24
fi
if has allreduce; then
  # Bus bandwidth under the interposer with no limit: >= 0.98 of native.
  tag ar_native trun $B/allreduce_bw.py
  tag ar_preload env LD_PRELOAD="$LIB" torchrun --standalone --nproc_per_node=$NP $B/allreduce_bw.py
  tag ar_tracked gsrun ar$round torchrun --standalone --nproc_per_node=$NP $B/allreduce_bw.py
fi
if has tp; then
  # Matmul + all-reduce every step under --cores 40 on both ranks: completes,
  # never hangs (watchdog: exit 3), 0.40 +- 0.05 of alone, no step > 3x median.
  tag tp_native trun $B/tp_loop.py --seconds 4
  tag tp_40 gsrun tp$round GPUSLICE_CORES=40 torchrun --standalone --nproc_per_node=$NP $B/tp_loop.py --seconds 8
fi
if has tpgraph; then
  # The TP loop with each step a CUDA graph holding its all-reduce, under
  # --cores 40: completes, 0.40 +- 0.05 of the same graph alone, no step > 3x median.
  tag tpg_native trun $B/tp_loop.py --graph --seconds 4
  tag tpg_40 gsrun tpg$round GPUSLICE_CORES=40 torchrun --standalone --nproc_per_node=$NP $B/tp_loop.py --graph --seconds 8 --deadline 30
fi
if has tpinfer; then
  # TP-2 decoding: under --cores 50 tokens/s >= min(1, 0.5/u) - 0.05 of alone
  # (u: busy alone, from the NVML watcher); under a memory limit it completes.
  with_peak tpi_native trun $B/tp_infer.py --tokens ${TPI_TOKENS:-256}
  # TPI_TOKENS: tokens per run (default 256). TPI_LOG=1: the outer loop's and the cost summary's lines of the capped run in $OUT/tpi50_<round>.log
  lvl=(); [ -n "${TPI_LOG:-}" ] && lvl=(GPUSLICE_LOG_LEVEL=3 TPI_LOG_FILE=$OUT/tpi50_$round.log)
  with_peak tpi_50 gsrun tpi$round GPUSLICE_CORES=50 "${lvl[@]}" bash -c \
    'exec torchrun --standalone --nproc_per_node=$NP '"$B"'/tp_infer.py --tokens ${TPI_TOKENS:-256} 2> >(grep -E "outer|cost|limiter on" > ${TPI_LOG_FILE:-/dev/null})'
  with_peak tpi_mem8 gsrun tpm$round GPUSLICE_MEMORY_LIMIT=8GiB torchrun --standalone --nproc_per_node=$NP $B/tp_infer.py --tokens ${TPI_TOKENS:-256}
fi
if has two; then
  # Two jobs (containers), each on both GPUs, capped 30 and 70, side by side
  # for the same span: each within +- 0.03 of its cap, per GPU (alone: tp_native).
  # TWO_LOG=1: the interposer's debug log of each job in $OUT/two<cap>_<round>.log
  for cap in 30 70; do
    lvl=(); [ -n "${TWO_LOG:-}" ] && lvl=(GPUSLICE_LOG_LEVEL=3 TWO_LOG_FILE=$OUT/two${cap}_$round.log)
    tag two_$cap gsrun two${cap}_$round GPUSLICE_CORES=$cap "${lvl[@]}" bash -c \
      'exec torchrun --standalone --nproc_per_node=$NP '"$B"'/tp_loop.py --seconds 12 2> >(tee ${TWO_LOG_FILE:-/dev/null} >&2)' &
  done
  wait
fi
if has ncclmem; then
  # A 4 GiB limit that binds: each rank refused with an out-of-memory error
  # (not a crash) at about 4 GiB, each GPU <= 4 GiB in NVML, all-reduce goes on.
  with_peak ncclmem_4g gsrun nm$round GPUSLICE_MEMORY_LIMIT=4GiB torchrun --standalone --nproc_per_node=$NP $B/nccl_limit.py
fi
done
python3 $B/summarize.py "$LOG" | tee "$OUT/multigpu.md"
