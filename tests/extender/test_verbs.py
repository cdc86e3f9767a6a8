"""Extender verbs on real-shaped bodies (ExtenderArgs / ExtenderFilterResult /
HostPriorityList / ExtenderBindingArgs / ExtenderBindingResult, field for
field as kube-scheduler's extender v1 types serialise: Go field names)."""
import json
import random
import threading
import time

from conftest import args_names, args_nodes, bind_args, gpu_usage, node_obj, pod_obj


def assigned(name, node, gpu_mems, ns="default"):
    """A pod already running with an assignment (what a bind wrote earlier)."""
    a = {"v": 1, "node": node, "gpus": [], "replicas": [], "mode": "cap"}
    for i, (gi, mem) in enumerate(gpu_mems):
        a["gpus"].append({"uuid": f"GPU-{node}-{gi}", "memory_mib": mem, "cores": 10})
        a["replicas"].append(f"GPU-{node}-{gi}::{i}")
    p = pod_obj(name, gpus=len(gpu_mems), mem=gpu_mems[0][1], cores=10, ns=ns,
                annotations={"gpuslice.io/assignment": json.dumps(a)})
    p["spec"]["nodeName"] = node
    p["status"]["phase"] = "Running"
    return p


def cluster(api):
    api.put("Node", node_obj("gpu-a"))
    api.put("Node", node_obj("gpu-full"))
    api.put("Node", node_obj("cpu-only", ngpus=0))
    # gpu-full: every GPU has only 4096 MiB left.
    for gi in range(4):
        api.put("Pod", assigned(f"hog-{gi}", "gpu-full", [(gi, 81920 - 4096)]))


def test_filter_node_names_with_reasons_per_node(api, start):
    cluster(api)
    ext = start()
    ext.wait_state(lambda s: sum(m for m, _ in gpu_usage(s, "gpu-full")) == 4 * (81920 - 4096))
    pod = api.put("Pod", pod_obj("p1", 1, 8192, 30))
    code, res = ext.post("filter", args_names(pod, ["gpu-a", "gpu-full", "cpu-only", "ghost"]))
    assert code == 200
    assert set(res) == {"Nodes", "NodeNames", "FailedNodes", "FailedAndUnresolvableNodes", "Error"}
    assert res["Nodes"] is None and res["Error"] == ""
    assert res["NodeNames"] == ["gpu-a"]
    # Busy: evicting pods could help -> FailedNodes (preemption may try).
    assert "insufficient GPU memory" in res["FailedNodes"]["gpu-full"]
    assert "need 1 of 4 GPUs" in res["FailedNodes"]["gpu-full"]
    # No GPUs at all: nothing can help -> FailedAndUnresolvableNodes.
    assert "no GPU inventory" in res["FailedAndUnresolvableNodes"]["cpu-only"]
    assert "unknown" in res["FailedAndUnresolvableNodes"]["ghost"]


def test_filter_full_node_objects_when_not_cache_capable(api, start):
    cluster(api)
    ext = start()
    ext.wait_state(lambda s: sum(m for m, _ in gpu_usage(s, "gpu-full")) > 0)
    pod = api.put("Pod", pod_obj("p1", 1, 8192, 30))
    nodes = [api.get("Node", n) for n in ("gpu-a", "gpu-full", "cpu-only")]
    code, res = ext.post("filter", args_nodes(pod, nodes))
    assert code == 200 and res["Error"] == "" and res["NodeNames"] is None
    assert res["Nodes"]["kind"] == "NodeList"
    assert [n["metadata"]["name"] for n in res["Nodes"]["items"]] == ["gpu-a"]
    assert res["Nodes"]["items"][0] == nodes[0]  # the object comes back untouched
    assert set(res["FailedNodes"]) == {"gpu-full"}
    assert set(res["FailedAndUnresolvableNodes"]) == {"cpu-only"}


