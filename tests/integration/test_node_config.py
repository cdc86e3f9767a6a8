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


def test_the_node_file_beats_a_config_file_the_tenant_names(tmp_path, have_unshare):
    own = tmp_path / "mine.conf"
    own.write_text("GPUSLICE_MEMORY_LIMIT=12GiB\n")
    w = World(tmp_path, limit=None, extra={"GPUSLICE_CONFIG": str(own)})
    c = w.client(wrap=in_container(NODE_FILE))
    c.ok("init")
    assert c.cmd("info")["total"] == GiB
    c.ok(f"alloc {512 * MiB}")
    assert c.cmd(f"alloc {512 * MiB}")["rc"] != 0
    c.kill()


def test_without_a_node_file_the_named_file_applies(tmp_path):
    own = tmp_path / "mine.conf"
    own.write_text("GPUSLICE_MEMORY_LIMIT=3GiB\n")
    w = World(tmp_path, limit=None, extra={"GPUSLICE_CONFIG": str(own)})
    c = w.client()
    c.ok("init")
    assert c.cmd("info")["total"] == 3 * GiB
    c.kill()
