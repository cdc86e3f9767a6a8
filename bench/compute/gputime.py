"""GPU-time compute limits on a real GPU (issue 12): each load alone, then
under caps; co-location; two containers in both layouts; launch rate.
Writes $OUT/gputime.jsonl and prints it. Usage:
  python3 bench/compute/gputime.py --lib build-gpu/lib/libgpuslice.so --out DIR --only a,b"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))


class Busy:
    """Device utilisation (nvidia-smi, every 0.2 s) while it runs."""
    def __init__(self):
        self.vals, self.stop = [], False
        self.t = threading.Thread(target=self.loop)
        self.t.start()

    def loop(self):
        p = subprocess.Popen(["nvidia-smi", "--query-gpu=utilization.gpu", "--format=csv,noheader,nounits",
                              "-lms", "200"], stdout=subprocess.PIPE, text=True)
        for line in p.stdout:
            if self.stop:
                break
            try:
                self.vals.append(float(line))
            except ValueError:
                pass
        p.kill()

    def done(self, skip=10):
        self.stop = True
        self.t.join()
        v = self.vals[skip:] or self.vals
        return sum(v) / len(v) / 100 if v else -1


def tenant(load, env, secs):
    e = {k: v for k, v in os.environ.items() if not k.startswith("GPUSLICE_")}
    e.update(env)
    return subprocess.Popen([sys.executable, os.path.join(HERE, "gputime_worker.py"), "--load", load, "--secs",
                             str(secs)], env=e, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def result(p):
    out, err = p.communicate()
    for line in out.splitlines():
        if line.startswith("{"):
            return json.loads(line)
    return {"error": err[-800:]}


def limited(lib, state, name, extra):
    env = {"LD_PRELOAD": lib, "GPUSLICE_REGION": os.path.join(state, name + ".region")}
    env.update(extra)
    return env


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--lib", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--secs", type=float, default=20)
    ap.add_argument("--only", default="")
    a = ap.parse_args()
    if not os.path.isfile(a.lib):
        sys.exit(f"{a.lib}: no such library (build it first): every limited run would run unlimited")
    only = set(filter(None, a.only.split(",")))
    outf = open(os.path.join(a.out, "gputime.jsonl"), "a")

    def emit(d):
        print(json.dumps(d), flush=True)
        outf.write(json.dumps(d) + "\n")
        outf.flush()

    state = tempfile.mkdtemp()
    for load in ["matmul", "small", "decoder", "train", "graphinf"]:
        if only and load not in only:
            continue
        b = Busy()
        alone = result(tenant(load, {}, a.secs))
        busy = b.done()
        emit({"scenario": "alone", "load": load, "busy": busy, **alone})
        for cap in [30]:
            b = Busy()
            r = result(tenant(load, limited(a.lib, state, f"{load}{cap}", {"GPUSLICE_CORES": str(cap)}), a.secs))
            cb = b.done()
            u = busy
            emit({"scenario": f"cap{cap}", "load": load, "ratio": r.get("rate", 0) / alone["rate"],
                  "target_min": min(1, cap / 100 / u) - 0.05 if u > 0 else None, "busy": cb, **r})
    if not only or "coloc" in only:
        inf_alone = result(tenant("decoder", {}, a.secs))
        tr_alone = result(tenant("matmul", {}, a.secs))
        emit({"scenario": "coloc-alone", "inf": inf_alone, "train": tr_alone})
        for mode, ei, et in [("plain", {}, {}),
                             ("share70/30", {"GPUSLICE_COMPUTE_MODE": "share", "GPUSLICE_SHARE_WEIGHT": "70"},
                              {"GPUSLICE_COMPUTE_MODE": "share", "GPUSLICE_SHARE_WEIGHT": "30"}),
                             ("cap70/30", {"GPUSLICE_CORES": "70"}, {"GPUSLICE_CORES": "30"})]:
            if mode == "plain":
                pi, pt = tenant("decoder", {}, a.secs), tenant("matmul", {}, a.secs)
            else:
                pi = tenant("decoder", limited(a.lib, state, "inf" + mode[:3], ei), a.secs)
                pt = tenant("matmul", limited(a.lib, state, "tr" + mode[:3], et), a.secs)
            ri, rt = result(pi), result(pt)
            emit({"scenario": "coloc-" + mode, "inf_ratio": ri.get("rate", 0) / inf_alone["rate"],
                  "inf_p99_vs_alone": ri.get("p99_ms", 0) / inf_alone["p99_ms"],
                  "train_ratio": rt.get("rate", 0) / tr_alone["rate"], "inf": ri, "train": rt})
    if not only or "two" in only:
        base = result(tenant("matmul", {}, a.secs))
        agent = tempfile.mkdtemp()
        ledgers = os.path.join(agent, "ledgers")
        os.makedirs(ledgers)
        for layout in ["one-dir", "agent"]:
            for mode, ea, eb in [("caps30/70", {"GPUSLICE_CORES": "30"}, {"GPUSLICE_CORES": "70"}),
                                 ("shares30:70", {"GPUSLICE_COMPUTE_MODE": "share", "GPUSLICE_SHARE_WEIGHT": "30"},
                                  {"GPUSLICE_COMPUTE_MODE": "share", "GPUSLICE_SHARE_WEIGHT": "70"})]:
                envs = []
                for name, e in (("a", ea), ("b", eb)):
                    if layout == "one-dir":
                        env = limited(a.lib, state, f"{name}{mode[:4]}", e)
                    else:
                        d = os.path.join(agent, name + mode[:4])
                        os.makedirs(d, exist_ok=True)
                        env = {"LD_PRELOAD": a.lib, "GPUSLICE_REGION": os.path.join(d, "region"),
                               "GPUSLICE_LEDGER_DIR": ledgers, **e}
                    envs.append(env)
                pa, pb = tenant("matmul", envs[0], a.secs), tenant("matmul", envs[1], a.secs)
                ra, rb = result(pa), result(pb)
                emit({"scenario": f"two-{layout}-{mode}", "a": ra.get("rate", 0) / base["rate"],
                      "b": rb.get("rate", 0) / base["rate"]})
    if not only or "launch" in only:
        native = result(tenant("launch", {}, 10))
        nolim = result(tenant("launch", {"LD_PRELOAD": a.lib, "GPUSLICE_REGION": os.path.join(state, "l.region")}, 10))
        cap99 = result(tenant("launch", limited(a.lib, state, "l99", {"GPUSLICE_CORES": "99"}), 10))
        emit({"scenario": "launch-rate", "nolimit_vs_native": nolim["rate"] / native["rate"],
              "cap99_vs_native": cap99["rate"] / native["rate"], "native": native["rate"]})


if __name__ == "__main__":
    main()
