"""The node agent as a DRA kubelet plugin (--dra; docs/dra.md), end to end
against stand-ins: kubelet's plugin watcher and DRA manager
(DraKubeletStandIn, over the real gRPC sockets, messages from our re-typed
protos), the API server (ApiServerStandIn) and kube-scheduler's allocation
(dra_allocator, the consumable-capacity rules). A claim made from the
chart's example template goes from the node's ResourceSlice through the
allocator and NodePrepareResources to a tenant on the simulated GPU that
sees its memory limit and cap; hostile claims are refused with a clear
error; a plugin killed in the middle of a claim comes back to the same
answer.

The CDI edits are applied by the stand-in (dra_kubelet_standin.cdi_edits
and test_node_agent.tenant: mounts under /run bound for real in a private
mount namespace, the rest mapped to their host paths, the interposer by
LD_PRELOAD): Debian's containerd 1.6 has no CDI, so tests/cri cannot run
this through a real runtime."""
import json
import os
import shutil
import threading
import time
import types

import pytest
import yaml

from conftest import NODE, GpuNode
from dra_allocator import Unschedulable, allocate, claim_from_template, qty
from test_node_agent import _scrape, tenant

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
DRIVER = "gpu.gpuslice.io"
SLICE = f"{NODE}-{DRIVER}"
MIB = 1 << 20
OBJECTS = os.environ.get("GS_DRA_OBJECTS", "")  # saved for tests/deploy/test_dra_schemas.py
if OBJECTS:
    # This run's objects only; the bodies the agent sends the API stand-in
    # (ResourceSlices) go there too, not among the device-plugin tests' ones.
    shutil.rmtree(OBJECTS, ignore_errors=True)
    os.environ["GS_STANDIN_BODIES"] = os.path.join(OBJECTS, "api-bodies")
else:
    os.environ.pop("GS_STANDIN_BODIES", None)


def chart_objects():
    with open(os.path.join(ROOT, "deploy", "dra", "gpuslice-dra.yaml")) as f:
        docs = [d for d in yaml.safe_load_all(f) if d]
    classes = {d["metadata"]["name"]: d for d in docs if d["kind"] == "DeviceClass"}
    templates = {d["metadata"]["name"]: d for d in docs if d["kind"] == "ResourceClaimTemplate"}
    return classes, templates


def save(name, obj):
    if OBJECTS:
        os.makedirs(OBJECTS, exist_ok=True)
        with open(os.path.join(OBJECTS, name), "w") as f:
            json.dump(obj, f, indent=1)


class DraNode:
    def __init__(self, tmp):
        from dra_kubelet_standin import DraKubeletStandIn
        self.node = GpuNode(tmp)
        self.registry = str(tmp / "plugins_registry")
        self.plugins = str(tmp / "plugins")
        self.cdi = str(tmp / "cdi")
        self.node.agent_args = ["--dra", "--dra-registry-dir", self.registry, "--dra-plugins-dir", self.plugins,
                                "--cdi-dir", self.cdi]
        self.kubelet = DraKubeletStandIn(self.registry)
        self.claims = []  # allocated, as the scheduler's cache has them
        self.n = 0

    def start(self, extra_env=None):
        self.n += 1
        self.node.start_agent(extra_env, wait=False)
        return self.kubelet.wait_registered(self.n)

    def slice(self, timeout=10, gen_above=0):
        end = time.time() + timeout
        while time.time() < end:
            s = self.node.api.get("ResourceSlice", SLICE)
            if s and s["spec"]["pool"]["generation"] > gen_above:
                return s
            time.sleep(0.05)
        raise AssertionError(f"no ResourceSlice {SLICE} above generation {gen_above}")

    def claim(self, name, template="gpuslice-4gi-30", requests=None):
        """A claim from a chart template (or with these capacity requests),
        allocated by the test allocator and stored in the API stand-in."""
        classes, templates = chart_objects()
        c = claim_from_template(templates[template], name)
        if requests is not None:
            c["spec"]["devices"]["requests"][0]["exactly"]["capacity"] = {"requests": requests}
        c = self.node.api.put("ResourceClaim", c)
        c = allocate(c, [self.slice()], classes, self.claims, node=NODE)
        self.claims.append(c)
        return self.node.api.put("ResourceClaim", c)

    def hostile(self, name, results, uid=None):
        """A claim whose allocation says what the test wants (the scheduler
        would never write it; a tenant with write access to claims might)."""
        c = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
             "metadata": {"name": name, "namespace": "default"},
             "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": DRIVER}}]}},
             "status": {"allocation": {"devices": {"results": results}}}}
        if results is None:
            del c["status"]
        c = self.node.api.put("ResourceClaim", c)
        if uid:
            c["metadata"]["uid"] = uid
        return c

    def prepare(self, *claims):
        return self.kubelet.prepare(DRIVER, list(claims))

    def unprepare(self, *claims):
        return self.kubelet.unprepare(DRIVER, list(claims))

    def close(self):
        try:
            self.node.close()
        finally:
            self.kubelet.close()


