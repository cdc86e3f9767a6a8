"""Which CUDA calls each load of gputime_worker.py makes to launch and to
wait for its work, counted by CUPTI (api_count.c as the driver's injection
library), without the interposer. Prints one JSON line per load: the
worker's result and the counts of the launch, wait, query, copy and
event-record entry points, driver and runtime. Usage:
  python3 bench/compute/api_calls.py --lib build-gpu/api_count.so [--loads jax,cupy] [--secs 4]
(build: cc -O2 -shared -fPIC bench/compute/api_count.c -ldl -o build-gpu/api_count.so)
"""
import argparse
import glob
import json
import os
import re
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
# the entry points that launch work, wait for it or ask whether it is done
SHOWN = re.compile(r"Launch|Synchronize|Query|Memcpy|HostFunc|EventRecord|StreamWait|WaitEvent")


def find_cupti():
    """A libcupti.so: the CUDA wheels' (PyTorch's, JAX's) or the toolkit's."""
    roots = [p for p in sys.path if p.endswith("site-packages")] + ["/usr/local/cuda/extras/CUPTI/lib64"]
    for root in roots:
        for pat in ("nvidia/*/lib/libcupti.so*", "nvidia/cuda_cupti/lib/libcupti.so*", "libcupti.so*"):
            hits = sorted(glob.glob(os.path.join(root, pat)))
            if hits:
                return hits[0]
    return None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--lib", required=True, help="api_count.so")
    ap.add_argument("--loads", default="matmul,train,graphinf,jax,cupy")
    ap.add_argument("--secs", type=float, default=4)
    ap.add_argument("--cupti", default=None)
    a = ap.parse_args()
    cupti = a.cupti or find_cupti()
    if not cupti:
        sys.exit("api_calls: no libcupti.so found; name one with --cupti")
    for load in a.loads.split(","):
        with tempfile.TemporaryDirectory() as d:
            env = dict(os.environ, CUDA_INJECTION64_PATH=os.path.abspath(a.lib), API_COUNT_CUPTI=cupti,
                       API_COUNT_OUT=os.path.join(d, "calls"))
            env.pop("LD_PRELOAD", None)
            p = subprocess.run([sys.executable, os.path.join(HERE, "gputime_worker.py"), "--load", load, "--secs",
                                str(a.secs), "--warm", "2"], env=env, capture_output=True, text=True, timeout=600)
            calls = {}
            for f in glob.glob(os.path.join(d, "calls.*")):
                for line in open(f):
                    dom, name, n = line.split()
                    if SHOWN.search(name):
                        calls[f"{dom} {name}"] = calls.get(f"{dom} {name}", 0) + int(n)
            try:
                res = json.loads(p.stdout.strip().splitlines()[-1])
            except (IndexError, ValueError):
                res = {"error": p.stderr[-800:]}
            print(json.dumps({"load": load, "cupti": cupti, "result": res,
                              "calls": dict(sorted(calls.items(), key=lambda kv: -kv[1]))}), flush=True)


if __name__ == "__main__":
    main()
