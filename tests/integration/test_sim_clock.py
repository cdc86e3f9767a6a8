"""The compute tests' slowed clock (tests/simdriver/sim_clock.c), preloaded
into a Python child: its monotonic clock, its sleeps and a futex timeout run
SLOW times slower than the parent's wall clock. Bounds are one-sided where
a loaded machine could only make them longer."""
import os
import subprocess
import sys
import time

from conftest import SIM_CLOCK, sanitizer_preload

SLOW = 4

CHILD = r"""
import ctypes, struct, sys, time
t0 = time.monotonic()
time.sleep(0.1)                                   # clock_nanosleep, absolute
libc = ctypes.CDLL(None, use_errno=True)
word = ctypes.c_int(0)
ts = (ctypes.c_long * 2)(0, 100_000_000)
libc.syscall(202, ctypes.byref(word), 0, 0, ts)   # SYS_futex, FUTEX_WAIT: times out
ctypes.CDLL(None).usleep(100_000)
print(time.monotonic() - t0)
"""


def run_child(slowdown):
    env = {**os.environ, "LD_PRELOAD": ":".join(sanitizer_preload() + [SIM_CLOCK]),
           "ASAN_OPTIONS": "detect_leaks=0:verify_asan_link_order=0", "GPUSLICE_SIM_CLOCK_SLOWDOWN": slowdown}
    t0 = time.monotonic()
    out = subprocess.run([sys.executable, "-c", CHILD], env=env, capture_output=True, text=True, timeout=60)
    return out, time.monotonic() - t0


def test_the_clock_and_every_wait_run_slower_by_the_factor():
    out, wall = run_child(str(SLOW))
    assert out.returncode == 0, out.stderr
    simulated = float(out.stdout)
    # three waits of 0.1 s each: 0.3 s of the child's time, SLOW times that of the wall
    assert simulated >= 0.3, simulated
    assert wall >= 0.3 * SLOW, wall
    # the child's clock ran SLOW times slower than the wall over the same span
    assert simulated <= wall / SLOW + 0.05, (simulated, wall)


def test_a_bad_factor_is_refused_with_its_value():
    for bad in ("0", "65", "two", ""):
        out, _ = run_child(bad)
        assert out.returncode != 0, bad
        assert f"GPUSLICE_SIM_CLOCK_SLOWDOWN={bad} is not a whole number from 1 to 64" in out.stderr, out.stderr
