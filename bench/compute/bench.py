"""Compute-limiter benchmark driver of the window-time design (bench/results/compute-2026-11-2[12]-*).

Every ratio is a tenant's throughput per window divided by the same load's
exclusive throughput measured in the same run, with no interposer (for the
launch-bound load right before and right after each capped run, averaged).
Every tenant, exclusive runs included, is pinned to a CPU of its own. Window
CV is reported for 0.5 s and for 1 s windows (the issue allows 0.5-1 s).
Loads (worker.py): matmul (bf16 4096^2), graph (CUDA-graph replay of it),
small32 (fp32 1024^2, ~40 us kernels, GPU-bound), small (bf16 1024^2, ~4 us
kernels, bound by the Python thread's launch rate).
Prints one JSON line per scenario and a final table; measured numbers only."""
import argparse
import json
import os
import statistics
import subprocess
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
WORKER = os.path.join(HERE, "worker.py")


def clean_env():
    return {k: v for k, v in os.environ.items()
            if not k.startswith(("GPUSLICE_", "CUDA_DEVICE_SM_LIMIT", "CUDA_DEVICE_MEMORY", "GPU_CORE_", "LD_PRELOAD"))}


class Monitor:
    """NVML while a scenario runs (every 50 ms): SM clock, power, device
    utilisation; every 250 ms the raw per-process utilisation samples
    (nvmlDeviceGetProcessUtilization), to see what the limiter's outer loop
    gets. Measured numbers only; None where NVML is not there."""

    def __init__(self):
        try:
            sys.path.insert(0, HERE)
            import nvml_probe
            self.nv = nvml_probe.Nvml()
        except Exception:  # noqa: BLE001 - no NVML: no monitor
            self.nv = None

    def start(self):
        self.cp, self.pu, self.rcs = [], [], {}
        self.stop_ev = threading.Event()
        if not self.nv:
            return
        self.nv.proc_util()
        self.th = threading.Thread(target=self.loop)
        self.th.start()

    def loop(self):
        t_util = 0.0
        while not self.stop_ev.is_set():
            now = time.monotonic()
            self.cp.append((now,) + self.nv.clock_power())
            if now - t_util >= 0.25:
                t_util = now
                r = self.nv.proc_util()
                if isinstance(r, dict):
                    self.rcs[r["rc"]] = self.rcs.get(r["rc"], 0) + 1
                else:
                    self.rcs[0] = self.rcs.get(0, 0) + 1
                    self.pu.append((now, r))
            time.sleep(0.05)

    def finish(self, secs, pids):
        self.stop_ev.set()
        if not self.nv:
            return {}
        self.th.join()
        if not self.cp:
            return {}
        t_end = self.cp[-1][0]
        cp = [x for x in self.cp if x[0] >= t_end - secs]
        busy = [x for x in cp if x[3] > 0]
        per = {}
        for t, lst in self.pu:
            if t < t_end - secs:
                continue
            for pid, sm, _ in lst:
                key = f"tenant{pids.index(pid)}" if pid in pids else f"pid{pid}"
                per.setdefault(key, []).append(sm)
        return {"sm_mhz_busy": round(statistics.fmean(x[1] for x in busy)) if busy else None,
                "power_w": round(statistics.fmean(x[2] for x in cp)),
                "dev_util": round(statistics.fmean(x[3] for x in cp), 1),
                "power_capped_frac": round(sum(1 for x in cp if x[4] & 0x4) / len(cp), 2),
                "nvml_proc_rc": {str(k): v for k, v in self.rcs.items()},
                "nvml_proc_smutil": {k: [round(statistics.fmean(v), 1), len(v)] for k, v in per.items()}}


MON = None
LAST = {}


