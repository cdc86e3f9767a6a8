"""Summarises what bench/compute/run_gpu.sh brought back. Usage:
  python3 bench/compute/summarize.py OUT/gputime.jsonl [...] [--logs DIR|TGZ ...]
  python3 bench/compute/summarize.py OUT    (bench/compute/table.sh's OUT:
      every gputime.jsonl under it, and the logs.tgz beside each)
Prints each capturns line as load, cap, process, the ratio to the alone
process and to the mean of every process of its turns without the
interposer (ratio_refs; computed here for lines written before gputime.py
reported it), with NVML's SM clock, draw and device utilisation in its turns
and the alone process's, by part of a turn (where the line has them), and
the goal min(1, p / u) - 0.05 with u the alone process's utilisation over
the rest of its turns (the first second still holds the turn before) and
p / u beside it, a mark where the process's own busy time over its turns'
rest passed p + 0.03, the
work a busy second of the process did against alone's, the GPU's busy
microseconds a unit of the load's work (a step, or a matmul) for the process
and for alone, and
each library's mean over its processes (identical processes differ by up
to a tenth: an A/B reads the means); then, per debug log of --logs DIR, how
often the limited tenant's windows opened in debt, how often it went free
(and how often right after a wait for tokens: while held) and back to
windows, how many outer runs left it under windows with c not learnt (a new
process's first, and each after c was forgotten), how long it waited for tokens and what its
probes and markers cost (the cost report at its exit), and the event records
an interval its probe found drained got, about: its start event and the
progress markers over those intervals (markers in windows' first intervals
count too)."""
import argparse
import collections
import json
import os
import re
import tarfile

COST = re.compile(r"compute limiter cost: (\d+) ([^,(]+?)(?: \(|,).*?([\d.]+) ms in all \(([\d.]+) us each")
REPORTED = ("waits for tokens", "gap probes", "interval closes of the probes that found the work drained",
            "marker reads of those closes", "start events of the intervals those closes began", "progress markers",
            "markers at the tenant's waits for its work")


def capturns(paths):
    phases = collections.defaultdict(list)
    for path in paths:
        with open(path) as f:
            for line in f:
                d = json.loads(line)
                if d.get("scenario", "").startswith("capturns") and d.get("ratio") is not None and "lib" in d:
                    phases[(path, d["scenario"], d["load"])].append(d)
    for (path, scenario, load), rows in phases.items():
        refs = [1.0] + [d["ratio"] for d in rows if d["lib"].startswith("plain")]
        mean = sum(refs) / len(refs)
        for d in rows:
            refs_ratio = d.get("ratio_refs", d["ratio"] / mean)
            print(f"{load:9} {scenario[len('capturns'):]:>4} {d['lib']:16} ratio {d['ratio']:.3f}  "
                  f"refs {refs_ratio:.3f} ({d.get('refs', len(refs))})  {goal(d)}{d.get('tag', '')}")
            for who, parts in d.get("nvml", {}).items():
                for part, v in parts.items():
                    print(f"{'':16}{who:7} {part:9} {v['sm_mhz']:5} MHz {v['power_w']:6.1f} W "
                          f"util {v['util']:5.1f} % power-capped {v['power_capped']:.2f}")
        by_lib = collections.defaultdict(list)
        for d in rows:
            by_lib[d["lib"].rstrip("0123456789-")].append(d["ratio"])
        print(f"{load:9} {scenario[len('capturns'):]:>4} means: " +
              ", ".join(f"{lib} {sum(r) / len(r):.3f} ({len(r)})" for lib, r in by_lib.items()))


def scenario_line(d):
    """One line for a scenario other than capturns (None: nothing to say):
    a new container's first second, two and four containers, the launch
    loops, and an inference tenant beside training (coloc, turns)."""
    sc = d.get("scenario", "")
    if d.get("error"):
        return f"{sc}: error {json.dumps(d['error'])[:300]}"
    if sc.startswith("fresh") and d.get("first_s") is not None:
        return f"{sc} {d.get('load', '')} copy {d.get('copy')}: first second {d['first_s']:.3f}, after {d['after']:.3f}"
    if sc.startswith("two-") and "a" in d:
        return f"{sc}: {d['a']:.3f} / {d['b']:.3f}"
    if sc.startswith("four-") and "parts" in d:
        return f"{sc}: {' / '.join(f'{x:.3f}' for x in d['parts'])} (device {d.get('device_busy') or 0:.3f} busy)"
    if sc.startswith("launch-rate") and "nolimit_vs_native" in d:
        return f"{sc}: no limit {d['nolimit_vs_native']:.4f}, cap 99 {d['cap99_vs_native']:.4f} of native"
    if "inf_ratio" in d and "inf_p99_vs_alone" in d:
        rnd = f" round {d['round']}" if "round" in d else ""
        train = f", training {d['train_ratio']:.3f}" if d.get("train_ratio") is not None else ""
        return f"{sc}{rnd}: inference {d['inf_ratio']:.3f} (p99 {d['inf_p99_vs_alone']:.2f} x alone){train}"
    return None


def scenarios(paths):
    for path in paths:
        with open(path) as f:
            for line in f:
                text = scenario_line(json.loads(line))
                if text:
                    print(text)


def rest_part(d, who):
    """NVML's readings over the rest of who's turns (the first second still
    holds the turn before): sm_mhz, power_w, util..., or {}."""
    rest = [v for part, v in d.get("nvml", {}).get(who, {}).items() if not part.startswith("0.3-")]
    return rest[0] if rest else {}


