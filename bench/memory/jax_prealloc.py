"""JAX preallocates a fraction (default 75 %) of what cuMemGetInfo reports
as total. Under a 4 GiB limit that must be 75 % of 4 GiB, not of the card."""
import json, os
import pynvml
import jax, jax.numpy as jnp

pynvml.nvmlInit()
h = pynvml.nvmlDeviceGetHandleByIndex(0)
x = jnp.ones((1024, 1024), dtype=jnp.float32)
x.block_until_ready()
used = 0
for p in pynvml.nvmlDeviceGetComputeRunningProcesses(h):
    if p.pid == os.getpid():
        used = p.usedGpuMemory or 0
stats = jax.devices()[0].memory_stats() or {}
print(json.dumps({"limit": os.environ.get("CUDA_DEVICE_MEMORY_LIMIT", ""),
                  "nvml_process_bytes": used,
                  "jax_bytes_limit": stats.get("bytes_limit"),
                  "jax_pool_bytes": stats.get("pool_bytes", stats.get("bytes_reserved"))}))
