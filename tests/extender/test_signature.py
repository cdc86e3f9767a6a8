"""Signed assignments: with --assignment-key the extender signs what it
binds (HMAC-SHA256 over pod UID, node and the assignment text), and its
cache counts only assignments whose signature verifies, so a pod's owner
who edits gpuslice.io/assignment cannot inflate the books."""
import hashlib
import hmac
import json
import os
import time

from conftest import bind_args, gpu_usage, node_obj, pod_obj

KEY = os.urandom(32)


def sign(uid, node, text, key=KEY):
    msg = b"".join(f"{len(f.encode())}:".encode() + f.encode()
                   for f in ("gpuslice assignment v1", uid, node, text))
    return "v1:hmac-sha256:" + hmac.new(key, msg, hashlib.sha256).hexdigest()


def test_extender_signs_and_ignores_edited_assignments(api, start, tmp_path):
    keyfile = tmp_path / "assignment.key"
    keyfile.write_bytes(KEY)
    api.put("Node", node_obj("gpu-a"))
    ext = start("signed", ["--assignment-key", str(keyfile)])
    ext.wait_state(lambda s: len(s["nodes"]) == 1)
    p = api.put("Pod", pod_obj("a", 1, 1000, 10))
    assert ext.post("bind", bind_args(p, "gpu-a"))[1]["Error"] == ""
    ann = api.get("Pod", "a", "default")["metadata"]["annotations"]
    text = ann["gpuslice.io/assignment"]
    assert ann["gpuslice.io/assignment-signature"] == sign(p["metadata"]["uid"], "gpu-a", text)
    ext.wait_state(lambda s: sum(m for m, _ in gpu_usage(s, "gpu-a")) == 1000)

    # The owner edits the assignment: the books keep the signed one.
    pod = api.get("Pod", "a", "default")
    edited = json.loads(text)
    edited["gpus"][0]["memory_mib"] = 80000
    pod["metadata"]["annotations"]["gpuslice.io/assignment"] = json.dumps(edited)
    api.put("Pod", pod)
    # An unsigned pod and one with a signature copied from pod a.
    for name, sig in (("unsigned", None), ("copied", ann["gpuslice.io/assignment-signature"])):
        q = pod_obj(name, 1, 1000, 10)
        q["spec"]["nodeName"] = "gpu-a"
        q["metadata"].setdefault("annotations", {})["gpuslice.io/assignment"] = text
        if sig:
            q["metadata"]["annotations"]["gpuslice.io/assignment-signature"] = sig
        api.put("Pod", q)
    ext.wait_state(lambda s: "not counted" in ext.logtext() and
                   "still counted as last verified" in ext.logtext(), what="the log")
    assert sum(m for m, _ in gpu_usage(ext.state(), "gpu-a")) == 1000
    # Nor may the owner shrink the books: garbage, then no assignment at all.
    for edit in ("garbage", None):
        pod = api.get("Pod", "a", "default")
        if edit:
            pod["metadata"]["annotations"]["gpuslice.io/assignment"] = edit
        else:
            del pod["metadata"]["annotations"]["gpuslice.io/assignment"]
        api.put("Pod", pod)
        ext.wait_state(lambda s, n=2 if edit else 3: ext.logtext().count("still counted as last verified") >= n,
                       what=f"the edit {edit!r} seen")
        assert sum(m for m, _ in gpu_usage(ext.state(), "gpu-a")) == 1000, edit
    pod = api.get("Pod", "a", "default")
    pod["metadata"]["annotations"]["gpuslice.io/assignment"] = json.dumps(edited)
    api.put("Pod", pod)

    # A rebuilt cache (restart) counts none of the three pods: nothing
    # verifies now. Pod a's node claim, the extender's own record of what it
    # bound, still counts its signed 1000 MiB while the claim lives; once
    # the claim has expired, nothing is counted.
    ext.kill()
    ext2 = start("rebuilt", ["--assignment-key", str(keyfile)])
    ext2.wait_state(lambda s: len(s["nodes"]) == 1)
    ext2.wait_state(lambda s: ext2.logtext().count("not counted") >= 3, what="three refusals")
    assert sum(m for m, _ in gpu_usage(ext2.state(), "gpu-a")) == 1000
    assert "does not match" in ext2.logtext() and "missing" in ext2.logtext()
    ext2.kill()
    time.sleep(2.2)  # whole seconds: the claim is > 1 s old
    ext3 = start("expired", ["--assignment-key", str(keyfile), "--claim-ttl", "1"])
    ext3.wait_state(lambda s: len(s["nodes"]) == 1)
    ext3.wait_state(lambda s: ext3.logtext().count("not counted") >= 3, what="three refusals")
    assert sum(m for m, _ in gpu_usage(ext3.state(), "gpu-a")) == 0


def test_without_a_key_the_extender_warns_and_signs_nothing(api, start):
    api.put("Node", node_obj("gpu-a"))
    ext = start()
    ext.wait_state(lambda s: len(s["nodes"]) == 1)
    p = api.put("Pod", pod_obj("a", 1, 1000, 10))
    assert ext.post("bind", bind_args(p, "gpu-a"))[1]["Error"] == ""
    ann = api.get("Pod", "a", "default")["metadata"]["annotations"]
    assert "gpuslice.io/assignment-signature" not in ann
    assert "WARNING: no --assignment-key" in ext.logtext()
