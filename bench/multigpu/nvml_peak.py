"""Peak device memory of every process on each GPU as the REAL NVML reports
it, and each GPU's mean utilisation while anything ran on it, sampled until
the file named by argv[1] exists. Run without the interposer. Prints
{"gpu<i>_peak_bytes": ... (the largest single process on that GPU),
"gpu<i>_busy": ...}."""
import json
import os
import sys
import time

import pynvml

pynvml.nvmlInit()
handles = [pynvml.nvmlDeviceGetHandleByIndex(i) for i in range(pynvml.nvmlDeviceGetCount())]
peak = [0] * len(handles)
busy = [[] for _ in handles]
while not os.path.exists(sys.argv[1]):
    for i, h in enumerate(handles):
        procs = pynvml.nvmlDeviceGetComputeRunningProcesses(h)
        for p in procs:
            peak[i] = max(peak[i], p.usedGpuMemory or 0)
        if procs:
            busy[i].append(pynvml.nvmlDeviceGetUtilizationRates(h).gpu / 100)
    time.sleep(0.01)
out = {f"gpu{i}_peak_bytes": v for i, v in enumerate(peak)}
out.update({f"gpu{i}_busy": sum(b) / len(b) for i, b in enumerate(busy) if b})
print(json.dumps(out))
