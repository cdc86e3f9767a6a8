"""The README's first command ends with tools/demo.sh: on a machine without
a GPU it must show, on the simulated driver, a tenant shown a 4 GiB GPU,
refused past it, and listed by `gpuslice top`; the command it prints works
when pasted, and its container stays until `gpuslice rm`."""
import os
import re
import subprocess

from conftest import BUILD, sanitizer_preload

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def demo_env(tmp_path):
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("GPUSLICE_", "CUDA_DEVICE_", "GPU_CORE_", "LIBCUDA_"))}
    env.update({"GPUSLICE_STATE_DIR": str(tmp_path / "state"),
                "ASAN_OPTIONS": "detect_leaks=0:verify_asan_link_order=0"})
    if sanitizer_preload():
        env["LD_PRELOAD"] = ":".join(sanitizer_preload())
    return env


def run_demo(env):
    return subprocess.run([os.path.join(ROOT, "tools", "demo.sh"), "--simulated", "--build", BUILD],
                          capture_output=True, text=True, env=env, timeout=120)


def test_demo_on_the_simulated_gpu(tmp_path):
    r = run_demo(demo_env(tmp_path))
    assert r.returncode == 0, r.stdout + r.stderr
    out = r.stdout
    assert "SIMULATED GPU" in out
    assert "shows a 4.0 GiB GPU" in out
    # 512 MiB of context overhead, then three whole GiB fit and the fourth does not.
    assert "allocation #3 of 1 GiB succeeded" in out
    assert "allocation #4 of 1 GiB refused with CUDA_ERROR_OUT_OF_MEMORY" in out
    assert re.search(r"^demo\s+GPU-\S+\s+3\.50 GiB\s+4\.00 GiB\s+1\b", out, re.M), out
    # top's GPU row is the host's 80 GiB GPU, not the container's 4 GiB view of it.
    assert re.search(r"^0\s+.*\s80\.0+ GiB\s.*\s4\.0+ GiB\s+1$", out, re.M), out


def test_demo_commands_work_when_pasted_and_leave_the_container(tmp_path):
    env = demo_env(tmp_path)
    r = run_demo(env)
    assert r.returncode == 0, r.stdout + r.stderr
    shown = [line[2:] for line in r.stdout.splitlines() if line.startswith("$ ") and " run " in line]
    assert len(shown) == 1, r.stdout
    # The printed command, pasted into a shell elsewhere, runs the tenant again
    # (in the container the demo left, with the same limits).
    again = subprocess.run(shown[0], shell=True, capture_output=True, text=True, env=env, cwd=str(tmp_path),
                           timeout=120)
    assert again.returncode == 0, again.stdout + again.stderr
    assert "allocation #4 of 1 GiB refused" in again.stdout
    # Then the two commands it shows last: top lists the container on the
    # 80 GiB simulated GPU, and rm removes it.
    top_cmd, rm_cmd = [line.split("  #")[0].strip() for line in r.stdout.splitlines()[-2:]]
    top = subprocess.run(top_cmd, shell=True, capture_output=True, text=True, env=env)
    assert re.search(r"^0\s+.*\s80\.0+ GiB\s", top.stdout, re.M), top.stdout
    assert re.search(r"^demo\s+GPU-\S+\s+0 B\s+4\.00 GiB\s+0\b", top.stdout, re.M), top.stdout
    assert subprocess.run(rm_cmd, shell=True, env=env).returncode == 0
    assert "demo.region" not in os.listdir(tmp_path / "state")


def test_install_puts_every_program_library_and_preload_file_under_the_prefix(tmp_path):
    prefix = tmp_path / "prefix"
    r = subprocess.run(["cmake", "--install", BUILD, "--prefix", str(prefix)], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    for prog in ("gpuslice", "gpuslice-node-agent", "gpuslice-extender", "gpuslice-webhook"):
        assert os.access(prefix / "bin" / prog, os.X_OK), prog
    lib = prefix / "lib" / "libgpuslice.so"
    assert lib.is_file()
    assert (prefix / "share" / "gpuslice" / "ld.so.preload").read_text() == f"{lib}\n"
    assert (prefix / "share" / "doc" / "gpuslice" / "memory.md").is_file()
