"""Compute limits on the simulated driver's kernel timeline.

Kernels take the time they were created with (sleep_us:N) on a per-device
timeline shared by every process; two processes with work time-slice the
device. A tenant's ratio is the device time its completed launches took
exclusively, divided by the time it ran: 1.0 means it had the device to
itself. Time is the tenants' CLOCK_MONOTONIC, slowed SLOW times against the
wall (tests/simdriver/sim_clock.c); tolerances cover what a loaded CI
machine still adds: where a bound depends on how fast the machine runs the
tenant, the test asserts what the limiter did instead (the time it made the
tenant wait, from the region), or an upper bound the limiter enforces however
slowly the tenant runs (its GPU time against its time)."""
import fcntl
import json
import math
import os
import re
import statistics
import struct
import subprocess
import threading
import time

import pytest
from conftest import SIM_CLOCK, SIM_UUID, pid_namespace
from ledger_ids import LEDGER_MAGIC, LEDGER_SIZE, LEDGER_VERSION, MEMBERS, ledger_id, member_at, member_offsets

TOL = 0.05
# The tenants' clock runs this many times slower than the wall (conftest,
# World's slowdown): a loaded machine's scheduling delays shrink as much
# against the simulated device and the limiter's windows. At 1 a loaded
# 2-core machine left the 30 % side of two capped containers at 0.25; at 3
# a share pair beside a compile and a fuzzer fell to 0.22 / 0.65 once.
SLOW = 5


def world_env(world, **extra):
    return world(limit=None, extra={k: str(v) for k, v in extra.items()}, slowdown=SLOW)


def sim_sleep(secs):
    """Sleeps secs of the tenants' (slowed) time."""
    time.sleep(secs * SLOW)


def held_off(r):
    """The part of a run's or burst's measured time the machine held the
    tenant's launching thread off its CPU (its run delay is wall time, so
    over SLOW on the tenant's clock); NaN where the kernel does not say."""
    return r["run_delay_wall_us"] / SLOW / max(r["elapsed_us"], 1) if r["run_delay_wall_us"] >= 0 else float("nan")


class Ratio(float):
    """A run's ratio, with held: the part of its time the machine held it
    off its CPU (held_off; 0 where unknown)."""
    held = 0.0


def run(client, path, secs, warm=0.0, depth=8):
    r = client.ok(f"run {path} {secs} {warm} {depth}")
    held = held_off(r)
    # shown with a failure: a split missed beside a large part held off is the machine's
    print(f"run {path}: ratio {r['ratio_ppm'] / 1e6:.3f}, held off its CPU {held:.3f} of the time")
    ratio = Ratio(r["ratio_ppm"] / 1e6)
    ratio.held = 0.0 if math.isnan(held) else held
    return ratio


def device_busy_enough(ratios, least=0.95):
    """Whether the tenants together kept the device least busy, of the time
    the machine let them run: on a loaded 2-core CI machine four share
    tenants each held off their CPUs 3.4-4.7 % of the time summed to 0.948."""
    return sum(ratios) >= least * (1 - max(r.held for r in ratios))


def start(w, us, env=None, graph=None, wrap=()):
    c = w.client(env=env, wrap=wrap)
    c.ok("init")
    c.ok(f"kernel {us}")
    if graph:
        c.ok(f"graph {graph}")
    return c


def start_logged(w, us, log, env):
    """start() with the tenant's debug log (GPUSLICE_LOG_LEVEL=3) in the file
    log: a file, not a pipe, which a log this long would fill."""
    return start(w, us, env={**env, "GPUSLICE_LOG_LEVEL": "3"}, wrap=("sh", "-c", f'exec "$@" 2>{log}', "sh"))


