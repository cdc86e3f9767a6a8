"""Fixtures for the node-agent scenarios: a simulated GPU node (simulated
NVML/CUDA from tests/simdriver), the API-server stand-in, the kubelet
stand-in and the real gpuslice-node-agent binary."""
import json
import os
import signal
import socket
import subprocess
import sys
import time

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
# shared helpers of the integration tests (ledger_ids); appended, so that
# this directory's conftest is the one `from conftest import` finds
sys.path.append(os.path.join(ROOT, "tests", "integration"))
AGENT = os.environ.get("GPUSLICE_NODE_AGENT", "")
SIMDIR = os.environ.get("GPUSLICE_SIMDRIVER_DIR", "")
NODE = "node-a"
NGPUS = 4
REPLICAS = 10


def _gen_protos(out):
    os.makedirs(out, exist_ok=True)
    subprocess.run([sys.executable, "-m", "grpc_tools.protoc", "-I", os.path.join(ROOT, "proto"),
                    f"--python_out={out}", f"--grpc_python_out={out}",
                    os.path.join(ROOT, "proto", "deviceplugin_v1beta1.proto"),
                    os.path.join(ROOT, "proto", "deviceplugin_v1beta1_service.proto"),
                    os.path.join(ROOT, "proto", "podresources_v1.proto"),
                    os.path.join(ROOT, "proto", "podresources_v1_service.proto"),
                    os.path.join(ROOT, "proto", "dra_v1.proto"),
                    os.path.join(ROOT, "proto", "dra_v1_service.proto"),
                    os.path.join(ROOT, "proto", "pluginregistration_v1.proto")], check=True)
    sys.path.insert(0, out)


@pytest.fixture(scope="session", autouse=True)
def protos(tmp_path_factory):
    _gen_protos(str(tmp_path_factory.mktemp("gen")))


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


# What the agent pins in every limits.conf, whatever the pod's env says
# (issue 27, findings 6 and 7).
PINS = {"GPUSLICE_REGION": "/var/run/gpuslice/region", "GPUSLICE_LEDGER_DIR": "/var/run/gpuslice-ledger",
        "GPUSLICE_ROSTER_DIR": "/var/run/gpuslice-roster",
        "GPUSLICE_CTX_OVERHEAD": "auto", "GPUSLICE_SHARE_WEIGHT": "100",
        "GPUSLICE_POWER_EXPONENT": "0.480", "GPUSLICE_SHARE_YIELD_US": "0"}


def assignment(uuid, k, mem_mib, cores=0, node=NODE, mode=None):
    a = {"v": 1, "node": node, "gpus": [{"uuid": uuid, "memory_mib": mem_mib, "cores": cores}],
         "replicas": [f"{uuid}::{k}"]}
    if mode:
        a["mode"] = mode
    return json.dumps(a)


