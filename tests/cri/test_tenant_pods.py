"""Tenant pods in real containers (containerd + runc, CRI v1), started by
the CRI kubelet stand-in with what the node agent's Allocate and
PreStartContainer answered (tenants.py)."""
from tenants import LIMIT_MIB, MIB, results, run_pod, start_tenant, tenant_output


def test_tenant_sees_its_limit_and_is_refused_past_it(node):
    pod = run_pod(node, "t1")
    cid = start_tenant(node, pod, ("init 0", "info", "nvml 0", f"alloc {(LIMIT_MIB - 100) * MIB}",
                                   f"alloc {200 * MIB}"))
    st = node.cri.wait_exited(cid)
    out = tenant_output(node, pod)
    r = results(out)
    assert len(r) == 5, out
    assert f"total={LIMIT_MIB * MIB} " in r[1] and r[1].endswith("rc=0"), out
    assert f"v1_total={LIMIT_MIB * MIB} " in r[2] and f"v2_total={LIMIT_MIB * MIB} " in r[2], out
    assert r[3].endswith("rc=0"), out
    assert not r[4].endswith("rc=0"), f"allocated past the {LIMIT_MIB} MiB limit:\n{out}"
    assert st.exit_code == 0


def test_non_root_pod_with_fs_group_gets_its_limit(node):
    """runAsUser 1000 with an fsGroup: the container's process runs as
    1000 with the fsGroup among its groups (the runtime applied the
    securityContext), finds the region the agent made for that uid, and is
    limited."""
    sec = {"runAsUser": 1000, "runAsGroup": 1000, "fsGroup": 3000, "runAsNonRoot": True}
    pod = run_pod(node, "nr", security=sec)
    cid = start_tenant(node, pod, ("init 0", "info", f"alloc {(LIMIT_MIB - 100) * MIB}", f"alloc {200 * MIB}"))
    node.cri.wait_exited(cid)
    out = tenant_output(node, pod)
    r = results(out)
    ident = [ln for ln in out if ln.startswith("uid=")]
    assert ident and ident[0].startswith("uid=1000 gid=1000 ") and "3000" in ident[0], out
    assert len(r) == 4 and r[0].endswith("rc=0") and r[2].endswith("rc=0"), out
    assert f"total={LIMIT_MIB * MIB} " in r[1], out
    assert not r[3].endswith("rc=0"), f"uid 1000 allocated past the {LIMIT_MIB} MiB limit:\n{out}"


def test_restart_in_the_same_sandbox_gets_the_whole_limit_back(node):
    """The tenant holds most of its limit and is killed; kubelet starts the
    next attempt in the same sandbox (a fresh pid namespace, so the new
    process may well have the dead one's pid). The new run has its whole
    limit: nothing of the dead run is charged to it."""
    pod = run_pod(node, "rs")
    first = start_tenant(node, pod, ("init 0", f"alloc {(LIMIT_MIB - 100) * MIB}", "hold"))
    node.cri.wait_output(pod, lambda lines: "holding" in lines)
    node.cri.kill(first)
    assert node.cri.wait_exited(first).exit_code == 137  # SIGKILL
    second = start_tenant(node, pod, ("init 0", "info", f"alloc {(LIMIT_MIB - 100) * MIB}", f"alloc {200 * MIB}"))
    assert second != first
    node.cri.wait_exited(second)
    out = tenant_output(node, pod)
    r = results(out)
    assert len(r) == 4, out
    # All of the limit but the new run's own context (64 MiB on this GPU).
    assert f"free={(LIMIT_MIB - 64) * MIB} total={LIMIT_MIB * MIB} " in r[1], out
    assert r[2].endswith("rc=0"), out
    assert not r[3].endswith("rc=0"), out
    # kubelet keeps the dead attempt until the pod goes: both in one sandbox.
    assert sorted(c.id for c in node.cri.containers() if c.pod_sandbox_id == pod.sandbox_id) == \
        sorted([first, second])


def test_pod_deletion_leaves_no_state(node, runtime):
    """A pod deleted while its tenant holds GPU memory: its sandbox and
    containers, their processes, mounts, cgroups, network namespace and
    address are gone, and the next pod on the same device gets its whole
    limit."""
    pod = run_pod(node, "gone")
    start_tenant(node, pod, ("init 0", f"alloc {(LIMIT_MIB - 100) * MIB}", "hold"))
    node.cri.wait_output(pod, lambda lines: "holding" in lines)
    pids = runtime.cgroup_pids()
    assert pids, "the running pod has no process under the runtime's cgroup parent"
    netns = runtime.new_netns()
    assert netns, "the pod's sandbox has no network namespace of its own"
    ips = runtime.leased_ips()
    assert ips, "the pod's sandbox has no address on the bridge"
    node.cri.delete_pod(pod)
    node.api.delete("Pod", "gone", "default")
    assert not [s for s in node.cri.sandboxes() if s.id == pod.sandbox_id]
    assert not [c for c in node.cri.containers() if c.pod_sandbox_id == pod.sandbox_id]
    assert not runtime.cgroup_pids()
    assert not [p for p in pids if _alive(p)], pids
    assert not [m for m in runtime.all_mounts() if pod.sandbox_id in m or pod.uid in m]
    assert not runtime.new_netns() and not runtime.leased_ips()
    pod2 = run_pod(node, "next")
    assert pod2.ids == pod.ids
    cid = start_tenant(node, pod2, ("init 0", "info"))
    node.cri.wait_exited(cid)
    out = tenant_output(node, pod2)
    assert f"free={(LIMIT_MIB - 64) * MIB} total={LIMIT_MIB * MIB} " in results(out)[1], out


def _alive(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(") ", 1)[1][0] not in "ZX"
    except (OSError, IndexError):
        return False
