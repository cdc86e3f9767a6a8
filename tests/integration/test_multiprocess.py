"""Processes of one container share one limit: racing allocators never
overshoot it together, and a process killed at any moment -- even inside
the shared lock -- leaves nothing behind."""
import random
import threading
import time

import pytest

from conftest import GiB, MiB


def watch_peaks(w, stop, peaks):
    while not stop.is_set():
        used, limit = w.usage()
        peaks["region"] = max(peaks["region"], used)
        peaks["gpu"] = max(peaks["gpu"], w.gpu_used())
        time.sleep(0.005)


@pytest.mark.parametrize("nprocs", [2, 8])
def test_racing_processes_never_exceed_the_limit(world, nprocs):
    limit = 8 * GiB
    # Context overhead measured through NVML, so that the simulated GPU's own
    # count (context + allocations) is comparable with the limit.
    w = world(limit="8GiB", ctx_overhead=None, sim_mem=64 * GiB)
    clients = [w.client() for _ in range(nprocs)]
    for c in clients:
        c.ok("init")
    stop, peaks = threading.Event(), {"region": 0, "gpu": 0}
    t = threading.Thread(target=watch_peaks, args=(w, stop, peaks))
    t.start()
    replies = [None] * nprocs

    def race(i):
        replies[i] = clients[i].ok(f"race 268435456 400 {i + 1}")

    threads = [threading.Thread(target=race, args=(i,)) for i in range(nprocs)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    stop.set()
    t.join()
    assert sum(r["oom"] for r in replies) > 0, "the race never reached the limit"
    assert peaks["region"] <= limit
    assert peaks["gpu"] <= limit
    used, _ = w.usage()
    assert used == w.gpu_used()  # our count matches the device's exactly
    for c in clients:
        c.close()
    assert w.usage()[0] == 0 and w.gpu_used() == 0


def test_sigkill_of_a_holder_frees_its_share_at_once(world):
    w = world(limit="1GiB")
    a = w.client()
    a.ok("init")
    assert a.cmd("fill 67108864")["count"] == 12
    assert w.usage()[0] == GiB
    a.kill()
    b = w.client()
    b.ok("init")
    r = b.cmd("fill 67108864")
    assert r["count"] == (GiB - 256 * MiB) // (64 * MiB)  # the whole limit, nothing lost
    b.close()


def test_death_inside_the_lock_neither_deadlocks_nor_leaks(world):
    w = world(limit="1GiB")
    a = w.client()
    a.ok("init")
    a.ok("alloc 134217728")
    d = w.client()
    d.p.stdin.write("lockdie\n")
    d.p.stdin.flush()
    assert d.p.wait(timeout=10) == -9  # killed while holding the lock
    b = w.client()
    b.ok("init")  # would hang forever on a non-robust lock
    b.ok("alloc 67108864")
    # Usage is rebuilt from the live processes: a's 128 MiB + b's 64 MiB,
    # two contexts, and nothing of the half-made update.
    assert w.usage()[0] == 2 * 256 * MiB + 192 * MiB
    a.close()
    b.close()
    assert w.usage()[0] == 0


def test_random_sigkills_lose_nothing(world):
    w = world(limit="2GiB")
    rng = random.Random(1234)
    for _ in range(12):
        victims = [w.client() for _ in range(3)]
        for v in victims:
            v.p.stdin.write("init\nrace 16777216 100000 7\n")
            v.p.stdin.flush()
        time.sleep(rng.uniform(0.0, 0.05))
        for v in victims:
            time.sleep(rng.uniform(0.0, 0.01))
            v.kill()
    c = w.client()
    c.ok("init")
    r = c.cmd("fill 67108864")
    assert r["count"] == (2 * GiB - 256 * MiB) // (64 * MiB)
    c.close()
    assert w.usage()[0] == 0
