"""End to end on one simulated GPU node: the real node agent (simulated
NVML/CUDA, kubelet stand-in) publishes its inventory; the real extender
filters, prioritises and binds a pod; kubelet's GetPreferredAllocation,
Allocate and PreStartContainer then give the container the chosen GPU and
limits (the limits in limits.conf, written at PreStartContainer). The second
test starts one step earlier: the pod is first admitted (mutated) by the real
webhook over HTTPS, as kube-apiserver would do at creation."""
import importlib.util
import json
import os
import subprocess

import pytest

import apiserver_ext
from conftest import Extender, args_names, bind_args, gpu_usage, node_obj, pod_obj

K8S = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "k8s")
WEBHOOK_TESTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "webhook")


def _k8s():
    spec = importlib.util.spec_from_file_location("k8s_conftest", os.path.join(K8S, "conftest.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _webhook_helpers():
    """tests/webhook's Webhook process wrapper and AdmissionReview helpers."""
    spec = importlib.util.spec_from_file_location(
        "webhook_tests", os.path.join(WEBHOOK_TESTS, "test_webhook.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _certs(d):
    """A throwaway CA and a serving certificate for 127.0.0.1/localhost."""
    d.mkdir()
    run = lambda *a: subprocess.run(a, cwd=d, check=True, capture_output=True)  # noqa: E731
    run("openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
        "-subj", "/CN=gpuslice-e2e-ca", "-keyout", "ca.key", "-out", "ca.crt")
    (d / "ext.cnf").write_text("subjectAltName=DNS:localhost,IP:127.0.0.1\n"
                               "extendedKeyUsage=serverAuth\n")
    run("openssl", "req", "-newkey", "rsa:2048", "-nodes", "-subj", "/CN=gpuslice-webhook",
        "-keyout", "tls.key", "-out", "tls.csr")
    run("openssl", "x509", "-req", "-in", "tls.csr", "-CA", "ca.crt", "-CAkey", "ca.key",
        "-CAcreateserial", "-days", "1", "-extfile", "ext.cnf", "-out", "tls.crt")
    return d


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
    ext = Extender(api, tmp_path, "e2e", args=("--gpu-policy", "binpack"))
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


def test_pod_goes_webhook_filter_prioritize_bind_allocate(gpu_node, tmp_path):
    """webhook /mutate (schedulerName, default gpu-cores) -> the API server stores
    the patched pod -> extender filter, prioritize, bind -> kubelet
    Allocate + PreStartContainer: the container gets the bound GPU and the
    limits the webhook defaulted."""
    k8s, node = gpu_node
    api = node.api
    uuids = node.uuids()
    api.put("Node", node_obj("cpu-1", ngpus=0))
    wt = _webhook_helpers()
    wh = wt.Webhook(_certs(tmp_path / "certs"), tmp_path)
    ext = Extender(api, tmp_path, "e2e-wh")
    try:
        ext.wait_state(lambda s: len(gpu_usage(s, k8s.NODE)) == k8s.NGPUS)
        # As a user writes it: memory only, the default scheduler.
        raw = wt.pod(gpus="1", mem="12288", cores=None, name="infer-wh")
        rev = wt.review(raw)
        code, body = wh.review(rev, "/mutate")
        r = wt.answer(body, rev)
        assert code == 200 and r["allowed"] is True
        mutated = wt.json_patch(raw, wt.decoded_patch(r))
        assert mutated["spec"]["schedulerName"] == "gpuslice-scheduler"
        lim = mutated["spec"]["containers"][0]["resources"]["limits"]
        assert lim["gpuslice.io/gpu-cores"] == "10"
        # A pod the webhook refuses never exists, so never reaches the extender.
        bad = wt.review(wt.pod(gpus="1", mem="4096", cores="150", name="bad"))
        assert wt.answer(wh.review(bad, "/mutate")[1], bad)["allowed"] is False

        pod = api.put("Pod", mutated)
        ns, name = "ml", "infer-wh"
        res = ext.post("filter", args_names(pod, ["cpu-1", k8s.NODE]))[1]
        assert res["Error"] == "" and res["NodeNames"] == [k8s.NODE]
        assert "no GPU inventory" in res["FailedAndUnresolvableNodes"]["cpu-1"]
        pr = ext.post("prioritize", args_names(pod, res["NodeNames"]))[1]
        assert pr == [{"Host": k8s.NODE, "Score": 10}]
        assert ext.post("bind", bind_args(pod, k8s.NODE))[1] == {"Error": ""}
        got = api.get("Pod", name, ns)
        assert got["spec"]["nodeName"] == k8s.NODE
        a = json.loads(got["metadata"]["annotations"]["gpuslice.io/assignment"])
        assert a["node"] == k8s.NODE and len(a["gpus"]) == 1
        assert a["gpus"][0]["uuid"] in uuids
        assert (a["gpus"][0]["memory_mib"], a["gpus"][0]["cores"]) == (12288, 10)

        ids, resp = node.kubelet.admit(name, ns=ns)
        assert ids == a["replicas"]
        env = dict(resp.envs)
        assert env["NVIDIA_VISIBLE_DEVICES"] == a["gpus"][0]["uuid"]
        limits = node.limits(resp)
        assert limits["GPUSLICE_MEMORY_LIMIT_0"] == "12288Mi"
        assert limits["GPUSLICE_CORES_0"] == "10"
        assert limits["GPUSLICE_CONTAINER"] == f"{ns}/{name}/main"
        ext.wait_state(lambda s: sum(m for m, _ in gpu_usage(s, k8s.NODE)) == 12288,
                       what="infer-wh counted")
    finally:
        ext.stop()
        wh.stop()
