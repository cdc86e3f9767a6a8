"""Shared by the multi-GPU benchmarks: torch.distributed set-up from
torchrun's environment, and one JSON line per result on stdout (rank 0)."""
import json
import sys
import os

import torch
import torch.distributed as dist


def setup():
    """Returns (rank, world size, device) after init_process_group (NCCL)."""
    rank = int(os.environ["RANK"])
    world = int(os.environ["WORLD_SIZE"])
    local = int(os.environ["LOCAL_RANK"])
    torch.cuda.set_device(local)
    dist.init_process_group("nccl", device_id=torch.device("cuda", local))
    return rank, world, torch.device("cuda", local)


def emit(rank, **fields):
    """Every rank prints its own line: the ratios are per rank."""
    # One write per line: two ranks share the pipe, and print() writes the
    # newline apart, so their lines could interleave.
    sys.stdout.write(json.dumps({"rank": rank, **fields}) + "\n")
    sys.stdout.flush()


def timed(fn, steps):
    """Seconds of `steps` calls of fn, measured with CUDA events after a
    barrier, so every rank times the same steps."""
    dist.barrier()
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(steps):
        fn()
    end.record()
    torch.cuda.synchronize()
    return start.elapsed_time(end) / 1000.0
