"""The Helm chart as Helm renders it (render.py, helm lint --strict first), in each
certificate mode: every object against the official schemas (kubernetes-validate,
strict), the certificates as openssl sees them, every certificate file a
container is told to read traced through its volume mounts to a Secret key, and
the NetworkPolicies' selectors against the pods they protect."""
import base64
import copy
import os
import subprocess
from urllib.parse import urlparse

import kubernetes_validate
import pytest
import yaml

import render

K8S_VERSION = "1.30.0"
MODES = ("helm", "certManager", "existing")
EXT, WEB, SCHED = "gpuslice-extender-tls", "gpuslice-webhook-tls", "gpuslice-scheduler-client-tls"
# cert-manager's kinds are CRDs: kubernetes-validate has no schema for them.
CERT_MANAGER_KEYS = {"Issuer": {"selfSigned", "ca"},
                     "Certificate": {"isCA", "commonName", "secretName", "duration", "privateKey",
                                     "issuerRef", "dnsNames", "usages"}}


def chart(*sets):
    objs = []
    for text in render.render(sets).values():
        objs += [o for o in yaml.safe_load_all(text) if o]
    return objs


@pytest.fixture(scope="module", params=MODES)
def mode_objs(request):
    return request.param, chart(f"tls.source={request.param}")


@pytest.fixture(scope="module")
def helm_objs():
    return chart()


def one(objs, kind, name):
    (o,) = [o for o in objs if o["kind"] == kind and o["metadata"]["name"] == name]
    return o


def pod_spec(objs, name):
    return one(objs, "Deployment", name)["spec"]["template"]["spec"]


def args_of(container):
    return dict(a[2:].split("=", 1) for a in container.get("args", []) if "=" in a)


def sched_config(objs):
    return yaml.safe_load(one(objs, "ConfigMap", "gpuslice-scheduler-config")["data"]["config.yaml"])


def test_every_object_against_the_official_schema(mode_objs):
    mode, objs = mode_objs
    for o in objs:
        if o["apiVersion"] == "cert-manager.io/v1":
            assert mode == "certManager"
            assert set(o["spec"]) <= CERT_MANAGER_KEYS[o["kind"]], o
            continue
        kubernetes_validate.validate(o, K8S_VERSION, strict=True)
    kinds = {o["kind"] for o in objs}
    tls_secrets = {o["metadata"]["name"] for o in objs if o["kind"] == "Secret"} - {"gpuslice-assignment-key"}
    assert bool(tls_secrets) is (mode == "helm") and ("Certificate" in kinds) is (mode == "certManager")
    # The assignment-signing key: rendered unless the Secrets are made outside.
    assert any(o["kind"] == "Secret" and o["metadata"]["name"] == "gpuslice-assignment-key"
               for o in objs) is (mode != "existing")
    assert "NetworkPolicy" in kinds


def test_unknown_tls_source_is_refused():
    with pytest.raises(render.RenderError, match="at '/tls/source': value must be one of 'helm', 'certManager', 'existing'"):
        chart("tls.source=selfsigned")


# --- certificate files: container flag or tlsConfig path -> volume -> Secret key ---

def file_source(spec, container, path):
    """(Secret, key) a container reads at `path`, or None when no mounted Secret has it."""
    vols = {v["name"]: v for v in spec.get("volumes", [])}
    for m in container.get("volumeMounts", []):
        prefix = m["mountPath"].rstrip("/") + "/"
        if not path.startswith(prefix):
            continue
        rel, vol = path[len(prefix):], vols[m["name"]]
        sources = ([{"name": vol["secret"]["secretName"], **vol["secret"]}] if "secret" in vol else
                   [s["secret"] for s in vol.get("projected", {}).get("sources", []) if "secret" in s])
        for s in sources:
            for item in s.get("items", []):
                if item["path"] == rel:
                    return s["name"], item["key"]
    return None


