"""cuGetProcAddress and dlsym hand out our wrapper for exactly the ABI
variant the real driver chose, and everything else untouched."""
import pytest

LIB = "libgpuslice.so"
DRV = "libcuda.so.1"

# (symbol, cudaVersion, flags) -> (library, symbol) the caller must receive.
CASES = [
    ("cuMemAlloc", 3020, 0, LIB, "cuMemAlloc_v2"),
    ("cuMemAlloc", 13000, 2, LIB, "cuMemAlloc_v2"),
    ("cuMemAlloc", 2000, 0, LIB, "cuMemAlloc"),            # legacy 32-bit ABI: its own wrapper
    ("cuMemFree", 2000, 0, LIB, "cuMemFree"),
    ("cuArrayCreate", 3000, 0, LIB, "cuArrayCreate"),
    ("cuGraphInstantiate", 10000, 0, LIB, "cuGraphInstantiate"),
    ("cuGraphInstantiate", 12000, 0, LIB, "cuGraphInstantiate_v2"),   # as on driver 580
    ("cuGraphInstantiateWithFlags", 12000, 0, LIB, "cuGraphInstantiateWithFlags"),
    ("cuMemImportFromShareableHandle", 12000, 0, LIB, "cuMemImportFromShareableHandle"),
    ("cuMemFree", 13000, 0, LIB, "cuMemFree_v2"),
    ("cuMemGetInfo", 12000, 0, LIB, "cuMemGetInfo_v2"),
    ("cuMemGetInfo", 3000, 0, DRV, "cuMemGetInfo"),
    ("cuMemAllocAsync", 12000, 0, LIB, "cuMemAllocAsync"),
    ("cuMemAllocAsync", 12000, 1, LIB, "cuMemAllocAsync"),
    ("cuMemAllocAsync", 12000, 2, LIB, "cuMemAllocAsync_ptsz"),
    ("cuMemFreeAsync", 12000, 2, LIB, "cuMemFreeAsync_ptsz"),
    ("cuMemAllocFromPoolAsync", 12000, 2, LIB, "cuMemAllocFromPoolAsync_ptsz"),
    ("cuCtxCreate", 11040, 0, LIB, "cuCtxCreate_v2"),
    ("cuCtxCreate", 12000, 0, LIB, "cuCtxCreate_v3"),
    ("cuCtxCreate", 13000, 0, LIB, "cuCtxCreate_v4"),
    ("cuCtxCreate", 2000, 0, LIB, "cuCtxCreate"),           # pre-3.2: charged like the others
    ("cuCtxDestroy", 2000, 0, LIB, "cuCtxDestroy"),
    ("cuCtxDestroy", 4000, 0, LIB, "cuCtxDestroy_v2"),
    ("cuGetProcAddress", 11030, 0, LIB, "cuGetProcAddress"),
    ("cuGetProcAddress", 12000, 0, LIB, "cuGetProcAddress_v2"),
    ("cuIpcOpenMemHandle", 12000, 0, LIB, "cuIpcOpenMemHandle_v2"),
    ("cuStreamCreate", 12000, 0, DRV, "cuStreamCreate"),      # not wrapped: passes through
    ("cuSimFutureFeature", 13000, 0, DRV, "cuSimFutureFeature"),
]


@pytest.mark.parametrize("getter", ["gpa", "gpa1"])
@pytest.mark.parametrize("symbol,version,flags,lib,sym", CASES)
def test_get_proc_address_keeps_the_drivers_choice(world, getter, symbol, version, flags, lib, sym):
    c = world().client()
    r = c.ok(f"{getter} {symbol} {version} {flags}")
    assert r["lib"] == lib and r["sym"] == sym, r["reply"]
    c.close()


def test_version_too_old_and_unknown_names_report_like_the_driver(world):
    c = world().client()
    r = c.cmd("gpa cuMemAllocAsync 11000 0")
    assert r["rc"] == 500 and r["status"] == 2  # NOT_FOUND, VERSION_NOT_SUFFICIENT
    r = c.cmd("gpa cuNoSuchEntryPoint 13000 0")
    assert r["rc"] == 500 and r["status"] == 1  # NOT_FOUND, SYMBOL_NOT_FOUND
    c.close()


@pytest.mark.parametrize("name,lib", [
    ("cuMemAlloc_v2", LIB), ("cuMemAlloc", LIB), ("cuLaunchKernel", LIB),
    ("cuGetProcAddress_v2", LIB), ("cuSimFutureFeature", DRV), ("cuMemCreate", LIB),
])
def test_dlsym_on_the_driver_handle(world, name, lib):
    c = world().client("dlsym")
    r = c.ok(f"sym {name}")
    assert r["lib"] == lib and r["sym"] == name, r["reply"]
    c.close()


def test_wrappers_handed_out_work_in_passthrough_mode(world):
    """With no configuration the same wrappers are handed out and must
    simply forward every call."""
    w = world(limit=None, ctx_overhead=None)
    del w.env["GPUSLICE_REGION"]
    c = w.client()
    assert c.ok("gpa cuMemAlloc 13000 0")["lib"] == LIB
    c.ok("init")
    c.ok("alloc 1048576")
    c.ok("freeall")
    c.close()
