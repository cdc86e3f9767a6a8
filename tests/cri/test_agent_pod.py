"""The node agent as a real container: deploy/node/Dockerfile's image run
with the DaemonSet the chart renders (deploy/manifests/70-node-agent.yaml,
generated from the chart and checked against it by tests/deploy): its
securityContext, capabilities, seccomp profile, hostPath and secret volumes,
args, env and memory limit, taken from the manifest, not copied. Only the
host paths move to private directories (the machine is shared), the
API-server stand-in's address is added, and the simulated GPU stands in for
the devices NVIDIA's runtime hook would give it."""
import hashlib
import hmac
import os
import urllib.request

import yaml

from conftest import AGENT_IMAGE, ROOT, k8s
from cri_kubelet import SIM_DIR, quantity
from forward import TcpForward
from runtime import GATEWAY
from test_tenant_pods import LIMIT_MIB, MIB, TENANT_IMAGE, results, start_tenant

MANIFEST = os.path.join(ROOT, "deploy", "manifests", "70-node-agent.yaml")
KEY = os.urandom(48)
# Capability numbers (linux/capability.h) of those a chart may add.
CAP_BITS = {"CHOWN": 0, "DAC_OVERRIDE": 1, "DAC_READ_SEARCH": 2, "FOWNER": 3, "FSETID": 4, "KILL": 5,
            "SETGID": 6, "SETUID": 7, "SETPCAP": 8, "NET_BIND_SERVICE": 10, "NET_ADMIN": 12,
            "NET_RAW": 13, "IPC_LOCK": 14, "SYS_CHROOT": 18, "SYS_PTRACE": 19, "SYS_ADMIN": 21,
            "SYS_RESOURCE": 24, "MKNOD": 27, "AUDIT_WRITE": 29, "SETFCAP": 31}
SECCOMP_FILTER = "2"  # /proc/<pid>/status Seccomp: a filter is installed


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


def add_tenant(node, name, gpu, security=None):
    text = k8s.assignment(gpu, 0, LIMIT_MIB)
    spec = {"nodeName": k8s.NODE, "containers": [{"name": "main", "image": TENANT_IMAGE,
                                                  "resources": {"limits": {"gpuslice.io/gpu": 1}}}]}
    if security:
        spec["securityContext"] = security
    pod = node.api.put("Pod", {"apiVersion": "v1", "kind": "Pod",
                               "metadata": {"name": name, "namespace": "default",
                                            "annotations": {"gpuslice.io/assignment": text}},
                               "spec": spec, "status": {"phase": "Pending"}})
    uid = pod["metadata"]["uid"]
    pod["metadata"]["annotations"]["gpuslice.io/assignment-signature"] = sign(uid, text)
    node.api.put("Pod", pod)
    return uid, spec


def run_tenant(node, name, gpu, security=None):
    uid, spec = add_tenant(node, name, gpu, security)
    pod = node.cri.run_pod(name, uid, spec)
    start_limited(node, pod)
    return pod


def start_limited(node, pod):
    """One start of the tenant's container: it gets its limit, not more."""
    cid = start_tenant(node, pod, ("init 0", "info", f"alloc {(LIMIT_MIB - 100) * MIB}", f"alloc {200 * MIB}"))
    node.cri.wait_exited(cid)
    out = node.cri.output(pod)
    r = results(out)
    assert len(r) == 4 and r[0].endswith("rc=0") and r[2].endswith("rc=0"), out
    assert f"total={LIMIT_MIB * MIB} " in r[1], out
    assert not r[3].endswith("rc=0"), f"allocated past the {LIMIT_MIB} MiB limit:\n{out}"


def container_pid(node, pod):
    """The container's first process, from its cgroup (pids controller)."""
    path = f"/sys/fs/cgroup/pids{node.cri.cgroup_parent}/pod{pod.uid}/{pod.container_id}/cgroup.procs"
    return int(open(path).read().split()[0])