def wiring(objs):
    """{(reader, what): (Secret, key)} for every certificate file the chart configures."""
    out = {}
    for name in ("gpuslice-extender", "gpuslice-webhook"):
        spec = pod_spec(objs, name)
        (c,) = spec["containers"]
        for flag in ("tls-cert", "tls-key", "client-ca"):
            if flag in args_of(c):
                out[(name, flag)] = file_source(spec, c, args_of(c)[flag])
    spec = pod_spec(objs, "gpuslice-scheduler")
    (c,) = spec["containers"]
    (ext,) = sched_config(objs)["extenders"]
    for key in ("certFile", "keyFile", "caFile"):
        out[("gpuslice-scheduler", key)] = file_source(spec, c, ext["tlsConfig"][key])
    return out


WANT = {("gpuslice-extender", "tls-cert"): (EXT, "tls.crt"),
        ("gpuslice-extender", "tls-key"): (EXT, "tls.key"),
        ("gpuslice-extender", "client-ca"): (SCHED, "ca.crt"),
        ("gpuslice-webhook", "tls-cert"): (WEB, "tls.crt"),
        ("gpuslice-webhook", "tls-key"): (WEB, "tls.key"),
        ("gpuslice-scheduler", "certFile"): (SCHED, "tls.crt"),
        ("gpuslice-scheduler", "keyFile"): (SCHED, "tls.key"),
        ("gpuslice-scheduler", "caFile"): (EXT, "ca.crt")}


def test_certificate_files_are_mounted_from_the_right_secrets(mode_objs):
    mode, objs = mode_objs
    assert wiring(objs) == WANT
    # Each Secret is made by this chart (helm), by a Certificate of it (certManager),
    # or by gen-certs.sh under these names (existing).
    if mode == "helm":
        secrets = {o["metadata"]["name"] for o in objs if o["kind"] == "Secret"}
    elif mode == "certManager":
        secrets = {o["spec"]["secretName"] for o in objs if o["kind"] == "Certificate"}
    else:
        with open(os.path.join(render.ROOT, "deploy", "certs", "gen-certs.sh")) as f:
            script = f.read()
        secrets = {s for s in (EXT, WEB, SCHED) if f"secret {s} " in script}
    assert {s for s, _ in WANT.values()} <= secrets


def test_wiring_check_is_real(helm_objs):
    broken = copy.deepcopy(helm_objs)
    vol = pod_spec(broken, "gpuslice-scheduler")["volumes"]
    (tls,) = [v for v in vol if v["name"] == "tls"]
    tls["projected"]["sources"][1]["secret"]["items"][0]["path"] = "extender-ca.crt"
    assert wiring(broken)[("gpuslice-scheduler", "caFile")] is None


def test_extender_probes_use_the_status_listener(mode_objs):
    _, objs = mode_objs
    (c,) = pod_spec(objs, "gpuslice-extender")["containers"]
    ports = {p["name"]: p["containerPort"] for p in c["ports"]}
    assert ports["status"] == int(args_of(c)["status-port"]) and ports["https"] == int(args_of(c)["port"])
    for probe in ("readinessProbe", "livenessProbe"):
        assert c[probe]["httpGet"]["port"] == "status" and c[probe]["httpGet"]["scheme"] == "HTTPS"


def test_webhook_ca_bundle(mode_objs):
    mode, objs = mode_objs
    for kind in ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"):
        o = one(objs, kind, "gpuslice-webhook")
        (w,) = o["webhooks"]
        if mode == "helm":
            assert w["clientConfig"]["caBundle"] == one(objs, "Secret", WEB)["data"]["ca.crt"]
        else:
            assert "caBundle" not in w["clientConfig"]
        if mode == "certManager":
            # The injector copies the CA of the webhook's own Certificate.
            ref = o["metadata"]["annotations"]["cert-manager.io/inject-ca-from"]
            ns, name = ref.split("/")
            assert one(objs, "Certificate", name)["spec"]["secretName"] == WEB
            assert one(objs, "Certificate", name)["metadata"]["namespace"] == ns
    with_bundle = chart("tls.source=existing", "tls.caBundle=Y2E=")
    assert one(with_bundle, "MutatingWebhookConfiguration", "gpuslice-webhook")[
        "webhooks"][0]["clientConfig"]["caBundle"] == "Y2E="


