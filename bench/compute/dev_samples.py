"""How NVML's device utilisation follows a load over time: a bf16 matmul
loop in phases of known duty (idle, busy, duty-cycled at 100 ms periods),
while a thread polls nvmlDeviceGetSamples (GPU utilisation) and
nvmlDeviceGetUtilizationRates every 50 ms. Prints one JSON object: the
phases (host µs, CLOCK_REALTIME as NVML's timestamps are), the samples and
the polled rates, and per phase the samples' mean against the duty. Tells
whether the device's busy time can be read over one outer interval (250 ms)
rather than over NVML's own averaging period. No interposer."""
import json
import threading
import time

import torch

from nvml_probe import Nvml

PHASES = [("idle", 0.0, 1.5), ("busy", 1.0, 1.0), ("idle", 0.0, 1.0), ("duty30", 0.3, 2.0),
          ("idle", 0.0, 0.5), ("duty70", 0.7, 2.0), ("busy", 1.0, 0.3), ("idle", 0.0, 1.5)]


def now_us():
    return int(time.time() * 1e6)


def main():
    nv = Nvml()
    a = torch.randn(4096, 4096, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(4096, 4096, device="cuda", dtype=torch.bfloat16)
    torch.cuda.synchronize()
    stop = threading.Event()
    polled, samples = [], []
    first = nv.device_samples()  # whatever the buffer holds: sets where we start
    seen = max((t for t, _ in first), default=0) if isinstance(first, list) else 0

    def poll():
        nonlocal seen
        while not stop.is_set():
            got = nv.device_samples(since=seen)
            if isinstance(got, list) and got:
                samples.extend(got)
                seen = max(t for t, _ in got)
            _, _, util, _ = nv.clock_power()
            polled.append((now_us(), util))
            time.sleep(0.05)

    th = threading.Thread(target=poll)
    th.start()
    spans = []
    for name, duty, secs in PHASES:
        t0 = now_us()
        end = time.time() + secs
        while time.time() < end:
            period = 0.1
            on = duty * period
            s = time.time()
            if duty > 0:
                while time.time() - s < on:
                    for _ in range(4):
                        a @ b
                    torch.cuda.synchronize()
            rest = period - (time.time() - s)
            if rest > 0:
                time.sleep(rest)
        spans.append({"phase": name, "duty": duty, "t0": t0, "t1": now_us()})
    time.sleep(1.0)
    stop.set()
    th.join()
    for sp in spans:
        inside = [v for t, v in samples if sp["t0"] <= t <= sp["t1"]]
        sp["samples"] = len(inside)
        sp["sample_mean"] = sum(inside) / len(inside) if inside else None
        pol = [v for t, v in polled if sp["t0"] <= t <= sp["t1"]]
        sp["rates_mean"] = sum(pol) / len(pol) if pol else None
    gaps = [b[0] - a[0] for a, b in zip(samples, samples[1:])]
    print(json.dumps({"phases": spans, "sample_gap_us": sorted(gaps)[len(gaps) // 2] if gaps else None,
                      "first_call": first if isinstance(first, dict) else len(first),
                      "samples": samples, "polled": polled}))


if __name__ == "__main__":
    main()
