"""The demo's tenant: a CUDA program written against the driver API with
ctypes (no toolkit needed). It prints the GPU size it is shown, allocates
1 GiB at a time until it is refused, then runs `gpuslice top` while it still
holds its memory. Run by tools/demo.sh under `gpuslice run`; the argument,
the gpuslice to run top with, defaults to the one on PATH."""
import ctypes
import os
import shutil
import subprocess
import sys

GiB = 1 << 30
OUT_OF_MEMORY = 2


def main():
    gpuslice = sys.argv[1] if len(sys.argv) > 1 else shutil.which("gpuslice")
    cu = ctypes.CDLL("libcuda.so.1")

    def check(what, rc):
        if rc != 0:
            sys.exit(f"tenant: {what} failed with CUDA error {rc}")

    check("cuInit", cu.cuInit(0))
    dev = ctypes.c_int()
    check("cuDeviceGet", cu.cuDeviceGet(ctypes.byref(dev), 0))
    ctx = ctypes.c_void_p()
    check("cuDevicePrimaryCtxRetain", cu.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), dev))
    check("cuCtxSetCurrent", cu.cuCtxSetCurrent(ctx))
    free, total = ctypes.c_size_t(), ctypes.c_size_t()
    check("cuMemGetInfo", cu.cuMemGetInfo_v2(ctypes.byref(free), ctypes.byref(total)))
    print(f"tenant: cuMemGetInfo shows a {total.value / GiB:.1f} GiB GPU, "
          f"{free.value / GiB:.2f} GiB free (the context itself takes the rest)")
    held = []
    while True:
        ptr = ctypes.c_uint64()
        rc = cu.cuMemAlloc_v2(ctypes.byref(ptr), ctypes.c_size_t(GiB))
        if rc == OUT_OF_MEMORY:
            print(f"tenant: allocation #{len(held) + 1} of 1 GiB refused with CUDA_ERROR_OUT_OF_MEMORY")
            break
        check("cuMemAlloc", rc)
        held.append(ptr)
        print(f"tenant: allocation #{len(held)} of 1 GiB succeeded")
        if len(held) > 1024:
            sys.exit("tenant: never refused: the limit is not enforced")
    sys.stdout.flush()
    if not gpuslice:
        print("tenant: no gpuslice on PATH to run `gpuslice top` with")
        return
    print("\n$ gpuslice top   (while the tenant still holds its memory)")
    sys.stdout.flush()
    # top shows the host's GPU: not through this container's interposer,
    # which would show the GPU as the 4 GiB the tenant sees.
    env = dict(os.environ)
    env["LD_PRELOAD"] = ":".join(p for p in env.get("LD_PRELOAD", "").split(":")
                                 if p and not p.endswith("libgpuslice.so"))
    subprocess.run([gpuslice, "top"], check=True, env=env)


if __name__ == "__main__":
    main()
