"""Benchmark (not a test): filter+prioritize latency and decisions per second
through the extender's HTTP interface on a synthetic cluster of 1000 nodes
(or --nodes=N) of 8 GPUs (nodeCacheCapable: true, so each filter call carries
every node name).

usage:
  python3 bench/extender/bench_extender.py EXT [seconds] [clients]
      Python clients (one process each): per decision, build the filter body,
      POST it, decode the answer, build the prioritize body from the survivors,
      POST it, decode. Latency = the whole decision as the client sees it.
  python3 bench/extender/bench_extender.py EXT [seconds] [clients] --wrk
      wrk (C, epoll) with bench/extender/decisions.lua: one connection per
      client, alternating filter and prioritize over the five pod shapes. The
      bodies are made once beforehand (the prioritize body carries the nodes
      that extender's filter passed for that shape; nothing binds, so they do
      not change). wrk's latency is per HTTP call; a decision is two calls.
  python3 bench/extender/bench_extender.py EXT N --mix
      Exactly N decisions from one Python client, then stop: a fixed request
      mix for profiling. Set BENCH_WRAP="valgrind --tool=callgrind ..." to run
      the extender under a tool.
Options (Python clients):
  --nodes=N    cluster size (1000)
  --mtls       HTTPS with mutual TLS, as kube-scheduler calls it: throwaway CAs
               (openssl), the extender with --tls-cert/--tls-key/--client-ca and
               --status-port, each client presenting the scheduler's certificate
               over a keep-alive connection
  --slow=N     N slow clients hold connections to the verbs' port for the whole
               run (a TLS handshake without a client certificate when --mtls,
               then a request whose headers trickle in a line every 5 s)
Extra extender flags: BENCH_EXT_ARGS (default "--threads 2").
"""
import http.client
import json
import multiprocessing as mp
import os
import pathlib
import random
import re
import resource
import shlex
import socket
import ssl
import statistics
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "tests", "extender"))
import conftest  # noqa: E402
from conftest import Extender, args_names, node_obj, pod_obj  # noqa: E402
from apiserver_ext import ExtApiServerStandIn  # noqa: E402
from test_mtls import make_ca, make_cert  # noqa: E402

NODES, GPUS = 1000, 8
SHAPES = [(1, 8192, 30), (1, 4096, 10), (2, 20000, 50), (1, None, None), (4, 16384, 25)]


class BenchExtender(Extender):
    def wait_ready(self, timeout=600):  # under valgrind the first list takes minutes
        return super().wait_ready(timeout)


def make_pki(d):
    make_ca(d, "serving-ca")
    make_cert(d, "extender", "serving-ca", "serverAuth", "IP:127.0.0.1")
    make_ca(d, "scheduler-ca")
    make_cert(d, "kube-scheduler", "scheduler-ca", "clientAuth")


def tls_context(pki, client=True):
    c = ssl.create_default_context(cafile=os.path.join(pki, "serving-ca.crt"))
    if client:
        c.load_cert_chain(os.path.join(pki, "kube-scheduler.crt"),
                          os.path.join(pki, "kube-scheduler.key"))
    return c


class MtlsExtender(BenchExtender):
    """The extender with mutual TLS on the verbs; status on its own port."""
    def __init__(self, api, tmp, name, args, pki):
        self.pki, self.status_port = pki, conftest.free_port()
        args = [*args, "--tls-cert", os.path.join(pki, "extender.crt"),
                "--tls-key", os.path.join(pki, "extender.key"),
                "--client-ca", os.path.join(pki, "scheduler-ca.crt"),
                "--status-addr", "127.0.0.1", "--status-port", str(self.status_port)]
        super().__init__(api, tmp, name, args)

    def get(self, path):
        c = http.client.HTTPSConnection("127.0.0.1", self.status_port,
                                        context=tls_context(self.pki, False), timeout=10)
        try:
            c.request("GET", path)
            r = c.getresponse()
            return r.status, r.read().decode()
        finally:
            c.close()


