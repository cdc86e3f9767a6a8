"""How fast NVML's power readings follow a new container's duty cycle: the
power correction (docs/compute.md) reads nvmlDeviceGetPowerUsage, a mean
over the last second, so a new container is charged s = 1 through its
first second. This samples, every 5 ms from 1 s before a bf16 4096^2
matmul loop starts until 3 s after, that reading, NVML's instantaneous and
averaged power fields (NVML_FI_DEV_POWER_INSTANT 186, _AVERAGE 185,
through nvmlDeviceGetFieldValues), the energy counter and the SM clock,
and prints, for each 250 ms span (an outer run's), the draw each would
give. The loop runs in a child: without the interposer (cap 100), or under
it (LIB) with a cap. No limit on the sampler itself.
  python3 bench/compute/power_instant.py LIB CAP [CAP...]"""
import ctypes
import json
import os
import subprocess
import sys
import tempfile
import time

LOAD = """
import torch, time, sys
a = torch.randn(4096, 4096, device="cuda", dtype=torch.bfloat16)
torch.cuda.synchronize()
print("ready", flush=True)
sys.stdin.readline()
end = time.monotonic() + float(sys.argv[1])
n = 0
while time.monotonic() < end:
    for _ in range(8):
        a @ a
    torch.cuda.synchronize()
    n += 8
print(n, flush=True)
"""

FIELD_AVERAGE, FIELD_INSTANT, CLOCK_SM = 185, 186, 1
SPAN_S, IDLE_S, LOAD_S = 0.25, 1.0, 3.0


class FieldValue(ctypes.Structure):
    """nvmlFieldValue_t, re-typed from NVML's reference."""
    _fields_ = [("fieldId", ctypes.c_uint), ("scopeId", ctypes.c_uint), ("timestamp", ctypes.c_longlong),
                ("latencyUsec", ctypes.c_longlong), ("valueType", ctypes.c_uint), ("nvmlReturn", ctypes.c_uint),
                ("value", ctypes.c_ulonglong)]


def sampler():
    nv = ctypes.CDLL("libnvidia-ml.so.1")
    nv.nvmlInit_v2()
    h = ctypes.c_void_p()
    nv.nvmlDeviceGetHandleByIndex_v2(0, ctypes.byref(h))
    power, energy, clock = ctypes.c_uint(), ctypes.c_ulonglong(), ctypes.c_uint()
    fields = (FieldValue * 2)()

    def sample():
        fields[0].fieldId, fields[1].fieldId = FIELD_INSTANT, FIELD_AVERAGE
        nv.nvmlDeviceGetPowerUsage(h, ctypes.byref(power))
        nv.nvmlDeviceGetTotalEnergyConsumption(h, ctypes.byref(energy))
        nv.nvmlDeviceGetClockInfo(h, CLOCK_SM, ctypes.byref(clock))
        rc = nv.nvmlDeviceGetFieldValues(h, 2, fields)
        inst = fields[0].value & 0xFFFFFFFF if rc == 0 and fields[0].nvmlReturn == 0 else -1
        avg = fields[1].value & 0xFFFFFFFF if rc == 0 and fields[1].nvmlReturn == 0 else -1
        return (time.monotonic(), power.value, inst, avg, energy.value, clock.value)

    return sample


def run(sample, lib, cap, state):
    env = dict(os.environ)
    if cap < 100:
        env.update(LD_PRELOAD=lib, GPUSLICE_CORES=str(cap), GPUSLICE_REGION=os.path.join(state, f"cap{cap}.region"))
    child = subprocess.Popen([sys.executable, "-c", LOAD, str(LOAD_S)], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, text=True, env=env)
    assert child.stdout.readline().strip() == "ready"
    rows, t0, started = [], time.monotonic(), None
    while time.monotonic() - t0 < IDLE_S + LOAD_S:
        if started is None and time.monotonic() - t0 >= IDLE_S:
            child.stdin.write("go\n")
            child.stdin.flush()
            started = time.monotonic()
        rows.append(sample())
        time.sleep(0.005)
    steps = int(child.stdout.readline())
    child.wait()
    spans, i = [], 0
    while i < len(rows):
        j = i
        while j < len(rows) and rows[j][0] - rows[i][0] < SPAN_S:
            j += 1
        if j >= len(rows):
            break
        part = rows[i:j]
        inst = [r[2] for r in part if r[2] >= 0]
        spans.append({"t": round(rows[j][0] - started, 2),
                      "avg_1s_mW": rows[j][1],
                      "field_avg_mW": rows[j][3],
                      "instant_mean_mW": round(sum(inst) / len(inst)) if inst else None,
                      "energy_mW": round((rows[j][4] - rows[i][4]) / (rows[j][0] - rows[i][0])),
                      "sm_mhz": round(sum(r[5] for r in part) / len(part))})
        i = j
    distinct = len({r[2] for r in rows})
    return {"cap": cap, "steps_per_s": round(steps / LOAD_S, 1), "samples": len(rows),
            "distinct_instant_values": distinct, "spans": spans}


def main():
    lib, caps = sys.argv[1], [int(c) for c in sys.argv[2:]]
    sample = sampler()
    with tempfile.TemporaryDirectory() as state:
        for cap in caps:
            print(json.dumps(run(sample, lib, cap, state)), flush=True)


if __name__ == "__main__":
    main()
