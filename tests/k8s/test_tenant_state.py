"""What the agent prepares for a container, against tenants that run as any
uid or leave hostile files behind: a non-root pod gets its limits (the
agent creates its region, owned by the pod's runAsUser/runAsGroup/fsGroup),
every start gets a fresh state directory whatever the previous owner or run
planted in it (without following its symbolic links), and a restart keeps
the assignment the container was first started with."""
import json
import os
import stat
import subprocess
import time

import grpc
import pytest

from conftest import NODE, assignment
from ledger_ids import LEDGER_SIZE, ledger_id, member_at
from test_node_agent import envs

MIB = 1 << 20


def add_pod(node, name, annotation, security=None, container_security=None):
    spec = {"nodeName": NODE, "containers": [{"name": "main"}]}
    if security:
        spec["securityContext"] = security
    if container_security:
        spec["containers"][0]["securityContext"] = container_security
    md = {"name": name, "namespace": "default",
          "annotations": {"gpuslice.io/assignment": annotation}}
    return node.api.put("Pod", {"apiVersion": "v1", "kind": "Pod", "metadata": md,
                                "spec": spec, "status": {"phase": "Pending"}})


def state_dir(resp):
    return {m.container_path: m.host_path for m in resp.mounts}["/var/run/gpuslice"]


def run_in_container(node, resp, uid, gid, groups=(), script=("init 0",)):
    """A process of the container, as kubelet would start it: its state and
    limits directories mounted at their container paths (a private mount
    namespace), running as uid:gid with the given supplementary groups,
    with the real interposer on the simulated GPU. Returns its output."""
    mounts = {m.container_path: m.host_path for m in resp.mounts}
    # limits.conf pins the region at its container path and the context charge
    # (measured: 64 MiB on this simulated GPU), whatever the environment says.
    env = dict(node.env, GPUSLICE_SIM_CTX_OVERHEAD=str(64 * MIB),
               ASAN_OPTIONS="detect_leaks=0:verify_asan_link_order=0",
               GPUSLICE_SIM_STATE="/mnt/sim/gpu.state")
    env.update({k: v for k, v in envs(resp).items() if k.startswith("GPUSLICE_")})
    env["GPUSLICE_REGION"] = "/mnt/state/region"
    env["GPUSLICE_CONFIG"] = "/mnt/limits/limits.conf"
    pre = []
    if os.environ.get("GPUSLICE_SANITIZE", "").upper() in ("ON", "1", "TRUE"):
        for name in ("libasan.so", "libubsan.so"):
            p = subprocess.run(["gcc", f"-print-file-name={name}"], capture_output=True,
                               text=True).stdout.strip()
            if os.path.isabs(p):
                pre.append(os.path.realpath(p))
    env["LD_PRELOAD"] = ":".join(pre + [os.environ["GPUSLICE_LIB"]])
    grp = f"--groups={','.join(map(str, groups))}" if groups else "--clear-groups"
    sh = ("set -e; mount -t tmpfs -o mode=0755 gs-test /mnt; mkdir /mnt/state /mnt/limits /mnt/sim; "
          "chmod 0777 /mnt/sim; mount --bind \"$SD\" /mnt/state; mount --bind \"$LD\" /mnt/limits; "
          "mount -o remount,bind,ro /mnt/limits; mount -t tmpfs gs-run /run; mkdir /run/gpuslice; "
          "mount --bind \"$SD\" /run/gpuslice; "
          f"exec setpriv --reuid={uid} --regid={gid} {grp} \"$GS_CLIENT\" getproc")
    env.update(SD=mounts["/var/run/gpuslice"], LD=mounts["/etc/gpuslice"],
               GS_CLIENT=os.environ["GS_CLIENT"])
    r = subprocess.run(["unshare", "-m", "--propagation", "private", "sh", "-c", sh],
                       input="\n".join(script) + "\n", capture_output=True, text=True, env=env,
                       timeout=60)
    return r.stdout + r.stderr


