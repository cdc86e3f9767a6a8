"""How fast a GPU's power controller moves its clock between duty-cycled and
continuous work, and what that does to the time a kernel takes.

One process, no interposer: a bf16 4096^2 matmul loop run
- duty-cycled at p % (bursts of p % of a 5 ms cycle, as the limiter runs a
  container held to its cap alone), then continuously: how long until the
  clock and the time per matmul settle at their fully busy values;
- continuously, then duty-cycled again: how long until the clock recovers.
NVML's SM clock and power are sampled every ~5 ms beside it; each chunk of
matmuls is bracketed by CUDA events. Prints one JSON line per phase with the
median time per matmul and clock in bins of time since the switch.
Usage: python3 bench/compute/clock_settle.py [--caps 30,70] [--secs 3]"""
import argparse
import json
import os
import statistics
import sys
import threading
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from nvml_probe import Nvml  # noqa: E402

BINS_MS = (0, 10, 25, 50, 100, 200, 400, 800, 1600, 3200)
CHUNK = 8


def sampler(nv, stop, out):
    while not stop.is_set():
        clock, power, util, _ = nv.clock_power()
        out.append((time.monotonic(), clock, power, util))
        time.sleep(0.005)


def run_chunk(a, b, stream, events):
    start = torch.cuda.Event(enable_timing=True)
    end = torch.cuda.Event(enable_timing=True)
    start.record(stream)
    for _ in range(CHUNK):
        torch.mm(a, b)
    end.record(stream)
    events.append((time.monotonic(), start, end))


def duty(a, b, stream, events, pct, secs):
    cycle = 0.005
    t_end = time.monotonic() + secs
    while time.monotonic() < t_end:
        t0 = time.monotonic()
        while time.monotonic() - t0 < cycle * pct / 100:
            run_chunk(a, b, stream, events)
            stream.synchronize()
        rest = cycle - (time.monotonic() - t0)
        if rest > 0:
            time.sleep(rest)


def continuous(a, b, stream, events, secs):
    t_end = time.monotonic() + secs
    while time.monotonic() < t_end:
        run_chunk(a, b, stream, events)
        if len(events) % 16 == 0:
            stream.synchronize()  # keep the queue short: host time ~ GPU time
    stream.synchronize()


def binned(t_switch, events, samples):
    rows = []
    for lo, hi in zip(BINS_MS, BINS_MS[1:]):
        per_mm = [s.elapsed_time(e) * 1000 / CHUNK for t, s, e in events if lo <= (t - t_switch) * 1000 < hi]
        clocks = [c for t, c, _, _ in samples if lo <= (t - t_switch) * 1000 < hi]
        power = [p for t, _, p, _ in samples if lo <= (t - t_switch) * 1000 < hi]
        rows.append({"ms": f"{lo}-{hi}", "us_per_mm": round(statistics.median(per_mm), 2) if per_mm else None,
                     "mhz": statistics.median(clocks) if clocks else None,
                     "w": round(statistics.median(power)) if power else None})
    return rows


def phase(nv, name, first, second, a, b, stream):
    samples, stop = [], threading.Event()
    th = threading.Thread(target=sampler, args=(nv, stop, samples))
    th.start()
    before, after = [], []
    first(before)
    t_switch = time.monotonic()
    second(after)
    stop.set()
    th.join()
    torch.cuda.synchronize()
    steady = [s.elapsed_time(e) * 1000 / CHUNK for t, s, e in before if t_switch - t < 1.0]
    steady_clock = [c for t, c, _, _ in samples if 0 < t_switch - t < 1.0]
    print(json.dumps({"phase": name, "before_us_per_mm": round(statistics.median(steady), 2) if steady else None,
                      "before_mhz": statistics.median(steady_clock) if steady_clock else None,
                      "after": binned(t_switch, after, samples)}), flush=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--caps", default="30,70")
    ap.add_argument("--secs", type=float, default=3.0)
    args = ap.parse_args()
    nv = Nvml()
    print(json.dumps({"device": torch.cuda.get_device_name(0), **nv.static()}), flush=True)
    a = torch.randn(4096, 4096, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(4096, 4096, device="cuda", dtype=torch.bfloat16)
    stream = torch.cuda.current_stream()
    for _ in range(50):
        torch.mm(a, b)
    torch.cuda.synchronize()
    s = args.secs
    for pct in (int(x) for x in args.caps.split(",")):
        time.sleep(1.0)
        phase(nv, f"duty{pct}->continuous", lambda ev, p=pct: duty(a, b, stream, ev, p, s),
              lambda ev: continuous(a, b, stream, ev, s), a, b, stream)
        phase(nv, f"continuous->duty{pct}", lambda ev: continuous(a, b, stream, ev, s),
              lambda ev, p=pct: duty(a, b, stream, ev, p, s), a, b, stream)
    time.sleep(2.0)
    phase(nv, "idle->continuous", lambda ev: time.sleep(1.0), lambda ev: continuous(a, b, stream, ev, s), a, b,
          stream)


if __name__ == "__main__":
    main()
