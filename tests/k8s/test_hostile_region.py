"""The node agent reads region files that tenants write: a FIFO, a symbolic
link, a garbage header and a file whose size flips while /metrics is
scraped must neither crash nor hang it (finding 3 of issue 16). Every
scrape and health check must still answer, and the agent must still run.
Names a tenant wrote (its container name, a directory's name) must keep
the scrape valid: UTF-8, every label escaped (finding 9 of issue 27)."""
import os
import re
import shutil
import subprocess
import threading
import time
import urllib.request

from conftest import assignment


def _get(node, path):
    url = f"http://127.0.0.1:{node.metrics_port}{path}"
    with urllib.request.urlopen(url, timeout=10) as r:
        return r.status, r.read().decode()


def _plant(root, name):
    d = os.path.join(root, name)
    os.makedirs(d, exist_ok=True)
    return os.path.join(d, "region")


def test_hostile_regions_neither_crash_nor_hang_the_agent(node):
    gpu = node.uuids()[0]
    node.add_pod("tenant", assignment(gpu, 1, 1024))
    _, resp = node.kubelet.admit("tenant")  # the agent makes the pod's region
    real = os.path.join({m.container_path: m.host_path for m in resp.mounts}["/var/run/gpuslice"], "region")
    size = os.path.getsize(real)
    root = node.state_root
    os.mkfifo(_plant(root, "fifo"))  # no writer: a blocking open would hang
    os.symlink("/etc/passwd", _plant(root, "link"))
    with open(_plant(root, "garbage"), "wb") as f:
        f.write(b"!GPUSLCE" + b"\xff" * 4096)  # right magic, everything else a lie
    flip = _plant(root, "flip")
    shutil.copyfile(real, flip)  # a valid region of the exact size...
    stop = threading.Event()

    def flipper():  # ...shrunk and grown under the reader (SIGBUS for a mapping)
        while not stop.is_set():
            os.truncate(flip, size // 2)
            os.truncate(flip, size)

    t = threading.Thread(target=flipper)
    t.start()
    try:
        deadline = time.monotonic() + 3
        scrapes = 0
        while time.monotonic() < deadline:
            status, text = _get(node, "/metrics")
            assert status == 200 and "gpuslice_gpu_memory_total_bytes" in text
            # None of the planted files is a container.
            assert 'pod_uid="fifo"' not in text and 'pod_uid="garbage"' not in text
            assert _get(node, "/healthz")[0] == 200
            scrapes += 1
        assert scrapes > 3
    finally:
        stop.set()
        t.join()
    assert node.proc.poll() is None, node.logtext()


CONTAINER_AT = 24  # struct gs_region: u64 magic, u32 version, u32 size, u64 created, char container[128]
HOSTILE = b"\xff\xfe\x1b]0;pwned\x07"
# One sample line of the Prometheus text format: name{label="value",...} number
SAMPLE = re.compile(r'[a-zA-Z_:][a-zA-Z0-9_:]*\{(?:[a-zA-Z_][a-zA-Z0-9_]*="(?:[^"\\\n]|\\[\\"n])*",?)*\} \S+')


def _make_region(node, path):
    """A real region with one device, made by a tenant through the interposer."""
    pre = []
    if os.environ.get("GPUSLICE_SANITIZE", "").upper() in ("ON", "1", "TRUE"):
        for name in ("libasan.so", "libubsan.so"):
            p = subprocess.run(["gcc", f"-print-file-name={name}"], capture_output=True, text=True).stdout.strip()
            if os.path.isabs(p):
                pre.append(os.path.realpath(p))
    env = dict(node.env, GPUSLICE_REGION=path, CUDA_DEVICE_MEMORY_LIMIT="1GiB",
               LD_PRELOAD=":".join(pre + [os.environ["GPUSLICE_LIB"]]))
    p = subprocess.run([os.environ["GS_CLIENT"], "getproc"], input="init\n", env=env, capture_output=True,
                       text=True, timeout=60, check=False)
    assert "rc=0" in p.stdout, p.stderr


def test_tenant_bytes_in_names_keep_the_scrape_valid(node):
    node.uuids()  # the agent is up
    region = _plant(node.state_root, "evil")
    _make_region(node, region)
    with open(region, "r+b") as f:
        f.seek(CONTAINER_AT)
        f.write(HOSTILE + b"\0")
    odd = os.path.join(node.state_root.encode(), b"pod\xff\x1b[2J\"q")  # a directory's name: the pod label
    os.makedirs(odd)
    shutil.copyfile(region, os.path.join(odd, b"region"))
    url = f"http://127.0.0.1:{node.metrics_port}/metrics"
    with urllib.request.urlopen(url, timeout=10) as r:
        body = r.read()
    text = body.decode("utf-8")  # strict: one invalid byte and Prometheus rejects the whole scrape
    assert not re.search(r"[\x00-\x09\x0b-\x1f\x7f]", text), "a control character in /metrics"
    for line in text.splitlines():
        assert line.startswith("#") or SAMPLE.fullmatch(line), line
    assert r'container="\\xff\\xfe\\x1b]0;pwned\\x07",pod_uid="evil"' in text, text
    assert r'pod_uid="pod\\xff\\x1b[2J\"q"' in text, text
