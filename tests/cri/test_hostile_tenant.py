"""A hostile tenant in a real container (root in it, the runtime's default
capabilities), served by the node agent running as a container itself
(agent_pod.py), attacks what the runtime gave it: the read-only limits file,
/etc/ld.so.preload and the interposer's mounts, the GPU's device ledger it
shares with other pods, /tmp and its environment. A neighbour pod holds
memory on the same simulated GPU meanwhile. None of it raises the tenant's
limit, hurts the neighbour or stops the agent; the agent's container
restarted afterwards registers again and serves the pods it served (each
restart of a container gets its limit) and new ones. Emptying its own region
gets a tenant no fresh limit either."""
from agent_pod import agent_in_container, restart_agent, sign
from cri_kubelet import SIM_DIR
from cri_runtime_v1_pb2 import CONTAINER_RUNNING
from tenants import CLIENT, LIMIT_MIB, MIB, results, run_pod, start_limited, start_script

HOLD_MIB = LIMIT_MIB - 100
GO = f"{SIM_DIR}/go"  # made by the test: the neighbour carries on


def hostile_script():
    """A first process holds most of the limit; then the attacks, each
    printing name=exit status; then processes that ask for what is left and
    more: with a limit of its own in its environment, with a region (a copy
    of its own before any use) and ledger directory of its own in /tmp, and
    plain."""
    return "; ".join([
        "cp /var/run/gpuslice/region /tmp/fresh.region; echo region_cp=$?",  # as the agent made it: empty
        f"(printf 'init 0\\nalloc {HOLD_MIB * MIB}\\nhold\\n' | {CLIENT} > /tmp/a.out 2>&1 &)",
        "while ! grep -q holding /tmp/a.out; do sleep 0.1; done; cat /tmp/a.out",
        "echo GPUSLICE_MEMORY_LIMIT_0=80Gi >> /etc/gpuslice/limits.conf; echo conf=$?",
        "lib=$(cat /etc/ld.so.preload)",
        "echo > /etc/ld.so.preload; echo preload=$?",
        "rm -f /etc/ld.so.preload; echo preload_rm=$?",
        "mv $lib /tmp/; echo lib_mv=$?",
        "for l in /var/run/gpuslice-ledger/*; do dd if=/dev/urandom of=$l bs=4096 count=4 conv=notrunc"
        " 2>/dev/null; echo ledger=$?; done",
        "printf 'GPUSLICE_MEMORY_LIMIT_0=80Gi\\n' > /tmp/mine.conf",
        f"echo env-run; printf 'init 0\\nalloc {HOLD_MIB * MIB}\\n' | GPUSLICE_CONFIG=/tmp/mine.conf"
        f" GPUSLICE_MEMORY_LIMIT_0=80Gi {CLIENT} 2>&1",
        f"echo tmp-run; printf 'init 0\\nalloc {200 * MIB}\\n' | GPUSLICE_REGION=/tmp/fresh.region"
        f" GPUSLICE_LEDGER_DIR=/tmp {CLIENT} 2>&1",
        f"echo plain-run; printf 'init 0\\nalloc {200 * MIB}\\n' | {CLIENT} 2>&1"])


def neighbour_script():
    """Holds most of its limit until the test says go, then looks again."""
    return (f"(printf 'init 0\\nalloc {HOLD_MIB * MIB}\\n'; while [ ! -e {GO} ]; do sleep 0.1; done;"
            f" printf 'info\\nalloc {20 * MIB}\\nalloc {100 * MIB}\\n') | {CLIENT}")


def status(lines, name):
    return [ln.split("=", 1)[1] for ln in lines if ln.startswith(name + "=")]


def after(lines, marker):
    return results(lines[lines.index(marker) + 1:])


