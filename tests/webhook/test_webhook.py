"""gpuslice-webhook over HTTPS: AdmissionReview v1 bodies shaped like the ones
kube-apiserver sends (fields re-typed from the admission.k8s.io/v1 reference),
a throwaway CA + serving certificate made with openssl for each test session,
and malformed bodies. The API server itself is not involved: the test plays
its part (sends the review, applies the returned JSON Patch)."""
import base64
import concurrent.futures
import copy
import json
import os
import signal
import socket
import ssl
import subprocess
import time
import urllib.error
import urllib.request
import uuid

import pytest

WEBHOOK = os.environ.get("GPUSLICE_WEBHOOK", "")


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


@pytest.fixture(scope="session")
def certs(tmp_path_factory):
    d = tmp_path_factory.mktemp("certs")
    run = lambda *a: subprocess.run(a, cwd=d, check=True, capture_output=True)  # noqa: E731
    run("openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
        "-subj", "/CN=gpuslice-test-ca", "-keyout", "ca.key", "-out", "ca.crt")
    (d / "ext.cnf").write_text("subjectAltName=DNS:localhost,DNS:gpuslice-webhook.gpuslice-system.svc,"
                               "IP:127.0.0.1\nextendedKeyUsage=serverAuth\n")
    run("openssl", "req", "-newkey", "rsa:2048", "-nodes", "-subj", "/CN=gpuslice-webhook",
        "-keyout", "tls.key", "-out", "tls.csr")
    run("openssl", "x509", "-req", "-in", "tls.csr", "-CA", "ca.crt", "-CAkey", "ca.key",
        "-CAcreateserial", "-days", "1", "-extfile", "ext.cnf", "-out", "tls.crt")
    return d


class Webhook:
    def __init__(self, certs, tmp, args=()):
        if not WEBHOOK or not os.path.exists(WEBHOOK):
            pytest.fail("GPUSLICE_WEBHOOK is not set (run through ctest)")
        self.port = free_port()
        self.logpath = tmp / f"webhook-{self.port}.log"
        self.log = open(self.logpath, "wb")
        self.proc = subprocess.Popen(
            [WEBHOOK, "--addr", "127.0.0.1", "--port", str(self.port), "--tls-cert",
             str(certs / "tls.crt"), "--tls-key", str(certs / "tls.key"), *args],
            stdout=self.log, stderr=self.log,
            env=dict(os.environ, ASAN_OPTIONS="detect_leaks=1"))
        self.ctx = ssl.create_default_context(cafile=str(certs / "ca.crt"))
        end = time.time() + 15
        while True:
            assert self.proc.poll() is None, f"webhook died: {self.logtext()}"
            try:
                if self.request("GET", "/healthz")[0] == 200:
                    break
            except OSError:
                assert time.time() < end, "webhook never answered /healthz"
                time.sleep(0.05)

    def request(self, method, path, data=None):
        req = urllib.request.Request(f"https://localhost:{self.port}{path}", data=data,
                                     method=method, headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=10, context=self.ctx) as r:
                return r.status, r.read()
        except urllib.error.HTTPError as e:
            return e.code, e.read()

    def review(self, body, path="/mutate"):
        data = body if isinstance(body, bytes) else json.dumps(body).encode()
        st, raw = self.request("POST", path, data)
        return st, json.loads(raw)

    def logtext(self):
        self.log.flush()
        return self.logpath.read_text(errors="replace")

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            rc = self.proc.wait(timeout=20)
            assert rc == 0, f"webhook exited {rc}: {self.logtext()}"
        self.log.close()


@pytest.fixture
def wh(certs, tmp_path):
    w = Webhook(certs, tmp_path)
    yield w
    w.stop()


