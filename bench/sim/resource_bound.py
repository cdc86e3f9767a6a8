#!/usr/bin/env python3
"""Upper bound on the allocated GPU share that ANY policy can reach on one
arrival sequence of the replay protocol, from the cluster's CPU, memory and
GPU totals (no departures; a pod that fits somewhere is placed).

Input: the arrival sequence printed by `gpuslice-sim-waste NODES PODS order
SEED` (num_gpus gpu_milli cpu_milli mem_mib per line) and the cluster's
totals.

Pick a CPU-only pod shape R (CPU r_c, memory r_m). Let tau be the first
arrival at which no node has r_c CPU and r_m memory free. Before tau every
CPU-only pod no bigger than R fits somewhere, so the protocol places it
(forced). From tau on no node ever has room for R again, so no pod at least
as big as R in both CPU and memory is placed after tau. So the GPU pods
placed are at most those that arrived before tau plus the later ones that
are smaller than R in CPU or memory, and together with the forced CPU-only
pods they fit in the cluster's CPU, memory and GPU totals. The linear
program
    max  sum_s gpu_s x_s
    s.t. sum_s cpu_s x_s <= CPU - CPU of the forced pods, same for memory,
         sum_s gpu_s x_s <= GPU,  0 <= x_s <= allowed pods of shape s
(s: GPU-pod shapes) bounds the final allocation for that tau; the bound is
the maximum over tau (intervals of STEP arrivals, forced pods counted at the
interval's start and allowed pods at its end, so no tau is skipped), and
the minimum of that over the shapes R tried (each is a valid bound).

What it assumes: only the protocol and the totals. It ignores that pods
must fit on one node and that GPUs fragment, so it is loose where GPU
packing binds (the GPU-heavy lists, where it is near 100 %) and tight where
CPU binds (the CPU-bound mixes).

Requires scipy (HiGHS). usage: resource_bound.py ORDER_FILE CPU_MILLI MEM_MIB GPUS [STEP]
"""
import sys
from collections import Counter

from scipy.optimize import linprog


def bound_for(seq, probe, cpu_total, mem_total, gpu_milli, step):
    rc, rm = probe
    shapes = sorted({(c, me, n * min(m, 1000)) for n, m, c, me in seq if n > 0})
    index = {s: i for i, s in enumerate(shapes)}
    big = [c >= rc and me >= rm for c, me, _ in shapes]
    total = Counter()
    for n, m, c, me in seq:
        if n > 0:
            total[index[(c, me, n * min(m, 1000))]] += 1
    # Running counts: forced CPU and memory, GPU-pod arrivals per shape.
    before = Counter()
    forced_cpu = forced_mem = 0
    checkpoints = []
    for i, (n, m, c, me) in enumerate(seq):
        if i % step == 0:
            checkpoints.append((i, forced_cpu, forced_mem, Counter(before)))
        if n == 0 and c <= rc and me <= rm:
            forced_cpu += c
            forced_mem += me
        elif n > 0:
            before[index[(c, me, n * min(m, 1000))]] += 1
    checkpoints.append((len(seq), forced_cpu, forced_mem, Counter(before)))
    cost = [-g for _, _, g in shapes]
    a_ub = [[c for c, _, _ in shapes], [me for _, me, _ in shapes], [g for _, _, g in shapes]]
    best = 0.0
    for k in range(len(checkpoints)):
        _, f_cpu, f_mem, _ = checkpoints[k]
        hi = checkpoints[min(k + 1, len(checkpoints) - 1)][3]
        ub = [hi[i] if big[i] else total[i] for i in range(len(shapes))]
        b_ub = [cpu_total - f_cpu, mem_total - f_mem, gpu_milli]
        if b_ub[0] < 0 or b_ub[1] < 0:
            continue  # the forced pods alone do not fit: tau comes earlier
        res = linprog(cost, A_ub=a_ub, b_ub=b_ub, bounds=list(zip([0] * len(ub), ub)),
                      method="highs")
        if res.status == 0:
            best = max(best, -res.fun)
    return 100.0 * best / gpu_milli


def main(argv):
    if len(argv) not in (5, 6):
        sys.stderr.write(__doc__)
        return 2
    seq = [tuple(map(int, line.split())) for line in open(argv[1])]
    cpu_total, mem_total, gpus = int(argv[2]), int(argv[3]), int(argv[4])
    step = int(argv[5]) if len(argv) == 6 else 50
    probes = [s for s, _ in Counter((c, me) for n, _, c, me in seq if n == 0).most_common(6)]
    results = [(bound_for(seq, p, cpu_total, mem_total, gpus * 1000, step), p) for p in probes]
    if not results:
        results = [(bound_for(seq, (10**12, 10**12), cpu_total, mem_total, gpus * 1000, step), None)]
    value, probe = min(results)
    print(f"resource bound {value:.3f} % (R = {probe}, {len(probes)} shapes tried)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
