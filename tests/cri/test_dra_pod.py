"""A DRA claim enforced in a real container (containerd 1.6 + runc, CRI
v1): the real node agent in DRA mode (--dra) publishes its ResourceSlice,
the test allocator (tests/k8s/dra_allocator.py) allocates a claim made from
the chart's gpuslice-4gi-30 template on it, the DRA kubelet stand-in
prepares it, and the pod's container gets the claim's CDI edits.

Debian's containerd 1.6 applies no CDI devices (CDI came in containerd 1.7),
so the CRI kubelet stand-in does what a CDI-aware runtime does with them:
it puts the CDI spec's env and mounts (dra_kubelet_standin.cdi_edits) into
the container's CRI config, read-only where the spec says "ro". From there
everything is real: runc's bind mounts of the interposer, /etc/ld.so.preload,
the limits directory, the state directory and the GPU's ledger and roster,
and the interposer arriving only through them."""
import os
import time
import types
import urllib.request

import pytest
import yaml

from conftest import LIB_CONTAINER, ROOT, TENANT_IMAGE, _remove_pods, k8s
from dra_allocator import allocate, claim_from_template
from tenants import MIB, results, start_tenant

DRIVER = "gpu.gpuslice.io"


def chart_objects():
    with open(os.path.join(ROOT, "deploy", "dra", "gpuslice-dra.yaml")) as f:
        docs = [d for d in yaml.safe_load_all(f) if d]
    return ({d["metadata"]["name"]: d for d in docs if d["kind"] == "DeviceClass"},
            {d["metadata"]["name"]: d for d in docs if d["kind"] == "ResourceClaimTemplate"})


@pytest.fixture
def dra_node(runtime, tmp_path):
    from dra_kubelet_standin import DraKubeletStandIn
    n = k8s.GpuNode(tmp_path)
    preload = tmp_path / "ld.so.preload"
    preload.write_text(LIB_CONTAINER + "\n")
    n.cdi = str(tmp_path / "cdi")
    n.agent_args = ["--lib-host", os.environ["GPUSLICE_LIB"], "--lib-container", LIB_CONTAINER,
                    "--preload-host", str(preload), "--dra", "--dra-registry-dir", str(tmp_path / "registry"),
                    "--dra-plugins-dir", str(tmp_path / "plugins"), "--cdi-dir", n.cdi]
    n.dra = DraKubeletStandIn(str(tmp_path / "registry"))
    try:
        n.start_agent(wait=False)
        n.dra.wait_registered(1)
        n.cri = runtime.cri
        n.cri.devices = None
        yield n
    finally:
        try:
            _remove_pods(n)
        finally:
            n.dra.close()


def allocated_claim(n, name, template):
    end = time.time() + 10
    while not (s := n.api.get("ResourceSlice", f"{k8s.NODE}-{DRIVER}")) and time.time() < end:
        time.sleep(0.05)
    classes, templates = chart_objects()
    c = n.api.put("ResourceClaim", claim_from_template(templates[template], name))
    return n.api.put("ResourceClaim", allocate(c, [s], classes, [], node=k8s.NODE))


def test_claim_is_enforced_in_a_real_container(dra_node):
    from dra_kubelet_standin import cdi_edits
    n = dra_node
    claim = allocated_claim(n, "train-gpu", "gpuslice-4gi-30")
    uid = claim["metadata"]["uid"]
    ans = n.dra.prepare(DRIVER, [claim])[uid]
    assert ans.error == "", ans.error
    env, mounts, foreign = cdi_edits(n.cdi, [i for d in ans.devices for i in d.cdi_device_ids])
    assert foreign == []
    # The pod: no extended resource, its container uses the claim.
    spec = {"nodeName": k8s.NODE, "containers": [{"name": "main", "image": TENANT_IMAGE}],
            "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "gpuslice-4gi-30"}]}
    pod = n.cri.run_pod("train", "7c0e7d0e-0000-4000-8000-00000000d4a0", spec)
    pod.alloc = types.SimpleNamespace(
        envs=env, devices=[], annotations={},
        mounts=[types.SimpleNamespace(container_path=m["containerPath"], host_path=m["hostPath"],
                                      read_only="ro" in m.get("options", [])) for m in mounts])
    limit = 4096
    cid = start_tenant(n, pod, ("init 0", "info", f"alloc {(limit - 100) * MIB}", f"alloc {200 * MIB}"))
    st = n.cri.wait_exited(cid)
    out = n.cri.output(pod)
    r = results(out)
    assert len(r) == 4 and r[0].endswith("rc=0") and r[2].endswith("rc=0"), out
    assert f"total={limit * MIB} " in r[1], out
    assert not r[3].endswith("rc=0"), f"allocated past the claim's {limit} MiB:\n{out}"
    assert st.exit_code == 0
    text = urllib.request.urlopen(f"http://127.0.0.1:{n.metrics_port}/metrics", timeout=10).read().decode()
    lab = f'container="default/train-gpu/dra",pod_uid="{uid}"'
    assert f"gpuslice_container_memory_limit_bytes{{{lab}," in text and \
        f"gpuslice_container_compute_limit_percent{{{lab}," in text, text
    line = next(ln for ln in text.splitlines() if ln.startswith(f"gpuslice_container_compute_limit_percent{{{lab},"))
    assert line.endswith(" 30"), line
    # The pod gone, kubelet unprepares the claim: spec and state removed.
    for sb in n.cri.sandboxes():
        n.cri.stop_sandbox(sb.id)
        n.cri.remove_sandbox(sb.id)
    assert n.dra.unprepare(DRIVER, [claim])[uid].error == ""
    assert not os.path.exists(os.path.join(n.cdi, f"gpuslice-{uid}.json"))
