"""Diagnostics for the compute limiter on a real GPU (one batch, ~2 min).

Records, per phase, the SM clock and power (NVML, every 20 ms) and the raw
nvmlDeviceGetProcessUtilization samples (every 250 ms), next to each
tenant's throughput ratio against the exclusive run of the same load:
- exclusive matmul; matmul at a self-imposed 50 % duty cycle (no
  interposer): does duty-cycling raise the clock and the work per busy ms?
- matmul capped at 30 and 70 (the interposer);
- two unlimited matmul tenants, then capped 30/70 in two containers: what
  NVML reports per process under time-slicing;
- small kernels exclusive and capped at 30.
Usage: python3 bench/compute/diag.py --lib build-gpu/lib/libgpuslice.so --out DIR
Prints measured numbers only."""
import argparse
import json
import os
import statistics
import subprocess
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import bench  # noqa: E402
from nvml_probe import Nvml  # noqa: E402


def monitor(nv, stop, rec):
    t_util = 0.0
    while not stop.is_set():
        now = time.monotonic()
        rec["cp"].append((now,) + nv.clock_power())
        if now - t_util >= 0.25:
            t_util = now
            rec["pu"].append((round(now - rec["t0"], 2), nv.proc_util()))
        time.sleep(0.02)


def phase(nv, name, specs, secs, base_load=None, base=None):
    rec = {"cp": [], "pu": [], "t0": time.monotonic()}
    nv.proc_util()  # consume history
    stop = threading.Event()
    th = threading.Thread(target=monitor, args=(nv, stop, rec))
    th.start()
    try:
        units = bench.tenants(specs, secs, 2)
    finally:
        stop.set()
        th.join()
    # only the measured part (after start + warm): the last secs seconds
    t_end = rec["cp"][-1][0]
    cp = [x for x in rec["cp"] if x[0] >= t_end - secs]
    clocks = sorted(x[1] for x in cp)
    busy = [x for x in cp if x[3] > 0]
    out = {"phase": name,
           "units_per_window": [round(statistics.fmean(u), 2) for u in units],
           "sm_mhz_p10_p50_p90": [clocks[len(clocks) // 10], clocks[len(clocks) // 2], clocks[9 * len(clocks) // 10]],
           "sm_mhz_mean_when_util>0": round(statistics.fmean(x[1] for x in busy), 1) if busy else None,
           "power_w_mean": round(statistics.fmean(x[2] for x in cp), 1),
           "util_mean": round(statistics.fmean(x[3] for x in cp), 1),
           "throttle_reasons": sorted({hex(x[4]) for x in cp})}
    if base:
        out["ratios"] = [round(statistics.fmean(u) / base, 4) for u in units]
    # raw NVML per-process samples: print a few periods from the middle
    pu = [p for p in rec["pu"] if isinstance(p[1], list)]
    out["proc_util_raw_middle"] = pu[len(pu) // 2: len(pu) // 2 + 6]
    agg = {}
    for _, lst in pu:
        for pid, sm, _ in lst:
            agg.setdefault(pid, []).append(sm)
    out["proc_util_mean_by_pid"] = {str(k): [round(statistics.fmean(v), 1), len(v)] for k, v in agg.items()}
    print(json.dumps(out), flush=True)
    return out


def duty_child(secs, warm, start_at):
    """matmul for 25 ms, idle 25 ms, own loop; prints units per window."""
    import torch
    x = torch.randn(4096, 4096, device="cuda", dtype=torch.bfloat16)
    y = torch.randn(4096, 4096, device="cuda", dtype=torch.bfloat16)
    for _ in range(3):
        x @ y
    torch.cuda.synchronize()
    while time.time() < start_at:
        time.sleep(0.005)
    t0 = time.monotonic()
    t_meas, t_end = t0 + warm, t0 + warm + secs
    units, busy = 0, 0.0
    while True:
        a = time.monotonic()
        n = 0
        while time.monotonic() - a < 0.025:
            for _ in range(4):
                x @ y
            torch.cuda.synchronize()
            n += 4
        b = time.monotonic()
        if a >= t_meas:
            units += n
            busy += b - a
        if b >= t_end:
            break
        time.sleep(0.025)
    print(json.dumps({"duty_units_per_busy_s": units / busy, "busy_frac": busy / secs}), flush=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--lib")
    ap.add_argument("--out")
    ap.add_argument("--child")
    ap.add_argument("--secs", type=float, default=6)
    a = ap.parse_args()
    if a.child == "duty":
        duty_child(a.secs, 2, time.time() + 3)
        return
    nv = Nvml()
    print(json.dumps({"static": nv.static()}), flush=True)
    regions = os.path.join(a.out, "diag-regions")
    os.makedirs(regions, exist_ok=True)

    def lim(name, **env):
        e = {"LD_PRELOAD": a.lib, "GPUSLICE_REGION": os.path.join(regions, f"{name}.region"),
             "GPUSLICE_CONTAINER": name}
        e.update({k: str(v) for k, v in env.items()})
        return e

    s = a.secs
    ex = phase(nv, "exclusive_matmul", [("matmul", None)], s)
    base = ex["units_per_window"][0]
    r = subprocess.run([sys.executable, __file__, "--child", "duty", "--secs", str(s)], capture_output=True,
                       text=True, env=bench.clean_env())
    d = json.loads(r.stdout.strip().splitlines()[-1]) if r.returncode == 0 else {"err": r.stderr[-500:]}
    if "duty_units_per_busy_s" in d:
        d["work_per_busy_time_vs_exclusive"] = round(d["duty_units_per_busy_s"] * 0.5 / base, 4)
    print(json.dumps({"phase": "self_duty_cycle_50", **d}), flush=True)
    for p in (30, 70):
        phase(nv, f"cap{p}_matmul", [("matmul", lim(f"c{p}", GPUSLICE_CORES=p))], s, base=base)
    phase(nv, "two_unlimited_matmul", [("matmul", None), ("matmul", None)], s, base=base)
    phase(nv, "two_containers_cap_30_70", [("matmul", lim("A", GPUSLICE_CORES=30)),
                                           ("matmul", lim("B", GPUSLICE_CORES=70))], s, base=base)
    phase(nv, "one_capped30_one_unlimited", [("matmul", lim("A2", GPUSLICE_CORES=30)), ("matmul", None)], s,
          base=base)
    sx = phase(nv, "exclusive_small", [("small", None)], s)
    phase(nv, "cap30_small", [("small", lim("s30", GPUSLICE_CORES=30))], s, base=sx["units_per_window"][0])


if __name__ == "__main__":
    main()
