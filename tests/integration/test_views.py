"""What a tenant sees: the limit as total, free = limit - used, clamped at
zero, through the CUDA and NVML views alike."""
import pytest
from conftest import SIMDIR, GiB, MiB


def test_cuda_and_nvml_views_show_the_limit(world):
    w = world(limit="2GiB")
    c = w.client()
    c.ok("init")
    c.ok("alloc 536870912")
    used, limit = w.usage()
    info = c.ok("info")
    assert (info["total"], info["free"]) == (2 * GiB, 2 * GiB - used)
    n = c.ok("nvml")
    assert n["v1_total"] == n["v2_total"] == 2 * GiB
    assert n["v1_used"] == n["v2_used"] == used
    assert n["v1_free"] == n["v2_free"] == 2 * GiB - used
    c.close()


def test_nvml_only_process_sees_the_limit(world):
    """nvidia-smi never creates a context: the limit must still apply."""
    w = world(limit="3GiB")
    c = w.client()
    n = c.ok("nvml")
    assert n["v1_total"] == 3 * GiB and n["v1_used"] == 0
    c.close()


def test_free_never_underflows(world):
    # The context's overhead, measured once it exists (768 MiB here), is
    # larger than the limit: the 512 MiB reserved before it fitted.
    w = world(limit="600MiB", ctx_overhead=None, extra={"GPUSLICE_SIM_CTX_OVERHEAD": str(768 * MiB)})
    c = w.client()
    c.ok("init")
    assert w.usage()[0] == 768 * MiB
    info = c.ok("info")
    assert info["total"] == 600 * MiB and info["free"] == 0
    n = c.ok("nvml")
    assert n["v1_free"] == 0 and n["v2_free"] == 0 and n["v1_used"] == 600 * MiB
    assert c.cmd("alloc 4096")["rc"] == 2
    c.close()


def test_per_device_limit_applies_to_its_device_only(world):
    w = world(limit=None, sim_mem=8 * GiB,
              extra={"GPUSLICE_SIM_DEVICES": "2", "CUDA_DEVICE_MEMORY_LIMIT_1": "1GiB"})
    c0 = w.client()
    c0.ok("init 0")
    assert c0.ok("info")["total"] == 8 * GiB  # device 0: no limit configured
    c0.close()
    c1 = w.client()
    c1.ok("init 1")
    assert c1.ok("info")["total"] == GiB
    c1.close()


@pytest.mark.parametrize("driver", ["current", "r535"])
def test_process_list_shows_this_container_with_charged_usage(world, driver):
    """The process list through v1 and v3. r535: the NVML of a 535-branch
    driver (the simulated one's variant), whose v3 entries are 32 bytes:
    written at 24, the second entry was read from the middle of the first
    and the 0xab the program filled its buffer with."""
    extra = {"LD_LIBRARY_PATH": f"{SIMDIR}-r535:{SIMDIR}"} if driver == "r535" else {}
    w = world(limit="4GiB", extra=extra)
    a, b = w.client(), w.client()
    a.ok("init")
    a.ok("alloc 268435456")
    b.ok("init")
    r = b.ok("procs r535" if driver == "r535" else "procs")
    assert r["needed"] == 2 and r["sizing_rc"] == 7  # NVML_ERROR_INSUFFICIENT_SIZE with 0 capacity
    assert r["n1"] == r["n3"] == 2
    assert all(v.split(":")[3] == "0" for k, v in r.items() if k.startswith("p") and ":" in str(v)), r
    seen = {int(v.split(":")[0]): (int(v.split(":")[1]), int(v.split(":")[2]))
            for k, v in r.items() if k.startswith("p") and ":" in str(v)}
    assert seen == {a.p.pid: (256 * MiB + 256 * MiB, 256 * MiB + 256 * MiB),
                    b.p.pid: (256 * MiB, 256 * MiB)}
    a.close()
    b.close()
