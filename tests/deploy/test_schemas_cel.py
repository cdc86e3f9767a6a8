"""deploy/manifests against the official Kubernetes OpenAPI-derived JSON schemas
(kubernetes-validate, strict: unknown fields are errors), and every CEL expression
in them (webhook matchConditions, ValidatingAdmissionPolicy variables and
validations) compiled and evaluated by a real CEL engine (cel-expr-python, the CEL
C++ implementation) against requests shaped like the API server's. Also the
node agent's DaemonSet: the mounts PreStartContainer needs, least privilege."""
import copy
import glob
import os

import kubernetes_validate
import pytest
import yaml
from cel_expr_python import cel

ROOT = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
MANIFESTS = os.path.join(ROOT, "deploy", "manifests")
K8S_VERSION = "1.30.0"  # the oldest version with every API the manifests use
AGENT = "system:serviceaccount:kube-system:gpuslice-node"
EXTENDER = "system:serviceaccount:gpuslice-system:gpuslice-extender"
NODE_CLAIM = "authentication.kubernetes.io/node-name"


def objects():
    out = []
    for f in sorted(glob.glob(os.path.join(MANIFESTS, "*.yaml"))):
        with open(f) as fh:
            out += [(os.path.basename(f), o) for o in yaml.safe_load_all(fh) if o]
    return out


def find(kind, name):
    (o,) = [o for _, o in objects() if o["kind"] == kind and o["metadata"]["name"] == name]
    return o


@pytest.mark.parametrize("fname,obj", objects(),
                         ids=lambda x: x if isinstance(x, str) else f"{x['kind']}/{x['metadata']['name']}")
def test_official_schema(fname, obj):
    kubernetes_validate.validate(obj, K8S_VERSION, strict=True)


def test_schema_check_is_real():
    ds = copy.deepcopy(find("DaemonSet", "gpuslice-node"))
    ds["spec"]["template"]["spec"]["containers"][0]["securityContext"]["capabilties"] = {}
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(ds, K8S_VERSION, strict=True)


ENV = cel.NewEnv(variables={n: cel.Type.DYN for n in ("object", "oldObject", "request", "variables")})


def plain(v):
    """A CEL result as plain Python (maps and lists hold accessors, not values)."""
    if hasattr(v, "plain_value"):
        v = v.plain_value()
    elif hasattr(v, "value") and not isinstance(v, (dict, list)):
        v = v.value()
    if isinstance(v, dict):
        return {plain(k): plain(x) for k, x in v.items()}
    if isinstance(v, list):
        return [plain(x) for x in v]
    return v


def cel_eval(expr, **data):
    base = {"object": None, "oldObject": None, "request": {}, "variables": {}}
    base.update(data)
    result = ENV.compile(expr).eval(data=base)
    out = plain(result.value())
    assert not isinstance(out, str) or "INVALID_ARGUMENT" not in out, f"{expr}: {out}"
    return out


def policy_allows(policy, request, obj, old):
    """The API server's evaluation of a ValidatingAdmissionPolicy: match conditions,
    then variables in order, then every validation. True = allowed."""
    data = {"request": request, "object": obj, "oldObject": old}
    spec = policy["spec"]
    rules = spec["matchConstraints"]["resourceRules"]
    if not any(request["operation"] in r["operations"] and request["resource"]["resource"] in r["resources"]
               for r in rules):
        return True
    if not all(cel_eval(c["expression"], **data) is True for c in spec.get("matchConditions", [])):
        return True
    variables = {}
    for v in spec.get("variables", []):
        variables[v["name"]] = cel_eval(v["expression"], variables=variables, **data)
    verdicts = [cel_eval(v["expression"], variables=variables, **data) for v in spec["validations"]]
    assert all(isinstance(x, bool) for x in verdicts), verdicts
    return all(verdicts)


def request(user, resource, node_claim=None):
    info = {"username": user, "groups": ["system:serviceaccounts"]}
    if node_claim is not None:
        info["extra"] = {NODE_CLAIM: [node_claim]}
    return {"operation": "UPDATE", "userInfo": info,
            "resource": {"group": "", "version": "v1", "resource": resource}}


