"""gpuslice-node-agent against the kubelet and API-server stand-ins, with
NVML and XID events from the simulated driver."""
import concurrent.futures as cf
import json
import http.client
import os
import shlex
import subprocess
import time
import urllib.request

from conftest import NGPUS, NODE, REPLICAS, assignment


def envs(resp):
    return dict(resp.envs)


def test_registers_and_lists_replicas_with_topology(node):
    reg = node.kubelet.registrations[0]
    assert reg.version == "v1beta1"
    assert reg.resource_name == "gpuslice.io/gpu"
    assert reg.endpoint == "gpuslice.sock"
    assert reg.options.get_preferred_allocation_available
    opts = node.kubelet.options()
    assert opts.get_preferred_allocation_available and opts.pre_start_required
    node.kubelet.wait(lambda: len(node.kubelet.devices) == NGPUS * REPLICAS, what="all replicas")
    uuids = node.uuids()
    assert len(uuids) == NGPUS and len(set(uuids)) == NGPUS
    for i, u in enumerate(uuids):
        for k in range(REPLICAS):
            assert node.kubelet.devices[f"{u}::{k}"] == "Healthy"
            assert node.kubelet.topology[f"{u}::{k}"] == [[0, 0, 1, 1][i]]


def test_inventory_annotation_is_versioned_and_complete(node):
    inv = node.inventory()
    assert inv["v"] == 1
    assert [g["index"] for g in inv["gpus"]] == list(range(NGPUS))
    for g in inv["gpus"]:
        assert g["uuid"].startswith("GPU-")
        assert g["memory_mib"] == 80 * 1024  # the sim's default 80 GiB
        assert g["sm_count"] == 132          # from the CUDA driver (sim)
        assert g["replicas"] == REPLICAS and g["healthy"] is True
        assert g["model"]
    assert [g["numa"] for g in inv["gpus"]] == [0, 0, 1, 1]


def _burst(node, n, prefix):
    uuids = node.uuids()
    pods = []
    for i in range(n):
        gpu, k = uuids[i % NGPUS], i // NGPUS
        mem, cores = 1024 + 256 * i, 5 + i
        p = node.add_pod(f"{prefix}-{i:02d}", assignment(gpu, k, mem, cores))
        pods.append((p, gpu, f"{gpu}::{k}", mem, cores))
    return pods


def _check(node, resp, pod, gpu, mem, cores):
    """Allocate's answer (pod-independent) and, after PreStartContainer,
    the limits.conf written for this pod's container."""
    e = envs(resp)
    assert e["NVIDIA_VISIBLE_DEVICES"] == gpu
    assert e["CUDA_DEVICE_ORDER"] == "PCI_BUS_ID"
    assert e["GPUSLICE_REGION"] == "/var/run/gpuslice/region"
    assert e["GPUSLICE_CONFIG"] == "/etc/gpuslice/limits.conf"
    # Limits are late-bound: never in the environment (env beats the file).
    assert not [k for k in e if k.startswith(("GPUSLICE_MEMORY", "GPUSLICE_CORES",
                                              "GPUSLICE_CONTAINER", "CUDA_DEVICE_MEMORY"))], e
    mounts = {m.container_path: (m.host_path, m.read_only) for m in resp.mounts}
    assert mounts["/etc/ld.so.preload"] == ("/opt/gpuslice/ld.so.preload", True)
    assert mounts["/opt/gpuslice/libgpuslice.so"] == ("/opt/gpuslice/libgpuslice.so", True)
    sd, ro = mounts["/var/run/gpuslice"]
    assert not ro and os.path.isdir(sd) and sd.startswith(node.state_root + "/a-")
    ld, ro = mounts["/etc/gpuslice"]
    assert ro and ld == os.path.join(node.state_root, ".limits", os.path.basename(sd))
    lim = node.limits(resp)
    assert lim == {"GPUSLICE_CONTAINER": f"default/{pod['metadata']['name']}/main",
                   "GPUSLICE_COMPUTE_MODE": "cap",
                   "GPUSLICE_MEMORY_LIMIT_0": f"{mem}Mi",
                   "GPUSLICE_CORES_0": str(cores)}, lim
    assert open(os.path.join(ld, "pod_uid")).read() == pod["metadata"]["uid"]


