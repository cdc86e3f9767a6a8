"""GPU-time compute limits on a real GPU (issue 12): each load alone, then
under caps; co-location; two containers in both layouts; launch rate.
Writes $OUT/gputime.jsonl and prints it. Usage:
  python3 bench/compute/gputime.py --lib build-gpu/lib/libgpuslice.so --out DIR --only a,b --caps 10,30
--only picks loads (matmul, matmul-dense, small, decoder, train, graphinf, jax,
cupy) and scenarios
(coloc, mps, decoverhead: the limiter's host cost on the decoder, fresh: each
load named in --only capped anew under each of --caps, twice, with no warm-up,
its rate every 0.25 s against alone's (a new container's first second), turns: the
co-location scenarios in alternating turns of 2.5 s with every tenant started
once, so that the host's drift cancels, capturns: the loads named in --only
alone and under each of --caps in such turns, instead of one after the other
(--base-lib LIB: under that interposer too, an A/B in the same turns;
--copies N: N processes of each; --plain-copies N: N processes without the
interposer too; --turn-cpus own: each tenant on CPUs of its own), two, launch,
launchc: the driver-API loop of launch_rate.c, each process timing the
interposer's cuLaunchKernel against the driver's own (--paired 1), built with
`cc -O2 -Isrc bench/compute/launch_rate.c -ldl -o BIN` and named by
--launch-bin BIN); --rounds repeats the co-location scenarios; --caps the single loads' caps, --caps-for
load=10,30 other caps for one load; --log DIR keeps each limited tenant's
debug log (GPUSLICE_LOG_LEVEL=3) there."""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
# The single loads, in the order they run (gputime_worker.py --load).
LOADS = ("matmul", "matmul-dense", "small", "decoder", "train", "graphinf", "jax", "cupy")
PIN = max(os.sched_getaffinity(0))  # the CPU the launch-rate runs share


class Busy:
    """Device utilisation (nvidia-smi, every 0.2 s) while a tenant measures,
    and with each sample NVML's SM clock, power draw and whether the power
    cap holds the clock down (nvml_probe; absent where NVML is not):
    done(r) averages them inside its measured span [t0, t1] (its start-up,
    compilation and warm-up are not its busy fraction) and keeps the other
    averages in self.nvml."""
    def __init__(self):
        self.vals, self.stop, self.nvml = [], False, {}
        try:
            import nvml_probe
            self.nv = nvml_probe.Nvml()
        except Exception:  # noqa: BLE001 - no NVML: utilisation alone
            self.nv = None
        self.t = threading.Thread(target=self.loop)
        self.t.start()

    def loop(self):
        p = subprocess.Popen(["nvidia-smi", "--query-gpu=utilization.gpu", "--format=csv,noheader,nounits",
                              "-lms", "200"], stdout=subprocess.PIPE, text=True)
        for line in p.stdout:
            if self.stop:
                break
            try:
                self.vals.append((time.time(), float(line), self.nv.clock_power() if self.nv else None))
            except ValueError:
                pass
        p.kill()

    def done(self, r):
        self.stop = True
        self.t.join()
        inside = [(u, cp) for t, u, cp in self.vals if r.get("t0", 0) + 0.5 <= t <= r.get("t1", 0)]
        cps = [cp for _, cp in inside if cp]
        if cps:
            self.nvml = clock_power_means(cps)
        return sum(u for u, _ in inside) / len(inside) / 100 if inside else -1


def clock_power_means(cps):
    """Mean SM MHz and power W of nvml_probe clock_power() readings, and the
    fraction of them with the power cap holding the clock."""
    return {"sm_mhz": round(sum(c[0] for c in cps) / len(cps)),
            "power_w": round(sum(c[1] for c in cps) / len(cps), 1),
            "power_capped": round(sum(1 for c in cps if c[3] & 0x4) / len(cps), 2)}


def idle_power():
    """The device's static clocks and power limit, and its draw with nothing
    running (the mean of 10 readings 0.1 s apart), or {} without NVML."""
    try:
        import nvml_probe
        nv = nvml_probe.Nvml()
    except Exception:  # noqa: BLE001
        return {}
    draws = []
    for _ in range(10):
        draws.append(nv.clock_power())
        time.sleep(0.1)
    return {"idle_power_w": round(sum(d[1] for d in draws) / len(draws), 1),
            "idle_util": max(d[2] for d in draws), **nv.static()}


LOG = {"dir": None, "n": 0}


def tenant_env(env):
    """This process's environment without any GPUSLICE_ setting, plus env."""
    e = {k: v for k, v in os.environ.items() if not k.startswith("GPUSLICE_")}
    e.update(env)
    return e


