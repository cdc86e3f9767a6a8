"""CuPy's memory pool filled with 256 MiB arrays until the first error."""
import json, os
import cupy

CHUNK = 256 << 20
free0, total0 = cupy.cuda.runtime.memGetInfo()
held, err = [], None
try:
    while True:
        held.append(cupy.empty(CHUNK, dtype=cupy.uint8))
except cupy.cuda.memory.OutOfMemoryError:
    err = "cupy.cuda.memory.OutOfMemoryError"
except Exception as e:
    err = f"{type(e).__name__}: {str(e)[:200]}"
print(json.dumps({"limit": os.environ.get("CUDA_DEVICE_MEMORY_LIMIT", ""), "mem_get_info_total": total0,
                  "allocated_bytes": len(held) * CHUNK, "error": err,
                  "pool_total_bytes": cupy.get_default_memory_pool().total_bytes()}))
