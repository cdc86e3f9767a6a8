"""A tensor-parallel style loop: every step a matmul, then an all-reduce of
its result, so each rank waits in NCCL for its peer every step. A rank that
a compute cap throttles while its peer's NCCL kernel spins must neither
hang nor be charged the spin as work (HAMi-core #142).

A watchdog thread ends the process with status 3 and a "hang" line when a
step takes longer than --deadline seconds. Prints one JSON line per rank:
steps per second over the timed steps.

  torchrun --nproc_per_node=2 tp_loop.py [--steps 400] [--n 8192]"""
import argparse
import os
import threading
import time

import torch
import torch.distributed as dist

from common import emit, setup

ap = argparse.ArgumentParser()
ap.add_argument("--steps", type=int, default=400)
ap.add_argument("--n", type=int, default=8192)
ap.add_argument("--deadline", type=float, default=120.0)
args = ap.parse_args()
rank, world, dev = setup()
last = [time.monotonic(), 0]


def watchdog():
    while True:
        time.sleep(1.0)
        if time.monotonic() - last[0] > args.deadline:
            emit(rank, test="tp", hang=True, step=last[1])
            os._exit(3)


threading.Thread(target=watchdog, daemon=True).start()
a = torch.randn(args.n, args.n, device=dev, dtype=torch.bfloat16)
b = torch.randn(args.n, args.n, device=dev, dtype=torch.bfloat16)
warm = min(20, args.steps // 4)
t0 = None
for step in range(args.steps):
    if step == warm:
        torch.cuda.synchronize()
        t0 = time.monotonic()
    c = a @ b
    dist.all_reduce(c)
    torch.cuda.synchronize()  # a step ends when its all-reduce has: what the watchdog times
    last[0], last[1] = time.monotonic(), step
secs = time.monotonic() - t0
emit(rank, test="tp", hang=False, steps_per_s=(args.steps - warm) / secs)
