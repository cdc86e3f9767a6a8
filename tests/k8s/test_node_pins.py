"""Node mode pins what a pod's environment could override (issue 27, findings
6 and 7): the agent's limits.conf sets the context charge, the region, the
ledger, the compute mode and the share weight, and for those the file's value
wins over the environment (docs/configuration.md, "Precedence"). The tenant
is the real interposer and a CUDA client on the simulated GPU, in a private
mount namespace with the answer's mounts at their container paths."""
from conftest import NODE, GpuNode, assignment
from test_node_agent import tenant

MiB = 1 << 20
# The simulated driver takes 512 MiB per context (its default).


def ask(c, line):
    c.stdin.write(line + "\n")
    c.stdin.flush()
    return c.stdout.readline()


def close(c):
    c.stdin.close()
    c.wait(timeout=30)


def one_gib_pod(node, name):
    gpu = node.uuids()[0]
    node.add_pod(name, assignment(gpu, 0, 1000, 50))
    _, resp = node.kubelet.admit(name)
    lim = node.limits(resp, pins=True)
    for k, v in (("GPUSLICE_REGION", "/var/run/gpuslice/region"),
                 ("GPUSLICE_LEDGER_DIR", "/var/run/gpuslice-ledger"),
                 ("GPUSLICE_CTX_OVERHEAD", "auto"), ("GPUSLICE_SHARE_WEIGHT", "100"),
                 ("GPUSLICE_COMPUTE_MODE", "cap")):
        assert lim.get(k) == v, (k, lim)
    return resp


def test_pod_env_cannot_zero_the_context_charge(node):
    """Finding 6: GPUSLICE_CTX_OVERHEAD=0 in the pod's env. The context's
    512 MiB stays charged, so 600 MiB more does not fit in 1000 MiB."""
    resp = one_gib_pod(node, "ctx")
    c = tenant(node, resp, {"GPUSLICE_CTX_OVERHEAD": "0"})
    try:
        assert "rc=0" in ask(c, "init 0")
        got = ask(c, f"alloc {600 * MiB}")
        assert "rc=0" not in got, "600 MiB after a 512 MiB context fit in a 1000 MiB limit"
        assert "rc=0" in ask(c, f"alloc {400 * MiB}"), c.stderr.read()
    finally:
        close(c)


def test_each_process_naming_its_own_region_shares_the_pods(node, tmp_path):
    """Finding 7: a process that names a region (and ledger) of its own still
    counts against the pod's one limit, in the pod's region."""
    resp = one_gib_pod(node, "regions")
    a = tenant(node, resp)
    own = tmp_path / "own.region"
    b = None
    try:
        assert "rc=0" in ask(a, "init 0")
        assert "rc=0" in ask(a, f"alloc {300 * MiB}"), a.stderr.read()
        b = tenant(node, resp, {"GPUSLICE_REGION": str(own),
                                    "CUDA_DEVICE_MEMORY_SHARED_CACHE": str(tmp_path / "hami.cache"),
                                    "GPUSLICE_LEDGER_DIR": str(tmp_path)})
        # Its context may be refused (the pod would pass its limit with it)
        # or charged; either way its 300 MiB must not fit beside a's 812 MiB.
        if "rc=0" in ask(b, "init 0"):
            assert "rc=0" not in ask(b, f"alloc {300 * MiB}"), "a region of its own: 1.6 GiB in a 1000 MiB pod"
        assert not own.exists() and not (tmp_path / "hami.cache").exists()
    finally:
        close(a)
        if b is not None:
            close(b)


def test_a_nodes_power_exponent_is_pinned_in_every_pod(tmp_path):
    """--power-exponent: the operator's value for this node's cards
    (docs/compute.md, "The power correction") replaces the default in each
    limits.conf, where it beats the pod's environment; a value the
    interposer would refuse stops the agent with the interposer's reason."""
    n = GpuNode(tmp_path)
    try:
        n.agent_args = ["--power-exponent", ".4"]
        n.start_agent()
        n.add_pod("pexp", assignment(n.uuids()[0], 0, 1000, 50))
        _, resp = n.kubelet.admit("pexp")
        assert n.limits(resp, pins=True)["GPUSLICE_POWER_EXPONENT"] == "0.400"
        n.stop_agent()
        assert n.failed_start(["--power-exponent", "1.5"]) == 2
        assert "--power-exponent '1.5': out of range (expected 0..1)" in n.logtext()
    finally:
        n.close()


def test_a_nodes_share_yield_is_pinned_in_every_pod(tmp_path):
    """--share-yield-us: the operator's choice for this node (a share
    container borrowing a light neighbour's part keeps at most that much GPU
    work queued; docs/compute.md, "Yielding to a light neighbour") replaces
    the default 0 in each limits.conf, where it beats the pod's environment
    (the borrower would otherwise turn it off); a value the interposer would
    refuse stops the agent with the interposer's reason."""
    n = GpuNode(tmp_path)
    try:
        n.start_agent()
        n.add_pod("ydef", assignment(n.uuids()[0], 0, 1000, 50, mode="share"))
        _, resp = n.kubelet.admit("ydef")
        assert n.limits(resp, pins=True)["GPUSLICE_SHARE_YIELD_US"] == "0"
        n.stop_agent()
        n.agent_args = ["--share-yield-us", "0300"]
        n.start_agent()
        n.add_pod("yset", assignment(n.uuids()[0], 1, 1000, 50, mode="share"))
        _, resp = n.kubelet.admit("yset")
        assert n.limits(resp, pins=True)["GPUSLICE_SHARE_YIELD_US"] == "300"
        n.stop_agent()
        for bad, why in (("200000", "out of range"), ("-5", ""), ("5ms", "")):
            assert n.failed_start(["--share-yield-us", bad]) == 2, bad
            assert f"--share-yield-us '{bad}': {why}" in n.logtext(), bad
    finally:
        n.close()


def test_a_nodes_label_sets_its_power_exponent(tmp_path):
    """The label gpuslice.io/power-exponent on the agent's Node (the cluster
    admin's value for that node's cards, bench/compute/fit_exponent.py)
    beats --power-exponent; a label the interposer would refuse is logged
    and the flag's value stays pinned."""
    n = GpuNode(tmp_path)
    try:
        for label, pinned in (("0.38", "0.380"), ("1.5", "0.400")):
            n.api.put("Node", {"apiVersion": "v1", "kind": "Node",
                               "metadata": {"name": NODE, "labels": {"gpuslice.io/power-exponent": label}}})
            n.agent_args = ["--power-exponent", ".4"]
            n.start_agent()
            pod = f"pexp{label.replace('.', '')}"
            n.add_pod(pod, assignment(n.uuids()[0], 0, 1000, 50))
            _, resp = n.kubelet.admit(pod)
            assert n.limits(resp, pins=True)["GPUSLICE_POWER_EXPONENT"] == pinned, label
            n.stop_agent()
        log = n.logtext()
        assert "power exponent 0.380 from its label gpuslice.io/power-exponent" in log, log
        assert "label gpuslice.io/power-exponent='1.5': out of range (expected 0..1); power exponent 0.400" in log, log
    finally:
        n.close()
