"""What makes a CUDA-graph inference step busier, with no interposer: the
graph inference load of gputime_worker.py (torch.compile reduce-overhead,
a 1024-4096-1024 MLP on 64 rows, a sum read back each step) in variants
that each add one thing the compute limiter adds to such a step under a cap
(docs/compute.md, "Busy intervals and CPU gaps"): event records between the
step's launches (rec2, rec4), a host gap between them (gap20: 20 µs of CPU
between the graph and the sum), an idle GPU now and then (idle: 1.5 ms of
sleep every 10 steps, as a wait for tokens leaves it), a stream query before
each step (query, the gap probe), and the probe and records a capped step
gets, together (limiter: the probe, a start event before the graph, a marker
after the graph and one after the sum; bench/results/compute-2026-12-03f.md), and those of a
step trusted to end at its wait (limiter_sync: the probe, the start event and
one marker after the sum, recorded at the .item()). The variants take
turns in blocks of --block seconds, --rounds times, so that the clock's and the host's drift
fall on all of them alike; NVML's device utilisation samples
(nvmlDeviceGetSamples) inside each block but its first 0.4 s give the GPU
busy time per step. Prints one JSON line per block and a summary line:
per variant, the median over rounds of steps/s, busy fraction and busy µs
a step.
  python3 bench/compute/graph_step_cost.py [--block 2.0] [--rounds 5]"""
import argparse
import json
import statistics
import time

import torch

from nvml_probe import Nvml

SKIP_S = 0.4  # NVML's samples at a block's start still hold the block before


def make_step():
    dev = torch.device("cuda")
    m = torch.nn.Sequential(torch.nn.Linear(1024, 4096), torch.nn.GELU(), torch.nn.Linear(4096, 1024)).to(dev)
    xb = torch.randn(64, 1024, device=dev)
    f = torch.compile(m, mode="reduce-overhead")
    events = [torch.cuda.Event(enable_timing=True) for _ in range(4)]

    def spin_us(us):
        end = time.perf_counter() + us / 1e6
        while time.perf_counter() < end:
            pass

    def step(records_after_graph=0, records_after_sum=0, gap_us=0, query=False, record_before=False):
        with torch.no_grad():
            if query:
                torch.cuda.current_stream().query()
            if record_before:
                events[3].record()
            y = f(xb)
            for e in events[:records_after_graph]:
                e.record()
            if gap_us:
                spin_us(gap_us)
            s = y.sum()
            for e in events[records_after_graph:records_after_graph + records_after_sum]:
                e.record()
            s.item()

    return step


VARIANTS = {
    "plain": {},
    "rec2": {"records_after_graph": 1, "records_after_sum": 1},
    "rec4": {"records_after_graph": 2, "records_after_sum": 2},
    "gap20": {"gap_us": 20},
    "query": {"query": True},
    # what a capped step gets: the probe, the interval's start event, a marker after each launch
    "limiter": {"query": True, "record_before": True, "records_after_graph": 1, "records_after_sum": 1},
    # ... and one trusted to end at its wait: one marker, at the .item()
    "limiter_sync": {"query": True, "record_before": True, "records_after_sum": 1},
    "idle": {"idle_every": 10},
}


def run_block(step, kw, secs):
    kw = dict(kw)
    idle_every = kw.pop("idle_every", 0)
    n, t0 = 0, time.time()
    while time.time() - t0 < secs:
        step(**kw)
        n += 1
        if idle_every and n % idle_every == 0:
            time.sleep(0.0015)
    return n, t0, time.time()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--block", type=float, default=2.0, help="seconds a variant runs in a turn")
    ap.add_argument("--rounds", type=int, default=5, help="turns of every variant")
    a = ap.parse_args()
    if a.block <= SKIP_S + 0.5 or a.rounds < 1:
        ap.error(f"--block must exceed {SKIP_S + 0.5} s and --rounds be at least 1")
    nv = Nvml()
    step = make_step()
    t0 = time.time()
    while time.time() - t0 < 10:  # compile, capture the graph, settle the clock
        step()
    torch.cuda.synchronize()
    blocks, samples = [], []
    for r in range(a.rounds):
        for name, kw in VARIANTS.items():
            n, b0, b1 = run_block(step, kw, a.block)
            blocks.append({"variant": name, "round": r, "steps": n, "t0": b0, "t1": b1})
            # read after each block: NVML keeps only a few seconds of samples
            got = nv.device_samples(1, samples[-1][0] if samples else int(b0 * 1e6))
            if isinstance(got, dict):
                raise SystemExit(f"nvmlDeviceGetSamples failed: {got}")
            samples += got
    rows = {}
    for b in blocks:
        inside = [v for ts, v in samples if b["t0"] + SKIP_S <= ts / 1e6 <= b["t1"]]
        b["rate"] = b["steps"] / (b["t1"] - b["t0"])
        b["util"] = statistics.mean(inside) / 100 if inside else None
        b["samples"] = len(inside)
        b["busy_us_step"] = 1e6 * b["util"] / b["rate"] if inside else None
        print(json.dumps(b), flush=True)
        rows.setdefault(b["variant"], []).append(b)
    summary = {}
    for name, bs in rows.items():
        ok = [b for b in bs if b["util"] is not None]
        summary[name] = {k: round(statistics.median(b[k] for b in ok), 3) if ok else None
                         for k in ("rate", "util", "busy_us_step")}
    print(json.dumps({"summary": summary, "gpu": torch.cuda.get_device_name()}), flush=True)


if __name__ == "__main__":
    main()