def node(name, ann=None, labels=None):
    return {"metadata": {"name": name, "annotations": dict(ann or {}), "labels": dict(labels or {"a": "b"})},
            "spec": {"podCIDR": "10.0.0.0/24"}}


def pod(node_name, ann=None, labels=None):
    return {"metadata": {"name": "p", "namespace": "ml", "annotations": dict(ann or {}),
                         "labels": dict(labels or {"app": "x"})},
            "spec": {"nodeName": node_name, "containers": [{"name": "c", "image": "i"}]}}


def allowed(req, obj, old):
    return all(policy_allows(p, req, obj, old)
               for p in (find("ValidatingAdmissionPolicy", "gpuslice-node-agent-writes"),
                         find("ValidatingAdmissionPolicy", "gpuslice-annotations-only")))


def test_agent_writes_its_own_node_only():
    old = node("n1", {"team": "x"})
    new = node("n1", {"team": "x", "gpuslice.io/gpu-inventory": "{}"})
    assert allowed(request(AGENT, "nodes", "n1"), new, old)
    other_old, other_new = node("n2"), node("n2", {"gpuslice.io/gpu-inventory": "{}"})
    assert not allowed(request(AGENT, "nodes", "n1"), other_new, other_old)
    assert not allowed(request(AGENT, "nodes"), new, old)  # a token with no node claim


def test_agent_writes_pods_on_its_node_only():
    old = pod("n1", {"gpuslice.io/assignment": "{}"})
    new = pod("n1", {"gpuslice.io/assignment": "{}", "gpuslice.io/allocated": "{}"})
    assert allowed(request(AGENT, "pods", "n1"), new, old)
    assert not allowed(request(AGENT, "pods", "n1"), pod("n2", {"gpuslice.io/allocated": "{}"}), pod("n2"))
    assert not allowed(request(AGENT, "pods", "n1"), pod(None), pod(None))  # not bound yet


@pytest.mark.parametrize("user,claim", [(AGENT, "n1"), (EXTENDER, "n9")])
def test_only_gpuslice_annotations_change(user, claim):
    old = node("n1", {"team": "x", "gpuslice.io/claims": "{}"})
    for change, ok in ((lambda o: o["metadata"]["annotations"].update({"gpuslice.io/claims": "[]"}), True),
                       (lambda o: o["metadata"]["annotations"].pop("gpuslice.io/claims"), True),
                       (lambda o: o["metadata"]["annotations"].update({"team": "y"}), False),
                       (lambda o: o["metadata"]["annotations"].pop("team"), False),
                       (lambda o: o["metadata"]["annotations"].update({"other.io/x": "1"}), False),
                       (lambda o: o["metadata"]["labels"].update({"a": "c"}), False),
                       (lambda o: o["spec"].update({"unschedulable": True}), False)):
        new = copy.deepcopy(old)
        change(new)
        assert allowed(request(user, "nodes", claim), new, old) is (ok and (user == EXTENDER or claim == "n1"))


def test_policies_leave_everyone_else_alone():
    old, new = node("n2"), node("n2", labels={"x": "y"})
    assert allowed(request("system:serviceaccount:ml:deployer", "nodes"), new, old)
    assert allowed(request("kubernetes-admin", "nodes"), new, old)


def test_bindings_deny():
    for name in ("gpuslice-node-agent-writes", "gpuslice-annotations-only"):
        b = find("ValidatingAdmissionPolicyBinding", name)
        assert b["spec"]["policyName"] == name and b["spec"]["validationActions"] == ["Deny"]
        assert find("ValidatingAdmissionPolicy", name)["spec"]["failurePolicy"] == "Fail"


def gpu_pod(ann=None):
    p = pod("n1", ann)
    p["spec"]["containers"][0]["resources"] = {"limits": {"gpuslice.io/gpu": "1"}}
    return p