def tenants(specs, secs, warm):
    """specs: list of (load, env or None). Starts them together; per-window units lists.
    LAST gets what the NVML monitor saw over the measured part."""
    start_at = time.time() + 3.0  # time to import torch and build the load
    procs = []
    for i, (load, env) in enumerate(specs):
        e = clean_env()
        e.update(env or {})
        procs.append(subprocess.Popen([sys.executable, WORKER, "--load", load, "--secs", str(secs), "--warm",
                                       str(warm), "--start-at", str(start_at), "--cpu", str(4 + 2 * i)], env=e,
                                      stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
    if MON:
        MON.start()
    out, err = [], None
    for p in procs:
        so, se = p.communicate(timeout=secs + warm + 120)
        if p.returncode != 0:
            err = err or f"worker failed: {se[-1500:]}"
        else:
            out.append(json.loads(so.strip().splitlines()[-1])["units"])
    LAST.clear()
    if MON:
        LAST.update(MON.finish(secs, [p.pid for p in procs]))
    if err:
        raise RuntimeError(err)
    return out


def launch_rate(lib, pairs=5, cpu="2"):
    """Empty-kernel launch rate with the interposer loaded (no limit) over
    without, pinned to one CPU, alternating; ratio of the medians."""
    rates = {"native": [], "preload": []}
    for i in range(pairs):
        order = ("native", "preload") if i % 2 == 0 else ("preload", "native")
        for kind in order:
            e = clean_env()
            if kind == "preload":
                e["LD_PRELOAD"] = lib
            r = subprocess.run(["taskset", "-c", cpu, sys.executable, WORKER, "--load", "launch", "--secs", "2",
                                "--warm", "0.5", "--window", "2"], env=e, capture_output=True, text=True,
                               timeout=120)
            if r.returncode != 0:
                raise RuntimeError(f"launch worker failed: {r.stderr[-1500:]}")
            rates[kind].append(json.loads(r.stdout.strip().splitlines()[-1])["units"][0] / 2.0)
    return rates


def stats(units, base):
    """Mean ratio, CV of 0.5 s windows, CV of 1 s windows (pairs of them)."""
    def cv(r):
        m = statistics.fmean(r)
        return statistics.pstdev(r) / m if m > 0 else float("nan")
    r = [u / base for u in units]
    r1 = [(r[i] + r[i + 1]) / 2 for i in range(0, len(r) - 1, 2)]
    return statistics.fmean(r), cv(r), cv(r1)


def capped(name, p, mean, cv, cv1):
    """A cap scenario's record: within 0.03 of p/100, CV <= 0.10 (1 s windows)."""
    return {"scenario": name, "target": p / 100, "ratio": round(mean, 4), "window_cv": round(cv, 4),
            "window_cv_1s": round(cv1, 4), "pass": abs(mean - p / 100) <= 0.03 and cv1 <= 0.10}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--lib", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--secs", type=float, default=20)
    ap.add_argument("--budget", type=float, default=490, help="skip scenarios that would start after this many s")
    ap.add_argument("--only", default="", help="comma-separated scenario names to run (default: all)")
    a = ap.parse_args()
    only = set(filter(None, a.only.split(",")))
    global MON
    MON = Monitor()
    t_start = time.monotonic()
    regions = os.path.join(a.out, "regions")
    os.makedirs(regions, exist_ok=True)
    results = []
    jl = open(os.path.join(a.out, "compute_results.jsonl"), "w")

    def emit(rec):
        if LAST and "scenario" in rec and "skipped" not in rec:
            rec["nvml"] = dict(LAST)
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
        if only and name not in only:
            return True
        if time.monotonic() - t_start > a.budget:
            emit({"scenario": name, "skipped": "time budget"})
            return True
        return False

    def exclusive(load, name):
        """The load alone, without the interposer, for 6 s: its mean units per 0.5 s window."""
        (u,) = tenants([(load, None)], 6, 2)
        b = statistics.fmean(u)
        _, cv, cv1 = stats(u, b)
        emit({"scenario": name, "units_per_window": b, "window_s": 0.5, "window_cv": round(cv, 4),
              "window_cv_1s": round(cv1, 4)})
        return b

    base = {}
    for load in ("matmul", "small", "small32", "graph"):
        if only and not any(load in n for n in only) and load != "matmul":
            continue
        base[load] = exclusive(load, f"exclusive_{load}")

    for load in ("matmul",):
        for p in (10, 30, 50, 70):
            name = f"cap{p}_{load}"
            if over_budget(name):
                continue
            try:
                (u,) = tenants([(load, limited(name, GPUSLICE_CORES=p))], a.secs, 3)
            except RuntimeError as e:  # e.g. a graph capture that fails under the interposer
                emit({"scenario": name, "target": p / 100, "error": str(e)[-600:], "pass": False})
                continue
            emit(capped(name, p, *stats(u, base[load])))

    if not over_budget("two_containers_cap_30_70"):
        ua, ub = tenants([("matmul", limited("capA", GPUSLICE_CORES=30)),
                          ("matmul", limited("capB", GPUSLICE_CORES=70))], a.secs, 4)
        ra = stats(ua, base["matmul"])[0]
        rb = stats(ub, base["matmul"])[0]
        emit({"scenario": "two_containers_cap_30_70", "ratios": [round(ra, 4), round(rb, 4)],
              "pass": abs(ra - 0.30) <= 0.03 and abs(rb - 0.70) <= 0.03})
    if not over_budget("two_containers_share_30_70"):
        share = {"GPUSLICE_COMPUTE_MODE": "share"}
        ua, ub = tenants([("matmul", limited("shareA", GPUSLICE_SHARE_WEIGHT=30, **share)),
                          ("matmul", limited("shareB", GPUSLICE_SHARE_WEIGHT=70, **share))], a.secs, 4)
        ra = stats(ua, base["matmul"])[0]
        rb = stats(ub, base["matmul"])[0]
        tot = ra + rb
        emit({"scenario": "two_containers_share_30_70", "ratios": [round(ra, 4), round(rb, 4)],
              "split": [round(ra / tot, 4), round(rb / tot, 4)] if tot else None, "combined": round(tot, 4),
              "pass": tot >= 0.95 and abs(ra / tot - 0.30) <= 0.03})
    if not over_budget("lone_share"):
        (u,) = tenants([("matmul", limited("lone", GPUSLICE_COMPUTE_MODE="share", GPUSLICE_SHARE_WEIGHT=30))],
                       a.secs, 3)
        r, cv, cv1 = stats(u, base["matmul"])
        emit({"scenario": "lone_share", "ratio": round(r, 4), "window_cv": round(cv, 4), "window_cv_1s": round(cv1, 4),
              "pass": r >= 0.95})
    if not over_budget("two_procs_one_container_cap40"):
        env = limited("pair", GPUSLICE_CORES=40)
        ua, ub = tenants([("matmul", env), ("matmul", env)], a.secs, 4)
        ra = stats(ua, base["matmul"])[0]
        rb = stats(ub, base["matmul"])[0]
        emit({"scenario": "two_procs_one_container_cap40", "ratios": [round(ra, 4), round(rb, 4)],
              "together": round(ra + rb, 4), "pass": ra + rb <= 0.43})
    if not over_budget("launch_rate_no_limit"):
        LAST.clear()
        rates = launch_rate(a.lib)
        r = statistics.median(rates["preload"]) / statistics.median(rates["native"])
        emit({"scenario": "launch_rate_no_limit", "ratio": round(r, 4), "pass": r >= 0.98,
              "method": "taskset -c 2, 5 alternating pairs, 2 s each, ratio of medians",
              "launches_per_s": {k: [round(x) for x in v] for k, v in rates.items()}})

    for load in ("small32", "small", "graph"):
        for p in (10, 30, 50, 70):
            name = f"cap{p}_{load}"
            if over_budget(name):
                continue
            if load == "small":
                # Launch-bound: its exclusive rate follows the host CPU's state
                # (it moved by 10 % between runs), so measure it right before
                # and right after, and take the mean.
                before = exclusive("small", f"exclusive_small_before_{name}")
            try:
                (u,) = tenants([(load, limited(name, GPUSLICE_CORES=p))], a.secs, 3)
            except RuntimeError as e:  # e.g. a graph capture that fails under the interposer
                emit({"scenario": name, "target": p / 100, "error": str(e)[-600:], "pass": False})
                continue
            if load == "small":
                seen = dict(LAST)  # what NVML saw during the capped run
                base[load] = (before + exclusive("small", f"exclusive_small_after_{name}")) / 2
                LAST.clear()
                LAST.update(seen)
            emit(capped(name, p, *stats(u, base[load])))

    print()
    print(f"{'scenario':34s} {'result':60s} pass")
    for rec in results:
        if "pass" not in rec:
            continue
        shown = {k: v for k, v in rec.items()
                 if k in ("ratio", "window_cv", "window_cv_1s", "ratios", "split", "combined", "together", "error")}
        print(f"{rec['scenario']:34s} {json.dumps(shown):60s} {rec['pass']}")
    print(f"total {time.monotonic() - t_start:.0f} s; results in {a.out}/compute_results.jsonl")


if __name__ == "__main__":
    main()
