"""Failure scenarios: the agent killed inside Allocate, malformed
annotations and gRPC bodies, API-server errors, garbage and conflicts."""
import threading
import time

import grpc
import pytest

from conftest import NODE, assignment


def test_agent_killed_mid_allocate_then_restarted(node):
    gpu = node.uuids()[0]
    a = node.add_pod("victim", assignment(gpu, 0, 3000, 10))
    b = node.add_pod("bystander", assignment(gpu, 1, 1000, 20))
    node.stop_agent()
    # Test hook (GPUSLICE_TEST_ALLOCATE_DELAY_MS): Allocate sleeps after
    # matching the pod and before answering/recording, so we can kill it there.
    node.start_agent({"GPUSLICE_TEST_ALLOCATE_DELAY_MS": "3000"})
    errors = []

    def call():
        try:
            node.kubelet.allocate([f"{gpu}::0"], timeout=20)
        except grpc.RpcError as e:
            errors.append(e.code())
    t = threading.Thread(target=call)
    t.start()
    time.sleep(0.8)
    node.kill_agent()
    t.join(30)
    assert errors, "Allocate should fail when the agent dies inside it"
    # Nothing was recorded and nothing is locked: a restarted agent answers
    # the retried Allocate and another pod's Allocate at once.
    assert "gpuslice.io/allocated" not in node.api.get("Pod", "victim", "default")["metadata"].get(
        "annotations", {})
    node.start_agent()
    t0 = time.time()
    # Admitted in the order they were bound (the hint's guess), each gets
    # its own replica.
    ids, r = node.kubelet.admit("victim")
    assert ids == [f"{gpu}::0"]
    assert node.limits(r)["GPUSLICE_MEMORY_LIMIT_0"] == "3000Mi"
    assert node.limits(r)["GPUSLICE_CONTAINER"] == "default/victim/main"
    ids_b, r_b = node.kubelet.admit("bystander")
    assert ids_b == [f"{gpu}::1"]
    assert node.limits(r_b)["GPUSLICE_CONTAINER"] == "default/bystander/main"
    assert time.time() - t0 < 5
    # Idempotent: the same IDs again give the same answer and limits (a
    # container restart calls PreStartContainer again).
    r2 = node.kubelet.allocate([f"{gpu}::0"])
    node.kubelet.prestart([f"{gpu}::0"])
    assert node.limits(r2) == node.limits(r)


@pytest.mark.parametrize("value,why", [
    ("not json", "not valid JSON"),
    ('{"v":2,"gpus":[]}', "unsupported version v=2"),
    ('{"v":1,"gpus":[{"uuid":"UUID","memory_mib":-1}],"replicas":["UUID::5"]}', "memory_mib"),
    ('{"v":1,"gpus":[{"uuid":"UUID","memory_mib":10}],"replicas":["GPU-other::5"]}',
     "not a replica"),
    ('{"v":1,"gpus":[{"uuid":"UUID","memory_mib":10,"cores":500}],"replicas":["UUID::5"]}',
     "cores"),
    ('{"v":1,"gpus":' + "[" * 5000 + "]" * 5000 + ',"replicas":["UUID::5"]}', "JSON"),
])
def test_malformed_assignment_is_refused_clearly(node, value, why):
    gpu = node.uuids()[2]
    node.add_pod("bad", value.replace("UUID", gpu))
    with pytest.raises(grpc.RpcError) as ei:
        node.kubelet.allocate([f"{gpu}::5"])
    assert ei.value.code() == grpc.StatusCode.FAILED_PRECONDITION
    msg = ei.value.details()
    assert why in msg and "default/bad" in msg, msg
    # Still alive and serving.
    assert node.proc.poll() is None
    node.add_pod("good", assignment(gpu, 6, 512))
    r = node.kubelet.allocate([f"{gpu}::6"])
    node.kubelet.record("good", [f"{gpu}::6"])
    node.kubelet.prestart([f"{gpu}::6"])
    assert node.limits(r)["GPUSLICE_CONTAINER"] == "default/good/main"


