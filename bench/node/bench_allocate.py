#!/usr/bin/python3
"""Benchmark (not a test): Allocate latency p50/p99 and the time to admit a
burst of 50 pods on one node, gpuslice-node-agent against the kubelet and
API-server stand-ins (tests/k8s) on the simulated driver.

    GPUSLICE_NODE_AGENT=build/bin/gpuslice-node-agent \
    GPUSLICE_SIMDRIVER_DIR=build/simdriver /usr/bin/python3 bench/node/bench_allocate.py

Each pod: GetPreferredAllocation then Allocate, oldest first, as kubelet
admits them; pods are all bound (created) before the first call.
"""
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests" / "k8s"))
import conftest  # noqa: E402

conftest.REPLICAS = 16  # 4 GPUs x 16 replicas >= 50 pods
conftest._gen_protos(tempfile.mkdtemp(prefix="gs-bench-gen-"))


def run(pods, rounds):
    lat, plat, bursts = [], [], []
    for r in range(rounds):
        n = conftest.GpuNode(Path(tempfile.mkdtemp(prefix="gs-bench-")))
        try:
            n.start_agent()
            n.kubelet.wait(lambda: len(n.kubelet.devices) == conftest.NGPUS * conftest.REPLICAS)
            uuids = n.uuids()
            for i in range(pods):
                n.add_pod(f"p{i:03d}", conftest.assignment(uuids[i % 4], i // 4, 1024 + i, 10))
            avail = set(n.kubelet.devices)
            t0 = time.perf_counter()
            for i in range(pods):
                ids = n.kubelet.preferred(sorted(avail), 1)
                a = time.perf_counter()
                resp = n.kubelet.allocate(ids)
                lat.append(time.perf_counter() - a)
                n.kubelet.record(f"p{i:03d}", ids)
                b = time.perf_counter()
                n.kubelet.prestart(ids)
                plat.append(time.perf_counter() - b)
                assert n.limits(resp)["GPUSLICE_CONTAINER"] == f"default/p{i:03d}/main"
                avail -= set(ids)
            bursts.append(time.perf_counter() - t0)
        finally:
            n.close()
    lat.sort()
    p = lambda q: lat[min(len(lat) - 1, int(q * len(lat)))] * 1000
    print(f"Allocate latency over {len(lat)} calls: p50 {p(0.50):.2f} ms, p99 {p(0.99):.2f} ms, "
          f"max {lat[-1] * 1000:.2f} ms")
    plat.sort()
    print(f"PreStartContainer latency: p50 {plat[len(plat) // 2] * 1000:.2f} ms, "
          f"p99 {plat[min(len(plat) - 1, int(0.99 * len(plat)))] * 1000:.2f} ms")
    print(f"burst of {pods} pods (GetPreferredAllocation + Allocate + PreStartContainer each): "
          f"median {statistics.median(bursts) * 1000:.0f} ms over {rounds} rounds "
          f"(min {min(bursts) * 1000:.0f}, max {max(bursts) * 1000:.0f})")


if __name__ == "__main__":
    run(int(os.environ.get("PODS", "50")), int(os.environ.get("ROUNDS", "5")))
