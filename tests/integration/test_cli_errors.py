"""How the gpuslice CLI reports mistakes: the error first, naming what was
typed, then one line pointing at --help; a "did you mean" where one word is
close; sensible hints; and nothing a project script exports makes `run`
refuse to start."""
import glob
import os
import re
import subprocess

from conftest import BUILD, CLI, CLIENT, LIB, SIMDIR, sanitizer_preload

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def plain_env(tmp_path, **extra):
    """No driver on the library path, no gpuslice variables: a machine
    without a GPU, as a new user has it."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("GPUSLICE_", "CUDA_DEVICE_", "GPU_CORE_", "LIBCUDA_", "LD_"))}
    env["GPUSLICE_STATE_DIR"] = str(tmp_path / "state")
    env["ASAN_OPTIONS"] = "detect_leaks=0:verify_asan_link_order=0"
    if sanitizer_preload():
        env["LD_PRELOAD"] = ":".join(sanitizer_preload())
    env.update(extra)
    return env


def cli(tmp_path, *args, **extra):
    return subprocess.run([CLI, *args], capture_output=True, text=True, env=plain_env(tmp_path, **extra),
                          timeout=60)


def usage_error(r, cmd):
    """Exit 2, the message first, one hint line last, and no usage dump."""
    lines = r.stderr.splitlines()
    assert r.returncode == 2, r.stderr
    assert lines[0].startswith(f"{cmd}: "), r.stderr
    assert lines[-1] == f"Try '{cmd} --help' for more information.", r.stderr
    assert len(lines) == 2, r.stderr
    return lines[0]


def test_unknown_flag_leads_with_the_error_and_suggests(tmp_path):
    first = usage_error(cli(tmp_path, "run", "--memroy", "4GiB", "--", "true"), "gpuslice run")
    assert first == "gpuslice run: unknown option '--memroy'; did you mean --memory?"
    first = usage_error(cli(tmp_path, "top", "--jsno"), "gpuslice top")
    assert first.endswith("did you mean --json?")
    first = usage_error(cli(tmp_path, "rm", "--stat-dir=/x", "a"), "gpuslice rm")
    assert first == "gpuslice rm: unknown option '--stat-dir'; did you mean --state-dir?"
    assert "did you mean" not in usage_error(cli(tmp_path, "run", "--zzzzzzzz", "--", "true"), "gpuslice run")
    assert usage_error(cli(tmp_path, "run", "--memory"), "gpuslice run") == \
        "gpuslice run: option '--memory' needs a value"
    first = usage_error(cli(tmp_path, "sim", "--polcy", "all"), "gpuslice sim")
    assert first == "gpuslice sim: unknown option '--polcy'; did you mean --policy?"


def test_unknown_subcommand_suggests(tmp_path):
    first = usage_error(cli(tmp_path, "tpo"), "gpuslice")
    assert first == "gpuslice: unknown command 'tpo'; did you mean 'top'?"
    assert "did you mean" not in usage_error(cli(tmp_path, "frobnicate"), "gpuslice")
    usage_error(cli(tmp_path), "gpuslice")


def test_bad_values_end_with_the_hint(tmp_path):
    first = usage_error(cli(tmp_path, "run", "--cores", "101", "--", "true"), "gpuslice run")
    assert "--cores '101'" in first
    usage_error(cli(tmp_path, "run", "--memory", "4GiB"), "gpuslice run")  # no command


def test_bare_byte_count_suggests_its_unit(tmp_path):
    first = usage_error(cli(tmp_path, "run", "--memory", "1073741824", "--", "true"), "gpuslice run")
    assert "write 1GiB" in first and "1073741824GiB" not in first
    first = usage_error(cli(tmp_path, "run", "--memory", "0=1610612736", "--", "true"), "gpuslice run")
    assert "write 1536MiB" in first
    assert "write 4GiB or 4MiB" in usage_error(cli(tmp_path, "run", "--memory", "4", "--", "true"), "gpuslice run")


def script_variables():
    """Every GPUSLICE_* variable the project's scripts read or set."""
    names = set()
    for path in glob.glob(os.path.join(ROOT, "tools", "*.sh")):
        with open(path) as f:
            names |= set(re.findall(r"\$\{?(GPUSLICE_[A-Z0-9_]+)", f.read()))
    return names


