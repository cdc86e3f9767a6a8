"""The rarer ways to take device memory are counted or refused like the
common ones (docs/memory.md): the pre-3.2 32-bit ABI that cuGetProcAddress
hands a caller asking for CUDA 2.0, graph allocation nodes, and VMM imports
-- and with no limit set each passes through untouched."""
import os
import subprocess

import pytest

from conftest import LIB, GiB, MiB

CTX = 256 * MiB  # GPUSLICE_CTX_OVERHEAD in these tests


@pytest.mark.parametrize("how", ["getproc", "sym"])
def test_legacy_alloc_is_limited(world, how):
    """The simulated driver's legacy cuMemAlloc hands out up to 3.75 GiB of
    32-bit addresses; under a 1 GiB limit only the limit may be taken."""
    w = world(limit="1GiB")
    c = w.client()
    c.ok("init")
    gpu0 = w.gpu_used()
    r = c.ok(f"legacyfill {64 * MiB} {how}")
    assert r["failed_rc"] == 2  # CUDA_ERROR_OUT_OF_MEMORY
    assert r["count"] == (GiB - CTX) // (64 * MiB)
    assert w.usage()[0] == CTX + r["count"] * 64 * MiB
    assert w.gpu_used() - gpu0 == r["count"] * 64 * MiB
    c.ok("legacyfree")
    assert w.usage()[0] == CTX
    c.close()


def test_legacy_array_is_limited(world):
    w = world(limit="1GiB")
    c = w.client()
    c.ok("init")
    assert c.cmd("legacyarray 16384 16384")["rc"] == 2  # 1 GiB of float32: over the limit
    c.ok("legacyarray 1024 1024")                        # 4 MiB: created and destroyed
    assert w.usage()[0] == CTX
    c.close()


@pytest.mark.parametrize("abi", ["flags", "v2", "child"])
def test_graph_allocation_past_the_limit_is_refused(world, abi):
    """child: the allocation node is in a child graph moved into the one
    instantiated (CUDA 12.9), which only the top graph's nodes were read for:
    its memory went uncharged."""
    w = world(limit="1GiB")
    c = w.client()
    c.ok("init")
    gpu0 = w.gpu_used()
    assert c.cmd(f"galloc {GiB} keep {abi}")["rc"] == 2  # refused at instantiation
    assert w.usage()[0] == CTX
    assert w.gpu_used() == gpu0
    c.close()


@pytest.mark.parametrize("nest", ["", " child"], ids=["top", "child"])
def test_graph_allocation_charged_until_its_graph_goes(world, nest):
    """child: the allocation node in a child graph moved into the one
    instantiated (CUDA 12.9) is charged with its parent."""
    w = world(limit="1GiB")
    c = w.client()
    c.ok("init")
    gpu0 = w.gpu_used()
    c.ok(f"galloc {512 * MiB} free{nest}")
    assert w.usage()[0] == CTX + 512 * MiB
    c.ok("glaunch")
    assert w.gpu_used() == gpu0 + 512 * MiB       # physical memory at launch...
    c.ok("glaunch")
    assert w.gpu_used() == gpu0 + 512 * MiB       # ...kept for the next launches
    assert w.usage()[0] == CTX + 512 * MiB
    c2 = w.client()                               # a second process of the container
    c2.ok("init")
    assert c2.cmd(f"galloc {512 * MiB} free{nest}")["rc"] == 2
    c2.close()
    c.ok("gexecdestroy")
    assert w.usage()[0] == CTX                    # released exactly...
    assert w.gpu_used() == gpu0                   # ...and the graph pool trimmed
    c.ok("gdestroy")
    c.close()


def test_graph_allocation_left_live_stays_charged_until_freed(world):
    """An allocation the graph does not free outlives the executable graph;
    its charge goes with the program's cuMemFree of it."""
    w = world(limit="1GiB")
    c = w.client()
    c.ok("init")
    gpu0 = w.gpu_used()
    c.ok(f"galloc {256 * MiB}")
    c.ok("glaunch")
    c.ok("gexecdestroy")
    c.ok("gdestroy")
    assert w.usage()[0] == CTX + 256 * MiB
    assert w.gpu_used() == gpu0 + 256 * MiB
    c.ok("gfree")
    assert w.usage()[0] == CTX
    assert w.gpu_used() == gpu0
    c.close()


def test_graph_never_launched_releases_at_destroy(world):
    w = world(limit="1GiB")
    c = w.client()
    c.ok("init")
    c.ok(f"galloc {256 * MiB}")
    assert w.usage()[0] == CTX + 256 * MiB
    c.ok("gexecdestroy")
    assert w.usage()[0] == CTX
    c.close()


