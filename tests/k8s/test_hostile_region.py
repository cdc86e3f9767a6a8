"""The node agent reads region files that tenants write: a FIFO, a symbolic
link, a garbage header and a file whose size flips while /metrics is
scraped must neither crash nor hang it (finding 3 of issue 16). Every
scrape and health check must still answer, and the agent must still run."""
import os
import shutil
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
