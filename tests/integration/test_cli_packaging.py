"""What `cmake --install` puts in place works from the prefix alone, even
moved away from the build tree: the CLI with its simulated driver, sim's
plot script and trace folder, man pages made from --help, bash completion
that knows every flag, and the LICENSE."""
import os
import re
import shutil
import subprocess

from conftest import BUILD, CLI, CLIENT
from test_cli_errors import plain_env

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SUBCOMMANDS = ("run", "top", "rm", "sim", "inspect")


def install(tmp_path):
    """Installs into a prefix, then moves it: nothing may point back."""
    first = tmp_path / "first"
    r = subprocess.run(["cmake", "--install", BUILD, "--prefix", str(first)], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    prefix = tmp_path / "moved"
    shutil.move(str(first), str(prefix))
    return prefix


def long_flags(help_text):
    """The long options an --help lists (in its option lines)."""
    return set(re.findall(r"^\s+(?:-\w, )?(--[a-z][a-z-]*)", help_text, re.M))


def test_installed_cli_runs_on_its_own_simulated_driver(tmp_path):
    prefix = install(tmp_path)
    cli = str(prefix / "bin" / "gpuslice")
    r = subprocess.run([cli, "run", "--simulated-gpu", "16GiB", "--memory", "1GiB", "--", CLIENT],
                       input="init\ninfo\n", capture_output=True, text=True,
                       env=plain_env(tmp_path, GPUSLICE_CTX_OVERHEAD="256MiB"), timeout=60)
    assert r.returncode == 0, r.stderr
    assert "total=1073741824" in r.stdout
    assert os.access(prefix / "bin" / "gpuslice-simctl", os.X_OK)


def test_installed_sim_uses_the_prefix(tmp_path):
    prefix = install(tmp_path)
    r = subprocess.run([str(prefix / "bin" / "gpuslice"), "sim", "--plot", str(tmp_path / "p.png")],
                       capture_output=True, text=True, env=plain_env(tmp_path))
    # No trace was copied in: sim looks in the prefix's folder, not the checkout's.
    assert r.returncode != 0
    assert f"{prefix}/bin/../share/gpuslice/traces/openb/" in r.stderr, r.stderr
    assert (prefix / "share" / "gpuslice" / "traces" / "openb").is_dir()
    assert os.access(prefix / "share" / "gpuslice" / "plot_sim.py", os.X_OK)


def test_man_pages_are_the_help_texts(tmp_path):
    prefix = install(tmp_path)
    for cmd in ("",) + SUBCOMMANDS:
        name = f"gpuslice-{cmd}" if cmd else "gpuslice"
        page = (prefix / "share" / "man" / "man1" / f"{name}.1").read_text()
        assert page.startswith(f".TH {name.upper()} 1 ")
        help_text = subprocess.run([CLI, *([cmd] if cmd else []), "--help"], capture_output=True, text=True).stdout
        for flag in long_flags(help_text):
            assert flag in page, (name, flag)
        if shutil.which("groff"):
            warn = subprocess.run(["groff", "-man", "-ww", "-z"], input=page, capture_output=True, text=True)
            assert warn.stderr == "", (name, warn.stderr)


def test_bash_completion_knows_every_flag(tmp_path):
    prefix = install(tmp_path)
    script = (prefix / "share" / "bash-completion" / "completions" / "gpuslice").read_text()
    assert "complete -F _gpuslice gpuslice" in script
    for cmd in SUBCOMMANDS:
        help_text = subprocess.run([CLI, cmd, "--help"], capture_output=True, text=True).stdout
        block = re.search(rf"^    {cmd}\)\n(.*?)\n        ;;", script, re.M | re.S).group(1)
        listed = set(re.search(r'flags="([^"]*)"', block).group(1).split())
        assert long_flags(help_text) <= listed, (cmd, long_flags(help_text) - listed)
    assert subprocess.run(["bash", "-n", str(prefix / "share" / "bash-completion" / "completions" / "gpuslice")]
                          ).returncode == 0


def test_license_is_apache_2_and_installed(tmp_path):
    with open(os.path.join(ROOT, "LICENSE")) as f:
        text = f.read()
    assert "Apache License" in text and "Version 2.0, January 2004" in text
    prefix = install(tmp_path)
    assert (prefix / "share" / "doc" / "gpuslice" / "LICENSE").read_text() == text
