#!/usr/bin/env python3
"""Plot `gpuslice sim` curves: mean allocated GPU share vs arrived GPU request,
one panel per pod list, one line per policy (shaded band = min..max over seeds).

usage: plot_sim.py CURVES.csv OUT.png
"""
import csv
import math
import sys
from collections import defaultdict

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def load(path):
    data = defaultdict(lambda: defaultdict(list))  # (workload, policy) -> pct -> [alloc]
    with open(path, newline="") as fh:
        for row in csv.DictReader(fh):
            key = (row["workload"], row["policy"])
            data[key][int(row["arrived_pct"])].append(float(row["alloc_pct"]))
    return data


def main(argv):
    if len(argv) != 3:
        sys.stderr.write(__doc__)
        return 2
    data = load(argv[1])
    if not data:
        sys.stderr.write(f"plot_sim.py: {argv[1]} has no rows\n")
        return 1
    workloads = sorted({w for w, _ in data})
    policies = sorted({p for _, p in data})
    cols = min(3, len(workloads))
    rows = math.ceil(len(workloads) / cols)
    fig, axes = plt.subplots(rows, cols, figsize=(5.2 * cols, 4.0 * rows), squeeze=False)
    for ax, wl in zip(axes.flat, workloads):
        for pol in policies:
            curve = data.get((wl, pol))
            if not curve:
                continue
            xs = sorted(curve)
            mean = [sum(curve[x]) / len(curve[x]) for x in xs]
            ax.plot(xs, mean, label=f"{pol} ({mean[-1]:.2f} %)", linewidth=1.4)
            ax.fill_between(xs, [min(curve[x]) for x in xs], [max(curve[x]) for x in xs], alpha=0.15)
        ax.plot([0, 100], [0, 100], color="grey", linestyle=":", linewidth=0.8)
        ax.set_xlim(80, max(max(c) for (w, _), c in data.items() if w == wl))
        ax.set_ylim(80, 100)
        ax.set_title(wl.replace("openb_pod_list_", ""), fontsize=10)
        ax.set_xlabel("arrived GPU request (% of capacity)")
        ax.set_ylabel("GPUs allocated (% of capacity)")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7, loc="lower right")
    for ax in list(axes.flat)[len(workloads):]:
        ax.axis("off")
    fig.tight_layout()
    fig.savefig(argv[2], dpi=110)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
