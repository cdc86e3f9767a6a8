"""Late-bound limits: Allocate answers only what follows from the device
IDs, and PreStartContainer, asking the kubelet stand-in's pod-resources API
which container holds the devices, writes THAT pod's limits.conf."""
import os
import time

import grpc
import pytest

from conftest import NODE, assignment
from test_node_agent import _scrape, tenant


def _prestart_fails(node, ids, *words):
    with pytest.raises(grpc.RpcError) as ei:
        node.kubelet.prestart(ids)
    assert ei.value.code() == grpc.StatusCode.FAILED_PRECONDITION, ei.value
    for w in words:
        assert w in ei.value.details(), ei.value.details()
    assert node.proc.poll() is None
    return ei.value.details()


def _run_tenant(node, resp, gpu, uid, label, limit_bytes):
    """A real interposed process in the container: it must see (and the
    node view report) its own container's limit."""
    c = tenant(node, resp)
    try:
        for line in ("init 0", "alloc 1048576"):
            c.stdin.write(line + "\n")
            c.stdin.flush()
            assert "rc=0" in c.stdout.readline(), c.stderr.read()
        lab = f'container="{label}",pod_uid="{uid}",gpu="{gpu}"'
        text = _scrape(node)
        assert f"gpuslice_container_memory_limit_bytes{{{lab}}} {limit_bytes}" in text, text
    finally:
        c.stdin.close()
        c.wait(timeout=30)


def test_younger_pod_admitted_first_gets_its_own_limits(node):
    """Two pending pods of the same size on the same GPU with different
    limits; kubelet admits the YOUNGER first. GetPreferredAllocation (a
    hint) steers it to the older pod's replica, as before. The old design
    then answered Allocate with the older pod's limits (a swap); now each
    container's limits.conf and its interposed process carry its own pod's
    limits, because PreStartContainer asks kubelet who holds the devices."""
    gpu = node.uuids()[0]
    old = node.add_pod("older", assignment(gpu, 0, 1000, 10))
    time.sleep(1.1)  # creationTimestamp has 1 s resolution
    young = node.add_pod("younger", assignment(gpu, 1, 3000, 60))
    assert old["metadata"]["creationTimestamp"] < young["metadata"]["creationTimestamp"]
    ids_y, resp_y = node.kubelet.admit("younger")
    assert ids_y == [f"{gpu}::0"]   # the older pod's replica: the hint guessed wrong
    ids_o, resp_o = node.kubelet.admit("older")
    # Its own replica is taken; it gets the younger pod's unused one, so the
    # replicas held stay those the extender counts as used.
    assert ids_o == [f"{gpu}::1"]
    # Nothing pod-specific in Allocate's answer (which could not know).
    for r in (resp_y, resp_o):
        assert not [k for k in dict(r.envs) if "MEMORY" in k or "CORES" in k]
        assert dict(r.envs)["NVIDIA_VISIBLE_DEVICES"] == gpu
    assert node.limits(resp_y) == {"GPUSLICE_CONTAINER": "default/younger/main",
                                   "GPUSLICE_COMPUTE_MODE": "cap",
                                   "GPUSLICE_MEMORY_LIMIT_0": "3000Mi", "GPUSLICE_CORES_0": "60"}
    assert node.limits(resp_o) == {"GPUSLICE_CONTAINER": "default/older/main",
                                   "GPUSLICE_COMPUTE_MODE": "cap",
                                   "GPUSLICE_MEMORY_LIMIT_0": "1000Mi", "GPUSLICE_CORES_0": "10"}
    # The claims record the replicas each pod really holds.
    for name, ids in (("younger", ids_y), ("older", ids_o)):
        end = time.time() + 10
        ann = None
        while time.time() < end and not ann:
            ann = node.api.get("Pod", name, "default")["metadata"].get("annotations", {}).get(
                "gpuslice.io/allocated")
            time.sleep(0.05)
        assert ann and f'"{ids[0]}"' in ann, (name, ann)
    _run_tenant(node, resp_y, gpu, young["metadata"]["uid"], "default/younger/main", 3000 << 20)
    _run_tenant(node, resp_o, gpu, old["metadata"]["uid"], "default/older/main", 1000 << 20)


def test_swap_across_gpus_is_refused_not_mixed(node):
    """Out-of-order admission where the two pods were scheduled to
    DIFFERENT GPUs: the younger container holds a replica of the older
    pod's GPU, which its scheduling decision did not account for. It is
    refused with a clear message (kubelet fails the start), never run with
    the wrong limits; nothing is written."""
    u = node.uuids()
    node.add_pod("a-older", assignment(u[1], 0, 1000))
    time.sleep(1.1)
    node.add_pod("b-younger", assignment(u[2], 0, 2000))
    ids, resp = node.kubelet.admit("b-younger", prestart=False)
    assert ids == [f"{u[1]}::0"]
    _prestart_fails(node, ids, "default/b-younger", "is for other GPUs", f"{u[2]}::0")
    assert node.limits(resp) is None


