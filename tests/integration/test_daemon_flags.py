"""Every gpuslice program answers --version, and a bad flag value gets a
message naming the program, the flag and the value (exit status 2)."""
import os
import subprocess

import pytest

PROGRAMS = {name: os.environ.get(var, "") for name, var in (
    ("gpuslice", "GPUSLICE_CLI"), ("gpuslice-extender", "GPUSLICE_EXTENDER"),
    ("gpuslice-webhook", "GPUSLICE_WEBHOOK"), ("gpuslice-node-agent", "GPUSLICE_NODE_AGENT"))}


def run(prog, *args):
    return subprocess.run([PROGRAMS[prog], *args], capture_output=True, text=True, timeout=30)


@pytest.mark.parametrize("prog", sorted(PROGRAMS))
def test_version(prog):
    r = run(prog, "--version")
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith(f"{prog} ") and r.stdout.split()[1][0].isdigit(), r.stdout  # NAME VERSION [(commit ...)]


@pytest.mark.parametrize("prog,args,message", [
    ("gpuslice-extender", ["--port", "99999"], "gpuslice-extender: --port '99999': expected a whole number from 0 to 65535"),
    ("gpuslice-extender", ["--port=99999"], "--port '99999'"),
    ("gpuslice-extender", ["--policy", "best"], "gpuslice-extender: --policy 'best': unknown policy"),
    ("gpuslice-extender", ["--tls-cert", "/nonexistent", "--tls-key", "/nonexistent"],
     "gpuslice-extender: --tls-cert '/nonexistent': cannot read it"),
    ("gpuslice-webhook", ["--tls-cert=/nonexistent", "--tls-key=/nonexistent"],
     "gpuslice-webhook: --tls-cert '/nonexistent': cannot read it"),
    ("gpuslice-webhook", ["--threads", "0"], "gpuslice-webhook: --threads '0': expected a whole number from 1 to 64"),
    ("gpuslice-node-agent", ["--replicas", "x"], "gpuslice-node-agent: --replicas 'x': expected a whole number"),
    ("gpuslice-node-agent", ["--node", "n", "--dra", "--dra-driver", "x" * 70 + ".io"],
     "gpuslice-node-agent: --dra-driver '" + "x" * 60 + "...': too long"),
    ("gpuslice-node-agent", ["--node", "n", "--dra", "--dra-driver", "Not_A.Domain"],
     "gpuslice-node-agent: --dra-driver 'Not_A.Domain': use a DNS subdomain"),
    ("gpuslice-node-agent", ["--node", "n", "--dra", "--dra-registry-dir", "/r" * 60],
     "too long for a unix socket path"),
])
def test_bad_values_name_the_flag(prog, args, message):
    r = run(prog, *args)
    assert r.returncode == 2, (r.stdout, r.stderr)
    assert message in r.stderr, r.stderr
