#!/bin/sh
# Installs what building and testing gpuslice needs, from Debian packages and
# PyPI only. Safe to run again. Run as root (or through sudo).
set -eu
if [ "$(id -u)" -ne 0 ]; then
    echo "install-deps.sh: run as root (sudo $0)" >&2
    exit 2
fi
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends \
    build-essential cmake pkg-config clang-14 clang-tidy libclang-rt-14-dev cppcheck \
    libcmocka-dev libjansson-dev python3-matplotlib \
    libgrpc-dev libprotobuf-c-dev protobuf-c-compiler protobuf-compiler \
    libcurl4-openssl-dev libmicrohttpd-dev python3-grpcio python3-grpc-tools \
    python3-protobuf python3-pytest >/dev/null
# The test harness runs on whatever python3 is first on PATH.
python3 -m pip install -q --disable-pip-version-check pytest pytest-timeout 2>/dev/null ||
    python3 -m pip install -q --break-system-packages pytest pytest-timeout
echo "install-deps.sh: done"
# tests/deploy (PyYAML) and tests/webhook (openssl makes throwaway certificates).
apt-get install -y -qq --no-install-recommends python3-yaml openssl >/dev/null
python3 -c 'import yaml' 2>/dev/null || python3 -m pip install -q --disable-pip-version-check pyyaml ||
    python3 -m pip install -q --break-system-packages pyyaml
echo "install-deps.sh: deploy/webhook test dependencies done"
# bench/extender --wrk: wrk (C HTTP load generator) for the extender benchmark.
apt-get install -y -qq --no-install-recommends wrk >/dev/null
echo "install-deps.sh: benchmark dependencies done"
