"""JAX preallocates a fraction (default 75 %) of what cuMemGetInfo reports
as total. Under a 4 GiB limit that must be 75 % of 4 GiB, not of the card."""
import json, os, subprocess, sys
import jax, jax.numpy as jnp

x = jnp.ones((1024, 1024), dtype=jnp.float32)
x.block_until_ready()
# Real usage, read by a watcher outside the interposer.
env = {k: v for k, v in os.environ.items() if k != "LD_PRELOAD"}
w = subprocess.run([sys.executable, os.path.join(os.path.dirname(__file__), "nvml_watch.py"), str(os.getpid())],
                   input="", capture_output=True, text=True, env=env)
used = json.loads(w.stdout)["last"]
stats = jax.devices()[0].memory_stats() or {}
print(json.dumps({"limit": os.environ.get("CUDA_DEVICE_MEMORY_LIMIT", ""),
                  "nvml_process_bytes": used,
                  "jax_bytes_limit": stats.get("bytes_limit"),
                  "jax_pool_bytes": stats.get("pool_bytes", stats.get("bytes_reserved"))}))
