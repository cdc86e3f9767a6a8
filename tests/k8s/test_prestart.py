"""Late-bound limits: Allocate answers only what follows from the device
IDs, and PreStartContainer, asking the kubelet stand-in's pod-resources API
which container holds the devices, writes THAT pod's limits.conf."""
import json
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


def _allocated(node, name, timeout=10):
    end = time.time() + timeout
    while time.time() < end:
        ann = node.api.get("Pod", name, "default")["metadata"].get("annotations", {}).get(
            "gpuslice.io/allocated")
        if ann:
            return json.loads(ann)
        time.sleep(0.05)
    return None


def _bind(node, name, annotation):
    """Binds an existing unbound pod to the node with its assignment, as the
    extender does (assignment, then the Binding): one update here."""
    pod = node.api.get("Pod", name, "default")
    pod["metadata"].setdefault("annotations", {})["gpuslice.io/assignment"] = annotation
    pod["spec"]["nodeName"] = NODE
    return node.api.put("Pod", pod)


def test_hint_follows_binding_order_not_creation(node):
    """The hint guesses kubelet's admission order from the order pods became
    bound to the node (as the agent's watch saw them), not creationTimestamp:
    the YOUNGER pod, bound FIRST and admitted first, gets its own replica."""
    u = node.uuids()
    for name in ("old", "young"):
        node.api.put("Pod", {"apiVersion": "v1", "kind": "Pod",
                             "metadata": {"name": name, "namespace": "default"},
                             "spec": {}, "status": {"phase": "Pending"}})
        time.sleep(1.1)  # creationTimestamp has 1 s resolution
    assert (node.api.get("Pod", "old", "default")["metadata"]["creationTimestamp"] <
            node.api.get("Pod", "young", "default")["metadata"]["creationTimestamp"])
    _bind(node, "young", assignment(u[2], 3, 2000, 20))
    time.sleep(0.3)
    _bind(node, "old", assignment(u[1], 4, 1000, 10))
    ids_y, resp_y = node.kubelet.admit("young")
    assert ids_y == [f"{u[2]}::3"]  # creation order would have said old's u[1]::4
    ids_o, resp_o = node.kubelet.admit("old")
    assert ids_o == [f"{u[1]}::4"]
    assert node.limits(resp_y)["GPUSLICE_MEMORY_LIMIT_0"] == "2000Mi"
    assert node.limits(resp_o)["GPUSLICE_MEMORY_LIMIT_0"] == "1000Mi"
    # The order survives an agent restart (the re-list sorts by version).
    node.kubelet.release("young")
    node.kubelet.release("old")
    for name in ("young", "old"):
        pod = node.api.get("Pod", name, "default")
        pod["metadata"]["annotations"].pop("gpuslice.io/allocated", None)
        node.api.put("Pod", pod)  # pending again, as far as the hint knows
    node.stop_agent()
    node.start_agent()
    free = [i for i in node.kubelet.healthy()]
    assert node.kubelet.preferred(free, 1) == [f"{u[2]}::3"]


def test_swap_across_gpus_that_fits_is_accepted(node):
    """Two pods bound at once, scheduled to DIFFERENT GPUs; kubelet admits
    the one bound second first, and the hint (guessing the first-bound pod)
    steers it to a replica of the other pod's GPU. PreStartContainer
    re-checks on the node's own books that it fits on the GPU it really
    holds (counting the other pod, not started yet, on its assigned GPU),
    accepts it with ITS OWN limits and records allocated with the real
    replica. The first pod then lands on its own GPU with its own limits;
    and the symmetric swap (kubelet puts the first pod on the second pod's
    vacated GPU) is accepted by the same rule."""
    u = node.uuids()
    a = node.add_pod("a-first", assignment(u[1], 0, 1000, 10))
    b = node.add_pod("b-second", assignment(u[2], 0, 2000, 30, mode="share"))
    ids_b, resp_b = node.kubelet.admit("b-second")
    assert ids_b == [f"{u[1]}::0"]    # a replica of a-first's GPU
    assert node.limits(resp_b) == {"GPUSLICE_CONTAINER": "default/b-second/main",
                                   "GPUSLICE_COMPUTE_MODE": "share",
                                   "GPUSLICE_MEMORY_LIMIT_0": "2000Mi", "GPUSLICE_CORES_0": "30"}
    assert open(os.path.join(node.limits_dir(resp_b), "pod_uid")).read() == b["metadata"]["uid"]
    assert _allocated(node, "b-second")["replicas"] == [f"{u[1]}::0"]
    assert "fits there, accepted with its own limits" in node.logtext()
    ids_a, resp_a = node.kubelet.admit("a-first")
    assert ids_a[0].startswith(u[1] + "::") and ids_a != ids_b
    assert node.limits(resp_a) == {"GPUSLICE_CONTAINER": "default/a-first/main",
                                   "GPUSLICE_COMPUTE_MODE": "cap",
                                   "GPUSLICE_MEMORY_LIMIT_0": "1000Mi", "GPUSLICE_CORES_0": "10"}
    assert _allocated(node, "a-first")["replicas"] == ids_a
    # (No container runtime here: the tenant sees the simulator's first GPU
    # as its GPU 0, where limits.conf puts its limit.)
    _run_tenant(node, resp_b, u[0], b["metadata"]["uid"], "default/b-second/main", 2000 << 20)
    _run_tenant(node, resp_a, u[0], a["metadata"]["uid"], "default/a-first/main", 1000 << 20)

    # Symmetric: c-first (bound first, scheduled to GPU 3) is started on
    # the GPU d-second was scheduled to, after d-second took GPU 3.
    node.add_pod("c-first", assignment(u[3], 1, 1500, 20))
    node.add_pod("d-second", assignment(u[0], 1, 2500, 40))
    ids_d, resp_d = node.kubelet.admit("d-second")
    assert ids_d == [f"{u[3]}::1"]
    assert node.limits(resp_d)["GPUSLICE_MEMORY_LIMIT_0"] == "2500Mi"
    assert _allocated(node, "d-second")["replicas"] == ids_d
    # kubelet does not have to follow the hint: c-first gets GPU 0's replica.
    resp_c = node.kubelet.allocate([f"{u[0]}::1"])
    node.kubelet.record("c-first", [f"{u[0]}::1"])
    node.kubelet.prestart([f"{u[0]}::1"])
    assert node.limits(resp_c) == {"GPUSLICE_CONTAINER": "default/c-first/main",
                                   "GPUSLICE_COMPUTE_MODE": "cap",
                                   "GPUSLICE_MEMORY_LIMIT_0": "1500Mi", "GPUSLICE_CORES_0": "20"}
    assert _allocated(node, "c-first")["replicas"] == [f"{u[0]}::1"]
    # A container restart: PreStartContainer again, same answer.
    node.kubelet.prestart([f"{u[0]}::1"])
    assert node.limits(resp_c)["GPUSLICE_MEMORY_LIMIT_0"] == "1500Mi"