@pytest.fixture
def dra(tmp_path):
    d = DraNode(tmp_path)
    d.start()
    yield d
    d.close()


def result(device="gpu-0", memory="4Gi", cores="30", pool=NODE, driver=DRIVER, **extra):
    r = {"request": "gpu", "driver": driver, "pool": pool, "device": device,
         "consumedCapacity": {k: v for k, v in (("memory", memory), ("cores", cores)) if v is not None}}
    r.update(extra)
    return r


def limits_of(dra, answer):
    """limits.conf of a prepared claim, through its CDI spec's mount."""
    env, mounts, _ = cdi_of(dra, answer)
    host = {m["containerPath"]: m["hostPath"] for m in mounts}["/etc/gpuslice"]
    out = {}
    for line in open(os.path.join(host, "limits.conf")):
        if line.strip() and not line.startswith("#"):
            k, v = line.strip().split("=", 1)
            out[k] = v
    return out


def cdi_of(dra, answer):
    from dra_kubelet_standin import cdi_edits
    ids = [i for d in answer.devices for i in d.cdi_device_ids]
    return cdi_edits(dra.cdi, ids)


def test_registers_through_the_plugin_watcher(dra):
    info = dra.kubelet.registrations[0]
    assert info.type == "DRAPlugin" and info.name == DRIVER
    assert list(info.supported_versions) == ["v1.DRAPlugin"]
    assert info.endpoint == os.path.join(dra.plugins, DRIVER, "dra.sock")


def test_resource_slice_publishes_each_gpu_with_capacity(dra):
    s = dra.slice()
    save("resourceslice.json", s)
    spec = s["spec"]
    assert spec["driver"] == DRIVER and spec["nodeName"] == NODE and spec["pool"]["name"] == NODE
    assert spec["pool"]["resourceSliceCount"] == 1
    devs = {d["name"]: d for d in spec["devices"]}
    assert sorted(devs) == ["gpu-0", "gpu-1", "gpu-2", "gpu-3"]
    for i, (name, d) in enumerate(sorted(devs.items())):
        assert d["allowMultipleAllocations"] is True
        a = d["attributes"]
        assert a["uuid"]["string"].startswith("GPU-") and a["index"]["int"] == i
        assert a["productName"]["string"] and a["computeCapability"]["version"] == "9.0.0"
        assert a["numaNode"]["int"] == [0, 0, 1, 1][i]
        assert qty(d["capacity"]["memory"]["value"]) > 0
        assert d["capacity"]["memory"]["requestPolicy"] == {
            "default": "1024Mi", "validRange": {"min": "1Mi", "step": "1Mi"}}
        assert d["capacity"]["cores"] == {"value": "100", "requestPolicy": {
            "default": "0", "validRange": {"min": "0", "max": "100", "step": "1"}}}


def test_slice_follows_gpu_health(dra):
    s = dra.slice()
    gen = s["spec"]["pool"]["generation"]
    dra.node.xid(1, 79)  # a critical XID on GPU 1
    s = dra.slice(gen_above=gen)
    assert [d["name"] for d in s["spec"]["devices"]] == ["gpu-0", "gpu-2", "gpu-3"]
    save("resourceslice-unhealthy.json", s)
    # healthy again after --recovery-seconds (1) without a critical XID
    s = dra.slice(gen_above=s["spec"]["pool"]["generation"])
    assert [d["name"] for d in s["spec"]["devices"]] == ["gpu-0", "gpu-1", "gpu-2", "gpu-3"]


