"""Take N MiB with PyTorch, report, then hold it until killed."""
import json, os, sys, time
import torch
mib = int(sys.argv[1])
held, err = [], None
try:
    for _ in range(mib // 256):
        held.append(torch.empty(256 << 20, dtype=torch.uint8, device="cuda"))
except torch.OutOfMemoryError:
    err = "torch.OutOfMemoryError"
torch.cuda.synchronize()
print(json.dumps({"pid": os.getpid(), "asked_mib": mib, "got_mib": len(held) * 256, "error": err}), flush=True)
if len(sys.argv) > 2 and sys.argv[2] == "hold":
    time.sleep(3600)