def test_hostile_tenant_cannot_raise_its_limit_hurt_its_neighbour_or_the_agent(bare_node, tmp_path):
    node = bare_node
    gpu_dir = tmp_path / "gpu"  # the simulated GPU both pods use
    with agent_in_container(node, tmp_path) as agent:
        gpu = node.uuids()[0]
        neighbour = run_pod(node, "neighbour", gpu=gpu, sign=sign, sim_dir=gpu_dir)
        ncid = start_script(node, neighbour, neighbour_script())
        node.cri.wait_output(neighbour, lambda lines: len(results(lines)) == 2)
        hostile = run_pod(node, "hostile", gpu=gpu, replica=1, sign=sign, sim_dir=gpu_dir)
        st = node.cri.wait_exited(start_script(node, hostile, hostile_script()))
        out = node.cri.output(hostile)
        assert results(out)[:2] == ["init rc=0", "alloc rc=0"], (st.exit_code, st.reason, out)
        # Read-only mounts: no write, no removal, no swap of the interposer.
        for name in ("conf", "preload", "preload_rm", "lib_mv"):
            assert status(out, name) and status(out, name) != ["0"], (name, out)
        assert status(out, "ledger") == ["0"], out  # the ledger is writable: it was hit
        # A limit of its own in its environment: refused, not raised.
        env_run = after(out, "env-run")
        assert env_run and not [r for r in env_run if r.endswith(" rc=0")], out
        # A region of its own in /tmp (the whole limit free, were it used):
        # the agent's pins keep it on its own region, where nothing more fits.
        assert status(out, "region_cp") == ["0"], out
        tmp_run = after(out, "tmp-run")
        assert tmp_run and not tmp_run[-1].endswith(" rc=0"), out
        plain = after(out, "plain-run")
        assert plain and not plain[-1].endswith(" rc=0"), out
        assert node.cri.status(agent.container_id).state == CONTAINER_RUNNING, node.cri.output(agent)
        # The agent restarted (its ledgers hold the garbage): it registers
        # again; the neighbour, alive throughout, still has its limit, no
        # more and no less; the hostile tenant restarted gets its limit, not
        # more; a new pod on the same GPU gets its own.
        restart_agent(node, agent, 2)
        (gpu_dir / "go").touch()
        node.cri.wait_exited(ncid)
        nout = node.cri.output(neighbour)
        r = results(nout)
        assert len(r) == 5 and r[0].endswith("rc=0") and r[1].endswith("rc=0"), nout
        assert f"total={LIMIT_MIB * MIB} " in r[2] and r[3].endswith("rc=0"), nout
        assert not r[4].endswith("rc=0"), nout
        start_limited(node, hostile)
        start_limited(node, run_pod(node, "next", gpu=gpu, replica=2, sign=sign))
        assert node.cri.status(agent.container_id).state == CONTAINER_RUNNING, node.cri.output(agent)


def test_a_tenant_that_empties_its_region_gets_no_fresh_limit(node):
    """Any tenant (here uid 1000) can truncate its region, which it must be
    able to write; its next process must not get the whole limit afresh
    beside the first one's memory. In a container the node agent set up,
    the interposer opens the region without creating it and refuses one that
    is missing, empty or blank: the GPU is refused until the pod restarts
    (before, it made a fresh region: 900 + 900 MiB in a 1000 MiB pod)."""
    pod = run_pod(node, "emptier", security={"runAsUser": 1000, "runAsGroup": 1000})
    cid = start_script(node, pod, "; ".join([
        f"(printf 'init 0\\nalloc {HOLD_MIB * MIB}\\nhold\\n' | {CLIENT} > /tmp/a.out 2>&1 &)",
        "while ! grep -q holding /tmp/a.out; do sleep 0.1; done; cat /tmp/a.out",
        ": > /var/run/gpuslice/region; echo emptied=$?",
        f"echo second; printf 'init 0\\nalloc {200 * MIB}\\n' | {CLIENT} 2>&1"]))
    node.cri.wait_exited(cid)
    out = node.cri.output(pod)
    assert status(out, "emptied") == ["0"], out
    second = after(out, "second")
    assert second and not second[-1].endswith(" rc=0"), f"{HOLD_MIB} + 200 MiB in a {LIMIT_MIB} MiB pod:\n{out}"
