"""Peak device memory of every process on each GPU as the REAL NVML reports
it, sampled until stdin closes. Run without the interposer. Prints
{"gpu<i>_peak_bytes": ...} (the largest single process on that GPU)."""
import json
import select
import sys

import pynvml

pynvml.nvmlInit()
handles = [pynvml.nvmlDeviceGetHandleByIndex(i) for i in range(pynvml.nvmlDeviceGetCount())]
peak = [0] * len(handles)
while True:
    for i, h in enumerate(handles):
        for p in pynvml.nvmlDeviceGetComputeRunningProcesses(h):
            peak[i] = max(peak[i], p.usedGpuMemory or 0)
    r, _, _ = select.select([sys.stdin], [], [], 0.01)
    if r and not sys.stdin.read(1):
        break
print(json.dumps({f"gpu{i}_peak_bytes": v for i, v in enumerate(peak)}))