class GpuNode:
    def __init__(self, tmp):
        from apiserver_standin import ApiServerStandIn
        from kubelet_standin import KubeletStandIn
        self.tmp = tmp
        self.plugin_dir = str(tmp / "dp")
        self.state_root = str(tmp / "state")
        self.events = str(tmp / "xid.events")
        self.podres_dir = str(tmp / "pod-resources")
        os.makedirs(self.plugin_dir)
        os.makedirs(self.podres_dir)
        open(self.events, "w").close()
        self.api = ApiServerStandIn()
        self.api.put("Node", {"apiVersion": "v1", "kind": "Node", "metadata": {"name": NODE}})
        self.kubelet = KubeletStandIn(self.plugin_dir, self.podres_dir)
        self.metrics_port = free_port()
        self.env = {k: v for k, v in os.environ.items() if not k.startswith(("GPUSLICE_", "CUDA_"))}
        self.env.update({
            "LD_LIBRARY_PATH": SIMDIR,
            "GPUSLICE_SIM_STATE": str(tmp / "gpu.state"),
            "GPUSLICE_SIM_DEVICES": str(NGPUS),
            "SIM_NVML_EVENTS": self.events,
            "SIM_NVML_NUMA": "0,0,1,1",
            "ASAN_OPTIONS": "detect_leaks=0",
        })
        self.proc = None
        self.agent_args = []  # extra flags for the agent (e.g. --assignment-key)
        self.log = open(tmp / "agent.log", "ab")

    def start_agent(self, extra_env=None, wait=True):
        n = len(self.kubelet.registrations)
        env = dict(self.env, **(extra_env or {}))
        self.proc = subprocess.Popen(
            [AGENT, "--node", NODE, "--plugin-dir", self.plugin_dir, "--api-server", self.api.url,
             "--state-root", self.state_root,
             "--pod-resources-socket", os.path.join(self.podres_dir, "kubelet.sock"), "--replicas", str(REPLICAS),
             "--metrics-addr", "127.0.0.1", "--metrics-port", str(self.metrics_port),
             "--recovery-seconds", "1", "--lib-host", "/opt/gpuslice/libgpuslice.so",
             "--preload-host", "/opt/gpuslice/ld.so.preload", *self.agent_args],
            env=env, stdout=self.log, stderr=self.log)
        if wait:
            self.kubelet.wait_registered(n + 1)
        return self.proc

    def failed_start(self, args):
        """Starts the agent with args that it should refuse; its exit status."""
        self.agent_args = args
        rc = self.start_agent(wait=False).wait(timeout=30)
        self.proc = None
        return rc

    def stop_agent(self):
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            rc = self.proc.wait(timeout=30)
            assert rc == 0, f"agent exited {rc} on SIGTERM; log:\n{self.logtext()}"
        self.proc = None

    def kill_agent(self):
        self.proc.kill()
        self.proc.wait()
        self.proc = None

    def logtext(self):
        self.log.flush()
        return open(self.tmp / "agent.log", "rb").read().decode(errors="replace")

    def inventory(self, timeout=10):
        end = time.time() + timeout
        while time.time() < end:
            node = self.api.get("Node", NODE)
            ann = node["metadata"].get("annotations", {}).get("gpuslice.io/gpu-inventory")
            if ann:
                return json.loads(ann)
            time.sleep(0.05)
        raise AssertionError("agent never published gpuslice.io/gpu-inventory")

    def uuids(self):
        return [g["uuid"] for g in self.inventory()["gpus"]]

    def add_pod(self, name, annotation, ns="default", phase="Pending"):
        md = {"name": name, "namespace": ns}
        if annotation is not None:
            md["annotations"] = {"gpuslice.io/assignment": annotation}
        return self.api.put("Pod", {"apiVersion": "v1", "kind": "Pod", "metadata": md,
                                    "spec": {"nodeName": NODE}, "status": {"phase": phase}})

    def limits_dir(self, resp):
        """The host directory the Allocate answer mounts at /etc/gpuslice."""
        mounts = {m.container_path: m.host_path for m in resp.mounts}
        return mounts["/etc/gpuslice"]

    def limits(self, resp, pins=False):
        """limits.conf of an allocation as a dict, or None if not written.
        The settings every file pins (PINS) are checked and left out unless
        pins is true."""
        path = os.path.join(self.limits_dir(resp), "limits.conf")
        if not os.path.exists(path):
            return None
        out = {}
        for line in open(path):
            line = line.strip()
            if line and not line.startswith("#"):
                k, v = line.split("=", 1)
                out[k] = v
        if not pins:
            for k, v in PINS.items():
                assert out.pop(k, None) == v, (k, path)
        return out

    def xid(self, gpu_index, xid):
        with open(self.events, "a") as f:
            f.write(f"{gpu_index} {xid}\n")

    def close(self):
        try:
            self.stop_agent()
        finally:
            self.kubelet.close()
            self.api.close()
            self.log.close()


@pytest.fixture
def node(tmp_path):
    if not AGENT or not os.path.exists(AGENT):
        pytest.fail("GPUSLICE_NODE_AGENT is not set (run through ctest)")
    n = GpuNode(tmp_path)
    n.start_agent()
    yield n
    n.close()
