"""A rank throttled by a compute cap while its peer, on the other device of
the same container, runs long kernels (standing in for an NCCL kernel that
spins waiting for it) neither hangs nor is charged the peer's device time
(HAMi-core #142: vLLM with tensor parallelism 2 stuck under a core limit).

Wall-clock ratios, as in test_compute.py; the bounds are wide because only
the absence of a hang and of cross-device charging is asserted here."""
import threading
import time

import pytest
from test_compute import top

CAP = 40


def test_a_throttled_rank_beside_a_peer_in_a_long_kernel_neither_hangs_nor_pays_for_it(world):
    w = world(limit=None, extra={"GPUSLICE_CORES": str(CAP), "GPUSLICE_SIM_DEVICES": "2"})
    rank, peer = w.client(), w.client()
    rank.ok("init 0")
    peer.ok("init 1")
    rank.ok("kernel 2000")       # 2 ms steps on device 0
    peer.ok("kernel 500000")     # 0.5 s kernels on device 1, back to back
    out = {}

    def go(name, client, line):
        out[name] = client.ok(line)

    ts = [threading.Thread(target=go, args=("peer", peer, "run kernel 3.0 0 1")),
          threading.Thread(target=go, args=("rank", rank, "run kernel 2.0 0.5 4"))]
    for t in ts:
        t.start()
    for t in ts:
        t.join(timeout=60)
    assert not any(t.is_alive() for t in ts), "a rank hung"
    ratio = out["rank"]["ratio_ppm"] / 1e6
    # Charged the peer's device-1 time, the rank would fall far below its cap.
    assert CAP / 100 - 0.10 <= ratio <= CAP / 100 + 0.05, ratio
    assert out["peer"]["launches"] >= 1
    rank.close()
    peer.close()


# Tensor-parallel ranks on the simulated driver's collective kernels
# (docs/simulated-driver.md): each step a 1500 us kernel, then an all-reduce
# of 400 us of its own work that spins until both ranks have reached it, then
# a stream synchronisation. The tenants' clock runs SLOW times slower than
# the wall, as in test_compute.py.
SLOW = 5
STEP_US = 1500 + 400


def tp_world(world, **extra):
    return world(limit=None, slowdown=SLOW,
                 extra={"GPUSLICE_SIM_DEVICES": "2", **{k: str(v) for k, v in extra.items()}})


def tp_ranks(w, steps, warm, group=0, env=None, devices=(0, 1), graph=False, timeout_s=60 * SLOW):
    """Runs one TP job, a rank per device, to completion; the ranks' replies.
    graph: each step is a CUDA graph holding the kernel and the collective.
    A job that has not ended after timeout_s of the wall (the tenants' 60 s
    by default: ~5 s at the cap) hung or crawled."""
    ranks = [w.client(env=env) for _ in devices]
    for c, d in zip(ranks, devices):
        c.ok(f"init {d}")
    out = [None] * len(ranks)

    def go(i):
        out[i] = ranks[i].ok(f"tp 1500 400 {len(ranks)} {steps} {warm} {group} {int(graph)}")

    ts = [threading.Thread(target=go, args=(i,)) for i in range(len(ranks))]
    for t in ts:
        t.start()
    for t in ts:
        t.join(timeout=timeout_s)
    hung = any(t.is_alive() for t in ts)
    for c in ranks:
        c.kill() if hung else c.close()
    assert not hung, "a rank hung or crawled"
    return out


def speed(reply):
    """Steps per step time alone: 1.0 is the speed of an unthrottled job."""
    return reply["counted"] * STEP_US / reply["elapsed_us"]


@pytest.mark.parametrize("graph", [False, True], ids=["launched", "cuda_graph"])
def test_a_capped_tp_job_runs_at_its_cap_on_each_gpu_and_never_crawls(world, graph):
    """Both ranks of one container capped at 40 on their own GPUs. Charged
    the time its all-reduce spun for a peer held back by the cap (the peer's
    wait), each rank was held back longer in turn: on 2 x H200 such a loop ran
    at 0.02 of native (issue 26); on this driver, with collectives treated as
    any kernel, the ranks had not finished 500 steps after 180 s of the
    tenants' time (about 4.8 s at the cap). The same with each step captured
    as a CUDA graph (a CUDA-graph TP decoder): charged whole, spin included,
    the ranks had not finished 500 steps after 60 s of the tenants' time
    (src/interposer/compute_graphs.h)."""
    w = tp_world(world, GPUSLICE_CORES=CAP)
    out = tp_ranks(w, steps=500, warm=50, graph=graph, timeout_s=12 * SLOW if graph else 60 * SLOW)
    print("cap 40:", [(round(speed(r), 3), r["p99_us"], r["longest_us"]) for r in out])
    for r in out:
        assert abs(speed(r) - CAP / 100) <= 0.05, out
        # a step waits for one short off-period at most (GS_LIM_CYCLE_NS),
        # never for turns of the peer's waits: 99 % of the steps shorter than
        # 3 x the mean step at the cap (windows of half a period stood the
        # job still for 15 ms at a time: steps of 25-30 ms on 2 x H200). The
        # longest alone is no measure: on a loaded 2-core CI machine one
        # rank's longest of 450 steps took 16.9 ms (3.6 x), and the rerun
        # passed
        assert r["p99_us"] < 3 * STEP_US / (CAP / 100), out