def test_cert_manager_issuers():
    objs = chart("tls.source=certManager")
    by_secret = {o["spec"]["secretName"]: o["spec"] for o in objs if o["kind"] == "Certificate"}
    for s in (EXT, WEB):
        assert by_secret[s]["issuerRef"]["name"] == "gpuslice-serving-ca"
        assert "server auth" in by_secret[s]["usages"] and "client auth" not in by_secret[s]["usages"]
    assert by_secret[SCHED]["issuerRef"]["name"] == "gpuslice-scheduler-client-ca"
    assert "client auth" in by_secret[SCHED]["usages"]
    # The client CA issues the scheduler's certificate and nothing else.
    assert [s for s, c in by_secret.items()
            if c["issuerRef"]["name"] == "gpuslice-scheduler-client-ca"] == [SCHED]
    for ca in ("gpuslice-serving-ca", "gpuslice-scheduler-client-ca"):
        assert by_secret[ca]["isCA"] is True
        assert one(objs, "Issuer", ca)["spec"]["ca"]["secretName"] == ca


# --- the generated certificates, as openssl sees them ---

def pem_files(objs, tmp_path):
    """Every file of WANT written out from the rendered Secrets: {(reader, what): path}."""
    out = {}
    for (reader, what), (secret, key) in wiring(objs).items():
        p = tmp_path / f"{reader}.{what}.pem"
        p.write_bytes(base64.b64decode(one(objs, "Secret", secret)["data"][key]))
        out[(reader, what)] = str(p)
    return out


def verify(ca, cert, purpose, host=None):
    cmd = ["openssl", "verify", "-purpose", purpose, "-CAfile", ca]
    if host:
        cmd += ["-verify_hostname", host]
    p = subprocess.run(cmd + [cert], capture_output=True, text=True)
    return p.returncode == 0 and p.stdout.strip().endswith("OK")


def pubkey(path, x509):
    cmd = ["openssl", "x509", "-pubkey", "-noout"] if x509 else ["openssl", "pkey", "-pubout"]
    return subprocess.run(cmd + ["-in", path], capture_output=True, text=True, check=True).stdout


def test_generated_certificates_chain(helm_objs, tmp_path):
    f = pem_files(helm_objs, tmp_path)
    host = urlparse(sched_config(helm_objs)["extenders"][0]["urlPrefix"]).hostname
    webhook = one(helm_objs, "MutatingWebhookConfiguration", "gpuslice-webhook")["webhooks"][0]
    svc = webhook["clientConfig"]["service"]
    bundle = tmp_path / "caBundle.pem"
    bundle.write_bytes(base64.b64decode(webhook["clientConfig"]["caBundle"]))
    # kube-scheduler (caFile) trusts the extender's serving certificate for the URL's host.
    assert verify(f[("gpuslice-scheduler", "caFile")], f[("gpuslice-extender", "tls-cert")],
                  "sslserver", host)
    # The API server (caBundle) trusts the webhook's for its Service's name.
    assert verify(str(bundle), f[("gpuslice-webhook", "tls-cert")], "sslserver",
                  f"{svc['name']}.{svc['namespace']}.svc")
    # The extender (--client-ca) takes kube-scheduler's client certificate...
    assert verify(f[("gpuslice-extender", "client-ca")], f[("gpuslice-scheduler", "certFile")],
                  "sslclient")
    # ...and neither serving certificate, although genSignedCert gives them clientAuth.
    for server in (("gpuslice-extender", "tls-cert"), ("gpuslice-webhook", "tls-cert")):
        assert not verify(f[("gpuslice-extender", "client-ca")], f[server], "sslclient")
    # Each key belongs to its certificate.
    for reader, cert, key in (("gpuslice-extender", "tls-cert", "tls-key"),
                              ("gpuslice-webhook", "tls-cert", "tls-key"),
                              ("gpuslice-scheduler", "certFile", "keyFile")):
        assert pubkey(f[(reader, cert)], True) == pubkey(f[(reader, key)], False), reader


def test_certificate_check_is_real(helm_objs, tmp_path):
    other = chart()  # a second render makes other CAs
    broken = copy.deepcopy(helm_objs)
    one(broken, "Secret", SCHED)["data"]["ca.crt"] = one(other, "Secret", SCHED)["data"]["ca.crt"]
    f = pem_files(broken, tmp_path)
    assert not verify(f[("gpuslice-extender", "client-ca")], f[("gpuslice-scheduler", "certFile")],
                      "sslclient")


