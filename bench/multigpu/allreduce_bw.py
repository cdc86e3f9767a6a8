"""NCCL all-reduce bus bandwidth through PyTorch, as nccl-tests defines it:
busbw = bytes x 2(n-1)/n / time. Prints one JSON line per rank and size.

  torchrun --nproc_per_node=2 allreduce_bw.py [--iters 50]"""
import argparse

import torch
import torch.distributed as dist

from common import emit, setup, timed

ap = argparse.ArgumentParser()
ap.add_argument("--iters", type=int, default=50)
args = ap.parse_args()
rank, world, dev = setup()
for mib in (1, 8, 64, 256, 1024):
    x = torch.ones(mib * (1 << 20) // 4, dtype=torch.float32, device=dev)
    for _ in range(5):
        dist.all_reduce(x)
    secs = timed(lambda: dist.all_reduce(x), args.iters) / args.iters
    nbytes = x.numel() * 4
    emit(rank, test="allreduce", mib=mib, busbw_gbs=nbytes * 2 * (world - 1) / world / secs / 1e9)
