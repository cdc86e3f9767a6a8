"""bench/compute/fit_exponent.py: the power exponent a card needs, from a cap
sweep's ratios and NVML's draw. On made-up lines whose physics is worked out
here, and on the exponent A/B of bench/results/compute-2026-11-27h.md (each
card ran the same load under 0.48 and 0.38 in alternating rounds): the fit
from either side's runs must agree, and tell that H200 from that H100."""
import json
import math
import os
import re
import subprocess
import sys

ROOT = os.path.join(os.path.dirname(__file__), "..", "..")
FIT = os.path.join(ROOT, "bench", "compute", "fit_exponent.py")
RESULTS = os.path.join(ROOT, "bench", "results")


def fitted(*args):
    out = subprocess.run([sys.executable, FIT, *args], capture_output=True, text=True, timeout=60,
                         check=True).stdout
    return float(re.search(r"fit exponent ([\d.]+)", out).group(1)), out


def capturns(p, over, run_exp, true_exp, u=0.95, limit=700.0):
    """A capped GPU-bound line as a card whose busy draw is over x the
    headroom would give it: charged s = over^run_exp a busy second, its
    work a busy second over^true_exp of alone's, the cap holding the charge
    at p."""
    idle = 0.15 * limit
    s, gain = over ** run_exp, over ** true_exp
    busy = p / 100 / s
    draw = idle + over * (limit - idle) * busy
    rest = "1.3-2.5s"
    return {"scenario": f"capturns{p}", "load": "matmul", "lib": f"cap{p}-0", "ratio": busy * gain / u,
            "nvml": {"capped": {rest: {"util": 100 * busy, "power_w": draw}},
                     "alone": {rest: {"util": 100 * u, "power_w": 690.0}}}}


def test_the_exponent_that_would_have_met_p_over_u(tmp_path):
    lines = [{"scenario": "device", "power_limit_w": 700.0}]
    lines += [capturns(p, over, 0.38, 0.48) for p, over in ((10, 1.9), (30, 1.6), (50, 1.45), (70, 1.3))]
    lines.append(capturns(90, 1.05, 0.38, 0.48))  # s 1.02: nothing to tell
    jsonl = tmp_path / "gputime.jsonl"
    jsonl.write_text("".join(json.dumps(x) + "\n" for x in lines))
    x, out = fitted(str(jsonl), "--exponent", "0.38")
    assert abs(x - 0.48) < 0.001, out
    assert "cap 90:" in out and "left out" in out, out
    assert out.count(", exponent 0.480") == 4, out
    # a run that was already at the right exponent is told so
    lines = lines[:1] + [capturns(p, 1.5, 0.48, 0.48) for p in (10, 30, 50)]
    jsonl.write_text("".join(json.dumps(x) + "\n" for x in lines))
    assert abs(fitted(str(jsonl))[0] - 0.48) < 0.001
    # ratios 3 % over p / u at s 1.2 want a higher exponent: 0.48 ln(1.2 x 1.03) / ln(1.2)
    lines = lines[:1] + [dict(capturns(30, 1.2 ** (1 / 0.48), 0.48, 0.48)) for _ in range(3)]
    for d in lines[1:]:
        d["ratio"] *= 1.03
    jsonl.write_text("".join(json.dumps(x) + "\n" for x in lines))
    assert abs(fitted(str(jsonl))[0] - 0.48 * math.log(1.2 * 1.03) / math.log(1.2)) < 0.002


def test_the_ab_cards_fit_the_same_from_either_exponent():
    fits = {}
    for card in ("h200", "h100"):
        path = os.path.join(RESULTS, f"compute-2026-11-27h-ab-{card}.jsonl")
        for tag, exp in (("new", "0.48"), ("base", "0.38")):
            fits[card, tag] = fitted(path, "--load", "matmul-dense", "--tag", tag, "--exponent", exp)[0]
    print(fits)
    for card in ("h200", "h100"):
        assert abs(fits[card, "new"] - fits[card, "base"]) < 0.03, fits
    # the A/B found 0.48 right for that H200 and 0.38 for that H100
    assert abs(fits["h200", "new"] - 0.48) < 0.03 and abs(fits["h100", "new"] - 0.38) < 0.03, fits
