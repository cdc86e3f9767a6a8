"""A tensor-parallel style loop: every step a matmul, then an all-reduce of
its result, so each rank waits in NCCL for its peer every step. A rank that
a compute cap throttles while its peer's NCCL kernel spins must neither
hang nor be charged the spin as work (HAMi-core #142).

A watchdog thread ends the process with status 3 and a "hang" line when a
step takes longer than --deadline seconds. Prints one JSON line per rank:
steps per second over the timed steps.

--graph: the matmul and the all-reduce are captured once into a CUDA graph
that every step replays (NCCL inside a graph, as a CUDA-graph TP decoder
runs it).

  torchrun --nproc_per_node=2 tp_loop.py [--steps 400] [--n 8192] [--graph]"""
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
ap.add_argument("--seconds", type=float, default=0, help="run this long after the warm-up instead of --steps")
ap.add_argument("--graph", action="store_true", help="each step replays a CUDA graph of the matmul and the all-reduce")
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


def step_eager():
    c = a @ b
    dist.all_reduce(c)
    return c


run_step = step_eager
if args.graph:
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):  # warm-up off the default stream, as graph capture asks
        for _ in range(3):
            step_eager()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        kept = step_eager()  # the graph's output stays allocated while it replays
    run_step = graph.replay
warm = min(20, args.steps // 4)
t0 = None
steps = []
stop = torch.zeros(1, device=dev)


def done(step):
    """--steps reached, or (every 50 steps, agreed by all ranks so that none
    waits in an all-reduce the others never make) --seconds up."""
    if not args.seconds:
        return step >= args.steps
    if t0 is None or step % 50:
        return False
    stop.fill_(float(time.monotonic() - t0 >= args.seconds))
    dist.all_reduce(stop, op=dist.ReduceOp.MAX)
    return stop.item() > 0


step = -1
while True:
    step += 1
    if done(step):
        break
    if step == warm:
        torch.cuda.synchronize()
        t0 = time.monotonic()
    run_step()
    torch.cuda.synchronize()  # a step ends when its all-reduce has: what the watchdog times
    now = time.monotonic()
    if step >= warm:
        steps.append(now - last[0])
    last[0], last[1] = now, step
secs = time.monotonic() - t0
steps.sort()
emit(rank, test="tp", hang=False, steps_per_s=len(steps) / secs, step_median_s=steps[len(steps) // 2],
     step_max_s=steps[-1])