def test_webhook_match_conditions():
    mut = find("MutatingWebhookConfiguration", "gpuslice-webhook")["webhooks"][0]["matchConditions"]
    val = find("ValidatingWebhookConfiguration", "gpuslice-webhook")["webhooks"][0]["matchConditions"]

    def sent(conds, obj, old=None):
        verdicts = [cel_eval(c["expression"], object=obj, oldObject=old) for c in conds]
        assert all(isinstance(x, bool) for x in verdicts), verdicts
        return all(verdicts)

    plain = pod("n1")
    plain["spec"]["initContainers"] = [{"name": "i", "image": "i"}]
    assert sent(mut, gpu_pod()) and sent(val, gpu_pod())
    assert not sent(mut, plain) and not sent(val, plain)
    # A tenant adding or removing gpuslice.io/ annotations on any pod is seen.
    forged = pod("n1", {"gpuslice.io/assignment": "{}"})
    assert sent(val, forged, pod("n1")) and sent(val, pod("n1"), forged)
    assert not sent(mut, forged)
    # Issue 27, finding 5: a pod that names GPUs for the NVIDIA runtime reaches
    # the webhook (which refuses it) from any container kind.
    for kind in ("containers", "initContainers", "ephemeralContainers"):
        picks = pod("n1")
        c = {"name": "x", "image": "x", "env": [{"name": "A", "value": "1"},
                                                {"name": "NVIDIA_VISIBLE_DEVICES", "value": "all"}]}
        picks["spec"][kind] = picks["spec"].get(kind, []) + [c] if kind != "containers" else [c]
        assert sent(val, picks) and not sent(mut, picks), kind
        assert sent(val, picks, pod("n1")), kind
    other = pod("n1")
    other["spec"]["containers"][0]["env"] = [{"name": "CUDA_VISIBLE_DEVICES", "value": "0"}]
    assert not sent(val, other)


def test_daemonset_mounts_and_privileges():
    ds = find("DaemonSet", "gpuslice-node")
    spec = ds["spec"]["template"]["spec"]
    (c,) = spec["containers"]
    vols = {v["name"]: v for v in spec["volumes"]}
    mounts = {m["mountPath"]: m for m in c["volumeMounts"]}
    # PreStartContainer asks kubelet's pod-resources API: without it every GPU pod is refused.
    pr = mounts["/var/lib/kubelet/pod-resources"]
    assert vols[pr["name"]]["hostPath"]["path"] == "/var/lib/kubelet/pod-resources" and pr["readOnly"]
    assert vols[mounts["/var/lib/kubelet/device-plugins"]["name"]]["hostPath"]["path"] == \
        "/var/lib/kubelet/device-plugins"
    # Allocate hands kubelet host paths: the state root is mounted at its host path.
    assert vols[mounts["/var/lib/gpuslice"]["name"]]["hostPath"]["path"] == "/var/lib/gpuslice"
    assert {v["hostPath"]["path"] for v in vols.values() if "hostPath" in v} == {
        "/var/lib/kubelet/device-plugins", "/var/lib/kubelet/pod-resources", "/usr/local/gpuslice",
        "/var/lib/gpuslice"}
    assert all(m["name"] in vols for m in c["volumeMounts"]) and len(mounts) == len(vols)
    sc = c["securityContext"]
    assert sc["privileged"] is False and sc["allowPrivilegeEscalation"] is False
    assert sc["readOnlyRootFilesystem"] is True
    assert sc["capabilities"] == {"drop": ["ALL"], "add": ["CHOWN", "FOWNER", "DAC_OVERRIDE"]}
    assert spec["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    assert not spec.get("hostPID") and not spec.get("hostNetwork") and not spec.get("hostIPC")
    # Every hostPath is documented for operators.
    with open(os.path.join(ROOT, "docs", "operator-guide.md")) as f:
        guide = f.read()
    for v in vols.values():
        if "hostPath" in v:
            assert f"`{v['hostPath']['path']}`" in guide, v


def test_webhook_writers_are_the_real_service_accounts():
    (c,) = find("Deployment", "gpuslice-webhook")["spec"]["template"]["spec"]["containers"]
    writers = {a.split("=", 1)[1] for a in c["args"] if a.startswith("--annotation-writer=")}
    sas = {f"system:serviceaccount:{o['metadata']['namespace']}:{o['metadata']['name']}"
           for _, o in objects() if o["kind"] == "ServiceAccount"}
    assert writers == {AGENT, EXTENDER} and writers <= sas
