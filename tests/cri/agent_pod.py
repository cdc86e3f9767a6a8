"""The node agent as a real container: deploy/node/Dockerfile's image run
with the DaemonSet the chart renders (deploy/manifests/70-node-agent.yaml,
generated from the chart and checked against it by tests/deploy): its
securityContext, capabilities, seccomp profile, hostPath and secret volumes,
args, env and memory limit, taken from the manifest, not copied. Only the
host paths move to private directories (the machine is shared), the
API-server stand-in's address is added, and the simulated GPU stands in for
the devices NVIDIA's runtime hook would give it. Tenants of this agent need
signed assignments (tenants.put_pod's sign=sign)."""
import contextlib
import hashlib
import hmac
import os

import yaml

from conftest import AGENT_IMAGE, ROOT, k8s
from cri_kubelet import SIM_DIR
from forward import TcpForward
from runtime import GATEWAY

MANIFEST = os.path.join(ROOT, "deploy", "manifests", "70-node-agent.yaml")
KEY = os.urandom(48)
def daemonset():
    docs = [d for d in yaml.safe_load_all(open(MANIFEST)) if d]
    return next(d for d in docs if d["kind"] == "DaemonSet")


def agent_pod_spec(node, tmp_path):
    """The DaemonSet's pod template for this node: hostPaths moved under
    tmp_path, the state directory's mount with its host path (the chart
    mounts it at its host path: Allocate hands kubelet the paths the agent
    sees), the moved paths added to its args."""
    spec = daemonset()["spec"]["template"]["spec"]
    moved = {"/var/lib/kubelet/device-plugins": node.plugin_dir,
             "/var/lib/kubelet/pod-resources": node.podres_dir,
             "/usr/local/gpuslice": str(tmp_path / "host-gpuslice"),
             "/var/lib/gpuslice": str(tmp_path / "host-state")}
    state = None
    for vol in spec["volumes"]:
        if "hostPath" in vol:
            path = vol["hostPath"]["path"]
            assert path in moved, f"the chart mounts {path}: tell this test where it goes"
            vol["hostPath"]["path"] = moved[path]
            if path == "/var/lib/gpuslice":
                state = vol["name"]
    c = spec["containers"][0]
    # The chart's image is the one conftest imported under its resolved name.
    assert "docker.io/" + c["image"] == AGENT_IMAGE, c["image"]
    for m in c["volumeMounts"]:
        if m["name"] == state:
            assert m["mountPath"] == "/var/lib/gpuslice", m
            m["mountPath"] = moved["/var/lib/gpuslice"]
    host = moved["/usr/local/gpuslice"]
    c["args"] = c.get("args", []) + [
        f"--state-root={moved['/var/lib/gpuslice']}/containers",
        # The entrypoint installs the interposer in the host directory and
        # names it by its usual path in ld.so.preload.
        f"--lib-host={host}/lib/libgpuslice.so", "--lib-container=/usr/local/gpuslice/lib/libgpuslice.so",
        f"--preload-host={host}/ld.so.preload"]
    return spec


# The simulated GPUs the agent's container sees: 4, as in tests/k8s.
AGENT_SIM_ENV = {"GPUSLICE_SIM_STATE": f"{SIM_DIR}/gpu.state", "GPUSLICE_SIM_DEVICES": str(k8s.NGPUS),
                 "SIM_NVML_EVENTS": f"{SIM_DIR}/xid.events", "SIM_NVML_NUMA": "0,0,1,1"}


def sign(uid, text):
    """gpuslice.io/assignment-signature as the extender makes it."""
    msg = b"".join(f"{len(f.encode())}:".encode() + f.encode()
                   for f in ("gpuslice assignment v1", uid, k8s.NODE, text))
    return "v1:hmac-sha256:" + hmac.new(KEY, msg, hashlib.sha256).hexdigest()


def wait_registered(node, agent, count):
    """The agent registered with the kubelet stand-in count times; its
    container's output in the message if not."""
    try:
        node.kubelet.wait_registered(count, timeout=30)
    except AssertionError as e:
        st = node.cri.status(agent.container_id)
        raise AssertionError(f"{e}; agent container state {st.state} exit {st.exit_code}, output:\n"
                             + "\n".join(node.cri.output(agent))) from None


@contextlib.contextmanager
def agent_in_container(node, tmp_path):
    """The agent's pod on node (a bare_node: the stand-ins without an
    agent), its container started and registered with the kubelet stand-in;
    the API-server stand-in relayed to it on the bridge's address."""
    spec = agent_pod_spec(node, tmp_path)
    agent = node.cri.run_pod("gpuslice-node-x", "agent-" + os.urandom(4).hex(), spec, ns="kube-system",
                             secrets={"gpuslice-assignment-key": {"key": KEY}})
    # The bridge has its address once the first sandbox is on it.
    api = TcpForward(GATEWAY, ("127.0.0.1", int(node.api.url.rsplit(":", 1)[1])))
    try:
        agent.container["args"].append(f"--api-server={api.url}")
        node.cri.start(agent, AGENT_SIM_ENV)
        wait_registered(node, agent, 1)
        yield agent
    finally:
        api.close()


def restart_agent(node, agent, registrations):
    """The agent's container killed and started again in its sandbox, as
    kubelet restarts a crashed container; it registers (the count so far)."""
    first = agent.container_id
    node.cri.kill(first)
    node.cri.wait_exited(first)
    node.cri.start(agent, AGENT_SIM_ENV)
    wait_registered(node, agent, registrations)
