"""`gpuslice inspect` against a running gpuslice-extender whose cache is fed by
the API-server stand-in (not Kubernetes): pods bound through the real bind
verb, then the table and --json checked against what was bound."""
import json
import os
import subprocess

from conftest import args_names, bind_args, free_port, node_obj, pod_obj

CLI = os.path.join(os.path.dirname(os.environ.get("GPUSLICE_EXTENDER", "")), "gpuslice")


def inspect(*args):
    p = subprocess.run([CLI, "inspect", *args], capture_output=True, text=True, timeout=30)
    return p.returncode, p.stdout, p.stderr


def bound(api, ext, name, mem, cores, node):
    pod = api.put("Pod", pod_obj(name, 1, mem, cores))
    res = ext.post("filter", args_names(pod, [node]))[1]
    assert res["NodeNames"] == [node], res
    assert ext.post("bind", bind_args(pod, node))[1] == {"Error": ""}


def test_inspect_table_and_json(api, start):
    assert os.path.exists(CLI), CLI
    api.put("Node", node_obj("gpu-b", ngpus=2))
    api.put("Node", node_obj("gpu-a", ngpus=4))
    api.put("Node", node_obj("cpu-1", ngpus=0))
    ext = start(args=("--gpu-policy", "binpack"))
    bound(api, ext, "infer-0", 8192, 30, "gpu-a")
    bound(api, ext, "infer-1", 4096, 50, "gpu-a")
    bound(api, ext, "train-0", 20000, 10, "gpu-b")
    ext.wait_state(lambda s: sum(len(g["pods"]) for n in s["nodes"] for g in n["gpus"]) == 3)

    rc, out, err = inspect("--url", ext.url, "--json")
    assert rc == 0, err
    doc = json.loads(out)
    assert [n["name"] for n in doc["nodes"]] == ["cpu-1", "gpu-a", "gpu-b"]
    a = doc["nodes"][1]
    assert a["model"] == "NVIDIA H100 80GB HBM3" and len(a["gpus"]) == 4
    # binpack: both gpu-a pods on one GPU.
    used = [g for g in a["gpus"] if g["pods"]]
    assert len(used) == 1
    g = used[0]
    assert g["memory_mib"] == 81920 and g["memory_allocated_mib"] == 8192 + 4096
    assert g["cores_allocated"] == 80.0 and g["replicas_used"] == 2 and g["replicas"] == 10
    assert sorted(p["pod"] for p in g["pods"]) == ["default/infer-0", "default/infer-1"]
    b = doc["nodes"][2]
    assert sum(x["memory_allocated_mib"] for x in b["gpus"]) == 20000

    rc, out, err = inspect("--url", ext.url + "/", "--pods")
    assert rc == 0, err
    lines = out.splitlines()
    assert lines[0].split()[:3] == ["NODE", "GPU", "MODEL"]
    row = next(ln for ln in lines if g["uuid"] in ln)
    assert "12288/81920 (15%)" in row and "80.0%" in row and " 2/10 " in row and row.endswith("ok")
    assert any("default/infer-0" in ln and "8192 MiB" in ln and "30.0%" in ln for ln in lines)
    assert "cpu-1" in out and "(no gpuslice inventory)" in out
    assert lines[-1] == "3 node(s), 6 GPU(s), 32288/491520 MiB GPU memory allocated"

    rc, out, err = inspect("--url", ext.url, "--node", "gpu-b", "--json")
    assert rc == 0 and [n["name"] for n in json.loads(out)["nodes"]] == ["gpu-b"]
    rc, out, err = inspect("--url", ext.url, "--node", "ghost")
    assert rc == 1 and "'ghost' is not in the extender's cache" in err


def test_inspect_errors(api, start):
    rc, out, err = inspect("--url", f"http://127.0.0.1:{free_port()}")
    assert rc == 1 and "cannot read" in err and out == ""
    # Something that is not the extender: the API stand-in answers 404 for /state.
    rc, out, err = inspect("--url", api.url)
    assert rc == 1 and "answered HTTP 404" in err
    assert inspect("--bogus")[0] == 2
    assert inspect("--timeout", "0")[0] == 2
    assert inspect("extra")[0] == 2
    rc, out, _ = inspect("--help")
    assert rc == 0 and "--json" in out