def test_claim_from_template_is_enforced_in_the_tenant(dra):
    c = dra.claim("train-0-gpu")
    save("resourceclaim-allocated.json", c)
    r = c["status"]["allocation"]["devices"]["results"][0]
    assert (r["device"], r["consumedCapacity"]) == ("gpu-0", {"memory": "4Gi", "cores": "30"})
    uid = c["metadata"]["uid"]
    got = dra.prepare(c)
    ans = got[uid]
    assert ans.error == ""
    assert [(d.pool_name, d.device_name, list(d.request_names), list(d.cdi_device_ids)) for d in ans.devices] == \
        [(NODE, "gpu-0", ["gpu"], [f"gpuslice.io/gpu={uid}"])]
    spec_file = os.path.join(dra.cdi, f"gpuslice-{uid}.json")
    save("cdi-spec.json", json.load(open(spec_file)))
    lim = limits_of(dra, ans)
    assert lim["GPUSLICE_MEMORY_LIMIT_0"] == "4096Mi" and lim["GPUSLICE_CORES_0"] == "30"
    assert lim["GPUSLICE_CONTAINER"] == "default/train-0-gpu/dra"
    env, mounts, foreign = cdi_of(dra, ans)
    assert foreign == []
    cpaths = {m["containerPath"]: m for m in mounts}
    assert cpaths["/etc/gpuslice"]["options"][0] == "ro" and cpaths["/var/run/gpuslice"]["options"][0] == "rw"
    assert cpaths["/etc/ld.so.preload"]["hostPath"] == "/opt/gpuslice/ld.so.preload"
    gpu = dra.slice()["spec"]["devices"][0]["attributes"]["uuid"]["string"]
    assert f"/var/run/gpuslice-ledger/{gpu}.ledger" in cpaths
    assert env["NVIDIA_VISIBLE_DEVICES"] == gpu
    # The tenant: the CDI env and mounts, the interposer, the simulated GPU.
    resp = types.SimpleNamespace(envs=env, mounts=[types.SimpleNamespace(container_path=m["containerPath"],
                                                                         host_path=m["hostPath"]) for m in mounts])
    t = tenant(dra.node, resp, {"GPUSLICE_SIM_CTX_OVERHEAD": str(64 * MIB)})
    try:
        def do(line):
            t.stdin.write(line + "\n")
            t.stdin.flush()
            return t.stdout.readline()
        out = [do("init 0"), do("info")]
        assert "rc=0" in out[0] and f"total={4096 * MIB} " in out[1], (out, t.stderr.read())
        free = int(out[1].split("free=")[1].split()[0])  # the limit less the context's charge
        out += [do(f"alloc {free - 64 * MIB}"), do(f"alloc {128 * MIB}")]
        assert "rc=0" in out[2], out
        assert "rc=0" not in out[3], f"allocated past the claim's 4 GiB: {out}"
        text = _scrape(dra.node)
        lab = f'container="default/train-0-gpu/dra",pod_uid="{uid}",gpu="{gpu}"'
        assert f"gpuslice_container_memory_limit_bytes{{{lab}}} {4096 * MIB}" in text, text
        assert f"gpuslice_container_compute_limit_percent{{{lab}}} 30" in text, text
    finally:
        t.stdin.close()
        t.wait(timeout=30)
    # Unprepare removes the spec and the state; twice is fine.
    assert dra.unprepare(c)[uid].error == ""
    assert not os.path.exists(spec_file)
    assert not os.path.exists(cpaths["/etc/gpuslice"]["hostPath"])
    assert dra.unprepare(c)[uid].error == ""


def test_prepare_is_idempotent_and_keeps_the_region(dra):
    c = dra.claim("idem")
    uid = c["metadata"]["uid"]
    a1 = dra.prepare(c)[uid]
    _, mounts, _ = cdi_of(dra, a1)
    region = os.path.join({m["containerPath"]: m["hostPath"] for m in mounts}["/var/run/gpuslice"], "region")
    ino = os.stat(region).st_ino
    a2 = dra.prepare(c)[uid]
    assert a2 == a1 and os.stat(region).st_ino == ino, "a retried prepare must not reset a claim in use"


