"""Multi-GPU jobs on the simulated driver: VMM memory shared between the
processes of one container is charged once (region_export.h), per-device
limits across processes and devices, and CUDA_VISIBLE_DEVICES."""
import json
import os
import signal
import subprocess

from conftest import CLI, SIM_UUID, GiB, MiB

CTX = 256 * MiB  # the harness's GPUSLICE_CTX_OVERHEAD


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


def run_env(w, state):
    """`gpuslice run` preloads the interposer and names the region itself."""
    env = dict(w.env)
    for k in ("GPUSLICE_REGION", "CUDA_DEVICE_MEMORY_LIMIT"):
        env.pop(k, None)
    preload = [p for p in env.pop("LD_PRELOAD").split(":") if "gpuslice" not in p]
    if preload:
        env["LD_PRELOAD"] = ":".join(preload)
    env.update({"GPUSLICE_STATE_DIR": str(state), "GPUSLICE_SIM_DEVICES": "2"})
    return env


def rank(w, state, name, memory, env=None):
    wrap = [CLI, "run", "--memory", memory, "--name", name, "--"]
    return w.client(env={**run_env(w, state), **(env or {})}, wrap=wrap)


def pid_of(c):
    """The client's pid: `gpuslice run` starts it as its child."""
    with open(f"/proc/{c.p.pid}/task/{c.p.pid}/children") as f:
        return int(f.read().split()[0])


def region_of(state, name):
    return str(state / f"{name}.region")


def test_two_ranks_on_two_devices_keep_their_own_device_limits(world, tmp_path):
    w = world(limit=None)
    state = tmp_path / "state"
    r0 = rank(w, state, "ddp", "0=8GiB,1=4GiB")
    r0.ok("init 0")  # attached first: a named run restarts a container nobody uses yet
    r1 = rank(w, state, "ddp", "0=8GiB,1=4GiB")
    r1.ok("init 1")
    assert r0.ok("info")["total"] == 8 * GiB
    assert r1.ok("info")["total"] == 4 * GiB
    assert r0.cmd(f"fill {64 * MiB}")["count"] == (8 * GiB - CTX) // (64 * MiB)
    assert r1.cmd(f"fill {64 * MiB}")["count"] == (4 * GiB - CTX) // (64 * MiB)
    region = region_of(state, "ddp")
    assert os.path.exists(region)
    limits = {d["uuid"]: (d["memory_limit_bytes"], d["memory_used_bytes"]) for d in top(region)["devices"]}
    assert limits == {SIM_UUID.format(0): (8 * GiB, 8 * GiB), SIM_UUID.format(1): (4 * GiB, 4 * GiB)}
    # NVML has no CUDA ordinals: its device i is physical device i, found by UUID.
    assert r1.ok("nvml 0")["v2_total"] == 8 * GiB
    assert r0.ok("nvml 1")["v2_total"] == 4 * GiB
    r0.ok("freeall")                    # device 0 frees; device 1 stays full
    assert r1.cmd(f"alloc {64 * MiB}")["rc"] == 2
    r0.close()
    r1.close()


VISIBLE = {"indexes": "1,0", "uuids": f"{SIM_UUID.format(1)},{SIM_UUID.format(0)}"}


def test_reordered_visible_devices_take_limits_by_their_own_ordinals(world, tmp_path):
    """Limit indexes are CUDA ordinals as the process sees them; the region
    keys each device by UUID, so ordinal 0 here is physical device 1."""
    w = world(limit=None)
    state = tmp_path / "state"
    for how, visible in sorted(VISIBLE.items()):
        name = f"tp-{how}"
        c = rank(w, state, name, "0=8GiB,1=4GiB", env={"CUDA_VISIBLE_DEVICES": visible})
        c.ok("init 0")
        assert c.cmd(f"fill {64 * MiB}")["count"] == (8 * GiB - CTX) // (64 * MiB), how
        c.ok("init 1")
        assert c.cmd(f"fill {64 * MiB}")["count"] == (4 * GiB - CTX) // (64 * MiB), how
        limits = {d["uuid"]: d["memory_limit_bytes"] for d in top(region_of(state, name))["devices"]}
        assert limits == {SIM_UUID.format(1): 8 * GiB, SIM_UUID.format(0): 4 * GiB}, how
        assert c.ok("nvml 1")["v2_total"] == 8 * GiB, how  # NVML index = physical
        c.ok("freeall")
        c.close()


def test_a_visible_subset_hides_the_other_device(world, tmp_path):
    w = world(limit=None)
    c = rank(w, tmp_path / "state", "one", "4GiB", env={"CUDA_VISIBLE_DEVICES": "1"})
    c.ok("init 0")
    assert c.cmd("init 1")["rc"] == 101  # CUDA_ERROR_INVALID_DEVICE
    c.ok(f"vmmexport {64 * MiB}")
    assert per_process(region_of(tmp_path / "state", "one"), dev=1)[pid_of(c)] == CTX + 64 * MiB
    c.ok("vmmrelease")
    c.close()


