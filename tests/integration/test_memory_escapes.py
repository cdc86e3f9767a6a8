"""Ways past a memory limit that issue 27 found on the simulated driver
(items 1-3), each closed: memory is charged while it exists on the GPU
(docs/memory.md, docs/security.md).

1. A VMM allocation stays charged until its handle is released *and* every
   mapping of it is unmapped: NCCL releases a handle right after mapping it.
2. Every context a process creates is charged, until it is destroyed.
3. A context whose charge would pass the limit is refused like any
   allocation."""
import pytest

from conftest import GiB, MiB

CTX = 256 * MiB  # GPUSLICE_CTX_OVERHEAD in these tests, unless set otherwise
SIM_CTX = 512 * MiB  # what the simulated driver takes for a context
OOM = 2  # CUDA_ERROR_OUT_OF_MEMORY


# ---- 1. VMM memory released while mapped ----

def test_vmm_map_then_release_stays_charged(world):
    """The issue's loop: 16 x {cuMemCreate 256 MiB, cuMemAddressReserve,
    cuMemMap, cuMemRelease} in a 1 GiB container took 4 GiB."""
    w = world(limit="1GiB")
    c = w.client()
    c.ok("init")
    gpu0 = w.gpu_used()
    r = c.ok(f"vmmleak 16 {256 * MiB}")
    assert (r["count"], r["failed_rc"]) == ((GiB - CTX) // (256 * MiB), OOM)
    assert w.usage()[0] == GiB
    assert w.gpu_used() - gpu0 == GiB - CTX
    assert c.ok("info")["free"] == 0
    c.ok("vmmspanunmap")                     # the last mapping goes: so does the charge
    assert w.usage()[0] == CTX
    assert w.gpu_used() == gpu0
    c.close()


def test_one_unmap_over_several_mappings_releases_each(world):
    """cuMemUnmap takes a range, which may cover the mappings of several
    handles."""
    w = world(limit="1GiB")
    c = w.client()
    c.ok("init")
    gpu0 = w.gpu_used()
    assert c.ok(f"vmmspan 4 {64 * MiB}")["count"] == 4   # each handle released once mapped
    assert w.usage()[0] == CTX + 256 * MiB
    c.ok("vmmspanunmap")                                   # one cuMemUnmap for all four
    assert w.usage()[0] == CTX
    assert w.gpu_used() == gpu0
    c.close()


def test_foreign_import_mapped_twice_and_unmapped_at_once(world):
    """An import from another container is charged per mapping; one
    cuMemUnmap over two of them releases both."""
    w = world(limit="1GiB")
    exporter = w.client(env={"GPUSLICE_REGION": str(w.tmp / "other.region")})
    exporter.ok("init")
    path = exporter.ok(f"vmmexport {128 * MiB}")["path"]
    c = w.client()
    c.ok("init")
    c.ok(f"vmmimport {path}")
    assert c.ok(f"vmmspan 2 {128 * MiB} import")["count"] == 2
    assert w.usage()[0] == CTX + 256 * MiB
    c.ok("vmmrelease")                       # the mappings keep the memory: still charged
    assert w.usage()[0] == CTX + 256 * MiB
    c.ok("vmmspanunmap")
    assert w.usage()[0] == CTX
    exporter.close()
    c.close()


def test_exporter_releasing_its_mapped_export_stays_charged(world):
    w = world(limit="1GiB")
    c = w.client()
    c.ok("init")
    gpu0 = w.gpu_used()
    c.ok(f"vmmexport {512 * MiB}")
    c.ok(f"vmmmap {512 * MiB}")
    c.ok("vmmrelease")
    assert w.gpu_used() - gpu0 == 512 * MiB
    assert w.usage()[0] == CTX + 512 * MiB
    assert c.cmd(f"alloc {512 * MiB}")["rc"] == OOM
    c.ok("vmmunmap")
    assert w.usage()[0] == CTX
    assert w.gpu_used() == gpu0
    c.close()


def test_shared_memory_released_by_every_holder_but_mapped_stays_charged(world):
    """Inside one container the export's one charge moves to the importer
    when the exporter lets go; the importer's mapping keeps it after the
    importer's own release too."""
    w = world(limit="2GiB")
    exporter, importer = w.client(), w.client()
    exporter.ok("init")
    importer.ok("init")
    gpu0 = w.gpu_used()
    path = exporter.ok(f"vmmexport {512 * MiB}")["path"]
    importer.ok(f"vmmimport {path}")
    importer.ok(f"vmmmap {512 * MiB}")
    exporter.ok("vmmrelease")
    importer.ok("vmmrelease")                # every handle gone, one mapping left
    assert w.gpu_used() - gpu0 == 512 * MiB
    assert w.usage()[0] == 2 * CTX + 512 * MiB
    importer.ok("vmmunmap")
    assert w.usage()[0] == 2 * CTX
    assert w.gpu_used() == gpu0
    exporter.close()
    importer.close()


def test_a_retained_handle_stays_charged_after_its_mapping_and_first_release(world):
    """cuMemRetainAllocationHandle gives the handle that maps an address one
    more reference, to be released again: {cuMemCreate, map, retain, unmap,
    release} leaves each handle alive and mapped nowhere. Counting one
    release per handle, the loop took 16 x 256 MiB in a 1 GiB container."""
    w = world(limit="1GiB")
    c = w.client()
    c.ok("init")
    gpu0 = w.gpu_used()
    r = c.ok(f"vmmretain 16 {256 * MiB}")
    assert (r["count"], r["failed_rc"]) == ((GiB - CTX) // (256 * MiB), OOM)
    assert w.usage()[0] == GiB
    assert w.gpu_used() - gpu0 == GiB - CTX
    c.ok("vmmretainrelease")                 # the last references go: so does the charge
    assert w.usage()[0] == CTX
    assert w.gpu_used() == gpu0
    c.close()


def test_a_handle_retained_after_its_release_is_charged_until_released_again(world):
    """Released while mapped, a handle is kept by its mapping alone; a
    retain through that mapping makes it live again, so its unmap leaves
    the memory (and the charge) to the handle."""
    w = world(limit="1GiB")
    c = w.client()
    c.ok("init")
    gpu0 = w.gpu_used()
    c.ok(f"vmmexport {512 * MiB}")
    c.ok(f"vmmmap {512 * MiB}")
    c.ok("vmmrelease")
    assert c.ok("vmmretainmapped")["same"] == 1  # the driver hands the same value back
    c.ok("vmmunmap")
    assert w.gpu_used() - gpu0 == 512 * MiB
    assert w.usage()[0] == CTX + 512 * MiB
    assert c.cmd(f"alloc {512 * MiB}")["rc"] == OOM
    c.ok("vmmretainrelease")
    assert w.usage()[0] == CTX
    assert w.gpu_used() == gpu0
    c.close()


def test_a_foreign_import_retained_after_its_release_is_charged_where_mapped_again(world):
    """An import from another container is charged per mapping. Released,
    then retained through its mapping, the handle maps again: that mapping
    is charged too."""
    w = world(limit="1GiB")
    exporter = w.client(env={"GPUSLICE_REGION": str(w.tmp / "other.region")})
    exporter.ok("init")
    path = exporter.ok(f"vmmexport {256 * MiB}")["path"]
    c = w.client()
    c.ok("init")
    c.ok(f"vmmimport {path}")
    c.ok(f"vmmmap {256 * MiB}")
    c.ok("vmmrelease")
    c.ok("vmmretainmapped")
    c.ok("vmmunmap")
    assert w.usage()[0] == CTX
    c.ok(f"vmmmap {256 * MiB}")              # the retained handle, mapped anew
    assert w.usage()[0] == CTX + 256 * MiB
    c.ok("vmmunmap")
    c.ok("vmmretainrelease")
    assert w.usage()[0] == CTX
    exporter.close()
    c.close()


# ---- 2. every context a process creates ----

@pytest.mark.parametrize("how", ["getproc", "sym"])
@pytest.mark.parametrize("abi", ["v1", "v2", "v3", "v4"])
def test_every_context_is_charged_until_destroyed(world, abi, how):
    w = world(limit="8GiB", ctx_overhead="512MiB")
    c = w.client()
    c.ok("init")                             # the primary context
    assert c.ok(f"ctxcreate {abi} 3 {how}")["count"] == 3
    assert w.usage()[0] == 4 * SIM_CTX
    destroy = "v1" if abi == "v1" else "v2"
    c.ok(f"ctxdestroy {destroy}")
    assert w.usage()[0] == 3 * SIM_CTX
    c.ok(f"ctxdestroy {destroy} all")
    assert w.usage()[0] == SIM_CTX
    c.close()
    assert w.usage()[0] == 0


@pytest.mark.parametrize("overhead", ["512MiB", None])  # fixed, and measured through NVML
def test_eight_contexts_in_one_process_stop_at_the_limit(world, overhead):
    """The issue's repro: cuInit, then 8 x cuCtxCreate_v2 in a 1 GiB
    container took 4 GiB."""
    w = world(limit="1GiB", ctx_overhead=overhead)
    c = w.client()
    r = c.cmd("ctxcreate v2 8")
    assert (r["count"], r["failed_rc"]) == (GiB // SIM_CTX, OOM)
    assert w.usage()[0] == GiB
    assert w.gpu_used() == GiB               # the simulated GPU: nothing else on it
    c.ok("ctxdestroy v2 all")
    assert w.usage()[0] == 0
    assert w.gpu_used() == 0
    c.close()


# ---- 3. a context past the limit is refused ----

def test_contexts_of_many_processes_stop_at_the_limit(world):
    """The issue's repro: 6 processes of one 1 GiB container, each with a
    context, reached 1.5 GiB (3 GiB at its 512 MiB a context)."""
    w = world(limit="1GiB")
    clients = [w.client() for _ in range(6)]
    rcs = [c.cmd("init")["rc"] for c in clients]
    assert rcs == [0] * (GiB // CTX) + [OOM] * (6 - GiB // CTX)
    assert w.usage()[0] == GiB               # a refused context leaves nothing reserved
    clients[0].close()                       # one leaves: its context's charge goes with it
    assert clients[-1].cmd("init")["rc"] == 0
    assert w.usage()[0] == GiB
    for c in clients[1:]:
        c.close()


def test_a_created_context_past_the_limit_is_refused(world):
    w = world(limit="1GiB", ctx_overhead="768MiB")
    c = w.client()
    c.ok("init")
    r = c.cmd("ctxcreate v4 1")
    assert (r["count"], r["failed_rc"]) == (0, OOM)
    assert w.usage()[0] == 768 * MiB
    c.close()


# ---- frees after the process's slot went to another process ----

def test_frees_after_the_interposers_destructor_leave_the_slots_next_holder_charged(world):
    """A tenant's code that runs after the interposer's destructor (a
    library preloaded after it, say) freed memory charged to a region slot
    the interposer had handed back, by then another process's: 512 MiB
    taken off its charge, which then allocated past the limit."""
    import os
    import time
    lib = os.path.join(os.environ["GS_BUILD_DIR"], "tests/integration/libgs_late_free.so")
    w = world(limit="1GiB", ctx_overhead="0")
    go = str(w.tmp / "go")
    a = w.client(env={"LD_PRELOAD": w.env["LD_PRELOAD"] + ":" + lib, "GS_LATE_FREE_GO": go})
    a.ok("init")
    a.ok(f"alloc {512 * MiB}")
    a.ok("latefree")
    a.p.stdin.close()  # the client exits; its late free waits for go
    deadline = time.time() + 30
    while not os.path.exists(go + ".waiting"):
        assert time.time() < deadline and a.p.poll() is None, a.p.stderr.read()
        time.sleep(0.01)
    b = w.client()
    b.ok("init")
    b.ok(f"alloc {512 * MiB}")                  # in the slot a held
    assert w.usage()[0] == 512 * MiB
    open(go, "w").close()
    a.p.wait(timeout=30)
    assert "late free rc=0" in a.p.stderr.read()
    assert w.usage()[0] == 512 * MiB            # b's charge stays b's
    assert b.cmd(f"alloc {600 * MiB}")["rc"] == OOM
    b.close()