def test_allocator_and_driver_share_a_gpu_by_capacity(dra):
    """Claims fill GPU 0 by memory and cores, then spill to GPU 1; each is
    prepared with its own limits; the scheduler's count and the node's agree."""
    cs = [dra.claim(f"c{i}", requests={"memory": "30Gi", "cores": "40"}) for i in range(4)]
    devs = [c["status"]["allocation"]["devices"]["results"][0]["device"] for c in cs]
    assert devs == ["gpu-0", "gpu-0", "gpu-1", "gpu-1"], devs  # cores 40 + 40 + 40 > 100
    got = dra.prepare(*cs)
    for c in cs:
        a = got[c["metadata"]["uid"]]
        assert a.error == "" and limits_of(dra, a)["GPUSLICE_MEMORY_LIMIT_0"] == "30720Mi"
    with pytest.raises(Unschedulable):
        dra.claim("too-big", requests={"memory": "1Ti"})
    small = dra.claim("no-cores", template="gpuslice-1gi")
    r = small["status"]["allocation"]["devices"]["results"][0]
    assert r["consumedCapacity"] == {"memory": "1Gi", "cores": "0"}
    lim = limits_of(dra, dra.prepare(small)[small["metadata"]["uid"]])
    assert lim["GPUSLICE_MEMORY_LIMIT_0"] == "1024Mi" and "GPUSLICE_CORES_0" not in lim


def test_share_mode_from_the_claims_configuration(dra):
    """The chart's gpuslice-4gi-share template: its opaque configuration
    (mode share) reaches the driver through the allocation, and the claim's
    container runs in share mode with its memory limit."""
    c = dra.claim("serve", template="gpuslice-4gi-share")
    save("resourceclaim-share.json", c)
    assert c["status"]["allocation"]["devices"]["config"][0]["source"] == "FromClaim"
    lim = limits_of(dra, dra.prepare(c)[c["metadata"]["uid"]])
    assert lim["GPUSLICE_COMPUTE_MODE"] == "share" and lim["GPUSLICE_MEMORY_LIMIT_0"] == "4096Mi"
    cap = dra.claim("train", template="gpuslice-4gi-30")
    assert limits_of(dra, dra.prepare(cap)[cap["metadata"]["uid"]])["GPUSLICE_COMPUTE_MODE"] == "cap"


@pytest.mark.parametrize("params,why", [
    ({"apiVersion": "gpu.gpuslice.io/v1", "kind": "GpuConfig", "mode": "turbo"}, "exactly apiVersion, kind and mode"),
    ({"apiVersion": "gpu.gpuslice.io/v1", "kind": "GpuConfig", "mode": "share", "weight": 10000},
     "exactly apiVersion, kind and mode"),
    ({"mode": "share"}, "not apiVersion gpu.gpuslice.io/v1"),
])
def test_hostile_configurations_are_refused(dra, params, why):
    c = dra.hostile("badcfg", [result()])
    c["status"]["allocation"]["devices"]["config"] = [
        {"source": "FromClaim", "opaque": {"driver": DRIVER, "parameters": params}}]
    c = dra.node.api.put("ResourceClaim", c)
    ans = dra.prepare(c)[c["metadata"]["uid"]]
    assert why in ans.error and "config[0]" in ans.error, ans.error


HOSTILE = {
    "memory beyond the device": ([result(memory="1000Ti")], "more than the device has"),
    "negative memory": ([result(memory="-4Gi")], "negative"),
    "huge memory": ([result(memory="99999999999999999999")], "too large"),
    "memory not in MiB": ([result(memory="1000")], "whole number of MiB"),
    "fractional cores": ([result(cores="30.5")], "whole number"),
    "cores beyond 100": ([result(cores="101")], "more than the device has"),
    "no memory": ([result(memory=None)], "consumed no memory"),
    "no consumedCapacity": ([{"request": "gpu", "driver": DRIVER, "pool": NODE, "device": "gpu-0"}],
                            "no consumedCapacity"),
    "unknown capacity": ([result(consumedCapacity={"memory": "1Gi", "tflops": "5"})], "no capacity of that name"),
    "unknown device": ([result(device="gpu-9")], "not one of this node's"),
    "another node's pool": ([result(pool="node-b")], "is not this node's"),
    "another driver only": ([result(driver="gpu.nvidia.com")], "no device of driver"),
    "sum beyond the device": ([result(memory="60Gi"), result(memory="60Gi")], "more than the GPU has"),
    "cores sum beyond 100": ([result(cores="60", memory="1Gi"), result(cores="60", memory="1Gi")],
                             "more than the GPU has"),
    "admin access": ([result(adminAccess=True)], "adminAccess"),
    "not allocated": (None, "not allocated"),
    "not a quantity": ([result(memory=4096)], "not a quantity string"),
}


