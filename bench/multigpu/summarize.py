"""Reads multigpu.jsonl (run_gpu.sh) and prints the issue's table in
Markdown, each criterion with its measured value and PASS or FAIL; a part
that did not run or crashed says so instead of passing."""
import json
import sys

GiB = 1 << 30
def objects(path):
    """Every JSON object in the log, also two that ended up on one line."""
    dec = json.JSONDecoder()
    for line in open(path):
        i = line.find("{")
        while i >= 0:
            obj, end = dec.raw_decode(line, i)
            yield obj
            i = line.find("{", end)


rows = list(objects(sys.argv[1]))


def pick(mode, test):
    return {r["rank"]: r for r in rows if r.get("mode") == mode and r.get("test") == test and "rank" in r}


def failed(mode):
    return [r["exit"] for r in rows if r.get("mode") == mode and "exit" in r]


out = ["| criterion | measured | verdict |", "|---|---|---|"]


def line(what, value, ok):
    out.append(f"| {what} | {value} | {'PASS' if ok else 'FAIL'} |")


def ratios(limited, native, key):
    return {k: limited[k][key] / native[k][key] for k in native if k in limited}


nat, mem = pick("ddp_native", "ddp"), pick("ddp_mem16", "ddp")
if nat and len(mem) == 2 and not failed("ddp_mem16"):
    diff = max(abs(a - b) / max(abs(b), 1e-9) for k in nat for a, b in zip(mem[k]["losses"], nat[k]["losses"]))
    line("DDP --memory 16GiB: loss curve as native (max relative difference)", f"{diff:.2e}", diff <= 1e-3)
    r = ratios(mem, nat, "tokens_per_s")
    line("DDP --memory 16GiB: throughput / native, per rank", ", ".join(f"{v:.3f}" for v in r.values()),
         all(v >= 0.97 for v in r.values()))
    peaks = [r for r in rows if r.get("mode") == "ddp_mem16" and r.get("test") == "nvml"]
    vals = [v for p in peaks for k, v in p.items() if k.endswith("_peak_bytes")]
    line("DDP --memory 16GiB: NVML peak per GPU (GiB)", ", ".join(f"{v / GiB:.2f}" for v in vals),
         bool(vals) and all(v <= 16 * GiB for v in vals))
else:
    line("DDP --memory 16GiB", f"not run or failed (exit {failed('ddp_mem16')})", False)

nat, cap = pick("cores_native", "ddp"), pick("cores_50", "ddp")
if nat and len(cap) == 2 and not failed("cores_50"):
    r = ratios(cap, nat, "tokens_per_s")
    line("DDP --cores 50, GPU-bound: throughput / alone, per rank", ", ".join(f"{v:.3f}" for v in r.values()),
         all(abs(v - 0.50) <= 0.03 for v in r.values()))
else:
    line("DDP --cores 50", f"not run or failed (exit {failed('cores_50')})", False)

nat = [r for r in rows if r.get("mode") == "ar_native" and r.get("rank") == 0]
for mode in ("ar_preload", "ar_tracked"):
    got = {r["mib"]: r["busbw_gbs"] for r in rows if r.get("mode") == mode and r.get("rank") == 0}
    if nat and got and not failed(mode):
        r = {n["mib"]: got[n["mib"]] / n["busbw_gbs"] for n in nat if n["mib"] in got}
        line(f"all-reduce bus bandwidth / native ({mode}), by MiB",
             ", ".join(f"{k}: {v:.3f}" for k, v in sorted(r.items())), all(v >= 0.98 for v in r.values()))
    else:
        line(f"all-reduce ({mode})", f"not run or failed (exit {failed(mode)})", False)

nat, cap = pick("tp_native", "tp"), pick("tp_40", "tp")
hung = any(r.get("hang") for r in cap.values()) or 3 in failed("tp_40")
if nat and len(cap) == 2 and not hung and not failed("tp_40"):
    r = ratios(cap, nat, "steps_per_s")
    line("TP matmul+all-reduce --cores 40: completes, no hang", "yes", True)
    line("TP --cores 40: steps/s / alone, per rank", ", ".join(f"{v:.3f}" for v in r.values()),
         all(abs(v - 0.40) <= 0.05 for v in r.values()))
else:
    line("TP matmul+all-reduce --cores 40: completes, no hang", f"hang={hung}, exit {failed('tp_40')}", False)
print("\n".join(out))