def together(*jobs):
    """Runs (client, path, secs, warm, depth) jobs at once; their ratios."""
    out = [None] * len(jobs)

    def go(i, job):
        out[i] = run(*job)

    ts = [threading.Thread(target=go, args=(i, j)) for i, j in enumerate(jobs)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    return out


@pytest.mark.parametrize("cap", [30, 60])
def test_cap_holds_for_long_kernels(world, cap):
    w = world_env(world, GPUSLICE_CORES=cap)
    c = start(w, 2000)
    ratio = run(c, "kernel", 1.5, 0.5, 4)
    c.close()
    assert abs(ratio - cap / 100) <= TOL, ratio


def top(region):
    from conftest import CLI
    return json.loads(subprocess.run([CLI, "top", "--json", str(region)], check=True, capture_output=True,
                                     text=True).stdout)


def waited_s(region):
    """The time the container of region waited for tokens, all its processes
    together, exited ones too (the account's, not the live processes')."""
    return sum(d["compute_waited_ns"] or 0 for c in top(region)["containers"] for d in c["devices"]) / 1e9


def test_cap_bounds_the_gpu_time_of_launch_bound_kernels(world):
    """10 us kernels are launch-bound: alone the tenant keeps the device busy
    only part of the time. Under a cap of 30 its GPU time is at most 30 % of
    wall time however fast the machine runs it; its speed is min(1, 30 %/busy)
    of alone, so it runs at 30 % of the device or at its own pace."""
    base = start(world_env(world), 10)
    alone = run(base, "kernel", 1.0, 0.2, 64)
    base.close()
    w = world_env(world, GPUSLICE_CORES=30, GPUSLICE_REGION=str(w_path(world, "short")))
    c = start(w, 10)
    capped = run(c, "kernel", 2.0, 0.5, 64)
    c.close()
    assert capped <= 0.30 + TOL, (capped, alone)
    assert capped >= 0.8 * min(0.30, alone), (capped, alone)


def test_a_light_tenant_is_not_throttled_by_a_cap_above_its_use(world):
    """Bursts of 20 kernels of 50 us (1 ms of GPU work), then 9 ms of
    sleep: ~10 % busy. A cap of 30 never makes it wait (the region counts
    the time the limiter made it wait: none, however loaded the machine),
    and its GPU time stays under the cap."""
    w = world_env(world, GPUSLICE_CORES=30)
    c = start(w, 50)
    r = c.ok("burst 20 9000 2.0")
    c.close()
    assert r["bursts"] > 50, r
    busy = r["bursts"] * 20 * 50 / r["elapsed_us"]
    assert busy <= 0.30, (busy, r)
    assert waited_s(w.region) <= 0.05 * r["elapsed_us"] / 1e6, (waited_s(w.region), r)


def w_path(world, name):
    return world().tmp / f"{name}.region"


@pytest.mark.parametrize("path", ["kernel", "kernelptsz", "ex", "exptsz", "coop", "coopptsz", "graph", "graphptsz"])
def test_every_launch_path_is_throttled(world, path):
    w = world_env(world, GPUSLICE_CORES=40)
    c = start(w, 100, graph=10)  # a graph launch = 10 kernels of 100 us
    ratio = run(c, path, 0.6, 0.2, 8 if path.startswith("graph") else 16)
    c.close()
    assert abs(ratio - 0.40) <= 0.07, ratio


def test_no_limit_or_policy_disable_runs_free(world):
    """Neither gates a launch: no time charged, none waited (what the
    limiter did, not a throughput that a loaded machine would lower)."""
    for env in ({}, {"GPUSLICE_CORES": 30, "GPU_CORE_UTILIZATION_POLICY": "disable"}):
        w = world_env(world, **env)
        c = start(w, 1000)
        ratio = run(c, "kernel", 0.5, 0.1, 8)
        procs = [p for ct in top(w.region)["containers"] for p in ct["processes"]]
        c.close()
        assert procs and all(p["compute_charged_ns"] == 0 and p["compute_waited_ns"] == 0 for p in procs), procs
        assert ratio >= 0.5, (env, ratio)  # and it ran


def test_hami_sm_limit_is_a_cap_under_the_default_policy(world):
    """HAMi-core leaves a lone process unlimited under the default policy;
    gpuslice caps it."""
    c = start(world_env(world, CUDA_DEVICE_SM_LIMIT=25), 2000)
    ratio = run(c, "kernel", 1.5, 0.5, 4)
    c.close()
    assert abs(ratio - 0.25) <= TOL, ratio


def test_two_processes_of_one_container_share_its_cap(world):
    w = world_env(world, GPUSLICE_CORES=40)
    a, b = start(w, 1000), start(w, 1000)
    ra, rb = together((a, "kernel", 2.5, 1.0, 4), (b, "kernel", 2.5, 1.0, 4))
    a.close()
    b.close()
    assert ra + rb <= 0.43, (ra, rb)
    assert ra + rb >= 0.33, (ra, rb)
    assert min(ra, rb) >= 0.10, (ra, rb)  # neither starves


def test_overlapping_outer_runs_of_one_containers_processes_count_each_sample_once(world, tmp_path):
    """Two processes of one container capped at 40, each read of NVML's
    per-process samples taking 0.3 s (a stall: an outer run reads them at
    least twice, so it runs past the next one's due time). One process's run
    then begins before the other's ends, from the same sample mark, and both
    counted the same samples. The run that finds the mark moved decides
    nothing (gs_lim_take_samples), and the pair still holds its cap.

    The first two runs overlap whatever the machine's load: their first
    reads meet in the simulated driver (GPUSLICE_SIM_NVML_READ_MEET), and a
    launches alone, then b alone an interval later, so each claims one. Left
    to the stalls alone, a loaded 2-core machine once saw no run overlap."""
    w = world_env(world, GPUSLICE_CORES=40, GPUSLICE_SIM_NVML_READ_US=300000, GPUSLICE_SIM_NVML_READ_MEET=2)
    logs = [tmp_path / "a.log", tmp_path / "b.log"]
    a, b = (start_logged(w, 1000, log, {}) for log in logs)
    a.ok("run kernel 0.05 0 4")  # claims the first run, whose read waits for another
    sim_sleep(0.3)  # past the run's interval (GS_LIM_OUTER_NS, 0.25 s): the next is b's to claim
    b.ok("run kernel 0.05 0 4")
    ra, rb = together((a, "kernel", 2.5, 1.0, 4), (b, "kernel", 2.5, 1.0, 4))
    a.close()
    b.close()
    text = "".join(log.read_text() for log in logs)
    overlapped = text.count("this one decides nothing")
    print(f"two processes capped at 40, NVML reads of 0.3 s: {ra:.3f} + {rb:.3f}; {overlapped} runs overlapped")
    assert overlapped > 0, text[-3000:]
    assert 0.33 <= ra + rb <= 0.43, (ra, rb)


def test_a_debug_log_into_a_full_pipe_never_holds_a_launch(world):
    """A capped tenant at debug level (a line a window) whose stderr is a
    pipe of one page that nobody reads, as a container runtime's log shim
    that lags on a loaded node: once the pipe filled, each write held the
    launching thread until the reader caught up, here for ever. Lines at
    info and debug are left out while stderr has no room for them."""
    w = world_env(world, GPUSLICE_CORES=30, GPUSLICE_LOG_LEVEL=3)
    c = w.client()
    fcntl.fcntl(c.p.stderr.fileno(), fcntl.F_SETPIPE_SZ, 4096)  # one page
    c.ok("init")
    c.ok("kernel 1000")
    ratio = []
    t = threading.Thread(target=lambda: ratio.append(run(c, "kernel", 2.0, 0.0, 4)), daemon=True)
    t.start()
    t.join(60)
    if not ratio:
        c.kill()
    err = c.close()
    assert ratio, "the launching thread was held by its log's writes"
    assert "debug: " in err, err[-2000:]
    assert abs(ratio[0] - 0.30) <= 0.05, ratio


def read_only_roster(roster):
    """The command that runs a client as the node agent runs a container:
    in a pid namespace of its own, with the GPU rosters' directory mounted
    read-only (the interposer takes no roster from a writable mount)."""
    cmd = ["unshare", "--mount", "--pid", "--fork", "--kill-child", "sh", "-c",
           'mount --bind -o ro "$0" "$0" && exec "$@"', str(roster)]
    if subprocess.run([*cmd, "true"], capture_output=True).returncode != 0:
        pytest.skip("no mount namespace can be made here (unshare --mount as root)")
    return cmd


def write_roster(roster, uuid, entries):
    """The roster of GPU uuid as the node agent writes it (roster.h):
    entries are (region path, "cap 30" or "share 100", key)."""
    (roster / uuid).mkdir(parents=True, exist_ok=True)
    lines = "".join(f"{ledger_id(p):016x} {w} {k}\n" for p, w, k in entries)
    (roster / uuid / "roster").write_text("gpuslice-roster 1\n" + lines)


def lay_out(w, names, layout):
    """Where containers of these names live: (wrap, one environment each).
    "flat": all regions in one state directory (gpuslice run); "agent": as
    the node agent lays them out, each its own state directory and pid
    namespace (all tenants are pid 1 there), the device ledgers in one
    directory all reach (w.tmp / "ledgers")."""
    if layout == "flat":
        return (), [{"GPUSLICE_REGION": str(w.tmp / f"{n}.region")} for n in names]
    (w.tmp / "ledgers").mkdir(exist_ok=True)  # a test may have put a ledger there first
    for n in names:
        (w.tmp / n).mkdir()
    return pid_namespace(), [{"GPUSLICE_REGION": str(w.tmp / n / "region"),
                              "GPUSLICE_LEDGER_DIR": str(w.tmp / "ledgers")} for n in names]


def containers(world, envs, layout="flat", secs=4.0, warm=2.0, hostile=None, logs=False, roster=None,
               roster_writable=False, **sim):
    """GPU-bound containers (1 ms kernels, 8 queued) side by side, one per
    environment in envs; their ratios. layout: "flat" or "agent" (lay_out). roster
    (agent layout): what the node agent writes for each container in the
    GPU's roster ("cap 30", "share 100"), mounted read-only unless
    roster_writable; None: none. hostile(ledger_dir) runs beside them, as
    one more tenant that can write there (the directory of the ledgers in
    either layout). logs: their stderr too."""
    w = world_env(world, **sim)
    names = "abcdefgh"[:len(envs)]
    wrap, places = lay_out(w, names, layout)
    full = [{**p, **e} for p, e in zip(places, envs)]
    if layout == "agent" and roster:
        (w.tmp / "roster").mkdir()
        wrap = wrap if roster_writable else read_only_roster(w.tmp / "roster")
        for e in full:
            e["GPUSLICE_ROSTER_DIR"] = str(w.tmp / "roster")
    clients = [start(w, 1000, env=e, wrap=wrap) for e in full]
    if layout == "agent" and roster:
        write_roster(w.tmp / "roster", SIM_UUID.format(0),
                     [(e["GPUSLICE_REGION"], weight, n) for e, weight, n in zip(full, roster, names)])
    th = threading.Thread(target=hostile, args=(w.tmp / "ledgers" if layout == "agent" else w.tmp,)) if hostile else None
    if th:
        th.start()
    ratios = together(*[(c, "kernel", secs, warm, 8) for c in clients])
    if th:
        th.join()
    errs = [c.close() for c in clients]
    if layout == "agent":
        assert list((w.tmp / "ledgers").glob("*.ledger")), list((w.tmp / "ledgers").iterdir())
    return (ratios, errs) if logs else ratios


def two_containers(world, env_a, env_b, layout="flat", secs=4.0, warm=2.0, hostile=None, logs=False, **sim):
    """containers() of two: (ra, rb), or (ra, rb, ea, eb) with logs."""
    out = containers(world, [env_a, env_b], layout, secs, warm, hostile, logs, **sim)
    return (*out[0], *out[1]) if logs else tuple(out)


@pytest.mark.parametrize("layout", ["flat", "agent"])
@pytest.mark.parametrize("snapshot", [0, 1])
def test_two_containers_capped_30_and_70_get_30_and_70(world, snapshot, layout):
    """The simulated device loses 30 % of its time to context switches while
    both time-slice it (an H200 lost ~5 % and split unevenly): a limiter that
    let the two overlap and charged each half of the overlap would give the
    30 % tenant ~0.21. Capped containers take turns through the device
    ledger, so nothing is time-sliced and nothing lost. With NVML's
    per-process samples as an H100 gave them (snapshot: the whole device to
    the tenant that ran last), a limiter that corrected by them gave the 70
    side 0.58 there. In the agent's layout (own directories and pid
    namespaces, a shared ledger directory) without the shared ledger the pair
    got 0.14 / 0.54."""
    ra, rb = two_containers(world, {"GPUSLICE_CORES": "30"}, {"GPUSLICE_CORES": "70"}, layout, secs=3.0, warm=1.0,
                            GPUSLICE_SIM_SWITCH_LOSS=30, GPUSLICE_SIM_NVML_SNAPSHOT=snapshot)
    print(f"caps 30/70, {layout}, snapshot {snapshot}: {ra:.3f} / {rb:.3f}")
    assert abs(ra - 0.30) <= TOL and abs(rb - 0.70) <= TOL, (ra, rb)


def scribble(ledgers):
    """Random bytes over the whole device ledger: forged members, turns,
    open counts and weights. Returns how many ledgers it wrote."""
    n = 0
    for f in ledgers.glob("*.ledger"):
        with open(f, "r+b") as fh:
            fh.write(os.urandom(os.path.getsize(f)))
        n += 1
    return n


def forge_turn(ledgers):
    """Hands the turn, for the longest a turn may reach, to the live member
    capped at 70 and writes it thousands of open windows, which its own
    window closes do not count down (struct gs_ledger_file, ledger.h: the
    turn at byte 24, 56-byte members from byte 40, open at +36, weight at
    +40). Returns how many turns it forged (0 where the layout is not
    that size: the test then fails on it)."""
    n = 0
    for f in ledgers.glob("*.ledger"):
        with open(f, "r+b") as fh:
            b = fh.read()
            if len(b) != LEDGER_SIZE:
                return 0
            for off in member_offsets(b):
                c, = struct.unpack_from("<Q", b, off)
                if c and struct.unpack_from("<I", b, off + 40)[0] == 70:
                    fh.seek(24)
                    fh.write(struct.pack("<QQ", c, time.monotonic_ns() // SLOW + 1_100_000_000))
                    fh.seek(off + 36)
                    fh.write(struct.pack("<I", 4000))
                    n += 1
    return n


def test_a_tenant_that_holds_the_shared_ledger_lock_for_good_costs_the_others_no_waits(world, tmp_path):
    """A tenant that can write the agent's shared ledger directory holds the
    device ledger's lock all along. Two containers capped 30 / 70 cannot
    join; each says why, stays under its cap, and runs without turns
    (time-slicing, here with a 30 % switch loss). Its tries to join cost it
    no more than 1.5 % of its time: each waited the lock's 5 ms, every
    100 ms, 3.2 % of the run, before a wait that timed out made the next
    second's tries single ones."""
    fd = hold_ledger_lock(tmp_path)
    capped = {"GPUSLICE_LOG_LEVEL": "3"}
    ra, rb, ea, eb = two_containers(world, {**capped, "GPUSLICE_CORES": "30"}, {**capped, "GPUSLICE_CORES": "70"},
                                    "agent", secs=3.0, warm=1.5, logs=True, GPUSLICE_SIM_SWITCH_LOSS=30)
    os.close(fd)
    asks = [cost_ms(e, "asks of the device ledger") for e in (ea, eb)]
    print(f"ledger lock held for good: {ra:.3f} / {rb:.3f}, asks {asks} ms")
    for e in (ea, eb):
        assert "its lock is held by another process" in e, e[-2000:]
    assert ra <= 0.30 + TOL and rb <= 0.70 + TOL, (ra, rb)
    assert ra >= 0.05 and rb >= 0.35, (ra, rb)
    assert all(a is not None and a <= 0.015 * 4.5e3 for a in asks), (asks, ea[-2000:])


def test_a_tenant_that_holds_the_shared_ledger_files_flock_hangs_no_launch(world):
    """Any tenant that can open a device ledger can take the flock that
    guards its first lay-out. Held on an empty ledger, it hung a capped
    tenant's first launch for as long (60 s here, before the bound). Now the
    launch goes on after 5 ms without the ledger, held to its cap, says
    why, and joins at a later launch once the lock is let go. Its tries
    meanwhile cost it under 1.5 % of its time: each waited 100 ms before
    (every 100 ms: the tenant's launches were held half the time, and it
    ran at 0.36 under its cap of 30 in a sanitizer run), and after a wait
    that timed out each try is a single one for a second. (The node agent
    lays its ledgers out itself, so that there no tenant needs the lock:
    tests/k8s/test_tenant_state.py.)"""
    w = world_env(world)
    fd = os.open(w.tmp / (SIM_UUID.format(0) + ".ledger"), os.O_RDWR | os.O_CREAT, 0o666)
    fcntl.flock(fd, fcntl.LOCK_EX)
    log = w.tmp / "capped.log"
    c = start_logged(w, 1000, log, {"GPUSLICE_CORES": "30"})
    out = {}
    th = threading.Thread(target=lambda: out.update(r=run(c, "kernel", 1.5, 0.5)), daemon=True)
    th.start()
    th.join(timeout=60)  # a hang detector, not a timing bound
    hung = th.is_alive()
    os.close(fd)
    th.join()
    assert not hung, "the capped tenant's launch hung on the ledger's flock"
    assert out["r"] <= 0.30 + TOL, out
    run(c, "kernel", 0.5)  # its later launches join
    c.close()
    err = log.read_text()
    assert "is not laid out, and another process holds its lock; this process joins at a later launch" in err, err
    assert re.search(r"ledger: joined, as member \d+", err), err
    asks = cost_ms(err, "asks of the device ledger")
    assert asks is not None and asks <= 0.015 * 2.5e3, (asks, err[-2000:])


def drain_threads(c):
    """The limiter's drain threads in gs_client c."""
    tasks = f"/proc/{c.p.pid}/task"
    return sum(open(f"{tasks}/{t}/comm").read().strip() == "gpuslice-drain" for t in os.listdir(tasks))


def not_hung_by_a_drain(w, c, line, what):
    """Runs line, whose work waits for the host until after its next
    launches: it must end (a hang detector, not a timing bound), its window
    given up on at the drain's bound and charged as busy until then (1 s at
    c = 1, not learnt yet; forgiven, it was a few ms)."""
    out = {}
    th = threading.Thread(target=lambda: out.update(r=c.cmd(line)), daemon=True)
    th.start()
    th.join(timeout=120)
    hung = th.is_alive()
    if hung:
        c.kill()
    assert not hung, f"a capped tenant whose {what} hung in a window's drain"
    assert out["r"]["rc"] == 0, out
    procs = [p for ct in top(w.region)["containers"] for p in ct["processes"]]
    err = c.close()
    charged = sum(p["compute_charged_ns"] for p in procs) / 1e9
    print(f"{what}: {out['r']}, charged {charged:.3f} s")
    assert "charged as busy until now" in err, err[-2000:]
    assert charged >= 0.5, (charged, procs)


@pytest.mark.parametrize("how", ["hostwait", "hostfunc", "hostfunc2", "hostfunc2-newer"])
def test_a_capped_tenant_whose_queue_waits_for_its_host_is_not_hung_by_a_drain(world, how):
    """A capped tenant's stream waits for its host, which goes on only
    after the launches behind that wait return: a cuStreamWaitValue32 on a
    flag (as a kernel spinning on a host flag or a persistent kernel does),
    or a host function waiting for the program's next step. A window's
    drain waited for that work without a bound, inside the launch: the
    program hung for good. The drain waits on a thread of its own now; the
    launch stops waiting at the bound (1 s), goes on, and the window is
    charged as busy until then, not forgiven. Only a process that queued
    such work drains on a helper thread: the others keep the driver's own
    wait, one wake-up sooner. hostfunc2: the host function through CUDA
    13's cuLaunchHostFunc_v2; -newer: through a variant newer than the
    interposer (the simulated driver's cuLaunchHostFunc_v99, for "CUDA
    13.9"), which it cannot wrap."""
    w = world_env(world, GPUSLICE_CORES=30, GPUSLICE_LOG_LEVEL=2)
    c = start(w, 1000)
    run(c, "kernel", 0.3, 0.0, 8)  # windows drained, on the launching thread
    assert drain_threads(c) == 0
    if how.startswith("hostfunc2"):
        c.ok("cudaversion 13090" if how.endswith("-newer") else "cudaversion 13010")
    not_hung_by_a_drain(w, c, f"{how.split('-')[0]} 0.5", "queue waits for its host")


@pytest.mark.parametrize("kind", ["alloc", "plain"])
def test_a_capped_tenant_whose_kernel_spins_on_a_host_flag_is_not_hung_by_a_drain(world, kind):
    """A capped tenant's kernel spins on a flag in host memory the device
    reaches, which its host sets only after its next launches returned (a
    persistent kernel released by the host). No API call shows that wait, so
    the drain waited for it without a bound: the program hung. Having such
    memory (cuMemAllocHost, cuMemHostAlloc, cuMemHostRegister; any host
    memory where the device has pageable access, as HMM gives one: plain)
    makes the process drain with the bound, as a queued host wait does
    (which memory does: the test after this one)."""
    extra = {"GPUSLICE_SIM_PAGEABLE_ACCESS": 1} if kind == "plain" else {}
    w = world_env(world, GPUSLICE_CORES=30, GPUSLICE_LOG_LEVEL=2, **extra)
    c = start(w, 1000)
    not_hung_by_a_drain(w, c, f"spinflag {kind} 0.5", f"kernel spins on a host flag ({kind})")


@pytest.mark.parametrize("kind,pageable,bounded", [
    ("alloc", 0, True), ("hostalloc", 0, True), ("register", 0, True), ("managed", 0, True), ("plain", 1, True),
    ("plain", 0, False),
], ids=["pinned", "mapped", "registered", "managed", "pageable-access", "neither"])
def test_host_memory_the_device_reaches_makes_a_capped_process_drain_with_a_bound(world, kind, pageable, bounded):
    """Whether a capped process's drains wait on a helper thread, with the
    bound: once it holds host memory the device reaches (a kernel may spin
    on it), yes; holding only its own unregistered memory on a device
    without pageable access, no (the driver's own wait, one wake-up
    sooner)."""
    w = world_env(world, GPUSLICE_CORES=30, GPUSLICE_SIM_PAGEABLE_ACCESS=pageable)
    c = start(w, 1000)
    c.ok(f"hostmem {kind}")
    run(c, "kernel", 0.3, 0.0, 8)  # windows close and drain
    threads = drain_threads(c)
    c.close()
    assert threads == (1 if bounded else 0), (kind, pageable, threads)


@pytest.mark.parametrize("mode,lookups,noted", [
    ("getproc", ["cudaversion 13090", "lookup cuLaunchHostFunc"], True),
    ("dlsym", ["lookup cuLaunchHostFunc_v99"], True),
    ("getproc", ["lookup cuLaunchHostFunc"], False),
    ("getproc", ["cudaversion 13010", "lookup cuLaunchHostFunc"], False),
    ("dlsym", ["lookup cuLaunchHostFunc_v2"], False),
    ("default", ["lookup cuLaunchHostFunc"], False),
    ("getproc", ["lookup cuMemAllocHost", "lookup cuMemHostAlloc", "lookup cuMemHostRegister", "lookup cuMemAllocManaged"],
     False),
    ("dlsym", ["lookup cuMemAllocHost_v2", "lookup cuMemHostRegister_v2"], False),
], ids=["getproc-newer", "dlsym-newer", "getproc-wrapped", "getproc-v2", "dlsym-v2", "own-export", "getproc-host-memory",
        "dlsym-host-memory"])
def test_a_host_wait_variant_newer_than_the_interposer_makes_its_process_drain_with_a_bound(world, mode, lookups,
                                                                                           noted):
    """A variant of a host-wait entry point that this build does not know
    passes through unwrapped, so its calls go unseen: looking it up notes the
    process (its drains wait with a bound from then on). A variant we wrap
    (CUDA 13's cuLaunchHostFunc_v2 among them: cuda-python looks every
    entry point up as it loads), or our own export found through
    RTLD_DEFAULT, does not: only a call of it does."""
    w = world_env(world, GPUSLICE_CORES=30)
    c = w.client(mode=mode)
    c.ok("init")
    c.ok("kernel 1000")
    for line in lookups:
        c.ok(line)
    run(c, "kernel", 0.3, 0.0, 8)
    assert (drain_threads(c) >= 1) == noted, (mode, lookups)
    c.close()


def test_a_graph_with_a_host_node_makes_its_process_drain_with_a_bound(world):
    """A host node in a graph waits for the host as a host function queued
    on a stream does: the graph's instantiation notes it, and the process's
    windows drain on a helper thread from then on."""
    w = world_env(world, GPUSLICE_CORES=30)
    c = start(w, 1000)
    run(c, "kernel", 0.3, 0.0, 8)
    assert drain_threads(c) == 0
    assert c.cmd("hostnode")["rc"] == 0
    run(c, "kernel", 0.3, 0.0, 8)
    assert drain_threads(c) >= 1
    c.close()


def cost_ms(err, what):
    """The time the limiter spent on `what` in all, in ms, from its cost
    report at exit; None where the report has no such line."""
    m = re.search(r"compute limiter cost: \d+ " + re.escape(what) + r".*?, ([\d.]+) ms in all", err)
    return float(m.group(1)) if m else None


def cost_longest_ms(err, what):
    """The longest single `what` in the limiter's cost report, in ms; 0
    where it never happened."""
    m = re.search(r"compute limiter cost: \d+ " + re.escape(what) + r".*longest ([\d.]+) us", err)
    return float(m.group(1)) / 1e3 if m else 0.0


@pytest.mark.parametrize("attack", [scribble, forge_turn], ids=["garbage", "forged-turn"])
def test_what_a_tenant_writes_into_the_shared_ledger_holds_no_window_back_longer_than_one(world, attack):
    """A third tenant that can write the agent's shared ledger directory
    attacks it every 5 ms while two containers capped 30 / 70 run in the
    agent's layout. Neither exceeds its cap, no window of the 30 side waits
    for turns longer than the longest window of another container (150 ms,
    GS_LIM_TURN_WAIT_MAX_NS; scheduling slack on top), and it keeps running.
    Before that bound a turn forged for the live 70 side held the 30 side's
    windows until it no longer counted as throttled (~0.5 s): 0.06 of the
    device. What it still costs: the attacked turns no longer keep the two
    apart, and they time-slice (here with a 30 % switch loss).

    Measured over 2.5 s: a container may spend the tokens it banked while
    it waited for turns (GS_LIM_TURN_BANK) and run into debt. Over the
    1.5 s this measured before, the 70 side read 0.757 in 1 of 12 runs
    here (0.632-0.734 in the rest) and 0.765 in a CI run; over 2.5 s,
    0.659-0.711 in 12."""
    hits = []

    def attacker(ledgers):
        end = time.monotonic() + 3.5 * SLOW  # as long as the tenants run
        sim_sleep(1.0)
        while time.monotonic() < end:
            hits.append(attack(ledgers))
            sim_sleep(0.005)

    ra, rb, ea, _ = two_containers(world, {"GPUSLICE_CORES": "30", "GPUSLICE_LOG_LEVEL": "3"},
                                   {"GPUSLICE_CORES": "70"}, "agent", secs=3.5, warm=1.0, hostile=attacker,
                                   logs=True, GPUSLICE_SIM_SWITCH_LOSS=30)
    longest = cost_longest_ms(ea, "windows that waited for another container's turn")
    print(f"attack: {ra:.3f} / {rb:.3f}, longest wait for turns {longest:.1f} ms, {sum(hits)} of {len(hits)} hit")
    assert sum(hits) >= len(hits) // 2, hits  # the attack reached the ledger
    assert ra <= 0.30 + TOL and rb <= 0.70 + TOL, (ra, rb)
    assert longest <= 150 + 100, ea[-2000:]
    assert ra >= 0.05 and rb >= 0.35, (ra, rb)


@pytest.mark.parametrize("layout,yield_us,host_pids", [("flat", 0, 0), ("flat", 250, 0), ("agent", 0, 0),
                                                      ("agent", 0, 1)])
@pytest.mark.parametrize("snapshot", [0, 1])
def test_two_containers_sharing_30_70_split_30_70_and_use_the_gpu(world, snapshot, layout, yield_us, host_pids):
    """yield_us: GPUSLICE_SHARE_YIELD_US; host_pids: NVML names every
    process by its host pid (GPUSLICE_SIM_NVML_HOST_PIDS, older drivers). While the two settle, the 70 side
    (time-sliced to about half) is under its part, so the 30 side, over its
    part, may yield to it; the 70 side, its work queued all the time, says it
    wants more (gs_lim_share_wants_more) and both are held to their shares.
    Without that, with NVML snapshots and yield in one directory, the pair
    stayed time-sliced in 2 of 4 suite runs (0.35 / 0.61, 0.46 / 0.47).
    Measured from 2 s on: while they settle the 30 side's target swings
    between 0.3 and the whole device (logged runs settled by the sixth outer
    run, 1.5 s; docs/testing.md has what the pairs measured from 2 s on and
    from 3 s on).

    With NVML snapshots and yield in one directory the split missed in 1 of
    8 suite runs when the queued rule came (0.321 / 0.649); it passed 60
    runs in a row since (635c901, 970bcad, 849c7e1), up to four at a time
    on 2 cores (0.288-0.308 / 0.687-0.712).

    In the agent's layout each container has a pid namespace of its own.
    Where NVML reports host pids, they match no region's pids: counted as
    containers outside the ledger, each side's own processes included, they
    held the pair to 0.10 / 0.23. Where it names the caller's own processes
    by their pids in its namespace and the neighbour's by host pids (driver
    580), each counted the other as outside too: 0.148 / 0.350 here, 0.281 /
    0.644 on an H100 (compute-2026-12-07h-h100.md)."""
    share = {"GPUSLICE_COMPUTE_MODE": "share", "GPUSLICE_SHARE_YIELD_US": str(yield_us)}
    ra, rb = two_containers(world, {**share, "GPUSLICE_SHARE_WEIGHT": "30"},
                            {**share, "GPUSLICE_SHARE_WEIGHT": "70"}, layout, secs=4.0, warm=2.0,
                            GPUSLICE_SIM_SWITCH_LOSS=30, GPUSLICE_SIM_NVML_SNAPSHOT=snapshot,
                            GPUSLICE_SIM_NVML_HOST_PIDS=host_pids)
    print(f"shares 30:70, {layout}, snapshot {snapshot}, yield {yield_us}, host pids {host_pids}: {ra:.3f} / {rb:.3f}")
    assert abs(ra - 0.30) <= TOL and abs(rb - 0.70) <= TOL, (ra, rb)
    assert ra + rb >= 0.93, (ra, rb)


def test_share_pods_in_pid_namespaces_of_their_own_count_a_busy_process_outside_the_ledger(world):
    """A share pair 30 : 70 in the agent's layout (a pid namespace each,
    driver 580's pids) beside a busy process without the interposer in the
    host's namespace. Each pod sees two busy pids no member names: the
    neighbour's, and the outsider's. While any pid nobody names was taken
    for a member's whenever a member numbered its pids elsewhere, the
    outsider was counted by neither pod, and both ran as if alone with the
    other. One member elsewhere accounts for one such pid: the second is
    counted outside the ledger."""
    def outsider(_):
        o = start(world_env(world, GPUSLICE_SIM_SWITCH_LOSS=30), 1000, env={"LD_PRELOAD": SIM_CLOCK})
        run(o, "kernel", 3.5, 0.0, 8)
        o.close()

    share = {"GPUSLICE_COMPUTE_MODE": "share", "GPUSLICE_LOG_LEVEL": "3"}
    *_, ea, eb = two_containers(world, {**share, "GPUSLICE_SHARE_WEIGHT": "30"},
                                {**share, "GPUSLICE_SHARE_WEIGHT": "70"}, "agent", secs=3.0, warm=1.0,
                                hostile=outsider, logs=True, GPUSLICE_SIM_SWITCH_LOSS=30)
    for e in (ea, eb):
        assert re.search(r"share mode on \S+: target \d+ ppm .*and outside the ledger", e), e[-3000:]


def share_pair_beside(world, hostile, what, secs=5.0, warm=3.0):
    """A share pair 30 : 70 of the agent's layout (logging, a 30 % switch
    loss, measured from warm to secs) beside hostile (containers()); asserts
    it splits 30 : 70 and keeps the GPU busy. Their logs."""
    share = {"GPUSLICE_COMPUTE_MODE": "share", "GPUSLICE_LOG_LEVEL": "2"}
    ra, rb, ea, eb = two_containers(world, {**share, "GPUSLICE_SHARE_WEIGHT": "30"},
                                    {**share, "GPUSLICE_SHARE_WEIGHT": "70"}, "agent", secs=secs, warm=warm,
                                    hostile=hostile, logs=True, GPUSLICE_SIM_SWITCH_LOSS=30)
    print(f"shares 30:70 after {what}: {ra:.3f} / {rb:.3f}")
    assert abs(ra - 0.30) <= TOL and abs(rb - 0.70) <= TOL, (ra, rb)
    assert ra + rb >= 0.93, (ra, rb)
    return ea, eb


def lay_out_ledger(directory):
    """Device 0's ledger in directory, laid out as the interposer lays one
    out (struct gs_ledger_file: its header, every member empty), before any
    tenant opened it."""
    header = struct.pack("<QII", LEDGER_MAGIC, LEDGER_VERSION, LEDGER_SIZE)
    (directory / (SIM_UUID.format(0) + ".ledger")).write_bytes(header + bytes(LEDGER_SIZE - len(header)))


def hold_ledger_lock(tmp_path):
    """Takes the lock of device 0's ledger in the agent's layout (lay_out:
    tmp_path is the world's tmp) before any tenant has opened it, as a
    tenant that can write the ledger directory can; the descriptor that
    holds it."""
    (tmp_path / "ledgers").mkdir()
    fd = os.open(tmp_path / "ledgers" / (SIM_UUID.format(0) + ".ledger"), os.O_RDWR | os.O_CREAT, 0o600)
    fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB, 1, 1 << 20, 0)  # the lock byte (ledger.c, LOCK_OFF)
    return fd


def test_two_containers_sharing_30_70_split_30_70_when_the_ledger_was_full_as_they_joined(world, tmp_path):
    """A tenant that can write the agent's shared ledger directory lays out
    device 0's ledger before anyone and takes every member slot, then lets
    them go 0.5 s later. Each process of the share pair finds it full, says
    so, and joins at a later launch. A process that found the ledger full
    stayed out of it for good: neither saw the other, and both ran free."""
    ledgers = tmp_path / "ledgers"
    ledgers.mkdir()
    lay_out_ledger(ledgers)
    held = []
    assert forge_members(ledgers, MEMBERS, held) == MEMBERS

    def let_go(_):
        sim_sleep(0.5)
        for fd in held:
            os.close(fd)

    for e in share_pair_beside(world, let_go, "a full ledger"):
        assert "is full; this process tries to join again" in e, e[-2000:]
        assert re.search(r"ledger: joined, as member \d+", e), e[-2000:]


@pytest.mark.parametrize("size", [0, 1000])
def test_a_ledger_cut_short_under_a_share_pair_is_joined_again(world, size):
    """A tenant that can write the agent's shared ledger directory cuts the
    device ledger short (to `size` bytes) 0.5 s after a share pair 30 : 70
    joined it. Every member's mapping lost the pages past the end: the
    SIGBUS guard gives a process zeroed private pages instead of a crash,
    yet where the outer thread touched them first the fault came with every
    signal blocked there and the kernel killed the process (both tenants,
    cut to 1000 bytes); and each went on with a ledger nobody else saw
    (0.35 / 0.35, both running free). Each member that finds its mapping cut
    short now sizes the file back and maps it again in place (its header
    restored by the members where it is gone), and the pair splits 30 : 70
    again."""
    done = []

    def resize(ledgers):
        sim_sleep(0.5)
        for f in ledgers.glob("*.ledger"):
            os.truncate(f, size)
            done.append(f)

    logs = share_pair_beside(world, resize, f"the ledger was cut to {size} bytes")
    assert len(done) == 1, done
    assert os.path.getsize(done[0]) == LEDGER_SIZE
    for e in logs:
        assert "was cut short under this process" in e, e[-2000:]


def test_a_ledger_cut_short_again_and_again_keeps_its_members(world):
    """The tenant cuts the ledger to nothing every 0.1 s from 0.3 s to 2.8 s,
    more often than the pair's outer runs look (measured from 4 s to 6 s).
    Each member that found its mapping cut short left its handle and joined
    afresh, at most eight times (each handle stays allocated): past that it
    stayed with its zeroed pages, and the pair ran free. A member now sizes
    the file back and maps it again in place, however often."""
    cuts = []

    def cut_again(ledgers):
        sim_sleep(0.3)
        for _ in range(25):
            for f in ledgers.glob("*.ledger"):
                os.truncate(f, 0)
                cuts.append(f)
            sim_sleep(0.1)

    logs = share_pair_beside(world, cut_again, "25 cuts of the ledger", secs=6.0, warm=4.0)
    assert len(cuts) == 25, len(cuts)
    for e in logs:
        assert "sized back and mapped again" in e, e[-2000:]
        assert "stays with what it has" not in e, e[-2000:]


def test_a_share_tenant_that_closes_its_descriptors_still_sees_and_is_seen_by_its_neighbour(world):
    """The 30 side of a share pair 30 : 70 (the agent's layout) closes its
    descriptors of the device ledger after it joined it and opens files of
    its own, which take their numbers. Through them its
    ledger lock excluded no one, every other member looked dead to its
    reap, and its own member's lock was gone. It leaves that handle and
    joins afresh, and the pair splits 30 : 70."""
    w = world_env(world, GPUSLICE_SIM_SWITCH_LOSS=30)
    wrap, places = lay_out(w, "ab", "agent")
    share = {"GPUSLICE_COMPUTE_MODE": "share", "GPUSLICE_LOG_LEVEL": "2"}
    a, b = (start(w, 1000, env={**p, **share, "GPUSLICE_SHARE_WEIGHT": wt}, wrap=wrap)
            for p, wt in zip(places, ("30", "70")))
    together((a, "kernel", 0.5, 0.0, 8), (b, "kernel", 0.5, 0.0, 8))  # both joined
    a.ok("closefds .ledger")
    ra, rb = together((a, "kernel", 5.0, 3.0, 8), (b, "kernel", 5.0, 3.0, 8))
    ea, _ = a.close(), b.close()
    print(f"shares 30:70, the 30 side's descriptors closed: {ra:.3f} / {rb:.3f}")
    assert "lost its descriptors (the program closed them)" in ea, ea[-2000:]
    assert abs(ra - 0.30) <= TOL and abs(rb - 0.70) <= TOL, (ra, rb)


def test_two_containers_sharing_30_70_split_30_70_when_the_ledger_was_locked_as_they_joined(world, tmp_path):
    """A process holds the device ledger's lock (a stalled one, or a tenant
    that can write the agent's shared ledger directory) while the share
    pair of the agent's layout joins, and lets go 0.5 s later. Each joins at
    a later launch and says why it could not at once. A member that gave up
    at once stayed out of the ledger for good: neither saw the other, and
    both ran free (0.350 / 0.350 every run; once in a loaded CI run without
    a held lock, where a preempted holder kept it past its 5 ms). Measured
    from 3 s on: the pair settles ~1.5 s after it joins."""
    fd = hold_ledger_lock(tmp_path)

    def let_go(_):
        sim_sleep(0.5)
        os.close(fd)

    for e in share_pair_beside(world, let_go, "a held ledger lock"):
        assert "its lock is held by another process; this process joins at a later launch" in e, e[-2000:]
        assert re.search(r"ledger: joined, as member \d+", e), e[-2000:]


def test_two_containers_sharing_30_70_split_30_70_after_a_tenant_wrote_over_their_ledger(world):
    """A tenant that can write the agent's shared ledger directory writes
    random bytes over the device ledger once, 1 s in, while a share pair
    30 : 70 runs in the agent's layout, each on the GPU's roster. Each
    member restores its own record and the file's header at its next outer
    run, and the pair splits 30 : 70 again. Before, the garbage stood: their
    container ids no longer matched the roster, each counted the other as a
    stranger of weight up to 100, and the pair ran at 0.231 / 0.411; and
    every process that opened the ledger later was refused it."""
    hits = []

    def once(ledgers):
        sim_sleep(1.0)
        hits.append(scribble(ledgers))

    share = {"GPUSLICE_COMPUTE_MODE": "share"}
    ra, rb = containers(world, [{**share, "GPUSLICE_SHARE_WEIGHT": "30"}, {**share, "GPUSLICE_SHARE_WEIGHT": "70"}],
                        "agent", secs=5.0, warm=3.0, hostile=once, roster=["share 100", "share 100"],
                        GPUSLICE_SIM_SWITCH_LOSS=30)
    print(f"shares 30:70 after the ledger was written over: {ra:.3f} / {rb:.3f}")
    assert hits == [1], hits
    assert abs(ra - 0.30) <= TOL and abs(rb - 0.70) <= TOL, (ra, rb)
    assert ra + rb >= 0.93, (ra, rb)


def test_two_containers_sharing_30_70_post_each_wait_for_tokens_at_once(world):
    """A share container's waits for tokens are how the others learn that
    it wants more (for 500 ms after each, GS_LIM_THROTTLED_NS). Posted to
    the ledger only at its outer runs (every 250 ms), they looked up to a
    run older than they were; where the two outer loops ran a few ms apart
    the 30 side read the 70 side's as over every other run, took the whole
    GPU, and the pair swung between 0.30 / 0.70 and about 0.60 / 0.40 to
    the end (0.36 / 0.68 and 0.47 / 0.56 measured; 5 of 24 runs failed with
    three tests at once). Each wait is posted as it ends. Read from the
    ledger every 5 ms while the pair runs, the median age of the two sides'
    last waits was 72-99 ms (five runs); posted at outer runs only, 198-240
    ms (four runs)."""
    ages = []

    def observer(ledgers):  # the flat layout's: the regions' directory
        end = time.monotonic() + 4.0 * SLOW
        sim_sleep(2.0)  # settled
        ids = {ledger_id(ledgers / f"{name}.region") for name in "ab"}
        while time.monotonic() < end:
            for f in ledgers.glob("*.ledger"):
                b = f.read_bytes()
                now = time.monotonic_ns() // SLOW
                for off in member_offsets(b):
                    container, wants = struct.unpack_from("<Q8xQ", b, off)
                    if container in ids and wants:
                        ages.append(max(0, now - wants) / 1e6)
            sim_sleep(0.005)

    share = {"GPUSLICE_COMPUTE_MODE": "share"}
    ra, rb = containers(world, [{**share, "GPUSLICE_SHARE_WEIGHT": "30"}, {**share, "GPUSLICE_SHARE_WEIGHT": "70"}],
                        "flat", secs=4.0, warm=2.0, hostile=observer, GPUSLICE_SIM_SWITCH_LOSS=30)
    median = sorted(ages)[len(ages) // 2] if ages else None
    print(f"shares 30:70, waits posted at once: {ra:.3f} / {rb:.3f}, median age of the last wait {median} ms "
          f"({len(ages)} reads)")
    assert len(ages) >= 100, len(ages)  # both were throttled, and seen
    assert median <= 150, median
    assert abs(ra - 0.30) <= TOL and abs(rb - 0.70) <= TOL, (ra, rb)


# Issue 28's splits: each tenant within this of its part.
SPLIT_TOL = 0.03


@pytest.mark.parametrize("layout", ["flat", "agent"])
def test_four_tenants_capped_10_20_30_beside_a_share_one_split_10_20_30_40(world, layout):
    """Three capped containers and a share container of the default weight
    on one device: the capped ones get their caps, the share one the rest,
    and the device stays busy. Weighed by their caps beside the share one's
    100, the capped ones got 0.07 / 0.15 / 0.18 and it 0.59. In the agent's
    layout the GPU's roster says which are capped, and at what."""
    envs = [*({"GPUSLICE_CORES": str(p)} for p in (10, 20, 30)), {"GPUSLICE_COMPUTE_MODE": "share"}]
    r = containers(world, envs, layout, secs=5.0, warm=3.0, roster=["cap 10", "cap 20", "cap 30", "share 100"])
    assert all(abs(got - want) <= SPLIT_TOL for got, want in zip(r, (0.10, 0.20, 0.30, 0.40))), r
    print(f"four shares: {r}, sum {sum(r):.3f}")
    assert device_busy_enough(r), [(x, x.held) for x in r]


@pytest.mark.parametrize("layout", ["flat", "agent"])
def test_four_tenants_sharing_10_20_30_40_split_by_weight(world, layout):
    """Four share containers of weights 10 : 20 : 30 : 40, all wanting the
    whole device. In the agent's layout no container sees the others'
    regions: without the roster the three others' ledger members counted
    as one container of weight 100 at most, and the four were not told
    apart (0.10 / 0.18 / 0.29 / 0.44). The roster says each may weigh 100
    (the agent's ceiling); each counts with the smaller of that and its
    claim."""
    envs = [{"GPUSLICE_COMPUTE_MODE": "share", "GPUSLICE_SHARE_WEIGHT": str(w)} for w in (10, 20, 30, 40)]
    r = containers(world, envs, layout, secs=5.0, warm=3.0, roster=["share 100"] * 4)
    assert all(abs(got - want) <= SPLIT_TOL for got, want in zip(r, (0.10, 0.20, 0.30, 0.40))), r
    print(f"four shares: {r}, sum {sum(r):.3f}")
    assert device_busy_enough(r), [(x, x.held) for x in r]


def test_a_roster_the_tenants_could_write_is_no_roster(world):
    """A roster that is not on a read-only mount could be any tenant's
    word: here it says the 30 side is capped at 90, which taken at its word
    would leave the 70 side 0.10. The interposer takes no roster from a
    writable mount, says so, and the pair splits 30 : 70 as without one."""
    share = {"GPUSLICE_COMPUTE_MODE": "share", "GPUSLICE_LOG_LEVEL": "2"}
    (ra, rb), errs = containers(world, [{**share, "GPUSLICE_SHARE_WEIGHT": "30"},
                                        {**share, "GPUSLICE_SHARE_WEIGHT": "70"}], "agent", secs=5.0, warm=3.0,
                                logs=True, roster=["cap 90", "share 100"], roster_writable=True)
    assert abs(ra - 0.30) <= TOL and abs(rb - 0.70) <= TOL, (ra, rb)
    assert all("not on a read-only mount" in e for e in errs), errs[1][-2000:]


def caps_alone_on_devices(w, caps, secs, warm):
    """Each cap's GPU-bound tenant (2 ms kernels, 4 queued) alone on a device
    of its own, all at once; the work each did over wall time."""
    clients = []
    for d, cap in enumerate(caps):
        c = w.client(env={"GPUSLICE_REGION": str(w.tmp / f"cap{cap}.region"), "GPUSLICE_CORES": str(cap)})
        c.ok(f"init {d}")
        c.ok("kernel 2000")
        clients.append(c)
    r = together(*[(c, "kernel", secs, warm, 4) for c in clients])
    for c in clients:
        c.close()
    return r


def test_caps_60_to_90_hold_on_gpu_bound_tenants(world):
    """Caps above half: four containers capped 60, 70, 80 and 90, each alone
    on a device of its own, at once."""
    caps = (60, 70, 80, 90)
    r = caps_alone_on_devices(world_env(world, GPUSLICE_SIM_DEVICES=len(caps)), caps, 2.0, 0.5)
    assert all(abs(got - cap / 100) <= SPLIT_TOL for got, cap in zip(r, caps)), r


def test_caps_70_and_90_hold_in_work_where_a_duty_cycled_device_clocks_higher(world):
    """The simulated driver's clock model (sim_state.h; 900 W of work fully
    busy against 600 W of headroom): a device held under its power limit by
    a duty cycle clocks higher and does up to 1.21 x the work per busy second
    of one fully busy, as an H100 and an H200 did under caps. The power
    correction charges that: the work came to 0.703 and 0.917-0.918 of the
    device's in two runs (0.700 / 0.900 without the clock model; 0.729-0.735
    and 0.910-0.912 while the simulated driver's draw was its last NVML
    period's, not a mean over the last second), and with
    GPUSLICE_POWER_EXPONENT=0 to 0.819-0.825 and 0.942-0.955. The default
    exponent was fitted on GPUs, not on this model: the bound is 0.05 (0.743
    under cap 70 once on a loaded 2-core CI machine)."""
    caps = (70, 90)
    w = world_env(world, GPUSLICE_SIM_DEVICES=len(caps), GPUSLICE_SIM_POWER_DYN=900)
    r = caps_alone_on_devices(w, caps, 3.0, 1.0)
    print(f"caps {caps}: {r}")
    assert all(abs(got - cap / 100) <= 0.05 for got, cap in zip(r, caps)), r


def test_a_sync_on_a_duty_cycled_device_returns_when_the_faster_work_is_done(world):
    """The simulated driver itself, under the clock model (GPUSLICE_SIM_POWER_DYN
    900): two 1 ms kernels, a sync, 6 ms asleep keep the device about a
    quarter busy, at its highest clock, where work runs 1.21 x as fast as
    fully busy. The sync returns when they are done, after about
    2 / 1.21 = 1.65 ms, as a real device's would. It used to sleep the
    work's time at full speed (2 ms) before it looked: the host saw 17 %
    more busy time than the device did, and a GPU-bound tenant under cap 30
    learnt c 0.84-0.87 and s 1.09 (the model's 1.21) and did 0.34 of the
    device's work."""
    w = world_env(world, GPUSLICE_SIM_POWER_DYN=900)
    c = start(w, 1000, env={"LD_PRELOAD": SIM_CLOCK})
    r = c.ok("burst 2 6000 1.0")
    c.close()
    # What the machine held the thread off its CPU, a burst (on its clock):
    # a loaded CI machine stretched a burst to 1939 us once.
    late = r["run_delay_wall_us"] / SLOW / max(r["bursts"], 1) if r["run_delay_wall_us"] >= 0 else 0.0
    print(f"{r['bursts']} bursts, {r['mean_us']} us each, held off its CPU {late:.0f} us a burst")
    assert 2000 / 1.25 <= r["mean_us"] and r["mean_us"] - late <= 1900, r


def test_a_capped_load_with_cpu_gaps_of_its_own_is_not_charged_a_clock_it_keeps_alone(world):
    """The clock model (GPUSLICE_SIM_POWER_DYN 900: 900 W of work fully
    busy against 600 W of headroom). Bursts of six 1 ms kernels, each burst
    then 4 ms asleep, keep the device about half busy alone: within its
    power limit at the highest clock, as under any cap. So capped at 35 it
    gets its 0.35 of the device's time, no less: as many bursts with the
    power correction (the default) as with it off (GPUSLICE_POWER_EXPONENT
    0). Priced as work that would fill the device alone (the draw of a busy
    second times 1, not times its own busy fraction alone:
    gs_lim_alone_busy), it did 0.564 of its bursts alone against 0.664 with
    the correction off (s about 1.18) at 9decdea; now 0.647-0.649 against
    0.647-0.649."""
    w = world_env(world, GPUSLICE_SIM_POWER_DYN=900)
    solo = start(w, 1000, env={"LD_PRELOAD": SIM_CLOCK})
    alone = solo.ok("burst 6 4000 1.5")
    solo.close()
    rate = {}
    for exp in ("0", "default"):
        env = {"GPUSLICE_CORES": "35", "GPUSLICE_REGION": str(w.tmp / f"exp{exp}.region")}
        if exp != "default":
            env["GPUSLICE_POWER_EXPONENT"] = exp
        c = start(w, 1000, env=env)
        c.ok("burst 6 4000 0.5")  # c and s learnt
        r = c.ok("burst 6 4000 2.5")
        c.close()
        rate[exp] = r["bursts"] / r["elapsed_us"]
    of_alone = {k: v / (alone["bursts"] / alone["elapsed_us"]) for k, v in rate.items()}
    print(f"bursts of alone's: exponent 0 {of_alone['0']:.3f}, default {of_alone['default']:.3f}")
    assert of_alone["0"] < 0.85, of_alone  # the cap held it back
    assert rate["default"] >= 0.95 * rate["0"], of_alone


def capped_around_a_free_neighbour(world, tmp_path, cap, secs):
    """A GPU-bound tenant under `cap` on the clock model (GPUSLICE_SIM_POWER_DYN
    900) runs secs, idles while a GPU-bound neighbour without the interposer
    holds the device at its power limit for 2 s, then runs secs more. Its
    work of the device's before and after, and its debug log's text as it
    stood before the neighbour ran and at the end. Its first second as a
    new container is left out of "before": on a loaded CI machine its first
    outer run came late and, charged s 1 until then, it did 0.336 of the
    device's work over its first 2 s (0.32 unloaded;
    test_a_new_cap_learns_s_at_its_first_run)."""
    w = world_env(world, GPUSLICE_SIM_POWER_DYN=900)
    log = tmp_path / "capped.log"
    capped = start_logged(w, 1000, log, {"GPUSLICE_CORES": str(cap)})
    neighbour = start(w, 1000, env={"LD_PRELOAD": SIM_CLOCK})
    run(capped, "kernel", 1.0, 0.0, 4)
    first = run(capped, "kernel", secs, 0.0, 4)
    log_before = log.read_text()
    run(neighbour, "kernel", 2.0, 0.0, 8)
    after = run(capped, "kernel", secs, 0.0, 4)
    capped.close()
    neighbour.close()
    return first, after, log_before, log.read_text()


def test_a_new_cap_learns_s_at_its_first_run(world, tmp_path):
    """A new GPU-bound tenant capped at 30 on the clock model
    (GPUSLICE_SIM_POWER_DYN 900, where its duty cycle runs 1.21 x as fast
    as fully busy), with NVML's one-second mean draw only (no instantaneous
    field, GPUSLICE_SIM_POWER_INSTANT 0), is charged s 1 until its first
    outer run, 250 ms after its first launch, which only looks where NVML's
    per-process samples end. That run learns s too, against the busy
    fraction of the draw's
    whole second, the idle before the tenant included, and each measure is
    taken whole until its runs cover that second (1.19-1.22 at 250 ms, then
    1.25-1.27, 1.19-1.20, 1.22-1.24, 1.21); the tenant does 0.319-0.325 of
    the device's work in its first second. The device drew 80 W before the
    tenant (the model's unused device, as an H200's), below the busy-idle
    105 W s's formula prices idle time at: priced so, the first s was 1.02
    and the first second 0.337; the draw's part from before the record is
    repriced at what the first look read (gs_lim_power_repriced)."""
    w = world_env(world, GPUSLICE_SIM_POWER_DYN=900, GPUSLICE_SIM_POWER_INSTANT=0)
    log = tmp_path / "capped.log"
    capped = start_logged(w, 1000, log, {"GPUSLICE_CORES": "30"})
    first = run(capped, "kernel", 1.0, 0.0, 4)
    then = run(capped, "kernel", 1.0, 0.0, 4)
    capped.close()
    runs = [(int(o), int(s)) for o, s in re.findall(r"occupancy (\d+) ppm, .*-> (?:c \d+(?: \(not learnt\))? )?s (\d+)",
                                                     log.read_text())]
    learnt = [s for o, s in runs if o >= 100_000]
    print(f"work {first:.3f} of the device's in its first second, {then:.3f} in its second; s {learnt}")
    assert len(learnt) >= 6, runs
    # the median of the later runs: the last alone moved by up to 4 % (1.17
    # after 1.19-1.25 once, on a loaded machine). Within 10 %, not 5: held
    # off its CPU 0.04 of the time in a fresh-clone CI run, the runs read
    # 1.13 / 1.19 / 1.13 / 1.20, the first 5.3 % under their median; the
    # first s priced at 1.02 (the bug) is 14 % under.
    steady = int(statistics.median(learnt[1:]))
    assert steady > 1_100_000, learnt  # the clock model boosts a duty-cycled device
    assert abs(learnt[0] - steady) <= steady // 10, learnt
    assert abs(then - 0.30) <= SPLIT_TOL, then


def test_a_cap_taking_its_turn_after_a_gpu_bound_neighbour_is_not_charged_the_neighbours_draw(world, tmp_path):
    """NVML's power draw is a mean over the last second, its utilisation a
    sample period's (the simulated driver's, as an H200's). A GPU-bound
    tenant capped at 30 runs 3 s (the last 2 measured), idles while a
    GPU-bound neighbour without the interposer holds the device at its power
    limit for 2 s (GPUSLICE_SIM_POWER_DYN 900), then runs 2 s more. Its s prices the
    clock its duty cycle earns (1.19-1.20 here, the model's 1.21). Right
    after the neighbour, the draw still holds the neighbour's second:
    divided by the tenant's own busy time it passed for far more boosted
    work (s 1.28 -> 1.53 at 48efa17; 1.45 on an H200 for a JAX step whose
    clock never moved), divided by the mean busy time of that second it
    mixed the two loads (0.34 of the device's work). s holds until the
    second's mean has come down to the tenant's load (gs_lim_power_tells).
    The run after the neighbour is held to the run before it."""
    first, after, log_before, log_all = capped_around_a_free_neighbour(world, tmp_path, 30, 2.0)
    speed = re.compile(r"-> c \d+(?: \(not learnt\))? s (\d+)")
    s_first = [int(x) for x in speed.findall(log_before)]
    s_after = [int(x) for x in speed.findall(log_all)][len(s_first):]
    print(f"work {first:.3f} of the device's, {after:.3f} after the neighbour; s {s_first} then {s_after}")
    assert max(s_first) > 1_100_000, s_first  # the clock model boosts a duty-cycled device
    # the first reading after the neighbour, at most a second's draw off the
    # tenant's own, reads 1.19-1.21 where the run before it held 1.17-1.20
    # (a loaded CI machine's: 1.211 against 1.187); the fault this guards
    # against read 1.28-1.53
    assert s_after and max(s_after) <= max(s_first) + 35_000, (s_first, s_after)
    assert abs(first - 0.30) <= SPLIT_TOL and abs(after - first) <= SPLIT_TOL, (first, after)


def first_look_speed(log_text):
    """s as a tenant's first look at NVML learnt it (ppm); None without one."""
    m = re.search(r"a first look at NVML's samples .*-> s (\d+)", log_text)
    return int(m.group(1)) if m else None


def test_a_new_cap_takes_its_first_seconds_s_from_the_instantaneous_draw(world, tmp_path):
    """A new GPU-bound tenant capped at 70 on the clock model. NVML's
    one-second mean draw still holds the idle before it through its first
    second (an H100's took 1.0-1.3 s to reach a new load's draw), so learnt
    from it s read 1.03 at the first look, 250 ms in, against a steady
    1.19-1.21, and the tenant did 0.781 of the device's work in its first
    second, 0.070 over the 0.711 of its next. The instantaneous draw
    (NVML_FI_DEV_POWER_INSTANT, which on that H100 reached the draw within
    one 250 ms run), against the run's own busy fraction, gives the first
    look s 1.09 and the first second 0.757-0.763 against 0.699-0.708 in
    the next (what is left: the token bank it starts with, whose burst the
    first look's draw catches at the limit). Against NVML's utilisation
    alone, 0.73 where the container occupied 0.83 of the run, the first
    look read s 1.16 here and 1.54 on an H100, whose first second then did
    0.60 of the device's work (p / u 0.71): the run's busy fraction is at
    least its occupancy. At s 1 through the first second, the overshoot
    would be about 0.13."""
    w = world_env(world, GPUSLICE_SIM_POWER_DYN=900)
    log = tmp_path / "capped.log"
    capped = start_logged(w, 1000, log, {"GPUSLICE_CORES": "70"})
    first = run(capped, "kernel", 1.0, 0.0, 4)
    then = run(capped, "kernel", 1.0, 0.0, 4)
    capped.close()
    s = first_look_speed(log.read_text())
    print(f"work {first:.3f} of the device's in its first second, {then:.3f} in its second; first look's s {s}")
    assert s is not None and s >= 1_060_000, s
    assert first - then <= 0.08, (first, then)


def test_a_cap_taking_its_turn_after_a_neighbour_at_the_power_limit_keeps_the_s_it_learnt(world, tmp_path):
    """A GPU-bound tenant capped at 70 runs 3 s on the clock model
    (GPUSLICE_SIM_POWER_DYN 900), idles while a GPU-bound neighbour without
    the interposer holds the device at its power limit for 2 s, then runs
    2 s more. Over its first second back, NVML's one-second mean of the
    draw still holds the neighbour's: its busy time, 0.6-0.85, is too high
    for the rule of the fallen busy fraction (gs_lim_power_tells) to see
    the mix, and s fell from 1.116 to 1.073 at its first run back and
    climbed back over the next second at 0dd6c22 (1.17 -> 1.09 on an H200,
    each 2.5 s turn of a matmul under cap 70). A reading whose span reaches
    back before the loop woke may raise s, never lower it
    (gs_lim_power_span_ours): s holds 1.200-1.202 through that second. After it,
    s learns from the tenant's own draw both ways again."""
    first, after, log_before, log_all = capped_around_a_free_neighbour(world, tmp_path, 70, 2.0)
    outer = re.compile(r"occupancy (\d+) ppm, waited \d+ us of (\d+).*-> c \d+(?: \(not learnt\))? s (\d+)")
    runs_first = len(outer.findall(log_before))
    runs = [(int(o), int(t), int(x)) for o, t, x in outer.findall(log_all)]
    learnt = runs[runs_first - 1][2]
    back = runs[runs_first:]
    assert back and back[0][1] > 1_000_000, back  # the run back from the idle (its interval in us)
    since, in_span = 0, []
    for occ, interval_us, speed in back[1:]:
        since += interval_us
        if since < 1_000_000:
            in_span.append(speed)
    print(f"work {first:.3f} of the device's, {after:.3f} after the neighbour; s {learnt} learnt, "
          f"{in_span} over the first second back, then {[x for o, t, x in back[1 + len(in_span):]]}")
    assert learnt > 1_050_000, runs  # the clock model boosts a duty-cycled device
    assert in_span and min(in_span) >= learnt, (learnt, in_span)


def test_a_cap_taking_its_turn_after_a_capped_neighbour_of_its_ledger_keeps_its_s(world, tmp_path):
    """Two GPU-bound containers capped at 50 in one state directory (one
    device ledger) take turns on the clock model (GPUSLICE_SIM_POWER_DYN
    900), as bench/compute's capturns has them: a runs, then b, then a
    again. At a's first runs after b stopped, the ledger still counts b as
    active; its last published use (about 0.5) taken whole beside a's own
    made the draw pass for unboosted work, and the run back from the idle,
    its occupancy and waits spread over the idle, passed for a load that
    barely runs: s fell from 1.148-1.150 to 1.028-1.037 at 3babf5b, and a
    did 0.589-0.597 of the device's work in its second turn. b's use now
    counts for the part of a's interval it was active in
    (gs_lim_device_busy) and a slept interval tells s nothing
    (gs_lim_power_tells): s holds 1.20, and a does 0.518-0.520 (b, new, at
    s 1 for its first 250 ms, 0.578 in its 1.5 s). On
    an H200 the matmul's s fell 1.17 -> 1.085 at each turn's start
    (bench/results/compute-2026-12-04.md §3)."""
    w = world_env(world, GPUSLICE_SIM_POWER_DYN=900)
    log = tmp_path / "a.log"
    a = start_logged(w, 1000, log, {"GPUSLICE_REGION": str(w.tmp / "a.region"), "GPUSLICE_CORES": "50"})
    b = start(w, 1000, env={"GPUSLICE_REGION": str(w.tmp / "b.region"), "GPUSLICE_CORES": "50"})
    speed = re.compile(r"occupancy (\d+) ppm.*-> c \d+(?: \(not learnt\))? s (\d+)")
    first = run(a, "kernel", 2.0, 1.0, 4)
    s_first = [(int(o), int(x)) for o, x in speed.findall(log.read_text())]
    theirs = run(b, "kernel", 1.5, 0.0, 4)
    second = run(a, "kernel", 1.5, 0.0, 4)
    a.close()
    b.close()
    s_after = [(int(o), int(x)) for o, x in speed.findall(log.read_text())][len(s_first):]
    steady = s_first[-1][1]
    least = min(x for o, x in s_after if o >= 100_000)
    print(f"a {first:.3f}, b {theirs:.3f}, a again {second:.3f}; s {s_first} then {s_after}")
    assert steady > 1_100_000, s_first  # the clock model boosts a duty-cycled device
    assert least >= steady - 60_000, (steady, s_after)


def test_a_cap_waits_no_drain_of_a_neighbour_whose_idle_thread_keeps_a_window_open(world, tmp_path):
    """Two GPU-bound containers capped at 10 in one state directory take
    turns, as bench/compute's capturns has them: a runs, parks a thread
    with a window open (a PyTorch training process's autograd thread keeps
    one between steps, and for good once the process stops stepping), runs
    on, stops; then b runs. Each of a's windows that closed with work
    pending held the turn for its drain, up to DRAIN_HOLD_NS (1 s), and
    the parked window kept the extension alive past the drain: b waited
    GS_LIM_TURN_WAIT_MAX_NS at each window for a second and did 0.059 of
    the device's work in its first second (0.112 with no parked thread).
    The extension now ends with the drain (gs_ledger_close_window)."""
    w = world_env(world)
    log = tmp_path / "b.log"
    a = start(w, 1000, env={"GPUSLICE_REGION": str(w.tmp / "a.region"), "GPUSLICE_CORES": "10"})
    b = start_logged(w, 1000, log, {"GPUSLICE_REGION": str(w.tmp / "b.region"), "GPUSLICE_CORES": "10"})
    run(a, "kernel", 1.5, 0.5, 4)
    a.ok("park")
    run(a, "kernel", 0.5, 0.0, 4)
    first = run(b, "kernel", 1.0, 0.0, 4)
    a.close()
    b.close()
    waits = [int(x) for x in re.findall(r"a window waits up to (\d+) us", log.read_text())]
    print(f"b's first second {first:.3f}; its turn waits (bound, us): {waits[:12]}")
    assert first >= 0.085, waits
    assert not [x for x in waits if x > 100_000], waits


def forge_members(ledgers, count, held, claim=0, low=False, pid=None):
    """Takes `count` free member slots of each device ledger as a live
    process would (a lock on the slot's byte, 1 MiB + 1 + slot: ledger.c's
    SLOT_OFF, held through a descriptor kept in `held`) and writes each a
    member of its own container: weight 65535, use 1e6 ppm, active and
    wanting more for ever, and with a claim, asking for the turn frame's
    slots for ever (struct gs_ledger_member, ledger.h: container at +0,
    active_ns +8, wants_ns +16, asked_ns +24, pid +32, open +36, weight +40,
    use +44, claim +48, draining +52 (0); 64 bytes, hold_ns at +56 left as it
    was), from the highest slot down, or with low
    from slot 0 up; each names pid (this process by default). Returns how
    many it forged."""
    n = 0
    for f in ledgers.glob("*.ledger"):
        fd = os.open(f, os.O_RDWR)
        held.append(fd)
        b = os.pread(fd, LEDGER_SIZE, 0)
        for slot in range(MEMBERS) if low else range(MEMBERS - 1, -1, -1):
            if n == count or len(b) != LEDGER_SIZE:
                break
            if struct.unpack_from("<Q", b, member_at(slot))[0]:
                continue
            try:
                fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB, 1, (1 << 20) + 1 + slot)
            except OSError:
                continue
            os.pwrite(fd, struct.pack("<QQQQiIIIII", 0xF0F6ED00 + slot, 1 << 62, 1 << 62, (1 << 62) if claim else 0,
                                      pid or os.getpid(), 0, 65535, 1_000_000, claim, 0), member_at(slot))
            n += 1
    return n


@pytest.mark.parametrize("layout", ["flat", "agent"])
def test_forged_ledger_members_cost_two_share_tenants_at_most_one_default_container(world, request, layout):
    """Issue 27, finding 4: a third tenant takes free member slots of the
    device ledger and writes members of weight 65535 that use the whole GPU
    and always want more. Taken at their word they held two share tenants
    30 : 70 to 0.0 / 0.0. A member counts with the weight its container's
    limits give it where those can be read (the flat layout: its region
    beside ours, with a live process), and what cannot be verified counts as
    one container of the default weight at most, however many members it
    forges (the agent's layout) or, where every honest member is verifiable,
    not at all (gs_lim_trusted_demands). So the pair keeps 30 : 70 in the
    flat layout, and in the agent's at least what it would keep beside one
    more container of weight 100 that wants more (0.15 / 0.35)."""
    forged, held = [], []

    def forger(ledgers):
        end = time.monotonic() + 6.5 * SLOW
        while time.monotonic() < end and not forged:
            n = forge_members(ledgers, 8, held)
            if n:
                forged.append(n)
            sim_sleep(0.05)

    share = {"GPUSLICE_COMPUTE_MODE": "share"}
    try:
        ra, rb = two_containers(world, {**share, "GPUSLICE_SHARE_WEIGHT": "30"},
                                {**share, "GPUSLICE_SHARE_WEIGHT": "70"}, layout, secs=4.0, warm=2.0,
                                hostile=forger)
    finally:
        for fd in held:
            os.close(fd)
    assert forged == [8], forged  # the forged members were in the ledger
    if layout == "flat":
        assert abs(ra - 0.30) <= TOL and abs(rb - 0.70) <= TOL, (ra, rb)
        assert ra + rb >= 0.93, (ra, rb)
    else:
        assert ra >= 0.15 - TOL and rb >= 0.35 - TOL, (ra, rb)


def test_a_hundred_forged_members_before_them_hide_no_share_tenant_from_the_other(world, tmp_path):
    """A tenant lays out device 0's ledger in the flat layout's directory
    before anyone and fills its first 100 member slots with members of 100
    containers. The outer loop read the first 64 containers only: the share
    pair 30 : 70, in slots past them, never saw each other and both ran
    free (0.35 / 0.35). Every member is read now; the forged ones, nothing
    verifies, count for nothing beside the regions, and the pair splits."""
    lay_out_ledger(tmp_path)
    held = []
    try:
        assert forge_members(tmp_path, 100, held, low=True) == 100
        share = {"GPUSLICE_COMPUTE_MODE": "share"}
        ra, rb = two_containers(world, {**share, "GPUSLICE_SHARE_WEIGHT": "30"},
                                {**share, "GPUSLICE_SHARE_WEIGHT": "70"}, "flat", secs=4.0, warm=2.0,
                                GPUSLICE_SIM_SWITCH_LOSS=30)
    finally:
        for fd in held:
            os.close(fd)
    print(f"shares 30:70 behind 100 forged members: {ra:.3f} / {rb:.3f}")
    assert abs(ra - 0.30) <= TOL and abs(rb - 0.70) <= TOL, (ra, rb)


def wake_storm(ledgers, until, wakes):
    """Bumps device 0's ledger's turn word (struct gs_ledger_file, ledger.h:
    byte 16) and wakes every process waiting on it, as fast as it can,
    until the monotonic clock reads until; counts its wakes into wakes."""
    import ctypes
    import mmap
    libc = ctypes.CDLL(None, use_errno=True)
    path = ledgers / (SIM_UUID.format(0) + ".ledger")
    while not path.exists() and time.monotonic() < until:
        time.sleep(0.01)
    with open(path, "r+b") as fh:
        mm = mmap.mmap(fh.fileno(), LEDGER_SIZE)
        word = ctypes.c_uint32.from_buffer(mm, 16)
        n = 0
        while time.monotonic() < until:
            word.value += 1
            libc.syscall(202, ctypes.addressof(word), 1, 0x7FFFFFFF, None, None, 0)  # futex(FUTEX_WAKE)
            n += 1
        del word
        mm.close()
    wakes.append(n)


def test_a_tenant_that_wakes_the_turn_waiters_for_ever_gets_each_no_more_than_a_look_a_tenth_of_a_ms(world):
    """Any tenant that can write a GPU's ledger can bump its turn word and
    wake every window waiting for the turn, as often as it likes: each wake
    was a look at the ledger under its lock, so a pair capped 30 / 70
    spun through its waits. A waiting window woken early twice in a row
    with the turn still another's looks again at most every
    GS_LIM_TURN_LOOK_NS (0.1 ms) now, however often it is woken."""
    wakes = []
    share = {"GPUSLICE_LOG_LEVEL": "3"}
    ra, rb, ea, eb = two_containers(world, {**share, "GPUSLICE_CORES": "30"}, {**share, "GPUSLICE_CORES": "70"},
                                    "agent", secs=2.0, warm=1.0, logs=True, GPUSLICE_SIM_SWITCH_LOSS=30,
                                    hostile=lambda d: wake_storm(d, time.monotonic() + 3.0 * SLOW, wakes))
    looks = [re.search(r"compute limiter cost: (\d+) waits for the turn between two looks.*?, ([\d.]+) ms in all", e)
             for e in (ea, eb)]
    turns = [re.search(r"compute limiter cost: (\d+) windows that waited for another container's turn", e)
             for e in (ea, eb)]
    print(f"caps 30 / 70 beside {wakes} wakes: {ra:.3f} / {rb:.3f}; looks "
          f"{[(m.group(1), m.group(2)) if m else None for m in looks]}, windows that waited "
          f"{[m.group(1) if m else None for m in turns]}")
    assert wakes and wakes[0] > 10000, wakes
    assert all(looks) and all(turns), (ea[-3000:], eb[-3000:])
    for m, t in zip(looks, turns):
        n, ms = int(m.group(1)), float(m.group(2))
        # at most one look per 0.1 ms waited; a window's first early wake and
        # its last look may come sooner
        assert n <= ms / 0.1 + 2 * int(t.group(1)), (n, ms, t.group(1))


@pytest.mark.parametrize("layout", ["flat", "agent"])
def test_forged_turn_claims_leave_two_capped_tenants_their_slots(world, layout):
    """A third tenant takes free member slots of the device ledger and
    writes members that ask for the turn frame's slots for ever, each
    claiming the whole GPU. Taken at their word, they held a pair capped
    30 / 70, which waits for its slots, to its claims' part of nine GPUs'.
    Claims nobody verified now share only what the verified ones leave of
    the frame (gs_turn_trusted_claims), and the pair, each verifying the
    other (by its region in the flat layout, by the node's roster in the
    agent's), keeps 30 / 70."""
    forged, held = [], []

    def forger(ledgers):
        end = time.monotonic() + 6.5 * SLOW
        while time.monotonic() < end and not forged:
            n = forge_members(ledgers, 8, held, claim=1_000_000)
            if n:
                forged.append(n)
            sim_sleep(0.05)

    try:
        ra, rb = two_containers(world, {"GPUSLICE_CORES": "30"}, {"GPUSLICE_CORES": "70"}, layout, secs=3.0,
                                warm=1.0, hostile=forger, roster=["cap 30", "cap 70"], GPUSLICE_SIM_SWITCH_LOSS=30)
    finally:
        for fd in held:
            os.close(fd)
    print(f"caps 30 / 70 beside 8 forged claims of the GPU, {layout}: {ra:.3f} / {rb:.3f}")
    assert forged == [8], forged
    assert abs(ra - 0.30) <= TOL and abs(rb - 0.70) <= TOL, (ra, rb)


def test_two_share_containers_of_an_mps_daemon_split_30_70(world):
    """Clients of an MPS daemon run at once, and NVML's per-process samples
    name only the server (GPUSLICE_SIM_MPS, as an H100 gave them). The
    server's samples are the clients' time, theirs among it: counted as a
    third tenant of weight 100 it held the pair to 0.15 / 0.35 on an H100
    (bench/results/mps-share-2026-11-26-h100.md), as it did here before."""
    share = {"GPUSLICE_COMPUTE_MODE": "share"}
    ra, rb = two_containers(world, {**share, "GPUSLICE_SHARE_WEIGHT": "30"},
                            {**share, "GPUSLICE_SHARE_WEIGHT": "70"}, "flat", secs=4.0, warm=2.0,
                            GPUSLICE_SIM_MPS=1)
    assert abs(ra - 0.30) <= TOL and abs(rb - 0.70) <= TOL, (ra, rb)
    assert ra + rb >= 0.93, (ra, rb)


def test_a_lone_share_client_of_an_mps_daemon_running_free_publishes_its_use(world):
    """A share container alone runs free (no windows). As a client of an
    MPS daemon its time is in the server's samples (GPUSLICE_SIM_MPS), so
    NVML's 0 for its pids is no measure: it publishes the device's busy
    time. It published 0, and a neighbour that woke read a container that
    used nothing and took the whole device for a run or two."""
    w = world_env(world, GPUSLICE_COMPUTE_MODE="share", GPUSLICE_SHARE_WEIGHT=70, GPUSLICE_SIM_MPS=1)
    c = start(w, 1000)
    seen = []

    def watch():
        end = time.monotonic() + 2.0 * SLOW
        while time.monotonic() < end:
            dev = top(w.region)["containers"][0]["devices"][0]
            if dev["compute_allowed_ppm"] == 1000000 and dev["compute_used_ppm"] is not None:
                seen.append(dev["compute_used_ppm"])
            time.sleep(0.1 * SLOW)

    th = threading.Thread(target=watch)
    th.start()
    ratio = run(c, "kernel", 2.5, 0.0, 8)
    th.join()
    c.close()
    print(f"running free: ratio {ratio:.3f}, uses published {seen}")
    assert ratio >= 0.95, ratio
    # the first looks publish nothing yet; its second half has NVML's readings
    assert len(seen) >= 8 and min(seen[len(seen) // 2:]) >= 800000, seen


def test_an_mps_client_capped_at_10_beside_a_busy_neighbour_gets_10(world):
    """A client of an MPS daemon capped at 10 runs its windows at about a
    tenth of occupancy, under the fifth that rules NVML's 0 for our pids
    out as a measure. NVML's samples name only the server
    (GPUSLICE_SIM_MPS), and their 0 for us was taken as a measure: c was
    never learnt, and once a busy neighbour time-sliced with it, its waits
    for the device were charged as use (0.050 here). An MPS server busy in
    the samples makes them no measure of us in every mode (pids_hidden):
    c is learnt from the device, 1 alone and about 0.5 beside the
    neighbour."""
    w = world_env(world, GPUSLICE_SIM_MPS=1)
    a = start(w, 1000, env={"GPUSLICE_REGION": str(w.tmp / "a.region"), "GPUSLICE_CORES": "10"})
    b = start(w, 1000, env={"GPUSLICE_REGION": str(w.tmp / "b.region")})
    out = {}
    th = threading.Thread(target=lambda: out.update(a=run(a, "kernel", 3.5, 2.0, 8)))
    th.start()
    sim_sleep(1.0)  # alone first
    rb = run(b, "kernel", 2.5, 1.0, 8)
    th.join()
    a.close()
    b.close()
    print(f"capped 10 beside a busy neighbour, MPS samples: {out['a']:.3f} / {rb:.3f}")
    assert abs(out["a"] - 0.10) <= 0.025, out["a"]


def test_lone_share_tenant_uses_the_whole_gpu(world):
    c = start(world_env(world, GPUSLICE_COMPUTE_MODE="share", GPUSLICE_SHARE_WEIGHT=10), 1000)
    ratio = run(c, "kernel", 1.0, 0.2, 8)
    c.close()
    assert ratio >= 0.95, ratio


def test_share_tenant_takes_the_gpu_back_within_a_second_when_the_other_stops(world):
    w = world_env(world, GPUSLICE_COMPUTE_MODE="share")
    a = start(w, 1000, env={"GPUSLICE_REGION": str(w.tmp / "a.region"), "GPUSLICE_SHARE_WEIGHT": "30"})
    b = start(w, 1000, env={"GPUSLICE_REGION": str(w.tmp / "b.region"), "GPUSLICE_SHARE_WEIGHT": "70"})
    # a runs 4 s and is measured over its last 1.5 s; b runs only the first 1.5 s
    late, rb = together((a, "kernel", 4.0, 2.5, 8), (b, "kernel", 1.5, 0.5, 8))
    a.close()
    b.close()
    assert rb <= 0.80, rb  # b was held to its share while a competed
    assert late >= 0.90, late


def test_cap_holds_across_idle_and_busy_phases(world):
    """An idle second must not bank a second of budget: after it the cap
    holds again at once (at most one period of burst)."""
    c = start(world_env(world, GPUSLICE_CORES=50), 1000)
    first = run(c, "kernel", 1.0, 0.0, 8)
    c.ok("idle 1.0")
    second = run(c, "kernel", 1.0, 0.0, 8)
    c.close()
    assert abs(first - 0.50) <= 0.06 and abs(second - 0.50) <= 0.06, (first, second)


def test_a_thread_per_kernel_is_held_to_its_cap(world):
    """Each thread's last window is charged when the thread ends. A thread
    that launched one kernel, waited and exited was never charged: a new
    thread per 20 ms kernel ran at 0.99 of the device under cap 10."""
    c = start(world_env(world, GPUSLICE_CORES=10), 20000)
    ratio = c.ok("threads 12")["ratio_ppm"] / 1e6
    c.close()
    assert ratio <= 0.15, ratio  # the cap, plus the first window's allowance


def test_kernels_named_as_collectives_are_held_once_their_container_owes_much(world):
    """A collective is never held back by windows (its peers would spin for
    it), so a tenant whose kernels all carried NCCL's names was charged but
    never waited: 1.0 of the device under cap 10. Its launches wait while
    the container owes more than four periods."""
    c = start(world_env(world, GPUSLICE_CORES=10), 0)
    c.ok("kernel 2000 nccl")
    ratio = run(c, "kernel", 2.0, 0.0, 4)
    c.close()
    assert ratio <= 0.3, ratio  # the cap, and the four periods it may owe


def test_threads_that_end_leave_no_events_behind(world):
    """A thread's limiter events are destroyed with it: each left six, and
    after about 700 threads the program could make no event of its own (the
    simulated driver holds 4096)."""
    c = start(world_env(world, GPUSLICE_CORES=90), 10)
    r = c.ok("threads 800")
    c.close()
    assert r["event_rc"] == 0, r


def test_a_process_per_kernel_is_held_to_its_cap_and_owes_its_debt_after_a_pause(world):
    """A process's last window is charged at its exit, and what the
    container owes outlives its processes: a process that ran a 200 ms
    kernel under cap 10 leaves 2 s of debt; the next one, 1.2 s later (past
    the second after which an account counts as left over), waits for the
    rest. Before, the first kernel was never charged, and a left-over
    account was reset to a full burst."""
    w = world_env(world, GPUSLICE_CORES=10)
    first = start(w, 200000)
    first.ok("burst 1 0 0.000001")
    first.close()
    sim_sleep(1.2)
    second = start(w, 1000)
    waited = second.ok("burst 1 0 0.000001")["mean_us"] / 1e6
    second.close()
    assert waited >= 0.5, waited  # 0.8 s of debt left, less the start's allowance


def test_a_capped_tenant_that_idles_beside_a_busy_neighbour_resumes_at_its_cap(world):
    """A window still open when its tenant goes idle closes at the tenant's
    next launch, and its drain may wait: here for the busy neighbour's
    slice (the drain's event, recorded on an idle stream, is stamped when
    our slice begins). Taken for our work still running, that wait charged
    the whole idle gap: an H200 put a matmul loop capped at 30 that idled
    71-124 s beside a decoder that much in debt, and it made no step for
    the rest of the run (bench/results/compute-2026-12-01.md). Its markers
    say its work ended before the gap."""
    w = world_env(world, GPUSLICE_CORES=30, GPUSLICE_SIM_TIMESLICE_US=2000)
    capped = start(w, 1000)
    neighbour = start(w, 1000, env={"LD_PRELOAD": SIM_CLOCK})
    run(capped, "kernel", 0.5, 0.0, 8)
    busy = threading.Thread(target=run, args=(neighbour, "kernel", 3.0, 0.0, 8))
    busy.start()
    sim_sleep(1.5)
    resumed = run(capped, "kernel", 1.0, 0.0, 8)
    busy.join()
    capped.close()
    neighbour.close()
    assert resumed >= 0.20, resumed


def test_a_share_tenant_back_from_idle_counts_no_gpu_user_that_stopped_while_it_idled(world):
    """The first outer run after an idle reads NVML's samples of the whole
    idle: they say who used the GPU while the tenant idled, not who uses it
    now. Counted as busy users outside the ledger, a process that had
    stopped cut a share container of weight 70 to 70 / 170 of the GPU until
    the next run (on an H200, a decoder back for its turn after free
    tenants' turns, in 7 of its 60 runs, waiting for tokens and then for
    the training's turns)."""
    w = world_env(world, GPUSLICE_COMPUTE_MODE="share", GPUSLICE_SHARE_WEIGHT=70, GPUSLICE_LOG_LEVEL=3)
    tenant = start(w, 1000)
    other = start(w, 1000, env={"LD_PRELOAD": SIM_CLOCK})  # no interposer: outside the ledger
    run(tenant, "kernel", 0.5, 0.0, 8)
    run(other, "kernel", 1.5, 0.0, 8)
    other.close()
    sim_sleep(0.2)  # past NVML's 100 ms sample period: no sample after the resume holds the other's time
    resumed = run(tenant, "kernel", 1.0, 0.0, 8)
    err = tenant.close()
    print(f"resumed {resumed:.3f}, waited {waited_s(w.region):.3f} s")
    assert "share mode" not in err, err[-3000:]  # alone all along: it ran free, its target never moved
    assert waited_s(w.region) == 0, err[-3000:]
    assert resumed >= 0.95, resumed


def share_tenant_beside_outsiders(world, weight, us, secs, depth, outsiders=1, env=None, hostile=None):
    """A share container of weight (logging at debug level) launching us
    kernels for secs at depth, beside `outsiders` processes without the
    interposer (outside the ledger) busy 0.5 s longer, and hostile(ledger
    directory, the outsiders' pids) run beside them; the container's log."""
    w = world_env(world, GPUSLICE_COMPUTE_MODE="share", GPUSLICE_SHARE_WEIGHT=weight, GPUSLICE_LOG_LEVEL=3)
    tenant = start(w, us, env=env)
    others = [start(w, 1000, env={"LD_PRELOAD": SIM_CLOCK}) for _ in range(outsiders)]
    busy = [threading.Thread(target=run, args=(o, "kernel", secs + 0.5, 0.0, 8)) for o in others]
    if hostile:
        busy.append(threading.Thread(target=hostile, args=(w.tmp, [o.p.pid for o in others])))
    for t in busy:
        t.start()
    run(tenant, "kernel", secs, 0.0, depth)
    for t in busy:
        t.join()
    err = tenant.close()
    for o in others:
        o.close()
    return err


def test_a_share_tenant_running_free_and_launching_rarely_counts_a_gpu_user_outside_the_ledger(world):
    """Running free, a share container runs its outer loop only at a
    launch: one that launches under twice a second (300 ms kernels, one at
    a time, each about 600 ms beside the other) runs it that often, so every
    interval looks like an idle. It worked through them (NVML shows its pids
    busy), so a process outside the ledger that is busy beside it counts
    (weight 100 against its 70); taken for idles, none ever did and it
    stayed free (so did a tenant of 10 ms kernels when the loop ran every 64
    launches)."""
    err = share_tenant_beside_outsiders(world, 70, 300000, 5.0, 1)
    assert "and outside the ledger" in err, err[-3000:]


def test_busy_gpu_users_outside_the_ledger_weigh_one_container_however_many_processes_they_are(world):
    """Pids outside the ledger that no region beside ours names cannot be
    told apart by container: counted one default container each, a party
    that ran its work as three processes without the interposer held a
    share container of weight 100 to a target of 100 / 400 of the GPU
    (and one that forked 64 to 100 / 6500). They weigh one container of
    weight 100 together."""
    err = share_tenant_beside_outsiders(world, 100, 1000, 2.5, 8, outsiders=3)
    targets = [int(m) for m in re.findall(r"share mode on \S+: target (\d+) ppm .*and outside the ledger", err)]
    print(f"targets beside the outside users: {targets}")
    assert targets, err[-3000:]
    assert min(targets) >= 400000, targets


def test_a_forged_member_naming_a_busy_process_outside_the_ledger_does_not_hide_it(world):
    """A tenant writes a ledger member that names the pid of a busy process
    outside the ledger. The share container took NVML's samples of that pid
    for a ledger member's, counted there, and beside the regions an
    unverified member counts for nothing: the process was counted nowhere
    and the container ran free beside it. A pid counts as the ledger's only
    where its member's container is verified."""
    forged, held = [], []

    def forger(ledgers, pids):
        end = time.monotonic() + 3.0 * SLOW
        while time.monotonic() < end and not forged:
            if forge_members(ledgers, 1, held, pid=pids[0]):
                forged.append(pids[0])
            sim_sleep(0.05)

    try:
        err = share_tenant_beside_outsiders(world, 70, 1000, 3.0, 8, hostile=forger)
    finally:
        for fd in held:
            os.close(fd)
    assert forged, "no ledger to forge a member in"
    assert "and outside the ledger" in err, err[-3000:]


def test_an_nvml_that_failed_to_start_is_tried_again(world):
    """The tenant's first nvmlInit fails (GPUSLICE_SIM_NVML_INIT_FAILS=1): a
    process that gave NVML up at once never counted a busy user outside the
    ledger, and a share container ran free beside it. Tried again 2 s
    later, it counts one."""
    err = share_tenant_beside_outsiders(world, 100, 1000, 4.0, 8, env={"GPUSLICE_SIM_NVML_INIT_FAILS": "1"})
    assert "NVML unavailable" in err, err[-3000:]
    assert "NVML available: " in err, err[-3000:]
    assert "and outside the ledger" in err, err[-3000:]


def test_node_view_shows_compute_use_against_the_limit(world):
    import json
    import subprocess
    from conftest import CLI
    w = world_env(world, GPUSLICE_CORES=30, GPUSLICE_CONTAINER="capped")
    c = start(w, 1000)
    ratio = run(c, "kernel", 1.5, 0.0, 8)
    doc = json.loads(subprocess.run([CLI, "top", "--json", w.region], check=True, capture_output=True,
                                    text=True).stdout)
    table = subprocess.run([CLI, "top", w.region], check=True, capture_output=True, text=True).stdout
    c.close()
    dev = doc["containers"][0]["devices"][0]
    assert dev["compute_mode"] == "cap" and dev["compute_limit_percent"] == 30, dev
    assert abs(dev["compute_used_ppm"] / 1e6 - ratio) <= 0.08, (dev, ratio)
    assert dev["compute_charged_ns"] >= 0.3 * 1.2e9, dev
    proc = doc["containers"][0]["processes"][0]
    assert proc["compute_charged_ns"] > 0 and proc["compute_waited_ns"] > 0, proc
    assert "COMPUTE" in table and "%/30%cap" in table, table


def test_graph_capture_under_a_cap_survives_and_the_graph_is_throttled(world):
    """A capture spanning several windows (launches 3 ms apart under a cap of
    40): the limiter must not record, query or synchronise on the capturing
    stream (the simulated driver, like the real one, then invalidates the
    capture), and the captured graph is throttled at cuGraphLaunch."""
    c = start(world_env(world, GPUSLICE_CORES=40), 1000)
    run(c, "kernel", 0.3, 0.0, 4)  # windows are open and their cost per launch known
    r = c.cmd("capture 30 3000 0")
    assert r["rc"] == 0 and r["begin_rc"] == 0 and r["launch_rc"] == 0 and r["end_rc"] == 0, r
    ratio = run(c, "graph", 1.5, 0.5, 1)  # one graph launch = 30 ms of work
    c.close()
    assert abs(ratio - 0.40) <= 0.07, ratio


@pytest.mark.parametrize("mode", [0, 1])
def test_global_capture_in_one_thread_while_another_is_throttled(world, mode):
    """While one thread captures in global mode, no thread of the process may
    synchronise or query events; the other thread keeps launching (its
    windows end during the capture) and must not break the capture.
    Thread-local mode (1) is the control: the limiter may not break it either."""
    c = start(world_env(world, GPUSLICE_CORES=30), 500)
    run(c, "kernel", 0.3, 0.0, 4)
    r = c.cmd(f"capture 40 2500 {mode} 1")
    assert r["rc"] == 0 and r["begin_rc"] == 0 and r["launch_rc"] == 0 and r["end_rc"] == 0, r
    assert r["bg_launches"] > 0 and r["bg_rc"] == 0, r
    after = run(c, "kernel", 1.0, 0.3, 4)  # and the cap holds again afterwards
    c.close()
    assert abs(after - 0.30) <= TOL, after


def light_beside_heavy(w, light, heavy, layout="flat", report=False):
    """light = (kernel us, env, burst command), heavy = (env, secs, warm): a
    light container bursting beside a GPU-bound one (1 ms kernels, 8 queued),
    each its own region; the light one's burst reply, the heavy
    one's ratio and the seconds the limiter made the light one wait. layout
    as in lay_out(). report: the light one's cost report at exit
    (cost_count) as a fourth value."""
    us, lenv, cmd = light
    henv, secs, warm = heavy
    wrap, (lplace, hplace) = lay_out(w, ["light", "heavy"], layout)
    verbose = {"GPUSLICE_LOG_LEVEL": "3"} if report else {}
    a = start(w, us, env={**lplace, **verbose, **lenv}, wrap=wrap)
    b = start(w, 1000, env={**hplace, **henv}, wrap=wrap)
    out = {}

    def go():
        out["light"] = a.ok(cmd)

    th = threading.Thread(target=go)
    th.start()
    ratio = run(b, "kernel", secs, warm, 8)
    th.join()
    light_waited = waited_s(lplace["GPUSLICE_REGION"])
    err = a.close()
    b.close()
    return (out["light"], ratio, light_waited, err) if report else (out["light"], ratio, light_waited)


def test_a_light_tenant_beside_a_gpu_bound_one_waits_behind_none_of_its_windows(world):
    """Light (10 % busy, cap 70) beside GPU-bound (cap 30), separate
    containers: the light one is under its cap, takes no turn and is never
    made to wait; its bursts complete within 2x alone plus one of the other's
    kernels (1 ms) on the simulated device, which time-slices evenly."""
    w = world_env(world)
    solo = start(w, 50, env={"GPUSLICE_REGION": str(w.tmp / "solo.region"), "GPUSLICE_CORES": "70"})
    alone = solo.ok("burst 20 9000 1.0")
    solo.close()
    lr, heavy, light_waited = light_beside_heavy(w, (50, {"GPUSLICE_CORES": "70"}, "burst 20 9000 3.0"),
                                                 ({"GPUSLICE_CORES": "30"}, 3.0, 0.5))
    print(f"light beside heavy: mean {lr['mean_us']} us (alone {alone['mean_us']}), heavy {heavy:.3f}, "
          f"light waited {light_waited:.3f} s")
    assert light_waited <= 0.05 * lr["elapsed_us"] / 1e6, (light_waited, lr)
    assert heavy <= 0.30 + TOL, heavy
    # bound on the simulated device: 2x alone's mean plus one 1 ms kernel in flight, + scheduling slack
    assert lr["mean_us"] <= 2 * alone["mean_us"] + 1000 + 1000, (lr, alone)


@pytest.mark.parametrize("timeslice_us,layout", [(0, "flat"), (2000, "flat"), (2000, "agent")])
def test_a_decoder_like_share_tenant_is_charged_its_kernels_not_its_cpu_gaps(world, timeslice_us, layout):
    """A decoder's small kernels with CPU gaps shorter than the 100 us probe
    between them (10 us kernels, 40 us of CPU work between launches: ~20 %
    busy), weight 70, beside a GPU-bound tenant of weight 30, with NVML's
    per-process samples as an H100 gave them (snapshot). Share mode is
    work-conserving: the light one is never held back and the heavy one gets
    what it leaves. On an H100 a transformers decoder charged its gaps
    published ~0.7 of the GPU and held the training tenant to 0.61; here the
    heavy one got 0.28 that way. Bounds a loaded machine cannot break: the
    heavy tenant's deep queue keeps the device busy whatever the CPU does, and
    a slower light tenant uses less.

    timeslice_us=2000: the device runs one process at a time in 2 ms slices,
    as an H100 does (GPUSLICE_SIM_TIMESLICE_US): the light one's events stay
    open while its kernels wait for the other's slice, so it counts the
    other's time too. Counted in full, it went over its share of 70 and
    waited, and the GPU-bound one was held to 0.42-0.50 (an H100: training
    0.51 beside a decoder). Share containers that do not take turns split
    what both counted beyond the device's busy time, and an interval of a
    share container beside others ends where its events say, not at its
    last launch: an event waits for its context's slice (as on an H200).
    Before the simulated driver made events wait for their slice it crossed
    its share in about half the runs and the heavy one got 0.53-0.58.

    On the time-slicing device both layouts, one state directory (gpuslice
    run) and the node agent's (own state directories and pid namespaces, one
    ledger directory), give the light one the same outcome: it never waits
    for the heavy one's turn (on an H200 a decoder of weight 70 beside
    training of weight 30 in one directory ran at 0.69-0.71 of alone,
    0.92-0.99 in the agent's layout)."""
    share = {"GPUSLICE_COMPUTE_MODE": "share"}
    w = world_env(world, GPUSLICE_SIM_NVML_SNAPSHOT=1, GPUSLICE_SIM_TIMESLICE_US=timeslice_us)
    lr, heavy, light_waited, err = light_beside_heavy(
        w, (10, {**share, "GPUSLICE_SHARE_WEIGHT": "70"}, "burst 16 0 5.0 40"),
        ({**share, "GPUSLICE_SHARE_WEIGHT": "30"}, 5.0, 1.5), layout, report=True)
    turn_waits = cost_count(err, "windows that waited for another container's turn")
    print(f"decoder beside heavy: heavy {heavy:.3f}, light waited {light_waited:.3f} s, turn waits {turn_waits}")
    assert light_waited <= 0.05 * lr["elapsed_us"] / 1e6, (light_waited, lr)
    assert heavy >= 0.75, (heavy, lr)
    assert cost_count(err, "gap probes") is not None, err[-2000:]  # the report is there
    # the NVML reads split by call, a share container's process lists among them
    for part in ("NVML device readings", "NVML process lists", "NVML per-process sample reads"):
        assert cost_count(err, part), (part, err[-2000:])
    assert not turn_waits, err[-2000:]


@pytest.mark.parametrize("layout", ["flat", "agent"])
def test_a_decoder_like_share_tenant_starting_beside_a_busy_one_never_wants_more(world, layout):
    """A decoder-like tenant of weight 70 starts beside a GPU-bound one of
    weight 30 that has run for a second (the device busy, the neighbour
    wanting more). Its first outer run runs free and finds the neighbour:
    the device's busy time there is the neighbour's. Published as its own,
    it wanted more at once; held to its part (0.70) and charged its kernels'
    waits for the neighbour's slices before the overlap split was learnt, it
    waited for tokens and so wanted more again. The neighbour was held to
    0.30 (here 0.35-0.39 s of waits; on an H100 the decoder then waited up
    to 150 ms for the neighbour's turns). The decoder is under its weight's
    part: it never wants more, and is not held itself."""
    share = {"GPUSLICE_COMPUTE_MODE": "share"}
    w = world_env(world, GPUSLICE_SIM_NVML_SNAPSHOT=1, GPUSLICE_SIM_TIMESLICE_US=2000)
    wrap, (lplace, hplace) = lay_out(w, ["light", "heavy"], layout)
    heavy = start(w, 1000, env={**hplace, **share, "GPUSLICE_SHARE_WEIGHT": "30", "GPUSLICE_LOG_LEVEL": "3"}, wrap=wrap)
    out = {}
    th = threading.Thread(target=lambda: out.update(ratio=run(heavy, "kernel", 4.0, 1.0, 8)))
    th.start()
    sim_sleep(1.5)
    light = start(w, 10, env={**lplace, **share, "GPUSLICE_SHARE_WEIGHT": "70", "GPUSLICE_LOG_LEVEL": "3"}, wrap=wrap)
    lr = light.ok("burst 16 0 2.0 40")
    waited = waited_s(lplace["GPUSLICE_REGION"])
    err = light.close()
    th.join()
    heavy_waited = waited_s(hplace["GPUSLICE_REGION"])
    herr = heavy.close()
    # the neighbour's share targets, each with the others it saw ("70/990000+":
    # the decoder at 0.99, wanting more). Its waits are printed, not bounded:
    # on a loaded machine it waited 0.18-0.19 s in 2 of 26 runs with the
    # decoder wanting more in none of its targets (a third target, unread)
    targets = [line for line in herr.splitlines() if "share mode on" in line]
    wanting = [line for line in targets if re.search(r"\b70/\d+\+", line)]
    print(f"a decoder starting beside a busy neighbour: it waited {waited:.3f} s, the neighbour "
          f"{heavy_waited:.3f} s (ratio {out['ratio']:.3f}); it wanted more in {len(wanting)} of the "
          f"neighbour's {len(targets)} targets")
    print("\n".join(targets))
    assert not wanting, targets
    assert not cost_count(err, "windows that waited for another container's turn"), err[-3000:]
    assert waited <= 0.05 * lr["elapsed_us"] / 1e6, (waited, lr)


def cost_count(err, what):
    """How many times the limiter did `what`, from its cost report at exit
    (GPUSLICE_LOG_LEVEL=3); None where the report has no such line."""
    m = re.search(r"compute limiter cost: (\d+) " + re.escape(what), err)
    return int(m.group(1)) if m else None


def decoder_beside(w, other, job, lead_s, cap, burst, warm=None):
    """Runs job(other) in a thread; lead_s later (the other is an active
    ledger member by then) a decoder-like tenant (10 us kernels) capped at
    cap runs the warm command, if any, then the burst command, with its cost
    report on. Returns its burst reply, its stderr, what job returned, and
    how long the burst waited for tokens (read from its account before it
    exits); closes both."""
    out = {}
    th = threading.Thread(target=lambda: out.update(result=job(other)))
    th.start()
    sim_sleep(lead_s)
    region = w.tmp / "decoder.region"
    dec = start(w, 10, env={"GPUSLICE_REGION": str(region), "GPUSLICE_CORES": str(cap), "GPUSLICE_LOG_LEVEL": "3"})
    if warm:
        dec.ok(warm)
    before = waited_s(region)
    r = dec.ok(burst)
    waited = waited_s(region) - before
    err = dec.close()
    th.join()
    other.close()
    return r, err, out.get("result"), waited


def test_a_decoder_like_tenant_beside_a_mostly_idle_notebook_probes_as_if_alone(world):
    """A notebook that runs one small kernel every 50 ms is an active member
    of the device ledger, but its GPU time cannot blur anyone's. Counted as a
    neighbour, it made a decoder-like tenant (16 launches 40 us apart, then a
    sync) probe after every 20 us CPU gap, ~13 probes a burst: on an H100 a
    transformers decoder capped at 70 beside such a notebook spent 2 s of 25
    in probes and ran at 0.69 of alone. Beside it the decoder probes as if
    alone (after 100 us gaps: about once a burst), and is never held back.
    The probe count comes from the limiter's cost report at exit."""
    w = world_env(world, GPUSLICE_SIM_NVML_SNAPSHOT=1)
    nb = start(w, 10, env={"GPUSLICE_REGION": str(w.tmp / "notebook.region"), "GPUSLICE_CORES": "30"})
    r, err, _, _ = decoder_beside(w, nb, lambda c: c.ok("burst 1 50000 3.0"), 0.6, 70, "burst 16 0 2.0 40")
    probes = cost_count(err, "gap probes")
    print(f"probes {probes} in {r['bursts']} bursts")
    assert probes is not None, err[-2000:]
    assert probes <= 3 * r["bursts"], (probes, r)
    # the report splits a probe's time: its stream queries (every probe),
    # and the interval close of those that found the work drained, itself
    # split into its marker read and the next interval's start event
    assert cost_count(err, "stream queries of the gap probes") == probes, err[-2000:]
    closes = cost_count(err, "interval closes of the probes that found the work drained") or 0
    assert 1 <= closes <= probes
    assert cost_count(err, "marker reads of those closes") == closes, err[-2000:]
    assert cost_count(err, "start events of the intervals those closes began") == closes, err[-2000:]


def test_a_tenant_far_under_its_cap_marks_a_few_launches_an_interval_not_each(world, tmp_path):
    """A tenant under a cap above its use keeps its window going
    (gs_lim_extend) and never closes it, so the GPU time per launch must be
    learnt from its drained intervals: unknown, every launch took a marker
    (an event record) and an extension, and a driver-API launch loop capped
    at 99 on an H200 ran at 0.68 of native. Bursts of 200 launches of 5 us
    kernels with 1 ms of sleep between them, capped at 90: a marker after
    each of an interval's first four launches and then one per 0.5 ms, about
    five a burst (every launch, 200 a burst, before). The count comes from
    the cost report, written to a file (a debug log this long would fill a
    pipe nobody reads)."""
    w = world_env(world)
    log = tmp_path / "tenant.log"
    c = start_logged(w, 5, log, {"GPUSLICE_CORES": "90"})
    r = c.ok("burst 200 1000 1.0")
    c.close()
    err = log.read_text()
    markers = cost_count(err, "progress markers")
    print(f"markers {markers} in {r['bursts']} bursts of 200 launches")
    assert r["bursts"] >= 20, r
    assert markers is not None and markers <= 10 * r["bursts"], (markers, r)


def test_the_outer_loop_runs_on_a_thread_of_its_own(world):
    """The outer loop's NVML reads took 2-4 ms a run on an H200 (per-process
    samples most of it), which a launching thread paid every 250 ms: a
    stall of a decoder's token and 1-1.6 % of a host-bound load's time. A
    limited process runs them on one thread of its own, named
    gpuslice-outer; a process with no limit has none. The limited one's
    cost report at exit counts the runs."""
    w = world_env(world)
    capped = start(w, 200, env={"GPUSLICE_CORES": "50", "GPUSLICE_LOG_LEVEL": "3"})
    free = start(w, 200, env={"GPUSLICE_REGION": str(w.tmp / "free.region")})

    def threads(c):
        return [open(f"/proc/{c.p.pid}/task/{t}/comm").read().strip() for t in os.listdir(f"/proc/{c.p.pid}/task")]

    run(capped, "kernel", 0.6)
    run(free, "kernel", 0.3)
    assert threads(capped).count("gpuslice-outer") == 1, threads(capped)
    assert "gpuslice-outer" not in threads(free), threads(free)
    free.close()
    err = capped.close()
    runs = cost_count(err, "outer-loop runs")
    assert runs and runs >= 2, err[-2000:]


def test_a_decoder_like_tenant_far_under_its_cap_beside_a_capped_one_runs_free(world):
    """A decoder-like tenant capped at 80 beside a GPU-bound container capped
    at 30, on a device that time-slices in 2 ms slices: the device is busy
    about half the time, well under 0.8 of the decoder's cap, so the decoder
    cannot reach its cap whatever it does. Once c is learnt it runs free
    beside the busy neighbour and stays free: no windows, probes nor
    markers. Under windows there it paid the coarse probe and about four
    markers a burst (on an H100 a transformers decoder capped at 70 beside
    training capped at 30 did 0.835 of alone, 0.948 without the interposer;
    with 8888294's library here: 3.8 markers a burst, 11 199 in all, no free
    run: red).
    It is never held back, and the GPU-bound one still gets no more than
    its cap. Counts from the limiter's cost report at exit, which holds the
    half-second warm-up and the first runs under windows too."""
    w = world_env(world, GPUSLICE_SIM_NVML_SNAPSHOT=1, GPUSLICE_SIM_TIMESLICE_US=2000)
    heavy = start(w, 1000, env={"GPUSLICE_REGION": str(w.tmp / "heavy.region"), "GPUSLICE_CORES": "30"})
    r, err, ratio, waited = decoder_beside(w, heavy, lambda c: run(c, "kernel", 4.5, 0.5, 8), 0.8, 80,
                                           "burst 16 0 2.5 40", warm="burst 16 0 0.5 40")
    probes, markers = cost_count(err, "gap probes") or 0, cost_count(err, "progress markers") or 0
    print(f"{r['bursts']} bursts: probes {probes}, markers {markers}; free runs begun {err.count('running free')}")
    assert "running free" in err and "back to windows" not in err, err[-3000:]
    assert probes <= 3 * r["bursts"] and markers <= 3 * r["bursts"], (probes, markers, r)
    # the report also times the gate's fast path (one launch in 64), the
    # markers and the outer loop's NVML reads: the host costs a GPU run has
    # to account for (the warm-up's windows made the first two)
    assert (cost_count(err, "launches through the open-window fast path") or 0) >= 1, err[-2000:]
    assert markers >= 1 and (cost_count(err, "NVML reads") or 0) >= 1, err[-2000:]
    assert waited <= 0.05 * r["elapsed_us"] / 1e6, (waited, r)
    print(f"heavy {ratio:.3f}")
    assert ratio <= 0.30 + TOL, ratio


@pytest.mark.parametrize("layout,yield_us", [("flat", 0), ("flat", 250), ("agent", 250)])
def test_a_share_container_borrowing_a_light_neighbours_part_keeps_its_queue_shallow(world, layout, yield_us):
    """GPUSLICE_SHARE_YIELD_US: a GPU-bound share container (weight 30) that
    uses far more than its weight's part beside a decoder-like one (weight
    70, ~10 % busy, under its part) waits for its own queue every 250 us of
    estimated work, so the decoder's kernels do not wait behind eight of its
    kernels on a device that time-slices (on an H100 a decoder beside training
    with ten matmuls queued kept 0.58 of its speed, 0.96 beside the same
    training waiting for each one). The decoder is never held back either way.
    With 0 (the default) it never yields. What the yield buys and costs is
    measured, not asserted here: on this simulated driver the decoder's
    bursts took 2.0-2.3x their time alone instead of 2.6-3.0x, the GPU-bound
    one got 0.57-0.74 of the device instead of 0.78-0.89 (docs/compute.md).
    The decoder's CPU gaps are 100 us, what the 40 us asked for took at full
    speed: on the slowed clock, with 40 us gaps under the probe and its
    intervals bounded by its last launch, the decoder was charged the
    other's slices and in 2 of 5 suite runs the GPU-bound one took turns
    instead of yielding.

    In the agent's layout (each its own state directory and pid namespace,
    one ledger directory) the borrower yields as in one directory: there
    the node agent pins the node's value (--share-yield-us)."""
    share = {"GPUSLICE_COMPUTE_MODE": "share"}
    w = world_env(world, GPUSLICE_SIM_NVML_SNAPSHOT=1, GPUSLICE_SIM_TIMESLICE_US=2000)
    wrap, (at_heavy, at_light) = lay_out(w, ["heavy", "light"], layout)
    heavy = start(w, 1000, env={**at_heavy, **share, "GPUSLICE_SHARE_WEIGHT": "30",
                                "GPUSLICE_SHARE_YIELD_US": str(yield_us), "GPUSLICE_LOG_LEVEL": "3"}, wrap=wrap)
    light = start(w, 10, env={**at_light, **share, "GPUSLICE_SHARE_WEIGHT": "70"}, wrap=wrap)
    th = threading.Thread(target=lambda: run(heavy, "kernel", 4.0, 0.5, 8))
    th.start()
    r = light.ok("burst 16 0 3.5 100")
    light.close()
    th.join()
    err = heavy.close()
    waited = waited_s(at_light["GPUSLICE_REGION"])
    print(f"{layout}: yields {cost_count(err, 'yields')}, light waited {waited:.3f} s")
    assert waited <= 0.05 * r["elapsed_us"] / 1e6, r
    if yield_us:
        assert (cost_count(err, "yields") or 0) >= 200, err[-2000:]  # ~3 s of 1 ms kernels beside the decoder
    else:
        assert (cost_count(err, "yields") or 0) == 0, err[-2000:]


def test_a_decoder_like_tenant_starting_beside_a_capped_one_is_never_held_back(world):
    """A decoder-like tenant capped at 70 (~10 % busy) that starts beside a
    GPU-bound container capped at 30, on a device that time-slices, is never
    held back, not even before it has learnt c: a new container starts with
    a period's allowance banked. From an empty account its first kernel,
    queued behind the other's slice and charged at c = 1, put it 1 ms in
    debt, and held back it then took turns with the other, 0.15 s of waiting
    in its first half second. The capped one stays within its cap."""
    w = world_env(world, GPUSLICE_SIM_NVML_SNAPSHOT=1, GPUSLICE_SIM_TIMESLICE_US=2000)
    heavy = start(w, 1000, env={"GPUSLICE_REGION": str(w.tmp / "heavy.region"), "GPUSLICE_CORES": "30"})
    light = start(w, 10, env={"GPUSLICE_REGION": str(w.tmp / "light.region"), "GPUSLICE_CORES": "70"})
    out = {}
    th = threading.Thread(target=lambda: out.update(ratio=run(heavy, "kernel", 2.5, 0.5, 8)))
    th.start()
    r = light.ok("burst 16 0 2.0 100")
    light.close()
    th.join()
    heavy.close()
    waited = waited_s(w.tmp / "light.region")
    print(f"heavy {out['ratio']:.3f}, light waited {waited:.3f} s")
    assert waited <= 0.02 * r["elapsed_us"] / 1e6, r
    assert out["ratio"] <= 0.30 + TOL, out


def test_a_decoder_like_tenant_alone_under_a_cap_above_its_use_never_waits_while_c_is_learnt(world, tmp_path):
    """A decoder-like tenant alone (16 launches 40 us apart, then a sync:
    0.25 busy) under cap 30. Until the outer loop first learns c from
    NVML's samples for its pids, a quarter second in, it is charged at
    c = 1, so its 40 us CPU gaps must not be charged as busy: it probes
    from the fine gap meanwhile, and counts the gaps it finds as occupancy
    only, so that the first c (0.24, taken whole) fits the coarser probe
    that follows. Charged its gaps, it waited 0.34 s of its first 3 s for
    tokens; with the gaps left out of occupancy too, c was learnt for the
    fine probe and the waits came after it. An outer run before NVML's first
    sample (the device read idle) must not count as learning c either:
    taken as c = 1 learnt, the first measure came half-way, c took 1.25 s
    to come down and the tenant waited 0.56 s."""
    w = world_env(world, GPUSLICE_SIM_NVML_SNAPSHOT=1)
    log = tmp_path / "dec.log"
    dec = start_logged(w, 10, log, {"GPUSLICE_REGION": str(w.tmp / "dec.region"), "GPUSLICE_CORES": "30"})
    r = dec.ok("burst 16 0 3.0 40")
    dec.close()
    waited = waited_s(w.tmp / "dec.region")
    dev = top(w.tmp / "dec.region")["containers"][0]["devices"][0]
    print(f"waited {waited:.3f} s of {r['elapsed_us'] / 1e6:.2f}, c {dev['compute_correction_ppm']} ppm, "
          f"held off its CPU {held_off(r):.3f} of the time")
    # it has failed twice in fresh-clone CI runs (0.326 and 0.319 s), never
    # here: its outer runs, shown with a failure, tell when c was learnt
    outer = [line for line in log.read_text().splitlines() if " outer " in line]
    assert waited <= 0.03 * r["elapsed_us"] / 1e6, (r, outer[:12])
    assert dev["compute_correction_ppm"] < 400000, dev


def test_a_decoder_like_tenant_capped_at_30_stops_waiting_soon_after_its_busy_neighbour_leaves(world):
    """A decoder-like tenant capped at 30 (0.25 busy alone) beside a GPU-bound
    container capped at 70 learns c = 1 (the samples credit it the other's
    time-slices). Back from an idle after the neighbour has gone, the
    device reads idle and the samples still hold the neighbour's last
    slices: nobody else is busy, and c is forgotten (learnt afresh, its CPU
    gaps not charged meanwhile). Kept at 1 until NVML's samples measured it
    alone, then stepping half-way, it waited 0.39 s of the next 2 s for
    tokens; taking that reading whole, 0.17-0.18 s; forgetting c, none. On
    an H200 a decoder alone in its turn after seven tenants had run together
    waited through three outer runs of the turn."""
    w = world_env(world, GPUSLICE_SIM_NVML_SNAPSHOT=1, GPUSLICE_SIM_TIMESLICE_US=2000)
    heavy = start(w, 1000, env={"GPUSLICE_REGION": str(w.tmp / "heavy.region"), "GPUSLICE_CORES": "70"})
    light = start(w, 10, env={"GPUSLICE_REGION": str(w.tmp / "light.region"), "GPUSLICE_CORES": "30"})
    th = threading.Thread(target=run, args=(heavy, "kernel", 1.5, 0.0, 8))
    th.start()
    light.ok("burst 16 0 1.5 40")
    th.join()
    heavy.close()
    sim_sleep(0.3)
    beside = waited_s(w.tmp / "light.region")
    r = light.ok("burst 16 0 2.0 40")
    light.close()
    after = waited_s(w.tmp / "light.region") - beside
    dev = top(w.tmp / "light.region")["containers"][0]["devices"][0]
    print(f"waited {beside:.3f} s beside, {after:.3f} s of {r['elapsed_us'] / 1e6:.2f} after; "
          f"c {dev['compute_correction_ppm']} ppm")
    assert after <= 0.05 * r["elapsed_us"] / 1e6, (r, dev)


def burst_rate(r):
    """Bursts a second of a client's `burst` reply."""
    return r["bursts"] / (r["elapsed_us"] / 1e6)


def test_a_launch_bound_tenant_taking_its_turn_after_another_is_not_charged_its_gaps(world):
    """Two containers capped at 15 take turns of 0.6 s, each load bursts
    of 16 launch-bound kernels (8 us, 10 us of CPU spun between them: under
    the fine probe's gap, so c about 0.45 alone takes them out) and a
    sleep of 0.3 ms (a tenant that spun all its turn ran beside the
    four-tenant tests on a 2-core CI machine and starved them). Each turn
    begins 20 ms before the other's ends, as turns on an H200 did. The
    container whose turn has just ended stays active in the ledger for two
    outer runs; counted as a busy neighbour, it set c to 1, which charged
    the gaps as GPU time (an H200 ran a launch-bound matmul capped at 30 at
    0.22-0.26 busy through a turn's first second). A member that launched
    nothing in the second half of the interval an outer run reads is no
    busy neighbour: a turn after the other's runs at the rate of one after
    its own (1.03-1.15 of it, also beside two CPU hogs; 0.85 in the second
    turn with 0f1f80d's library, which counted a member launching anywhere
    in the interval, 0.87 with 57fa95b's: red)."""
    w = world_env(world, GPUSLICE_SIM_NVML_SNAPSHOT=1)
    a, b = (start(w, 8, env={"GPUSLICE_REGION": str(w.tmp / f"{n}.region"), "GPUSLICE_CORES": "15"})
            for n in ("a", "b"))
    b.ok("burst 16 300 1.5 10")  # learns c alone
    steady = burst_rate(b.ok("burst 16 300 1.0 10"))
    turns = []
    for _ in range(2):
        other = threading.Thread(target=a.ok, args=("burst 16 300 0.6 10",))
        other.start()
        sim_sleep(0.58)
        turns.append(burst_rate(b.ok("burst 16 300 0.6 10")))
        other.join()
    a.close()
    b.close()
    print(f"steady {steady:.0f} bursts/s; in turns after the other's, of that: {[round(t / steady, 3) for t in turns]}")
    assert min(turns) >= 0.95 * steady, (steady, turns)


def test_a_capped_tenant_far_under_its_cap_runs_free_and_is_held_to_it_once_it_grows(world, tmp_path):
    """A decoder-like tenant (16 launches 40 us apart, then a sync: 0.24
    busy) alone under cap 50 is far under it: once the device reads under
    0.8 of the cap twice in a row, c learnt and no wait for tokens, it runs
    free, with no windows, probes nor markers (a host-bound load alone under
    a cap above its use paid them 5-7 % of its speed on an H200). A second
    process of the container, started then, makes none, and its outer runs
    read no NVML per-process samples (1.7 ms a read on an H200). A third one is
    GPU-bound (1 ms kernels). While free the container's tokens run on the
    outer loop's readings (the cap's allowance less its use): once they fall
    past what one reading can wrongly take, on the second reading of the
    GPU-bound work, it is back under windows owing both runs past its cap,
    so that over the GPU-bound phase it keeps to the cap (0.469-0.528 over 3 s
    here; 0.995 with nothing taken from the tokens while free). The earlier
    processes stay until the end: one that exits leaves NVML samples under a
    pid no longer ours, which count as someone else busy and end running
    free as well. The probe and marker counts come from the
    second process's cost report at exit, the switch back from the third's
    debug log."""
    w = world_env(world, GPUSLICE_SIM_NVML_SNAPSHOT=1)

    def logged(name):
        log = tmp_path / f"{name}.log"
        return start_logged(w, 10, log, {"GPUSLICE_CORES": "50"}), log

    first, _ = logged("first")
    first.ok("burst 16 0 1.5 40")
    dev = top(w.region)["containers"][0]["devices"][0]
    assert dev["compute_allowed_ppm"] == 1000000 and dev["compute_limit_percent"] == 50, dev
    second, second_log = logged("second")
    r = second.ok("burst 16 0 1.5 40")
    third, third_log = logged("third")
    third.ok("kernel 1000")
    heavy = run(third, "kernel", 3.0, 0.0, 8)
    for c in (third, second, first):
        c.close()
    err = second_log.read_text()
    probes, markers = cost_count(err, "gap probes") or 0, cost_count(err, "progress markers") or 0
    runs, reads = cost_count(err, "outer-loop runs") or 0, cost_count(err, "NVML per-process sample reads") or 0
    back = re.search(r"back to windows at device (\d+) ppm busy, tokens (-?\d+) us", third_log.read_text())
    print(f"{r['bursts']} bursts: {probes} probes, {markers} markers, {runs} outer runs reading samples {reads} "
          f"times; GPU-bound phase {heavy:.3f}; {back and back.group(0)}")
    # under windows alone it would probe after each burst's sync and mark
    # each interval's first four launches: about 1 and 4 a burst. The bursts
    # a run makes follow the host's speed (about 2200 on an idle machine, 960 on a
    # 2-core machine running a second simulation beside the suite): enough
    # that 5 % of them tells running free from windows
    assert r["bursts"] >= 400, r
    assert probes <= 0.05 * r["bursts"] and markers <= 0.05 * r["bursts"], (probes, markers, r)
    # far under its bound, the device's busy time is all it needs of NVML
    assert runs >= 3 and reads == 0, (runs, reads)
    assert back and int(back.group(1)) > 500000 and int(back.group(2)) < 0, third_log.read_text()[-3000:]
    assert 0.40 <= heavy <= 0.50 + TOL, heavy


def test_a_capped_tenant_running_free_stays_free_when_its_turn_begins_in_the_last_ones_tail(world, tmp_path):
    """Two decoder-like containers (16 launches of 10 us, 40 us of CPU
    between them, then a sync: 0.2 busy), each capped at 50 in its own
    region, take 1 s turns, each turn beginning 0.15 s before the other's
    ends. The second runs free: idle through the other's turn, its outer
    loop sleeps, and the run at its turn's first launch reads who used the
    GPU meanwhile. That is no one beside it: taken as a first reading of a
    neighbour, the turn's next reading, which still holds the other's last
    0.15 s, ended the free run (as an H200's decoder under cap 30 did at two
    of its turn starts, and then learnt c again under windows); so did a
    neighbour beside it at the start of its last turn, its reading faded
    by a quarter a run and the runs few. It runs free through its three
    turns (with 2ddb17f's library it went back to windows in two: red)."""
    w = world_env(world, GPUSLICE_SIM_NVML_SNAPSHOT=1)
    logs = {n: tmp_path / f"{n}.log" for n in ("last", "free")}
    last, free = (start_logged(w, 10, logs[n], {"GPUSLICE_REGION": str(w.tmp / f"{n}.region"), "GPUSLICE_CORES": "50"})
                  for n in ("last", "free"))
    free.ok("burst 16 0 1.5 40")
    assert "running free" in logs["free"].read_text(), logs["free"].read_text()[-3000:]
    for _ in range(3):
        other = threading.Thread(target=last.ok, args=("burst 16 0 1.0 40",))
        other.start()
        sim_sleep(0.85)
        free.ok("burst 16 0 1.0 40")
        other.join()
    last.close()
    free.close()
    text = logs["free"].read_text()
    back = re.findall(r"back to windows at device \d+ ppm busy", text)
    print(f"free runs begun {text.count('running free')}, ended {len(back)}")
    assert not back, text[-3000:]


def test_a_gpu_bound_tenant_held_under_its_cap_never_runs_free_while_nvml_reads_take_long(world, tmp_path):
    """A GPU-bound tenant (1 ms kernels) alone under cap 20 on a device that
    clocks higher duty-cycled (GPUSLICE_SIM_POWER_DYN 4000: s reached 1.7)
    reads 0.12-0.13 busy, under the device bound of 0.16, while it waits for
    tokens every cycle: only that wait keeps it from running free. The outer
    loop reads the clock, then NVML's per-process samples, which take 20 ms
    here (1.7 ms on an H200); a token wait that ends meanwhile is stamped
    past the run's clock. Taken as a wait ages ago, the tenant ran free (on
    an H200 under cap 10 once, 0.96 busy for a run, owing 0.5 s after);
    here 8bf1ab8's parent began a free run in each of three runs. It never
    does."""
    w = world_env(world, GPUSLICE_SIM_POWER_DYN=4000, GPUSLICE_SIM_NVML_READ_US=20000)
    log = tmp_path / "held.log"
    c = start_logged(w, 1000, log, {"GPUSLICE_CORES": "20"})
    got = run(c, "kernel", 3.0, 0.5)
    c.close()
    text = log.read_text()
    free = re.findall(r"running free at device \d+ ppm busy", text)
    runs = re.findall(r"device (\d+) ppm, \d+ active in the ledger, .*?-> c \d+( \(not learnt\))? s (\d+)", text)
    # the case: two outer runs in a row with c learnt and the device busy,
    # but under the bound
    under = [50000 <= int(dev) < 160000 and not unlearnt for dev, unlearnt, _ in runs]
    print(f"work {got:.3f} of the device's; free runs begun {len(free)}; runs under the bound {sum(under)} "
          f"of {len(runs)}; s up to {max((int(x) for _, _, x in runs), default=0)}")
    assert any(a and b for a, b in zip(under, under[1:])), "never under the bound: no case to test"
    assert not free, text[-3000:]


def test_a_bursty_tenant_alone_under_a_cap_runs_its_bursts_at_full_speed_once_free(world, tmp_path):
    """Bursts of 60 ms of GPU work (60 kernels of 1 ms, then a sync) every
    0.4 s, 15 % busy, alone under cap 70. Under windows each burst past the
    period's allowance (35 ms) runs at 0.7 and takes about 75 ms; once the
    container runs free its token account runs on the outer loop's readings,
    which its bursts stay well under, and they take 60 ms. Mean over 6 s,
    the first bursts under windows included: 64.07 ms here (worst 120 ms,
    the first); 74.8 ms with free runs off."""
    w = world_env(world, GPUSLICE_SIM_NVML_SNAPSHOT=1)
    log = tmp_path / "bursts.log"
    c = start_logged(w, 1000, log, {"GPUSLICE_CORES": "70"})
    r = c.ok("burst 60 340000 6")
    c.close()
    err = log.read_text()
    print(f"{r['bursts']} bursts, mean {r['mean_us'] / 1000:.2f} ms, worst {r['worst_us'] / 1000:.2f} ms; "
          f"free runs begun {err.count('running free')}")
    assert r["bursts"] >= 12, r
    assert "running free" in err, err[-3000:]
    assert r["mean_us"] <= 67000, r
    # running free far under its cap, an outer run reads no per-process
    # samples; that is no NVML error (one was logged at the first such run
    # in 23 of 30 capped processes' logs on an H100)
    assert "nvml ours -1" in err and "nvmlDeviceGetProcessUtilization:" not in err, err[-3000:]


def test_a_capped_tenant_launching_more_kernels_than_the_old_collective_table_held(world, tmp_path):
    """A capped program launching 2000 kernels of its own (torch.compile
    makes many), each twice, through cuLaunchKernel: whether each is a
    collective is kept in a table of 4096 slots (its bound and reset are
    unit-tested, tests/unit/test_func_class.c). The table it replaced
    scanned its 1024 entries up to the count of functions ever seen, past
    its end: the sanitizer build, which runs this test (the paths group),
    stopped there. A kernel named as NCCL's is still told after them."""
    w = world_env(world)
    log = tmp_path / "many.log"
    c = start_logged(w, 10, log, {"GPUSLICE_REGION": str(w.tmp / "many.region"), "GPUSLICE_CORES": "50"})
    try:
        c.ok("kernels 2000 10")
        c.ok("kernels 2000 10")  # each known now, from the thread's cache or the table
        c.ok("kernel 10 nccl")
        c.ok("run kernel 0.2")
    finally:
        c.close()
    text = log.read_text()
    told = re.findall(r"collective kernel (\S+):", text)
    dev = top(w.tmp / "many.region")["containers"][0]["devices"][0]
    assert told == ["ncclKernel_sleep_us:10"], told
    assert dev["compute_charged_ns"] > 0, dev


def collectives_told_after_a_reuse(w, log, before, load, free):
    """A tenant capped at 50 (its debug log in log) runs `init` and the
    commands before, loads its kernel (`load 10`) and launches it, runs the
    commands free, then loads a kernel named as NCCL's and launches it.
    Asserts that the second kernel got the first's handle; returns the
    kernels the log told collectives."""
    c = w.client(env={"GPUSLICE_REGION": str(w.tmp / "reuse.region"), "GPUSLICE_CORES": "50",
                      "GPUSLICE_LOG_LEVEL": "3"}, wrap=("sh", "-c", f'exec "$@" 2>{log}', "sh"))
    try:
        for cmd in ["init", *before]:
            c.ok(cmd)
        first = c.ok(f"{load} 10")["func"]
        c.ok("run kernel 0.1")
        for cmd in free:
            c.ok(cmd)
        second = c.ok(f"{load} 10 nccl")["func"]
        c.ok("run kernel 0.1")
    finally:
        c.close()
    assert first == second, (first, second)
    return re.findall(r"collective kernel (\S+):", log.read_text())


@pytest.mark.parametrize("load,unload", [("kernel", "unload"), ("libkernel", "unload"), ("kernel", "unload thread")])
def test_a_function_handle_reused_after_its_module_is_unloaded_is_asked_about_again(world, tmp_path, load, unload):
    """The driver may hand an unloaded module's or library's function
    handles out again for other kernels (the simulated driver gives the
    first free slot). A capped tenant launches its kernel, unloads the
    module (cuModuleUnload) or library (cuLibraryUnload; its kernel is
    launched cast to a function and named by cuKernelGetName), on the
    launching thread or another, and loads one whose kernel is named as
    NCCL's: the same handle, which must now be told a collective. Without
    the unload watched, the handle kept its first answer (not a collective)
    until the lookup's table filled and started again, and the collective
    was held back at the gate as work."""
    told = collectives_told_after_a_reuse(world_env(world), tmp_path / "reuse.log", [], load, [unload])
    assert told == ["ncclKernel_sleep_us:10"], told


def test_a_function_handle_reused_after_its_context_is_destroyed_is_asked_about_again(world, tmp_path):
    """A context's destroy unloads its modules (cuCtxDestroy_v2): a kernel
    loaded in a context of its own, then the context gone and a kernel named
    as NCCL's loaded in the primary context, which gets the same handle and
    must be told a collective."""
    told = collectives_told_after_a_reuse(world_env(world), tmp_path / "reuse.log", ["ctxcreate v2 1"], "kernel",
                                          ["ctxdestroy v2", "init"])
    assert told == ["ncclKernel_sleep_us:10"], told


def test_per_process_samples_are_read_where_a_short_buffer_leaves_their_count_unsaid(world, tmp_path):
    """NVML documents the size to allocate for the per-process samples only
    for a call without a buffer (GPUSLICE_SIM_NVML_SHORT_COUNT: a short
    buffer's call leaves the count as given). A tenant under cap 50 beside a
    busy neighbour, idle 1.5 s between two runs, finds 150 samples and more
    to read (a 10 ms sample period), past the buffer it began with. Grown by
    the count a short buffer's call left, it read none from then on, so
    every run took the neighbour's time from the device's busy alone."""
    w = world_env(world, GPUSLICE_SIM_NVML_SHORT_COUNT=1, GPUSLICE_SIM_NVML_PERIOD_MS=10)
    log = tmp_path / "tenant.log"
    neighbour = start(w, 1000, env={"LD_PRELOAD": SIM_CLOCK})  # no interposer: a GPU user outside the ledger
    tenant = start_logged(w, 1000, log, {"GPUSLICE_REGION": str(w.tmp / "tenant.region"), "GPUSLICE_CORES": "50"})
    busy = threading.Thread(target=run, args=(neighbour, "kernel", 5.0))  # past the tenant's 3 s and its start
    busy.start()
    try:
        run(tenant, "kernel", 0.5)
        sim_sleep(1.5)
        run(tenant, "kernel", 1.0)
    finally:
        busy.join()
        neighbour.close()
        tenant.close()
    text = log.read_text()
    others = [int(x) for x in re.findall(r"nvml ours -?\d+ others (-?\d+)", text)]
    print(f"outer runs {len(others)}, with the others' samples read {sum(x > 0 for x in others)}: {others}")
    assert "nvmlDeviceGetProcessUtilization:" not in text, text[-3000:]
    assert sum(x > 0 for x in others[len(others) // 2:]) >= 2, others


def test_c_is_learnt_where_nvml_gives_one_sample_a_run(world):
    """Where NVML's per-process samples come once per outer run (a 250 ms
    sample period), the same tenant still learns c. Leaving out the sample
    that began before the outer loop's first look at NVML on every run while
    c was unlearnt left out the one sample of every run: c was never learnt
    and the tenant waited 2.06 s of 3 for tokens; 0.51 s leaving it out
    once, and nearly none since it probes finely while c is unlearnt."""
    w = world_env(world, GPUSLICE_SIM_NVML_SNAPSHOT=1, GPUSLICE_SIM_NVML_PERIOD_MS=250)
    dec = start(w, 10, env={"GPUSLICE_REGION": str(w.tmp / "dec.region"), "GPUSLICE_CORES": "30"})
    r = dec.ok("burst 16 0 3.0 40")
    dec.close()
    waited = waited_s(w.tmp / "dec.region")
    dev = top(w.tmp / "dec.region")["containers"][0]["devices"][0]
    print(f"waited {waited:.3f} s of {r['elapsed_us'] / 1e6:.2f}, c {dev['compute_correction_ppm']} ppm")
    assert waited <= 0.05 * r["elapsed_us"] / 1e6, (r, dev)
    assert dev["compute_correction_ppm"] < 500000, dev


def test_the_launch_rate_benchmark_goes_through_the_interposer(world):
    """bench/compute/launch_rate.c times the launches a program makes
    through the interposer: under a cap of 99 the limiter charges them (a
    benchmark that went round it would time the bare driver). Bad flags are
    refused with the value named."""
    from conftest import BUILD
    prog = os.path.join(BUILD, "bench", "gpuslice-launch-rate")
    w = world_env(world, GPUSLICE_CORES=99)
    out = subprocess.run([prog, "--secs", "0.3", "--warm", "0.1", "--sync-every", "100"], env=w.env,
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    r = json.loads(out.stdout)
    assert r["launches"] >= 100 and r["launches_per_s"] > 0, r
    dev = top(w.region)["containers"][0]["devices"][0]
    assert dev["compute_mode"] == "cap" and dev["compute_charged_ns"] > 0, dev
    bad = subprocess.run([prog, "--secs", "soon"], env=w.env, capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2 and "--secs soon: not a number" in bad.stderr, bad.stderr
    bad = subprocess.run([prog, "--paired", "2"], env=w.env, capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2 and "--paired 0 or 1" in bad.stderr, bad.stderr


def test_the_probe_cost_benchmark_times_the_bare_drivers_calls(world):
    """bench/compute/probe_cost.c times the driver calls a gap probe and a
    marker make, on the driver alone: it looks them up through glibc's own
    dlsym, so even with the interposer preloaded and a cap set the
    interposer never sees a call (no region is made). It reports every call it names; bad flags are refused."""
    from conftest import BUILD
    prog = os.path.join(BUILD, "bench", "gpuslice-probe-cost")
    w = world_env(world, GPUSLICE_CORES=50)
    out = subprocess.run([prog, "--steps", "300", "--warm", "20", "--gap-us", "100"], env=w.env,
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    r = json.loads(out.stdout)
    assert r["steps"] == 300, r
    for call in ("launch", "marker_record", "stream_query", "elapsed", "start_record", "event_query"):
        assert 0 < r[call]["p50_us"] <= r[call]["p99_us"], (call, r[call])
    assert not os.path.exists(w.region), "the interposer saw the benchmark's driver calls"
    bad = subprocess.run([prog, "--gap-us", "-3"], env=w.env, capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2 and "--gap-us >= 0" in bad.stderr, bad.stderr
    bad = subprocess.run([prog, "--steps", "many"], env=w.env, capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2 and "--steps many: not a number" in bad.stderr, bad.stderr


def test_the_event_cost_benchmark_times_steps_on_the_bare_driver(world):
    """bench/compute/event_cost.c times steps with 0, 1, 2 and 4 event
    records after each kernel on the driver alone (glibc's own dlsym: with
    the interposer preloaded and a cap set, no region is made), one row per
    count in the order given, each step's GPU span no longer than its host
    time, and a record's GPU cost read as the simulated device's
    (GPUSLICE_SIM_EVENT_NS, 50 us: far above what a loaded host's delays
    add to a median step). Bad flags are refused with the value named."""
    from conftest import BUILD
    prog = os.path.join(BUILD, "bench", "gpuslice-event-cost")
    w = world_env(world, GPUSLICE_CORES=50, GPUSLICE_SIM_EVENT_NS=50000)
    out = subprocess.run([prog, "--steps", "40", "--warm", "4", "--kernels", "2", "--records", "0,1,2,4"], env=w.env,
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    r = json.loads(out.stdout)
    assert r["steps"] == 40 and r["kernels"] == 2, r
    assert [row["records"] for row in r["rows"]] == [0, 1, 2, 4], r
    for row in r["rows"]:
        assert 0 < row["gpu_us_p50"] and row["gpu_us_mean"] <= row["host_us_mean"], row
    assert 45 <= r["gpu_us_per_record"] <= 60, r
    assert not os.path.exists(w.region), "the interposer saw the benchmark's driver calls"
    for flags, said in ((["--records", "0,x"], "--records 0,x: up to 8 numbers"),
                        (["--records", "1,2,3,4,5,6,7,8,9"], "up to 8 numbers"),
                        (["--spin-cycles", "-5"], "--spin-cycles -5: must not be negative"),
                        (["--kernels", "0"], "--kernels 1..256"),
                        (["--steps", "many"], "--steps many: not a number")):
        bad = subprocess.run([prog] + flags, env=w.env, capture_output=True, text=True, timeout=60)
        assert bad.returncode == 2 and said in bad.stderr, (flags, bad.stderr)


def test_the_paired_launch_rate_times_the_driver_beside_the_interposer(world):
    """launch_rate --paired 1 alternates blocks through the interposer's
    cuLaunchKernel (the limiter charges them) and the driver's own, and
    reports both rates and their ratio. The cap of 5 tells them apart."""
    from conftest import BUILD
    prog = os.path.join(BUILD, "bench", "gpuslice-launch-rate")
    w = world_env(world, GPUSLICE_CORES=5)
    out = subprocess.run([prog, "--secs", "0.4", "--warm", "0.1", "--sync-every", "100", "--paired", "1"],
                         env=w.env, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    r = json.loads(out.stdout)
    assert r["launches"] >= 100 and r["direct_launches_per_s"] > 0, r
    # held to 5 % the interposer's path launches far slower; the driver's
    # own, never gated, does not (a "direct" path that went through the
    # interposer's dlsym hook got its wrapper, and a ratio near 1)
    assert r["vs_direct"] < 0.5, r
    assert abs(r["vs_direct"] - r["launches_per_s"] / r["direct_launches_per_s"]) < 1e-3, r
    assert top(w.region)["containers"][0]["devices"][0]["compute_charged_ns"] > 0


@pytest.mark.parametrize("what", ["stream", "ctx", "release", "reset"])
@pytest.mark.parametrize("kernel", ["plain", "collective"])
def test_the_limiter_never_uses_a_destroyed_stream_or_context(world, what, kernel):
    """A thread launches on a stream, the main thread destroys that stream
    (or the context it ran in: one of cuCtxCreate's, or the primary context
    at its last release or a reset), and the thread launches on under a cap
    until its windows close. The limiter held the stream, and events made in
    the context (a window's, and for collectives the ring's that time them):
    the simulated driver aborts on any use of a destroyed handle
    (GPUSLICE_SIM_STRICT_HANDLES), where the real one's behaviour is undefined
    and the value may already be a new stream's or event's."""
    w = world_env(world, GPUSLICE_CORES=30, GPUSLICE_SIM_STRICT_HANDLES=1)
    c = start(w, 1000)
    if kernel == "collective":
        c.ok("kernel 1000 nccl")
    r = c.cmd(f"gone {what} 40")
    err = c.close()
    assert r["rc"] == 0 and "destroyed handle" not in err, (r, err)


@pytest.mark.parametrize("what", ["ctx", "release"])
def test_a_window_whose_context_another_thread_destroys_is_charged(world, what):
    """A thread queues 40 ms of work under a cap of 30 (one window, still
    open), and the main thread destroys the context it ran in (one of
    cuCtxCreate's, or the primary context at its last release), which waits
    for that work; the thread then queues 40 ms more in the primary
    context. The first window's events went with the context, and it was
    dropped with the thread's state: 0.040 s charged in all. It is charged
    now as busy until the destroy returned: at least the 40 ms it waited."""
    w = world_env(world, GPUSLICE_CORES=30, GPUSLICE_SIM_STRICT_HANDLES=1, GPUSLICE_LOG_LEVEL=2)
    c = start(w, 1000)
    r = c.cmd(f"gone {what} 40")
    procs = [p for ct in top(w.region)["containers"] for p in ct["processes"]]
    err = c.close()
    charged = sum(p["compute_charged_ns"] for p in procs) / 1e9
    print(f"a window whose context went ({what}): charged {charged:.3f} s")
    assert r["rc"] == 0, r
    assert "destroyed or released the context of an open window" in err, err[-2000:]
    assert charged >= 0.078, (charged, procs)


def test_a_thread_ending_its_windows_at_exit_keeps_its_context_until_it_is_done(world):
    """A thread queues 400 ms of work in a context of its own and exits; the
    main thread destroys that context 20 ms later, while the exiting
    thread's last window drains (its exit ends its windows with the
    context's events). The destroy waits for it: on the simulated driver,
    which aborts on a destroyed handle, the drain otherwise read events the
    destroy had taken."""
    w = world_env(world, GPUSLICE_CORES=30, GPUSLICE_SIM_STRICT_HANDLES=1)
    c = start(w, 200000)
    r = c.cmd("gone exit 2")
    err = c.close()
    assert r["rc"] == 0 and "destroyed handle" not in err, (r, err)
