"""Offline checks of deploy/ (no cluster), run in the deploy virtualenv:
1. every YAML file parses (PyYAML);
2. each object's apiVersion/kind pair, required fields and top-level keys match
   a small table re-typed from the Kubernetes API reference (SCHEMA below) --
   a subset, not the OpenAPI schema;
3. the Helm chart, linted strictly and rendered by Helm itself (render.py, through
   helm-python-sdk), equals deploy/manifests/ object for object, and --set values
   reach every place they should;
4. cross-references: Services select Deployments, ports line up, the scheduler
   name agrees between the scheduler config and the webhook, RBAC is exactly
   the least-privilege set, every flag the Deployments pass exists in the
   binaries' --help;
5. deploy/certs/gen-certs.sh makes a certificate that verifies against
   its CA with the Services' DNS names."""
import glob
import os
import re
import shutil
import subprocess

import pytest
import yaml

import render

ROOT = render.ROOT
VALUE_REF = re.compile(r"\.Values((?:\.[A-Za-z_][A-Za-z0-9_]*)+)")
MANIFESTS = os.path.join(ROOT, "deploy", "manifests")

# kind -> (apiVersion, required dotted paths, allowed top-level keys)
META = {"apiVersion", "kind", "metadata"}
SCHEMA = {
    "Namespace": ("v1", ["metadata.name"], META | {"spec"}),
    "ServiceAccount": ("v1", ["metadata.name", "metadata.namespace"],
                       META | {"automountServiceAccountToken", "imagePullSecrets", "secrets"}),
    "ConfigMap": ("v1", ["metadata.name", "metadata.namespace", "data"],
                  META | {"data", "binaryData", "immutable"}),
    "Service": ("v1", ["metadata.name", "metadata.namespace", "spec.ports", "spec.selector"],
                META | {"spec"}),
    "Deployment": ("apps/v1", ["metadata.name", "metadata.namespace", "spec.selector",
                               "spec.template.spec.containers"], META | {"spec"}),
    "ClusterRole": ("rbac.authorization.k8s.io/v1", ["metadata.name", "rules"],
                    META | {"rules", "aggregationRule"}),
    "Role": ("rbac.authorization.k8s.io/v1", ["metadata.name", "metadata.namespace", "rules"],
             META | {"rules"}),
    "ClusterRoleBinding": ("rbac.authorization.k8s.io/v1",
                           ["metadata.name", "roleRef.apiGroup", "roleRef.kind", "roleRef.name",
                            "subjects"], META | {"roleRef", "subjects"}),
    "RoleBinding": ("rbac.authorization.k8s.io/v1",
                    ["metadata.name", "metadata.namespace", "roleRef.apiGroup", "roleRef.kind",
                     "roleRef.name", "subjects"], META | {"roleRef", "subjects"}),
    "MutatingWebhookConfiguration": ("admissionregistration.k8s.io/v1",
                                     ["metadata.name", "webhooks"], META | {"webhooks"}),
    "ValidatingWebhookConfiguration": ("admissionregistration.k8s.io/v1",
                                       ["metadata.name", "webhooks"], META | {"webhooks"}),
    "DaemonSet": ("apps/v1", ["metadata.name", "metadata.namespace", "spec.selector",
                              "spec.template.spec.containers"], META | {"spec"}),
    "ValidatingAdmissionPolicy": ("admissionregistration.k8s.io/v1",
                                  ["metadata.name", "spec.matchConstraints", "spec.validations"],
                                  META | {"spec"}),
    "ValidatingAdmissionPolicyBinding": ("admissionregistration.k8s.io/v1",
                                         ["metadata.name", "spec.policyName",
                                          "spec.validationActions"], META | {"spec"}),
}
# Required in each admissionregistration.k8s.io/v1 webhook entry.
WEBHOOK_REQUIRED = ["name", "clientConfig", "sideEffects", "admissionReviewVersions"]
WEBHOOK_KEYS = {"name", "clientConfig", "rules", "failurePolicy", "matchPolicy",
                "namespaceSelector", "objectSelector", "sideEffects", "timeoutSeconds",
                "admissionReviewVersions", "reinvocationPolicy", "matchConditions"}
CONTAINER_KEYS = {"name", "image", "imagePullPolicy", "command", "args", "env", "ports",
                  "readinessProbe", "livenessProbe", "resources", "securityContext",
                  "volumeMounts", "workingDir"}


