"""`gpuslice top` shows the GPUs (index, name, total, free, the sum of the
limits on each, OVERCOMMITTED past its size), a complete --json with
unlimited as null, a --watch that behaves in a pipe, and fails when the
state directory cannot be read. Runs on the simulated GPU."""
import json
import os
import re
import subprocess
import threading

from conftest import CLI, CLIENT, GiB, SIMDIR
from test_cli_errors import plain_env

SIZE = "16GiB"


def env(tmp_path):
    # top reads NVML; here the simulated GPU that the runs below use.
    return plain_env(tmp_path, LD_LIBRARY_PATH=SIMDIR, GPUSLICE_CTX_OVERHEAD="256MiB",
                     GPUSLICE_SIM_STATE=str(tmp_path / "state" / f"simulated-gpu-{SIZE}.state"))


def hold(tmp_path, *args):
    """A container using the GPU (one context, no launch yet), left holding."""
    p = subprocess.Popen([CLI, "run", "--simulated-gpu", SIZE, *args, "--", CLIENT], stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, text=True, env=env(tmp_path))
    p.stdin.write("init\nhold\n")
    p.stdin.flush()
    while True:
        line = p.stdout.readline()
        assert line, "the client ended before holding"
        if line.strip() == "holding":
            return p


def top(tmp_path, *args):
    return subprocess.run([CLI, "top", *args], capture_output=True, text=True, env=env(tmp_path), timeout=60)


def test_gpu_rows_sum_the_limits_and_mark_overcommit(tmp_path):
    a = hold(tmp_path, "--name", "a", "--memory", "10GiB", "--cores", "30")
    try:
        r = top(tmp_path)
        assert r.returncode == 0, r.stderr
        gpu = r.stdout.splitlines()[1].split()
        assert gpu[0] == "0" and "sim" in r.stdout.splitlines()[1]
        assert re.search(r"16\.0+ GiB .* 10\.0+ GiB +1$", r.stdout.splitlines()[1]), r.stdout
        assert "OVERCOMMITTED" not in r.stdout
        b = hold(tmp_path, "--name", "b", "--memory", "10GiB", "--mode", "share", "--weight", "70")
        try:
            r = top(tmp_path)
            row = r.stdout.splitlines()[1]
            assert re.search(r" 20\.0+ GiB +2  OVERCOMMITTED$", row), r.stdout
            doc = json.loads(top(tmp_path, "--json").stdout)
        finally:
            b.kill()
            b.wait()
    finally:
        a.kill()
        a.wait()
    assert doc["schema_version"] == 1
    (g,) = doc["gpus"]
    assert g["index"] == 0 and g["memory_total_bytes"] == 16 * GiB and g["memory_free_bytes"] <= 16 * GiB
    assert g["memory_limits_bytes"] == 20 * GiB and g["containers"] == 2 and g["overcommitted"] is True
    devs = {c["container"]: c["devices"][0] for c in doc["containers"]}
    # Before the first launch the cap and the weight are there already.
    assert devs["a"]["compute_mode"] == "cap" and devs["a"]["compute_limit_percent"] == 30
    assert devs["a"]["compute_weight"] is None and devs["a"]["compute_used_ppm"] is None
    assert devs["b"]["compute_mode"] == "share" and devs["b"]["compute_weight"] == 70
    assert devs["b"]["compute_limit_percent"] is None


def test_unlimited_is_null_in_json(tmp_path):
    p = hold(tmp_path, "--name", "free")
    try:
        doc = json.loads(top(tmp_path, "--json").stdout)
    finally:
        p.kill()
        p.wait()
    (c,) = doc["containers"]
    assert c["devices"][0]["memory_limit_bytes"] is None
    assert c["default_memory_limit_bytes"] is None
    assert c["devices"][0]["compute_mode"] is None
    assert doc["gpus"][0]["memory_limits_bytes"] is None


def refreshes(tmp_path, args, wanted):
    """What `top ARGS` writes into a pipe up to its wanted-th refresh (a line
    that is_refresh accepts). Waits for the output, not for a time; a
    watchdog ends a top that never writes."""
    p = subprocess.Popen([CLI, "top", *args], stdout=subprocess.PIPE, text=True, env=env(tmp_path))
    watchdog = threading.Timer(60, p.kill)
    watchdog.start()
    lines = []
    try:
        while sum(map(wanted, lines)) < 2:
            line = p.stdout.readline()
            assert line, f"top stopped writing after {lines!r}"
            lines.append(line)
    finally:
        watchdog.cancel()
        p.kill()
        p.wait()
    return "".join(lines)


def test_watch_into_a_pipe_writes_no_escapes_and_prints_when_empty(tmp_path):
    out = refreshes(tmp_path, ["--watch", "1"], lambda line: "no gpuslice containers" in line)
    assert "\033" not in out, repr(out)
    out = refreshes(tmp_path, ["--watch", "1", "--json"], lambda line: "\"containers\"" in line)
    assert "\033" not in out, repr(out)
    assert [json.loads(line)["containers"] for line in out.splitlines()] == [[], []], repr(out)


def test_unreadable_state_directory_fails(tmp_path):
    not_a_dir = tmp_path / "file"
    not_a_dir.write_text("")
    r = top(tmp_path, "--state-dir", str(not_a_dir))
    assert r.returncode == 1
    assert f"state directory {not_a_dir}: not a directory" in r.stderr
    r = top(tmp_path, "--state-dir", str(tmp_path / "missing"))
    assert r.returncode == 0 and "no gpuslice containers" in r.stdout


def test_simulated_gpu_rows_without_a_driver(tmp_path):
    """After `run --simulated-gpu`, top finds the same simulated GPU with no
    driver on the library path."""
    p = hold(tmp_path, "--name", "sim", "--memory", "2GiB")
    try:
        bare = plain_env(tmp_path)
        r = subprocess.run([CLI, "top", "--json"], capture_output=True, text=True, env=bare)
        assert json.loads(r.stdout)["gpus"] == [], r.stdout
        r = subprocess.run([CLI, "top", "--json", "--simulated-gpu", SIZE], capture_output=True, text=True,
                           env=bare)
        (g,) = json.loads(r.stdout)["gpus"]
    finally:
        p.kill()
        p.wait()
    assert g["memory_total_bytes"] == 16 * GiB and g["memory_limits_bytes"] == 2 * GiB and g["containers"] == 1
    # 2 GiB of which the context's 256 MiB are held: the simulated GPU's own state.
    assert g["memory_free_bytes"] < 16 * GiB
    r = subprocess.run([CLI, "top", "--simulated-gpu", "16"], capture_output=True, text=True, env=plain_env(tmp_path))
    assert r.returncode == 2 and "--simulated-gpu '16'" in r.stderr


def test_watch_keeps_no_more_descriptors_as_it_refreshes(tmp_path):
    """Each refresh loaded NVML anew and left a descriptor and a mapping of
    it behind."""
    os.mkdir(tmp_path / "state", 0o700)
    p = subprocess.Popen([CLI, "top", "--simulated-gpu", SIZE, "--watch", "1"], stdout=subprocess.PIPE, text=True,
                         env=plain_env(tmp_path))
    watchdog = threading.Timer(60, p.kill)
    watchdog.start()
    counts = []
    try:
        blanks = 0
        while blanks < 5:
            line = p.stdout.readline()
            assert line, "top stopped writing"
            if line == "\n":  # a refresh begins
                blanks += 1
                if blanks in (2, 5):
                    counts.append(len(os.listdir(f"/proc/{p.pid}/fd")))
    finally:
        watchdog.cancel()
        p.kill()
        p.wait()
    assert counts[0] == counts[1], counts
