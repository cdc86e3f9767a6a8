"""Harness for the interposer's integration tests.

Each test runs tenants (gs_client) with libgpuslice.so preloaded on top of
the SIMULATED driver from tests/simdriver -- our own stand-in for
libcuda.so.1 and libnvidia-ml.so.1, not NVIDIA's. Paths come from CTest's
environment (see CMakeLists.txt)."""
import json
import os
import subprocess
import sys

import pytest

MiB = 1 << 20
GiB = 1 << 30

BUILD = os.environ.get("GS_BUILD_DIR", "")
SIMDIR = os.environ.get("GPUSLICE_SIMDRIVER_DIR", "")
CLIENT = os.environ.get("GS_CLIENT", "")
CLI = os.environ.get("GPUSLICE_CLI", "")
LIB = os.environ.get("GPUSLICE_LIB", "")
SIM_CLOCK = os.environ.get("GPUSLICE_SIM_CLOCK", "")
# The simulated driver's device i (tests/simdriver/sim_state.c).
SIM_UUID = "GPU-00000000-5151-0000-0000-00000000000{}"
SIMCTL = os.path.join(BUILD, "tests", "simdriver", "gpuslice-simctl")
# GS_TEST_TRACE=1: each timing test's measured replies on stderr (pytest -s);
# an absolute path: appended to that file instead, as tools/test.sh runs them.
TRACE = os.environ.get("GS_TEST_TRACE", "")
TRACE = TRACE if TRACE == "1" or os.path.isabs(TRACE) else ""


def sanitizer_preload():
    """ASan must be the first library loaded, ahead of our preload."""
    if os.environ.get("GPUSLICE_SANITIZE", "").upper() not in ("ON", "1", "TRUE"):
        return []
    libs = []
    for name in ("libasan.so", "libubsan.so"):
        path = subprocess.run(["gcc", f"-print-file-name={name}"], capture_output=True, text=True).stdout.strip()
        if os.path.isabs(path):
            libs.append(os.path.realpath(path))
    return libs


def pid_namespace():
    """The command that runs a client in a pid namespace of its own, as each
    container runs: unshare as root, inside a user namespace otherwise."""
    for cmd in (["unshare", "--pid", "--fork", "--kill-child"],
                ["unshare", "--user", "--map-root-user", "--pid", "--fork", "--kill-child"]):
        if subprocess.run([*cmd, "true"], capture_output=True).returncode == 0:
            return cmd
    pytest.skip("no pid namespace can be made here (unshare --pid, also inside a user namespace)")


class World:
    """One simulated node (sim state file) and one container (region)."""

    def __init__(self, tmp_path, limit="1GiB", sim_mem=16 * GiB, ctx_overhead="256MiB", extra=None, slowdown=1):
        """slowdown: the tenants' monotonic clock runs this many times slower
        than the wall (tests/simdriver/sim_clock.c), their sleeps and the
        simulated device with it."""
        self.tmp = tmp_path
        self.region = str(tmp_path / "container.region")
        self.sim_state = str(tmp_path / "gpu.state")
        env = {k: v for k, v in os.environ.items()
               if not k.startswith(("GPUSLICE_", "CUDA_DEVICE_", "GPU_CORE_", "LIBCUDA_"))}
        env.update({
            "LD_LIBRARY_PATH": SIMDIR,
            "LD_PRELOAD": ":".join(sanitizer_preload() + ([SIM_CLOCK] if slowdown > 1 else []) + [LIB]),
            "GPUSLICE_SIM_STATE": self.sim_state,
            "GPUSLICE_SIM_MEM": str(sim_mem),
            "GPUSLICE_SIM_CTX_OVERHEAD": str(512 * MiB),
            "GPUSLICE_REGION": self.region,
            "ASAN_OPTIONS": "detect_leaks=0:verify_asan_link_order=0",
        })
        if slowdown > 1:
            env["GPUSLICE_SIM_CLOCK_SLOWDOWN"] = str(slowdown)
        if limit is not None:
            env["CUDA_DEVICE_MEMORY_LIMIT"] = limit
        if ctx_overhead is not None:
            env["GPUSLICE_CTX_OVERHEAD"] = ctx_overhead
        env.update(extra or {})
        self.env = env

    def client(self, mode="getproc", env=None, wrap=()):
        """wrap: a command that runs the client, e.g. unshare's."""
        return Client(mode, {**self.env, **(env or {})}, wrap)

    def usage(self):
        """(used, limit) of device 0 as `gpuslice top --json` reports it."""
        doc = json.loads(subprocess.run([CLI, "top", "--json", self.region], check=True,
                                        capture_output=True, text=True).stdout)
        devs = doc["containers"][0]["devices"]
        if not devs:
            return 0, None
        return devs[0]["memory_used_bytes"], devs[0]["memory_limit_bytes"]

    def gpu_used(self):
        """Device memory the simulated GPU says is in use (all processes)."""
        out = subprocess.run([SIMCTL, self.sim_state], check=True, capture_output=True, text=True).stdout
        for line in out.splitlines():
            f = line.split()
            if f[0] == "device" and f[1] == "0":
                return int(f[f.index("used") + 1])
        return 0


class Client:
    def __init__(self, mode, env, wrap=()):
        self.p = subprocess.Popen([*wrap, CLIENT, mode], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, text=True, env=env)

    def cmd(self, line):
        self.p.stdin.write(line + "\n")
        self.p.stdin.flush()
        if line.strip() == "hold":
            return {"reply": self.p.stdout.readline().strip()}
        reply = self.p.stdout.readline().strip()
        if not reply:
            raise AssertionError(f"client died on {line!r}: {self.p.stderr.read()}")
        out = {"reply": reply}
        for tok in reply.split():
            if "=" in tok:
                k, v = tok.split("=", 1)
                out[k] = int(v) if v.lstrip("-").isdigit() else v
        if TRACE and line.split()[0] in ("run", "burst", "replay", "tp"):
            # the measured values of timing tests, to compare with their bounds
            # (docs/testing.md: GS_TEST_TRACE=1 and pytest -s)
            test = os.environ.get("PYTEST_CURRENT_TEST", "?").split(" ")[0].split("::")[-1]
            if os.path.isabs(TRACE):
                with open(TRACE, "a") as fh:
                    fh.write(f"trace {test}: {line} -> {reply}\n")
            else:
                print(f"\ntrace {test}: {line} -> {reply}", file=sys.stderr, flush=True)
        return out

    def ok(self, line):
        r = self.cmd(line)
        assert r["rc"] == 0, f"{line!r} -> {r['reply']}"
        return r

    def kill(self):
        self.p.kill()
        self.p.wait()

    def close(self):
        if self.p.poll() is None:
            self.p.stdin.close()
            self.p.wait(timeout=30)
        return self.p.stderr.read()


@pytest.fixture
def world(tmp_path):
    return lambda **kw: World(tmp_path, **kw)
