"""The images copy their programs out of the build stage by path: every
`COPY --from=build /build/...` must name a file the build really makes (the
same CMake tree, built here), the build stage must install every library
package the build needs (the -dev packages tools/install-deps.sh installs for
the programs' libraries), and the final stage the Debian package of every
shared library those programs link (their ELF NEEDED entries, found as this
Debian machine's loader finds them: the images are Debian bookworm too), or
a package that depends on it."""
import os
import re
import shutil
import subprocess

import pytest

from conftest import BUILD

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DOCKERFILES = ["deploy/images/Dockerfile", "deploy/node/Dockerfile"]
# The libraries the programs link (the test-only ones, cmocka, are not needed).
BUILD_LIBS = {"libjansson-dev", "libgrpc-dev", "libprotobuf-c-dev", "libcurl4-openssl-dev",
              "libmicrohttpd-dev", "libssl-dev", "libgnutls28-dev", "libyaml-dev"}
# What debian:bookworm-slim holds already.
SLIM_BASE = {"libc6", "libgcc-s1", "libstdc++6", "zlib1g"}


def test_images_copy_what_the_build_makes():
    for df in DOCKERFILES:
        text = open(os.path.join(ROOT, df)).read()
        copies = re.findall(r"COPY --from=build ((?:/build/\S+\s+)+)\S+", text)
        assert copies, df
        for group in copies:
            for src in group.split():
                path = os.path.join(BUILD, src[len("/build/"):])
                assert os.path.isfile(path), f"{df}: {src} is not built (no {path})"


def test_build_stages_install_every_library():
    deps = open(os.path.join(ROOT, "tools", "install-deps.sh")).read()
    for pkg in BUILD_LIBS:
        assert pkg in deps, f"{pkg} is no longer in install-deps.sh: update this list"
    for df in DOCKERFILES:
        text = open(os.path.join(ROOT, df)).read()
        build_stage = text.split("FROM debian:bookworm-slim")[0]
        missing = {p for p in BUILD_LIBS if p not in build_stage}
        assert not missing, f"{df}: build stage lacks {sorted(missing)}"


def needed_packages(path):
    """The Debian packages of the shared libraries the ELF file at path
    links directly."""
    needed = re.findall(r"\(NEEDED\).*\[(.+)\]", subprocess.run(["readelf", "-d", path], capture_output=True,
                                                                   text=True, check=True).stdout)
    where = dict(re.findall(r"^\s*(\S+) => (/\S+)", subprocess.run(["ldd", path], capture_output=True,
                                                                   text=True).stdout, re.M))
    pkgs = set()
    for name in needed:
        if name.startswith("ld-linux"):
            continue
        assert name in where, f"{path}: the loader does not find {name}"
        for candidate in (where[name], os.path.realpath(where[name])):
            out = subprocess.run(["dpkg", "-S", candidate], capture_output=True, text=True)
            if out.returncode == 0:
                pkgs.add(out.stdout.split(":", 1)[0])
                break
        else:
            raise AssertionError(f"{path}: no Debian package holds {where[name]} ({name})")
    return pkgs


def with_dependencies(pkgs):
    """pkgs and every package they depend on, as apt would install them
    (their Depends and Pre-Depends, as this machine's dpkg records them)."""
    seen, todo = set(), list(pkgs)
    while todo:
        p = todo.pop()
        if p in seen:
            continue
        seen.add(p)
        out = subprocess.run(["dpkg-query", "-W", "-f", "${Depends}, ${Pre-Depends}", p], capture_output=True,
                             text=True)
        for alt in out.stdout.split(","):
            for dep in alt.split("|"):
                name = dep.strip().split(" ")[0].split(":")[0]
                if name:
                    todo.append(name)
    return seen


def test_final_stages_install_every_library_their_programs_link():
    if not shutil.which("dpkg") or not shutil.which("readelf"):
        pytest.skip("needs dpkg and readelf (a Debian machine, as the images are)")
    if os.environ.get("GPUSLICE_SANITIZE", "").upper() in ("ON", "1", "TRUE"):
        pytest.skip("the images are Release builds; a sanitizer build links its runtimes and more")
    for df in DOCKERFILES:
        text = open(os.path.join(ROOT, df)).read()
        final = text.split("FROM debian:bookworm-slim")[1]
        install = re.search(r"apt-get install(.*?)&&", final, re.S)
        assert install, f"{df}: the final stage installs no packages"
        installed = with_dependencies(set(re.findall(r"[a-z0-9][a-z0-9.+-]+", install.group(1))))
        for group in re.findall(r"COPY --from=build ((?:/build/\S+\s+)+)\S+", final):
            for src in group.split():
                path = os.path.join(BUILD, src[len("/build/"):])
                missing = needed_packages(path) - installed - SLIM_BASE
                assert not missing, f"{df}: the final stage does not install {sorted(missing)}, which {src} links"