def setup(ext_path, tmp, nodes=NODES, pki=None):
    """The API-server stand-in with the synthetic cluster, and the extender on it."""
    wrap = shlex.split(os.environ.get("BENCH_WRAP", ""))
    if wrap:
        script = tmp / "wrapped-extender"
        script.write_text("#!/bin/sh\nexec " + " ".join(shlex.quote(w) for w in wrap) +
                          f" {shlex.quote(os.path.abspath(ext_path))} \"$@\"\n")
        script.chmod(0o755)
        ext_path = str(script)
    conftest.EXTENDER = ext_path
    api = ExtApiServerStandIn()
    rng = random.Random(42)
    names = [f"gpu-{i:04d}" for i in range(nodes)]
    for n in names:
        api.put("Node", node_obj(n, ngpus=GPUS))
    # Pre-load about a third of the GPUs with running pods.
    for i in range(nodes * GPUS // 3):
        n = rng.choice(names)
        gi = rng.randrange(GPUS)
        a = {"v": 1, "node": n, "gpus": [{"uuid": f"GPU-{n}-{gi}", "memory_mib": 8192, "cores": 20}],
             "replicas": [f"GPU-{n}-{gi}::{i % 10}"]}
        p = pod_obj(f"run-{i}", 1, 8192, 20, annotations={"gpuslice.io/assignment": json.dumps(a)})
        p["spec"]["nodeName"] = n
        api.put("Pod", p)
    ext_args = shlex.split(os.environ.get("BENCH_EXT_ARGS", "--threads 2"))
    ext = (MtlsExtender(api, tmp, "bench", ext_args, pki) if pki
           else BenchExtender(api, tmp, "bench", args=ext_args))
    ext.wait_state(lambda s: len(s["nodes"]) == nodes, timeout=600)
    return api, ext, names


def hold_slow_clients(port, n, ctx, stop, held):
    """n connections that never finish their request: each sends its
    request line, then one header line every 5 s (under the server's 10 s
    idle timeout). held[0] ends as the number still open at the end."""
    socks = []
    for _ in range(n):
        try:
            s = socket.create_connection(("127.0.0.1", port), timeout=10)
            if ctx:
                s = ctx.wrap_socket(s, server_hostname="127.0.0.1")
            s.sendall(b"POST /gpuslice/filter HTTP/1.1\r\nHost: x\r\n")
            socks.append(s)
        except OSError:
            pass
    held[1] = len(socks)
    while not stop.wait(5):
        alive = []
        for s in socks:
            try:
                s.sendall(b"X-Slow: 1\r\n")
                alive.append(s)
            except OSError:
                s.close()
        socks = alive
    held[0] = len(socks)
    for s in socks:
        s.close()


def main():
    argv = [a for a in sys.argv[1:] if not a.startswith("--")]
    flags = {a.split("=")[0] for a in sys.argv[1:] if a.startswith("--")}
    opt = dict(a[2:].split("=", 1) for a in sys.argv[1:] if a.startswith("--") and "=" in a)
    tmp = pathlib.Path(tempfile.mkdtemp())
    pki = None
    if "--mtls" in flags:
        pki = str(tmp / "pki")
        os.mkdir(pki)
        make_pki(pki)
    nodes = int(opt.get("nodes", NODES))
    api, ext, names = setup(argv[0], tmp, nodes, pki)
    stop, held = threading.Event(), [0, 0]
    slow = None
    if int(opt.get("slow", 0)):
        n = int(opt["slow"])
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, max(soft, n + 1024)), hard))
        slow = threading.Thread(target=hold_slow_clients,
                                args=(ext.port, n, tls_context(pki, False) if pki else None,
                                      stop, held))
        slow.start()
        while held[1] == 0 and slow.is_alive():
            time.sleep(0.1)
    try:
        if "--mix" in flags:
            n = int(argv[1]) if len(argv) > 1 else 200
            t0 = time.time()
            lat = run_client(ext.port, names, None, 0, n)
            report(1, [lat], time.time() - t0)
            return
        secs = float(argv[1]) if len(argv) > 1 else 20
        clients = int(argv[2]) if len(argv) > 2 else 1
        if "--wrk" in flags:
            run_wrk(ext.port, names, secs, clients, tmp)
            return
        with mp.Pool(clients) as pool:
            t0 = time.time()
            parts = pool.starmap(run_client, [(ext.port, names, secs, k, None, pki)
                                              for k in range(clients)])
            wall = time.time() - t0
        report(clients, parts, wall)
        if slow:
            stop.set()
            slow.join()
            print(f"slow clients: {held[1]} opened, {held[0]} still held at the end")
        print(f"nodes={nodes} {'mutual TLS' if pki else 'plain HTTP'} "
              f"extender RSS={rss_mib(ext.proc.pid):.0f} MiB")
    finally:
        stop.set()
        ext.stop()
        api.close()


