#!/usr/bin/env bash
# One-off probe: two GPU-bound share containers (weights 30 : 70, one state
# directory) as clients of an MPS daemon. Which pids does NVML report busy,
# under which names, and what share targets does the limiter set?
# From the repo root on a GPU machine: bash bench/probe/mps_share.sh OUTDIR
set -u
OUT=${1:?usage: mps_share.sh OUTDIR}
mkdir -p "$OUT"
LIB=$(bash bench/build_interposer.sh "$OUT/cmake.log") || exit 1
LOOP='import torch,time,sys
a=torch.randn(4096,4096,device="cuda",dtype=torch.bfloat16); b=a.clone()
for _ in range(20): c=a@b
torch.cuda.synchronize(); t0=time.time(); n=0
while time.time()-t0<float(sys.argv[1]):
    for _ in range(10): c=a@b
    torch.cuda.synchronize(); n+=10
print(sys.argv[2], "matmuls/s", round(n/(time.time()-t0),1), flush=True)'
python3 -c "$LOOP" 8 alone
export CUDA_MPS_PIPE_DIRECTORY=/tmp/mps-probe-pipe CUDA_MPS_LOG_DIRECTORY=/tmp/mps-probe-log
mkdir -p $CUDA_MPS_PIPE_DIRECTORY $CUDA_MPS_LOG_DIRECTORY
nvidia-cuda-mps-control -d
STATE=$(mktemp -d)
for w in 30 70; do
  LD_PRELOAD=$LIB GPUSLICE_REGION=$STATE/s$w.region GPUSLICE_COMPUTE_MODE=share GPUSLICE_SHARE_WEIGHT=$w \
    GPUSLICE_LOG_LEVEL=3 python3 -c "$LOOP" 12 share$w 2>"$OUT/share$w.log" &
done
sleep 6
nvidia-smi --query-compute-apps=pid,process_name,used_memory --format=csv >"$OUT/apps.txt" 2>&1
nvidia-smi pmon -c 1 >"$OUT/pmon.txt" 2>&1
wait
echo quit | nvidia-cuda-mps-control
sleep 2
pgrep -a nvidia-cuda-mps || echo "no MPS process left"
cat "$OUT/apps.txt" "$OUT/pmon.txt"
for w in 30 70; do grep -E "share mode on|outer" "$OUT/share$w.log" | tail -3 | cut -c1-260; done
