"""Fill the GPU with 256 MiB tensors until the first error, under whatever
limit the environment sets. Prints one JSON line of measured facts."""
import json, os, subprocess, sys, time
import torch

CHUNK = 256 << 20


def start_watcher():
    env = {k: v for k, v in os.environ.items() if k != "LD_PRELOAD"}
    return subprocess.Popen([sys.executable, os.path.join(os.path.dirname(__file__), "nvml_watch.py"),
                             str(os.getpid())], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env)


def stop_watcher(w, settle=0.0):
    # NVML's per-process numbers can lag an allocation: let the watcher keep
    # sampling for a moment while everything is still held.
    time.sleep(settle)
    out, _ = w.communicate("", timeout=30)
    return json.loads(out)


def warm_up():
    """Real work first: cuBLAS handles, workspaces and lazily loaded kernels
    take device memory too, some of it outside any allocation call."""
    model = torch.nn.Sequential(torch.nn.Linear(2048, 2048), torch.nn.GELU(), torch.nn.Linear(2048, 2048)).cuda()
    opt = torch.optim.AdamW(model.parameters())
    for _ in range(3):
        x = torch.randn(512, 2048, device="cuda", dtype=torch.bfloat16)
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = model(x).float().pow(2).mean()
        loss.backward()
        opt.step()
        opt.zero_grad()
    torch.cuda.synchronize()
    return model, opt


def main():
    torch.cuda.init()
    keep = warm_up() if "--warm" in sys.argv else None
    free0, total0 = torch.cuda.mem_get_info()
    torch.cuda.synchronize()
    watcher = start_watcher()
    base = stop_watcher(start_watcher())["last"]  # context only, nothing allocated yet
    held, err = [], None
    try:
        while True:
            held.append(torch.empty(CHUNK, dtype=torch.uint8, device="cuda"))
            torch.cuda.synchronize()
    except torch.OutOfMemoryError:
        err = "torch.OutOfMemoryError"
    except Exception as e:  # anything else is a failure of ours
        err = f"{type(e).__name__}: {str(e)[:200]}"
    real = stop_watcher(watcher, settle=1.0)
    print(json.dumps({
        "alloc_conf": os.environ.get("PYTORCH_CUDA_ALLOC_CONF", ""),
        "limit": os.environ.get("CUDA_DEVICE_MEMORY_LIMIT", ""),
        "mem_get_info_total": total0, "mem_get_info_free": free0,
        "ctx_overhead_nvml": base,
        "allocated_bytes": len(held) * CHUNK, "error": err,
        "peak_nvml_process_bytes": real["peak"], "warmed_up": keep is not None,
    }))


if __name__ == "__main__":
    main()