def test_filter_gpu_count_model_and_excluded_gpus(api, start):
    api.put("Node", node_obj("two", ngpus=2))
    api.put("Node", node_obj("eight", ngpus=8, model="NVIDIA A100-SXM4-40GB", mem=40960))
    ext = start()
    ext.wait_state(lambda s: len(s["nodes"]) == 2)
    pod = pod_obj("p4", 4, 1024, 10)
    res = ext.post("filter", args_names(pod, ["two", "eight"]))[1]
    assert res["NodeNames"] == ["eight"]
    assert "too few GPUs" in res["FailedAndUnresolvableNodes"]["two"]
    sched = {"gpuslice.io/scheduling": json.dumps({"v": 1, "gpu_models": ["NVIDIA H100 80GB HBM3"]})}
    res = ext.post("filter", args_names(pod_obj("m", 1, 1024, annotations=sched), ["two", "eight"]))[1]
    assert res["NodeNames"] == ["two"]
    assert "GPU model not allowed" in res["FailedAndUnresolvableNodes"]["eight"]
    avoid = {"gpuslice.io/scheduling": json.dumps({"v": 1, "avoid_gpus": ["GPU-two-0", "GPU-two-1"]})}
    res = ext.post("filter", args_names(pod_obj("x", 1, 1024, annotations=avoid), ["two"]))[1]
    assert res["NodeNames"] == []
    assert "unhealthy or excluded" in res["FailedAndUnresolvableNodes"]["two"]


def test_prioritize_binpack_prefers_fuller_node_spread_the_emptier(api, start):
    """The anchors had these reversed: binpack must favour the fuller node."""
    api.put("Node", node_obj("empty"))
    api.put("Node", node_obj("busy"))
    api.put("Pod", assigned("w0", "busy", [(0, 40960)]))
    ext = start()
    ext.wait_state(lambda s: gpu_usage(s, "busy")[0][0] == 40960)
    binpack = {"gpuslice.io/scheduling": json.dumps({"v": 1, "policy": "binpack"})}
    code, res = ext.post("prioritize", args_names(pod_obj("b", 1, 8192, 20, annotations=binpack),
                                                  ["empty", "busy"]))
    assert code == 200 and isinstance(res, list)
    assert all(set(h) == {"Host", "Score"} for h in res)
    score = {h["Host"]: h["Score"] for h in res}
    assert score == {"busy": 10, "empty": 0}
    spread = {"gpuslice.io/scheduling": json.dumps({"v": 1, "policy": "spread"})}
    res = ext.post("prioritize", args_names(pod_obj("s", 1, 8192, 20, annotations=spread),
                                            ["empty", "busy"]))[1]
    assert {h["Host"]: h["Score"] for h in res} == {"busy": 0, "empty": 10}
    # A node that cannot take the pod scores 0 and is listed anyway.
    api.put("Node", node_obj("packed"))
    for gi in range(4):
        api.put("Pod", assigned(f"pk{gi}", "packed", [(gi, 40960)]))
    ext.wait_state(lambda s: sum(m for m, _ in gpu_usage(s, "packed")) == 4 * 40960)
    res = ext.post("prioritize", args_names(pod_obj("big", 1, 81920, annotations=binpack),
                                            ["packed", "busy", "empty"]))[1]
    assert [h["Host"] for h in res] == ["packed", "busy", "empty"]
    assert [h["Score"] for h in res] == [0, 10, 0]  # infeasible, fuller, emptier


def test_default_policy_is_fraglook(api, start):
    """With no --policy and no per-pod choice, nodes and GPUs are ranked by
    fraglook, the best measured policy (docs/scheduling.md)."""
    for n in ("empty", "busy", "half"):
        api.put("Node", node_obj(n))
    api.put("Pod", assigned("w0", "busy", [(0, 40960)]))
    api.put("Pod", assigned("w1", "half", [(0, 20480), (1, 20480)]))
    ext = start()
    ext.wait_state(lambda s: gpu_usage(s, "half")[1][0] == 20480)
    assert "policy fraglook, gpu policy fraglook" in ext.logtext()
    names = ["empty", "busy", "half"]
    pod = pod_obj("d", 1, 8192, 20)
    default = ext.post("prioritize", args_names(pod, names))[1]
    for pol, same in (("fraglook", True), ("binpack", False)):
        ann = {"gpuslice.io/scheduling": json.dumps({"v": 1, "policy": pol})}
        res = ext.post("prioritize", args_names(pod_obj("d", 1, 8192, 20, annotations=ann), names))[1]
        assert (res == default) == same, (pol, res, default)


