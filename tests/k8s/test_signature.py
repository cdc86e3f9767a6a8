"""Assignments the pod's owner cannot edit: with --assignment-key the agent
accepts only an assignment the extender signed for this pod on this node
(gpuslice.io/assignment-signature, HMAC-SHA256), and a container restart
keeps the assignment it was first started with."""
import hashlib
import hmac
import os
import time

import grpc
import pytest

from conftest import AGENT, NODE, GpuNode, assignment

KEY = os.urandom(48)


def sign(uid, text, node=NODE, key=KEY):
    msg = b"".join(f"{len(f.encode())}:".encode() + f.encode()
                   for f in ("gpuslice assignment v1", uid, node, text))
    return "v1:hmac-sha256:" + hmac.new(key, msg, hashlib.sha256).hexdigest()


@pytest.fixture
def signed(tmp_path):
    if not AGENT or not os.path.exists(AGENT):
        pytest.fail("GPUSLICE_NODE_AGENT is not set (run through ctest)")
    n = GpuNode(tmp_path)
    keyfile = tmp_path / "assignment.key"
    keyfile.write_bytes(KEY)
    n.agent_args = ["--assignment-key", str(keyfile)]
    n.start_agent()
    yield n
    n.close()


def add_signed(node, name, text, sig_of=None):
    """A pod bound with an assignment; signed as the extender would (for
    this pod, or with sig_of(uid) when a test forges one)."""
    pod = node.add_pod(name, text)
    uid = pod["metadata"]["uid"]
    sig = sig_of(uid) if sig_of else sign(uid, text)
    if sig is not None:
        pod["metadata"]["annotations"]["gpuslice.io/assignment-signature"] = sig
        pod = node.api.put("Pod", pod)
    return pod


def refused(node, ids, *words):
    with pytest.raises(grpc.RpcError) as ei:
        node.kubelet.prestart(ids)
    assert ei.value.code() == grpc.StatusCode.FAILED_PRECONDITION, ei.value
    for w in words:
        assert w in ei.value.details(), ei.value.details()
    return ei.value.details()


def test_signed_assignment_is_accepted(signed):
    gpu = signed.uuids()[0]
    add_signed(signed, "ok", assignment(gpu, 0, 1000, 10))
    ids, resp = signed.kubelet.admit("ok")
    assert signed.limits(resp)["GPUSLICE_MEMORY_LIMIT_0"] == "1000Mi"


@pytest.mark.parametrize("forgery", ["missing", "garbage", "other-pod", "other-node",
                                     "other-key"])
def test_forged_signature_is_refused(signed, forgery):
    gpu = signed.uuids()[1]
    text = assignment(gpu, 0, 80000, 100)
    sig_of = {
        "missing": lambda uid: None,
        "garbage": lambda uid: "v1:hmac-sha256:" + "0" * 64,
        "other-pod": lambda uid: sign("another-uid", text),
        "other-node": lambda uid: sign(uid, text, node="node-b"),
        "other-key": lambda uid: sign(uid, text, key=os.urandom(32)),
    }[forgery]
    add_signed(signed, "forger", text, sig_of)
    ids, resp = signed.kubelet.admit("forger", prestart=False)
    why = refused(signed, ids, "default/forger", "gpuslice.io/assignment",
                  "missing" if forgery == "missing" else "does not match")
    assert signed.limits(resp) is None
    assert why in signed.logtext()


def test_annotation_edited_after_bind_and_restart(signed):
    """Edited after the bind (1000Mi/10 -> 80000Mi/100) and the container
    restarted: refused, limits.conf unchanged, the error logged."""
    gpu = signed.uuids()[2]
    add_signed(signed, "editor", assignment(gpu, 3, 1000, 10))
    ids, resp = signed.kubelet.admit("editor")
    before = signed.limits(resp)
    assert before["GPUSLICE_MEMORY_LIMIT_0"] == "1000Mi" and before["GPUSLICE_CORES_0"] == "10"
    pod = signed.api.get("Pod", "editor", "default")
    pod["metadata"]["annotations"]["gpuslice.io/assignment"] = assignment(gpu, 3, 80000, 100)
    signed.api.put("Pod", pod)
    end = time.time() + 10
    while True:  # until the agent's watch has the edit
        try:
            signed.kubelet.prestart(ids)
        except grpc.RpcError as e:
            assert e.code() == grpc.StatusCode.FAILED_PRECONDITION
            assert "default/editor" in e.details() and "does not match" in e.details()
            break
        assert time.time() < end, "the edited assignment was accepted"
        time.sleep(0.05)
    assert signed.limits(resp) == before
    assert "default/editor: the signature of its gpuslice.io/assignment" in signed.logtext()


def test_no_key_warns_loudly(node):
    assert "WARNING: no --assignment-key" in node.logtext()


def test_short_key_is_refused(tmp_path):
    n = GpuNode(tmp_path)
    try:
        short = tmp_path / "short.key"
        short.write_bytes(b"x" * 31)
        assert n.failed_start(["--assignment-key", str(short)]) == 1
        assert "too few bytes" in n.logtext()
    finally:
        n.close()
