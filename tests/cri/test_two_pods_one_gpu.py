"""Two tenant pods on one simulated GPU in the node agent's layout: each pod
its own state directory (its region, mounted from Allocate), the GPU's
ledger mounted into both by the runtime, each container in a pid namespace
with a /proc of its own (the simulator tells their processes apart and
reports host pids, as NVML does). Caps 30 / 70 and shares 30 : 70 each get
their part of the device within TOL, of the time the machine let the
tenant run (see near()).

A tenant's ratio is as in tests/integration/test_compute.py: the device
time its launches of 1 ms kernels took exclusively over the time it ran,
measured by gs_client after a warm-up, in simulated time: every tenant
process preloads the sim's slowed clock (SLOW times slower than the wall),
so the delays a loaded 2-core machine adds shrink as much against the
device and the limiter. The device loses 30 % to context switches while both
time-slice it, so a limiter that let them overlap is caught."""
import re
from collections import namedtuple

from cri_kubelet import SIM_DIR
from images import TENANT_SIM_CLOCK
from tenants import CLIENT, run_pod, start_script

# 8, not the integration tests' 5: on a 2-core CI machine running the
# fuzzers and three slow test groups beside them, a pair capped 30 / 70 read
# 0.088 / 0.197 once at 5 (their parts kept, the time lost: both held off
# their CPUs, the slowed clock running on); it failed once in two of three
# fresh-clone CI runs on 2026-12-06, passing when run again. At 8 it read
# 0.219 / 0.679 and 0.272 / 0.666, with all pods weighing one thread against
# the slow tests' tenants; the pods' parent cgroup now weighs the machine's
# CPUs (runtime.py, _weigh_pods), which did not stop it.
SLOW = 8
TOL = 0.03
# A run in a fresh-clone CI run read 0.263 / 0.631 with each tenant's
# launching thread held off its CPU (runnable, not running) 0.093 / 0.089 of
# the time: the split kept (0.294 of the sum), the time lost the machine's.
# So each part is judged against its target less what the machine took from
# the tenant, (1 - held) x target; held reads 0.000-0.001 on a quiet machine.
# The tenants' last outer runs (GPUSLICE_LOG_LEVEL=3: a line each quarter
# second of their clock) and share targets are printed, so that a failure
# shows them. The share pair missed now and then beyond what the held-off
# correction explains (0.347 / 0.626, 0.349 / 0.616): the 70 side, waiting
# for the 30 side's turns rather than for tokens, went over half a second
# without saying it wanted more, and the 30 side took the whole device for a
# run (docs/compute.md, "Wanting more").
PAIR_ENV = {"GPUSLICE_SIM_SWITCH_LOSS": "30", "LD_PRELOAD": TENANT_SIM_CLOCK,
            "GPUSLICE_SIM_CLOCK_SLOWDOWN": str(SLOW), "GPUSLICE_LOG_LEVEL": "3"}
# A tenant's ratio, and the part of the measured time the machine held it
# off its CPU.
Part = namedtuple("Part", "ratio held")


def ratios(node, tmp_path, tenants, secs, warm):
    """Runs the tenants, (name, assignment, env), as pods on one simulated
    GPU; each loads its kernel, waits for the go file in the GPU's
    directory (made once all are loaded, so they run side by side), then
    launches for secs after warm (simulated seconds). Their Parts."""
    gpu = tmp_path / "gpu"
    assignments = {name: assignment for name, assignment, _ in tenants}
    pods = []
    for name, assignment, env in tenants:
        pod = run_pod(node, name, sim_dir=gpu, **assignment)
        script = (f"(printf 'init 0\\nkernel 1000\\n'; while [ ! -e {SIM_DIR}/go ]; do sleep 0.02; done;"
                  f" printf 'run kernel {secs} {warm} 8\\n') | {CLIENT}; id")
        pods.append((pod, start_script(node, pod, script, {**PAIR_ENV, **env})))
    for pod, _ in pods:
        node.cri.wait_output(pod, lambda lines: len([ln for ln in lines if ln.endswith(" rc=0")]) == 2)
    (gpu / "go").touch()
    out = []
    for pod, cid in pods:
        node.cri.wait_exited(cid, timeout=(secs + 10) * SLOW)
        lines = node.cri.output(pod)
        found = [re.search(r"elapsed_us=(\d+) .*ratio_ppm=(\d+) run_delay_wall_us=(-?\d+) .*rc=0$", ln)
                 for ln in lines]
        found = [m for m in found if m]
        assert len(found) == 1, (pod.name, lines)
        elapsed_us, ratio_ppm, delay_us = (int(g) for g in found[0].groups())
        # The time the machine held the tenant's thread off its CPU (wall
        # time, so over SLOW on the tenant's clock), as a part of the measured
        # time; unknown (no schedstat) counts as none.
        held = delay_us / SLOW / max(elapsed_us, 1) if delay_us >= 0 else 0.0
        print(f"{pod.name}: ratio {ratio_ppm / 1e6:.3f}, held off its CPU {held:.3f} of the time")
        user = assignments[pod.name].get("security", {}).get("runAsUser", 0)
        assert [ln for ln in lines if ln.startswith(f"uid={user}(") or ln.startswith(f"uid={user} ")], lines
        outer = [ln.split(": ", 1)[-1] for ln in lines if " debug: outer " in ln]
        print("\n".join([f"{pod.name}'s last outer runs:"] + outer[-12:]))
        targets = [ln.split(": ", 1)[-1] for ln in lines if " debug: share mode on " in ln]
        print("\n".join([f"{pod.name}'s share targets:"] + targets[-12:]))
        out.append(Part(ratio_ppm / 1e6, held))
    return out


def near(part, target):
    """A part within TOL of its target less what the machine took."""
    return abs(part.ratio - target * (1 - part.held)) <= TOL


def test_two_pods_capped_30_and_70_get_30_and_70(node, tmp_path):
    a, b = ratios(node, tmp_path, [("cap30", {"cores": 30}, {}), ("cap70", {"cores": 70}, {})], 4, 2)
    print(f"two capped pods 30/70: {a.ratio:.3f} / {b.ratio:.3f}")
    assert near(a, 0.30) and near(b, 0.70), (a, b)


def non_root(uid):
    """A pod's securityContext that runs it as uid, in a group of its own."""
    return {"runAsUser": uid, "runAsGroup": uid, "fsGroup": uid + 2000, "runAsNonRoot": True}


def test_two_non_root_pods_sharing_30_70_split_30_70(node, tmp_path):
    """The weights come from each pod's environment, under the agent's
    ceiling (100). NVML reports host pids, which match no pid of either
    pod's region: counted as containers outside the ledger, each side's own
    processes included, they held the pair to 0.10 / 0.23. The two run as
    different non-root users (the capped pair as root), so the GPU's ledger
    the runtime mounts into both is all they share."""
    a, b = ratios(node, tmp_path,
                  [("share30", {"mode": "share", "security": non_root(1000)}, {"GPUSLICE_SHARE_WEIGHT": "30"}),
                   ("share70", {"mode": "share", "security": non_root(1001)}, {"GPUSLICE_SHARE_WEIGHT": "70"})], 5, 3)
    print(f"two share pods 30:70: {a.ratio:.3f} / {b.ratio:.3f}")
    assert near(a, 0.30) and near(b, 0.70), (a, b)
    assert a.ratio + b.ratio >= 0.93 * (1 - max(a.held, b.held)), (a, b)
