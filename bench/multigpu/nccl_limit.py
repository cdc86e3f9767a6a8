"""NCCL's buffers under a memory limit that binds: each rank all-reduces
ever more 256 MiB tensors until the allocator is refused, then all-reduces
once more with what it holds (the job goes on after a refusal). Prints per
rank the bytes it held when refused and whether the refusal was an
out-of-memory error (not a crash). Run under the interposer with
GPUSLICE_MEMORY_LIMIT set; the NVML watcher (run_gpu.sh's with_peak) says
what each GPU really held.

  torchrun --nproc_per_node=2 nccl_limit.py [--max-gib 64]"""
import argparse

import torch
import torch.distributed as dist

from common import emit, setup

ap = argparse.ArgumentParser()
ap.add_argument("--max-gib", type=float, default=64, help="stop here if never refused")
args = ap.parse_args()
rank, world, dev = setup()
chunk = 256 << 20
held, refused, error = [], False, ""
while len(held) * chunk < args.max_gib * (1 << 30):
    try:
        x = torch.ones(chunk // 4, dtype=torch.float32, device=dev)
        dist.all_reduce(x)
        torch.cuda.synchronize()
        held.append(x)
    except torch.cuda.OutOfMemoryError as e:
        refused, error = True, str(e).splitlines()[0][:120]
        break
# every rank stops at its own refusal: agree on a count that all of them hold
n = torch.tensor([len(held)], device=dev)
dist.all_reduce(n, op=dist.ReduceOp.MIN)
ok = True
try:
    for x in held[: int(n.item())]:
        dist.all_reduce(x)
    torch.cuda.synchronize()
except RuntimeError:
    ok = False
emit(rank, test="nccl_limit", held_bytes=len(held) * chunk, refused=refused, error=error,
     allreduce_after=ok, reserved_bytes=torch.cuda.memory_reserved(dev))
dist.destroy_process_group()
