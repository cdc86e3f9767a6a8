"""Peak device memory of one pid as the REAL NVML reports it. Run it without
the interposer (the scripts start it with LD_PRELOAD removed): under the
interposer a process sees its container's own, virtualised view.
Prints {"peak": bytes, "last": bytes} when stdin closes."""
import json
import os
import select
import sys
import time

import pynvml

pid = int(sys.argv[1])
pynvml.nvmlInit()
h = pynvml.nvmlDeviceGetHandleByIndex(0)
peak = last = 0
while True:
    for p in pynvml.nvmlDeviceGetComputeRunningProcesses(h):
        if p.pid == pid:
            last = p.usedGpuMemory or 0
            peak = max(peak, last)
    r, _, _ = select.select([sys.stdin], [], [], 0.002)
    if r and not sys.stdin.read(1):
        break
print(json.dumps({"peak": peak, "last": last}))
