#!/usr/bin/env python3
"""Plot `gpuslice sim` curves: mean allocated GPU share vs arrived GPU request,
one panel per pod list, one line per policy (shaded band = min..max over seeds).

usage: plot_sim.py CURVES.csv OUT.png [SEEDS]

SEEDS (optional) is how many seeds the run had; the title says how many seeds
each curve averages either way. Errors are reported in one line, without a
traceback, and exit with status 1 (2 for a usage error).
"""
import csv
import math
import sys
import textwrap
from collections import defaultdict

# Of the figure's width, what the title may take: a margin on both sides.
TITLE_WIDTH = 0.95


class PlotError(Exception):
    pass


def load(path):
    data = defaultdict(lambda: defaultdict(list))  # (workload, policy) -> pct -> [alloc]
    seeds = defaultdict(set)                       # (workload, policy) -> {seed}
    try:
        with open(path, newline="") as fh:
            reader = csv.DictReader(fh)
            need = {"workload", "policy", "seed", "arrived_pct", "alloc_pct"}
            if not reader.fieldnames or not need <= set(reader.fieldnames):
                raise PlotError(f"{path}: not a gpuslice sim CSV (columns {sorted(need)} expected)")
            for line, row in enumerate(reader, start=2):
                try:
                    key = (row["workload"], row["policy"])
                    data[key][int(row["arrived_pct"])].append(float(row["alloc_pct"]))
                    seeds[key].add(row["seed"])
                except (TypeError, ValueError) as err:
                    raise PlotError(f"{path}:{line}: bad row ({err})") from None
    except OSError as err:
        raise PlotError(f"cannot read {path}: {err.strerror}") from None
    if not data:
        raise PlotError(f"{path} has no rows")
    return data, seeds


def fit_title(fig, parts, fontsize=11):
    """The figure's title inside the figure's width (one panel is narrower than
    the one-line title): its parts on one line, else one part a line, else
    wrapped at words as well. tight_layout then keeps the panels below it."""
    one_a_line = "\n".join(parts)
    tries = ["; ".join(parts), one_a_line] + [
        "\n".join(textwrap.fill(p, width) for p in parts) for width in range(len(one_a_line), 0, -1)]
    renderer = fig.canvas.get_renderer()
    for text in tries:
        title = fig.suptitle(text, fontsize=fontsize)
        if title.get_window_extent(renderer).width <= fig.bbox.width * TITLE_WIDTH:
            return


def plot(data, seeds, out, run_seeds):
    """Draws and writes the figure; returns it (tests measure it)."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise PlotError("matplotlib is not installed for this Python "
                        "(Debian: apt-get install python3-matplotlib; or pass --python)") from None
    workloads = sorted({w for w, _ in data})
    policies = sorted({p for _, p in data})
    counts = sorted({len(s) for s in seeds.values()})
    n = counts[0] if len(counts) == 1 else f"{counts[0]}-{counts[-1]}"
    if run_seeds is not None and len(counts) == 1 and counts[0] != run_seeds:
        n = f"{counts[0]} of {run_seeds}"
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
    title = [f"gpuslice sim: mean of {n} seed{'s' if counts != [1] else ''} per curve"]
    fit_title(fig, title if counts == [1] else title + ["band = min..max over seeds"])
    fig.tight_layout()
    try:
        fig.savefig(out, dpi=110)
    except OSError as err:
        raise PlotError(f"cannot write {out}: {err.strerror}") from None
    return fig


def main(argv):
    if len(argv) not in (3, 4):
        sys.stderr.write(__doc__)
        return 2
    try:
        run_seeds = int(argv[3]) if len(argv) == 4 else None
        data, seeds = load(argv[1])
        plot(data, seeds, argv[2], run_seeds)
    except ValueError:
        sys.stderr.write(f"plot_sim.py: SEEDS must be a number, not '{argv[3]}'\n")
        return 2
    except PlotError as err:
        sys.stderr.write(f"plot_sim.py: {err}\n")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