def test_bind_records_assignment_and_creates_binding(api, start):
    api.put("Node", node_obj("gpu-a"))
    ext = start()
    ext.wait_state(lambda s: len(s["nodes"]) == 1)
    pod = api.put("Pod", pod_obj("train", 2, 8192, 30,
                                 annotations={"gpuslice.io/scheduling": json.dumps(
                                     {"v": 1, "mode": "share", "numa": "single"})}))
    code, res = ext.post("bind", bind_args(pod, "gpu-a"))
    assert code == 200 and res == {"Error": ""}
    got = api.get("Pod", "train", "default")
    assert got["spec"]["nodeName"] == "gpu-a"
    assert api.bindings == [("default", "train", "gpu-a")]
    a = json.loads(got["metadata"]["annotations"]["gpuslice.io/assignment"])
    assert a["v"] == 1 and a["node"] == "gpu-a" and a["mode"] == "share"
    assert len(a["gpus"]) == 2 and len(a["replicas"]) == 2
    uuids = [g["uuid"] for g in a["gpus"]]
    # numa single: both GPUs on one NUMA node (GPUs 0,1 or 2,3).
    assert sorted(uuids) in (["GPU-gpu-a-0", "GPU-gpu-a-1"], ["GPU-gpu-a-2", "GPU-gpu-a-3"])
    for g, r in zip(a["gpus"], a["replicas"]):
        assert g["memory_mib"] == 8192 and g["cores"] == 30
        assert r == g["uuid"] + "::0"
    s = ext.wait_state(lambda s: sum(m for m, _ in gpu_usage(s, "gpu-a")) == 2 * 8192)
    # Whole-GPU request: memory is the GPU's, cores 100, and it takes an idle GPU.
    whole = api.put("Pod", pod_obj("whole", 1))
    assert ext.post("bind", bind_args(whole, "gpu-a"))[1] == {"Error": ""}
    a = json.loads(api.get("Pod", "whole", "default")["metadata"]["annotations"]["gpuslice.io/assignment"])
    assert a["gpus"][0]["memory_mib"] == 81920 and a["gpus"][0]["cores"] == 100
    assert a["gpus"][0]["uuid"] not in uuids
    assert s


def test_bind_errors_are_reported_and_undone(api, start):
    api.put("Node", node_obj("gpu-a"))
    ext = start()
    ext.wait_state(lambda s: len(s["nodes"]) == 1)
    pod = api.put("Pod", pod_obj("p", 1, 8192, 30))
    # Stale uid: the pod was recreated since kube-scheduler looked.
    res = ext.post("bind", dict(bind_args(pod, "gpu-a"), PodUID="0000-stale"))[1]
    assert "recreated" in res["Error"]
    # Missing pod.
    res = ext.post("bind", dict(bind_args(pod, "gpu-a"), PodName="nope"))[1]
    assert "not found" in res["Error"]
    # The Binding itself fails: the assignment and the node claim are undone.
    api.fail_bind_next = [403]
    res = ext.post("bind", bind_args(pod, "gpu-a"))[1]
    assert "creating the Binding failed: HTTP 403: injected binding failure" in res["Error"]
    got = api.get("Pod", "p", "default")
    assert "gpuslice.io/assignment" not in got["metadata"].get("annotations", {})
    assert "nodeName" not in got["spec"]
    ext.wait_state(lambda s: gpu_usage(s, "gpu-a") == [(0, 0)] * 4, what="claim undone")
    claims = json.loads(api.get("Node", "gpu-a")["metadata"]["annotations"]["gpuslice.io/claims"])
    assert claims == {"v": 1, "claims": []}
    # Already bound elsewhere (409 from the API server): reported with its message.
    api.put("Pod", dict(got, spec=dict(got["spec"], nodeName="other")))
    res = ext.post("bind", bind_args(api.get("Pod", "p", "default"), "gpu-a"))[1]
    assert "already assigned" in res["Error"]
    # Does not fit any more (node filled after filter): clear error, nothing written.
    big = api.put("Pod", pod_obj("big", 1, 90000))
    res = ext.post("bind", bind_args(big, "gpu-a"))[1]
    assert "no longer fits" in res["Error"] and "insufficient GPU memory" in res["Error"]


