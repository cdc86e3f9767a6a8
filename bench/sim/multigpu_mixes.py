#!/usr/bin/env python3
"""Multi-GPU mixes of the openb trace, and fgd against fraglook on each.

The trace's multigpu50 list is the default list plus copies of its own
multi-GPU pods (2, 4 and 8 GPUs each), enough that they ask for half of the
GPU request. This builds the same family at other shares (and each with the
trace's CPU-only pods doubled, "+cpu2"), writes the lists to a temporary
directory (the trace stays outside the repository), runs `gpuslice sim` with
fgd and fraglook on seeds 42-51 and prints one row per mix: both policies'
allocated share at 130 % and fraglook's margin.

usage: bench/sim/multigpu_mixes.py GPUSLICE TRACE_DIR [SHARES...]
       (SHARES: percent of the GPU request from multi-GPU pods; default
       20 30 40 50 60 70)
"""
import csv
import os
import random
import re
import subprocess
import sys
import tempfile


def gpus_of(pod):
    n = int(pod["num_gpu"])
    return n if n > 1 else int(pod["gpu_milli"]) / 1000 if n == 1 else 0


def build(pods, share, seed=1):
    """pods plus copies of their multi-GPU pods, drawn with replacement until
    those ask for `share` of the GPU request."""
    multi = [p for p in pods if int(p["num_gpu"]) > 1]
    single = sum(gpus_of(p) for p in pods if int(p["num_gpu"]) <= 1)
    have = sum(gpus_of(p) for p in multi)
    rng, out = random.Random(seed), list(pods)
    while have / (have + single) < share:
        p = dict(rng.choice(multi))
        p["name"] = f"{p['name']}-copy{len(out)}"
        out.append(p)
        have += gpus_of(p)
    return out, have / (have + single)


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    cli, trace = sys.argv[1], sys.argv[2]
    shares = [int(s) for s in sys.argv[3:]] or [20, 30, 40, 50, 60, 70]
    with open(os.path.join(trace, "openb_pod_list_default.csv"), newline="") as f:
        reader = csv.DictReader(f)
        fields, pods = reader.fieldnames, list(reader)
    with tempfile.TemporaryDirectory() as tmp:
        lists = []
        for s in shares:
            mix, got = build(pods, s / 100)
            path = os.path.join(tmp, f"multigpu{s}mix.csv")
            with open(path, "w", newline="") as f:
                w = csv.DictWriter(f, fieldnames=fields)
                w.writeheader()
                w.writerows(mix)
            lists += [path, path + "+cpu2"]
            print(f"multigpu{s}mix: {len(mix)} pods, {100 * got:.1f} % of the GPU request multi-GPU", file=sys.stderr)
        out = subprocess.run([cli, "sim", "--trace-dir", trace, "--pods", ",".join(lists), "--policy", "fgd,fraglook",
                              "--seeds", "42-51", "--quiet"], check=True, capture_output=True, text=True).stdout
    rows = {}
    for line in out.splitlines():
        m = re.match(r"\| (\S+) \| (fgd|fraglook) \| \d+ \| [^|]+\| ([\d.]+) ± ([\d.]+)", line)
        if m:
            rows.setdefault(os.path.basename(m.group(1)), {})[m.group(2)] = (float(m.group(3)), float(m.group(4)))
    print("| mix | fgd @130 % | fraglook @130 % | margin |")
    print("|---|---|---|---|")
    for name, r in rows.items():
        (f, fs), (g, gs) = r["fgd"], r["fraglook"]
        print(f"| {name} | {f:.2f} ± {fs:.2f} | {g:.2f} ± {gs:.2f} | {g - f:+.2f} |")


if __name__ == "__main__":
    main()
