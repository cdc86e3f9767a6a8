"""Container images built in the test run from this build, with no
registry: a root filesystem assembled from files (each program with the
libraries ldd lists for it), packed as an OCI image with umoci and archived
for `ctr image import`.

- pause: the static gs_cri_pause, alone.
- agent: deploy/node/Dockerfile's final stage (see build_agent).
- tenant: busybox-static (a shell), gs_client (a small CUDA program) and the
  simulated driver as libcuda.so.1 / libnvidia-ml.so.1 where the NVIDIA
  container toolkit would mount the real ones, and the sim's slowed clock
  (TENANT_SIM_CLOCK, for LD_PRELOAD). The interposer is not in the image:
  the device plugin's Allocate mounts it, with /etc/ld.so.preload."""
import json
import os
import re
import shutil
import subprocess

UMOCI = "/usr/bin/umoci"
BUSYBOX = "/bin/busybox"
LIBDIR = "/usr/lib/x86_64-linux-gnu"
TENANT_CLIENT = "/usr/local/bin/gs_client"
TENANT_SIM_CLOCK = "/usr/local/lib/libgpuslice_simclock.so"


def _libraries(path):
    """Absolute paths of the shared libraries path loads (ldd's list)."""
    out = subprocess.run(["ldd", path], capture_output=True, text=True).stdout
    libs = []
    for line in out.splitlines():
        m = re.search(r"(/\S+)\s+\(0x", line)
        if m:
            libs.append(m.group(1))
    return libs


def _put(root, src, dest, mode=None):
    target = os.path.join(root, dest.lstrip("/"))
    os.makedirs(os.path.dirname(target), exist_ok=True)
    shutil.copy2(src, target)
    if mode is not None:
        os.chmod(target, mode)


def _put_with_libraries(root, src, dest):
    _put(root, src, dest)
    for lib in _libraries(src):
        # Both the path ldd printed and the real file: the loader opens the
        # former, and a symlink in the image would point nowhere.
        _put(root, os.path.realpath(lib), lib)


def _pack(root, work, image, cmd, entrypoint=False):
    """root packed as an OCI image tagged with image's tag (ctr import
    names it image), cmd its command (or its entrypoint); returns the
    archive's path."""
    name = os.path.basename(root)
    tag = image.rsplit(":", 1)[1]
    layout = os.path.join(work, f"{name}-oci")
    shutil.rmtree(layout, ignore_errors=True)
    ref = f"{layout}:{tag}"
    subprocess.run([UMOCI, "init", "--layout", layout], check=True)
    subprocess.run([UMOCI, "new", "--image", ref], check=True)
    subprocess.run([UMOCI, "insert", "--image", ref, root, "/"], check=True)
    args = [UMOCI, "config", "--image", ref]
    for word in cmd:
        args += ["--config.entrypoint" if entrypoint else "--config.cmd", word]
    subprocess.run(args, check=True)
    archive = os.path.join(work, f"{name}.tar")
    subprocess.run(["tar", "-C", layout, "-cf", archive, "."], check=True)
    return archive


def build_pause(work, image, pause_binary):
    root = os.path.join(work, "pause")
    _put(root, pause_binary, "/pause", 0o755)
    return _pack(root, work, image, ["/pause"])


def build_tenant(work, image, client, simdir, interposer):
    root = os.path.join(work, "tenant")
    _put(root, BUSYBOX, "/bin/busybox", 0o755)
    for applet in ("sh", "cat", "echo", "id", "ls", "sleep", "printf", "rm", "mv", "dd", "grep", "touch"):
        os.symlink("busybox", os.path.join(root, "bin", applet))
    _put_with_libraries(root, client, TENANT_CLIENT)
    for lib in ("libcuda.so.1", "libnvidia-ml.so.1"):
        _put_with_libraries(root, os.path.join(simdir, lib), os.path.join(LIBDIR, lib))
    _put_with_libraries(root, os.path.join(simdir, "libgpuslice_simclock.so"), TENANT_SIM_CLOCK)
    for lib in _libraries(interposer):  # what the mounted interposer loads
        _put(root, os.path.realpath(lib), lib)
    os.makedirs(os.path.join(root, "tmp"), exist_ok=True)
    os.chmod(os.path.join(root, "tmp"), 0o1777)
    return _pack(root, work, image, ["/bin/sh"])


def _final_stage(dockerfile):
    """The last stage of a Dockerfile: its COPY lines as (source, dest,
    from-stage or None) and its ENTRYPOINT."""
    copies, entry = [], None
    for line in open(dockerfile):
        words = line.split()
        if not words:
            continue
        if words[0] == "FROM":
            copies, entry = [], None
        elif words[0] == "COPY":
            stage = words[1].split("=", 1)[1] if words[1].startswith("--from=") else None
            src, dest = words[-2], words[-1]
            copies.append((src, dest, stage))
        elif words[0] == "ENTRYPOINT":
            entry = json.loads(line.split(None, 1)[1])
    return copies, entry


def build_agent(work, image, dockerfile, repo, build_dir, simdir):
    """The node agent's image with deploy/node/Dockerfile's layout: each
    COPY of its final stage, from this build (its build stage's /build is
    our build tree) or from the repository, and its ENTRYPOINT. What its
    RUN apt-get installs (a Debian base and the agent's libraries) is
    replaced by the libraries ldd lists and busybox for the entrypoint's
    shell: CI has no registry for debian:bookworm-slim, and debootstrap
    would take minutes of the tests' budget."""
    root = os.path.join(work, "agent")
    _put(root, BUSYBOX, "/bin/busybox", 0o755)
    for applet in ("sh", "mkdir", "cp", "mv", "printf", "cat", "ls"):
        os.symlink("busybox", os.path.join(root, "bin", applet))
    copies, entry = _final_stage(dockerfile)
    if not copies or not entry:
        raise AssertionError(f"{dockerfile}: no COPY or ENTRYPOINT in its final stage")
    for src, dest, stage in copies:
        if stage is not None:
            if not src.startswith("/build/"):
                raise AssertionError(f"{dockerfile}: COPY --from={stage} {src}: not from /build")
            src = os.path.join(build_dir, src[len("/build/"):])
        else:
            src = os.path.join(repo, src)
        _put_with_libraries(root, src, dest)
    for lib in ("libcuda.so.1", "libnvidia-ml.so.1"):
        _put_with_libraries(root, os.path.join(simdir, lib), os.path.join(LIBDIR, lib))
    return _pack(root, work, image, entry, entrypoint=True)