def test_a_binding_made_whose_reply_was_lost_is_kept(api, start):
    """The API server made the Binding but its reply was lost (a 504): the
    retried POST is told the pod is already assigned. Undone then, the pod
    ran bound to the node with no assignment, which its node agent refuses
    to start, and its GPU share left the books."""
    api.put("Node", node_obj("gpu-a"))
    ext = start()
    ext.wait_state(lambda s: len(s["nodes"]) == 1)
    pod = api.put("Pod", pod_obj("p", 1, 8192, 30))
    api.lose_bind_reply_next = [504]
    res = ext.post("bind", bind_args(pod, "gpu-a"))[1]
    assert res == {"Error": ""}, res
    got = api.get("Pod", "p", "default")
    assert got["spec"]["nodeName"] == "gpu-a"
    a = json.loads(got["metadata"]["annotations"]["gpuslice.io/assignment"])
    assert a["node"] == "gpu-a"
    claims = json.loads(api.get("Node", "gpu-a")["metadata"]["annotations"]["gpuslice.io/claims"])
    assert [c["uid"] for c in claims["claims"]] == [pod["metadata"]["uid"]], claims
    ext.wait_state(lambda s: sum(m for m, _ in gpu_usage(s, "gpu-a")) == 8192, what="share kept")


def test_a_bind_does_not_overwrite_an_assignment_another_bind_recorded_meanwhile(api, start):
    """kube-scheduler retried a slow bind at the other replica, which
    recorded its assignment while this one was about to: overwritten, the
    pod ran on one node with the other node's assignment."""
    api.put("Node", node_obj("gpu-a"))
    ext = start()
    ext.wait_state(lambda s: len(s["nodes"]) == 1)
    pod = api.put("Pod", pod_obj("p", 1, 8192, 30))
    theirs = json.dumps({"v": 1, "node": "gpu-b", "gpus": [], "replicas": []})
    api.race_pod_patch = {"gpuslice.io/assignment": theirs}
    res = ext.post("bind", bind_args(pod, "gpu-a"))[1]
    assert "another bind recorded an assignment for this pod" in res["Error"], res
    got = api.get("Pod", "p", "default")
    assert got["metadata"]["annotations"]["gpuslice.io/assignment"] == theirs
    assert "nodeName" not in got["spec"]
    claims = json.loads(api.get("Node", "gpu-a")["metadata"]["annotations"]["gpuslice.io/claims"])
    assert claims == {"v": 1, "claims": []}


def test_a_slow_bind_to_one_node_does_not_hold_binds_to_others(api, start):
    """kube-scheduler binds pods in parallel: one bind the API server is
    slow to answer held every other bind of the replica behind it."""
    api.put("Node", node_obj("gpu-a"))
    api.put("Node", node_obj("gpu-b"))
    ext = start()
    ext.wait_state(lambda s: len(s["nodes"]) == 2)
    slow = api.put("Pod", pod_obj("slow", 1, 8192, 30))
    fast = api.put("Pod", pod_obj("fast", 1, 8192, 30))
    api.hold_bind["gpu-a"] = threading.Event()
    results = {}
    t = threading.Thread(target=lambda: results.update(slow=ext.post("bind", bind_args(slow, "gpu-a"))[1]))
    t.start()
    try:
        end = time.time() + 15
        while not any(m == "POST" and p.endswith("/pods/slow/binding") for m, p in list(api.requests)):
            assert time.time() < end, "the slow bind never reached its Binding"
            time.sleep(0.02)
        res = ext.post("bind", bind_args(fast, "gpu-b"))[1]
        assert res == {"Error": ""}, res
        assert api.get("Pod", "fast", "default")["spec"]["nodeName"] == "gpu-b"
        assert "slow" not in results
    finally:
        api.hold_bind["gpu-a"].set()
        t.join(30)
    assert results["slow"] == {"Error": ""}, results


