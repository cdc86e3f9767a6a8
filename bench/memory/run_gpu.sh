#!/usr/bin/env bash
# Memory-limit measurements on a real GPU (run through the device tool from
# the repository root). Builds the interposer there, then measures each
# scenario of the memory issue with a 4 GiB limit; `run_gpu.sh overhead`
# runs only the overhead pairs, `run_gpu.sh torch` only the PyTorch fills. Writes $OUT/memory.jsonl.
set -uo pipefail
OUT=${OUT:-/tmp/gpuslice-bench}
mkdir -p "$OUT"
LOG="$OUT/memory.jsonl"
: > "$LOG"
export PYTHONUNBUFFERED=1
LIB=$(bash bench/build_interposer.sh) || exit 1
REGION_DIR=$(mktemp -d)
B=bench/memory
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee "$OUT/device.txt"
python3 -c "import torch, jax, cupy; print('torch', torch.__version__, 'jax', jax.__version__, 'cupy', cupy.__version__)" 2>/dev/null | tee -a "$OUT/device.txt"

note() { echo "{\"scenario\": \"$1\", \"result\": $2}" | tee -a "$LOG"; }
limited() { # run "$@" under a 4 GiB limit sharing region $1
  local region=$1; shift
  LD_PRELOAD=$LIB CUDA_DEVICE_MEMORY_LIMIT=4GiB GPUSLICE_REGION=$region "$@"
}

if [ "${1:-all}" = torch ]; then  # only the PyTorch fills
  note torch_4gib "$(limited $REGION_DIR/a.region python3 $B/torch_fill.py 2>&1 | tail -1)"
  note torch_4gib_expandable "$(PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True limited $REGION_DIR/b.region python3 $B/torch_fill.py 2>&1 | tail -1)"
  note torch_4gib_after_training_steps "$(limited $REGION_DIR/b2.region python3 $B/torch_fill.py --warm 2>&1 | tail -1)"
  exit 0
fi

if [ "${1:-all}" != overhead ]; then
# The lookup paths on the real driver: which library each answer lands in.
gcc -O2 -o /tmp/gs_client tests/integration/gs_client*.c src/core/region.c src/core/procinfo.c -ldl -lpthread -lm || exit 1
printf 'gpa cuMemAlloc 13000 0\ngpa cuMemAlloc 2000 0\ngpa cuMemAllocAsync 13000 2\ngpa cuCtxCreate 12000 0\ngpa cuGetProcAddress 13000 0\ngpa cuLaunchKernel 13000 2\nsym cuMemAlloc_v2\nsym cuMemFree_v2\ninit\ninfo\nnvml\n' |
  LD_PRELOAD=$LIB CUDA_DEVICE_MEMORY_LIMIT=4GiB GPUSLICE_REGION=$REGION_DIR/lookup.region /tmp/gs_client dlsym | tee "$OUT/lookups.txt"

note torch_native "$(python3 $B/torch_fill.py 2>&1 | tail -1)"
note torch_4gib "$(limited $REGION_DIR/a.region python3 $B/torch_fill.py 2>&1 | tail -1)"
note torch_4gib_expandable "$(PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True limited $REGION_DIR/b.region python3 $B/torch_fill.py 2>&1 | tail -1)"
note torch_4gib_after_training_steps "$(limited $REGION_DIR/b2.region python3 $B/torch_fill.py --warm 2>&1 | tail -1)"
note jax_native "$(python3 $B/jax_prealloc.py 2>/dev/null | tail -1)"
note jax_4gib "$(limited $REGION_DIR/c.region python3 $B/jax_prealloc.py 2>/dev/null | tail -1)"
note cupy_4gib "$(limited $REGION_DIR/d.region python3 $B/cupy_fill.py 2>&1 | tail -1)"
SMI=$(limited $REGION_DIR/e.region nvidia-smi --query-gpu=memory.total,memory.used,memory.free --format=csv,noheader 2>&1 | head -1)
note nvidia_smi_4gib "\"$SMI\""
# nvidia-smi's usage column while a tenant of the same container holds memory.
limited $REGION_DIR/e.region python3 $B/hold.py 1024 hold > $OUT/smi_holder.txt 2>&1 &
for i in $(seq 1 60); do grep -q got_mib $OUT/smi_holder.txt 2>/dev/null && break; sleep 0.5; done
SMI=$(limited $REGION_DIR/e.region nvidia-smi --query-gpu=memory.total,memory.used,memory.free --format=csv,noheader 2>&1 | head -1)
note nvidia_smi_4gib_with_1gib_tenant "\"$SMI\""
APPS=$(limited $REGION_DIR/e.region nvidia-smi --query-compute-apps=pid,used_memory --format=csv,noheader 2>&1 | tr '\n' ';')
note nvidia_smi_apps_in_container "\"$APPS\""
kill -9 $(python3 -c 'import json,sys; print(json.loads(open(sys.argv[1]).read().splitlines()[-1])["pid"])' $OUT/smi_holder.txt)
echo "--- nvidia-smi under the interposer ---"; limited $REGION_DIR/e.region nvidia-smi | head -12

# Two processes share one limit; then kill -9 the holder.
R=$REGION_DIR/f.region
limited $R python3 $B/hold.py 2560 hold > $OUT/holder.txt 2>&1 &
for i in $(seq 1 60); do grep -q got_mib $OUT/holder.txt 2>/dev/null && break; sleep 0.5; done
note holder "$(cat $OUT/holder.txt | tail -1)"
HOLDER=$(python3 -c 'import json,sys; print(json.loads(open(sys.argv[1]).read().splitlines()[-1])["pid"])' $OUT/holder.txt)
note second_while_held "$(limited $R python3 $B/torch_fill.py 2>&1 | tail -1)"
nvidia-smi --query-compute-apps=pid,used_memory --format=csv,noheader | tee $OUT/apps_while_held.txt
kill -9 $HOLDER; while kill -0 $HOLDER 2>/dev/null; do sleep 0.05; done
nvidia-smi --query-compute-apps=pid,used_memory --format=csv,noheader | tee $OUT/apps_after_kill.txt
note after_kill9 "$(limited $R python3 $B/torch_fill.py 2>&1 | tail -1)"

fi

# Overhead: native and interposed side by side, alternating.
nvcc -O2 -o /tmp/overhead $B/overhead.cu || exit 1
# Both sides pinned to one core: host-side launch cost is what is measured,
# and an unpinned VM moves it by +-10 % from run to run.
for rep in $(seq 1 15); do
  note overhead_native "$(taskset -c 3 /tmp/overhead 100000 10000)"
  note overhead_interposed "$(limited $REGION_DIR/g.region taskset -c 3 /tmp/overhead 100000 10000)"
done
rm -rf "$REGION_DIR"
