"""End to end on one simulated GPU node: the real node agent (simulated
NVML/CUDA, kubelet stand-in) publishes its inventory; the real extender
filters, prioritises and binds a pod; kubelet's GetPreferredAllocation,
Allocate and PreStartContainer then give the container the chosen GPU and
limits (the limits in limits.conf, written at PreStartContainer)."""
import importlib.util
import json
import os

import pytest

import apiserver_ext
from conftest import Extender, args_names, bind_args, gpu_usage, node_obj, pod_obj

K8S = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "k8s")


def _k8s():
    spec = importlib.util.spec_from_file_location("k8s_conftest", os.path.join(K8S, "conftest.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture
def gpu_node(tmp_path):
    k8s = _k8s()
    if not k8s.AGENT or not os.path.exists(k8s.AGENT):
        pytest.fail("GPUSLICE_NODE_AGENT is not set (run through ctest)")
    k8s._gen_protos(str(tmp_path / "gen"))
    apiserver_ext.install()  # the node fixture builds our extended stand-in
    n = k8s.GpuNode(tmp_path)
    n.start_agent()
    yield k8s, n
    n.close()


def test_pod_goes_filter_prioritize_bind_allocate(gpu_node, tmp_path):
    k8s, node = gpu_node
    api = node.api
    uuids = node.uuids()  # the agent published gpuslice.io/gpu-inventory
    api.put("Node", node_obj("cpu-1", ngpus=0))
    ext = Extender(api, tmp_path, "e2e")
    try:
        ext.wait_state(lambda s: len(gpu_usage(s, k8s.NODE)) == k8s.NGPUS)
        pods, answers = [], []
        for i, (mem, cores) in enumerate([(8192, 30), (4096, 50), (20000, 10)]):
            pod = api.put("Pod", pod_obj(f"infer-{i}", 1, mem, cores))
            res = ext.post("filter", args_names(pod, [k8s.NODE, "cpu-1"]))[1]
            assert res["Error"] == "" and res["NodeNames"] == [k8s.NODE]
            pr = ext.post("prioritize", args_names(pod, res["NodeNames"]))[1]
            assert pr == [{"Host": k8s.NODE, "Score": 10}]
            assert ext.post("bind", bind_args(pod, k8s.NODE))[1] == {"Error": ""}
            got = api.get("Pod", pod["metadata"]["name"], "default")
            assert got["spec"]["nodeName"] == k8s.NODE
            a = json.loads(got["metadata"]["annotations"]["gpuslice.io/assignment"])
            assert a["gpus"][0]["uuid"] in uuids
            pods.append((got, a, mem, cores))
        # binpack: all three share one GPU, on distinct replicas.
        assert len({a["gpus"][0]["uuid"] for _, a, _, _ in pods}) == 1
        for got, a, mem, cores in pods:
            ids, resp = node.kubelet.admit(got["metadata"]["name"])
            assert ids == a["replicas"]
            env = dict(resp.envs)
            assert env["NVIDIA_VISIBLE_DEVICES"] == a["gpus"][0]["uuid"]
            lim = node.limits(resp)
            assert lim["GPUSLICE_MEMORY_LIMIT_0"] == f"{mem}Mi"
            assert lim["GPUSLICE_CORES_0"] == str(cores)
            assert lim["GPUSLICE_CONTAINER"] == f"default/{got['metadata']['name']}/main"
        # Deleting a pod frees its share in the extender's cache.
        api.delete("Pod", "infer-0", "default")
        ext.wait_state(lambda s: sum(m for m, _ in gpu_usage(s, k8s.NODE)) == 4096 + 20000,
                       what="infer-0 freed")
    finally:
        ext.stop()