def test_vmm_import_is_charged_when_mapped(world):
    """Another container exports 512 MiB and releases it; the importer keeps
    it alive, so the importer pays for its mapping."""
    w = world(limit="1GiB")
    exporter = w.client(env={"GPUSLICE_REGION": str(w.tmp / "other.region")})
    exporter.ok("init")
    path = exporter.ok(f"vmmexport {512 * MiB}")["path"]
    c = w.client()
    c.ok("init")
    c.ok(f"vmmimport {path}")
    exporter.ok("vmmrelease")                # the importer's handle keeps the memory
    assert w.usage()[0] == CTX               # an unmapped import is charged nothing...
    c.ok(f"vmmmap {512 * MiB}")
    assert w.usage()[0] == CTX + 512 * MiB   # ...its mapping its size
    c.ok("vmmunmap")
    assert w.usage()[0] == CTX
    c.ok(f"vmmmap {512 * MiB}")
    c.ok("vmmunmap")
    c.ok("vmmrelease")
    assert w.usage()[0] == CTX
    exporter.close()
    c.close()


def test_vmm_import_past_the_limit_is_refused(world):
    w = world(limit="1GiB")
    exporter = w.client(env={"GPUSLICE_REGION": str(w.tmp / "other.region"),
                             "CUDA_DEVICE_MEMORY_LIMIT": "4GiB"})
    exporter.ok("init")
    path = exporter.ok(f"vmmexport {GiB}")["path"]
    c = w.client()
    c.ok("init")
    c.ok(f"vmmimport {path}")
    assert c.cmd(f"vmmmap {GiB}")["rc"] == 2
    assert w.usage()[0] == CTX
    c.ok("vmmrelease")
    exporter.close()
    c.close()


# Each path with no limit: the same answers with the interposer as without.
SEQUENCES = {
    "legacy": ["init", f"legacy {64 * MiB}", f"legacyfill {512 * MiB}", "legacyfree",
               "legacyarray 1024 1024"],
    "graph": ["init", f"galloc {GiB} free", "glaunch", "glaunch", "gexecdestroy", "gdestroy",
              f"galloc {GiB}", "glaunch", "glaunch", "gfree", "glaunch", "gexecdestroy", "gfree"],
    "vmm": ["init", f"vmmexport {64 * MiB}", "vmmimport /proc/self/fd/1000000", f"vmmmap {64 * MiB}",
            "vmmunmap", "vmmrelease"],
}


@pytest.mark.parametrize("name", sorted(SEQUENCES))
def test_no_limit_passes_through_untouched(world, name):
    replies = []
    for preload in (True, False):
        w = world(limit=None, ctx_overhead=None)
        del w.env["GPUSLICE_REGION"]
        if not preload:
            del w.env["LD_PRELOAD"]
        c = w.client()
        # Everything but the exporter's pid, which differs from run to run.
        replies.append([" ".join(t for t in c.cmd(line)["reply"].split() if not t.startswith("path="))
                        for line in SEQUENCES[name]] + [w.gpu_used()])
        c.close()
    assert replies[0] == replies[1]


@pytest.mark.parametrize("limited", [True, False], ids=["limit", "native"])
def test_the_gpu_paths_check_runs_to_its_end(world, limited):
    """bench/memory/paths_check.c, which only a GPU call runs, on the
    simulated driver: it looked cuGraphAddNode up as CUDA 12.0, before that
    entry point existed, and called NULL on every driver. Under a 1 GiB limit
    its two 2 GiB graphs (one in a child graph) are refused; natively not."""
    w = world(limit="1GiB")
    env = dict(w.env)
    if not limited:
        env["LD_PRELOAD"] = ":".join(p for p in env["LD_PRELOAD"].split(":") if p != LIB)
    r = subprocess.run([os.environ["GS_PATHS_CHECK"], "run"], input="\n" * 64, env=env,
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    lines = r.stdout.splitlines()
    assert lines[-1] == "done"
    results = dict(line.split(" ", 2)[1:] for line in lines if line.startswith("result graph_2GiB"))
    want = 2 if limited else 0  # CUDA_ERROR_OUT_OF_MEMORY at instantiation
    assert results == {"graph_2GiB_freed_in_graph": f"instantiate_rc={want} launch_rc={want}",
                       "graph_2GiB_in_child_graph": f"instantiate_rc={want} launch_rc={want}"}
