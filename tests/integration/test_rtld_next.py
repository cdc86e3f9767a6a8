"""Our exported dlsym must not change what dlsym(RTLD_NEXT) means for other
libraries: glibc judges "next" from the caller's return address."""
import os
import subprocess

from conftest import LIB, sanitizer_preload


def run(preload):
    env = dict(os.environ)
    env["LD_PRELOAD"] = ":".join(preload)
    env["ASAN_OPTIONS"] = "detect_leaks=0:verify_asan_link_order=0"
    out = subprocess.run([os.environ["GS_NEXT_MAIN"]], capture_output=True, text=True, env=env, check=True)
    return out.stdout.strip()


def test_rtld_next_without_the_interposer():
    assert run(sanitizer_preload()) == "2"


def test_rtld_next_with_the_interposer_preloaded():
    assert run(sanitizer_preload() + [LIB]) == "2"
