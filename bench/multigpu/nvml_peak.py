"""Peak device memory of every process on each GPU as the REAL NVML reports
it, sampled until the file named by argv[1] exists. Run without the
interposer. Prints {"gpu<i>_peak_bytes": ...} (the largest single process on
that GPU)."""
import json
import os
import sys
import time

import pynvml

pynvml.nvmlInit()
handles = [pynvml.nvmlDeviceGetHandleByIndex(i) for i in range(pynvml.nvmlDeviceGetCount())]
peak = [0] * len(handles)
while not os.path.exists(sys.argv[1]):
    for i, h in enumerate(handles):
        for p in pynvml.nvmlDeviceGetComputeRunningProcesses(h):
            peak[i] = max(peak[i], p.usedGpuMemory or 0)
    time.sleep(0.01)
print(json.dumps({f"gpu{i}_peak_bytes": v for i, v in enumerate(peak)}))