def rss_mib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


def report(clients, parts, wall):
    lat = sorted(x for p in parts for x in p)
    done = len(lat)
    q = lambda p: lat[min(len(lat) - 1, int(p * len(lat)))] * 1000  # noqa: E731
    print(f"python clients={clients} decisions={done} wall={wall:.1f}s rate={done / wall:.0f}/s "
          f"p50={q(0.5):.2f}ms p90={q(0.9):.2f}ms p99={q(0.99):.2f}ms "
          f"mean={statistics.mean(lat) * 1000:.2f}ms")


def run_client(port, names, secs, k, count=None, pki=None):
    """One kube-scheduler-like client: filter, then prioritize the survivors."""
    conn = (http.client.HTTPSConnection("127.0.0.1", port, context=tls_context(pki))
            if pki else http.client.HTTPConnection("127.0.0.1", port))

    def call(verb, body):
        conn.request("POST", "/gpuslice/" + verb, body, {"Content-Type": "application/json"})
        r = conn.getresponse()
        return json.loads(r.read())
    lat, done = [], 0
    t_end = time.time() + secs if secs is not None else None
    while (time.time() < t_end) if t_end is not None else done < count:
        g, m, c = SHAPES[done % len(SHAPES)]
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


def run_wrk(port, names, secs, clients, tmp):
    conn = http.client.HTTPConnection("127.0.0.1", port)
    bodies = tmp / "bodies"
    bodies.mkdir()
    for i, (g, m, c) in enumerate(SHAPES):
        pod = pod_obj(f"w-{i}", g, m, c)
        body_f = json.dumps(args_names(pod, names))
        conn.request("POST", "/gpuslice/filter", body_f, {"Content-Type": "application/json"})
        res = json.loads(conn.getresponse().read())
        assert res["Error"] == ""
        (bodies / f"filter-{i}.json").write_text(body_f)
        (bodies / f"prioritize-{i}.json").write_text(json.dumps(args_names(pod, res["NodeNames"])))
    conn.close()
    env = dict(os.environ, BENCH_BODIES=str(bodies), BENCH_SHAPES=str(len(SHAPES)))
    out = subprocess.run(["wrk", "-t", str(clients), "-c", str(clients), "-d", f"{secs:.0f}s",
                          "--latency", "-s", os.path.join(HERE, "decisions.lua"),
                          f"http://127.0.0.1:{port}"], env=env, check=True,
                         capture_output=True, text=True).stdout
    m = re.search(r"Requests/sec:\s+([0-9.]+)", out)
    rps = float(m.group(1))
    pct = dict(re.findall(r"^\s+(50|90|99)%\s+(\S+)$", out, re.M))
    bad = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
    print(f"wrk clients={clients} calls/s={rps:.0f} decisions/s={rps / 2:.0f} "
          f"per-call p50={pct.get('50')} p90={pct.get('90')} p99={pct.get('99')} "
          f"non-2xx={bad.group(1) if bad else 0}")


if __name__ == "__main__":
    main()
