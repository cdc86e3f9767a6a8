"""The extender reaches the API server through a kubeconfig as kind and
kubeadm write them: over HTTPS, the server checked against the cluster's
CA, logging in with a client certificate (inline base64 or files beside the
kubeconfig). The API-server stand-in (tests/k8s/apiserver_standin.py, not a
kube-apiserver) serves TLS and, as kube-apiserver with --client-ca-file,
answers only clients holding a certificate its client CA issued."""
import base64
import os
import subprocess

import pytest

from apiserver_ext import ExtApiServerStandIn
from conftest import EXTENDER, Extender, node_obj
from tls_pki import make_ca, make_cert


@pytest.fixture(scope="module")
def pki(tmp_path_factory):
    d = str(tmp_path_factory.mktemp("pki"))
    make_ca(d, "cluster-ca")
    make_cert(d, "apiserver", "cluster-ca", "serverAuth", "IP:127.0.0.1")
    make_ca(d, "client-ca")
    make_cert(d, "gpuslice-extender", "client-ca", "clientAuth")
    make_ca(d, "rogue-ca")
    make_cert(d, "rogue", "rogue-ca", "clientAuth")
    return d


@pytest.fixture
def api(pki):
    a = ExtApiServerStandIn(tls=(os.path.join(pki, "apiserver.crt"), os.path.join(pki, "apiserver.key"),
                                 os.path.join(pki, "client-ca.crt")))
    a.put("Node", node_obj("n1"))
    yield a
    a.close()


def b64(pki, name):
    with open(os.path.join(pki, name), "rb") as f:
        return base64.b64encode(f.read()).decode()


def kubeconfig(path, server, cluster, user):
    """A kubeconfig in kubectl's layout, with a second context that is not
    the current one."""
    lines = ["apiVersion: v1", "kind: Config", "clusters:", "- name: other", "  cluster:",
             "    server: https://192.0.2.1:6443", "- name: kind-kind", "  cluster:",
             f"    server: {server}"]
    lines += [f"    {k}: {v}" for k, v in cluster.items()]
    lines += ["contexts:", "- context: {cluster: other, user: other}", "  name: other",
              "- context:", "    cluster: kind-kind", "    user: kind-kind", "  name: kind-kind",
              "current-context: kind-kind", "users:", "- name: other", "  user: {token: wrong}",
              "- name: kind-kind", "  user:"]
    lines += [f"    {k}: {v}" for k, v in user.items()]
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")
    return str(path)


def start(api, tmp_path, cfg):
    if not EXTENDER or not os.path.exists(EXTENDER):
        pytest.fail("GPUSLICE_EXTENDER is not set (run through ctest)")
    return Extender(api, tmp_path, login=["--kubeconfig", cfg], ready=False)


def logs_in(api, tmp_path, cfg):
    """The extender started with cfg reads the node from the API server,
    every request under its client certificate."""
    e = start(api, tmp_path, cfg)
    try:
        e.wait_ready()
        e.wait_state(lambda s: any(n["name"] == "n1" for n in s["nodes"]), what="node n1 from the API server")
        assert api.peers and set(api.peers) == {"gpuslice-extender"}, api.peers
    finally:
        e.stop()


def gets_nowhere(api, tmp_path, cfg):
    """The extender started with cfg stays up but unready, and no request of
    its reaches the API server (the TLS handshake fails). Its log."""
    e = start(api, tmp_path, cfg)
    try:
        with pytest.raises(AssertionError, match="never became ready"):
            e.wait_ready(timeout=3)
        assert api.requests == []
        return e.logtext()
    finally:
        e.stop()


def inline_client(pki, name="gpuslice-extender"):
    return {"client-certificate-data": b64(pki, f"{name}.crt"), "client-key-data": b64(pki, f"{name}.key")}


def test_a_client_certificate_inline_logs_the_extender_in(api, pki, tmp_path):
    logs_in(api, tmp_path, kubeconfig(tmp_path / "config", api.url,
                                      {"certificate-authority-data": b64(pki, "cluster-ca.crt")}, inline_client(pki)))


def test_a_client_certificate_in_files_beside_the_kubeconfig_logs_the_extender_in(api, pki, tmp_path, monkeypatch):
    d = tmp_path / "kube"
    d.mkdir()
    for name in ("cluster-ca.crt", "gpuslice-extender.crt", "gpuslice-extender.key"):
        os.symlink(os.path.join(pki, name), d / name)
    monkeypatch.chdir(tmp_path)  # relative to the kubeconfig, not to where the extender runs
    logs_in(api, tmp_path, kubeconfig(d / "config", api.url, {"certificate-authority": "cluster-ca.crt"},
                                      {"client-certificate": "gpuslice-extender.crt",
                                       "client-key": "gpuslice-extender.key"}))


def test_a_certificate_the_api_server_does_not_trust_gets_nothing(api, pki, tmp_path):
    gets_nowhere(api, tmp_path, kubeconfig(tmp_path / "config", api.url,
                                           {"certificate-authority-data": b64(pki, "cluster-ca.crt")},
                                           inline_client(pki, "rogue")))


def test_an_api_server_outside_the_clusters_ca_is_not_talked_to(api, pki, tmp_path):
    log = gets_nowhere(api, tmp_path, kubeconfig(tmp_path / "config", api.url,
                                                 {"certificate-authority-data": b64(pki, "rogue-ca.crt")},
                                                 inline_client(pki)))
    assert "certificate" in log.lower()


def test_a_login_it_cannot_make_stops_it_at_start_saying_which(api, tmp_path):
    path = tmp_path / "config"
    path.write_text("clusters:\n- name: c\n  cluster: {server: 'https://127.0.0.1:1'}\n"
                    "contexts:\n- name: c\n  context: {cluster: c, user: eks}\ncurrent-context: c\n"
                    "users:\n- name: eks\n  user:\n    exec:\n      command: aws\n      args: [eks, get-token]\n")
    p = subprocess.run([EXTENDER, "--kubeconfig", str(path), "--port", "0"], capture_output=True, text=True,
                       timeout=20)
    assert p.returncode != 0
    assert "user 'eks' logs in through an exec plugin (aws)" in p.stderr, p.stderr


def test_a_token_file_that_is_not_there_yet_is_named_and_waited_for(api, pki, tmp_path):
    """A projected token file can appear after the process starts: each
    request reads it, says why it cannot, and the next list takes it once
    it is there (the stand-in does not check tokens; the certificate still
    logs the extender in)."""
    token = tmp_path / "token"
    user = {"tokenFile": str(token), **inline_client(pki)}
    e = start(api, tmp_path, kubeconfig(tmp_path / "config", api.url,
                                        {"certificate-authority-data": b64(pki, "cluster-ca.crt")}, user))
    try:
        with pytest.raises(AssertionError, match="never became ready"):
            e.wait_ready(timeout=3)
        assert api.requests == []
        assert f"token file {token}: No such file or directory" in e.logtext()
        token.write_text("abc.def\n")
        e.wait_ready(timeout=60)
    finally:
        e.stop()
