"""`gpuslice run` never starts a command under limits other than those the
user typed (issue 27, items 11-14; docs/security.md)."""
import ctypes.util
import subprocess
import threading

from conftest import CLI, CLIENT, LIB, SIMDIR, GiB, World
from test_cli import cli_env, holding, run


def test_a_named_run_with_other_limits_is_refused_before_the_first_touches_the_gpu(tmp_path):
    w = World(tmp_path)
    holder = holding(w, ["--memory", "8GiB", "--name", "r"])  # no driver call yet
    try:
        r = run(w, ["run", "--memory", "1GiB", "--name", "r", "--", "sh", "-c", "echo ran"])
        assert r.returncode == 2, r.stderr
        assert "ran" not in r.stdout
        assert "container 'r' is in use" in r.stderr and "8.00 GiB" in r.stderr, r.stderr
        # The same limits join.
        assert run(w, ["run", "--memory", "8GiB", "--name", "r", "--", "true"]).returncode == 0
    finally:
        holder.kill()
        holder.wait()
    # Once no run uses it, other limits start it afresh.
    assert run(w, ["run", "--memory", "1GiB", "--name", "r", "--", "true"]).returncode == 0


def test_concurrent_runs_of_one_name_never_see_a_half_made_region(tmp_path):
    w = World(tmp_path)
    failures = []

    def one(name):
        r = run(w, ["run", "--memory", "1GiB", "--name", name, "--", "true"])
        if r.returncode != 0:
            failures.append(r.stderr)

    for round_ in range(15):
        threads = [threading.Thread(target=one, args=(f"c{round_}",)) for _ in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    assert failures == []


def test_a_library_that_is_not_the_interposer_is_refused(tmp_path):
    w = World(tmp_path)
    for lib, message in (("/dev/zero", "cannot be loaded"),
                         (f"{SIMDIR}/libnvidia-ml.so.1", "is not the gpuslice interposer")):
        r = run(w, ["run", "--memory", "1GiB", "--lib", lib, "--", "sh", "-c", "echo ran"])
        assert r.returncode == 125, (lib, r.stderr)
        assert "ran" not in r.stdout and message in r.stderr, (lib, r.stderr)


def test_an_ld_preload_entry_that_only_contains_the_library_name_does_not_count(tmp_path):
    w = World(tmp_path)
    env = cli_env(w)
    env["LD_PRELOAD"] = ":".join(filter(None, [env.get("LD_PRELOAD"), LIB + ".disabled"]))
    r = subprocess.run([CLI, "run", "--memory", "1GiB", "--", CLIENT], input="init\ninfo\n",
                       capture_output=True, text=True, env=env)
    assert r.returncode == 0, r.stderr
    assert "total=1073741824" in r.stdout.splitlines()[1], r.stdout


def test_inherited_limit_variables_are_refused(tmp_path):
    w = World(tmp_path)
    cases = [("GPUSLICE_MEMORY_LIMIT_0", "8GiB", "--memory"),
             ("CUDA_DEVICE_MEMORY_LIMIT", "4", "--memory"),
             ("GPUSLICE_MANAGED", "ignore", "--managed"),
             ("GPUSLICE_CORES", "50", "--cores"),
             ("GPUSLICE_CTX_OVERHEAD", "0", "uncharged")]
    for var, value, says in cases:
        env = {**cli_env(w), var: value}
        r = subprocess.run([CLI, "run", "--memory", "1GiB", "--", "sh", "-c", "echo ran"],
                           capture_output=True, text=True, env=env)
        assert r.returncode == 2, (var, r.stderr)
        assert "ran" not in r.stdout, var
        assert f"{var}='{value}'" in r.stderr and says in r.stderr, (var, r.stderr)


def test_limits_must_name_gpus_that_exist_and_fit_them(tmp_path):
    w = World(tmp_path, extra={"GPUSLICE_SIM_DEVICES": "2"})
    cases = [(["--memory", "999TiB"], "more than GPU 0"),
             (["--memory", "5=1GiB"], "there is no GPU 5 here: the command sees 2 GPUs"),
             (["--device", "1", "--memory", "1=8GiB"], "there is no GPU 1 here: the command sees 1 GPU"),
             (["--device", "7"], "'7' is not a GPU of this host; this host has 2 GPUs"),
             (["--device", "0,0", "--memory", "1GiB"], "given twice"),
             # a second --memory left the first one's limit on a GPU it never checked
             (["--memory", "5=1GiB", "--memory", "0=1GiB"], "--memory given twice ('5=1GiB', then '0=1GiB')")]
    for flags, message in cases:
        r = run(w, ["run", *flags, "--", "sh", "-c", "echo ran"])
        assert r.returncode == 2, (flags, r.stderr)
        assert "ran" not in r.stdout and message in r.stderr, (flags, r.stderr)
    # What does exist passes: GPU 1 of the host is GPU 0 of the command.
    assert run(w, ["run", "--device", "1", "--memory", "0=8GiB", "--", "true"]).returncode == 0


def test_gpus_named_by_index_are_numbered_as_nvidia_smi_numbers_them(tmp_path):
    """CUDA puts the fastest GPU first unless CUDA_DEVICE_ORDER says
    PCI_BUS_ID, so on a host of mixed GPUs an index gpuslice checked through
    NVML named another GPU in the command."""
    w = World(tmp_path, extra={"GPUSLICE_SIM_DEVICES": "2"})
    show = ["sh", "-c", "echo order=$CUDA_DEVICE_ORDER"]
    for flags in (["--device", "1"], ["--memory", "0=1GiB"]):
        r = run(w, ["run", *flags, "--", *show])
        assert r.returncode == 0 and "order=PCI_BUS_ID" in r.stdout, (flags, r.stderr)
    assert "order=\n" in run(w, ["run", "--memory", "1GiB", "--", *show]).stdout  # no index: left alone
    env = {**cli_env(w), "CUDA_DEVICE_ORDER": "FASTEST_FIRST"}
    r = subprocess.run([CLI, "run", "--device", "1", "--", *show], capture_output=True, text=True, env=env)
    assert r.returncode == 2 and "order=" not in r.stdout, r.stderr
    assert "CUDA_DEVICE_ORDER='FASTEST_FIRST' numbers the GPUs otherwise than nvidia-smi" in r.stderr, r.stderr


def test_without_nvml_limits_cannot_be_checked_and_the_run_is_refused(tmp_path):
    if ctypes.util.find_library("nvidia-ml"):
        return  # a real NVML on this host would answer
    w = World(tmp_path)
    env = {**cli_env(w), "LD_LIBRARY_PATH": str(tmp_path)}
    r = subprocess.run([CLI, "run", "--memory", "1GiB", "--", "sh", "-c", "echo ran"],
                       capture_output=True, text=True, env=env)
    assert r.returncode == 2 and "ran" not in r.stdout, r.stderr
    assert "no NVIDIA driver here" in r.stderr and "cannot be checked" in r.stderr, r.stderr