def test_swap_across_gpus_that_does_not_fit_is_refused(node):
    """As above, but GPU 1 is nearly full: a third pod already runs there.
    The pod that got GPU 1's replica does not fit there next to it and the
    not-yet-started pod assigned to GPU 1: refused with a clear message,
    nothing written, nothing recorded."""
    u = node.uuids()
    total = next(g["memory_mib"] for g in node.inventory()["gpus"] if g["uuid"] == u[1])
    node.add_pod("runner", assignment(u[1], 5, total - 1500, 50))
    ids_r, resp_r = node.kubelet.admit("runner")
    assert ids_r == [f"{u[1]}::5"] and _allocated(node, "runner")
    node.add_pod("a-first", assignment(u[1], 0, 1000, 10))
    node.add_pod("b-second", assignment(u[2], 0, 2000))
    ids, resp = node.kubelet.admit("b-second", prestart=False)
    assert ids == [f"{u[1]}::0"]
    why = _prestart_fails(node, ids, "default/b-second", "is for other GPUs", f"{u[2]}::0",
                          f"does not fit on GPU {u[1]}", "memory", "default/runner",
                          "default/a-first 1000Mi/10% (assigned, not started)")
    assert "delete the pod" in why
    assert node.limits(resp) is None
    assert "gpuslice.io/allocated" not in node.api.get("Pod", "b-second", "default")[
        "metadata"].get("annotations", {})
    # Its owner writes the record of a restart there (as if the agent had
    # accepted it before): the agent's own pin says it did not.
    pod = node.api.get("Pod", "b-second", "default")
    pod["metadata"]["annotations"]["gpuslice.io/allocated"] = json.dumps({"v": 1, "replicas": ids})
    node.api.put("Pod", pod)
    time.sleep(0.5)  # the edit reaches the agent's watch
    _prestart_fails(node, ids, "default/b-second", f"does not fit on GPU {u[1]}")
    assert node.limits(resp) is None
    # Cores too: a pod whose memory fits but whose cores do not.
    node.kubelet.release("b-second")
    node.api.delete("Pod", "a-first", "default")
    node.api.delete("Pod", "b-second", "default")
    time.sleep(0.5)  # the deletions reach the agent's watch
    node.add_pod("h-run", assignment(u[0], 2, 100, 60))
    assert node.kubelet.admit("h-run")[0] == [f"{u[0]}::2"]
    node.add_pod("i-first", assignment(u[0], 3, 100, 30))
    node.add_pod("j-second", assignment(u[3], 3, 100, 20))
    ids_j, resp_j = node.kubelet.admit("j-second", prestart=False)
    assert ids_j == [f"{u[0]}::3"]
    _prestart_fails(node, ids_j, "default/j-second", f"does not fit on GPU {u[0]}", "cores",
                    "90.0% cores")
    assert node.limits(resp_j) is None


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
    two = json.loads(assignment(u[3], 5, 512))
    two["gpus"].append({"uuid": u[2], "memory_mib": 512})
    two["replicas"].append(f"{u[2]}::5")
    node.add_pod("liar", json.dumps(two))
    resp = node.kubelet.allocate([f"{u[0]}::5"])
    node.kubelet.record("liar", [f"{u[0]}::5"])
    _prestart_fails(node, [f"{u[0]}::5"], "default/liar", "does not match them",
                    "1 replicas held for an assignment of 2 GPUs")
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
