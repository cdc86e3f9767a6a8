"""A hostile tenant in a real container (root in it, the runtime's default
capabilities) attacks what the runtime gave it: the read-only limits file,
/etc/ld.so.preload and the interposer's mounts, the GPU's device ledger it
shares with other pods, and its environment. None of it raises its limit,
hurts the next pod on the same GPU or stops the agent, nor does emptying
its own region."""
from conftest import k8s
from test_tenant_pods import LIMIT_MIB, MIB, SIM_ENV, add_pod, results, start_tenant

CLIENT = "/usr/local/bin/gs_client getproc"
HOLD_MIB = LIMIT_MIB - 100


def hostile_script():
    """A first process holds most of the limit; then the attacks, each
    printing name=exit status; then a process with a limit of its own in its
    environment and a plain one, each asking for what is left and more."""
    return "; ".join([
        f"(printf 'init 0\\nalloc {HOLD_MIB * MIB}\\nhold\\n' | {CLIENT} > /tmp/a.out 2>&1 &)",
        "while ! grep -q holding /tmp/a.out; do sleep 0.1; done; cat /tmp/a.out",
        "echo GPUSLICE_MEMORY_LIMIT_0=80Gi >> /etc/gpuslice/limits.conf; echo conf=$?",
        "echo > /etc/ld.so.preload; echo preload=$?",
        "rm -f /etc/ld.so.preload; echo preload_rm=$?",
        "mv /opt/gpuslice/libgpuslice.so /tmp/; echo lib_mv=$?",
        "for l in /var/run/gpuslice-ledger/*; do dd if=/dev/urandom of=$l bs=4096 count=4 conv=notrunc"
        " 2>/dev/null; echo ledger=$?; done",
        "printf 'GPUSLICE_MEMORY_LIMIT_0=80Gi\\n' > /tmp/mine.conf",
        f"echo env-run; printf 'init 0\\nalloc {HOLD_MIB * MIB}\\n' | GPUSLICE_CONFIG=/tmp/mine.conf"
        f" GPUSLICE_MEMORY_LIMIT_0=80Gi {CLIENT} 2>&1",
        f"echo plain-run; printf 'init 0\\nalloc {200 * MIB}\\n' | {CLIENT} 2>&1"])


def status(lines, name):
    return [ln.split("=", 1)[1] for ln in lines if ln.startswith(name + "=")]


def after(lines, marker):
    return results(lines[lines.index(marker) + 1:])


def test_hostile_tenant_cannot_raise_its_limit_or_hurt_the_next_pod(node):
    uid, spec = add_pod(node, "hostile", LIMIT_MIB)
    pod = node.cri.run_pod("hostile", uid, spec)
    pod.container["command"] = ["/bin/sh", "-c", hostile_script()]
    cid = node.cri.start(pod, SIM_ENV)
    node.cri.wait_exited(cid)
    out = node.cri.output(pod)
    assert results(out)[:2] == ["init rc=0", "alloc rc=0"], out
    # Read-only mounts: no write, no removal, no swap of the interposer.
    for name in ("conf", "preload", "preload_rm", "lib_mv"):
        assert status(out, name) and status(out, name) != ["0"], (name, out)
    assert status(out, "ledger") == ["0"], out  # the ledger is writable: it was hit
    # A limit of its own in its environment: refused, not raised.
    env_run = after(out, "env-run")
    assert env_run and not [r for r in env_run if r.endswith(" rc=0")], out
    # Beside the first process, nothing more fits.
    plain = after(out, "plain-run")
    assert plain and not plain[-1].endswith(" rc=0"), out
    # The next pod on the same GPU (its ledger garbage now) gets its limit.
    uid2, spec2 = add_pod(node, "next", LIMIT_MIB, replica=1)
    pod2 = node.cri.run_pod("next", uid2, spec2)
    cid2 = start_tenant(node, pod2, ("init 0", "info", f"alloc {HOLD_MIB * MIB}", f"alloc {200 * MIB}"))
    node.cri.wait_exited(cid2)
    out2 = node.cri.output(pod2)
    r = results(out2)
    assert len(r) == 4 and r[0].endswith("rc=0") and r[2].endswith("rc=0"), out2
    assert f"total={LIMIT_MIB * MIB} " in r[1], out2
    assert not r[3].endswith("rc=0"), out2
    assert node.proc.poll() is None, node.logtext()
    assert k8s.NGPUS == len(node.uuids())


def test_a_tenant_that_empties_its_region_gets_no_fresh_limit(node):
    """Any tenant (here uid 1000) can truncate its region, which it must be
    able to write; its next process must not get the whole limit afresh
    beside the first one's memory. In a container the node agent set up,
    the interposer opens the region without creating it and refuses one that
    is missing, empty or blank: the GPU is refused until the pod restarts
    (before, it made a fresh region: 900 + 900 MiB in a 1000 MiB pod)."""
    uid, spec = add_pod(node, "emptier", LIMIT_MIB, {"runAsUser": 1000, "runAsGroup": 1000})
    pod = node.cri.run_pod("emptier", uid, spec)
    pod.container["command"] = ["/bin/sh", "-c", "; ".join([
        f"(printf 'init 0\\nalloc {HOLD_MIB * MIB}\\nhold\\n' | {CLIENT} > /tmp/a.out 2>&1 &)",
        "while ! grep -q holding /tmp/a.out; do sleep 0.1; done; cat /tmp/a.out",
        ": > /var/run/gpuslice/region; echo emptied=$?",
        f"echo second; printf 'init 0\\nalloc {200 * MIB}\\n' | {CLIENT} 2>&1"])]
    cid = node.cri.start(pod, SIM_ENV)
    node.cri.wait_exited(cid)
    out = node.cri.output(pod)
    assert status(out, "emptied") == ["0"], out
    second = after(out, "second")
    assert second and not second[-1].endswith(" rc=0"), f"{HOLD_MIB} + 200 MiB in a {LIMIT_MIB} MiB pod:\n{out}"