def test_project_script_variables_do_not_stop_run(tmp_path):
    """A user who exported a variable for one of our scripts can still run
    gpuslice: none of them is in the namespace `run` refuses."""
    for name in sorted(script_variables()):
        r = cli(tmp_path, "run", "--", "true", **{name: "1"})
        assert r.returncode == 0, f"{name}: {r.stderr}"


def test_run_without_a_driver_says_so_and_points_at_the_simulated_gpu(tmp_path):
    r = cli(tmp_path, "run", "--", "true")
    assert r.returncode == 0, r.stderr
    assert "no NVIDIA driver here" in r.stderr and "--simulated-gpu" in r.stderr
    r = cli(tmp_path, "run", "--memory", "4GiB", "--", "true")
    assert r.returncode == 2
    assert "no NVIDIA driver here" in r.stderr and "--simulated-gpu 80GiB" in r.stderr


def test_simulated_gpu_runs_a_program_under_its_limit(tmp_path):
    r = subprocess.run([CLI, "run", "--simulated-gpu", "16GiB", "--memory", "1GiB", "--", CLIENT],
                       input="init\ninfo\n", capture_output=True, text=True,
                       env=plain_env(tmp_path, GPUSLICE_CTX_OVERHEAD="256MiB"), timeout=60)
    assert r.returncode == 0, r.stderr
    assert "total=1073741824" in r.stdout, r.stdout
    assert "no NVIDIA driver" not in r.stderr
    assert os.path.exists(tmp_path / "state" / "simulated-gpu-16GiB.state")
    # A limit above the simulated GPU is refused, as on a real one.
    r = cli(tmp_path, "run", "--simulated-gpu", "16GiB", "--memory", "20GiB", "--", "true")
    assert r.returncode == 2 and "more than GPU 0" in r.stderr, r.stderr
    first = usage_error(cli(tmp_path, "run", "--simulated-gpu", "80", "--", "true"), "gpuslice run")
    assert "--simulated-gpu '80'" in first


def test_sim_refuses_an_unwritable_plot_before_simulating(tmp_path):
    # The trace directory does not exist either: the plot is checked first.
    r = cli(tmp_path, "sim", "--trace-dir", str(tmp_path / "none"), "--plot", str(tmp_path / "no" / "x.png"))
    assert r.returncode == 2
    assert "--plot" in r.stderr and "nothing was simulated" in r.stderr, r.stderr
    assert "no trace" not in r.stderr


def test_version_names_the_commit(tmp_path):
    r = cli(tmp_path, "--version")
    assert r.returncode == 0
    m = re.fullmatch(r"gpuslice \d+\.\d+\.\d+ \(commit (([0-9a-f]{7,})(-dirty)?|unknown)\)\n", r.stdout)
    assert m, r.stdout
    # In a checkout it is one of its commits (the one built, which a later
    # commit without a rebuild leaves behind HEAD).
    if subprocess.run(["git", "-C", ROOT, "rev-parse", "HEAD"], capture_output=True).returncode == 0:
        assert m.group(2), r.stdout
        known = subprocess.run(["git", "-C", ROOT, "cat-file", "-e", m.group(2) + "^{commit}"], capture_output=True)
        assert known.returncode == 0, r.stdout


def test_interposer_messages_name_gpuslice_once(tmp_path):
    env = plain_env(tmp_path, LD_LIBRARY_PATH=SIMDIR, GPUSLICE_SIM_STATE=str(tmp_path / "gpu.state"),
                    GPUSLICE_MEMROY_LIMIT="1GiB")
    env["LD_PRELOAD"] = ":".join(sanitizer_preload() + [LIB])
    r = subprocess.run([CLIENT], input="init\n", capture_output=True, text=True, env=env, timeout=60)
    assert "unknown variable GPUSLICE_MEMROY_LIMIT" in r.stderr, r.stderr
    assert "error: gpuslice:" not in r.stderr, r.stderr
