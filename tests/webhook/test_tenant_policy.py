"""The webhook's tenant policy (src/webhook/tenant_policy.c): a GPU pod may not set
the environment variables that carry limits (in any container kind, whatever the
value's source), while the CUDA variables real jobs set and an allocator's
LD_PRELOAD pass; gpuslice.io/ annotations are written by gpuslice's own service
accounts alone, at CREATE and at UPDATE."""
import copy
import uuid

import pytest

from test_webhook import Webhook, answer, certs, pod, wh  # noqa: F401 (fixtures)

TENANT = "system:serviceaccount:ml:deployer"
EXTENDER = "system:serviceaccount:gpuslice-system:gpuslice-extender"
AGENT = "system:serviceaccount:kube-system:gpuslice-node"


def review(obj, op="CREATE", old=None, user=TENANT, sub=None):
    req = {"uid": str(uuid.uuid4()),
           "kind": {"group": "", "version": "v1", "kind": "Pod"},
           "resource": {"group": "", "version": "v1", "resource": "pods"},
           "name": obj["metadata"]["name"], "namespace": "ml", "operation": op,
           "userInfo": {"username": user, "uid": "5e6f", "groups": ["system:authenticated"]},
           "object": obj, "oldObject": old, "dryRun": False}
    if sub:
        req["subResource"] = sub
    return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": req}


def decide(w, rev, path="/validate"):
    st, body = w.review(rev, path)
    assert st == 200
    return answer(body, rev)


def with_env(p, kind="containers", env=None, env_from=None):
    p = copy.deepcopy(p)
    if kind == "containers":
        c = p["spec"]["containers"][0]
    else:
        c = {"name": "side", "image": "busybox"}
        p["spec"][kind] = [c]
    if env is not None:
        c["env"] = env
    if env_from is not None:
        c["envFrom"] = env_from
    return p


@pytest.mark.parametrize("name", [
    "GPUSLICE_MEMORY_LIMIT", "GPUSLICE_CORES_0", "GPUSLICE_CONFIG", "GPUSLICE_REGION",
    "gpuslice_memory_limit", "GPUSLICE_ANYTHING", "CUDA_DEVICE_MEMORY_LIMIT",
    "CUDA_DEVICE_MEMORY_LIMIT_1", "CUDA_DEVICE_SM_LIMIT", "CUDA_DEVICE_SM_LIMIT_15",
    "CUDA_DEVICE_MEMORY_SHARED_CACHE", "GPU_CORE_UTILIZATION_POLICY", "NVIDIA_VISIBLE_DEVICES"])
@pytest.mark.parametrize("kind", ["containers", "initContainers", "ephemeralContainers"])
def test_limit_variables_refused(wh, name, kind):
    p = with_env(pod(cores="30"), kind, env=[{"name": "OK", "value": "1"},
                                             {"name": name, "value": "80000Mi"}])
    for path in ("/mutate", "/validate"):
        r = decide(wh, review(p), path)
        assert r["allowed"] is False, r
        msg = r["status"]["message"]
        assert f'spec.{kind}[0].env[1].name "{name}": may not be set in a gpuslice pod' in msg, msg


def test_value_from_refused_too(wh):
    env = [{"name": "GPUSLICE_MEMORY_LIMIT",
            "valueFrom": {"configMapKeyRef": {"name": "limits", "key": "mem"}}}]
    r = decide(wh, review(with_env(pod(cores="30"), env=env)))
    assert r["allowed"] is False and "GPUSLICE_MEMORY_LIMIT" in r["status"]["message"]


