#!/usr/bin/env python3
"""Upper bound on the allocated GPU share that ANY placement policy can reach
on one arrival sequence of the FGD protocol (no refusals, no departures).

Input: the arrival sequence printed by `gpuslice-sim-waste NODES PODS order
SEED` (num_gpus gpu_milli cpu_milli mem_mib per line) and the GPU count.

Let tau be the first arrival at which no node has an idle GPU with the CPU
and memory of the lightest 810 pod (3152 milli-CPU, 5600 MiB on openb) free.
Before tau every such 810 pod fits, so the protocol places it. From tau on
no such GPU appears again (no departures), so a whole-GPU or multi-GPU pod
at least that heavy is never placed again, and an 810 pod only joins a GPU
whose pods use <= 190. The final cluster is a set of GPU "configurations"
(multisets of pod sizes summing to <= 1000, or idle). For each tau the
linear program
    max  sum_c fill(c) x_c
    s.t. sum_c x_c <= GPUs,  x_c >= 0
         810 pods placed >= light 810 pods arrived before tau
         pods of size d placed <= pods of size d in the run   (every size)
         whole GPUs <= GPUs of heavy whole pods arrived before tau
                       + GPUs of light whole pods in the run
bounds the final allocation, whatever the policy and even with the whole
sequence known in advance; the answer is the maximum over tau. CPU and
memory enter only through the definition of tau, so nothing is assumed
about them. Intervals of tau are covered by taking the 810 lower bound at
the interval's start and the whole-GPU limit at its end, so no tau is
skipped.

--ideal adds what holds when CPU and memory never bind (true of our runs
before the cluster fills): every shared and whole pod arriving before tau
is placed. That bound is tighter but rests on that assumption.

Requires scipy (HiGHS). usage: oracle_bound.py [--ideal] ORDER_FILE GPUS [STEP] [BIG]
"""
import sys

from scipy.optimize import linprog


def configs(sizes):
    """Every multiset of shared sizes that fits one GPU, as count vectors."""
    out = []

    def rec(i, rem, cur):
        if i == len(sizes):
            if any(cur):
                out.append(tuple(cur))
            return
        k = 0
        while k * sizes[i] <= rem:
            rec(i + 1, rem - k * sizes[i], cur + [k])
            k += 1

    rec(0, 1000, [])
    return out


def main():
    args = sys.argv[1:]
    ideal = "--ideal" in args
    args = [a for a in args if a != "--ideal"]
    path, gpus = args[0], int(args[1])
    step = int(args[2]) if len(args) > 2 else 20
    big = int(args[3]) if len(args) > 3 else 810
    seq = [tuple(map(int, line.split())) for line in open(path)]
    sizes = sorted({m for n, m, _, _ in seq if n == 1 and m < 1000})
    idx = {s: i for i, s in enumerate(sizes)}
    probe = min((c, me) for n, m, c, me in seq if n == 1 and m == big)
    confs = configs(sizes)
    ncol = len(confs) + 1  # last column: a GPU held by a whole-GPU pod
    fill = [sum(k * s for k, s in zip(c, sizes)) for c in confs] + [1000]
    # prefix[i]: counts before arrival i. light_big: big pods no heavier
    # than the probe; heavy: whole GPUs of pods at least as heavy as it.
    shared = [0] * len(sizes)
    light_big, single, heavy, light_whole = 0, 0, 0, 0
    prefix = []
    for n, m, c, me in seq:
        prefix.append((list(shared), light_big, single, heavy))
        if n == 1 and m < 1000:
            shared[idx[m]] += 1
            light_big += m == big and c <= probe[0] and me <= probe[1]
        elif n >= 1:
            single += n == 1
            if c >= probe[0] and me >= probe[1]:
                heavy += n
            else:
                light_whole += n
    prefix.append((list(shared), light_big, single, heavy))
    total = shared
    a_ub = [[c[d] for c in confs] + [0] for d in range(len(sizes))]
    if ideal:
        a_ub += [[-c[d] for c in confs] + [0] for d in range(len(sizes))]
        a_ub.append([0] * len(confs) + [-1])
    else:
        a_ub.append([-c[idx[big]] for c in confs] + [0])
    a_ub.append([0] * len(confs) + [1])
    a_ub.append([1] * ncol)
    cost = [-f for f in fill]
    best, best_at, nlp = -1.0, None, 0
    for start in range(0, len(seq), step):
        end = min(start + step, len(seq))
        lo_shared, lo_big, lo_single, _ = prefix[start]
        hi_whole = prefix[end][3] + light_whole
        b_ub = list(total)
        if ideal:
            b_ub += [-v for v in lo_shared] + [-lo_single]
        else:
            b_ub += [-lo_big]
        b_ub += [hi_whole, gpus]
        res = linprog(cost, A_ub=a_ub, b_ub=b_ub, bounds=(0, None), method="highs")
        nlp += 1
        if res.status != 0:
            continue
        share = -res.fun / (gpus * 10.0)
        if share > best:
            best, best_at = share, (start, end)
    print(f"upper bound{' (ideal)' if ideal else ''} {best:.3f} % (tau in arrivals {best_at}, "
          f"{nlp} LPs, {len(confs)} configurations)")


if __name__ == "__main__":
    main()
