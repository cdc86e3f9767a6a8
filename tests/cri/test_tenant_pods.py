"""Tenant pods in real containers (containerd + runc, CRI v1), started by
the CRI kubelet stand-in with what the node agent's Allocate and
PreStartContainer answered: the interposer arrives through the mounted
/etc/ld.so.preload, its limits through the mounted /etc/gpuslice, the
simulated driver is the image's libcuda.so.1."""
from conftest import TENANT_IMAGE, k8s

MIB = 1 << 20
LIMIT_MIB = 1000


def add_pod(node, name, limit_mib, security=None):
    spec = {"nodeName": k8s.NODE, "containers": [{"name": "main"}]}
    if security:
        spec["securityContext"] = security
    gpu = node.uuids()[0]
    md = {"name": name, "namespace": "default",
          "annotations": {"gpuslice.io/assignment": k8s.assignment(gpu, 0, limit_mib)}}
    pod = node.api.put("Pod", {"apiVersion": "v1", "kind": "Pod", "metadata": md, "spec": spec,
                               "status": {"phase": "Pending"}})
    return pod["metadata"]["uid"], spec


def tenant(*commands):
    """The container's command: gs_client reading these lines."""
    script = "".join(c + "\\n" for c in commands)
    return ["/bin/sh", "-c", f"printf '{script}' | /usr/local/bin/gs_client getproc; echo exit=$?; id"]


def results(lines):
    """gs_client's answers (one per command, ending in rc=N)."""
    return [ln for ln in lines if " rc=" in ln or ln.startswith("rc=")]


def test_tenant_sees_its_limit_and_is_refused_past_it(node):
    uid, spec = add_pod(node, "t1", LIMIT_MIB)
    pod = node.cri.run_pod("t1", uid, spec)
    cid = node.cri.start(pod, TENANT_IMAGE, tenant("init 0", "info", f"alloc {(LIMIT_MIB - 100) * MIB}",
                                                   f"alloc {200 * MIB}"))
    st = node.cri.wait_exited(cid)
    out = node.cri.output(pod)
    r = results(out)
    assert len(r) == 4, out
    assert f"total={LIMIT_MIB * MIB} " in r[1] and r[1].endswith("rc=0"), out
    assert r[2].endswith("rc=0"), out
    assert not r[3].endswith("rc=0"), f"allocated past the {LIMIT_MIB} MiB limit:\n{out}"
    assert st.exit_code == 0
