"""Benchmark (not a test): filter+prioritize latency and decisions per second
through the extender's HTTP interface on a synthetic 1000-node, 8000-GPU
cluster (nodeCacheCapable: true, so each call carries 1000 node names).

usage: python3 bench/extender/bench_extender.py BUILD/bin/gpuslice-extender [seconds] [clients]
"""
import http.client
import json
import os
import random
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "tests", "extender"))
from conftest import Extender, args_names, node_obj, pod_obj  # noqa: E402
from apiserver_ext import ExtApiServerStandIn  # noqa: E402
import pathlib  # noqa: E402
import tempfile  # noqa: E402

NODES, GPUS = 1000, 8


def main():
    os.environ["GPUSLICE_EXTENDER"] = sys.argv[1]
    import conftest
    conftest.EXTENDER = sys.argv[1]
    secs = float(sys.argv[2]) if len(sys.argv) > 2 else 20
    api = ExtApiServerStandIn()
    rng = random.Random(42)
    names = [f"gpu-{i:04d}" for i in range(NODES)]
    for n in names:
        api.put("Node", node_obj(n, ngpus=GPUS))
    # Pre-load about a third of the GPUs with running pods.
    for i in range(NODES * GPUS // 3):
        n = rng.choice(names)
        gi = rng.randrange(GPUS)
        a = {"v": 1, "node": n, "gpus": [{"uuid": f"GPU-{n}-{gi}", "memory_mib": 8192, "cores": 20}],
             "replicas": [f"GPU-{n}-{gi}::{i % 10}"]}
        p = pod_obj(f"run-{i}", 1, 8192, 20, annotations={"gpuslice.io/assignment": json.dumps(a)})
        p["spec"]["nodeName"] = n
        api.put("Pod", p)
    tmp = pathlib.Path(tempfile.mkdtemp())
    ext = Extender(api, tmp, "bench", args=("--threads", "2"))
    ext.wait_state(lambda s: len(s["nodes"]) == NODES, timeout=60)
    clients = int(sys.argv[3]) if len(sys.argv) > 3 else 1
    import multiprocessing as mp
    with mp.Pool(clients) as pool:
        t0 = time.time()
        parts = pool.starmap(run_client, [(ext.port, names, secs, k) for k in range(clients)])
        wall = time.time() - t0
    ext.stop()
    api.close()
    lat = sorted(x for p in parts for x in p)
    done = len(lat)
    q = lambda p: lat[min(len(lat) - 1, int(p * len(lat)))] * 1000  # noqa: E731
    print(f"clients={clients} decisions={done} wall={wall:.1f}s rate={done / wall:.0f}/s "
          f"p50={q(0.5):.2f}ms p90={q(0.9):.2f}ms p99={q(0.99):.2f}ms "
          f"mean={statistics.mean(lat) * 1000:.2f}ms")


def run_client(port, names, secs, k):
    """One kube-scheduler-like client: filter, then prioritize the survivors."""
    shapes = [(1, 8192, 30), (1, 4096, 10), (2, 20000, 50), (1, None, None), (4, 16384, 25)]
    conn = http.client.HTTPConnection("127.0.0.1", port)

    def call(verb, body):
        conn.request("POST", "/gpuslice/" + verb, body, {"Content-Type": "application/json"})
        r = conn.getresponse()
        return json.loads(r.read())
    lat, t_end, done = [], time.time() + secs, 0
    while time.time() < t_end:
        g, m, c = shapes[done % len(shapes)]
        pod = pod_obj(f"b{k}-{done}", g, m, c)
        body_f = json.dumps(args_names(pod, names))
        s = time.perf_counter()
        res = call("filter", body_f)
        body_p = json.dumps(args_names(pod, res["NodeNames"]))
        pr = call("prioritize", body_p)
        lat.append(time.perf_counter() - s)
        assert res["Error"] == "" and len(pr) == len(res["NodeNames"])
        done += 1
    return lat


if __name__ == "__main__":
    main()