def test_malformed_requests_get_clear_errors(api, start):
    api.put("Node", node_obj("gpu-a"))
    ext = start()
    code, res = ext.post("filter", b"{not json", raw=True)
    assert code == 400 and "not JSON" in res["Error"]
    code, res = ext.post("filter", {"Pod": pod_obj("x", 1)})
    assert code == 400 and "neither NodeNames" in res["Error"]
    code, res = ext.post("filter", args_names(pod_obj("x", 1, "8x"), ["gpu-a"]))
    assert code == 200
    assert 'limits["gpuslice.io/gpu-memory"]' in res["Error"] and "unknown suffix" in res["Error"]
    code, res = ext.post("filter", args_names(pod_obj("x", 1, 1024, 150), ["gpu-a"]))
    assert "1..100 percent" in res["Error"]
    bad = {"gpuslice.io/scheduling": '{"v":1,"polcy":"spread"}'}
    code, res = ext.post("filter", args_names(pod_obj("x", 1, annotations=bad), ["gpu-a"]))
    assert 'unknown field "polcy"' in res["Error"]
    code, res = ext.post("prioritize", {"Pod": 3, "NodeNames": ["gpu-a"]})
    assert code == 400 and "no Pod" in res["Error"]
    code, res = ext.post("bind", {"PodName": "../etc", "PodNamespace": "d", "PodUID": "u", "Node": "n"})
    assert code == 400 and "ExtenderBindingArgs" in res["Error"]
    # Quantities come back canonicalised by the API server: 10k == 10000 MiB.
    code, res = ext.post("filter", args_names(pod_obj("x", 1, "10k"), ["gpu-a"]))
    assert res["Error"] == "" and res["NodeNames"] == ["gpu-a"]


def _mutate(rng, s):
    b = bytearray(s)
    for _ in range(rng.randint(1, 8)):
        op = rng.randrange(4)
        i = rng.randrange(len(b)) if b else 0
        if op == 0 and b:
            del b[i:i + rng.randint(1, 20)]
        elif op == 1:
            b[i:i] = rng.choice([b"{", b"}", b"[", b"]", b'"', b",", b":", b"null", b"-1",
                                 b"1e999", b"\\u0000", b'"gpuslice.io/gpu":"99"', b"\xff"])
        elif op == 2 and b:
            b[i] = rng.randrange(256)
        else:
            j = rng.randrange(len(b)) if b else 0
            b[i:i] = b[j:j + rng.randint(1, 30)]
    return bytes(b)


def test_fuzzed_bodies_never_crash(api, start):
    api.put("Node", node_obj("gpu-a"))
    ext = start()
    rng = random.Random(1234)
    pod = pod_obj("f", 1, 4096, 20, annotations={"gpuslice.io/scheduling": json.dumps(
        {"v": 1, "policy": "fraglook", "avoid_gpus": ["GPU-gpu-a-1"]})})
    seeds = {"filter": json.dumps(args_names(pod, ["gpu-a", "x"])).encode(),
             "prioritize": json.dumps(args_nodes(pod, [node_obj("gpu-a")])).encode(),
             "bind": json.dumps({"PodName": "f", "PodNamespace": "default", "PodUID": "u",
                                 "Node": "gpu-a"}).encode()}
    for i in range(600):
        verb = ("filter", "prioritize", "bind")[i % 3]
        code, res = ext.post(verb, _mutate(rng, seeds[verb]), raw=True)
        assert code in (200, 400), (verb, code)
        assert isinstance(res, (dict, list))
    assert ext.proc.poll() is None
    assert ext.get("/healthz")[0] == 200


