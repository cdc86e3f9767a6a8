"""Where a launch-bound load's throughput goes under a cap (one batch, ~3 min).

Alternates, 3 rounds, each run 6 s after 2 s of warm-up, pinned to one CPU:
the 1024^2 bf16 matmul load exclusive (no interposer), under a cap of 99
(the gate's per-launch cost), under a cap of 30, and under a cap of 30 with
the power correction off; then the fp32 variant (GPU-bound) exclusive and
capped at 30. Also the cost of one clock read on this host. Prints measured
launches per 0.5 s window and ratios against the mean exclusive rate.
Usage: python3 bench/compute/small_load.py --lib build-gpu/lib/libgpuslice.so --out DIR"""
import argparse
import json
import os
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import bench  # noqa: E402


def clock_cost_ns(n=1_000_000):
    t0 = time.perf_counter_ns()
    for _ in range(n):
        time.monotonic_ns()
    t1 = time.perf_counter_ns()
    for _ in range(n):
        pass
    return (t1 - t0 - (time.perf_counter_ns() - t1)) / n


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--lib", required=True)
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    regions = os.path.join(a.out, "regions")
    os.makedirs(regions, exist_ok=True)
    try:
        with open("/sys/devices/system/clocksource/clocksource0/current_clocksource") as f:
            src = f.read().strip()
    except OSError:
        src = None
    print(json.dumps({"clocksource": src, "monotonic_ns_per_call_python": round(clock_cost_ns(), 1)}), flush=True)

    def env(name, **kv):
        e = {"LD_PRELOAD": a.lib, "GPUSLICE_REGION": os.path.join(regions, f"{name}.region"),
             "GPUSLICE_CONTAINER": name}
        e.update({k: str(v) for k, v in kv.items()})
        return e

    runs = {}
    plan = [("exclusive", "small", None), ("cap99", "small", {"GPUSLICE_CORES": 99}),
            ("cap30", "small", {"GPUSLICE_CORES": 30}),
            ("cap30_no_power", "small", {"GPUSLICE_CORES": 30, "GPUSLICE_POWER_EXPONENT": 0})]
    for rnd in range(3):
        for name, load, kv in plan:
            (u,) = bench.tenants([(load, env(f"{name}{rnd}", **kv) if kv else None)], 6, 2)
            runs.setdefault(name, []).append(statistics.fmean(u))
            print(json.dumps({"round": rnd, "run": name, "units_per_window": statistics.fmean(u),
                              "cv": round(statistics.pstdev(u) / statistics.fmean(u), 4)}), flush=True)
    for name, load, kv in [("fp32_exclusive", "small32", None), ("fp32_cap30", "small32", {"GPUSLICE_CORES": 30}),
                           ("fp32_exclusive", "small32", None)]:
        (u,) = bench.tenants([(load, env(name, **kv) if kv else None)], 6, 2)
        runs.setdefault(name, []).append(statistics.fmean(u))
        print(json.dumps({"run": name, "units_per_window": statistics.fmean(u),
                          "cv": round(statistics.pstdev(u) / statistics.fmean(u), 4)}), flush=True)
    base = statistics.fmean(runs["exclusive"])
    base32 = statistics.fmean(runs["fp32_exclusive"])
    print(json.dumps({k: round(statistics.fmean(v) / (base32 if k.startswith("fp32") else base), 4)
                      for k, v in runs.items()}), flush=True)


if __name__ == "__main__":
    main()
