"""The usage cache: deletes free shares, a restart rebuilds the same state,
two replicas never double-book a GPU (claims on the Node are conditional on
its resourceVersion), and a compacted watch history forces a clean re-list."""
import collections
import concurrent.futures as cf
import json
import time

from conftest import bind_args, gpu_usage, node_obj, pod_obj


def canon(state):
    for n in state["nodes"]:
        for g in n["gpus"]:
            g["pods"] = sorted(g["pods"], key=lambda p: p["pod"])
    return sorted(state["nodes"], key=lambda n: n["name"])


def bind_many(api, ext, names, node, mem=8192, cores=10):
    out = {}
    for n in names:
        p = api.put("Pod", pod_obj(n, 1, mem, cores))
        out[n] = ext.post("bind", bind_args(p, node))[1]["Error"]
    return out


def test_delete_and_finish_free_the_share(api, start):
    api.put("Node", node_obj("gpu-a"))
    ext = start()
    ext.wait_state(lambda s: len(s["nodes"]) == 1)
    assert bind_many(api, ext, ["a", "b"], "gpu-a") == {"a": "", "b": ""}
    ext.wait_state(lambda s: sum(m for m, _ in gpu_usage(s, "gpu-a")) == 2 * 8192)
    api.delete("Pod", "a", "default")
    ext.wait_state(lambda s: sum(m for m, _ in gpu_usage(s, "gpu-a")) == 8192, what="a freed")
    b = api.get("Pod", "b", "default")
    b["status"]["phase"] = "Succeeded"
    api.put("Pod", b)
    ext.wait_state(lambda s: gpu_usage(s, "gpu-a") == [(0, 0)] * 4, what="b freed")
    # The freed replica ID is handed out again.
    bind_many(api, ext, ["c"], "gpu-a")
    a = json.loads(api.get("Pod", "c", "default")["metadata"]["annotations"]["gpuslice.io/assignment"])
    assert a["replicas"][0].endswith("::0")


def test_restart_rebuilds_the_same_state(api, start):
    for n in ("gpu-a", "gpu-b"):
        api.put("Node", node_obj(n))
    ext = start("first")
    ext.wait_state(lambda s: len(s["nodes"]) == 2)
    errs = bind_many(api, ext, [f"p{i}" for i in range(6)], "gpu-a", mem=20480)
    errs.update(bind_many(api, ext, [f"q{i}" for i in range(3)], "gpu-b", mem=30000))
    assert set(errs.values()) == {""}
    api.delete("Pod", "p2", "default")
    before = ext.wait_state(lambda s: sum(m for m, _ in gpu_usage(s, "gpu-a")) == 5 * 20480)
    ext.kill()  # no graceful shutdown
    ext2 = start("second")
    after = ext2.wait_state(lambda s: sum(m for m, _ in gpu_usage(s, "gpu-a")) == 5 * 20480)
    assert canon(after) == canon(before)
    assert sum(m for m, _ in gpu_usage(after, "gpu-b")) == 3 * 30000


def test_a_list_comes_in_pages(api, start):
    """The cache is listed page by page, following each page's continue
    token (URL-escaped): one unpaged list of a large cluster's pods passed
    the client's 64 MiB bound and the extender never became ready. The
    stand-in answers at most three objects a page."""
    for n in ("gpu-a", "gpu-b"):
        api.put("Node", node_obj(n))
    ext = start("first")
    ext.wait_state(lambda s: len(s["nodes"]) == 2)
    errs = bind_many(api, ext, [f"p{i}" for i in range(7)], "gpu-a", mem=4096)
    assert set(errs.values()) == {""}
    before = ext.wait_state(lambda s: sum(m for m, _ in gpu_usage(s, "gpu-a")) == 7 * 4096)
    ext.kill()
    api.max_page = 3
    ext2 = start("paged")
    after = ext2.wait_state(lambda s: sum(m for m, _ in gpu_usage(s, "gpu-a")) == 7 * 4096 and
                            len(s["nodes"]) == 2)
    assert canon(after) == canon(before)
    pages = [p for m, p in api.requests if m == "GET" and p.startswith("/api/v1/pods?limit=")]
    follow = [p for p in pages if "&continue=" in p]
    assert len(follow) >= 2 and all("&continue=at%3D" in p and "%26rv%3D" in p for p in follow), pages


def test_compacted_watch_relists(api, start):
    api.put("Node", node_obj("gpu-a"))
    ext = start()
    ext.wait_state(lambda s: len(s["nodes"]) == 1)
    bind_many(api, ext, ["a"], "gpu-a")
    ext.stop()
    api.delete("Pod", "a", "default")
    api.compact()  # history gone: a watch from an old version gets 410
    ext2 = start("again")
    ext2.wait_state(lambda s: gpu_usage(s, "gpu-a") == [(0, 0)] * 4)