def test_twenty_pods_bound_at_once_each_get_their_gpu_and_limits(node):
    """20 pods bound to the node in the same instant; kubelet admits them
    (oldest first: GetPreferredAllocation, Allocate, then PreStartContainer
    at each container's start, as kubelet does). Each must get exactly its
    own GPU, limits and state dir, with no lock."""
    pods = _burst(node, 20, "burst")
    for pod, gpu, rep, mem, cores in pods:
        ids, resp = node.kubelet.admit(pod["metadata"]["name"])
        assert ids == [rep], f"{pod['metadata']['name']}: preferred {ids}, assigned {rep}"
        _check(node, resp, pod, gpu, mem, cores)
    # The agent recorded each allocation on its pod (merge patch with rv).
    for pod, gpu, rep, mem, cores in pods:
        end = time.time() + 10
        while time.time() < end:
            got = node.api.get("Pod", pod["metadata"]["name"], "default")
            ann = got["metadata"].get("annotations", {}).get("gpuslice.io/allocated")
            if ann:
                break
            time.sleep(0.05)
        a = json.loads(ann)
        assert a["v"] == 1 and a["node"] == NODE and a["replicas"] == [rep]


def test_concurrent_allocates_are_not_serialised_or_mixed(node):
    """Allocate, then PreStartContainer, calls for 20 pods arrive
    concurrently (kubelet picked the annotated IDs): each container's limits
    must be its own pod's."""
    pods = _burst(node, 20, "conc")
    with cf.ThreadPoolExecutor(max_workers=20) as ex:
        futs = {ex.submit(node.kubelet.allocate, [rep]): (pod, gpu, rep, mem, cores)
                for pod, gpu, rep, mem, cores in pods}
        resps = {rep: (f.result(), pod, gpu, mem, cores) for f, (pod, gpu, rep, mem, cores)
                 in futs.items()}
        for rep, (_, pod, *_rest) in resps.items():
            node.kubelet.record(pod["metadata"]["name"], [rep])
        for f in [ex.submit(node.kubelet.prestart, [rep]) for rep in resps]:
            f.result()
    for rep, (resp, pod, gpu, mem, cores) in resps.items():
        _check(node, resp, pod, gpu, mem, cores)


def test_kubelet_restart_reregisters_and_keeps_serving(node):
    node.kubelet.wait(lambda: len(node.kubelet.devices) == NGPUS * REPLICAS, what="devices")
    node.kubelet.restart()
    node.kubelet.wait_registered(2, timeout=15)
    node.kubelet.wait(lambda: len(node.kubelet.devices) == NGPUS * REPLICAS, what="devices again")
    gpu = node.uuids()[1]
    pod = node.add_pod("after-restart", assignment(gpu, 3, 2048, 25))
    ids, resp = node.kubelet.admit("after-restart")
    assert ids == [f"{gpu}::3"]
    _check(node, resp, pod, gpu, 2048, 25)
    assert "registering again" in node.logtext()


def test_unhealthy_gpu_leaves_listandwatch_and_comes_back(node):
    k = node.kubelet
    k.wait(lambda: len(k.healthy()) == NGPUS * REPLICAS, what="all healthy")
    uuids = node.uuids()
    node.xid(2, 13)  # benign (application fault): no change
    node.xid(1, 79)  # GPU fell off the bus: critical
    k.wait(lambda: len(k.healthy()) == (NGPUS - 1) * REPLICAS, timeout=5, what="GPU 1 unhealthy")
    assert all(k.devices[f"{uuids[1]}::{r}"] == "Unhealthy" for r in range(REPLICAS))
    assert all(k.devices[f"{uuids[2]}::{r}"] == "Healthy" for r in range(REPLICAS))
    end = time.time() + 5
    while time.time() < end and node.inventory()["gpus"][1]["healthy"]:
        time.sleep(0.05)
    # Recovery (--recovery-seconds 1 here): healthy again, annotation too.
    k.wait(lambda: len(k.healthy()) == NGPUS * REPLICAS, timeout=8, what="GPU 1 back")
    end = time.time() + 5
    while time.time() < end and not node.inventory()["gpus"][1]["healthy"]:
        time.sleep(0.05)
    assert node.inventory()["gpus"][1]["healthy"] is True
    log = node.logtext()
    assert "critical XID 79" in log and "XID 13 (application error" in log