def get(obj, path):
    for p in path.split("."):
        if not isinstance(obj, dict) or p not in obj:
            raise KeyError(path)
        obj = obj[p]
    return obj


def load_dir(d):
    objs = []
    for f in sorted(glob.glob(os.path.join(d, "*.yaml"))):
        with open(f) as fh:
            objs += [(os.path.basename(f), o) for o in yaml.safe_load_all(fh) if o is not None]
    return objs


def rendered(*sets):
    objs = []
    for name, text in render.render(sets).items():
        objs += [(name, o) for o in yaml.safe_load_all(text) if o is not None]
    return objs


def by_key(objs):
    return {(o["kind"], o["metadata"].get("namespace", ""), o["metadata"]["name"]): o
            for _, o in objs}


@pytest.fixture(scope="module")
def objs():
    o = by_key(load_dir(MANIFESTS))
    assert len(o) == len(load_dir(MANIFESTS)), "duplicate (kind, namespace, name)"
    return o


def test_every_yaml_in_deploy_parses():
    files = [f for f in glob.glob(os.path.join(ROOT, "deploy", "**", "*.yaml"), recursive=True)
             if "/templates/" not in f]
    assert len(files) >= 10
    for f in files:
        with open(f) as fh:
            docs = [d for d in yaml.safe_load_all(fh) if d is not None]
        assert docs, f"{f}: empty"


def test_objects_against_schema_table(objs):
    for (kind, ns, name), o in objs.items():
        assert kind in SCHEMA, f"{kind} {name}: kind not in the table"
        api, req, keys = SCHEMA[kind]
        assert o["apiVersion"] == api, f"{kind} {name}: apiVersion {o['apiVersion']}"
        for path in req:
            assert get(o, path) not in (None, "", [], {}), f"{kind} {name}: {path} empty"
        assert set(o) <= keys, f"{kind} {name}: unknown top-level keys {set(o) - keys}"
        if kind in ("Deployment", "DaemonSet"):
            sel = o["spec"]["selector"]["matchLabels"]
            labels = o["spec"]["template"]["metadata"]["labels"]
            assert sel.items() <= labels.items(), f"{name}: selector does not match its pods"
            vols = {v["name"] for v in o["spec"]["template"]["spec"].get("volumes", [])}
            for c in o["spec"]["template"]["spec"]["containers"]:
                assert set(c) <= CONTAINER_KEYS and c["name"] and c["image"], c
                for m in c.get("volumeMounts", []):
                    assert m["name"] in vols, f"{name}: mount of unknown volume {m['name']}"
        if kind.endswith("WebhookConfiguration"):
            for w in o["webhooks"]:
                for k in WEBHOOK_REQUIRED:
                    assert w.get(k), f"{name}: webhook {w.get('name')} lacks {k}"
                assert set(w) <= WEBHOOK_KEYS, set(w) - WEBHOOK_KEYS
                assert w["sideEffects"] in ("None", "NoneOnDryRun")
                assert w["failurePolicy"] in ("Ignore", "Fail")
                assert len(w["name"].split(".")) >= 3  # must be fully qualified
        if kind in ("ClusterRole", "Role"):
            for r in o["rules"]:
                assert r["verbs"] and "*" not in r["verbs"] and "*" not in r["resources"]


def test_chart_renders_to_the_plain_manifests(objs):
    assert by_key(rendered()) == objs


def test_templates_name_only_existing_values():
    """Helm renders a missing value as empty, even when linting strictly."""
    with open(os.path.join(render.CHART, "values.yaml")) as f:
        values = yaml.safe_load(f)
    used = set()
    for t in glob.glob(os.path.join(render.CHART, "templates", "*")):
        with open(t) as f:
            used |= {(os.path.basename(t), m) for m in VALUE_REF.findall(f.read())}
    assert len(used) > 20
    for name, path in used:
        cur = values
        for p in path.strip(".").split("."):
            assert isinstance(cur, dict) and p in cur, f"{name}: .Values{path} is not in values.yaml"
            cur = cur[p]


