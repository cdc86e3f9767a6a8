"""`gpuslice run` and `gpuslice top` as a user drives them, on the
simulated driver."""
import json
import os
import subprocess
import sys
import time

from conftest import CLI, CLIENT, GiB, MiB, World


def alive(pid):
    """A process that exists and is not a zombie waiting to be reaped."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def cli_env(w):
    env = dict(w.env)
    for k in ("LD_PRELOAD", "GPUSLICE_REGION", "CUDA_DEVICE_MEMORY_LIMIT", "GPUSLICE_CTX_OVERHEAD"):
        env.pop(k, None)
    env["GPUSLICE_STATE_DIR"] = str(w.tmp / "state")
    env["GPUSLICE_CTX_OVERHEAD"] = "256MiB"
    # The CLI preloads the interposer itself; ASan runs keep theirs first.
    preload = [p for p in w.env["LD_PRELOAD"].split(":") if "gpuslice" not in p]
    if preload:
        env["LD_PRELOAD"] = ":".join(preload)
    return env


def run(w, args, stdin="", **kw):
    return subprocess.run([CLI, *args], input=stdin, capture_output=True, text=True, env=cli_env(w), **kw)


def holding(w, run_args, alloc=None):
    """`gpuslice run RUN_ARGS -- CLIENT`, left holding: after `init` and an
    allocation of alloc bytes (asserted to succeed), or before any driver
    call when alloc is None. The caller kills it."""
    holder = subprocess.Popen([CLI, "run", *run_args, "--", CLIENT], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True, env=cli_env(w))
    holder.stdin.write(("hold\n" if alloc is None else f"init\nalloc {alloc}\nhold\n"))
    holder.stdin.flush()
    if alloc is not None:
        assert "alloc rc=0" in holder.stdout.readline() + holder.stdout.readline()
    assert holder.stdout.readline().strip() == "holding"
    return holder


def test_run_limits_the_command(tmp_path):
    w = World(tmp_path)
    r = run(w, ["run", "--memory", "1GiB", "--", CLIENT], "init\ninfo\nfill 67108864\n")
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert "total=1073741824" in lines[1]
    assert f"count={(GiB - 256 * MiB) // (64 * MiB)}" in lines[2]
    # A private run cleans its state up when it ends.
    assert os.listdir(tmp_path / "state") == []


def test_runs_with_one_name_share_a_limit_and_top_shows_them(tmp_path):
    w = World(tmp_path)
    holder = holding(w, ["-m", "2GiB", "--name", "team-a"], 1073741824)
    try:
        r = run(w, ["run", "-m", "2GiB", "-n", "team-a", "--", CLIENT], "init\ninfo\n")
        info = r.stdout.splitlines()[1]
        # 2 GiB minus the holder's 1 GiB + context, minus our own context.
        assert f"free={2 * GiB - GiB - 2 * 256 * MiB} " in info, info
        top = json.loads(run(w, ["top", "--json"]).stdout)
        (c,) = [c for c in top["containers"] if c["container"] == "team-a"]
        assert c["devices"][0]["memory_limit_bytes"] == 2 * GiB
        assert c["devices"][0]["memory_used_bytes"] == GiB + 256 * MiB
        tenants = [p["pid"] for p in c["processes"]]
        assert tenants != []
        table = run(w, ["top"]).stdout
        assert "team-a" in table and "1.25 GiB" in table and "2.00 GiB" in table, table
    finally:
        holder.kill()  # SIGKILL: gpuslice run cannot forward it
        holder.wait()
    # The job does not outlive a killed `gpuslice run`.
    deadline = time.time() + 10
    while time.time() < deadline and any(alive(p) for p in tenants):
        time.sleep(0.05)
    assert not any(alive(p) for p in tenants)


def test_exit_codes(tmp_path):
    w = World(tmp_path)
    assert run(w, ["run", "--memory", "4GB", "--", "true"]).returncode == 2
    assert run(w, ["run", "--cores", "0", "--", "true"]).returncode == 2
    assert run(w, ["run", "--", "/no/such/program"]).returncode == 127
    assert run(w, ["run", "-m", "1GiB", "--", "sh", "-c", "exit 7"]).returncode == 7
    assert run(w, ["run", "-m", "1GiB", "--", "sh", "-c", "kill -9 $$"]).returncode == 128 + 9
    assert run(w, ["frobnicate"]).returncode == 2
    assert run(w, ["run", "--mode", "sharing", "--", "true"]).returncode == 2
    h = run(w, ["run", "--help"])
    assert h.returncode == 0 and "--memory" in h.stdout


def test_bad_inherited_configuration_stops_run_before_the_command(tmp_path):
    w = World(tmp_path)
    env = cli_env(w)
    env["CUDA_DEVICE_MEMORY_LIMIT"] = "12 parsecs"
    r = subprocess.run([CLI, "run", "--", "true"], capture_output=True, text=True, env=env)
    assert r.returncode == 2 and "CUDA_DEVICE_MEMORY_LIMIT" in r.stderr


def test_flag_errors_name_the_flag_the_user_typed(tmp_path):
    w = World(tmp_path)
    cases = [
        (["--memory", "4"], "--memory '4': no unit; write 4GiB"),
        (["--memory", "0"], "--memory '0': a limit must be above 0"),
        (["--memory", "0=4GiB,0=2GiB"], "device 0 is given twice"),
        (["--mode", "foo"], "--mode 'foo': expected cap or share"),
        (["--mode", "share", "--weight", "0"], "--weight '0': expected a whole number"),
        (["--weight", "70"], "--weight applies only with --mode share"),
        (["--mode", "share", "--cores", "30"], "--cores sets a cap, --mode share a weight"),
        (["--managed", "maybe"], "--managed 'maybe': expected count or ignore"),
    ]
    for flags, message in cases:
        r = run(w, ["run", *flags, "--", "true"])
        assert r.returncode == 2, (flags, r.stderr)
        assert message in r.stderr, (flags, r.stderr)
        assert "GPUSLICE_" not in r.stderr, (flags, r.stderr)
    # Bytes stay possible when said so.
    assert run(w, ["run", "--memory", "4096B", "--", "true"]).returncode == 0


def test_a_named_container_keeps_one_set_of_limits_and_rm_removes_it_when_idle(tmp_path):
    w = World(tmp_path)
    holder = holding(w, ["-m", "2GiB", "--name", "team-b"], 1048576)
    try:
        # While it runs: other limits are refused, the same ones join it.
        r = run(w, ["run", "-m", "4GiB", "--name", "team-b", "--", CLIENT], "init\n")
        assert r.returncode == 2, r.stderr
        assert "container 'team-b' is in use by 1 process with a memory limit of 2.00 GiB" in r.stderr
        assert "this run asks for 4.00 GiB" in r.stderr
        assert run(w, ["run", "-m", "2GiB", "--name", "team-b", "--", CLIENT], "init\n").returncode == 0
        r = run(w, ["rm", "team-b"])
        assert r.returncode == 1 and "in use by 1 process" in r.stderr, r.stderr
        assert "idle" not in run(w, ["top"]).stdout
    finally:
        holder.kill()
        holder.wait()
    time.sleep(0.2)  # the job gets SIGTERM from the dying run; let it go
    # Nobody uses it: top says so, and a run with new limits starts it afresh.
    deadline = time.time() + 10
    while time.time() < deadline and "idle" not in run(w, ["top"]).stdout:
        time.sleep(0.05)
    top = run(w, ["top"]).stdout
    assert "(idle: no live process; 'gpuslice rm team-b' removes it)" in top, top
    assert json.loads(run(w, ["top", "--json"]).stdout)["containers"][0]["idle"] is True
    r = run(w, ["run", "-m", "4GiB", "--name", "team-b", "--", CLIENT], "init\ninfo\n")
    assert r.returncode == 0, r.stderr
    assert "total=4294967296" in r.stdout, r.stdout
    r = run(w, ["rm", "team-b", "nobody"])
    assert r.returncode == 1
    assert "removed team-b" in r.stdout and "no container 'nobody'" in r.stderr
    assert "no gpuslice containers in " in run(w, ["top"]).stdout


def test_a_region_another_build_left_is_started_afresh_when_unused_and_kept_while_used(tmp_path):
    """A region of another layout (an older gpuslice's: its version 6 was
    128 bytes shorter) or a damaged one: where no process of any build holds
    a lock on it, the run replaces it, as it does a region of other limits;
    before, every `gpuslice run --name` of that container failed until the
    user removed the file. While a process holds a lock on it, the run is
    refused and says why; the file stays as it was."""
    w = World(tmp_path)
    regions = w.tmp / "state"
    regions.mkdir(exist_ok=True)
    old = regions / "old-build.region"
    old.write_bytes(b"\x21GPUSLCE" + bytes(4096))
    r = run(w, ["run", "-m", "2GiB", "--name", "old-build", "--", CLIENT], "init\ninfo\n")
    assert r.returncode == 0, r.stderr
    assert f"region {old} has 4104 bytes, a region has" in r.stderr, r.stderr
    assert "no process used it: container 'old-build' starts afresh" in r.stderr, r.stderr
    assert "total=2147483648" in r.stdout, r.stdout
    # a live process (of any build) holding a lock on the file keeps it
    old.write_bytes(bytes(4096))
    locker = subprocess.Popen([sys.executable, "-c", LOCK_AND_WAIT, str(old)], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True)
    try:
        assert locker.stdout.readline().strip() == "locked"
        r = run(w, ["run", "-m", "2GiB", "--name", "old-build", "--", CLIENT], "init\n")
        assert r.returncode != 0, r.stdout
        assert "has 4096 bytes, a region has" in r.stderr and "a process still uses it" in r.stderr, r.stderr
        assert "Stop the processes of container 'old-build'" in r.stderr, r.stderr
        assert old.read_bytes() == bytes(4096)
    finally:
        locker.kill()
        locker.wait()


# Holds an OFD write lock on one byte of argv[1] until killed.
LOCK_AND_WAIT = """
import fcntl, os, struct, sys, time
fd = os.open(sys.argv[1], os.O_RDWR)
fcntl.fcntl(fd, 37, struct.pack("hhqqi", fcntl.F_WRLCK, 0, 100, 1, 0))  # F_OFD_SETLK
print("locked", flush=True)
time.sleep(600)
"""


def test_top_shows_a_configured_cap_before_the_first_launch(tmp_path):
    w = World(tmp_path)
    holder = holding(w, ["-m", "2GiB", "-c", "30", "--name", "capped"], 1048576)
    try:
        line = [ln for ln in run(w, ["top"]).stdout.splitlines() if ln.startswith("capped")][0]
        assert line.split()[-1] == "-/30%cap", line
    finally:
        holder.kill()
        holder.wait()


def test_top_shows_a_named_runs_memory_limit_before_its_first_gpu_use(tmp_path):
    w = World(tmp_path)
    holder = holding(w, ["-m", "3GiB", "--name", "early"])  # alive, but no driver call yet
    try:
        line = [ln for ln in run(w, ["top"]).stdout.splitlines() if ln.startswith("early")][0]
        assert "(no GPU used yet)" in line and "3.00 GiB" in line, line
        (c,) = json.loads(run(w, ["top", "--json"]).stdout)["containers"]
        assert c["default_memory_limit_bytes"] == 3 * GiB and c["devices"] == []
    finally:
        holder.kill()
        holder.wait()


def test_a_killed_private_runs_state_is_swept_by_the_next_private_run(tmp_path):
    """SIGKILL cannot be forwarded: a private run killed so left its
    run-<pid>.region behind, for good; one whose name a later run with the
    same pid took was joined, stale limits and all."""
    w = World(tmp_path)
    holder = holding(w, ["-m", "1GiB"], 64 * MiB)
    left = os.listdir(tmp_path / "state")
    assert left == [f"run-{holder.pid}.region"], left
    with open(f"/proc/{holder.pid}/task/{holder.pid}/children") as f:
        (command,) = [int(c) for c in f.read().split()]
    holder.kill()
    holder.wait()
    deadline = time.time() + 30
    while alive(command):  # it gets SIGTERM as its parent dies
        assert time.time() < deadline, "the killed run's command outlived it"
        time.sleep(0.05)
    assert os.listdir(tmp_path / "state") == left
    # A named container's region is not a private run's: kept.
    assert run(w, ["run", "-m", "1GiB", "-n", "team-a", "--", "true"]).returncode == 0
    r = run(w, ["run", "-m", "1GiB", "--", "true"])
    assert r.returncode == 0, r.stderr
    assert sorted(os.listdir(tmp_path / "state")) == ["team-a.region"]
