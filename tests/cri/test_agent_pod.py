"""The node agent as a real container (agent_pod.py: the chart's rendered
DaemonSet, deploy/node/Dockerfile's image): the runtime applies the chart's
securityContext, it answers /metrics on its pod's address, serves root and
non-root tenants, and keeps serving after a restart in its sandbox."""
import urllib.request

from agent_pod import agent_in_container, restart_agent, sign
from conftest import k8s
from cri_kubelet import quantity
from tenants import run_pod, start_limited

# Capability numbers (linux/capability.h) of those a chart may add.
CAP_BITS = {"CHOWN": 0, "DAC_OVERRIDE": 1, "DAC_READ_SEARCH": 2, "FOWNER": 3, "FSETID": 4, "KILL": 5,
            "SETGID": 6, "SETUID": 7, "SETPCAP": 8, "NET_BIND_SERVICE": 10, "NET_ADMIN": 12,
            "NET_RAW": 13, "IPC_LOCK": 14, "SYS_CHROOT": 18, "SYS_PTRACE": 19, "SYS_ADMIN": 21,
            "SYS_RESOURCE": 24, "MKNOD": 27, "AUDIT_WRITE": 29, "SETFCAP": 31}
SECCOMP_FILTER = "2"  # /proc/<pid>/status Seccomp: a filter is installed


def run_tenant(node, name, gpu, security=None):
    """A tenant pod with a signed assignment on gpu: it gets its limit."""
    pod = run_pod(node, name, gpu=gpu, security=security, sign=sign)
    start_limited(node, pod)
    return pod


def container_pid(node, pod):
    """The container's first process, from its cgroup (pids controller)."""
    path = f"/sys/fs/cgroup/pids{node.cri.cgroup_parent}/pod{pod.uid}/{pod.container_id}/cgroup.procs"
    return int(open(path).read().split()[0])


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
    with agent_in_container(node, tmp_path) as agent:
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
        restart_agent(node, agent, 2)
        start_limited(node, root_pod)
        run_tenant(node, "t-after", gpus[1])
        out = node.cri.output(agent)
        assert not [ln for ln in out if "WARNING: no --assignment-key" in ln], out
