"""Offline checks of deploy/ (no cluster), run in the deploy virtualenv:
1. every YAML file parses (PyYAML);
2. what the official schemas (test_schemas_cel.py) cannot say: selectors match
   their pods, mounts name volumes, enum values, no RBAC wildcards;
3. the Helm chart, linted strictly and rendered by Helm itself (render.py, through
   helm-python-sdk), equals deploy/manifests/ object for object, and --set values
   reach every place they should;
4. cross-references: Services select Deployments, ports line up, the scheduler
   name agrees between the scheduler config and the webhook, RBAC is exactly
   the least-privilege set, every flag the Deployments pass exists in the
   binaries' --help;
5. deploy/certs/gen-certs.sh makes serving certificates that verify against the
   serving CA with the Services' DNS names, and kube-scheduler's client
   certificate, the only one the client CA issued."""
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


def test_what_the_schemas_cannot_say(objs):
    """The official schemas (test_schemas_cel.py, test_chart.py) check kinds, fields
    and types; these are the rules they cannot express."""
    for (kind, ns, name), o in objs.items():
        if kind in ("Deployment", "DaemonSet"):
            sel = o["spec"]["selector"]["matchLabels"]
            labels = o["spec"]["template"]["metadata"]["labels"]
            assert sel.items() <= labels.items(), f"{name}: selector does not match its pods"
            vols = {v["name"] for v in o["spec"]["template"]["spec"].get("volumes", [])}
            for c in o["spec"]["template"]["spec"]["containers"]:
                for m in c.get("volumeMounts", []):
                    assert m["name"] in vols, f"{name}: mount of unknown volume {m['name']}"
        if kind.endswith("WebhookConfiguration"):
            for w in o["webhooks"]:
                assert w["sideEffects"] in ("None", "NoneOnDryRun")
                assert w["failurePolicy"] in ("Ignore", "Fail")
                assert len(w["name"].split(".")) >= 3  # must be fully qualified
        if kind in ("ClusterRole", "Role"):
            for r in o["rules"]:
                assert r["verbs"] and "*" not in r["verbs"] and "*" not in r["resources"]


def test_chart_renders_to_the_plain_manifests(objs):
    assert by_key(rendered(*render.PLAIN_SETS)) == objs


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
    # tlsConfig's files are traced to their Secrets in test_chart.py.
    sched = objs[("Deployment", "gpuslice-system", "gpuslice-scheduler")]["spec"]["template"]["spec"]
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

    def verify(ca, cert, purpose):
        return subprocess.run(["openssl", "verify", "-purpose", purpose, "-CAfile", tmp_path / ca,
                               tmp_path / cert], capture_output=True, text=True).returncode == 0
    for svc in ("extender", "webhook"):
        assert verify("ca.crt", f"{svc}.crt", "sslserver")
        assert not verify("client-ca.crt", f"{svc}.crt", "sslclient")
        san = subprocess.run(["openssl", "x509", "-in", tmp_path / f"{svc}.crt", "-noout", "-ext",
                              "subjectAltName"], capture_output=True, text=True).stdout
        assert f"DNS:gpuslice-{svc}.gs.svc" in san
    assert verify("client-ca.crt", "scheduler.crt", "sslclient")
    assert not verify("ca.crt", "scheduler.crt", "sslclient")
    bad = subprocess.run(["sh", script, "--days", "x"], capture_output=True, text=True)
    assert bad.returncode == 2 and "--days must be a number" in bad.stderr
