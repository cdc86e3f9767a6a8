"""Inside a container the node agent set up, /etc/gpuslice/limits.conf is the
configuration's ceiling whatever GPUSLICE_CONFIG says: a pod spec (or a
process) that names a file of its own with a higher limit gets the node's.
The container is played by a private mount namespace with a tmpfs at /etc."""
import subprocess

import pytest

from conftest import GiB, MiB, World

NODE_FILE = ('mount -t tmpfs gs-etc /etc && mkdir /etc/gpuslice && '
             'printf "GPUSLICE_MEMORY_LIMIT=1GiB\\n" > /etc/gpuslice/limits.conf && exec "$@"')


def in_container(script):
    return ["unshare", "-m", "--propagation", "private", "sh", "-c", script, "sh"]


@pytest.fixture
def have_unshare():
    r = subprocess.run(["unshare", "-m", "true"], capture_output=True)
    if r.returncode != 0:
        pytest.skip(f"no mount namespaces here: {r.stderr!r}")


def agent_makes_region(tmp_path):
    """The node agent makes a pod's region before the pod starts (here a
    process outside the container does)."""
    c = World(tmp_path, limit=None).client()
    c.ok("init")
    c.close()


def test_the_node_file_beats_a_config_file_the_tenant_names(tmp_path, have_unshare):
    own = tmp_path / "mine.conf"
    own.write_text("GPUSLICE_MEMORY_LIMIT=12GiB\n")
    agent_makes_region(tmp_path)
    w = World(tmp_path, limit=None, extra={"GPUSLICE_CONFIG": str(own)})
    c = w.client(wrap=in_container(NODE_FILE))
    c.ok("init")
    assert c.cmd("info")["total"] == GiB
    c.ok(f"alloc {512 * MiB}")
    assert c.cmd(f"alloc {512 * MiB}")["rc"] != 0
    c.kill()


@pytest.mark.parametrize("wipe", ["remove", "empty", "zero"])
def test_in_a_node_container_a_region_the_tenant_wiped_refuses_the_gpu(tmp_path, have_unshare, wipe):
    """The agent made the region; a tenant that removes, empties or zeroes
    it must not get its whole limit afresh beside its live processes (before,
    the interposer made a new region: tests/cri/test_hostile_tenant.py)."""
    agent_makes_region(tmp_path)
    w = World(tmp_path, limit=None)
    size = len(open(w.region, "rb").read())
    if wipe == "remove":
        (tmp_path / "container.region").unlink()
    else:
        open(w.region, "wb").write(b"" if wipe == "empty" else bytes(size))
    c = w.client(wrap=in_container(NODE_FILE))
    assert c.cmd("init")["rc"] != 0
    c.kill()


def test_without_a_node_file_the_named_file_applies(tmp_path):
    own = tmp_path / "mine.conf"
    own.write_text("GPUSLICE_MEMORY_LIMIT=3GiB\n")
    w = World(tmp_path, limit=None, extra={"GPUSLICE_CONFIG": str(own)})
    c = w.client()
    c.ok("init")
    assert c.cmd("info")["total"] == 3 * GiB
    c.kill()
