"""Mutual TLS between kube-scheduler and the extender: with --client-ca,
filter/prioritize/bind (and every other request on the main listener) are
answered only over a connection whose client certificate that CA issued for
client authentication; --status-port serves /healthz, /readyz, /metrics and
/state apart, where no client certificate is asked and no verb is reachable.
Throwaway CAs and certificates are made with openssl per test session."""
import http.client
import json
import os
import ssl
import subprocess
import time

import pytest

from conftest import EXTENDER, bind_args, free_port, node_obj, pod_obj
from tls_pki import make_ca, make_cert


@pytest.fixture(scope="module")
def pki(tmp_path_factory):
    d = str(tmp_path_factory.mktemp("pki"))
    make_ca(d, "serving-ca")
    make_cert(d, "extender", "serving-ca", "serverAuth", "IP:127.0.0.1")
    make_ca(d, "scheduler-ca")
    make_cert(d, "kube-scheduler", "scheduler-ca", "clientAuth")
    make_cert(d, "not-a-client", "scheduler-ca", "serverAuth")  # right CA, wrong purpose
    make_ca(d, "rogue-ca")
    make_cert(d, "rogue", "rogue-ca", "clientAuth")
    return d


def ctx(pki, client=None):
    c = ssl.create_default_context(cafile=os.path.join(pki, "serving-ca.crt"))
    if client:
        c.load_cert_chain(os.path.join(pki, f"{client}.crt"), os.path.join(pki, f"{client}.key"))
    return c


def request(port, pki, method, path, body=None, client=None):
    c = http.client.HTTPSConnection("127.0.0.1", port, context=ctx(pki, client), timeout=15)
    try:
        data = json.dumps(body).encode() if body is not None else None
        c.request(method, path, body=data, headers={"Content-Type": "application/json"})
        r = c.getresponse()
        return r.status, r.read().decode()
    finally:
        c.close()


@pytest.fixture
def ext(api, tmp_path, pki):
    if not EXTENDER or not os.path.exists(EXTENDER):
        pytest.fail("GPUSLICE_EXTENDER is not set (run through ctest)")
    port, sport = free_port(), free_port()
    log = open(tmp_path / "ext.log", "ab")
    p = subprocess.Popen([EXTENDER, "--api-server", api.url, "--addr", "127.0.0.1",
                          "--port", str(port), "--tls-cert", os.path.join(pki, "extender.crt"),
                          "--tls-key", os.path.join(pki, "extender.key"),
                          "--client-ca", os.path.join(pki, "scheduler-ca.crt"),
                          "--status-addr", "127.0.0.1", "--status-port", str(sport)],
                         stdout=log, stderr=log)
    end = time.time() + 15
    while time.time() < end:
        assert p.poll() is None, open(tmp_path / "ext.log").read()
        try:
            if request(sport, pki, "GET", "/readyz")[0] == 200:
                break
        except OSError:
            pass
        time.sleep(0.05)
    else:
        raise AssertionError("extender never became ready")
    yield port, sport
    p.terminate()
    assert p.wait(timeout=30) == 0
    log.close()


def test_bind_needs_the_schedulers_client_certificate(api, ext, pki):
    port, sport = ext
    api.put("Node", node_obj("gpu-a"))
    time.sleep(0.3)  # the watch brings the node in
    pod = api.put("Pod", pod_obj("victim", 1, 8192, 10))
    args = bind_args(pod, "gpu-a")
    for who in (None, "rogue", "not-a-client"):
        st, body = request(port, pki, "POST", "/gpuslice/bind", args, client=who)
        assert st == 403, (who, st, body)
        assert "client certificate" in json.loads(body)["Error"]
    for verb in ("filter", "prioritize"):
        assert request(port, pki, "POST", f"/gpuslice/{verb}", {"Pod": pod, "NodeNames": ["gpu-a"]})[0] == 403
    assert api.bindings == []
    assert "gpuslice.io/assignment" not in (api.get("Pod", "victim", "default")["metadata"]
                                            .get("annotations") or {})
    # The scheduler's certificate: answered, and the pod is bound.
    st, body = request(port, pki, "POST", "/gpuslice/bind", args, client="kube-scheduler")
    assert st == 200 and json.loads(body) == {"Error": ""}, body
    assert api.bindings == [("default", "victim", "gpu-a")]


def test_status_endpoints_are_apart_from_the_verbs(api, ext, pki):
    port, sport = ext
    api.put("Node", node_obj("gpu-a"))
    # The status listener asks no client certificate and serves no verb.
    end = time.time() + 10
    while time.time() < end:
        st, body = request(sport, pki, "GET", "/state")
        if st == 200 and json.loads(body)["nodes"]:
            break
        time.sleep(0.05)
    assert st == 200 and [n["name"] for n in json.loads(body)["nodes"]] == ["gpu-a"]
    assert request(sport, pki, "GET", "/metrics")[0] == 200
    pod = api.put("Pod", pod_obj("p", 1, 8192, 10))
    assert request(sport, pki, "POST", "/gpuslice/bind", bind_args(pod, "gpu-a"),
                   client="kube-scheduler")[0] == 404
    assert api.bindings == []
    # The main listener: nothing without the certificate, no status with it.
    assert request(port, pki, "GET", "/state")[0] == 403
    assert request(port, pki, "GET", "/state", client="kube-scheduler")[0] == 404


def test_client_ca_needs_tls(api, pki, tmp_path):
    p = subprocess.run([EXTENDER, "--api-server", api.url, "--client-ca",
                        os.path.join(pki, "scheduler-ca.crt")], capture_output=True, text=True,
                       timeout=30)
    assert p.returncode == 2 and "--client-ca needs --tls-cert" in p.stderr


def test_tls_below_1_2_is_refused_on_both_listeners(ext, pki):
    for port in ext:
        old = ctx(pki, "kube-scheduler")
        old.set_ciphers("DEFAULT:@SECLEVEL=0")  # let this client offer TLS 1.0/1.1 at all
        old.minimum_version = ssl.TLSVersion.TLSv1
        old.maximum_version = ssl.TLSVersion.TLSv1_1
        c = http.client.HTTPSConnection("127.0.0.1", port, context=old, timeout=15)
        with pytest.raises(ssl.SSLError):
            c.request("GET", "/healthz")
        c.close()
