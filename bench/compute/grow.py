"""A load that grows: --light seconds of small bf16 matmuls with CPU gaps
(1024^2, 16 a step, then a sync and a 2 ms sleep: busy well under a cap of
50), then --heavy seconds of GPU-bound bf16 4096^2 matmuls, timed in
--slice-second slices. Under a cap a container this light runs free
(docs/compute.md, "Caps far under their use"); this measures how the cap
holds once the load grows. Prints one JSON line: the light steps per second
and the heavy phase's matmuls per second, whole and per slice.
  python3 bench/compute/grow.py [--light 4] [--heavy 4] [--slice 0.5]"""
import argparse
import json
import time

import torch


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--light", type=float, default=4.0)
    p.add_argument("--heavy", type=float, default=4.0)
    p.add_argument("--slice", type=float, default=0.5)
    a = p.parse_args()
    dev = torch.device("cuda")
    small = torch.randn(1024, 1024, device=dev, dtype=torch.bfloat16)
    big = torch.randn(4096, 4096, device=dev, dtype=torch.bfloat16)
    for _ in range(20):  # warm both kernels outside the measured phases
        small @ small
        big @ big
    torch.cuda.synchronize()
    steps, t0 = 0, time.time()
    while time.time() - t0 < a.light:
        for _ in range(16):
            small @ small
        torch.cuda.synchronize()
        time.sleep(0.002)
        steps += 1
    light_s = time.time() - t0
    slices, done, t0 = [], 0, time.time()
    mark, mark_done = t0, 0
    while True:
        for _ in range(8):
            big @ big
        torch.cuda.synchronize()
        done += 8
        now = time.time()
        if now - mark >= a.slice:
            slices.append((done - mark_done) / (now - mark))
            mark, mark_done = now, done
        if now - t0 >= a.heavy:
            break
    print(json.dumps({"light_steps_per_s": steps / light_s, "heavy_per_s": done / (time.time() - t0),
                      "slices_per_s": [round(x, 1) for x in slices]}), flush=True)


if __name__ == "__main__":
    main()