@pytest.mark.parametrize("case", sorted(HOSTILE))
def test_hostile_claims_are_refused_with_a_clear_error(dra, case):
    results, why = HOSTILE[case]
    c = dra.hostile("bad", results)
    ans = dra.prepare(c)[c["metadata"]["uid"]]
    assert why in ans.error and "default/bad" in ans.error, ans.error
    assert list(ans.devices) == []
    assert not os.path.isdir(dra.cdi) or os.listdir(dra.cdi) == []
    assert dra.node.proc.poll() is None
    # the driver still prepares a good claim
    good = dra.claim("good")
    assert dra.prepare(good)[good["metadata"]["uid"]].error == ""


def test_claims_that_are_not_there_or_not_these(dra):
    c = dra.hostile("gone", [result()])
    other = dict(c, metadata=dict(c["metadata"], uid="0b5c3d1e-0000-4000-8000-000000000000"))
    assert ", not 0b5c3d1e" in dra.prepare(other)[other["metadata"]["uid"]].error
    missing = dict(c, metadata=dict(c["metadata"], name="nobody"))
    assert "is not there" in dra.prepare(missing)[c["metadata"]["uid"]].error
    bad = dict(c, metadata=dict(c["metadata"], uid="../../etc"))
    assert "not a valid namespace, name and uid" in dra.prepare(bad)["../../etc"].error
    assert "not a valid" in dra.unprepare(bad)["../../etc"].error


def test_a_plugin_restarted_mid_claim_comes_back_to_the_same_answer(tmp_path):
    d = DraNode(tmp_path)
    try:
        d.start({"GPUSLICE_TEST_ALLOCATE_DELAY_MS": "3000"})
        c = d.claim("mid")
        uid = c["metadata"]["uid"]
        failed = []
        t = threading.Thread(target=lambda: failed.append(_prepare_fails(d, c)))
        t.start()
        deadline = time.time() + 10  # the claim's state is laid out, its CDI spec not yet written
        lim = os.path.join(d.node.state_root, ".limits")
        while time.time() < deadline and not any(
                os.path.exists(os.path.join(lim, k, "owner")) for k in os.listdir(lim)):
            time.sleep(0.02)
        d.node.kill_agent()
        t.join()
        assert failed == [True]
        assert not os.path.exists(os.path.join(d.cdi, f"gpuslice-{uid}.json"))
        d.start()  # a fresh agent, registered again through the watcher
        ans = d.kubelet.prepare_retrying(DRIVER, [c])[uid]
        assert os.path.exists(os.path.join(d.cdi, f"gpuslice-{uid}.json"))
        assert limits_of(d, ans)["GPUSLICE_MEMORY_LIMIT_0"] == "4096Mi"
        # prepared before another restart, unprepared after it
        d.node.stop_agent()
        d.start()
        assert d.unprepare(c)[uid].error == ""
        assert not os.path.exists(os.path.join(d.cdi, f"gpuslice-{uid}.json"))
        assert os.listdir(lim) == []
    finally:
        d.close()


def _prepare_fails(d, c):
    import grpc
    try:
        d.prepare(c)
    except grpc.RpcError:
        return True
    return False


def test_kubelet_restart_finds_the_plugin_and_prepares_again(dra):
    """kubelet restarted: its plugin watcher finds the registration socket
    already there and registers the driver again; it then prepares the
    claims of running pods again, which must keep their regions."""
    from dra_kubelet_standin import DraKubeletStandIn
    c = dra.claim("running")
    uid = c["metadata"]["uid"]
    a1 = dra.prepare(c)[uid]
    _, mounts, _ = cdi_of(dra, a1)
    region = os.path.join({m["containerPath"]: m["hostPath"] for m in mounts}["/var/run/gpuslice"], "region")
    ino = os.stat(region).st_ino
    dra.kubelet.close()
    dra.kubelet = DraKubeletStandIn(dra.registry)  # a new kubelet, same directory
    info = dra.kubelet.wait_registered(1)
    assert info.name == DRIVER
    assert dra.prepare(c)[uid] == a1 and os.stat(region).st_ino == ino