def test_health_readiness_and_metrics(api, start):
    api.put("Node", node_obj("gpu-a"))
    ext = start()
    assert ext.get("/healthz") == (200, "ok\n")
    assert ext.get("/readyz")[0] == 200
    ext.post("filter", args_names(pod_obj("m", 1, 1024), ["gpu-a", "ghost"]))
    ext.post("prioritize", args_names(pod_obj("m", 1, 1024), ["gpu-a"]))
    code, text = ext.get("/metrics")
    assert code == 200
    assert 'gpuslice_extender_requests_total{verb="filter"} 1' in text
    assert 'gpuslice_extender_requests_total{verb="prioritize"} 1' in text
    assert 'gpuslice_extender_filter_nodes_total{result="passed"} 1' in text
    assert 'gpuslice_extender_filter_nodes_total{result="failed"} 1' in text
    assert 'gpuslice_extender_latency_seconds_count{verb="filter"} 1' in text
    assert "gpuslice_extender_ready 1" in text


def test_fast_path_answers_equal_the_general_path(api, start):
    """filter/prioritize take kube-scheduler's usual body ({"Pod", "Nodes": null,
    "NodeNames"}) on a fast path (no JSON tree for the names, answer written as
    text); any other body shape takes the general (jansson) path. Both must give
    the same answers, whatever the whitespace and key order."""
    cluster(api)
    for i in range(6):
        api.put("Node", node_obj(f"extra-{i}", ngpus=2 + i % 3))
    ext = start()
    ext.wait_state(lambda s: len(s["nodes"]) == 9 and
                   sum(m for m, _ in gpu_usage(s, "gpu-full")) == 4 * (81920 - 4096))
    names = ["gpu-a", "gpu-full", "cpu-only", "ghost"] + [f"extra-{i}" for i in range(6)]
    shapes = [(1, 8192, 30), (4, 16384, 25), (1, None, None), (2, 81920, 100), (None, None, None)]
    for k, (g, m, c) in enumerate(shapes):
        pod = pod_obj(f"eq-{k}", g, m, c)  # gpus=None: a pod without GPUs
        fast = args_names(pod, names)
        reordered = json.dumps({"NodeNames": names, "Nodes": None, "Pod": pod}, indent=2).encode()
        general = dict(fast, Extra=None)  # an unknown key: the general path
        escaped = json.dumps(fast).replace('"ghost"', '"gh\\u006fst"').encode()  # general too
        for verb in ("filter", "prioritize"):
            want = ext.post(verb, general)
            assert want[0] == 200
            assert ext.post(verb, fast) == want
            assert ext.post(verb, reordered, raw=True) == want
            assert ext.post(verb, escaped, raw=True) == want
        f = ext.post("filter", fast)[1]
        assert f["Error"] == "" and set(f["NodeNames"]) | set(f["FailedNodes"]) | \
            set(f["FailedAndUnresolvableNodes"]) == set(names)
    # Errors: a malformed pod answers the same on both paths (filter: 200 +
    # Error; prioritize: 400), and a truncated body still gets the parser's 400.
    bad_pod = pod_obj("bad", 1, 8192, 150)
    for verb, code in (("filter", 200), ("prioritize", 400)):
        want = ext.post(verb, dict(args_names(bad_pod, names), Extra=None))
        assert want[0] == code and "gpu-cores" in want[1]["Error"]
        assert ext.post(verb, args_names(bad_pod, names)) == want
    body = json.dumps(args_names(pod_obj("t", 1, 8192, 30), names)).encode()
    code, res = ext.post("filter", body[:-1], raw=True)
    assert code == 400 and "not JSON" in res["Error"]
    # Both paths count their error answers alike in the metrics.
    metrics = ext.get("/metrics")[1]
    assert 'gpuslice_extender_errors_total{verb="filter"} 3\n' in metrics
    assert 'gpuslice_extender_errors_total{verb="prioritize"} 2\n' in metrics