def test_prestart_for_devices_nobody_holds(node):
    gpu = node.uuids()[3]
    node.add_pod("p", assignment(gpu, 4, 512))
    resp = node.kubelet.allocate([f"{gpu}::4"])   # allocated, but not recorded as held
    _prestart_fails(node, [f"{gpu}::4"], "no container on this node holds these devices")
    assert node.limits(resp) is None
    assert not os.path.exists(os.path.join(node.limits_dir(resp), "pod_uid"))
    assert "gpuslice.io/allocated" not in node.api.get("Pod", "p", "default")["metadata"].get(
        "annotations", {})
    # Bad device IDs are refused before anything is asked.
    with pytest.raises(grpc.RpcError) as ei:
        node.kubelet.prestart(["not-an-id"])
    assert ei.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "not a gpuslice device ID" in ei.value.details()
    with pytest.raises(grpc.RpcError) as ei:
        node.kubelet.prestart([])
    assert ei.value.code() == grpc.StatusCode.INVALID_ARGUMENT


def test_agent_restart_between_allocate_and_prestart(node):
    gpu = node.uuids()[2]
    pod = node.add_pod("restarted", assignment(gpu, 7, 4096, 30, mode="share"))
    ids, resp = node.kubelet.admit("restarted", prestart=False)
    assert ids == [f"{gpu}::7"]
    node.stop_agent()
    node.start_agent()
    node.kubelet.prestart(ids)
    assert node.limits(resp) == {"GPUSLICE_CONTAINER": "default/restarted/main",
                                 "GPUSLICE_COMPUTE_MODE": "share",
                                 "GPUSLICE_MEMORY_LIMIT_0": "4096Mi", "GPUSLICE_CORES_0": "30"}
    assert open(os.path.join(node.limits_dir(resp), "pod_uid")).read() == pod["metadata"]["uid"]


def test_annotation_disagreeing_with_holder_is_refused(node):
    """kubelet says pod X holds the devices, but X's assignment is on
    another GPU, is missing, or X is not bound here."""
    u = node.uuids()
    node.add_pod("decoy", assignment(u[0], 5, 512))
    node.add_pod("liar", assignment(u[3], 5, 512))
    resp = node.kubelet.allocate([f"{u[0]}::5"])
    node.kubelet.record("liar", [f"{u[0]}::5"])
    _prestart_fails(node, [f"{u[0]}::5"], "default/liar", "is for other GPUs")
    node.kubelet.release("liar")
    node.add_pod("plain", None)
    node.kubelet.record("plain", [f"{u[0]}::5"])
    _prestart_fails(node, [f"{u[0]}::5"], "default/plain", "has no gpuslice.io/assignment")
    node.kubelet.release("plain")
    node.kubelet.record("ghost", [f"{u[0]}::5"])
    _prestart_fails(node, [f"{u[0]}::5"], "default/ghost", f"bound to node {NODE}")
    assert node.limits(resp) is None


@pytest.mark.parametrize("case", ["garbage", "unavailable", "no-socket", "newline-name",
                                  "two-holders", "partial", "empty-name"])
def test_malformed_pod_resources_answers(node, case):
    gpu = node.uuids()[1]
    node.add_pod("m", assignment(gpu, 3, 512))
    resp = node.kubelet.allocate([f"{gpu}::3"])
    k = node.kubelet
    ids = [f"{gpu}::3"]
    if case == "garbage":
        k.podres_answer = b"\xff\xff\xff\xff\x0f not protobuf"
        words = ["does not decode"]
    elif case == "unavailable":
        k.podres_abort = grpc.StatusCode.UNAVAILABLE
        words = ["cannot ask kubelet", "injected failure"]
    elif case == "no-socket":
        k.podres_server.stop(None).wait()
        if os.path.exists(k.podres_sock):
            os.unlink(k.podres_sock)
        words = ["cannot ask kubelet", k.podres_sock]
    elif case == "newline-name":
        k.extra_holdings = [("default", "m\nGPUSLICE_MEMORY_LIMIT=1T", "main", ids)]
        words = ["malformed namespace/pod/container name"]
    elif case == "empty-name":
        k.extra_holdings = [("default", "m", "", ids)]
        words = ["malformed namespace/pod/container name"]
    elif case == "two-holders":
        k.record("m", ids)
        k.record("m2", ids)
        words = ["2 containers holding these devices"]
    else:
        k.record("m", ids + [f"{node.uuids()[2]}::3"])
        words = ["disagrees with the request", "holds 1 of them among 2 devices"]
    _prestart_fails(node, ids, *words)
    assert node.limits(resp) is None
    assert k.podres_calls >= 1 or case == "no-socket"