def test_certificates_roll_the_pods(helm_objs):
    sums = {pod_template["metadata"]["annotations"]["checksum/tls"] for pod_template in
            (one(helm_objs, "Deployment", n)["spec"]["template"]
             for n in ("gpuslice-extender", "gpuslice-scheduler", "gpuslice-webhook"))}
    assert len(sums) == 1
    other = one(chart(), "Deployment", "gpuslice-extender")["spec"]["template"]["metadata"]
    assert other["annotations"]["checksum/tls"] not in sums  # new certificates, new pods


# --- NetworkPolicies ---

def selects(selector, labels):
    """A LabelSelector against a label set, as the API server evaluates it."""
    if not all(labels.get(k) == v for k, v in selector.get("matchLabels", {}).items()):
        return False
    for e in selector.get("matchExpressions", []):
        k, op, vals = e["key"], e["operator"], e.get("values", [])
        ok = {"In": k in labels and labels[k] in vals, "NotIn": k not in labels or labels[k] not in vals,
              "Exists": k in labels, "DoesNotExist": k not in labels}[op]
        if not ok:
            return False
    return True


def workloads(objs):
    """[(namespace, name, pod labels, {port name: number})] of every Deployment and DaemonSet."""
    out = []
    for o in objs:
        if o["kind"] in ("Deployment", "DaemonSet"):
            t = o["spec"]["template"]
            ports = {p["name"]: p["containerPort"] for c in t["spec"]["containers"]
                     for p in c.get("ports", [])}
            out.append((o["metadata"]["namespace"], o["metadata"]["name"], t["metadata"]["labels"], ports))
    return out


def policy_view(objs):
    """{policy: (the workload it protects, [(port number, [peer workloads or a peer dict])])}"""
    view = {}
    ws = workloads(objs)
    for p in objs:
        if p["kind"] != "NetworkPolicy":
            continue
        ns = p["metadata"]["namespace"]
        (target,) = [w for w in ws if w[0] == ns and selects(p["spec"]["podSelector"], w[2])]
        assert p["spec"]["policyTypes"] == ["Ingress"]
        rules = []
        for r in p["spec"]["ingress"]:
            for port in r["ports"]:
                number = target[3][port["port"]] if isinstance(port["port"], str) else port["port"]
                peers = []
                for peer in r.get("from", []):
                    if set(peer) == {"podSelector"}:  # pods of the policy's own namespace
                        peers += [w[1] for w in ws if w[0] == ns and selects(peer["podSelector"], w[2])]
                    else:
                        peers.append(peer)
                rules.append((number, peers))
        view[p["metadata"]["name"]] = (target[1], rules)
    return view


def test_network_policies_protect_the_right_pods(helm_objs):
    view = policy_view(helm_objs)
    ext = args_of(pod_spec(helm_objs, "gpuslice-extender")["containers"][0])
    web = args_of(pod_spec(helm_objs, "gpuslice-webhook")["containers"][0])
    (agent,) = [o for o in helm_objs if o["kind"] == "DaemonSet"]
    agent_args = args_of(agent["spec"]["template"]["spec"]["containers"][0])
    with open(os.path.join(render.CHART, "values.yaml")) as f:
        mon = yaml.safe_load(f)["networkPolicy"]["monitoring"]
    assert view == {
        "gpuslice-extender": ("gpuslice-extender", [(int(ext["port"]), ["gpuslice-scheduler"]),
                                                    (int(ext["status-port"]), [mon])]),
        # No `from`: anyone, because the API server is not a pod.
        "gpuslice-webhook": ("gpuslice-webhook", [(int(web["port"]), [])]),
        "gpuslice-node": ("gpuslice-node", [(int(agent_args["metrics-port"]), [mon])]),
    }
    # The verbs' port is what the scheduler's configuration calls.
    url = urlparse(sched_config(helm_objs)["extenders"][0]["urlPrefix"])
    svc = one(helm_objs, "Service", "gpuslice-extender")
    (https,) = [p for p in svc["spec"]["ports"] if p["port"] == url.port]
    named = {p["name"]: p["containerPort"] for p in pod_spec(helm_objs, "gpuslice-extender")[
        "containers"][0]["ports"]}
    assert named[https["targetPort"]] == view["gpuslice-extender"][1][0][0]