def tenant(node, resp, extra_env=None):
    """A process in the container Allocate described: the real interposer
    and a CUDA client on the simulated GPU, with the container's
    environment (GPUSLICE_CONFIG and GPUSLICE_REGION mapped to their host
    paths through the answer's mounts) and nothing else."""
    e = envs(resp)
    mounts = {m.container_path: m.host_path for m in resp.mounts}
    env = dict(node.env, GPUSLICE_CTX_OVERHEAD="0",
               ASAN_OPTIONS="detect_leaks=0:verify_asan_link_order=0")
    for k, v in e.items():
        if k.startswith("GPUSLICE_"):
            for cpath, hpath in mounts.items():
                if v.startswith(cpath + "/"):
                    v = hpath + v[len(cpath):]
            env[k] = v
    pre = []
    if os.environ.get("GPUSLICE_SANITIZE", "").upper() in ("ON", "1", "TRUE"):
        for name in ("libasan.so", "libubsan.so"):
            p = subprocess.run(["gcc", f"-print-file-name={name}"], capture_output=True,
                               text=True).stdout.strip()
            if os.path.isabs(p):
                pre.append(os.path.realpath(p))
    env["LD_PRELOAD"] = ":".join(pre + [os.environ["GPUSLICE_LIB"]])
    env.update(extra_env or {})
    return subprocess.Popen(in_container(mounts) + [os.environ["GS_CLIENT"], "getproc"], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)


def in_container(mounts):
    """The answer's state and ledger mounts at their container paths, as the
    runtime makes them (limits.conf names those paths), in a private mount
    namespace over a tmpfs at /run, so the host is left as it was."""
    binds = [(h, c) for c, h in mounts.items() if c.startswith("/var/run/")]
    script = ["mount -t tmpfs gs-run /run"]
    for h, c in binds:
        make = f"mkdir -p {shlex.quote(c)}" if os.path.isdir(h) else \
            f"mkdir -p {shlex.quote(os.path.dirname(c))} && : > {shlex.quote(c)}"
        script.append(f"{make} && mount --bind {shlex.quote(h)} {shlex.quote(c)}")
    script.append('exec "$@"')
    return ["unshare", "-m", "--propagation", "private", "sh", "-c", " && ".join(script), "sh"]


def _scrape(node):
    url = f"http://127.0.0.1:{node.metrics_port}/metrics"
    return urllib.request.urlopen(url, timeout=10).read().decode()


def test_metrics_per_gpu_and_per_container(node):
    uuids = node.uuids()
    text = _scrape(node)
    for u in uuids:
        assert f'gpuslice_gpu_memory_total_bytes{{gpu="{u}",index=' in text
        assert f'gpuslice_gpu_healthy{{gpu="{u}"' in text
    assert "# TYPE gpuslice_container_memory_used_bytes gauge" in text
    # A tenant in a container allocated by the agent: the real interposer
    # and a CUDA client on the simulated GPU, using the pod's state dir.
    gpu = uuids[0]
    pod = node.add_pod("tenant", assignment(gpu, 9, 2048, 40))
    ids, resp = node.kubelet.admit("tenant")
    assert ids == [f"{gpu}::9"]
    c = tenant(node, resp)
    try:
        for line in ("init 0", "alloc 268435456"):
            c.stdin.write(line + "\n")
            c.stdin.flush()
            assert "rc=0" in c.stdout.readline(), c.stderr.read()
        text = _scrape(node)
        lab = f'container="default/tenant/main",pod_uid="{pod["metadata"]["uid"]}",gpu="{gpu}"'
        # 256 MiB and the context (the simulated driver's 512 MiB, measured:
        # limits.conf pins GPUSLICE_CTX_OVERHEAD=auto, so the tenant's =0 is moot).
        assert f"gpuslice_container_memory_used_bytes{{{lab}}} {(256 + 512) << 20}" in text
        assert f"gpuslice_container_memory_limit_bytes{{{lab}}} {2048 << 20}" in text
        # The cap the interposer recorded in the region from limits.conf.
        assert f"gpuslice_container_compute_limit_percent{{{lab}}} 40" in text
        assert f"gpuslice_container_compute_used_ratio{{{lab}}} " in text
        assert f"gpuslice_container_compute_charged_seconds_total{{{lab}}} " in text
        assert f"gpuslice_container_processes{{{lab}}} 1" in text
    finally:
        c.stdin.close()
        c.wait(timeout=30)


def test_metrics_server_is_the_bounded_server(node):
    """/metrics runs on the one gs_httpd (src/k8s/httpd.c): same text format,
    and a declared 60 MB body is refused with 413 before any of it is read."""
    c = http.client.HTTPConnection("127.0.0.1", node.metrics_port, timeout=10)
    c.request("GET", "/metrics")
    r = c.getresponse()
    assert r.status == 200 and r.getheader("Content-Type") == "text/plain; version=0.0.4"
    assert b"# TYPE gpuslice_gpu_memory_total_bytes gauge" in r.read()
    c.putrequest("POST", "/metrics")
    c.putheader("Content-Length", str(60 << 20))
    c.endheaders()
    r = c.getresponse()
    assert r.status == 413
    c.close()
    assert urllib.request.urlopen(f"http://127.0.0.1:{node.metrics_port}/healthz",
                                  timeout=10).read() == b"ok\n"
