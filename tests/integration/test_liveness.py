"""A process's slot lives exactly as long as the process: its usage comes
back the moment it dies, in whatever pid namespace it ran, and a forked
child never keeps its parent's slot (or its own) alive by accident."""
import json
import os
import signal
import subprocess

from conftest import CLI, GiB, MiB, pid_namespace

CTX = 256 * MiB  # the World's GPUSLICE_CTX_OVERHEAD


def gone(pid):
    """True once pid has exited (a zombie has closed its files already)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] in ("Z", "X")
    except FileNotFoundError:
        return True


def wait_gone(pid):
    while not gone(pid):
        os.sched_yield()


def only_child(pid):
    with open(f"/proc/{pid}/task/{pid}/children") as f:
        kids = f.read().split()
    assert len(kids) == 1, kids
    return int(kids[0])


def listed_processes(w):
    doc = json.loads(subprocess.run([CLI, "top", "--json", w.region], check=True,
                                    capture_output=True, text=True).stdout)
    return doc["containers"][0]["processes"]


def test_restart_in_a_new_pid_namespace_gets_the_whole_limit(world):
    w = world(limit="1GiB")
    a = w.client(wrap=pid_namespace())
    a.ok("init")
    a.ok(f"alloc {512 * MiB}")
    assert w.usage()[0] == CTX + 512 * MiB
    assert len(listed_processes(w)) == 1
    os.kill(only_child(a.p.pid), signal.SIGKILL)  # the tenant, pid 1 of its namespace
    a.p.wait()
    b = w.client(wrap=pid_namespace())  # the restarted container: another pid namespace
    b.ok("init")
    assert b.cmd(f"fill {64 * MiB}")["count"] == (GiB - CTX) // (64 * MiB)  # nothing lost to the dead one
    assert w.usage()[0] == GiB
    assert len(listed_processes(w)) == 1  # b only: the dead pid 1 of a's namespace is gone
    b.close()
    assert listed_processes(w) == []


def test_a_forked_child_holds_a_slot_of_its_own(world):
    w = world(limit="1GiB")
    a = w.client()
    a.ok("init")
    a.ok(f"alloc {128 * MiB}")
    child = a.ok(f"forkhold {256 * MiB}")["child"]
    assert w.usage()[0] == 2 * CTX + 384 * MiB
    os.kill(child, signal.SIGKILL)
    wait_gone(child)
    # The child's context and allocation come back, the parent's stay.
    assert a.cmd(f"fill {64 * MiB}")["count"] == (GiB - CTX - 128 * MiB) // (64 * MiB)
    a.close()
    assert w.usage()[0] == 0


def test_a_killed_parents_charges_come_back_while_its_idle_child_lives(world):
    """A data loader's worker, forked, never touches the GPU. Its mapping of
    the region, inherited, pinned the description the parent had locked
    its slot through: killed, the parent's charges stayed while the worker
    lived."""
    w = world(limit="1GiB")
    a = w.client()
    a.ok("init")
    a.ok(f"alloc {128 * MiB}")
    child = a.ok("forkhold 0 idle")["child"]
    try:
        assert w.usage()[0] == CTX + 128 * MiB
        a.kill()
        assert w.usage()[0] == 0
    finally:
        os.kill(child, signal.SIGKILL)
        wait_gone(child)


def test_a_forked_child_that_closes_its_descriptors_keeps_its_charges(world):
    """Many programs close every descriptor above 2 as they start. A forked
    child took its slot's lock through a descriptor of its own that no
    mapping held (its mapping was the parent's), so closing it dropped the
    lock: the next process of the container to reach the limit took the
    child's slot for dead, dropped its 256 MiB, and allocated past the
    limit."""
    w = world(limit="2GiB")
    a = w.client()
    a.ok("init")
    a.ok(f"alloc {128 * MiB}")
    child = a.ok(f"forkhold {256 * MiB} close")["child"]
    try:
        b = w.client()
        b.ok("init")
        n = b.cmd(f"fill {64 * MiB}")["count"]
        assert n == (2 * GiB - 3 * CTX - 384 * MiB) // (64 * MiB), n
        assert w.usage()[0] <= 2 * GiB
        b.close()
    finally:
        os.kill(child, signal.SIGKILL)
        wait_gone(child)
    a.close()


def test_a_process_that_closes_its_descriptors_and_reuses_their_numbers_drops_no_other_charges(world):
    """A process closes every descriptor above 2 and opens files of its own,
    which take the lowest numbers, its region descriptor's among them. At
    the limit, the liveness of the other slots was asked through that
    number, of a file nobody locks: every other process of the container
    was taken for dead, its charges dropped, and the allocation went past
    the limit."""
    w = world(limit="2GiB")
    b = w.client()
    b.ok("init")
    b.ok(f"alloc {512 * MiB}")
    a = w.client()
    a.ok("init")
    a.ok(f"alloc {64 * MiB}")
    a.ok("closefds")
    n = a.cmd(f"fill {64 * MiB}")["count"]
    assert n == (2 * GiB - 2 * CTX - 576 * MiB) // (64 * MiB), n
    assert w.usage()[0] <= 2 * GiB
    a.close()
    b.close()