def median(v):
    return sorted(v)[len(v) // 2] if v else None


def tenant(load, env, secs, cpu=None, sync=None, turns=None, warm=None):
    e = tenant_env(env)
    if LOG["dir"] and "LD_PRELOAD" in env and "GPUSLICE_REGION" in env:
        e["GPUSLICE_LOG_LEVEL"] = "3"
    pin = ["taskset", "-c", str(cpu)] if cpu is not None else []
    if e.pop(OWN_PIDNS, None):
        pin += ["unshare", "--pid", "--fork", "--kill-child", "--mount-proc"]
    region = env.get("GPUSLICE_REGION", "free")
    # the agent's layout names the directory, not the region file
    where = os.path.basename(os.path.dirname(region)) if os.path.basename(region) == "region" else os.path.basename(region)
    name = f"{LOG['n']:02d}-{load}-{where}.log"
    LOG["n"] += 1
    # stderr goes to a file, never a pipe: a tenant whose debug log filled a
    # pipe nobody read yet would block in write() and measure as throttled
    err = open(os.path.join(LOG["dir"], name), "w+") if LOG["dir"] else tempfile.TemporaryFile("w+")
    cmd = [sys.executable, os.path.join(HERE, "gputime_worker.py"), "--load", load, "--secs", str(secs)]
    if warm is not None:
        cmd += ["--warm", str(warm)]
    if sync:
        cmd += ["--sync", sync]
    if turns:
        cmd += ["--turns", turns[0], "--names", ",".join(turns[1])]
    p = subprocess.Popen(pin + cmd, env=e, stdout=subprocess.PIPE, stderr=err, text=True)
    p.errfile = err
    return p


def turn_cpus(how, n):
    """n tenants' CPU lists: all on 6-7 (shared), or each on a pair of its
    own from CPU 2 up (own; CPUs 0-1 left to the orchestrator and the
    driver's threads), pairs reused where n outgrows the machine."""
    if how == "shared":
        return ["6-7"] * n
    mine = sorted(os.sched_getaffinity(0))[2:]
    pairs = [f"{mine[i]},{mine[i + 1]}" for i in range(0, len(mine) - 1, 2)] or ["6-7"]
    return [pairs[i % len(pairs)] for i in range(n)]


def wait_ready(d, ps, limit):
    """Until every tenant of ps has announced in d that it is warm (d/ready-*)."""
    t0 = time.time()
    while sum(f.startswith("ready-") for f in os.listdir(d)) < len(ps):
        if time.time() - t0 > limit or any(p.poll() is not None for p in ps):
            break  # a tenant died or hung in start-up: the others run on, and its result says why
        time.sleep(0.1)


class TurnMonitor:
    """NVML's SM clock, power draw and device utilisation every 25 ms while
    tenants take turns, each sample filed under the turn it fell in with
    its time since that turn began: how the clock and the draw move within
    a turn (the limiter's power correction follows a one-second mean).
    Does nothing where NVML is not there."""
    PARTS = ((0.3, 1.3), (1.3, 99.0))  # the measured part of a turn: its first second, the rest

    def __init__(self):
        self.samples, self.turn, self.since, self.stop = {}, None, 0.0, threading.Event()
        try:
            import nvml_probe
            self.nv = nvml_probe.Nvml()
        except Exception:  # noqa: BLE001 - no NVML: no monitor
            self.nv = None
            return
        self.t = threading.Thread(target=self.loop, daemon=True)
        self.t.start()

    def switch(self, turn):
        self.turn, self.since = turn, time.time()

    def loop(self):
        while not self.stop.wait(0.025):
            turn, since = self.turn, self.since
            if turn is not None:
                self.samples.setdefault(turn, []).append((time.time() - since, self.nv.clock_power()))

    def done(self):
        self.stop.set()
        if self.nv:
            self.t.join()

    def summary(self, turn):
        """Per part of the turn: mean SM MHz, power W, device utilisation %
        and the fraction of samples with the power cap holding the clock."""
        out = {}
        for lo, hi in self.PARTS:
            cps = [cp for since, cp in self.samples.get(turn, []) if lo <= since < hi]
            if cps:
                out[f"{lo}-{min(hi, 2.5)}s"] = {**clock_power_means(cps),
                                                 "util": round(sum(c[2] for c in cps) / len(cps), 1)}
        return out


def in_turns(tenants, phases, seg, cycles, ready_limit=240, monitor=None):
    """Tenants (load, env, cpus, names) that run only in the turns they are
    named in (gputime_worker.py --turns): phases is a list of lists of turn
    names; within a phase its turns alternate `cycles` times, `seg` seconds
    each. Returns each tenant's result: per name, its rate and latency in
    those turns. A TurnMonitor, if given, is told each turn as it begins."""
    d = tempfile.mkdtemp()
    ps = [tenant(load, env, 0, cpu=cpus, turns=(d, names)) for load, env, cpus, names in tenants]
    wait_ready(d, ps, ready_limit)
    for turns in phases:
        for _ in range(cycles):
            for t in turns:
                with open(os.path.join(d, "turn.tmp"), "w") as f:
                    f.write(t)
                os.replace(os.path.join(d, "turn.tmp"), os.path.join(d, "turn"))
                if monitor:
                    monitor.switch(t)
                time.sleep(seg)
    open(os.path.join(d, "stop"), "w").close()
    if monitor:
        monitor.done()
    return [result(p) for p in ps]


def side_by_side(tenants, secs, ready_limit=240):
    """Runs (load, env, cpus) tenants together; each measures the same span:
    every one warms until all are warm (gputime_worker.py --sync). Returns
    their results in order."""
    sync = tempfile.mkdtemp()
    ps = [tenant(load, env, secs, cpu=cpus, sync=sync) for load, env, cpus in tenants]
    wait_ready(sync, ps, ready_limit)
    open(os.path.join(sync, "go"), "w").close()
    return [result(p) for p in ps]


def result(p):
    out, _ = p.communicate()
    p.errfile.seek(0)
    err = p.errfile.read()
    p.errfile.close()
    for line in out.splitlines():
        if line.startswith("{"):
            return json.loads(line)
    return {"error": err[-800:]}


def limited(lib, state, name, extra):
    env = {"LD_PRELOAD": lib, "GPUSLICE_REGION": os.path.join(state, name + ".region")}
    env.update(extra)
    return env


def agent_layout(lib, root, name, extra):
    """A limited tenant laid out as the node agent lays out a container: its
    own state directory root/name, the device ledgers in root/ledgers."""
    d = os.path.join(root, name)
    ledgers = os.path.join(root, "ledgers")
    os.makedirs(d, exist_ok=True)
    os.makedirs(ledgers, exist_ok=True)
    return {"LD_PRELOAD": lib, "GPUSLICE_REGION": os.path.join(d, "region"), "GPUSLICE_LEDGER_DIR": ledgers, **extra}


# tenant() runs a tenant whose env sets this in a pid namespace of its own,
# as a pod without hostPID runs: NVML names host pids, none of them ours
OWN_PIDNS = "GS_BENCH_OWN_PIDNS"


MPS = {"CUDA_MPS_PIPE_DIRECTORY": "/tmp/mps-pipe", "CUDA_MPS_LOG_DIRECTORY": "/tmp/mps-log"}


def under_mps(run):
    """run() with an MPS control daemon up (its own pipe directory); quits
    the daemon whatever run() does."""
    env = {**os.environ, **MPS}
    for d in MPS.values():
        os.makedirs(d, exist_ok=True)
    subprocess.run(["nvidia-cuda-mps-control", "-d"], env=env, check=True)
    try:
        return run()
    finally:
        subprocess.run(["nvidia-cuda-mps-control"], input="quit\n", text=True, env=env)
        time.sleep(2)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--lib", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--secs", type=float, default=20)
    ap.add_argument("--only", default="")
    ap.add_argument("--caps", default="30")
    ap.add_argument("--caps-for", action="append", default=[])
    ap.add_argument("--log", default=None)
    ap.add_argument("--base-lib", default=None,
                    help="capturns: each cap under this interposer too; coloc: the capped modes too (an A/B)")
    ap.add_argument("--copies", type=int, default=1, help="capturns: processes per cap and interposer")
    ap.add_argument("--plain-copies", type=int, default=0,
                    help="capturns: processes without the interposer in each cap's turns (how far identical ones differ)")
    # own: no tenant's threads run on the CPUs of the one measured. Either
    # way identical processes of a host-bound load differ by up to 0.15
    # (compute-2026-12-02f), hence ratio_refs
    ap.add_argument("--turn-cpus", default="own", choices=["shared", "own"],
                    help="capturns: each tenant on two CPUs of its own (own), or every tenant on CPUs 6-7 (shared)")
    ap.add_argument("--launch-bin", default=None)
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--turn-cycles", type=int, default=8, help="turns: how often each phase's turns alternate")
    ap.add_argument("--turn-yield", default="", help="turns: GPUSLICE_SHARE_YIELD_US values to run share70/30 with too")
    ap.add_argument("--coloc-modes", default="",
                    help="plain,plain-shallow,share70/30,share70/30-yieldY,cap70/30,free/cap30,free/share30,mps70/30 (default: all)")
    ap.add_argument("--share-yield", default="250", help="GPUSLICE_SHARE_YIELD_US values to run share70/30 with")
    ap.add_argument("--launch-rounds", type=int, default=7)
    ap.add_argument("--inf-load", default="decoder", choices=["decoder", "decoder-heavy"],
                    help="the inference tenant of coloc, decoverhead and turns: decoder-heavy is a larger model on a batch of 32")
    ap.add_argument("--tag", default="", help="added to every line (the commit, the library's name)")
    a = ap.parse_args()
    LOG["dir"] = a.log
    if a.log:
        os.makedirs(a.log, exist_ok=True)
    caps_for = {k: [int(c) for c in v.split(",")] for k, v in (x.split("=") for x in a.caps_for)}
    if not os.path.isfile(a.lib):
        sys.exit(f"{a.lib}: no such library (build it first): every limited run would run unlimited")
    only = set(filter(None, a.only.split(",")))
    outf = open(os.path.join(a.out, "gputime.jsonl"), "a")

    def emit(d):
        if a.tag:
            d["tag"] = a.tag
        print(json.dumps(d), flush=True)
        outf.write(json.dumps(d) + "\n")
        outf.flush()

    state = tempfile.mkdtemp()
    sys.path.insert(0, HERE)
    emit({"scenario": "device", **idle_power()})
    # with capturns the loads named run only in its turns
    for load in [] if "capturns" in only else LOADS:
        if only and load not in only:
            continue
        b = Busy()
        alone = result(tenant(load, {}, a.secs))
        busy = b.done(alone)
        emit({"scenario": "alone", "load": load, "busy": busy, **b.nvml, **alone})
        caps = caps_for.get(load, [int(c) for c in a.caps.split(",")])
        for cap in caps:
            b = Busy()
            r = result(tenant(load, limited(a.lib, state, f"{load}{cap}", {"GPUSLICE_CORES": str(cap)}), a.secs))
            cb = b.done(r)
            u = busy
            emit({"scenario": f"cap{cap}", "load": load, "ratio": r.get("rate", 0) / alone["rate"],
                  "target_min": min(1, cap / 100 / u) - 0.05 if u > 0 else None, "busy": cb, **b.nvml, **r})
        if "fresh" in only:
            # a new container's first seconds: no warm-up, a region of its
            # own, the rate over each bin against alone's steady rate
            for cap in caps:
                for copy in range(2):
                    r = result(tenant(load, limited(a.lib, state, f"fresh{load}{cap}-{copy}",
                                                    {"GPUSLICE_CORES": str(cap)}), 4, warm=0))
                    ratios = [x / alone["rate"] for x in r.get("rate_bins", [])]
                    per_s = int(round(1 / r["bin_s"])) if ratios else 1
                    emit({"scenario": f"fresh{cap}", "load": load, "copy": copy, "ratio_bins": ratios,
                          "first_s": sum(ratios[:per_s]) / per_s if len(ratios) >= per_s else None,
                          "after": sum(ratios[per_s:]) / len(ratios[per_s:]) if len(ratios) > per_s else None,
                          "error": r.get("error")})
    if not only or "coloc" in only or "decoverhead" in only:
        # the decoder and the training on CPUs of their own, alone and side by
        # side; each pair measures the same span; rounds alternate the
        # scenarios (the host drifts by 10-20 % between device calls)
        INF, TR, NB = "2-3", "6-7", "10"
        share = {"GPUSLICE_COMPUTE_MODE": "share"}
        for rnd in range(a.rounds):
            if rnd == 0:
                # thrown away: the first decoder run on a freshly started
                # machine ran at 0.65 of the next ones (H100, 2026-11-25)
                side_by_side([(a.inf_load, {}, INF)], 5)
            inf_alone = side_by_side([(a.inf_load, {}, INF)], a.secs)[0]
            if "decoverhead" in only:
                # the limiter's host cost on a decoder: no limit, cap 70 alone
                # (100 us probe), cap 70 beside a mostly idle notebook capped
                # at 30 (another active ledger member: the 20 us probe)
                for mode, ei, nb in [("nolimit", None, None), ("cap70", {"GPUSLICE_CORES": "70"}, None),
                                     ("cap70+notebook", {"GPUSLICE_CORES": "70"}, {"GPUSLICE_CORES": "30"})]:
                    env = limited(a.lib, state, f"ov{rnd}{mode[:5]}", ei or {})
                    ts = [(a.inf_load, env, INF)]
                    if nb:
                        ts.append(("notebook", limited(a.lib, state, f"nb{rnd}", nb), NB))
                    ri = side_by_side(ts, a.secs)[0]
                    emit({"scenario": "decoder-" + mode, "round": rnd, "inf_ratio": ri.get("rate", 0) /
                          inf_alone["rate"], "inf_p99_vs_alone": ri.get("p99_ms", 0) / inf_alone["p99_ms"],
                          "inf": ri, "inf_alone": inf_alone})
            if only and "coloc" not in only:
                continue
            tr_alone = side_by_side([("matmul", {}, TR)], a.secs)[0]
            modes = [("plain", {}, {}),
                     # plain, with a training loop that waits for each matmul
                     # (one 4096^2 kernel queued at a time): does a shallow
                     # queue let the decoder's kernels in sooner?
                     ("plain-shallow", {}, {}),
                     ("share70/30", {**share, "GPUSLICE_SHARE_WEIGHT": "70"}, {**share, "GPUSLICE_SHARE_WEIGHT": "30"}),
                     # the training keeps its queue shallow while it borrows
                     # the decoder's part (GPUSLICE_SHARE_YIELD_US, one mode
                     # per value of --share-yield)
                     *[(f"share70/30-yield{y}", {**share, "GPUSLICE_SHARE_WEIGHT": "70"},
                        {**share, "GPUSLICE_SHARE_WEIGHT": "30", "GPUSLICE_SHARE_YIELD_US": y})
                       for y in a.share_yield.split(",") if y],
                     ("cap70/30", {"GPUSLICE_CORES": "70"}, {"GPUSLICE_CORES": "30"}),
                     # the decoder without the interposer beside the capped
                     # training: what time-slicing with a 30 % neighbour costs
                     # it, apart from the limiter's cost on the decoder itself
                     ("free/cap30", None, {"GPUSLICE_CORES": "30"}),
                     # the same beside the training of weight 30: what the
                     # decoder's own interposer costs it in the share pair
                     ("free/share30", None, {**share, "GPUSLICE_SHARE_WEIGHT": "30"})]
            if not only or "mps" in only:
                modes.append(("mps70/30", {**MPS, "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE": "70"},
                              {**MPS, "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE": "30"}))
                # MPS with every SM for both (no thread limit), alone and
                # with gpuslice's shares 70 : 30 on top: the decoder's kernels
                # run beside the training's instead of waiting for its slice
                modes.append(("mps-plain", dict(MPS), dict(MPS)))
                modes.append(("mps-share70/30",
                              {**MPS, **limited(a.lib, state, f"mpsinf{rnd}", {**share, "GPUSLICE_SHARE_WEIGHT": "70"})},
                              {**MPS, **limited(a.lib, state, f"mpstr{rnd}", {**share, "GPUSLICE_SHARE_WEIGHT": "30"})}))
            if a.base_lib:
                # an A/B: the capped modes again under the base interposer,
                # in the same round against the same runs alone
                modes += [(mode + "-base", ei, et) for mode, ei, et in modes if "cap" in mode]
            rows = []
            for mode, ei, et in modes:
                if a.coloc_modes and mode.removesuffix("-base") not in a.coloc_modes.split(","):
                    continue
                lib = a.base_lib if mode.endswith("-base") else a.lib
                train = "matmul1" if mode == "plain-shallow" else "matmul"
                if mode.startswith("mps"):
                    # MPS side by side: both tenants clients of the MPS
                    # daemon, with the mode's thread limits and limiter
                    ri, rt = under_mps(lambda: side_by_side([(a.inf_load, ei, INF), ("matmul", et, TR)], a.secs))
                elif mode.startswith("plain"):
                    ri, rt = side_by_side([(a.inf_load, {}, INF), (train, {}, TR)], a.secs)
                else:
                    inf_env = limited(lib, state, f"inf{rnd}{mode.replace('/', '-')}", ei) if ei is not None else {}
                    ri, rt = side_by_side([(a.inf_load, inf_env, INF),
                                           ("matmul", limited(lib, state, f"tr{rnd}{mode.replace('/', '-')}", et), TR)], a.secs)
                rows.append((mode, ri, rt))
            # the host drifts: the decoder alone again after the modes, and
            # every ratio against the mean of the two alone runs
            inf_after = side_by_side([(a.inf_load, {}, INF)], a.secs)[0]
            inf_rate = (inf_alone["rate"] + inf_after["rate"]) / 2
            inf_p99 = (inf_alone["p99_ms"] + inf_after["p99_ms"]) / 2
            emit({"scenario": "coloc-alone", "round": rnd, "inf": inf_alone, "inf_after": inf_after, "train": tr_alone})
            for mode, ri, rt in rows:
                overlap = min(ri.get("t1", 0), rt.get("t1", 0)) - max(ri.get("t0", 0), rt.get("t0", 0))
                emit({"scenario": "coloc-" + mode, "round": rnd, "inf_ratio": ri.get("rate", 0) / inf_rate,
                      "inf_p99_vs_alone": ri.get("p99_ms", 0) / inf_p99,
                      "train_ratio": rt.get("rate", 0) / tr_alone["rate"], "overlap_s": overlap,
                      "inf": ri, "train": rt})
    if "turns" in only:
        # the co-location scenarios in alternating turns of a few seconds,
        # all tenants started once: the host's drift between runs (the
        # decoder alone at 80 and 120 tokens/s a few minutes apart) cancels
        INF, TR = "2-3", "6-7"
        share = {"GPUSLICE_COMPUTE_MODE": "share"}

        def lim(name, e):
            return limited(a.lib, state, "turns-" + name, e)

        # D-share: the share pair again, each in its own state directory as
        # the node agent lays them out (issue 28: one code path for both);
        # E-yieldY: the pair in one directory, the training yielding its
        # queue every Y us (--turn-yield). F, G and H split the share pair's
        # loss to plain (at 818cc92 the decoder's tokens took 2.4-3.8 ms
        # longer, never held, compute-2026-12-07g-h100.md section 4): F the
        # C-share decoder beside the plain training (what its own windows
        # cost it), G the plain decoder beside the C-share training (what
        # the training's windows cost it); each decoder process is in two
        # turns, since identical host-bound processes differ by up to 0.3 of
        # alone (compute-2026-12-07c-h100.md section 4); H a second decoder
        # of weight 70 beside the plain training, that spread among them
        agent = tempfile.mkdtemp()
        s70, s30 = {**share, "GPUSLICE_SHARE_WEIGHT": "70"}, {**share, "GPUSLICE_SHARE_WEIGHT": "30"}
        yields = [y for y in a.turn_yield.split(",") if y]
        tenants = [(a.inf_load, {}, INF, ["A-free", "B-free", "C-plain", "G-free-share"]),
                   (a.inf_load, lim("dec-share70-free", s70), INF, ["H-share-free"]),
                   (a.inf_load, lim("dec-cap70", {"GPUSLICE_CORES": "70"}), INF, ["A-cap", "B-cap"]),
                   (a.inf_load, lim("dec-share70", s70), INF, ["C-share", "F-share-free"]),
                   ("matmul", {}, TR, ["T-alone", "C-plain", "F-share-free", "H-share-free"]),
                   ("matmul", lim("tr-cap30", {"GPUSLICE_CORES": "30"}), TR, ["B-free", "B-cap"]),
                   ("matmul", lim("tr-share30", s30), TR, ["C-share", "G-free-share"]),
                   (a.inf_load, agent_layout(a.lib, agent, "turns-dec-share70", s70), INF, ["D-share"]),
                   ("matmul", agent_layout(a.lib, agent, "turns-tr-share30", s30), TR, ["D-share"])]
        for y in yields:
            tenants += [(a.inf_load, lim(f"dec-share70-y{y}", s70), INF, [f"E-yield{y}"]),
                        ("matmul", lim(f"tr-share30-y{y}", {**s30, "GPUSLICE_SHARE_YIELD_US": y}), TR, [f"E-yield{y}"])]
        phases = [["A-free", "A-cap", "T-alone"], ["B-free", "B-cap"],
                  ["C-plain", "C-share", "D-share", "F-share-free", "G-free-share", "H-share-free",
                   *[f"E-yield{y}" for y in yields]]]
        # each row: its name and the turn whose decoder and training it compares with theirs alone
        rows = [("decoder-cap70-alone", "A-cap"), ("free/cap30", "B-free"), ("cap70/30", "B-cap"),
                ("plain", "C-plain"), ("share70/30", "C-share"), ("share70/30-agent", "D-share"),
                ("share70/free", "F-share-free"), ("free/share30", "G-free-share"),
                ("share70/free-other", "H-share-free"),
                *[(f"share70/30-yield{y}", f"E-yield{y}") for y in yields]]
        r = in_turns(tenants, phases, seg=2.5, cycles=a.turn_cycles)
        if any("error" in x for x in r):
            emit({"scenario": "turns", "error": [x.get("error") for x in r]})
        else:
            # each tenant's result by (inference or training, turn)
            res = {("tr" if load == "matmul" else "inf", n): x[n] for (load, _, _, names), x in zip(tenants, r)
                   for n in names}
            base, tbase = res[("inf", "A-free")], res[("tr", "T-alone")]
            for name, turn in rows:
                inf, tr = res[("inf", turn)], res.get(("tr", turn))
                d = {"scenario": "turns-" + name, "inf_ratio": inf["rate"] / base["rate"],
                     "inf_p99_vs_alone": inf["p99_ms"] / base["p99_ms"], "inf": inf, "inf_alone": base}
                if tr:
                    d.update(train_ratio=tr["rate"] / tbase["rate"], train=tr, train_alone=tbase)
                # a tenant that made no step in its turns measured nothing
                # (compute-2026-12-01: limited trainings held by a debt)
                idle = [n for n, x in (("inference", inf), ("training", tr)) if x and not x["steps"]]
                if idle:
                    d["error"] = "no step measured in its turns: " + ", ".join(idle)
                emit(d)
    if "capturns" in only:
        # each load alone and under each cap in alternating turns, every
        # tenant started once, so that the host's drift between runs (a
        # host-bound load at 0.71-1.36 of its rate alone within one call)
        # cancels: cap p is paired with the alone turns of its own phase
        # (--base-lib: each cap also under that interposer, in the same turns;
        # --copies N: N processes of each, a process's speed varying by up
        # to a third from the next one's on one host)
        caps = [int(c) for c in a.caps.split(",")]
        libs = [("cap", a.lib)] + ([("base", a.base_lib)] if a.base_lib else [])
        capped = [(p, f"{name}{p}-{i}", lib) for p in caps for name, lib in libs for i in range(a.copies)]
        # --plain-copies N: N more processes without the interposer in each
        # cap's turns, measured against the same alone process: how far
        # identical processes differ, the resolution of the capped ratios
        capped += [(p, f"plain{p}-{i}", None) for p in caps for i in range(a.plain_copies)]
        cpus = turn_cpus(a.turn_cpus, 1 + len(capped))
        # (a first phase, "warm", runs every tenant at once and is not
        # reported: a graph inference process ran its first phase at a third
        # of its later speed, alone)
        for load in [x for x in LOADS if x in only]:
            tenants = [(load, {}, cpus[0], [f"alone{p}" for p in caps] + ["warm"])]
            tenants += [(load, limited(lib, state, f"turns-{load}{turn}", {"GPUSLICE_CORES": str(p)}) if lib else {},
                         cpu, [turn, "warm"]) for (p, turn, lib), cpu in zip(capped, cpus[1:])]
            mon = TurnMonitor()
            r = in_turns(tenants, [["warm"]] + [[f"alone{p}"] + [turn for q, turn, _ in capped if q == p] for p in caps],
                         seg=2.5, cycles=4, monitor=mon)
            if any("error" in x for x in r):
                emit({"scenario": "capturns", "load": load, "error": [x.get("error") for x in r]})
                continue
            # against the mean of every process of a phase without the
            # interposer too: the alone process alone ran slower than the
            # plain ones in 9 of 14 phases (compute-2026-12-02f)
            refs = {p: [r[0][f"alone{p}"]["rate"]] for p in caps}
            for (p, t, lib), x in zip(capped, r[1:]):
                if not lib:
                    refs[p].append(x[t]["rate"])
            for (p, turn, _), res, cpu in zip(capped, r[1:], cpus[1:]):
                alone = r[0][f"alone{p}"]
                mean = sum(refs[p]) / len(refs[p])
                emit({"scenario": f"capturns{p}", "load": load, "lib": turn, "cpus": cpu, "alone_cpus": cpus[0],
                      "ratio": res[turn]["rate"] / alone["rate"] if alone["rate"] else None,
                      "ratio_refs": res[turn]["rate"] / mean if mean else None, "refs": len(refs[p]),
                      "capped": res[turn], "alone": alone,
                      "nvml": {"capped": mon.summary(turn), "alone": mon.summary(f"alone{p}")}})
    if not only or "two" in only:
        base = side_by_side([("matmul", {}, "6-7")], a.secs)[0]
        agent = tempfile.mkdtemp()
        # "mps": one directory, both tenants clients of an MPS daemon;
        # "pod" (instead of one directory): the agent's layout, each tenant
        # in a pid namespace of its own
        layouts = ["agent", "pod"] if "pod" in only else ["one-dir", "agent"]
        for layout in layouts + (["mps"] if "mps" in only else []):
            for mode, ea, eb in [("caps30/70", {"GPUSLICE_CORES": "30"}, {"GPUSLICE_CORES": "70"}),
                                 ("shares30:70", {"GPUSLICE_COMPUTE_MODE": "share", "GPUSLICE_SHARE_WEIGHT": "30"},
                                  {"GPUSLICE_COMPUTE_MODE": "share", "GPUSLICE_SHARE_WEIGHT": "70"})]:
                envs = []
                for name, e in (("a", ea), ("b", eb)):
                    if layout in ("one-dir", "mps"):
                        env = limited(a.lib, state, f"{layout}{name}{mode[:4]}", e)
                        if layout == "mps":
                            env.update(MPS)
                    else:
                        env = agent_layout(a.lib, agent, layout + name + mode[:4], e)
                        if layout == "pod":
                            env[OWN_PIDNS] = "1"
                    envs.append(env)
                pair = [("matmul", envs[0], "6-7"), ("matmul", envs[1], "10-11")]
                ra, rb = under_mps(lambda: side_by_side(pair, a.secs)) if layout == "mps" else side_by_side(pair, a.secs)
                emit({"scenario": f"two-{layout}-{mode}", "a": ra.get("rate", 0) / base["rate"],
                      "b": rb.get("rate", 0) / base["rate"]})
    if "four" in only:
        # four GPU-bound containers in one directory (gpuslice run's layout):
        # caps 10 / 20 / 30 beside a share container, and shares 10:20:30:40
        base = side_by_side([("matmul", {}, "6-7")], a.secs)[0]
        share = {"GPUSLICE_COMPUTE_MODE": "share"}
        for mode, envs in [("caps10/20/30+share", [{"GPUSLICE_CORES": "10"}, {"GPUSLICE_CORES": "20"},
                                                   {"GPUSLICE_CORES": "30"}, share]),
                           ("shares10:20:30:40", [{**share, "GPUSLICE_SHARE_WEIGHT": str(w)} for w in (10, 20, 30, 40)])]:
            tenants = [("matmul", limited(a.lib, state, f"four{i}{mode[:4]}", e), cpus)
                       for i, (e, cpus) in enumerate(zip(envs, ["2-3", "6-7", "10-11", "14-15"]))]
            b = Busy()
            rs = side_by_side(tenants, a.secs)
            parts = [r.get("rate", 0) / base["rate"] for r in rs]
            emit({"scenario": f"four-{mode}", "parts": parts, "sum": sum(parts), "device_busy": b.done(rs[0])})
    if not only or "launch" in only:
        # every tenant pinned to the same CPU; native, no limit and cap 99
        # alternate in 5 rounds of 5 s each (the machine drifts between
        # rounds); the median of the rounds' ratios
        kinds = {"native": {}, "nolimit": limited(a.lib, state, "l", {}),
                 "cap99": limited(a.lib, state, "l99", {"GPUSLICE_CORES": "99"})}
        rounds = []
        for _ in range(5):
            rounds.append({k: result(tenant("launch", e, 5, cpu=PIN))["rate"] for k, e in kinds.items()})
        emit({"scenario": "launch-rate", "nolimit_vs_native": median([r["nolimit"] / r["native"] for r in rounds]),
              "cap99_vs_native": median([r["cap99"] / r["native"] for r in rounds]), "rounds": rounds})
    if "launchc" in only:
        # one process alternates blocks through the interposer's
        # cuLaunchKernel and the driver's own (launch_rate --paired 1): the
        # host drifts by 10 % between processes, not between adjacent blocks
        if not a.launch_bin or not os.path.isfile(a.launch_bin):
            sys.exit("launchc needs --launch-bin, the compiled bench/compute/launch_rate.c")
        kinds = {"nolimit": limited(a.lib, state, "lc", {}),
                 "cap99": limited(a.lib, state, "lc99", {"GPUSLICE_CORES": "99"})}
        rounds = []
        for _ in range(a.launch_rounds):
            r = {}
            for k, e in kinds.items():
                out = subprocess.run(["taskset", "-c", str(PIN), a.launch_bin, "--secs", "3", "--warm", "1",
                                      "--paired", "1"], env=tenant_env(e), capture_output=True, text=True)
                if out.returncode != 0:
                    print(out.stderr, file=sys.stderr)
                r[k] = json.loads(out.stdout) if out.returncode == 0 else None
            rounds.append(r)
        ok = [r for r in rounds if None not in r.values()]
        emit({"scenario": "launch-rate-c-paired", "nolimit_vs_native": median([r["nolimit"]["vs_direct"] for r in ok]),
              "cap99_vs_native": median([r["cap99"]["vs_direct"] for r in ok]), "rounds": rounds})


if __name__ == "__main__":
    main()