def wait_registered(node, agent, count):
    """The agent registered with the kubelet stand-in count times; its
    container's output in the message if not."""
    try:
        node.kubelet.wait_registered(count, timeout=30)
    except AssertionError as e:
        st = node.cri.status(agent.container_id)
        raise AssertionError(f"{e}; agent container state {st.state} exit {st.exit_code}, output:\n"
                             + "\n".join(node.cri.output(agent))) from None


def root_mount_options(pid):
    """The options of the process's root mount (its /proc/<pid>/mountinfo)."""
    opts = []
    for line in open(f"/proc/{pid}/mountinfo"):
        f = line.split()
        if f[4] == "/":
            opts = f[5].split(",")
    return opts


def proc_status(pid):
    return dict(line.split(":\t", 1) for line in open(f"/proc/{pid}/status").read().splitlines() if ":\t" in line)


def test_agent_runs_as_the_chart_says_and_serves_real_tenant_pods(bare_node, runtime, tmp_path):
    node = bare_node
    spec = agent_pod_spec(node, tmp_path)
    agent = node.cri.run_pod("gpuslice-node-x", "agent-" + os.urandom(4).hex(), spec, ns="kube-system",
                             secrets={"gpuslice-assignment-key": {"key": KEY}})
    # The bridge has its address once the first sandbox is on it.
    api = TcpForward(GATEWAY, ("127.0.0.1", int(node.api.url.rsplit(":", 1)[1])))
    try:
        agent.container["args"].append(f"--api-server={api.url}")
        node.cri.start(agent, AGENT_SIM_ENV)
        wait_registered(node, agent, 1)
        # The runtime applied the chart's securityContext to the agent.
        caps = agent.container["securityContext"]["capabilities"]
        assert caps["drop"] == ["ALL"], caps
        want = sum(1 << CAP_BITS[c] for c in caps["add"])
        pid = container_pid(node, agent)
        st = proc_status(pid)
        assert int(st["CapEff"], 16) == want and int(st["CapBnd"], 16) == want, st
        assert st["NoNewPrivs"].strip() == "1" and st["Seccomp"].strip() == SECCOMP_FILTER, st
        assert st["Uid"].split()[0] == "0"
        assert "ro" in root_mount_options(pid)
        mem = open(f"/sys/fs/cgroup/memory{node.cri.cgroup_parent}/pod{agent.uid}/{agent.container_id}/"
                   "memory.limit_in_bytes").read()
        assert int(mem) == quantity(agent.container["resources"]["limits"]["memory"])
        gpus = node.uuids()
        assert len(gpus) == k8s.NGPUS
        # Its metrics port, in the pod's network, from this machine.
        port = next(p["containerPort"] for p in agent.container["ports"] if p["name"] == "metrics")
        direct = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # never through a proxy
        with direct.open(f"http://{runtime.pod_ip(agent.sandbox_id)}:{port}/metrics", timeout=10) as r:
            assert r.status == 200 and "gpuslice_gpu_memory_total_bytes" in r.read().decode()
        root_pod = run_tenant(node, "t-root", gpus[0])
        # A non-root pod: the agent gives its region to the pod's uid and
        # fsGroup, with the capabilities the chart grants it.
        run_tenant(node, "t-nonroot", gpus[2], {"runAsUser": 1000, "runAsGroup": 1000, "fsGroup": 3000})
        # The agent's container killed and restarted in its sandbox: it
        # registers again and keeps serving (its state is on the host): a
        # tenant it served before restarts with its limit, a new one gets its.
        first = agent.container_id
        node.cri.kill(first)
        node.cri.wait_exited(first)
        node.cri.start(agent, AGENT_SIM_ENV)
        wait_registered(node, agent, 2)
        start_limited(node, root_pod)
        run_tenant(node, "t-after", gpus[1])
        out = node.cri.output(agent)
        assert not [ln for ln in out if "WARNING: no --assignment-key" in ln], out
    finally:
        api.close()
