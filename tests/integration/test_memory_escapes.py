"""Ways past a memory limit that issue 27 found on the simulated driver,
each closed: memory is charged while it exists on the GPU (docs/memory.md,
docs/security.md).

1. A VMM allocation stays charged until its handle is released *and* every
   mapping of it is unmapped: NCCL releases a handle right after mapping it."""
from conftest import GiB, MiB

CTX = 256 * MiB  # GPUSLICE_CTX_OVERHEAD in these tests, unless set otherwise
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