def rest_util(d, who):
    """NVML's device utilisation over the rest of who's turns, as a
    fraction; None unmeasured."""
    util = rest_part(d, who).get("util")
    return util / 100 if util else None


def found(paths):
    """(gputime.jsonl files, logs.tgz files) of paths: a .jsonl as it is, a
    directory (bench/compute/table.sh's OUT) searched for each gputime.jsonl
    and the logs.tgz beside it."""
    jsonl, tgz = [], []
    for path in paths:
        if not os.path.isdir(path):
            jsonl.append(path)
            continue
        for d, _, files in sorted(os.walk(path)):
            if "gputime.jsonl" in files:
                jsonl.append(os.path.join(d, "gputime.jsonl"))
                if "logs.tgz" in files:
                    tgz.append(os.path.join(d, "logs.tgz"))
    return jsonl, tgz


def goal(d):
    """'u U p/u Q goal G met/missed  ' for a capturns line whose alone
    process's turns NVML measured, else ''; where its own turns were
    measured too, 'BUSY B OVER p + 0.03' if the cap let the GPU be busier
    than that over their rest (every load's bound), and the work each busy
    second of the process did against alone's (ratio over busy / u): under
    1, the GPU was busier per step than alone. A GPU-bound load's ratio is
    read against p / u (alone is not quite always busy), not p."""
    u = rest_util(d, "alone")
    if u is None:
        return ""
    p = int(d["scenario"][len("capturns"):]) / 100
    g = min(1.0, p / u) - 0.05
    busy = rest_util(d, "capped")
    over = f"BUSY {busy:.3f} OVER p + 0.03  " if busy and busy > p + 0.03 else ""
    per_busy = f"a busy s {d['ratio'] * u / busy:.2f}  " if busy else ""
    rates = (d.get("capped", {}).get("rate"), d.get("alone", {}).get("rate"))
    per_unit = (f"busy us a unit {1e6 * busy / rates[0]:.1f} (alone {1e6 * u / rates[1]:.1f})  "
                if busy and all(rates) else "")
    return (f"u {u:.3f} p/u {p / u:.3f} goal {g:.3f} {'met' if d['ratio'] >= g else 'MISSED'}  "
            f"{over}{per_busy}{per_unit}")


WANTED = re.compile(r"outer .*wanted (never|-?\d+) ")


def free_while_held(text):
    """Free runs begun right after an outer run whose last wait for tokens
    was stamped within a millisecond of its clock, or after it: begun while
    held, as a wait stamped after the run's clock allowed before 8bf1ab8.
    (Earlier libraries logged no wait as "-1 ms ago": read as none.)"""
    n, last = 0, None
    for line in text.splitlines():
        m = WANTED.search(line)
        if m:
            last = None if m.group(1) in ("never", "-1") else int(m.group(1))
        elif ": running free at" in line and last is not None and last <= 1:
            n += 1
    return n


def unlearnt_under_windows(text):
    """Outer runs that left the cap under windows with c not learnt. A free
    run's runs do not count (c is not used there, and is not learnt where
    the run that began it forgot c); the run that ends one does."""
    n, free, pending = 0, False, False
    for line in text.splitlines():
        if ": running free at" in line:
            free = True
        elif ": back to windows at" in line:
            free = False
        elif WANTED.search(line):
            n += pending and not free
            pending = "(not learnt)" in line
    return n + (pending and not free)


def log_texts(source):
    """(name, text) of each debug log in source: a --log DIR, or the
    logs.tgz run_gpu.sh packs it into."""
    if os.path.isdir(source):
        for name in sorted(os.listdir(source)):
            with open(os.path.join(source, name), errors="replace") as f:
                yield name, f.read()
        return
    with tarfile.open(source) as tar:
        for m in sorted((m for m in tar.getmembers() if m.isfile()), key=lambda m: m.name):
            yield os.path.basename(m.name), tar.extractfile(m).read().decode(errors="replace")


def logs(sources):
    for source in sources:
        for name, text in log_texts(source):
            if "outer " not in text:
                continue  # a tenant without the limiter
            costs = {m.group(2).strip(): (int(m.group(1)), float(m.group(3)), float(m.group(4)))
                     for m in COST.finditer(text)}
            parts = [f"{name}: {text.count('tokens -')} windows opened in debt",
                     f"free runs {text.count(': running free at')} begun ({free_while_held(text)} while held), "
                     f"{text.count(': back to windows at')} ended",
                     f"outer runs under windows with c not learnt {unlearnt_under_windows(text)}"]
            for what in REPORTED:
                if what in costs:
                    n, ms, each = costs[what]
                    parts.append(f"{what} {n} ({ms:.0f} ms, {each:.2f} us each)")
            closes = costs.get(REPORTED[2], (0,))[0]
            if closes:
                records = costs.get(REPORTED[4], (0,))[0] + costs.get(REPORTED[5], (0,))[0]
                parts.append(f"records an interval {records / closes:.1f}")
            print("; ".join(parts))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("jsonl", nargs="*")
    ap.add_argument("--logs", action="append", default=[], help="a --log DIR of run_gpu.sh, or its logs.tgz")
    a = ap.parse_args()
    jsonl, tgz = found(a.jsonl)
    capturns(jsonl)
    scenarios(jsonl)
    logs(a.logs + tgz)


if __name__ == "__main__":
    main()
