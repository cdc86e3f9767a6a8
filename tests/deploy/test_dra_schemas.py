"""The DRA objects, against the official schemas of Kubernetes 1.36
(kubernetes-validate, strict: unknown fields are errors) and the CDI spec's
schema (cdi_spec.schema.json, re-typed): the chart's DeviceClass and
ResourceClaimTemplates as Helm renders them with dra.enabled=true (and the
node agent's DaemonSet and RBAC in DRA mode), and what the real node agent
and the test allocator made in tests/k8s/test_dra.py (every body the agent
sent the API stand-in; the ResourceSlices it published, healthy and with a
GPU gone; a claim allocated from the chart's template; the claim's CDI spec),
saved under $GS_DRA_OBJECTS."""
import glob
import json
import os

import jsonschema
import kubernetes_validate
import pytest
import yaml

import render

K8S_VERSION = "1.36.0"  # resource.k8s.io/v1 with consumable capacity (beta, on by default)
HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
OBJECTS = os.environ.get("GS_DRA_OBJECTS", "")


def chart(*sets):
    objs = []
    for text in render.render(sets).values():
        objs += [o for o in yaml.safe_load_all(text) if o]
    return objs


@pytest.fixture(scope="module")
def dra_chart():
    return chart("dra.enabled=true")


def saved(pattern):
    files = sorted(glob.glob(os.path.join(OBJECTS, pattern)))
    assert files, f"no {pattern} under {OBJECTS!r}: run tests/k8s's k8s_dra first (ctest does, fixture dra_objects)"
    return [(os.path.basename(f), json.load(open(f))) for f in files]


def test_chart_in_dra_mode_against_the_official_schemas(dra_chart):
    for o in dra_chart:
        kubernetes_validate.validate(o, K8S_VERSION, strict=True)
    kinds = [o["kind"] for o in dra_chart]
    assert kinds.count("DeviceClass") == 1 and kinds.count("ResourceClaimTemplate") == 3


def test_plain_dra_manifests_are_the_chart_rendered(dra_chart):
    with open(os.path.join(ROOT, "deploy", "dra", "gpuslice-dra.yaml")) as f:
        plain = [o for o in yaml.safe_load_all(f) if o]
    assert plain == [o for o in dra_chart if o["apiVersion"] == "resource.k8s.io/v1"
                     or o["metadata"]["name"] == "gpuslice-node-agent-slices"]


def test_agent_publishes_only_its_own_nodes_slice(dra_chart):
    """The chart's ValidatingAdmissionPolicy for ResourceSlices, evaluated
    by a real CEL engine as the API server would (test_schemas_cel.py)."""
    from test_schemas_cel import AGENT, policy_allows, request
    policy = next(o for o in dra_chart if o["kind"] == "ValidatingAdmissionPolicy"
                  and o["metadata"]["name"] == "gpuslice-node-agent-slices")
    binding = next(o for o in dra_chart if o["kind"] == "ValidatingAdmissionPolicyBinding"
                   and o["metadata"]["name"] == "gpuslice-node-agent-slices")
    assert binding["spec"]["validationActions"] == ["Deny"] and policy["spec"]["failurePolicy"] == "Fail"
    (_, s), _ = saved("resourceslice*.json")  # what the agent published for node-a

    def req(user, claim, op="CREATE"):
        r = request(user, "resourceslices", claim)
        r["operation"] = op
        r["resource"]["group"] = "resource.k8s.io"
        return r

    def other(**spec):
        o = json.loads(json.dumps(s))
        o["spec"].update(spec)
        return o

    assert policy_allows(policy, req(AGENT, "node-a"), s, None)
    assert policy_allows(policy, req(AGENT, "node-a", "UPDATE"), s, s)
    assert not policy_allows(policy, req(AGENT, "node-b"), s, None)
    assert not policy_allows(policy, req(AGENT, None), s, None)
    assert not policy_allows(policy, req(AGENT, "node-a"), other(driver="gpu.nvidia.com"), None)
    assert not policy_allows(policy, req(AGENT, "node-a"), other(pool={"name": "node-b", "generation": 1,
                                                                       "resourceSliceCount": 1}), None)
    noname = other()
    del noname["spec"]["nodeName"]
    noname["spec"]["allNodes"] = True
    assert not policy_allows(policy, req(AGENT, "node-a"), noname, None)
    assert policy_allows(policy, req("system:serviceaccount:x:other-driver", None), other(driver="x.io"), None)


def test_node_agent_in_dra_mode(dra_chart):
    ds = next(o for o in dra_chart if o["kind"] == "DaemonSet" and o["metadata"]["name"] == "gpuslice-node")
    c = ds["spec"]["template"]["spec"]["containers"][0]
    assert {"--dra", "--dra-driver=gpu.gpuslice.io", "--cdi-dir=/var/run/cdi"} <= set(c["args"])
    mounts = {m["mountPath"] for m in c["volumeMounts"]}
    assert {"/var/lib/kubelet/plugins_registry", "/var/lib/kubelet/plugins", "/var/run/cdi"} <= mounts
    assert "/var/lib/kubelet/device-plugins" not in mounts
    role = next(o for o in dra_chart if o["kind"] == "ClusterRole" and o["metadata"]["name"] == "gpuslice-node")
    rules = {(r["apiGroups"][0], r["resources"][0]): set(r["verbs"]) for r in role["rules"]}
    assert rules[("resource.k8s.io", "resourceslices")] == {"get", "create", "update"}
    assert rules[("resource.k8s.io", "resourceclaims")] == {"get"}