def test_render_refuses_lint_warnings(tmp_path):
    chart = tmp_path / "gpuslice"
    shutil.copytree(render.CHART, chart)
    (chart / "templates" / "99-bad.yaml").write_text(
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: Not_A_Name\n")
    with pytest.raises(render.RenderError, match="naming requirements"):
        render.render(chart=str(chart))


def sched_config(o):
    return yaml.safe_load(o[("ConfigMap", "gpuslice-system", "gpuslice-scheduler-config")]
                          ["data"]["config.yaml"])


def args_of(o, name):
    c = o[("Deployment", "gpuslice-system", name)]["spec"]["template"]["spec"]["containers"][0]
    return dict(a[2:].split("=", 1) for a in c.get("args", []))


def test_scheduler_configuration(objs):
    cfg = sched_config(objs)
    assert cfg["apiVersion"] == "kubescheduler.config.k8s.io/v1"
    assert cfg["kind"] == "KubeSchedulerConfiguration"
    assert [p["schedulerName"] for p in cfg["profiles"]] == ["gpuslice-scheduler"]
    (ext,) = cfg["extenders"]
    for k in ("urlPrefix", "filterVerb", "prioritizeVerb", "bindVerb", "weight"):
        assert ext[k], k
    assert (ext["filterVerb"], ext["prioritizeVerb"], ext["bindVerb"]) == \
        ("filter", "prioritize", "bind")
    assert ext["weight"] > 0 and ext["nodeCacheCapable"] is True and ext["enableHTTPS"] is True
    # gpu is counted by NodeResourcesFit against the device plugin's replicas;
    # memory and cores are advertised by no node, so the scheduler must ignore them.
    assert {m["name"]: m["ignoredByScheduler"] for m in ext["managedResources"]} == {
        "gpuslice.io/gpu": False, "gpuslice.io/gpu-memory": True, "gpuslice.io/gpu-cores": True}
    # The URL points at the extender Service and its port; TLS CA is mounted.
    svc = objs[("Service", "gpuslice-system", "gpuslice-extender")]
    assert ext["urlPrefix"] == \
        f"https://gpuslice-extender.gpuslice-system.svc:{svc['spec']['ports'][0]['port']}/gpuslice"
    assert args_of(objs, "gpuslice-extender")["port"] == str(svc["spec"]["ports"][0]["port"])
    sched = objs[("Deployment", "gpuslice-system", "gpuslice-scheduler")]["spec"]["template"]["spec"]
    mounts = {m["mountPath"] for m in sched["containers"][0]["volumeMounts"]}
    assert os.path.dirname(ext["tlsConfig"]["caFile"]) in mounts
    assert "--config=/etc/kubernetes/gpuslice/config.yaml" in sched["containers"][0]["command"]
    assert objs[("Deployment", "gpuslice-system", "gpuslice-extender")]["spec"]["replicas"] == 2


def test_webhook_wiring(objs):
    assert args_of(objs, "gpuslice-webhook")["scheduler-name"] == \
        sched_config(objs)["profiles"][0]["schedulerName"]
    svc = objs[("Service", "gpuslice-system", "gpuslice-webhook")]
    for kind, path in (("MutatingWebhookConfiguration", "/mutate"),
                       ("ValidatingWebhookConfiguration", "/validate")):
        (w,) = objs[(kind, "", "gpuslice-webhook")]["webhooks"]
        s = w["clientConfig"]["service"]
        assert (s["name"], s["namespace"], s["path"], s["port"]) == \
            ("gpuslice-webhook", "gpuslice-system", path, svc["spec"]["ports"][0]["port"])
        assert w["admissionReviewVersions"] == ["v1"]
        # The validating webhook also sees UPDATEs (gpuslice.io/ annotations) and
        # ephemeral containers (their environment).
        ops, res = ((["CREATE"], ["pods"]) if path == "/mutate" else
                    (["CREATE", "UPDATE"], ["pods", "pods/ephemeralcontainers"]))
        assert w["rules"] == [{"apiGroups": [""], "apiVersions": ["v1"], "operations": ops,
                               "resources": res, "scope": "Namespaced"}]
        assert "kube-system" in w["namespaceSelector"]["matchExpressions"][0]["values"]
        assert "gpuslice.io/" in w["matchConditions"][0]["expression"]
        if path == "/validate":
            assert "oldObject.metadata.annotations" in w["matchConditions"][0]["expression"]
    # Services select existing Deployments' pods.
    for name in ("gpuslice-webhook", "gpuslice-extender"):
        sel = objs[("Service", "gpuslice-system", name)]["spec"]["selector"]
        labels = objs[("Deployment", "gpuslice-system", name)]["spec"]["template"]["metadata"]["labels"]
        assert sel.items() <= labels.items()


def test_rbac_is_least_privilege(objs):
    rules = objs[("ClusterRole", "", "gpuslice-extender")]["rules"]
    got = {(g, r, v) for rule in rules for g in rule["apiGroups"] for r in rule["resources"]
           for v in rule["verbs"]}
    want = {("", "pods", v) for v in ("get", "list", "watch", "patch")} | \
        {("", "nodes", v) for v in ("get", "list", "watch", "patch")} | {("", "pods/binding", "create")}
    assert got == want
    assert objs[("ServiceAccount", "gpuslice-system", "gpuslice-webhook")][
        "automountServiceAccountToken"] is False
    lease = objs[("Role", "gpuslice-system", "gpuslice-scheduler-lease")]["rules"]
    assert lease[1]["resourceNames"] == ["gpuslice-scheduler"]
    # Every binding's subject is a ServiceAccount defined here.
    sas = {(ns, n) for (k, ns, n) in objs if k == "ServiceAccount"}
    for (k, _, n), o in objs.items():
        if k.endswith("RoleBinding"):
            for s in o["subjects"]:
                assert (s["namespace"], s["name"]) in sas, f"{k} {n}: unknown subject"


def test_values_reach_every_use():
    o = by_key(rendered("scheduler.name=gpu-sched", "extender.replicas=3", "extender.port=9443",
                        "namespace=gs", "image.tag=v9", "webhook.defaultGpuCores=25"))
    cfg = yaml.safe_load(o[("ConfigMap", "gs", "gpuslice-scheduler-config")]["data"]["config.yaml"])
    assert cfg["profiles"][0]["schedulerName"] == "gpu-sched"
    assert cfg["leaderElection"]["resourceName"] == "gpu-sched"
    assert cfg["extenders"][0]["urlPrefix"] == "https://gpuslice-extender.gs.svc:9443/gpuslice"
    wargs = dict(a[2:].split("=", 1) for a in
                 o[("Deployment", "gs", "gpuslice-webhook")]["spec"]["template"]["spec"]
                 ["containers"][0]["args"])
    assert wargs["scheduler-name"] == "gpu-sched" and wargs["default-gpu-cores"] == "25"
    ext = o[("Deployment", "gs", "gpuslice-extender")]
    assert ext["spec"]["replicas"] == 3
    assert ext["spec"]["template"]["spec"]["containers"][0]["image"] == "gpuslice/control:v9"
    assert o[("Role", "gs", "gpuslice-scheduler-lease")]["rules"][1]["resourceNames"] == ["gpu-sched"]
    assert all(ns in ("", "gs", "kube-system") for (_, ns, _) in o)


@pytest.mark.parametrize("deployment,env", [("gpuslice-extender", "GPUSLICE_EXTENDER"),
                                            ("gpuslice-webhook", "GPUSLICE_WEBHOOK")])
def test_deployment_flags_exist_in_binary(objs, deployment, env):
    binary = os.environ.get(env)
    if not binary:
        pytest.fail(f"{env} is not set (run through ctest)")
    usage = subprocess.run([binary, "--help"], capture_output=True, text=True, timeout=10).stdout
    for flag in args_of(objs, deployment):
        assert f"--{flag} " in usage, f"{deployment}: --{flag} is not a flag of {binary}"


def test_cert_script(tmp_path):
    script = os.path.join(ROOT, "deploy", "certs", "gen-certs.sh")
    p = subprocess.run(["sh", script, "--namespace", "gs", "--out", str(tmp_path), "--days", "2"],
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    v = subprocess.run(["openssl", "verify", "-CAfile", tmp_path / "ca.crt", tmp_path / "tls.crt"],
                       capture_output=True, text=True)
    assert v.returncode == 0 and "OK" in v.stdout
    san = subprocess.run(["openssl", "x509", "-in", tmp_path / "tls.crt", "-noout", "-ext",
                          "subjectAltName"], capture_output=True, text=True).stdout
    assert "DNS:gpuslice-webhook.gs.svc" in san and "DNS:gpuslice-extender.gs.svc" in san
    bad = subprocess.run(["sh", script, "--days", "x"], capture_output=True, text=True)
    assert bad.returncode == 2 and "--days must be a number" in bad.stderr
