"""Compute-limiter benchmark driver (bench/compute/run_gpu.sh runs it).

Every ratio is a tenant's throughput per window divided by the same load's
exclusive throughput measured earlier in the same run, with no interposer.
Prints one JSON line per scenario and a final table; measured numbers only."""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
WORKER = os.path.join(HERE, "worker.py")


def clean_env():
    return {k: v for k, v in os.environ.items()
            if not k.startswith(("GPUSLICE_", "CUDA_DEVICE_SM_LIMIT", "CUDA_DEVICE_MEMORY", "GPU_CORE_", "LD_PRELOAD"))}


def tenants(specs, secs, warm):
    """specs: list of (load, env or None). Starts them together; per-window units lists."""
    start_at = time.time() + 3.0  # time to import torch and build the load
    procs = []
    for load, env in specs:
        e = clean_env()
        e.update(env or {})
        procs.append(subprocess.Popen([sys.executable, WORKER, "--load", load, "--secs", str(secs), "--warm",
                                       str(warm), "--start-at", str(start_at)], env=e, stdout=subprocess.PIPE,
                                      stderr=subprocess.PIPE, text=True))
    out = []
    for p in procs:
        so, se = p.communicate(timeout=secs + warm + 120)
        if p.returncode != 0:
            raise RuntimeError(f"worker failed: {se[-2000:]}")
        out.append(json.loads(so.strip().splitlines()[-1])["units"])
    return out


def stats(units, base):
    r = [u / base for u in units]
    mean = statistics.fmean(r)
    cv = statistics.pstdev(r) / mean if mean > 0 else float("nan")
    return mean, cv


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--lib", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--secs", type=float, default=20)
    ap.add_argument("--budget", type=float, default=490, help="skip scenarios that would start after this many s")
    a = ap.parse_args()
    t_start = time.monotonic()
    regions = os.path.join(a.out, "regions")
    os.makedirs(regions, exist_ok=True)
    results = []
    jl = open(os.path.join(a.out, "compute_results.jsonl"), "w")

    def emit(rec):
        rec["elapsed_s"] = round(time.monotonic() - t_start, 1)
        print(json.dumps(rec), flush=True)
        jl.write(json.dumps(rec) + "\n")
        jl.flush()
        results.append(rec)

    def limited(name, **env):
        e = {"LD_PRELOAD": a.lib, "GPUSLICE_REGION": os.path.join(regions, f"{name}.region"),
             "GPUSLICE_CONTAINER": name}
        e.update({k: str(v) for k, v in env.items()})
        return e

    def over_budget(name):
        if time.monotonic() - t_start > a.budget:
            emit({"scenario": name, "skipped": "time budget"})
            return True
        return False

    base = {}
    for load in ("matmul", "small", "graph", "launch"):
        secs = 6 if load != "launch" else 5
        (u,) = tenants([(load, None)], secs, 2)
        base[load] = statistics.fmean(u)
        emit({"scenario": f"exclusive_{load}", "units_per_window": base[load], "window_s": 0.5})

    for load in ("matmul",):
        for p in (10, 30, 50, 70):
            name = f"cap{p}_{load}"
            if over_budget(name):
                continue
            (u,) = tenants([(load, limited(name, GPUSLICE_CORES=p))], a.secs, 3)
            mean, cv = stats(u, base[load])
            emit({"scenario": name, "target": p / 100, "ratio": round(mean, 4), "window_cv": round(cv, 4),
                  "pass": abs(mean - p / 100) <= 0.03 and cv <= 0.10})

    if not over_budget("two_containers_cap_30_70"):
        ua, ub = tenants([("matmul", limited("capA", GPUSLICE_CORES=30)),
                          ("matmul", limited("capB", GPUSLICE_CORES=70))], a.secs, 4)
        ra, _ = stats(ua, base["matmul"])
        rb, _ = stats(ub, base["matmul"])
        emit({"scenario": "two_containers_cap_30_70", "ratios": [round(ra, 4), round(rb, 4)],
              "pass": abs(ra - 0.30) <= 0.03 and abs(rb - 0.70) <= 0.03})
    if not over_budget("two_containers_share_30_70"):
        share = {"GPUSLICE_COMPUTE_MODE": "share"}
        ua, ub = tenants([("matmul", limited("shareA", GPUSLICE_SHARE_WEIGHT=30, **share)),
                          ("matmul", limited("shareB", GPUSLICE_SHARE_WEIGHT=70, **share))], a.secs, 4)
        ra, _ = stats(ua, base["matmul"])
        rb, _ = stats(ub, base["matmul"])
        tot = ra + rb
        emit({"scenario": "two_containers_share_30_70", "ratios": [round(ra, 4), round(rb, 4)],
              "split": [round(ra / tot, 4), round(rb / tot, 4)] if tot else None, "combined": round(tot, 4),
              "pass": tot >= 0.95 and abs(ra / tot - 0.30) <= 0.03})
    if not over_budget("lone_share"):
        (u,) = tenants([("matmul", limited("lone", GPUSLICE_COMPUTE_MODE="share", GPUSLICE_SHARE_WEIGHT=30))],
                       a.secs, 3)
        r, cv = stats(u, base["matmul"])
        emit({"scenario": "lone_share", "ratio": round(r, 4), "window_cv": round(cv, 4), "pass": r >= 0.95})
    if not over_budget("two_procs_one_container_cap40"):
        env = limited("pair", GPUSLICE_CORES=40)
        ua, ub = tenants([("matmul", env), ("matmul", env)], a.secs, 4)
        ra, _ = stats(ua, base["matmul"])
        rb, _ = stats(ub, base["matmul"])
        emit({"scenario": "two_procs_one_container_cap40", "ratios": [round(ra, 4), round(rb, 4)],
              "together": round(ra + rb, 4), "pass": ra + rb <= 0.43})
    if not over_budget("launch_rate_no_limit"):
        (u,) = tenants([("launch", {"LD_PRELOAD": a.lib})], 5, 2)
        r, _ = stats(u, base["launch"])
        emit({"scenario": "launch_rate_no_limit", "ratio": round(r, 4), "pass": r >= 0.98})

    for load in ("small", "graph"):
        for p in (10, 30, 50, 70):
            name = f"cap{p}_{load}"
            if over_budget(name):
                continue
            (u,) = tenants([(load, limited(name, GPUSLICE_CORES=p))], a.secs, 3)
            mean, cv = stats(u, base[load])
            emit({"scenario": name, "target": p / 100, "ratio": round(mean, 4), "window_cv": round(cv, 4),
                  "pass": abs(mean - p / 100) <= 0.03 and cv <= 0.10})

    print()
    print(f"{'scenario':34s} {'result':40s} pass")
    for rec in results:
        if "pass" not in rec:
            continue
        shown = {k: v for k, v in rec.items() if k in ("ratio", "window_cv", "ratios", "split", "combined", "together")}
        print(f"{rec['scenario']:34s} {json.dumps(shown):40s} {rec['pass']}")
    print(f"total {time.monotonic() - t_start:.0f} s; results in {a.out}/compute_results.jsonl")


if __name__ == "__main__":
    main()