def assert_limited(node, resp, uid, gid, groups=(), limit_mib=1000):
    out = run_in_container(node, resp, uid, gid, groups,
                           ("init 0", f"alloc {(limit_mib - 100) * MIB}",
                            f"alloc {200 * MIB}"))
    lines = [ln for ln in out.splitlines() if ln.startswith(("init", "alloc"))]
    assert len(lines) == 3, out
    assert "rc=0" in lines[0] and "rc=0" in lines[1], out
    assert "rc=0" not in lines[2], f"uid {uid} allocated past its {limit_mib} MiB limit:\n{out}"


@pytest.mark.parametrize("case", ["runAsUser", "container-overrides", "fsGroup-only",
                                  "image-user"])
def test_non_root_pod_gets_its_limits(node, case):
    """A pod that runs as non-root: the agent creates its region, owned so
    that its processes (and, with no uid or group in the spec, any uid of
    the container) can use it; the tenant's allocations are limited."""
    gpu = node.uuids()[0]
    sec, csec, run, want = {
        "runAsUser": ({"runAsUser": 1000, "runAsGroup": 1000, "runAsNonRoot": True}, None,
                      (1000, 1000, ()), (1000, 1000, 0o660)),
        "container-overrides": ({"runAsUser": 1000, "fsGroup": 3000}, {"runAsUser": 2000},
                                (2000, 2000, (3000,)), (2000, 3000, 0o660)),
        "fsGroup-only": ({"fsGroup": 4000}, None, (1234, 1234, (4000,)), (0, 4000, 0o660)),
        "image-user": (None, None, (4321, 4321, ()), (0, 0, 0o666)),
    }[case]
    add_pod(node, "nr", assignment(gpu, 0, 1000), sec, csec)
    ids, resp = node.kubelet.admit("nr")
    assert_limited(node, resp, *run)
    sd = state_dir(resp)
    st = os.lstat(sd)
    assert (st.st_uid, stat.S_IMODE(st.st_mode)) == (0, 0o755)
    st = os.lstat(os.path.join(sd, "region"))
    assert stat.S_ISREG(st.st_mode)
    assert (st.st_uid, st.st_gid, stat.S_IMODE(st.st_mode)) == want
    assert stat.S_IMODE(os.stat(node.state_root).st_mode) == 0o700


def test_owner_change_gets_a_clean_directory(node, tmp_path):
    """The previous owner (root in its container) planted a forged device
    ledger, a directory where the region goes, symbolic links to /etc and
    to a directory outside the state root, and a deep tree. The next pod on
    these devices gets a directory holding only its own fresh region, its
    limits apply, and nothing outside the state directory was touched."""
    gpu = node.uuids()[1]
    add_pod(node, "first", assignment(gpu, 2, 3000))
    ids, resp = node.kubelet.admit("first")
    sd = state_dir(resp)
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "keep").write_text("mine")
    os.unlink(os.path.join(sd, "region"))
    os.mkdir(os.path.join(sd, "region"))
    with open(os.path.join(sd, "region", "x"), "w") as f:
        f.write("x")
    with open(os.path.join(sd, f"{gpu}.ledger"), "wb") as f:
        f.write(b"\xff" * 4096)
    os.symlink("/etc", os.path.join(sd, "etc"))
    os.symlink(str(outside), os.path.join(sd, "out"))
    os.symlink(str(outside / "keep"), os.path.join(sd, "keep"))
    deep = sd
    for i in range(40):
        deep = os.path.join(deep, "d")
        os.mkdir(deep)
    os.symlink("/etc", os.path.join(deep, "etc"))
    node.kubelet.release("first")
    node.api.delete("Pod", "first", "default")
    time.sleep(0.5)  # the deletion reaches the agent's watch
    pod = add_pod(node, "second", assignment(gpu, 2, 1000), security={"runAsUser": 1000})
    ids2, resp2 = node.kubelet.admit("second")
    assert ids2 == ids and state_dir(resp2) == sd
    assert sorted(os.listdir(sd)) == ["region"]
    assert stat.S_ISREG(os.lstat(os.path.join(sd, "region")).st_mode)
    assert os.lstat(os.path.join(sd, "region")).st_uid == 1000
    assert (outside / "keep").read_text() == "mine"
    assert sorted(os.listdir(outside)) == ["keep"]
    assert os.path.exists("/etc/passwd")
    assert node.limits(resp2)["GPUSLICE_MEMORY_LIMIT_0"] == "1000Mi"
    assert open(os.path.join(node.limits_dir(resp2), "pod_uid")).read() == pod["metadata"]["uid"]
    assert_limited(node, resp2, 1000, 1000)
    # The trash is gone too, except what was deeper than the agent descends.
    assert not [n for n in os.listdir(node.state_root) if n.startswith(".trash")
                and os.path.exists(os.path.join(node.state_root, n, "region"))]


