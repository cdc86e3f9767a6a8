"""Every allocation path is charged before it happens and released exactly
when freed, whichever way the entry point was looked up."""
import pytest

from conftest import GiB, MiB

CTX = 256 * MiB  # GPUSLICE_CTX_OVERHEAD in these tests

# (command, bytes charged): the driver's granularity (docs/memory.md).
PATHS = [
    ("alloc 1", 4096),
    ("alloc 1048576", MiB),
    ("alloc 3145728", 4 * MiB),
    ("pitch 1000 1000", 2 * MiB),          # 1024-byte rows x 1000 = 1000 KiB... rounded to 4 KiB pages
    ("managed 5242880", 6 * MiB),
    ("array 1024 1024", 4 * MiB),           # float32 1024x1024
    ("array3d 256 256 64", 16 * MiB),
    ("mipmap 1024 1024 3", 6 * MiB),        # 4 MiB + 1 MiB + 256 KiB -> 6 MiB
    ("vmm 4194304", 4 * MiB),
    ("async 8388608", 8 * MiB),
    ("asyncptsz 8388608", 8 * MiB),
    ("pool 2097152", 2 * MiB),
]


@pytest.mark.parametrize("mode", ["getproc", "dlsym", "default"])
@pytest.mark.parametrize("command,charged", PATHS)
def test_each_path_charged_and_released(world, mode, command, charged):
    if command.startswith("pitch"):
        charged = 1000 * 1024  # 1000 rows of 1024 bytes (512-aligned pitch), 4 KiB pages
        charged = (charged + 4095) // 4096 * 4096
    w = world(limit="1GiB")
    c = w.client(mode)
    c.ok("init")
    base, limit = w.usage()
    assert limit == GiB
    assert base == CTX
    c.ok(command)
    assert w.usage()[0] == base + charged
    c.ok("freeall")
    assert w.usage()[0] == base
    c.close()
    assert w.usage()[0] == 0  # a process that exits returns everything


def test_over_limit_is_out_of_memory(world):
    w = world(limit="1GiB")
    c = w.client()
    c.ok("init")
    r = c.cmd("fill 67108864")
    assert r["rc"] == 2  # CUDA_ERROR_OUT_OF_MEMORY
    assert r["count"] == (GiB - CTX) // (64 * MiB)
    used, limit = w.usage()
    assert used <= limit
    info = c.ok("info")
    assert info["total"] == GiB
    assert info["free"] == GiB - used
    assert c.ok("total")["total"] == GiB


def test_ipc_import_is_charged_once_per_importer(world):
    w = world(limit="1GiB")
    owner = w.client()
    owner.ok("init")
    owner.ok("alloc 33554432")
    handle = owner.ok("ipcget")["reply"].split()[1]
    importer = w.client()
    importer.ok("init")
    before = w.usage()[0]
    importer.ok(f"ipcopen {handle}")
    assert w.usage()[0] == before + 32 * MiB
    importer.ok("freeall")
    assert w.usage()[0] == before
    importer.close()
    owner.close()


def test_unknown_entry_point_passes_through(world):
    w = world()
    for mode in ("getproc", "dlsym"):
        c = w.client(mode)
        assert c.ok("future")["out"] == 42
        c.close()


def test_auto_context_overhead_matches_the_driver(world):
    w = world(ctx_overhead=None)  # measured through NVML
    c = w.client()
    c.ok("init")
    assert w.usage()[0] == 512 * MiB  # what the simulated driver charges a context
    c.close()


def test_no_configuration_means_passthrough(world):
    w = world(limit=None, ctx_overhead=None)
    del w.env["GPUSLICE_REGION"]
    c = w.client()
    c.ok("init")
    r = c.cmd("fill 1073741824")
    assert r["count"] == 15  # the whole 16 GiB simulated GPU minus its context, unlimited
    c.close()
