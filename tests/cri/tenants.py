"""Tenant pods for the CRI tests, one way for every test file: the pod put
in the API-server stand-in with its gpuslice.io/assignment, its sandbox run
by the CRI kubelet stand-in (which asks the device plugin's Allocate first),
and each start of its container (PreStartContainer, CreateContainer with the
Allocate answer, StartContainer) running a shell script in the tenant image.
The interposer arrives through the mounted /etc/ld.so.preload, its limits
through the mounted /etc/gpuslice, the simulated driver is the image's
libcuda.so.1."""
from conftest import TENANT_IMAGE, k8s
from cri_kubelet import SIM_DIR

MIB = 1 << 20
LIMIT_MIB = 1000
CLIENT = "/usr/local/bin/gs_client getproc"
# The simulated GPU the pod's runtime hook would give it: one device, its
# state file in the pod's simulated-GPU directory, 64 MiB per context.
SIM_ENV = {"GPUSLICE_SIM_STATE": f"{SIM_DIR}/gpu.state", "GPUSLICE_SIM_DEVICES": "1",
           "GPUSLICE_SIM_CTX_OVERHEAD": str(64 * MIB)}


def put_pod(node, name, limit_mib=LIMIT_MIB, gpu=None, replica=0, cores=0, mode=None, security=None, sign=None):
    """The pod in the API-server stand-in, pending, with its assignment on
    gpu (the node's first by default); sign(uid, text): its signature, for an
    agent that checks them. Returns (uid, spec)."""
    text = k8s.assignment(gpu or node.uuids()[0], replica, limit_mib, cores, mode=mode)
    spec = {"nodeName": k8s.NODE, "containers": [{"name": "main", "image": TENANT_IMAGE,
                                                  "resources": {"limits": {"gpuslice.io/gpu": 1}}}]}
    if security:
        spec["securityContext"] = security
    pod = node.api.put("Pod", {"apiVersion": "v1", "kind": "Pod",
                               "metadata": {"name": name, "namespace": "default",
                                            "annotations": {"gpuslice.io/assignment": text}},
                               "spec": spec, "status": {"phase": "Pending"}})
    uid = pod["metadata"]["uid"]
    if sign:
        pod["metadata"]["annotations"]["gpuslice.io/assignment-signature"] = sign(uid, text)
        node.api.put("Pod", pod)
    return uid, spec


def run_pod(node, name, sim_dir=None, **assignment):
    """put_pod, then the pod's sandbox (Allocate on the way); sim_dir: a
    simulated GPU shared with other pods instead of one of its own."""
    uid, spec = put_pod(node, name, **assignment)
    return node.cri.run_pod(name, uid, spec, sim_dir=sim_dir)


def start_script(node, pod, script, env=None):
    """One start of the pod's container, running script with /bin/sh; env
    is added to SIM_ENV. Returns the container's id."""
    pod.container["command"] = ["/bin/sh", "-c", script]
    return node.cri.start(pod, {**SIM_ENV, **(env or {})})


def start_tenant(node, pod, commands):
    """One start of the pod's container as gs_client reading these lines,
    then printing its exit status and its ids."""
    lines = "".join(c + "\\n" for c in commands)
    return start_script(node, pod, f"printf '{lines}' | {CLIENT}; echo exit=$?; id")


def tenant_output(node, pod):
    """A start_tenant container's output once it has exited, to its ids: the
    exited container's CRI log once read empty in a loaded CI run, past
    wait_exited's wait for it to settle, so the last line is waited for."""
    return node.cri.wait_output(pod, lambda lines: any(ln.startswith("uid=") for ln in lines), timeout=30)


def results(lines):
    """gs_client's answers (one per command, ending in rc=N)."""
    return [ln for ln in lines if " rc=" in ln or ln.startswith("rc=")]


def start_limited(node, pod):
    """One start of the tenant's container: it sees its limit, gets most of
    it and is refused past it."""
    cid = start_tenant(node, pod, ("init 0", "info", f"alloc {(LIMIT_MIB - 100) * MIB}", f"alloc {200 * MIB}"))
    st = node.cri.wait_exited(cid)
    out = tenant_output(node, pod)
    r = results(out)
    assert len(r) == 4 and r[0].endswith("rc=0") and r[2].endswith("rc=0"), (st.exit_code, st.reason, out)
    assert f"total={LIMIT_MIB * MIB} " in r[1], out
    assert not r[3].endswith("rc=0"), f"allocated past the {LIMIT_MIB} MiB limit:\n{out}"
    return out