def test_restart_resets_the_state(node):
    """PreStartContainer again for the same container (a restart): whatever
    the last run left in its directory is gone, the region is fresh (no
    usage of the dead run's processes) and the limits are the same."""
    gpu = node.uuids()[2]
    add_pod(node, "again", assignment(gpu, 1, 1000))
    ids, resp = node.kubelet.admit("again")
    out = run_in_container(node, resp, 0, 0, (), ("init 0", f"alloc {900 * MIB}"))
    assert out.count("rc=0") == 2, out
    sd = state_dir(resp)
    os.symlink("/etc/passwd", os.path.join(sd, "passwd"))
    with open(os.path.join(sd, f"{gpu}.ledger"), "wb") as f:
        f.write(b"\x00" * 100)
    node.kubelet.prestart(ids)
    assert sorted(os.listdir(sd)) == ["region"]
    assert_limited(node, resp, 0, 0)
    assert "restart, fresh state" in node.logtext()


def test_assignment_edited_after_start_is_refused_on_restart(node):
    """The pod's owner edits gpuslice.io/assignment after the container
    started (1000Mi/10 -> 80000Mi/100) and restarts it: the agent refuses
    the changed assignment, naming the pod and why, and limits.conf keeps
    what was accepted at the first start."""
    gpu = node.uuids()[3]
    add_pod(node, "editor", assignment(gpu, 0, 1000, 10))
    ids, resp = node.kubelet.admit("editor")
    before = node.limits(resp)
    assert before["GPUSLICE_MEMORY_LIMIT_0"] == "1000Mi"
    pod = node.api.get("Pod", "editor", "default")
    pod["metadata"]["annotations"]["gpuslice.io/assignment"] = assignment(gpu, 0, 80000, 100)
    node.api.put("Pod", pod)
    with pytest.raises(grpc.RpcError) as ei:
        for _ in range(50):  # until the agent's watch has the edit
            node.kubelet.prestart(ids)
            time.sleep(0.1)
    assert ei.value.code() == grpc.StatusCode.FAILED_PRECONDITION
    assert "default/editor" in ei.value.details() and "changed since" in ei.value.details()
    assert node.limits(resp) == before
    assert "changed since the agent accepted it" in node.logtext()


