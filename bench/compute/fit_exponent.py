"""The power correction's exponent a card needs, from a sweep of caps on a
GPU-bound load run on it (docs/compute.md, "The power correction"). Usage:
  python3 bench/compute/fit_exponent.py OUT|FILE.jsonl [...] [--exponent X]
      [--power-limit W] [--load matmul]
OUT is bench/compute/table.sh's (its `single` part sweeps caps 10-90 on
matmul in turns); a .jsonl is what run_gpu.sh wrote, capturns lines (in
turns, NVML's readings over the rest of each turn) or capNN lines (one run
a cap). X is the exponent the interposer ran with (GPUSLICE_POWER_EXPONENT,
default 0.48); W the card's power limit where no device line gives it.

Per line: NVML's busy fraction B and draw P under the cap give the draw of a
busy second e = (P - P_idle) / B, P_idle the limiter's busy-idle draw (15 %
of the limit), and the headroom over = e / (P_limit - P_idle); the limiter
then charged s = over^X. The cap held the charge at p, so the work done
scales as 1 / s: the s that would have given the load's due p / u (u its busy
fraction alone) is s x ratio / (p / u), and its exponent is
X x ln(s x ratio x u / p) / ln(s). Caps whose s is under 1.10 (near the
whole GPU the card is at its power limit anyway, and ln(s) so small that a
ratio's noise of a per cent moves the fit by a tenth) are left out. Prints
each line's fit and their median: the value to pin for the card's nodes
(the node agent's --power-exponent).

On the exponent A/B of bench/results/compute-2026-11-27h.md (one card each,
the same load under 0.48 and 0.38 in alternating rounds) the fits from
either side's runs agree: that H200 0.476 and 0.478, that H100 0.386 and
0.368, where the A/B found 0.48 right for the one and 0.38 for the other
(tests/bench/test_fit_exponent.py). The H200 sweeps run at 0.48 since give
0.44-0.53, a card each: the spread one constant cannot follow."""
import argparse
import json
import math
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from summarize import found, rest_part  # noqa: E402

IDLE_SHARE = 0.15  # GS_LIM_IDLE_POWER_PPM: the busy-idle draw, a share of the limit
LEAST_S = 1.10


def rest(d, who):
    """(busy, draw W) of who's turns after their first second, or None."""
    part = rest_part(d, who)
    if not part.get("util") or part.get("power_w") is None:
        return None
    return part["util"] / 100, part["power_w"]


def samples(path, load, limit_w, tag=""):
    """(cap p, ratio, busy B, draw P, alone's busy u, limit) of each capped
    line of load in one file (whose tag starts with tag)."""
    alone_busy = None
    with open(path) as f:
        for line in f:
            d = json.loads(line)
            sc = d.get("scenario", "")
            if not d.get("tag", "").startswith(tag):
                continue
            if sc == "device" and d.get("power_limit_w"):
                limit_w = limit_w or d["power_limit_w"]
            if d.get("load") != load or d.get("ratio") is None:
                if sc == "alone" and d.get("load") == load:
                    alone_busy = d.get("busy")
                continue
            if sc.startswith("capturns") and sc[8:].isdigit():
                capped, alone = rest(d, "capped"), rest(d, "alone")
                if capped and alone:
                    yield int(sc[8:]), d["ratio"], capped[0], capped[1], alone[0], limit_w
            elif sc.startswith("cap") and sc[3:].isdigit() and d.get("busy") and d.get("power_w") and alone_busy:
                yield int(sc[3:]), d["ratio"], d["busy"], d["power_w"], alone_busy, limit_w


def fit(p, ratio, busy, draw, u, limit_w, exponent):
    """(s the limiter charged, the exponent that would have met p / u), or
    None where s is too small to tell."""
    idle = IDLE_SHARE * limit_w
    over = (draw - idle) / busy / (limit_w - idle)
    s = over ** exponent if over > 1 else 1.0
    if s < LEAST_S:
        return None
    want = s * ratio * u / (p / 100)
    return s, exponent * math.log(want) / math.log(s)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("paths", nargs="+")
    ap.add_argument("--exponent", type=float, default=0.48, help="GPUSLICE_POWER_EXPONENT the runs had")
    ap.add_argument("--power-limit", type=float, default=None, help="watts, where no device line says")
    ap.add_argument("--load", default="matmul")
    ap.add_argument("--tag", default="", help="only lines whose tag starts with this (one side of an A/B)")
    a = ap.parse_args()
    fits = []
    for path in found(a.paths)[0]:
        for p, ratio, busy, draw, u, limit_w in samples(path, a.load, a.power_limit, a.tag):
            if not limit_w:
                sys.exit(f"{path}: no device line gives the power limit: pass --power-limit")
            got = fit(p, ratio, busy, draw, u, limit_w, a.exponent)
            due = f"ratio {ratio:.3f} (p / u {p / 100 / u:.3f}) busy {busy:.3f} draw {draw:.0f} W"
            if got is None:
                print(f"cap {p:2}: {due}: s under {LEAST_S}, left out")
                continue
            fits.append(got[1])
            print(f"cap {p:2}: {due}: s {got[0]:.3f}, exponent {got[1]:.3f}")
    if not fits:
        sys.exit("no capped line of a GPU-bound load with NVML's busy time and draw")
    fits.sort()
    print(f"fit exponent {fits[len(fits) // 2]:.3f} (median of {len(fits)}; "
          f"{fits[0]:.3f}-{fits[-1]:.3f}), the runs at {a.exponent:.3f}")


if __name__ == "__main__":
    main()
