"""`gpuslice top` shows names a tenant wrote into its region, and the names of
region files in the state directory (issue 27, finding 9): they must not reach the
terminal raw (escapes, bells) and `--json` must list every container, whatever
bytes its name holds. Shown names are valid UTF-8 with control characters and
stray bytes as \\xNN (src/core/text_escape.h)."""
import json
import os
import shutil
import subprocess

from conftest import CLI

CONTAINER_AT = 24  # struct gs_region: u64 magic, u32 version, u32 size, u64 created, char container[128]
HOSTILE = b"\xff\xfe\x1b]0;pwned\x07"
SHOWN = r"\xff\xfe\x1b]0;pwned\x07"


def hostile_state_dir(w):
    """A state directory with the hostile container and a file with a hostile name."""
    state = w.tmp / "state"
    os.mkdir(state, 0o700)
    region = str(state / "evil.region")
    c = w.client(env={"GPUSLICE_REGION": region})
    c.ok("init")
    c.close()
    with open(region, "r+b") as f:
        f.seek(CONTAINER_AT)
        f.write(HOSTILE + b"\0")
    odd = os.path.join(str(state).encode(), b"bad\xff\x1b[2J.region")
    shutil.copyfile(region, odd)
    with open(odd, "r+b") as f:
        f.seek(CONTAINER_AT)
        f.write(b"\0")  # no name: top shows the file's path
    return str(state)


def top(*args):
    return subprocess.run([CLI, "top", *args], capture_output=True, check=False)


def test_the_table_escapes_tenant_names(world):
    state = hostile_state_dir(world())
    r = top("--state-dir", state)
    assert r.returncode == 0, r.stderr
    out = r.stdout.decode("utf-8")  # strict
    assert "\x1b" not in out and "\x07" not in out, out
    assert SHOWN in out, out
    assert r"bad\xff\x1b[2J.region" in out, out


def test_json_lists_every_container(world):
    state = hostile_state_dir(world())
    r = top("--json", "--state-dir", state)
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout.decode("utf-8"))
    names = sorted(c["container"] for c in doc["containers"])
    assert len(names) == 2, doc
    assert SHOWN in names, names
    assert any(n.endswith(r"bad\xff\x1b[2J.region") for n in names), names
    for c in doc["containers"]:
        assert c["devices"] and c["devices"][0]["uuid"], c
