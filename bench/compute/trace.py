"""The limiter's own view on a real GPU, next to what the tenants achieved.

Runs a few scenarios with GPUSLICE_LOG_LEVEL=debug and summarises the
interposer's debug log per tenant: windows (occupancy, planned length,
launches, charge) and outer-loop runs (occupancy, NVML per-process and device
utilisation, power, the corrections c and s), with each tenant's throughput
ratio against the exclusive run of the same load. Measured numbers only.
Usage: python3 bench/compute/trace.py --lib build-gpu/lib/libgpuslice.so --out DIR [--secs 8] [--only a,b]
"""
import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import bench  # noqa: E402

WIN = re.compile(r"window (\d+) us \(planned (\d+), closed at (\d+), (\d+) launches, (\w+)\): charged (\d+) us")
OUTER = re.compile(r"outer \S+: occupancy (\d+) ppm, (?:waited \d+ us of \d+, )?nvml ours (-?\d+) others (-?\d+) device (-?\d+) ppm, "
                   r"(?:\d+ active in the ledger, )?power (-?\d+)(?: \(now -?\d+\))?/(-?\d+) mW -> c (\d+)(?: \(not learnt\))? s (\d+)")


def run(specs, secs, warm=2):
    """specs: (load, env); returns [(units, stderr)] for the tenants started together."""
    start_at = time.time() + 3.0
    procs = []
    for load, env in specs:
        e = bench.clean_env()
        e.update(env or {})
        procs.append(subprocess.Popen([sys.executable, bench.WORKER, "--load", load, "--secs", str(secs), "--warm",
                                       str(warm), "--start-at", str(start_at)], env=e, stdout=subprocess.PIPE,
                                      stderr=subprocess.PIPE, text=True))
    out = []
    for p in procs:
        so, se = p.communicate(timeout=secs + warm + 120)
        if p.returncode != 0:
            raise RuntimeError(f"worker failed: {se[-1500:]}")
        out.append((json.loads(so.strip().splitlines()[-1])["units"], se))
    return out


def summarise(log, skip=0.3):
    wins = [tuple(map(int, m.groups()[:4])) + (m.group(5), int(m.group(6))) for m in WIN.finditer(log)]
    outs = [tuple(map(int, m.groups())) for m in OUTER.finditer(log)]
    wins = wins[int(len(wins) * skip):]
    outs = outs[int(len(outs) * skip):]
    r = {"windows": len(wins)}
    if wins:
        r.update({"occ_us": round(statistics.fmean(w[0] for w in wins)),
                  "planned_us": round(statistics.fmean(w[1] for w in wins)),
                  "closed_us": round(statistics.fmean(w[2] for w in wins)),
                  "launches": round(statistics.fmean(w[3] for w in wins), 1),
                  "measured_frac": round(sum(w[4] == "measured" for w in wins) / len(wins), 2),
                  "charged_us": round(statistics.fmean(w[5] for w in wins)),
                  "launches_per_occ_ms": round(sum(w[3] for w in wins) / max(1, sum(w[0] for w in wins)) * 1000, 1)})
    if outs:
        keys = ("occ", "ours", "others", "dev", "power_mw", "limit_mw", "c", "s")
        r["outer_mean"] = {k: round(statistics.fmean(o[i] for o in outs)) for i, k in enumerate(keys)}
        r["outer_last"] = dict(zip(keys, outs[-1]))
    return r


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--lib", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--secs", type=float, default=8)
    ap.add_argument("--only", default="", help="comma-separated scenario names (default: all)")
    a = ap.parse_args()
    regions = os.path.join(a.out, "trace-regions")
    os.makedirs(regions, exist_ok=True)

    def lim(name, **env):
        e = {"LD_PRELOAD": a.lib, "GPUSLICE_REGION": os.path.join(regions, f"{name}.region"),
             "GPUSLICE_CONTAINER": name, "GPUSLICE_LOG_LEVEL": "debug"}
        e.update({k: str(v) for k, v in env.items()})
        return e

    base = {}
    only = set(filter(None, a.only.split(",")))
    for load in ("small", "matmul"):
        ((u, _),) = run([(load, None)], a.secs)
        base[load] = statistics.fmean(u)
        print(json.dumps({"scenario": f"exclusive_{load}", "units_per_window": base[load]}), flush=True)
    scenarios = [
        ("small_cap99", [("small", lim("s99", GPUSLICE_CORES=99))]),
        ("small_cap30", [("small", lim("s30", GPUSLICE_CORES=30))]),
        ("small_cap70", [("small", lim("s70", GPUSLICE_CORES=70))]),
        ("matmul_cap30", [("matmul", lim("m30", GPUSLICE_CORES=30))]),
        ("matmul_cap70", [("matmul", lim("m70", GPUSLICE_CORES=70))]),
        ("matmul_two_caps_30_70", [("matmul", lim("a30", GPUSLICE_CORES=30)),
                                   ("matmul", lim("b70", GPUSLICE_CORES=70))]),
        ("matmul_two_shares_30_70",
         [("matmul", lim("sa", GPUSLICE_COMPUTE_MODE="share", GPUSLICE_SHARE_WEIGHT=30)),
          ("matmul", lim("sb", GPUSLICE_COMPUTE_MODE="share", GPUSLICE_SHARE_WEIGHT=70))]),
    ]
    for name, specs in scenarios:
        if only and name not in only:
            continue
        res = run(specs, a.secs)
        for i, ((units, log), (load, _)) in enumerate(zip(res, specs)):
            mean, cv, _ = bench.stats(units, base[load])
            with open(os.path.join(a.out, f"trace-{name}-{i}.log"), "w") as f:
                f.write(log)
            rec = {"scenario": name, "tenant": i, "ratio": round(mean, 4), "cv": round(cv, 4)}
            rec.update(summarise(log))
            print(json.dumps(rec), flush=True)


if __name__ == "__main__":
    main()