def pod(gpus="1", mem="8192", cores=None, scheduler="default-scheduler", annotations=None,
        extra=None, name="infer-0"):
    lim = {"cpu": "1", "memory": "2Gi"}
    for k, v in (("gpuslice.io/gpu", gpus), ("gpuslice.io/gpu-memory", mem),
                 ("gpuslice.io/gpu-cores", cores)):
        if v is not None:
            lim[k] = v
    lim.update(extra or {})
    md = {"name": name, "namespace": "ml", "labels": {"app": "infer"}}
    if annotations:
        md["annotations"] = annotations
    spec = {"containers": [{"name": "main", "image": "nvcr.io/nvidia/pytorch:24.05-py3",
                            "resources": {"limits": lim, "requests": dict(lim)}}],
            "restartPolicy": "Always", "dnsPolicy": "ClusterFirst",
            "serviceAccountName": "default", "priority": 0}
    if scheduler is not None:
        spec["schedulerName"] = scheduler  # kube-apiserver's defaulting sets it before admission
    return {"apiVersion": "v1", "kind": "Pod", "metadata": md, "spec": spec,
            "status": {}}


def review(obj, op="CREATE", kind="Pod"):
    """AdmissionReview as kube-apiserver sends it for a pod create."""
    return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
            "request": {"uid": str(uuid.uuid4()),
                        "kind": {"group": "", "version": "v1", "kind": kind},
                        "resource": {"group": "", "version": "v1", "resource": "pods"},
                        "requestKind": {"group": "", "version": "v1", "kind": kind},
                        "requestResource": {"group": "", "version": "v1", "resource": "pods"},
                        "name": obj["metadata"]["name"] if isinstance(obj, dict) else "",
                        "namespace": "ml", "operation": op,
                        "userInfo": {"username": "system:serviceaccount:ml:deployer",
                                     "uid": "5e6f", "groups": ["system:serviceaccounts"]},
                        "object": obj, "oldObject": None, "dryRun": False,
                        "options": {"apiVersion": "meta.k8s.io/v1", "kind": "CreateOptions"}}}


def json_patch(doc, ops):
    """Applies RFC 6902 add/replace (all the webhook emits), as the API server would."""
    doc = copy.deepcopy(doc)
    for op in ops:
        assert op["op"] in ("add", "replace"), op
        toks = [t.replace("~1", "/").replace("~0", "~") for t in op["path"].split("/")[1:]]
        cur = doc
        for t in toks[:-1]:
            cur = cur[int(t)] if isinstance(cur, list) else cur[t]
        if op["op"] == "replace":
            assert toks[-1] in cur, f"replace of a missing member: {op}"
        cur[toks[-1]] = op["value"]
    return doc


def answer(body, rev):
    assert body["apiVersion"] == "admission.k8s.io/v1" and body["kind"] == "AdmissionReview"
    r = body["response"]
    assert r["uid"] == rev["request"]["uid"]
    return r


def decoded_patch(r):
    assert r["patchType"] == "JSONPatch"
    return json.loads(base64.b64decode(r["patch"], validate=True))


def test_fractional_pod_gets_scheduler_and_default_cores(wh):
    p = pod(mem="8192", cores=None)
    rev = review(p)
    st, body = wh.review(rev)
    r = answer(body, rev)
    assert st == 200 and r["allowed"] is True
    ops = decoded_patch(r)
    got = json_patch(p, ops)
    assert got["spec"]["schedulerName"] == "gpuslice-scheduler"
    res = got["spec"]["containers"][0]["resources"]
    assert res["limits"]["gpuslice.io/gpu-cores"] == "10"
    assert res["requests"]["gpuslice.io/gpu-cores"] == "10"
    assert any("defaulted to 10" in w for w in r["warnings"])
    # The mutated pod passes validation (what the validating webhook sees next).
    rev2 = review(got)
    st, body = wh.review(rev2, "/validate")
    r2 = answer(body, rev2)
    assert st == 200 and r2["allowed"] is True and "patch" not in r2


