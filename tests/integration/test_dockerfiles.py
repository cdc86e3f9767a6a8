"""The images copy their programs out of the build stage by path: every
`COPY --from=build /build/...` must name a file the build really makes (the
same CMake tree, built here), and the build stage must install every library
package the build needs (the -dev packages tools/install-deps.sh installs for
the programs' libraries)."""
import os
import re

from conftest import BUILD

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DOCKERFILES = ["deploy/images/Dockerfile", "deploy/node/Dockerfile"]
# The libraries the programs link (the test-only ones, cmocka, are not needed).
BUILD_LIBS = {"libjansson-dev", "libgrpc-dev", "libprotobuf-c-dev", "libcurl4-openssl-dev",
              "libmicrohttpd-dev", "libssl-dev", "libgnutls28-dev"}


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
