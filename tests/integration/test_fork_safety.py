"""fork() at awkward moments: the child of a process whose other thread was
inside the interposer must not inherit a lock no thread will release."""
import os
import subprocess

from conftest import LIB, SIMDIR, sanitizer_preload


def test_a_fork_while_another_thread_resolves_the_driver_leaves_the_child_a_working_driver():
    env = dict(os.environ)
    env["LD_LIBRARY_PATH"] = SIMDIR
    env["LD_PRELOAD"] = ":".join(sanitizer_preload() + [os.environ["GS_SLOW_DLOPEN"], LIB])
    env["ASAN_OPTIONS"] = "detect_leaks=0:verify_asan_link_order=0"
    out = subprocess.run([os.environ["GS_FORK_RESOLVE"]], capture_output=True, text=True, env=env, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "child exited 0", (out.stdout, out.stderr)
