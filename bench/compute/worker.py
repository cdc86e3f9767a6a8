"""One tenant of the compute benchmark: runs a GPU load for --secs after
--warm seconds and prints one JSON line: work units completed per window."""
import argparse
import json
import os
import time

import torch


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--load", choices=["matmul", "small", "small32", "graph", "launch"], required=True)
    ap.add_argument("--secs", type=float, default=20)
    ap.add_argument("--warm", type=float, default=2)
    ap.add_argument("--window", type=float, default=0.5)
    ap.add_argument("--start-at", type=float, default=0, help="time.time() at which to start (align tenants)")
    ap.add_argument("--cpu", type=int, default=-1, help="pin to this CPU (a launch-bound load follows its core)")
    a = ap.parse_args()
    if a.cpu >= 0:
        os.sched_setaffinity(0, {a.cpu})
    dev = torch.device("cuda")
    if a.load in ("matmul", "graph"):
        x = torch.randn(4096, 4096, device=dev, dtype=torch.bfloat16)
        y = torch.randn(4096, 4096, device=dev, dtype=torch.bfloat16)
        batch = 10
    elif a.load in ("small", "small32"):
        # bf16: ~4 us kernels, bound by the Python thread's launch rate;
        # fp32 (no TF32): ~40 us kernels, bound by the GPU
        dt = torch.bfloat16 if a.load == "small" else torch.float32
        x = torch.randn(1024, 1024, device=dev, dtype=dt)
        y = torch.randn(1024, 1024, device=dev, dtype=dt)
        batch = 200 if a.load == "small" else 50
    else:
        x = torch.zeros(1, device=dev)
        batch = 1000
    if a.load == "graph":
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            for _ in range(3):
                z = x @ y
        torch.cuda.current_stream().wait_stream(s)
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            for _ in range(20):
                z = x @ y
        step = g.replay
        batch = 1  # one replay = 20 matmuls
    elif a.load == "launch":
        def step():
            x.add_(1)
    else:
        z = torch.empty_like(x)

        def step():
            torch.mm(x, y, out=z)
    for _ in range(3):
        step()
    torch.cuda.synchronize()
    while a.start_at and time.time() < a.start_at:
        time.sleep(0.005)
    t0 = time.monotonic()
    t_meas = t0 + a.warm
    t_end = t_meas + a.secs
    nwin = int(a.secs / a.window)
    wins = [0] * nwin
    while True:
        for _ in range(batch):
            step()
        torch.cuda.synchronize()
        now = time.monotonic()
        if now >= t_end:
            break
        if now >= t_meas:
            i = int((now - t_meas) / a.window)
            if i < nwin:
                wins[i] += batch
    print(json.dumps({"load": a.load, "window_s": a.window, "units": wins}), flush=True)


if __name__ == "__main__":
    main()