def test_two_replicas_never_double_book(api, start):
    """40 pods bound concurrently through two extender replicas to one node
    whose 4 GPUs hold exactly 40 such pods (10 replicas and 10 x 8 GiB each).
    Every replica ID and every MiB is handed out at most once; the 41st pod
    is refused."""
    api.put("Node", node_obj("gpu-a"))
    a, b = start("a"), start("b")
    for e in (a, b):
        e.wait_state(lambda s: len(s["nodes"]) == 1)
    pods = [api.put("Pod", pod_obj(f"p{i:02d}", 1, 8192, 10)) for i in range(40)]
    with cf.ThreadPoolExecutor(max_workers=8) as ex:
        futs = [ex.submit((a, b)[i % 2].post, "bind", bind_args(p, "gpu-a"))
                for i, p in enumerate(pods)]
        errors = [f.result()[1]["Error"] for f in futs]
    assert errors == [""] * 40, [e for e in errors if e]
    seen = collections.Counter()
    mem = collections.Counter()
    for p in pods:
        got = api.get("Pod", p["metadata"]["name"], "default")
        asg = json.loads(got["metadata"]["annotations"]["gpuslice.io/assignment"])
        seen[asg["replicas"][0]] += 1
        mem[asg["gpus"][0]["uuid"]] += asg["gpus"][0]["memory_mib"]
    assert max(seen.values()) == 1 and len(seen) == 40
    assert all(v <= 81920 for v in mem.values())
    extra = api.put("Pod", pod_obj("extra", 1, 8192, 10))
    err = b.post("bind", bind_args(extra, "gpu-a"))[1]["Error"]
    assert "no longer fits" in err
    for e in (a, b):
        e.wait_state(lambda s: gpu_usage(s, "gpu-a") == [(81920, 10)] * 4)
    assert api.conflicts > 0  # the replicas really raced for the node (about 12 per run)


def test_allocated_counts_the_gpu_really_held(api, start):
    """Once the node agent records gpuslice.io/allocated with replicas of
    another GPU than assigned (a cross-GPU swap it accepted because the pod
    fits there), the cache counts the pod's share on the GPU it really holds;
    its assigned replica ID stays reserved while it lives; an unusable
    allocated record falls back to the assignment."""
    api.put("Node", node_obj("gpu-a"))
    ext = start()
    ext.wait_state(lambda s: len(s["nodes"]) == 1)

    def put(name, uuid, k, mem, cores, allocated=None):
        ann = {"gpuslice.io/assignment": json.dumps(
            {"v": 1, "node": "gpu-a", "gpus": [{"uuid": uuid, "memory_mib": mem, "cores": cores}],
             "replicas": [f"{uuid}::{k}"]})}
        if allocated is not None:
            ann["gpuslice.io/allocated"] = allocated
        p = pod_obj(name, 1, mem, cores, annotations=ann)
        p["spec"]["nodeName"] = "gpu-a"
        try:
            p["metadata"]["uid"] = api.get("Pod", name, "default")["metadata"]["uid"]
        except (KeyError, TypeError):
            pass  # a new pod
        return api.put("Pod", p)

    put("old", "GPU-gpu-a-1", 0, 1000, 10)
    put("young", "GPU-gpu-a-2", 0, 2000, 30)
    ext.wait_state(lambda s: gpu_usage(s, "gpu-a") == [(0, 0), (1000, 1), (2000, 1), (0, 0)])
    held = json.dumps({"v": 1, "node": "gpu-a", "replicas": ["GPU-gpu-a-1::0"],
                       "time": "2026-01-01T00:00:00Z"})
    put("young", "GPU-gpu-a-2", 0, 2000, 30, allocated=held)
    s = ext.wait_state(lambda s: gpu_usage(s, "gpu-a") == [(0, 0), (3000, 2), (0, 0), (0, 0)],
                       what="young counted on GPU 1")
    g1 = next(n for n in s["nodes"] if n["name"] == "gpu-a")["gpus"][1]
    assert sorted((p["pod"], p["memory_mib"], p["milli"]) for p in g1["pods"]) == [
        ("default/old", 1000, 100), ("default/young", 2000, 300)]
    # New pods never get a replica ID a live pod names (assigned or held).
    for i in range(6):
        p = api.put("Pod", pod_obj(f"c{i}", 1, 1000, 5))
        assert ext.post("bind", bind_args(p, "gpu-a"))[1]["Error"] == ""
        a = json.loads(api.get("Pod", f"c{i}", "default")["metadata"]["annotations"][
            "gpuslice.io/assignment"])
        assert a["replicas"][0] not in ("GPU-gpu-a-1::0", "GPU-gpu-a-2::0"), a
    # An unusable allocated record: counted by the assignment again.
    put("young", "GPU-gpu-a-2", 0, 2000, 30, allocated='{"v":1,"replicas":["bogus"]}')
    ext.wait_state(lambda s: sum(m for m, _ in gpu_usage(s, "gpu-a")) == 9000 and
                   [p["pod"] for n in s["nodes"] for p in n["gpus"][2]["pods"]].count(
                       "default/young") == 1, what="young back on GPU 2")
    assert "gpuslice.io/allocated unusable" in ext.logtext()


def test_watch_that_closes_at_once_is_retried_with_backoff(api, start):
    """An API server (or proxy) that ends every watch at once with no event:
    without backoff the extender re-watched ~1,290 times in 4 s; with it,
    each of its two watches waits 0.1-0.2 s, then twice as long each time."""
    api.put("Node", node_obj("gpu-a"))
    ext = start()
    ext.wait_state(lambda s: len(s["nodes"]) == 1)
    before = len(api.requests)
    api.set_close_watches(True)
    time.sleep(4)
    with api.lock:
        got = api.requests[before:]
    watches = sum(1 for m, p in got if "watch=1" in p)
    assert 2 <= watches <= 16, f"{watches} watches in 4 s"
    assert len(got) <= 20, f"{len(got)} requests in 4 s"
    # It recovers once watches work again.
    api.set_close_watches(False)
    api.put("Node", node_obj("gpu-b"))
    ext.wait_state(lambda s: len(s["nodes"]) == 2, timeout=30, what="gpu-b seen")
