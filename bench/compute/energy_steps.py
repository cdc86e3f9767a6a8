"""How NVML's energy counter moves: reads it and the power reading every
5 ms for 3 s (idle 1 s, then a bf16 4096^2 matmul loop), and prints how
often the counter changed and the power over 250 ms spans from each (the
power correction's draw, docs/compute.md). No interposer.
  python3 bench/compute/energy_steps.py"""
import ctypes
import json
import threading
import time

import torch


def main():
    nv = ctypes.CDLL("libnvidia-ml.so.1")
    nv.nvmlInit_v2()
    h = ctypes.c_void_p()
    nv.nvmlDeviceGetHandleByIndex_v2(0, ctypes.byref(h))
    energy, power = ctypes.c_ulonglong(), ctypes.c_uint()
    stop = threading.Event()

    def load():
        a = torch.randn(4096, 4096, device="cuda", dtype=torch.bfloat16)
        while not stop.is_set():
            for _ in range(8):
                a @ a
            torch.cuda.synchronize()

    rows, t0, th = [], time.monotonic(), None
    while time.monotonic() - t0 < 3.0:
        if th is None and time.monotonic() - t0 > 1.0:
            th = threading.Thread(target=load)
            th.start()
        nv.nvmlDeviceGetTotalEnergyConsumption(h, ctypes.byref(energy))
        nv.nvmlDeviceGetPowerUsage(h, ctypes.byref(power))
        rows.append((time.monotonic(), energy.value, power.value))
        time.sleep(0.005)
    stop.set()
    th.join()
    changes = [i for i in range(1, len(rows)) if rows[i][1] != rows[i - 1][1]]
    steps = sorted(rows[changes[i]][0] - rows[changes[i - 1]][0] for i in range(1, len(changes)))
    spans, i = [], 0
    while True:
        j = i
        while j < len(rows) and rows[j][0] - rows[i][0] < 0.25:
            j += 1
        if j >= len(rows):
            break
        spans.append((round(rows[j][0] - t0, 2), round((rows[j][1] - rows[i][1]) / (rows[j][0] - rows[i][0])),
                      rows[j][2]))
        i = j
    print(json.dumps({"reads": len(rows), "changes": len(changes),
                      "median_step_ms": 1e3 * steps[len(steps) // 2] if steps else None,
                      "spans_t_energy_mW_avg_mW": spans}))


if __name__ == "__main__":
    main()