def test_dra_node_pool_beside_device_plugin_nodes():
    """dra.nodeSelector: the device plugin stays on gpuslice.io/enabled=true
    nodes (extended-resource pods), the DRA driver runs as gpuslice-node-dra
    on the selected nodes, its metrics port under a NetworkPolicy too."""
    objs = chart("dra.enabled=true", "dra.nodeSelector.gpuslice\\.io/pool=dra")
    for o in objs:
        kubernetes_validate.validate(o, K8S_VERSION, strict=True)
    ds = {o["metadata"]["name"]: o["spec"]["template"]["spec"] for o in objs if o["kind"] == "DaemonSet"}
    assert ds["gpuslice-node"]["nodeSelector"] == {"gpuslice.io/enabled": "true"}
    assert ds["gpuslice-node-dra"]["nodeSelector"] == {"gpuslice.io/pool": "dra"}
    assert "--dra" not in ds["gpuslice-node"]["containers"][0]["args"]
    assert "--dra" in ds["gpuslice-node-dra"]["containers"][0]["args"]
    mounts = {m["mountPath"] for m in ds["gpuslice-node"]["containers"][0]["volumeMounts"]}
    assert "/var/lib/kubelet/device-plugins" in mounts and "/var/run/cdi" not in mounts
    sel = {o["metadata"]["name"]: o["spec"]["podSelector"]["matchLabels"] for o in objs if o["kind"] == "NetworkPolicy"}
    assert sel["gpuslice-node-dra"] == {"app.kubernetes.io/name": "gpuslice-node-dra"}
    labels = next(o for o in objs if o["kind"] == "DaemonSet" and o["metadata"]["name"] == "gpuslice-node-dra")
    assert labels["spec"]["template"]["metadata"]["labels"] == sel["gpuslice-node-dra"]


def test_dra_is_off_by_default():
    objs = chart()
    assert not [o for o in objs if o["apiVersion"].startswith("resource.k8s.io")]
    ds = next(o for o in objs if o["kind"] == "DaemonSet" and o["metadata"]["name"] == "gpuslice-node")
    assert "--dra" not in ds["spec"]["template"]["spec"]["containers"][0]["args"]


@pytest.mark.parametrize("bad", ["dra.driver=Not_A_Domain", "dra.driver=nodots",
                                 "dra.exampleClaimTemplates.claims[0].memory=1000",
                                 "dra.exampleClaimTemplates.claims[0].cores=101",
                                 "dra.cdiDir=relative/cdi", "dra.enabled=yes"])
def test_values_schema_refuses_bad_dra_values(bad):
    with pytest.raises(render.RenderError):
        render.render(("dra.enabled=true", bad))


def test_published_resource_slices_against_the_official_schema():
    got = saved("resourceslice*.json")
    assert len(got) == 2  # all GPUs healthy; one GPU left out after a critical XID
    for name, s in got:
        kubernetes_validate.validate(s, K8S_VERSION, strict=True)


def test_every_body_the_agent_sent_against_the_official_schema():
    """What the agent POSTed and PUT to the API stand-in: its ResourceSlice,
    created, then replaced on health changes with its resourceVersion."""
    bodies = []
    for f in sorted(glob.glob(os.path.join(OBJECTS, "api-bodies", "*.jsonl"))):
        bodies += [json.loads(line) for line in open(f)]
    assert {b["method"] for b in bodies} == {"POST", "PUT"}, [(b["method"], b["path"]) for b in bodies]
    for b in bodies:
        assert b["path"].startswith("/apis/resource.k8s.io/v1/resourceslices"), b["path"]
        obj = json.loads(b["body"])
        assert obj["kind"] == "ResourceSlice" and ("resourceVersion" in obj["metadata"]) == (b["method"] == "PUT")
        kubernetes_validate.validate(obj, K8S_VERSION, strict=True)


def test_allocated_claim_against_the_official_schema():
    ((_, share),) = saved("resourceclaim-share.json")  # with its opaque configuration, FromClaim
    kubernetes_validate.validate(share, K8S_VERSION, strict=True)
    assert share["status"]["allocation"]["devices"]["config"][0]["opaque"]["parameters"]["mode"] == "share"
    ((_, c),) = saved("resourceclaim-allocated.json")
    kubernetes_validate.validate(c, K8S_VERSION, strict=True)
    r = c["status"]["allocation"]["devices"]["results"][0]
    assert r["consumedCapacity"] == {"memory": "4Gi", "cores": "30"} and r["shareID"]


def test_cdi_spec_against_the_cdi_schema():
    schema = json.load(open(os.path.join(HERE, "cdi_spec.schema.json")))
    ((_, spec),) = saved("cdi-spec.json")
    jsonschema.validate(spec, schema)
    assert spec["kind"] == "gpuslice.io/gpu" and len(spec["devices"]) == 1


def test_the_schema_checks_are_real():
    (_, s), _ = saved("resourceslice*.json")
    bad = json.loads(json.dumps(s))
    bad["spec"]["devices"][0]["capacity"]["memory"]["requestPolicy"]["validRange"]["stepp"] = "1Mi"
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(bad, K8S_VERSION, strict=True)
    bad = json.loads(json.dumps(s))
    bad["spec"]["devices"][0]["allowMultipleAllocations"] = "yes"
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(bad, K8S_VERSION, strict=True)
    schema = json.load(open(os.path.join(HERE, "cdi_spec.schema.json")))
    ((_, spec),) = saved("cdi-spec.json")
    for mutate in (lambda x: x.update(kind="gpuslice.io"), lambda x: x["devices"][0].update(name="-x"),
                   lambda x: x["devices"][0]["containerEdits"]["env"].append("NOEQUALS"),
                   lambda x: x["devices"][0]["containerEdits"]["mounts"][0].update(hostPath="rel")):
        bad = json.loads(json.dumps(spec))
        mutate(bad)
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.validate(bad, schema)