def test_cores_given_only_scheduler_changes(wh):
    p = pod(mem="4096", cores="30", scheduler=None)
    rev = review(p)
    r = answer(wh.review(rev)[1], rev)
    ops = decoded_patch(r)
    assert ops == [{"op": "add", "path": "/spec/schedulerName", "value": "gpuslice-scheduler"}]
    assert "warnings" not in r


def test_whole_gpu_pod_no_cores_default(wh):
    p = pod(gpus="2", mem=None, cores=None)
    rev = review(p)
    ops = decoded_patch(answer(wh.review(rev)[1], rev))
    assert [o["path"] for o in ops] == ["/spec/schedulerName"]


def test_non_gpu_pod_untouched(wh):
    p = pod(gpus=None, mem=None, annotations={"gpuslice.io/scheduling": "not json"})
    p["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] = "1"
    rev = review(p)
    st, body = wh.review(rev)
    r = answer(body, rev)
    assert st == 200 and r == {"uid": rev["request"]["uid"], "allowed": True}


@pytest.mark.parametrize("mutate,needle", [
    (lambda p: p["spec"]["containers"][0]["resources"]["limits"].update(
        {"gpuslice.io/gpu-cores": "150"}), "gpu-cores\" must be 1..100 percent per GPU, got 150"),
    (lambda p: p["spec"]["containers"][0]["resources"]["limits"].update(
        {"gpuslice.io/gpu-memory": "8Gi"}), "gpuslice.io/gpu-memory"),
    (lambda p: [p["spec"]["containers"][0]["resources"][k].update(
        {"gpuslice.io/gpu": "0"}) for k in ("limits", "requests")], "must be 1..16 GPUs, got 0"),
    (lambda p: p["spec"]["containers"][0]["resources"]["requests"].update(
        {"gpuslice.io/gpu-mem": "10"}), "unknown resource \"gpuslice.io/gpu-mem\""),
    (lambda p: p["spec"]["containers"][0]["resources"]["requests"].update(
        {"gpuslice.io/gpu-memory": "4096"}), "requests and limits of \"gpuslice.io/gpu-memory\" differ"),
    (lambda p: p["metadata"].setdefault("annotations", {}).update(
        {"gpuslice.io/scheduling": '{"v":1,"polcy":"spread"}'}), "unknown field \"polcy\""),
    (lambda p: p["metadata"].setdefault("annotations", {}).update(
        {"gpuslice.io/scheduling": '{"v":2}'}), "\"v\" must be 1"),
    (lambda p: p["metadata"].setdefault("annotations", {}).update(
        {"gpuslice.io/scheduling": '{"v":1,"mode":"fast"}'}), "\"mode\" must be \"cap\" or \"share\""),
    (lambda p: p["spec"]["containers"].append(copy.deepcopy(p["spec"]["containers"][0])),
     "both request gpuslice GPUs"),
    (lambda p: p["spec"].update({"initContainers": [copy.deepcopy(p["spec"]["containers"][0])]}),
     "spec.initContainers[0] requests gpuslice resources"),
    (lambda p: p["spec"].update({"schedulerName": 7}), "schedulerName must be a string"),
])
@pytest.mark.parametrize("path", ["/mutate", "/validate"])
def test_malformed_pod_rejected_with_reason(wh, mutate, needle, path):
    p = pod()
    mutate(p)
    rev = review(p)
    st, body = wh.review(rev, path)
    r = answer(body, rev)
    assert st == 200 and r["allowed"] is False and "patch" not in r
    assert r["status"]["code"] == 400
    assert needle in r["status"]["message"], r["status"]["message"]
    assert r["status"]["message"].startswith("gpuslice: pod ml/infer-0: ")


def test_other_operations_and_kinds_pass(wh):
    bad = pod(cores="150")
    update = review(bad, op="UPDATE")  # not re-validated; its annotations are (test_tenant_policy.py)
    update["request"]["oldObject"] = bad
    for rev in (update, review(None, op="DELETE"), review(bad, kind="Binding")):
        st, body = wh.review(rev)
        assert st == 200 and answer(body, rev) == {"uid": rev["request"]["uid"], "allowed": True}
    rev = review(5)  # a Pod create whose object is not an object
    r = answer(wh.review(rev)[1], rev)
    assert r["allowed"] is False and "not a Pod" in r["status"]["message"]


@pytest.mark.parametrize("data,needle", [
    (b"", "not JSON"),
    (b"{\"apiVersion\":", "not JSON"),
    (b"[1,2]", "not an AdmissionReview"),
    (b'{"kind":"AdmissionReview","apiVersion":"admission.k8s.io/v1beta1","request":{"uid":"a"}}',
     "must be admission.k8s.io/v1 (got admission.k8s.io/v1beta1)"),
    (b'{"kind":"AdmissionReview","apiVersion":"admission.k8s.io/v1","request":{}}', "request.uid"),
    (b'{"kind":"AdmissionReview","apiVersion":"admission.k8s.io/v1","request":{"uid":""}}',
     "request.uid"),
    (b'{"kind":"AdmissionReview","kind":"AdmissionReview"}', "not JSON"),  # duplicate key
    (b"[" * 5000 + b"]" * 5000, "not JSON"),
    (b"\xff\xfe\x00garbage", "not JSON"),
])
def test_malformed_body_is_400(wh, data, needle):
    st, body = wh.review(data)
    assert st == 400 and needle in body["error"], body
    assert wh.proc.poll() is None


def test_routes_and_plain_http(wh):
    assert wh.request("GET", "/mutate")[0] == 404
    assert wh.request("POST", "/other", b"{}")[0] == 404
    # The port speaks TLS only.
    with pytest.raises((urllib.error.URLError, ConnectionError, OSError)):
        urllib.request.urlopen(f"http://127.0.0.1:{wh.port}/healthz", timeout=5).read()
    assert wh.proc.poll() is None


def test_concurrent_reviews(wh):
    def one(i):
        rev = review(pod(name=f"p{i}", mem=str(1024 + i)))
        st, body = wh.review(rev)
        return st, answer(body, rev)["allowed"]
    with concurrent.futures.ThreadPoolExecutor(8) as ex:
        assert set(ex.map(one, range(64))) == {(200, True)}


def test_flags_scheduler_name_and_no_default(certs, tmp_path):
    w = Webhook(certs, tmp_path, ["--scheduler-name", "gpu-sched", "--default-gpu-cores", "0"])
    try:
        p = pod(cores=None)
        rev = review(p)
        r = answer(w.review(rev)[1], rev)
        assert decoded_patch(r) == [{"op": "replace", "path": "/spec/schedulerName",
                                     "value": "gpu-sched"}]
        p = pod(scheduler="volcano")
        rev = review(p)
        r = answer(w.review(rev)[1], rev)
        assert "patch" not in r and "volcano" in r["warnings"][0]
    finally:
        w.stop()


@pytest.mark.parametrize("args,rc,needle", [
    ([], 2, "--tls-cert and --tls-key are required"),
    (["--tls-cert", "/nonexistent.crt", "--tls-key", "/nonexistent.key"], 2,
     "--tls-cert '/nonexistent.crt': cannot read it"),
    (["--default-gpu-cores", "101"], 2, "--default-gpu-cores '101': expected a whole number from 0 to 100"),
    (["--port", "x"], 2, "--port 'x': expected a whole number"),
    (["--annotation-writer", "bob"], 2, "--annotation-writer 'bob': expected a service account"),
])
def test_bad_startup(args, rc, needle):
    if not WEBHOOK:
        pytest.fail("GPUSLICE_WEBHOOK is not set (run through ctest)")
    p = subprocess.run([WEBHOOK, *args], capture_output=True, text=True, timeout=10)
    assert p.returncode == rc and needle in p.stderr, p.stderr