def test_memory_shared_across_devices_is_charged_on_its_own_device(world, tmp_path):
    """Rank 1 imports rank 0's buffer on device 0: the charge stays on device
    0 (where the memory is) and moves to rank 1 when rank 0 lets go."""
    w = world(limit=None)
    state = tmp_path / "state"
    r0 = rank(w, state, "nccl", "0=8GiB,1=4GiB")
    r0.ok("init 0")  # attached first: a named run restarts a container nobody uses yet
    r1 = rank(w, state, "nccl", "0=8GiB,1=4GiB")
    r1.ok("init 1")
    path = r0.ok(f"vmmexport {GiB} 0")["path"]
    r1.ok(f"vmmimport {path}")
    r1.ok(f"vmmmap {GiB}")
    region = region_of(state, "nccl")
    assert used(region, 0) == CTX + GiB and used(region, 1) == CTX
    r0.ok("vmmrelease")
    assert per_process(region, 0)[pid_of(r1)] == GiB
    assert used(region, 0) == CTX + GiB and used(region, 1) == CTX
    r1.ok("vmmunmap")
    r1.ok("vmmrelease")
    assert used(region, 0) == CTX
    r0.close()
    r1.close()


def test_a_fabric_handle_is_matched_by_its_bytes(world):
    w = world(limit="2GiB")
    exporter, importer, foreign = w.client(), w.client(), w.client(
        env={"GPUSLICE_REGION": str(w.tmp / "other.region")})
    for c in (exporter, importer, foreign):
        c.ok("init")
    exporter.ok(f"vmmexport {256 * MiB}")
    fabric = exporter.ok("vmmfabric")["fabric"]
    importer.ok(f"vmmimportfabric {fabric}")
    importer.ok(f"vmmmap {256 * MiB}")
    foreign.ok(f"vmmimportfabric {fabric}")
    foreign.ok(f"vmmmap {256 * MiB}")
    assert used(w.region) == 2 * CTX + 256 * MiB        # the container's own importer joins
    assert used(str(w.tmp / "other.region")) == CTX + 256 * MiB  # another container pays
    exporter.ok("vmmrelease")
    importer.ok("vmmunmap")
    importer.ok("vmmrelease")
    assert used(w.region) == 2 * CTX
    foreign.ok("vmmunmap")
    foreign.ok("vmmrelease")
    for c in (exporter, importer, foreign):
        c.close()


def test_memory_from_a_pool_on_another_gpu_is_charged_there(world, tmp_path):
    """cuMemAllocFromPoolAsync takes memory on the pool's device, whatever
    the current context's: charged to the current device, a pool on GPU 1
    took GPU 1's memory past its 1 GiB limit."""
    w = world(limit=None)
    state = tmp_path / "state"
    r = rank(w, state, "pools", "0=8GiB,1=1GiB")
    r.ok("init 0")
    assert r.cmd(f"pool {2 * GiB} 1")["rc"] == 2  # CUDA_ERROR_OUT_OF_MEMORY
    r.ok(f"pool {512 * MiB} 1")
    region = region_of(state, "pools")
    assert used(region, dev=1) == 512 * MiB
    assert used(region, dev=0) == CTX
    r.close()


def test_a_device_past_the_tables_is_refused_with_a_reason(world):
    """gpuslice accounts for 16 devices a process (GS_MAX_DEVICES): what
    lands on a 17th could be neither charged nor limited, so it is refused
    (fail closed) with one error naming the device and the limit: its
    context, and memory made there from another device's context."""
    w = world(extra={"GPUSLICE_SIM_DEVICES": "17"})
    c = w.client()
    c.ok("init 15")  # the last device the tables hold
    c.ok(f"vmm {2 * MiB} 15")
    assert c.cmd("init 16")["rc"] == 2  # CUDA_ERROR_OUT_OF_MEMORY
    assert c.cmd(f"vmm {2 * MiB} 16")["rc"] == 2
    assert c.cmd(f"pool {MiB} 16")["rc"] == 2
    err = c.close()
    assert err.count("device 16 is past the 16 devices gpuslice can account for") == 1, err


def test_a_device_past_the_tables_is_left_alone_where_nothing_is_limited(world):
    """With no limit set (usage tracked, as `gpuslice run` without
    --memory or --cores runs), nothing would be limited on a 17th device:
    refused, a program the interposer does not limit broke."""
    w = world(limit=None, extra={"GPUSLICE_SIM_DEVICES": "17"})
    c = w.client()
    c.ok("init 16")
    c.ok(f"alloc {2 * MiB}")
    c.close()
