"""`gpuslice run` refuses a state directory another user could control (issue 16,
finding 6): a pre-created /tmp/gpuslice-<uid> owned by someone else, one that others
may write, or a symbolic link. The tests run as root, so "someone else" is a
directory chowned to another uid."""
import os

import pytest

from conftest import CLIENT, World
from test_cli import run


def state(w):
    return w.tmp / "state"


@pytest.fixture
def w(tmp_path):
    return World(tmp_path)


def test_own_directory_is_used(w):
    os.mkdir(state(w), 0o700)
    r = run(w, ["run", "--memory", "1GiB", "--", CLIENT], "init\n")
    assert r.returncode == 0, r.stderr


def test_directory_of_another_user_refused(w):
    if os.geteuid() != 0:
        pytest.skip("needs root to make a directory owned by another uid")
    os.mkdir(state(w), 0o755)
    os.chown(state(w), 4242, 4242)
    r = run(w, ["run", "--memory", "1GiB", "--", CLIENT], "init\n")
    assert r.returncode != 0 and "init" not in r.stdout
    assert (f"gpuslice run: state directory {state(w)} is owned by uid 4242, mode 0755, not by you "
            f"(uid 0) or root") in r.stderr, r.stderr
    assert os.listdir(state(w)) == []  # no region made there


def test_writable_by_others_refused(w):
    os.mkdir(state(w))
    os.chmod(state(w), 0o777)
    r = run(w, ["run", "--memory", "1GiB", "--", CLIENT], "init\n")
    assert r.returncode != 0
    assert f"state directory {state(w)} (owner uid {os.geteuid()}) has mode 0777" in r.stderr, r.stderr
    os.chmod(state(w), 0o770)
    assert "has mode 0770" in run(w, ["run", "--", CLIENT], "init\n").stderr


def test_symlink_refused(w):
    target = w.tmp / "elsewhere"
    os.mkdir(target, 0o700)
    os.symlink(target, state(w))
    r = run(w, ["run", "--memory", "1GiB", "--", CLIENT], "init\n")
    assert r.returncode != 0
    assert "not a directory (a symbolic link or a file)" in r.stderr, r.stderr
    assert os.listdir(target) == []
