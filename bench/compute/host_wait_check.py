"""A program whose queue waits for its host, on a real GPU: bf16 matmuls
queued behind a host function that waits for the program's next step
(cuLaunchHostFunc), behind a cuStreamWaitValue32 on a pinned flag, or
behind a kernel spinning on that flag (spin: CuPy's RawKernel, on PyTorch's
stream; no API call shows its wait), for SECS seconds; only then does the
program open the gate and synchronise.
Under a cap, a window's drain waits for that work: without a bound it hung
for good. Prints one JSON line: the mode, launches, wall seconds, rc.
Run by host_wait_gpu.sh, under the interposer and without it. The host
function is host_wait_gate.c's (GATE_LIB, built by the script). Nothing
behind the gate may allocate: cuBLAS's first call and a new output tensor
can synchronise the device, which then waits for the gate it is to open
(it hung natively on an H100 that way), so the matmul is warmed up and
writes into one tensor. Progress goes to stderr, so that a hang says where.
  GATE_LIB=libgate.so python3 host_wait_check.py hostfunc|hostwait|spin SECS"""
import ctypes
import json
import os
import sys
import time

import torch

how, secs = sys.argv[1], float(sys.argv[2])
cuda = ctypes.CDLL("libcuda.so.1")
a = torch.randn(4096, 4096, device="cuda", dtype=torch.bfloat16)
b = a.clone()
c = a @ b  # cuBLAS's handle and workspace, before the gate
torch.cuda.synchronize()
stream_handle = torch.cuda.current_stream().cuda_stream  # 0: the legacy default stream
stream = ctypes.c_void_p(stream_handle)
gate_lib = ctypes.CDLL(os.environ["GATE_LIB"])
gate = ctypes.c_int.in_dll(gate_lib, "gs_host_gate")
flag = torch.zeros(1, dtype=torch.int32, pin_memory=True)  # host memory, a device address under UVA
if how == "spin":
    import cupy

    spin = cupy.RawKernel(r"""
extern "C" __global__ void gs_spin(volatile int *flag) { while (*flag == 0) __nanosleep(1000); }""", "gs_spin")
    with cupy.cuda.ExternalStream(stream_handle):
        flag[0] = 1  # warm-up: compiled and loaded before the gate, where loading could synchronise
        spin((1,), (1,), (cupy.uint64(flag.data_ptr()),))
        torch.cuda.synchronize()
        flag[0] = 0
        spin((1,), (1,), (cupy.uint64(flag.data_ptr()),))
    rc = 0
elif how == "hostfunc":
    rc = cuda.cuLaunchHostFunc(stream, gate_lib.gs_wait_for_gate, None)
else:
    rc = cuda.cuStreamWaitValue32_v2(stream, ctypes.c_uint64(flag.data_ptr()), ctypes.c_uint32(1),
                                     ctypes.c_uint(0))  # CU_STREAM_WAIT_VALUE_GEQ
print(f"queued the {how} gate: rc={rc}", file=sys.stderr, flush=True)
t0 = time.time()
n = 0
while rc == 0 and time.time() - t0 < secs and n < 256:  # bounded: a full launch queue blocks natively too
    torch.matmul(a, b, out=c)
    n += 1
print(f"{n} matmuls queued behind it; opening the gate", file=sys.stderr, flush=True)
gate.value = 1
flag[0] = 1
torch.cuda.synchronize()
print(json.dumps({"how": how, "rc": rc, "launches": n, "wall_s": round(time.time() - t0, 3)}), flush=True)