def test_unknown_devices_and_conflicting_claims_are_refused(node):
    gpu = node.uuids()[3]
    with pytest.raises(grpc.RpcError) as ei:
        node.kubelet.allocate([f"{gpu}::7"])
    assert ei.value.code() == grpc.StatusCode.FAILED_PRECONDITION
    assert "no live pod on node node-a" in ei.value.details()
    node.add_pod("twin-a", assignment(gpu, 8, 512))
    node.add_pod("twin-b", assignment(gpu, 8, 1024))
    time.sleep(0.3)  # both in the agent's pod cache (a lone match is not re-listed)
    with pytest.raises(grpc.RpcError) as ei:
        node.kubelet.allocate([f"{gpu}::8"])
    assert "2 pods claim these devices" in ei.value.details()
    # A finished pod's old assignment does not count.
    node.add_pod("old", assignment(gpu, 9, 512), phase="Succeeded")
    node.add_pod("new", assignment(gpu, 9, 700))
    r = node.kubelet.allocate([f"{gpu}::9"])
    node.kubelet.record("new", [f"{gpu}::9"])
    node.kubelet.prestart([f"{gpu}::9"])
    assert node.limits(r)["GPUSLICE_CONTAINER"] == "default/new/main"
    assert node.limits(r)["GPUSLICE_MEMORY_LIMIT_0"] == "700Mi"
    # Another node's assignment is not ours: alone on a GPU, Allocate
    # refuses; where other pods use the GPU, PreStartContainer refuses.
    u = node.uuids()
    node.add_pod("elsewhere", assignment(u[0], 4, 512, node="node-b"))
    with pytest.raises(grpc.RpcError) as ei:
        node.kubelet.allocate([f"{u[0]}::4"])
    assert "no live pod on node node-a" in ei.value.details()
    node.add_pod("elsewhere2", assignment(gpu, 4, 512, node="node-b"))
    r = node.kubelet.allocate([f"{gpu}::4"])
    node.kubelet.record("elsewhere2", [f"{gpu}::4"])
    with pytest.raises(grpc.RpcError) as ei:
        node.kubelet.prestart([f"{gpu}::4"])
    assert "on node node-b" in ei.value.details()
    assert node.limits(r) is None


def test_garbage_grpc_bodies_get_invalid_argument(node):
    for method in ("/v1beta1.DevicePlugin/Allocate", "/v1beta1.DevicePlugin/GetPreferredAllocation",
                   "/v1beta1.DevicePlugin/PreStartContainer"):
        with pytest.raises(grpc.RpcError) as ei:
            node.kubelet.raw_call(method, b"\xff\xff\xff\xff\x0f garbage")
        assert ei.value.code() == grpc.StatusCode.INVALID_ARGUMENT, method
        assert "cannot decode" in ei.value.details()
    with pytest.raises(grpc.RpcError) as ei:
        node.kubelet.raw_call("/v1beta1.DevicePlugin/Nope", b"")
    assert ei.value.code() == grpc.StatusCode.UNIMPLEMENTED
    # An empty AllocateRequest is well-formed protobuf but asks for nothing.
    with pytest.raises(grpc.RpcError) as ei:
        node.kubelet.raw_call("/v1beta1.DevicePlugin/Allocate", b"")
    assert ei.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert node.proc.poll() is None


def test_api_errors_are_retried_and_conflicts_resolved(node):
    gpu = node.uuids()[1]
    pod = node.add_pod("retry", assignment(gpu, 2, 900))
    node.api.garbage_next = 1          # the relist on a miss gets a non-JSON body...
    node.api.fail_next = [503, 500]    # ...then two server errors (retried with backoff)
    node.api.touch_before_patch = 1    # and a concurrent writer wins the first claim patch
    r = node.kubelet.allocate([f"{gpu}::2"])
    node.kubelet.record("retry", [f"{gpu}::2"])
    node.kubelet.prestart([f"{gpu}::2"])
    assert node.limits(r)["GPUSLICE_CONTAINER"] == "default/retry/main"
    end = time.time() + 10
    ann = None
    while time.time() < end and not ann:
        ann = node.api.get("Pod", "retry", "default")["metadata"].get("annotations", {}).get(
            "gpuslice.io/allocated")
        time.sleep(0.05)
    assert ann and f"{gpu}::2" in ann
    assert node.api.conflicts >= 1
    log = node.logtext()
    assert "409 conflict recording the allocation; retrying" in log
    assert "HTTP 503; retry 1/4" in log
    assert "not JSON" in log
    assert node.proc.poll() is None


def test_watch_that_closes_at_once_is_retried_with_backoff(node):
    """Every watch ends at once with no event: the pod cache waits 0.1-0.2 s
    before re-watching, then twice as long each time, instead of looping."""
    node.inventory()
    before = len(node.api.requests)
    node.api.set_close_watches(True)
    time.sleep(4)
    with node.api.lock:
        got = node.api.requests[before:]
    watches = sum(1 for m, p in got if m == "GET" and "watch=1" in p)
    assert 2 <= watches <= 8, f"{watches} watches in 4 s"
    assert sum(1 for m, p in got if m == "GET") <= 12, f"{len(got)} requests in 4 s"
    # It keeps retrying: once watches work again, one is opened.
    node.api.set_close_watches(False)
    n = node.api.watch_requests()
    end = time.time() + 30
    while time.time() < end and node.api.watch_requests() == n:
        time.sleep(0.1)
    assert node.api.watch_requests() > n
    assert node.proc.poll() is None
