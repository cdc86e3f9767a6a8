"""`gpuslice run`, `top` and `rm` refuse a state directory another user could
control (issue 16, finding 6, and a later review): a pre-created /tmp/gpuslice-<uid>
owned by someone else, one that others may write, a symbolic link (a trailing '/'
included), or one below a directory another user owns or may write. The tests run
as root, so "someone else" is a directory chowned to another uid."""
import os
import subprocess

import pytest

from conftest import CLI, CLIENT, World
from test_cli import cli_env, run


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


def test_a_trailing_slash_does_not_get_a_symbolic_link_past_the_check(w):
    """With 'link/' the kernel follows the link despite O_NOFOLLOW, and the
    command's later opens by name could reach wherever the link pointed by
    then."""
    target = w.tmp / "elsewhere"
    os.mkdir(target, 0o700)
    os.symlink(target, state(w))
    for given in (f"{state(w)}/", f"{state(w)}/.", f"{state(w)}//"):
        r = run(w, ["run", "--state-dir", given, "--memory", "1GiB", "--", CLIENT], "init\n")
        assert r.returncode == 125, (given, r.stderr)
        assert "not a directory (a symbolic link or a file)" in r.stderr, (given, r.stderr)
    assert os.listdir(target) == []


def needs_root():
    if os.geteuid() != 0:
        pytest.skip("needs root to make a directory owned by another uid")


def test_a_directory_on_the_way_that_another_user_controls_is_refused(w):
    needs_root()
    theirs = w.tmp / "theirs"
    os.mkdir(theirs, 0o755)
    os.chown(theirs, 4242, 4242)
    os.mkdir(theirs / "state", 0o700)  # ours, but they may rename it away and put theirs there
    r = run(w, ["run", "--state-dir", str(theirs / "state"), "--memory", "1GiB", "--", CLIENT], "init\n")
    assert r.returncode == 125, r.stderr
    assert f"{theirs}, on the way to the state directory, is owned by uid 4242" in r.stderr, r.stderr
    shared = w.tmp / "shared"
    os.mkdir(shared)
    os.chmod(shared, 0o777)
    os.mkdir(shared / "state", 0o700)
    r = run(w, ["run", "--state-dir", str(shared / "state"), "--memory", "1GiB", "--", CLIENT], "init\n")
    assert r.returncode == 125 and "has mode 0777" in r.stderr, r.stderr
    os.chmod(shared, 0o1777)  # sticky, as /tmp: nobody else may rename what is ours there
    r = run(w, ["run", "--state-dir", str(shared / "state"), "--memory", "1GiB", "--", CLIENT], "init\n")
    assert r.returncode == 0, r.stderr


def test_a_relative_state_directory_is_used_as_an_absolute_one(w):
    env = cli_env(w)
    os.mkdir(w.tmp / "rel", 0o700)
    r = subprocess.run([CLI, "run", "--state-dir", "rel/./here", "--name", "r", "--memory", "1GiB", "--", CLIENT],
                       input="init\n", capture_output=True, text=True, env=env, cwd=w.tmp)
    assert r.returncode == 0, r.stderr
    assert (w.tmp / "rel" / "here" / "r.region").exists()
    r = subprocess.run([CLI, "run", "--state-dir", "../x", "--", "true"], capture_output=True, text=True, env=env,
                       cwd=w.tmp)
    assert r.returncode == 125 and "state directory '../x': name it without '..'" in r.stderr, r.stderr


def test_top_and_rm_refuse_a_directory_of_another_user(w):
    needs_root()
    os.mkdir(state(w), 0o755)
    os.chown(state(w), 4242, 4242)
    for args in (["top"], ["top", "--simulated-gpu", "80GiB"], ["rm", "x"]):
        r = run(w, args)
        assert r.returncode == 1, (args, r.stderr)
        assert f"state directory {state(w)} is owned by uid 4242" in r.stderr, (args, r.stderr)
    assert os.listdir(state(w)) == []


def test_top_on_a_simulated_gpu_follows_no_link_planted_for_its_state(w):
    """The simulated driver rewrote a state file that was not one of its
    build's, following a symbolic link to whatever it named."""
    os.mkdir(state(w), 0o700)
    victim = w.tmp / "notes.txt"
    victim.write_text("keep me\n")
    os.symlink(victim, state(w) / "simulated-gpu-80GiB.state")
    run(w, ["top", "--simulated-gpu", "80GiB"])
    assert victim.read_text() == "keep me\n"
