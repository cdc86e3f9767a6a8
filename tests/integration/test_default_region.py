"""The default region (no GPUSLICE_REGION named) is /tmp/gpuslice-<uid>.region, a
path in a directory every user may write (issue 27, finding 8). Another user who
creates it first, with a small limit and mode 0666, must not set our limits: a file
we do not own, or that others may write, refuses the GPU with a message naming its
owner and mode. Needs root to run tenants as other uids."""
import os
import subprocess
import tempfile
from pathlib import Path

import pytest

from conftest import CLIENT, GiB, MiB, World

VICTIM, PLANTER = 4243, 4244


def default_region(uid):
    return f"/tmp/gpuslice-{uid}.region"


def remove(path):
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass


@pytest.fixture
def node():
    if os.geteuid() != 0:
        pytest.skip("needs root to run tenants as other uids")
    shared = tempfile.mkdtemp(prefix="gs-default-region-", dir="/tmp")
    os.chmod(shared, 0o777)
    w = World(Path(shared), ctx_overhead="0")
    w.env["GPUSLICE_SIM_STATE"] = state = os.path.join(shared, "gpu.state")
    with open(state, "w"):
        os.chmod(state, 0o666)  # one simulated GPU for both users
    del w.env["GPUSLICE_REGION"]
    remove(default_region(VICTIM))
    yield w
    remove(default_region(VICTIM))
    subprocess.run(["rm", "-rf", shared], check=False)


def tenant(w, uid, script, **env):
    """Runs gs_client as uid with the given commands; (replies, stderr)."""
    p = subprocess.run([CLIENT, "getproc"], input="".join(s + "\n" for s in script), capture_output=True,
                       text=True, env={**w.env, **env}, user=uid, group=uid, timeout=120, check=False)
    return p.stdout.splitlines(), p.stderr


def plant(w):
    """The other user makes our default region first: 64 MiB, writable by all."""
    path = default_region(VICTIM)
    out, err = tenant(w, PLANTER, ["init"], GPUSLICE_REGION=path, CUDA_DEVICE_MEMORY_LIMIT="64MiB")
    assert out and "rc=0" in out[0], err
    os.chmod(path, 0o666)
    return path


def test_a_default_region_planted_by_another_uid_is_refused(node):
    path = plant(node)
    out, err = tenant(node, VICTIM, ["init", f"alloc {100 * MiB}"], CUDA_DEVICE_MEMORY_LIMIT="4GiB")
    assert "rc=3" in out[0], (out, err)  # CUDA_ERROR_NOT_INITIALIZED: neither its limit nor none
    assert f"region {path} is owned by uid {PLANTER}, mode 0666, not by you (uid {VICTIM})" in err, err
    assert "GPUSLICE_REGION" in err, err


def test_our_own_default_region_writable_by_others_is_refused(node):
    path = plant(node)
    os.chown(path, VICTIM, VICTIM)
    out, err = tenant(node, VICTIM, ["init"], CUDA_DEVICE_MEMORY_LIMIT="4GiB")
    assert "rc=3" in out[0], (out, err)
    assert f"region {path} has mode 0666, which lets other users write to it" in err, err


def test_the_default_region_we_create_keeps_our_limit(node):
    out, err = tenant(node, VICTIM, ["init", f"alloc {100 * MiB}", f"alloc {5 * GiB}"],
                      CUDA_DEVICE_MEMORY_LIMIT="4GiB")
    assert "rc=0" in out[0] and "rc=0" in out[1] and "rc=2" in out[2], (out, err)
    st = os.stat(default_region(VICTIM))
    assert st.st_uid == VICTIM and st.st_mode & 0o077 == 0, oct(st.st_mode)
