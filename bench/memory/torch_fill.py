"""Fill the GPU with 256 MiB tensors until the first error, under whatever
limit the environment sets. Prints one JSON line of measured facts."""
import json, os, sys, threading, time
import torch
import pynvml

CHUNK = 256 << 20


def proc_used(handle, pid):
    for p in pynvml.nvmlDeviceGetComputeRunningProcesses(handle):
        if p.pid == pid:
            return p.usedGpuMemory or 0
    return 0


def main():
    pynvml.nvmlInit()
    h = pynvml.nvmlDeviceGetHandleByIndex(0)
    torch.cuda.init()
    free0, total0 = torch.cuda.mem_get_info()
    peak = [0]
    stop = threading.Event()

    def watch():  # sample the real usage while we allocate
        while not stop.is_set():
            peak[0] = max(peak[0], proc_used(h, os.getpid()))
            time.sleep(0.002)

    t = threading.Thread(target=watch, daemon=True)
    ctx_overhead = proc_used(h, os.getpid())
    t.start()
    held, err = [], None
    try:
        while True:
            held.append(torch.empty(CHUNK, dtype=torch.uint8, device="cuda"))
            torch.cuda.synchronize()
            peak[0] = max(peak[0], proc_used(h, os.getpid()))
    except torch.OutOfMemoryError as e:
        err = "torch.OutOfMemoryError"
    except Exception as e:  # anything else is a failure of ours
        err = f"{type(e).__name__}: {str(e)[:200]}"
    peak[0] = max(peak[0], proc_used(h, os.getpid()))
    stop.set()
    t.join()
    print(json.dumps({
        "alloc_conf": os.environ.get("PYTORCH_CUDA_ALLOC_CONF", ""),
        "limit": os.environ.get("CUDA_DEVICE_MEMORY_LIMIT", ""),
        "mem_get_info_total": total0, "mem_get_info_free": free0,
        "ctx_overhead_nvml": ctx_overhead,
        "allocated_bytes": len(held) * CHUNK, "error": err,
        "peak_nvml_process_bytes": peak[0],
    }))


if __name__ == "__main__":
    main()