def test_two_capped_tp_jobs_side_by_side_each_get_most_of_their_cap(world):
    """Two containers, each a TP job with a rank on each GPU, capped 30 and
    70. When each GPU's turns went to whoever asked first, the two GPUs'
    turns were not aligned: a rank that held the turn on one GPU spun in its
    all-reduce while its peer waited for the other job's turn on the other
    GPU (on 2 x H200 the pair got 0.12-0.14 / 0.31-0.39; here 0.22 / 0.38).
    The turn frame (src/core/turn_frame.h) gives each job the same slots on
    both GPUs. What is left is about a step lost at each slot's edge
    (docs/compute.md, Limitations): each job gets at least 0.75 of its cap
    (0.24-0.26 / 0.56-0.61 here), never more than its cap, and no step waits
    for more than a frame and a turn's bound (on 2 x H200, before the turn
    was given up for a drain behind a collective, steps of 5-7 s)."""
    w30 = tp_world(world, GPUSLICE_CORES=30)
    w70 = tp_world(world, GPUSLICE_CORES=70, GPUSLICE_REGION=str(w30.tmp / "other.region"))
    out = {}

    def job(name, w, group, steps):
        out[name] = tp_ranks(w, steps=steps, warm=steps // 10, group=group)

    # steps in proportion to the caps: the jobs run side by side to the end
    ts = [threading.Thread(target=job, args=("30", w30, 0, 300)), threading.Thread(target=job, args=("70", w70, 1, 700))]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    print({cap: [(round(speed(r), 3), r["longest_us"]) for r in rs] for cap, rs in out.items()})
    for cap, replies in out.items():
        for r in replies:
            assert 0.75 * int(cap) / 100 <= speed(r) <= int(cap) / 100 + 0.05, out
            assert r["longest_us"] < 0.2e6, out


def held_back_beside(world, tmp_path, rank):
    """Container A is held to its cap of 30 on GPU 0 and uses GPU 1 lightly
    (bursts of 0.5 ms every 5 ms: 0.1 of it, under its cap there) from
    another process; if rank, the two are ranks of a job (they launched a
    collective together). Container B, capped at 70, keeps GPU 1 busy.
    Returns what A waited on each GPU (s) and the light process's burst
    reply."""
    a = tp_world(world, GPUSLICE_CORES=30, GPUSLICE_REGION=str(tmp_path / f"a-{rank}.region"))
    b = tp_world(world, GPUSLICE_CORES=70, GPUSLICE_REGION=str(tmp_path / f"b-{rank}.region"))
    heavy, light, other = a.client(), a.client(), b.client()
    for c, d, us in ((heavy, 0, 2000), (light, 1, 500), (other, 1, 2000)):
        c.ok(f"init {d}")
        c.ok(f"kernel {us}")
    if rank:  # a step of a job of two ranks, the heavy process and the light one
        ts = [threading.Thread(target=c.ok, args=("tp 500 100 2 1 0 3",)) for c in (heavy, light)]
        for t in ts:
            t.start()
        for t in ts:
            t.join(timeout=10 * SLOW)
        # past GS_LIM_THROTTLED_NS: a collective that spun makes its job
        # contend for that long by itself (gs_compute_collective_spun)
        time.sleep(0.6 * SLOW)
    out = {}
    jobs = [("heavy", heavy, "run kernel 2.0 0 4"), ("other", other, "run kernel 2.0 0 4"),
            ("light", light, "burst 1 4500 1.2")]
    ts = [threading.Thread(target=lambda n=n, c=c, line=line: out.update({n: c.ok(line)})) for n, c, line in jobs]
    for t in ts:
        t.start()
    for t in ts:
        t.join(timeout=60 * SLOW)
    assert not any(t.is_alive() for t in ts), "a tenant hung"
    doc = top(a.env["GPUSLICE_REGION"])
    waited = {d["uuid"][-1]: (d["compute_waited_ns"] or 0) / 1e9 for c in doc["containers"] for d in c["devices"]}
    for c in (heavy, light, other):
        c.close()
    print(f"rank {rank}: A waited per GPU (s):", waited, "light:", out["light"]["reply"])
    assert waited.get("0", 0) > 0.3, waited  # held to its cap there
    return waited, out["light"]


def test_a_job_held_back_on_one_gpu_takes_its_turns_on_all_of_them(world, tmp_path):
    """A's rank on GPU 1 takes A's slots of the turn frame there, so its
    launches wait for B's slot to end. Contending only where its own account
    held it back, a job's ranks followed the frame on some GPUs and took
    turns first come on the others, and two TP jobs capped 30 / 70 on
    4 x H200 got 0.258-0.267 / 0.617-0.634 of alone
    (bench/results/multigpu-2026-11-28-h200.md); here the rank never waited
    on GPU 1. A process of A that is no rank goes on never waiting there."""
    waited, light = held_back_beside(world, tmp_path, rank=True)
    assert waited.get("1", 0) > 0.3, waited  # of its 1.2 s of bursts
    # a burst waits for B's slot at most, never for more than a frame and a turn's bound
    assert light["worst_us"] < 0.2e6, light
    waited, light = held_back_beside(world, tmp_path, rank=False)
    assert waited.get("1", 0) == 0, waited
