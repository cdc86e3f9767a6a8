"""A region that cannot be opened, created or validated fails closed: the
tenant is refused the GPU (cuInit -> CUDA_ERROR_NOT_INITIALIZED) with one
line saying which file and why, never run without its limits."""
import os
import struct

import pytest

from conftest import GiB

VERSION_AT = 8      # struct gs_region: u64 magic, u32 version, u32 size, ...
NDEVICES_AT = 192   # ... u64 created, char container[128], pthread_mutex_t (40), u32 ndevices
SLOTS_FROM = 65536  # well inside the process-slot table


def make_valid(w, path=None):
    path = path or w.region
    c = w.client(env={"GPUSLICE_REGION": path})
    c.ok("init")
    c.close()
    with open(path, "rb") as f:
        head = f.read(NDEVICES_AT + 4)
    assert struct.unpack_from("<I", head, NDEVICES_AT)[0] == 1, "region layout moved: fix the offsets above"
    return struct.unpack_from("<I", head, VERSION_AT)[0]


def patch(path, at, data):
    with open(path, "r+b") as f:
        f.seek(at)
        f.write(data)


def missing_dir(w):
    w.env["GPUSLICE_REGION"] = w.region = str(w.tmp / "no-such-dir" / "container.region")


def truncated(w):
    make_valid(w)
    os.truncate(w.region, 4096)


def old_version(w):
    version = make_valid(w)
    patch(w.region, VERSION_AT, struct.pack("<I", version - 1))


def a_directory(w):
    os.mkdir(w.region)


def garbage_slots(w):
    make_valid(w)
    size = os.path.getsize(w.region)
    patch(w.region, SLOTS_FROM, os.urandom(size - SLOTS_FROM))


def huge_ndevices(w):
    make_valid(w)
    patch(w.region, NDEVICES_AT, struct.pack("<I", 0xFFFFFFFF))


def a_fifo(w):
    os.mkfifo(w.region)


def a_symlink(w):
    target = str(w.tmp / "elsewhere.region")
    make_valid(w, target)
    os.symlink(target, w.region)


BREAKS = [missing_dir, truncated, old_version, a_directory, garbage_slots, huge_ndevices, a_fifo, a_symlink]


@pytest.mark.parametrize("brk", BREAKS, ids=[b.__name__ for b in BREAKS])
def test_broken_region_refuses_the_gpu_under_a_memory_limit(world, brk):
    w = world(limit="1GiB")
    brk(w)
    c = w.client()
    assert c.cmd("init")["rc"] == 3  # CUDA_ERROR_NOT_INITIALIZED: never an unlimited GPU
    assert c.cmd(f"alloc {2 * GiB}")["rc"] != 0
    err = c.close()
    lines = [ln for ln in err.splitlines() if "refusing GPU access" in ln]
    assert len(lines) == 1, err
    assert w.region in lines[0] and "restart" in lines[0], lines[0]


@pytest.mark.parametrize("brk", [truncated, garbage_slots], ids=["truncated", "garbage_slots"])
def test_broken_region_refuses_the_gpu_under_a_compute_cap(world, brk):
    w = world(limit=None, extra={"CUDA_DEVICE_SM_LIMIT": "30"})
    brk(w)
    c = w.client()
    assert c.cmd("init")["rc"] == 3
    assert "refusing GPU access" in c.close()


def test_removing_the_damaged_file_gives_the_limit_back(world):
    w = world(limit="1GiB")
    truncated(w)
    os.unlink(w.region)
    c = w.client()
    c.ok("init")
    assert c.cmd(f"alloc {2 * GiB}")["rc"] == 2  # CUDA_ERROR_OUT_OF_MEMORY: the 1 GiB limit holds
    c.ok(f"alloc {GiB // 2}")
    c.close()
