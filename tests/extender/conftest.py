"""Fixtures for the extender tests: the API-server stand-in (extended with
node list/watch and bindings) and the real gpuslice-extender binary."""
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from apiserver_ext import ExtApiServerStandIn  # noqa: E402

EXTENDER = os.environ.get("GPUSLICE_EXTENDER", "")
MIB = 81920


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def inventory(node, ngpus=4, mem=MIB, replicas=10, model="NVIDIA H100 80GB HBM3", healthy=None):
    return json.dumps({"v": 1, "driver": "550.54.15", "gpus": [
        {"index": i, "uuid": f"GPU-{node}-{i}", "model": model, "memory_mib": mem,
         "replicas": replicas, "healthy": True if healthy is None else healthy[i],
         "sm_count": 132, "numa": i // 2} for i in range(ngpus)]})


def node_obj(name, ngpus=4, **kw):
    md = {"name": name, "labels": {"kubernetes.io/hostname": name}}
    if ngpus:
        md["annotations"] = {"gpuslice.io/gpu-inventory": inventory(name, ngpus, **kw)}
    return {"apiVersion": "v1", "kind": "Node", "metadata": md,
            "spec": {"podCIDR": "10.0.0.0/24"},
            "status": {"capacity": {"cpu": "64", "memory": "512Gi", "gpuslice.io/gpu": str(ngpus * 10)},
                       "allocatable": {"cpu": "64", "memory": "512Gi"},
                       "conditions": [{"type": "Ready", "status": "True"}]}}


def pod_obj(name, gpus=1, mem=None, cores=None, ns="default", annotations=None, extra_limits=None):
    lim = {"cpu": "1", "memory": "2Gi"}
    if gpus is not None:
        lim["gpuslice.io/gpu"] = str(gpus)
    if mem is not None:
        lim["gpuslice.io/gpu-memory"] = str(mem)
    if cores is not None:
        lim["gpuslice.io/gpu-cores"] = str(cores)
    lim.update(extra_limits or {})
    md = {"name": name, "namespace": ns}
    if annotations:
        md["annotations"] = dict(annotations)
    return {"apiVersion": "v1", "kind": "Pod", "metadata": md,
            "spec": {"schedulerName": "gpuslice-scheduler",
                     "containers": [{"name": "main", "image": "nvcr.io/nvidia/pytorch:24.05-py3",
                                     "resources": {"limits": lim, "requests": dict(lim)}}]},
            "status": {"phase": "Pending", "qosClass": "Guaranteed"}}


class Extender:
    """gpuslice-extender talking to api; login: how it reaches it (its
    --api-server URL unless given, e.g. ["--kubeconfig", PATH]); ready:
    wait until it says it is."""

    def __init__(self, api, tmp, name="ext", args=(), login=None, ready=True):
        self.api, self.port = api, free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.logpath = tmp / f"{name}.log"
        self.log = open(self.logpath, "ab")
        env = dict(os.environ, ASAN_OPTIONS="detect_leaks=1")
        self.proc = subprocess.Popen([EXTENDER, *(login or ["--api-server", api.url]), "--addr", "127.0.0.1",
                                      "--port", str(self.port), *args],
                                     stdout=self.log, stderr=self.log, env=env)
        if ready:
            self.wait_ready()

    def wait_ready(self, timeout=15):
        end = time.time() + timeout
        while time.time() < end:
            assert self.proc.poll() is None, f"extender died:\n{self.logtext()}"
            try:
                if self.get("/readyz")[0] == 200:
                    return
            except OSError:
                pass
            time.sleep(0.05)
        raise AssertionError("extender never became ready:\n" + self.logtext())

    def post(self, verb, body, raw=False):
        data = body if raw else json.dumps(body).encode()
        req = urllib.request.Request(self.url + "/gpuslice/" + verb, data=data, method="POST",
                                     headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=30) as r:
                return r.status, json.loads(r.read())
        except urllib.error.HTTPError as e:
            return e.code, json.loads(e.read())

    def get(self, path):
        try:
            with urllib.request.urlopen(self.url + path, timeout=10) as r:
                return r.status, r.read().decode()
        except urllib.error.HTTPError as e:
            return e.code, e.read().decode()

    def state(self):
        return json.loads(self.get("/state")[1])

    def wait_state(self, pred, timeout=10, what="state"):
        end = time.time() + timeout
        while time.time() < end:
            s = self.state()
            try:
                if pred(s):
                    return s
            except KeyError:  # the node is not in the cache yet
                pass
            time.sleep(0.05)
        raise AssertionError(f"extender never reached {what}: {json.dumps(self.state())[:2000]}")

    def logtext(self):
        self.log.flush()
        return open(self.logpath, "rb").read().decode(errors="replace")

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            rc = self.proc.wait(timeout=20)
            assert rc == 0, f"extender exited {rc}:\n{self.logtext()}"
        self.log.close()

    def kill(self):
        self.proc.kill()
        self.proc.wait()
        self.log.close()


@pytest.fixture
def api():
    a = ExtApiServerStandIn()
    yield a
    a.close()


@pytest.fixture
def start(api, tmp_path):
    if not EXTENDER or not os.path.exists(EXTENDER):
        pytest.fail("GPUSLICE_EXTENDER is not set (run through ctest)")
    started = []

    def _start(name="ext", args=()):
        e = Extender(api, tmp_path, name, args)
        started.append(e)
        return e
    yield _start
    for e in started:
        if not e.log.closed:
            e.stop()


def args_names(pod, names):
    """ExtenderArgs as kube-scheduler sends it with nodeCacheCapable: true."""
    return {"Pod": pod, "Nodes": None, "NodeNames": list(names)}


def args_nodes(pod, nodes):
    """ExtenderArgs with nodeCacheCapable: false: full v1.NodeList."""
    return {"Pod": pod, "Nodes": {"kind": "NodeList", "apiVersion": "v1",
                                  "metadata": {"resourceVersion": "1"}, "items": list(nodes)},
            "NodeNames": None}


def bind_args(pod, node):
    md = pod["metadata"]
    return {"PodName": md["name"], "PodNamespace": md["namespace"], "PodUID": md["uid"],
            "Node": node}


def gpu_usage(state, node):
    for n in state["nodes"]:
        if n["name"] == node:
            return [(g["memory_used_mib"], g["replicas_used"]) for g in n["gpus"]]
    raise KeyError(node)