def test_real_job_variables_pass(wh):
    env = [{"name": n, "value": v} for n, v in (
        ("CUDA_DEVICE_MAX_CONNECTIONS", "1"), ("CUDA_DEVICE_ORDER", "PCI_BUS_ID"),
        ("CUDA_VISIBLE_DEVICES", "0"), ("CUDA_MODULE_LOADING", "LAZY"),
        ("CUDA_LAUNCH_BLOCKING", "0"), ("LIBCUDA_LOG_LEVEL", "0"),
        ("LD_PRELOAD", "/usr/lib/x86_64-linux-gnu/libtcmalloc_minimal.so.4"),
        ("NCCL_DEBUG", "INFO"), ("MY_GPUSLICE_NOTE", "x"))]
    env.append({"name": "POD_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}})
    env_from = [{"prefix": "APP_", "configMapRef": {"name": "app"}}]
    r = decide(wh, review(with_env(pod(cores="30"), env=env, env_from=env_from)), "/mutate")
    assert r["allowed"] is True, r


@pytest.mark.parametrize("prefix,ok", [
    (None, False), ("", False), ("GPU", False), ("gpuslice_", False), ("GPUSLICE_X_", False),
    ("CUDA_", False), ("CUDA_DEVICE_SM_LIMIT_", False), ("NVIDIA_", False),
    ("APP_", True), ("CUDA_DEVICE_MAX_", True), ("GPU_CORE_UTILIZATION_POLICYX", True)])
def test_env_from_needs_a_safe_prefix(wh, prefix, ok):
    src = {"secretRef": {"name": "tokens"}}
    if prefix is not None:
        src["prefix"] = prefix
    r = decide(wh, review(with_env(pod(cores="30"), env_from=[src])))
    assert r["allowed"] is ok, r
    if not ok:
        assert "spec.containers[0].envFrom[0]: prefix" in r["status"]["message"]


def test_non_gpu_pod_env_untouched(wh):
    p = with_env(pod(gpus=None, mem=None), env=[{"name": "GPUSLICE_MEMORY_LIMIT", "value": "1G"}],
                 env_from=[{"configMapRef": {"name": "x"}}])
    assert decide(wh, review(p))["allowed"] is True


# Issue 27, finding 5: a pod with no gpuslice.io/ resource that names GPUs for the
# NVIDIA runtime (env-var mode) would get them with no interposer.
@pytest.mark.parametrize("name,value", [
    ("NVIDIA_VISIBLE_DEVICES", "all"), ("NVIDIA_VISIBLE_DEVICES", "0,1"),
    ("NVIDIA_VISIBLE_DEVICES", "GPU-1"), ("NVIDIA_MIG_CONFIG_DEVICES", "all"),
    ("NVIDIA_MIG_MONITOR_DEVICES", "all"), ("NVIDIA_IMEX_CHANNELS", "all")])
@pytest.mark.parametrize("kind", ["containers", "initContainers", "ephemeralContainers"])
def test_non_gpu_pod_may_not_pick_gpus(wh, name, value, kind):
    p = with_env(pod(gpus=None, mem=None), kind, env=[{"name": "OK", "value": "1"},
                                                     {"name": name, "value": value}])
    for path in ("/mutate", "/validate"):
        r = decide(wh, review(p), path)
        assert r["allowed"] is False, r
        msg = r["status"]["message"]
        assert (f'spec.{kind}[0].env[1].name "{name}": may not be set in a pod without '
                'gpuslice.io/ resources') in msg, msg


def test_non_gpu_pod_gpu_variables_that_give_no_gpu_pass(wh):
    env = [{"name": "NVIDIA_VISIBLE_DEVICES", "value": v} for v in ("void", "none", "")]
    env += [{"name": "CUDA_VISIBLE_DEVICES", "value": "0"},
            {"name": "NVIDIA_DRIVER_CAPABILITIES", "value": "compute,utility"}]
    for e in env:
        assert decide(wh, review(with_env(pod(gpus=None, mem=None), env=[e])))["allowed"] is True, e
    # From a ConfigMap or Secret the value is unknown: refused like "all".
    vf = [{"name": "NVIDIA_VISIBLE_DEVICES", "valueFrom": {"configMapKeyRef": {"name": "x", "key": "k"}}}]
    assert decide(wh, review(with_env(pod(gpus=None, mem=None), env=vf)))["allowed"] is False


def test_debug_container_may_not_pick_gpus(wh):
    before = pod(gpus=None, mem=None)
    after = with_env(before, "ephemeralContainers", env=[{"name": "NVIDIA_VISIBLE_DEVICES", "value": "all"}])
    r = decide(wh, review(after, op="UPDATE", old=before, sub="ephemeralcontainers"))
    assert r["allowed"] is False and "spec.ephemeralContainers[0].env[0]" in r["status"]["message"], r


def test_ephemeral_container_added_later(wh):
    before = pod(cores="30")
    after = with_env(before, "ephemeralContainers",
                     env=[{"name": "CUDA_DEVICE_MEMORY_LIMIT", "value": "80G"}])
    r = decide(wh, review(after, op="UPDATE", old=before, sub="ephemeralcontainers"))
    assert r["allowed"] is False and "spec.ephemeralContainers[0].env[0]" in r["status"]["message"]
    ok = with_env(before, "ephemeralContainers", env=[{"name": "TERM", "value": "xterm"}])
    assert decide(wh, review(ok, op="UPDATE", old=before, sub="ephemeralcontainers"))["allowed"]


ASSIGNMENT = ('{"v":1,"node":"n1","gpus":[{"uuid":"GPU-1","memory_mib":80000,"cores":100}],'
              '"replicas":["GPU-1::0"]}')


def test_create_with_gpuslice_annotations(wh):
    p = pod(cores="30", annotations={"gpuslice.io/scheduling": '{"v":1}'})
    assert decide(wh, review(p), "/mutate")["allowed"] is True
    forged = pod(cores="30", annotations={"gpuslice.io/assignment": ASSIGNMENT})
    r = decide(wh, review(forged), "/mutate")
    assert r["allowed"] is False
    assert r["status"]["message"] == ("gpuslice: pod ml/infer-0: annotation gpuslice.io/assignment may be "
                                      f"set only by gpuslice's service accounts, not by {TENANT}")
    # Also on a pod that asks for no GPU (it could be bound to a node by hand).
    r = decide(wh, review(pod(gpus=None, mem=None, annotations={"gpuslice.io/allocated": "{}"})))
    assert r["allowed"] is False
    assert decide(wh, review(forged, user=EXTENDER))["allowed"] is True


@pytest.mark.parametrize("change,verb", [
    (lambda a: a.update({"gpuslice.io/assignment": ASSIGNMENT.replace("80000", "1000")}), "changed"),
    (lambda a: a.pop("gpuslice.io/assignment"), "removed"),
    (lambda a: a.update({"gpuslice.io/allocated": "{}"}), "changed"),
    (lambda a: a.update({"gpuslice.io/scheduling": '{"v":1,"mode":"share"}'}), "changed"),
])
def test_tenant_cannot_edit_gpuslice_annotations(wh, change, verb):
    before = pod(cores="30", annotations={"gpuslice.io/assignment": ASSIGNMENT, "team": "a"})
    after = copy.deepcopy(before)
    change(after["metadata"]["annotations"])
    r = decide(wh, review(after, op="UPDATE", old=before))
    assert r["allowed"] is False, r
    assert f"may be {verb} only by gpuslice's service accounts, not by {TENANT}" in r["status"]["message"]
    # gpuslice's own accounts may.
    for user in (EXTENDER, AGENT):
        assert decide(wh, review(after, op="UPDATE", old=before, user=user))["allowed"] is True


def test_tenant_may_edit_other_annotations(wh):
    before = pod(cores="30", annotations={"gpuslice.io/assignment": ASSIGNMENT, "team": "a"})
    after = copy.deepcopy(before)
    after["metadata"]["annotations"]["team"] = "b"
    after["metadata"]["labels"]["tier"] = "gold"
    assert decide(wh, review(after, op="UPDATE", old=before))["allowed"] is True
    # No username at all is nobody's service account.
    after["metadata"]["annotations"]["gpuslice.io/assignment"] = "{}"
    r = decide(wh, review(after, op="UPDATE", old=before, user=None))
    assert r["allowed"] is False and "not by (no username)" in r["status"]["message"]


def test_annotation_writers_flag(certs, tmp_path):  # noqa: F811
    w = Webhook(certs, tmp_path, ["--annotation-writer=system:serviceaccount:ops:gpuslice-x"])
    try:
        before = pod(cores="30", annotations={"gpuslice.io/assignment": ASSIGNMENT})
        after = copy.deepcopy(before)
        after["metadata"]["annotations"]["gpuslice.io/assignment"] = "{}"
        assert decide(w, review(after, op="UPDATE", old=before,
                                user="system:serviceaccount:ops:gpuslice-x"))["allowed"] is True
        # The flag replaces the defaults.
        assert decide(w, review(after, op="UPDATE", old=before, user=EXTENDER))["allowed"] is False
    finally:
        w.stop()