def test_device_ledgers_are_mounted_per_gpu(node, tmp_path):
    """Each GPU's ledger is a root-owned 0666 file in a root-owned 0711
    directory, laid out by the agent (so that no tenant takes its lock to
    lay it out: one that held it for good hung the others' first launch),
    mounted read-write into the containers of that GPU only, one file per
    mount; an agent restart replaces anything that is not such a file (here
    a symbolic link to a file outside), lays out afresh one of another
    layout (here 4 bytes a tenant wrote) and keeps a valid one, members and
    all."""
    u = node.uuids()
    ldir = os.path.join(node.state_root, ".ledger")
    st = os.lstat(ldir)
    assert (st.st_uid, stat.S_IMODE(st.st_mode)) == (0, 0o711)
    for g in u:
        st = os.lstat(os.path.join(ldir, f"{g}.ledger"))
        assert stat.S_ISREG(st.st_mode) and (st.st_uid, stat.S_IMODE(st.st_mode)) == (0, 0o666)
        assert st.st_size == LEDGER_SIZE, (g, st.st_size)
    laid_out = open(os.path.join(ldir, f"{u[0]}.ledger"), "rb").read()
    assert laid_out[:8] == b"!SGEDGER" and not any(laid_out[member_at(0):]), laid_out[:16]
    two = json.loads(assignment(u[1], 4, 1000))
    two["gpus"].append({"uuid": u[3], "memory_mib": 1000})
    two["replicas"].append(f"{u[3]}::4")
    add_pod(node, "ledgers", json.dumps(two))
    ids, resp = node.kubelet.admit("ledgers", size=2)
    mounts = {m.container_path: (m.host_path, m.read_only) for m in resp.mounts}
    led = {c: h for c, (h, ro) in mounts.items() if c.startswith("/var/run/gpuslice-ledger")}
    assert led == {f"/var/run/gpuslice-ledger/{g}.ledger": os.path.join(ldir, f"{g}.ledger")
                   for g in (u[1], u[3])}
    assert not any(mounts[c][1] for c in led)
    victim = tmp_path / "victim"
    victim.write_text("keep")
    member = bytearray(laid_out)
    member[member_at(3):member_at(3) + 8] = (0x1234).to_bytes(8, "little")  # a container's member
    with open(os.path.join(ldir, f"{u[1]}.ledger"), "wb") as f:
        f.write(member)
    with open(os.path.join(ldir, f"{u[2]}.ledger"), "wb") as f:
        f.write(b"junk")
    os.unlink(os.path.join(ldir, f"{u[0]}.ledger"))
    os.symlink(str(victim), os.path.join(ldir, f"{u[0]}.ledger"))
    node.stop_agent()
    node.start_agent()
    st = os.lstat(os.path.join(ldir, f"{u[0]}.ledger"))
    assert stat.S_ISREG(st.st_mode) and stat.S_IMODE(st.st_mode) == 0o666
    assert victim.read_text() == "keep"
    assert open(os.path.join(ldir, f"{u[1]}.ledger"), "rb").read() == member
    assert open(os.path.join(ldir, f"{u[2]}.ledger"), "rb").read() == laid_out
    assert "not of this version's layout; made afresh" in node.logtext()


def test_each_gpu_has_a_read_only_roster_of_its_containers(node):
    """The agent lists every container it starts in the roster of each of
    its GPUs (src/core/roster.h): its region's ledger id and what its
    neighbours count it as (capped at its cap; in share mode the default
    weight 100, the ceiling of GPUSLICE_SHARE_WEIGHT). Each GPU's roster directory is
    root's 0755 and mounted read-only into that GPU's containers. A
    container's restart (a fresh region) replaces its entry."""
    gpu = node.uuids()[2]
    add_pod(node, "capped", assignment(gpu, 5, 1000, 30))
    add_pod(node, "sharing", assignment(gpu, 6, 1000, mode="share"))
    _, capped = node.kubelet.admit("capped")
    ids, sharing = node.kubelet.admit("sharing")
    rdir = os.path.join(node.state_root, ".roster", gpu)
    st = os.lstat(rdir)
    assert (st.st_uid, stat.S_IMODE(st.st_mode)) == (0, 0o755)
    for resp in (capped, sharing):
        mounts = {m.container_path: (m.host_path, m.read_only) for m in resp.mounts}
        assert mounts[f"/var/run/gpuslice-roster/{gpu}"] == (rdir, True), mounts
        assert envs(resp)["GPUSLICE_ROSTER_DIR"] == "/var/run/gpuslice-roster"

    def listed():
        lines = open(os.path.join(rdir, "roster")).read().splitlines()
        assert lines[0] == "gpuslice-roster 1", lines
        return sorted((k, int(i, 16), f"{m} {w}") for i, m, w, k in (line.split() for line in lines[1:]))

    def want():
        keys = {r.annotations["gpuslice.io/state-key"]: (r, w) for r, w in ((capped, "cap 30"), (sharing, "share 100"))}
        return sorted((k, ledger_id(os.path.join(state_dir(r), "region")), w) for k, (r, w) in keys.items())

    assert [e for e in listed() if e[0] in dict((k, 0) for k, _, _ in want())] == want()
    node.kubelet.prestart(ids)
    assert [e for e in listed() if e[0] in dict((k, 0) for k, _, _ in want())] == want()
