"""Multi-GPU jobs on the simulated driver: VMM memory shared between the
processes of one container is charged once (region_export.h), per-device
limits across processes and devices, and CUDA_VISIBLE_DEVICES."""
import json
import os
import signal
import subprocess

from conftest import CLI, GiB, MiB

CTX = 256 * MiB  # the harness's GPUSLICE_CTX_OVERHEAD
SIM_UUID = "GPU-00000000-5151-0000-0000-00000000000{}"


def top(region):
    doc = json.loads(subprocess.run([CLI, "top", "--json", region], check=True, capture_output=True,
                                    text=True).stdout)
    return doc["containers"][0]


def used(region, dev=0):
    """Container usage of physical device dev (by UUID)."""
    for d in top(region)["devices"]:
        if d["uuid"] == SIM_UUID.format(dev):
            return d["memory_used_bytes"]
    return 0


def per_process(region, dev=0):
    """pid -> bytes charged to that process on physical device dev."""
    out = {}
    for p in top(region)["processes"]:
        for d in p["devices"]:
            if d["uuid"] == SIM_UUID.format(dev):
                out[p["pid"]] = d["memory_used_bytes"]
    return out


def test_memory_shared_in_a_container_is_charged_once_and_moves_to_the_holder(world):
    w = world(limit="2GiB")
    exporter, importer = w.client(), w.client()
    exporter.ok("init")
    importer.ok("init")
    path = exporter.ok(f"vmmexport {512 * MiB}")["path"]
    assert used(w.region) == 2 * CTX + 512 * MiB
    importer.ok(f"vmmimport {path}")
    importer.ok(f"vmmmap {512 * MiB}")
    assert used(w.region) == 2 * CTX + 512 * MiB        # once, not twice
    assert per_process(w.region)[exporter.p.pid] == CTX + 512 * MiB
    exporter.ok("vmmrelease")                           # the importer still holds it
    assert used(w.region) == 2 * CTX + 512 * MiB
    assert per_process(w.region)[importer.p.pid] == CTX + 512 * MiB
    assert per_process(w.region)[exporter.p.pid] == CTX
    importer.ok("vmmunmap")
    importer.ok("vmmrelease")                           # the last handle goes
    assert used(w.region) == 2 * CTX
    exporter.close()
    importer.close()


def test_importer_release_first_leaves_the_charge_with_the_exporter(world):
    w = world(limit="2GiB")
    exporter, importer = w.client(), w.client()
    exporter.ok("init")
    importer.ok("init")
    path = exporter.ok(f"vmmexport {512 * MiB}")["path"]
    importer.ok(f"vmmimport {path}")
    importer.ok("vmmrelease")
    assert per_process(w.region)[exporter.p.pid] == CTX + 512 * MiB
    exporter.ok("vmmrelease")
    assert used(w.region) == 2 * CTX
    exporter.close()
    importer.close()


def test_a_killed_exporter_hands_its_charge_to_the_importer(world):
    w = world(limit="2GiB")
    exporter, importer = w.client(), w.client()
    exporter.ok("init")
    importer.ok("init")
    path = exporter.ok(f"vmmexport {512 * MiB}")["path"]
    importer.ok(f"vmmimport {path}")
    exporter.p.send_signal(signal.SIGKILL)
    exporter.p.wait()
    third = w.client()
    third.ok("init")                                    # attaching reclaims the dead slot
    assert per_process(w.region)[importer.p.pid] == CTX + 512 * MiB
    assert used(w.region) == 2 * CTX + 512 * MiB
    # The moved charge still counts against the limit: 2 GiB - 2 ctx - 512 MiB left.
    assert third.cmd(f"alloc {GiB + 256 * MiB}")["rc"] == 2
    third.ok(f"alloc {GiB}")
    third.ok("freeall")
    importer.ok("vmmrelease")
    assert used(w.region) == 2 * CTX
    third.close()
    importer.close()


def test_a_second_export_of_one_allocation_shares_the_same_charge(world):
    w = world(limit="2GiB")
    exporter, a, b = w.client(), w.client(), w.client()
    for c in (exporter, a, b):
        c.ok("init")
    first = exporter.ok(f"vmmexport {256 * MiB}")["path"]
    second = exporter.ok("vmmreexport")["path"]
    a.ok(f"vmmimport {first}")
    b.ok(f"vmmimport {second}")
    assert used(w.region) == 3 * CTX + 256 * MiB
    exporter.ok("vmmrelease")
    a.ok("vmmrelease")
    assert per_process(w.region)[b.p.pid] == CTX + 256 * MiB
    b.ok("vmmrelease")
    assert used(w.region) == 3 * CTX
    for c in (exporter, a, b):
        c.close()


def test_an_import_from_another_container_is_still_charged_to_the_importer(world):
    """The other container pays for its memory too: the importer's handle
    can keep it alive after the exporter lets go, and one container never
    writes another's region."""
    w = world(limit="2GiB")
    exporter = w.client(env={"GPUSLICE_REGION": str(w.tmp / "other.region")})
    exporter.ok("init")
    path = exporter.ok(f"vmmexport {512 * MiB}")["path"]
    c = w.client()
    c.ok("init")
    c.ok(f"vmmimport {path}")
    c.ok(f"vmmmap {512 * MiB}")
    assert used(w.region) == CTX + 512 * MiB
    assert used(str(w.tmp / "other.region")) == CTX + 512 * MiB
    c.ok("vmmunmap")
    c.ok("vmmrelease")
    exporter.close()
    c.close()
