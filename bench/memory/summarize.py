"""Turn run_gpu.sh's memory.jsonl into a Markdown table of measured numbers."""
import json
import statistics
import sys

MiB = 1 << 20
rows = [json.loads(line) for line in open(sys.argv[1]) if line.startswith("{")]
by = {}
for r in rows:
    by.setdefault(r["scenario"], []).append(r["result"])

print("| scenario | mem_get_info total | allocated before first error | error | peak NVML process usage |")
print("|---|---|---|---|---|")
for name in ("torch_native", "torch_4gib", "torch_4gib_expandable", "torch_4gib_after_training_steps",
             "second_while_held", "after_kill9"):
    for r in by.get(name, []):
        print(f"| {name} | {r['mem_get_info_total'] // MiB} MiB | {r['allocated_bytes'] // MiB} MiB | "
              f"{r['error']} | {r['peak_nvml_process_bytes'] // MiB} MiB |")
for r in by.get("cupy_4gib", []):
    print(f"| cupy_4gib | {r['mem_get_info_total'] // MiB} MiB | {r['allocated_bytes'] // MiB} MiB | {r['error']} | |")
print()
for name in ("jax_native", "jax_4gib"):
    for r in by.get(name, []):
        print(f"- {name}: JAX bytes_limit {r['jax_bytes_limit'] // MiB} MiB, NVML process usage "
              f"{r['nvml_process_bytes'] // MiB} MiB")
for name in ("nvidia_smi_4gib", "nvidia_smi_4gib_with_1gib_tenant"):
    for r in by.get(name, []):
        print(f"- {name} (total, used, free): {r}")
for r in by.get("holder", []):
    print(f"- holder process: asked {r['asked_mib']} MiB, got {r['got_mib']} MiB")
ctx = [r["ctx_overhead_nvml"] for r in by.get("torch_native", [])]
if ctx:
    print(f"- context overhead NVML reports for the same program without a limit: {ctx[0] // MiB} MiB")

nat = by.get("overhead_native", [])
ipo = by.get("overhead_interposed", [])
if nat and ipo:
    launch = [i["launch_rate_median"] / n["launch_rate_median"] for n, i in zip(nat, ipo)]
    malloc = [i["malloc_free_1mib_us_median"] / n["malloc_free_1mib_us_median"] for n, i in zip(nat, ipo)]
    print()
    print("| pair | native launches/s | interposed launches/s | ratio | native malloc+free µs | interposed µs | ratio |")
    print("|---|---|---|---|---|---|---|")
    for k, (n, i) in enumerate(zip(nat, ipo)):
        print(f"| {k + 1} | {n['launch_rate_median']:.0f} | {i['launch_rate_median']:.0f} | {launch[k]:.3f} | "
              f"{n['malloc_free_1mib_us_median']:.2f} | {i['malloc_free_1mib_us_median']:.2f} | {malloc[k]:.3f} |")
    print(f"\nmedian of the per-pair ratios over {len(launch)} alternating pairs: launch rate "
          f"{statistics.median(launch):.3f}, 1 MiB cudaMalloc+cudaFree latency {statistics.median(malloc):.3f}")
    med = lambda rs, k: statistics.median(r[k] for r in rs)
    print(f"ratio of medians: launch rate {med(ipo, 'launch_rate_median') / med(nat, 'launch_rate_median'):.3f}, "
          f"malloc+free latency {med(ipo, 'malloc_free_1mib_us_median') / med(nat, 'malloc_free_1mib_us_median'):.3f}")