def test_network_policy_check_is_real(helm_objs):
    broken = copy.deepcopy(helm_objs)
    one(broken, "Deployment", "gpuslice-scheduler")["spec"]["template"]["metadata"]["labels"] = \
        {"app.kubernetes.io/name": "kube-scheduler"}
    assert policy_view(broken)["gpuslice-extender"][1][0] == (8888, [])


def test_network_policy_values():
    objs = chart("networkPolicy.monitoring.namespaceSelector.matchLabels.team=obs",
                 "networkPolicy.monitoring.podSelector.matchLabels.app=prometheus")
    for name in ("gpuslice-extender", "gpuslice-node"):
        (peer,) = one(objs, "NetworkPolicy", name)["spec"]["ingress"][-1]["from"]
        assert peer["namespaceSelector"]["matchLabels"]["team"] == "obs"
        assert peer["podSelector"] == {"matchLabels": {"app": "prometheus"}}
    assert not [o for o in chart("networkPolicy.enabled=false") if o["kind"] == "NetworkPolicy"]


def test_extender_and_agent_read_one_assignment_key(mode_objs):
    """Both sides of the assignment signature (docs/device-plugin.md) get the
    key from the one Secret, at the path their --assignment-key names."""
    mode, objs = mode_objs
    keys = {o["metadata"]["namespace"]: o["data"]["key"] for o in objs
            if o["kind"] == "Secret" and o["metadata"]["name"] == "gpuslice-assignment-key"}
    if mode != "existing":
        assert len(set(keys.values())) == 1  # one key, wherever it is mounted
    for kind, name in (("Deployment", "gpuslice-extender"), ("DaemonSet", "gpuslice-node")):
        o = one(objs, kind, name)
        spec = o["spec"]["template"]["spec"]
        (c,) = spec["containers"]
        path = args_of(c)["assignment-key"]
        assert file_source(spec, c, path) == ("gpuslice-assignment-key", "key"), name
        if mode != "existing":
            assert o["metadata"]["namespace"] in keys, name  # a pod mounts its own namespace's Secrets


def test_gpu_visibility_exempt_namespaces():
    """Issue 27, finding 5: pods whose env names an NVIDIA_ variable go to the
    validating webhook, except in webhook.gpuVisibilityExemptNamespaces."""
    from test_schemas_cel import cel_eval
    objs = chart("webhook.gpuVisibilityExemptNamespaces={gpu-operator}")
    (cond,) = one(objs, "ValidatingWebhookConfiguration", "gpuslice-webhook")["webhooks"][0]["matchConditions"]
    pod = {"metadata": {"name": "p", "namespace": "ml"},
           "spec": {"containers": [{"name": "c", "image": "i",
                                    "env": [{"name": "NVIDIA_VISIBLE_DEVICES", "value": "all"}]}]}}
    sent = [cel_eval(cond["expression"], object=pod, request={"namespace": ns}) for ns in ("ml", "gpu-operator")]
    assert sent == [True, False], sent


def test_a_nodes_power_exponent_reaches_the_agent():
    """nodeAgent.powerExponent becomes --power-exponent (the agent pins it in
    every pod's limits.conf); left empty, the agent keeps the default."""
    def agent_args(*sets):
        (c,) = one(chart(*sets), "DaemonSet", "gpuslice-node")["spec"]["template"]["spec"]["containers"]
        return args_of(c)
    assert agent_args("nodeAgent.powerExponent=0.42")["power-exponent"] == "0.42"
    assert "power-exponent" not in agent_args()


def test_a_nodes_share_yield_reaches_the_agent():
    """nodeAgent.shareYieldUs becomes --share-yield-us (the agent pins it in
    every pod's limits.conf); at its default 0 the flag is left out and the
    agent pins the interposer's default, off."""
    def agent_args(*sets):
        (c,) = one(chart(*sets), "DaemonSet", "gpuslice-node")["spec"]["template"]["spec"]["containers"]
        return args_of(c)
    assert agent_args("nodeAgent.shareYieldUs=300")["share-yield-us"] == "300"
    assert "share-yield-us" not in agent_args()
