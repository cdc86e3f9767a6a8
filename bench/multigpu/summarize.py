"""Reads multigpu.jsonl (run_gpu.sh) and prints the issue's criteria in
Markdown, one row per criterion and round (run_gpu.sh runs every cell twice:
a limited run is compared with the native run of its own round), each with
its measured value and PASS or FAIL; a part that did not run or crashed says
so instead of passing."""
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
out = ["| criterion | round | measured | verdict |", "|---|---|---|---|"]


def line(what, rnd, value, ok):
    out.append(f"| {what} | {rnd} | {value} | {'PASS' if ok else 'FAIL'} |")


def rounds(mode, test):
    """The runs of a mode in order, each {rank: row}; a run is complete when
    every rank of it reported."""
    runs, cur = [], {}
    for r in rows:
        if r.get("mode") != mode or r.get("test") != test or "rank" not in r:
            continue
        if r["rank"] in cur:
            runs.append(cur)
            cur = {}
        cur[r["rank"]] = r
    if cur:
        runs.append(cur)
    return runs


def nvml(mode):
    return [r for r in rows if r.get("mode") == mode and r.get("test") == "nvml"]


def failed(mode):
    return [r["exit"] for r in rows if r.get("mode") == mode and "exit" in r]


def per_rank(limited, native, key):
    return [limited[k][key] / native[k][key] for k in sorted(native) if k in limited]


def fmt(vals):
    return ", ".join(f"{v:.3f}" for v in vals)


def pairs(lim_mode, nat_mode, test):
    return list(zip(rounds(lim_mode, test), rounds(nat_mode, test)))


for i, (mem, nat) in enumerate(pairs("ddp_mem16", "ddp_native", "ddp"), 1):
    diff = max(abs(a - b) / max(abs(b), 1e-9) for k in nat for a, b in zip(mem[k]["losses"], nat[k]["losses"]))
    line("DDP --memory 16GiB: losses as native (largest relative difference)", i, f"{diff:.2e}", diff <= 1e-3)
    r = per_rank(mem, nat, "tokens_per_s")
    line("DDP --memory 16GiB: throughput / native, per rank", i, fmt(r), all(v >= 0.97 for v in r))
for i, p in enumerate(nvml("ddp_mem16"), 1):
    vals = [v for k, v in p.items() if k.endswith("_peak_bytes")]
    line("DDP --memory 16GiB: NVML peak per GPU (GiB)", i, ", ".join(f"{v / GiB:.2f}" for v in vals),
         bool(vals) and all(v <= 16 * GiB for v in vals))
for i, (cap, nat) in enumerate(pairs("cores_50", "cores_native", "ddp"), 1):
    r = per_rank(cap, nat, "tokens_per_s")
    line("DDP --cores 50, GPU-bound: throughput / alone, per rank", i, fmt(r), all(abs(v - 0.50) <= 0.03 for v in r))

nat_runs = rounds("ar_native", "allreduce")
for mode in ("ar_preload", "ar_tracked"):
    lims = [r for r in rows if r.get("mode") == mode and r.get("rank") == 0]
    nats = [r for r in rows if r.get("mode") == "ar_native" and r.get("rank") == 0]
    sizes = sorted({r["mib"] for r in nats})
    for i in range(len(lims) // max(len(sizes), 1)):
        got = {r["mib"]: r["busbw_gbs"] for r in lims[i * len(sizes):(i + 1) * len(sizes)]}
        base = {r["mib"]: r["busbw_gbs"] for r in nats[i * len(sizes):(i + 1) * len(sizes)]}
        r = {m: got[m] / base[m] for m in sizes if m in got and m in base}
        line(f"all-reduce bus bandwidth / native ({mode}), by MiB", i + 1,
             ", ".join(f"{m}: {v:.3f}" for m, v in r.items()), bool(r) and all(v >= 0.98 for v in r.values()))
    if failed(mode):
        line(f"all-reduce ({mode})", "-", f"exit {failed(mode)}", False)

for what, lim_mode, nat_mode in (("TP", "tp_40", "tp_native"), ("TP as a CUDA graph", "tpg_40", "tpg_native")):
    for i, (cap, nat) in enumerate(pairs(lim_mode, nat_mode, "tp"), 1):
        hung = any(r.get("hang") for r in cap.values())
        r = per_rank(cap, nat, "steps_per_s")
        line(f"{what} --cores 40: completes, steps/s / alone, per rank", i, fmt(r),
             not hung and all(abs(v - 0.40) <= 0.05 for v in r))
        worst = max(r["step_max_s"] / r["step_median_s"] for r in cap.values())
        line(f"{what} --cores 40: longest step / median step", i, f"{worst:.1f}", worst <= 3)
    if failed(lim_mode):
        line(f"{what} --cores 40", "-", f"exit {failed(lim_mode)} (3: the watchdog saw a hang)", False)

busy = [max(v for k, v in p.items() if k.endswith("_busy")) for p in nvml("tpi_native")]
for i, (lim, nat) in enumerate(pairs("tpi_50", "tpi_native", "tp_infer"), 1):
    u = busy[i - 1] if i <= len(busy) else 1.0
    want = min(1, 0.5 / u) - 0.05
    r = per_rank(lim, nat, "tokens_per_s")
    p99 = max(x["p99_ms"] for x in lim.values()) / max(x["p99_ms"] for x in nat.values())
    line(f"TP-2 decoding --cores 50: tokens/s / alone (u {u:.2f}, want >= {want:.2f}); p99 / alone {p99:.2f}", i,
         fmt(r), all(v >= want for v in r))
for i, (lim, nat) in enumerate(pairs("tpi_mem8", "tpi_native", "tp_infer"), 1):
    peaks = [v for p in nvml("tpi_mem8")[i - 1:i] for k, v in p.items() if k.endswith("_peak_bytes")]
    line("TP-2 decoding --memory 8GiB: completes; NVML peak per GPU (GiB)", i,
         ", ".join(f"{v / GiB:.2f}" for v in peaks), bool(peaks) and all(v <= 8 * GiB for v in peaks))

alone = [max(r["steps_per_s"] for r in run.values()) for run in rounds("tp_native", "tp")]
for cap in (30, 70):
    for i, run in enumerate(rounds(f"two_{cap}", "tp"), 1):
        base = alone[i - 1] if i <= len(alone) else (alone[-1] if alone else 0)
        r = [x["steps_per_s"] / base for x in run.values()] if base else []
        line(f"two TP jobs side by side: cap {cap}, steps/s / alone, per rank (longest step "
             f"{max(x['step_max_s'] for x in run.values()):.2f} s)", i, fmt(r),
             bool(r) and all(abs(v - cap / 100) <= 0.03 for v in r))
for i, run in enumerate(rounds("ncclmem_4g", "nccl_limit"), 1):
    peaks = [v for p in nvml("ncclmem_4g")[i - 1:i] for k, v in p.items() if k.endswith("_peak_bytes")]
    held = [x["held_bytes"] / GiB for x in run.values()]
    ok = all(x["refused"] and x["allreduce_after"] for x in run.values()) and bool(peaks)
    line("NCCL under --memory 4GiB: refused as out of memory (GiB held per rank); all-reduce goes on; "
         "NVML peak per GPU (GiB)", i, ", ".join(f"{v:.2f}" for v in held) + " / " +
         ", ".join(f"{v / GiB:.2f}" for v in peaks), ok and all(v <= 4 * GiB for v in peaks))
if failed("ncclmem_4g"):
    line("NCCL under --memory 4GiB: exit status", "-", failed("ncclmem_4g"), False)
print("\n".join(out))
