"""NCCL all-reduce bus bandwidth through PyTorch, as nccl-tests defines it:
busbw = bytes x 2(n-1)/n / time. Prints one JSON line per rank and size.

Each size is timed --reps times and the best is kept, as bandwidth
benchmarks do: at 1-8 MiB (tens of microseconds a call) single timings of
native runs differed by up to 50 %.

  torchrun --nproc_per_node=2 allreduce_bw.py [--secs 0.3] [--reps 5]"""
import argparse

import torch
import torch.distributed as dist

from common import emit, setup, timed

ap = argparse.ArgumentParser()
ap.add_argument("--secs", type=float, default=0.3, help="timed seconds per size and repetition, at least")
ap.add_argument("--reps", type=int, default=5, help="timed repetitions per size; the best counts")
args = ap.parse_args()
rank, world, dev = setup()
for mib in (1, 8, 64, 256, 1024):
    x = torch.ones(mib * (1 << 20) // 4, dtype=torch.float32, device=dev)
    for _ in range(5):
        dist.all_reduce(x)
    # enough iterations for the timed part to last --secs: a 1 MiB all-reduce
    # takes tens of microseconds, and 50 of them were launch jitter
    once = timed(lambda: dist.all_reduce(x), 20) / 20
    iters = max(20, int(args.secs / max(once, 1e-6)))
    t = torch.tensor([iters], device=dev)
    dist.all_reduce(t, op=dist.ReduceOp.MAX)  # every rank runs the same count
    iters = int(t.item())
    secs = min(timed(lambda: dist.all_reduce(x), iters) / iters for _ in range(args.reps))
    nbytes = x.numel() * 4
    emit(rank, test="allreduce", mib=mib, busbw_gbs=nbytes * 2 * (world - 1) / world / secs / 1e9)
