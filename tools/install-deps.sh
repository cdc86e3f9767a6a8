#!/bin/sh
# Installs what building, testing and benchmarking gpuslice needs, from Debian
# packages only (the tests fetch their PyPI tools into virtualenvs under the
# build tree themselves). Safe to run again. As root it runs as it is; a
# normal user's run goes through sudo.
set -eu
if [ "$(id -u)" -ne 0 ]; then
    if ! command -v sudo >/dev/null 2>&1; then
        echo "install-deps.sh: needs root: run it as root, or install sudo" >&2
        exit 2
    fi
    exec sudo "$0" "$@"
fi
export DEBIAN_FRONTEND=noninteractive
# Another apt (unattended upgrades, a second shell) may hold the lock: wait
# for it, up to 10 minutes, rather than failing at once.
apt_get() { apt-get -o DPkg::Lock::Timeout=600 "$@"; }
apt_get update -qq
# Toolchain and checkers; libraries (cmocka, jansson, gRPC C core + protobuf-c,
# libcurl, libmicrohttpd and its GnuTLS for mutual TLS, OpenSSL's libcrypto, libyaml for kubeconfigs); the Python side of the tests (kubelet stand-in on
# Debian's grpcio, PyYAML for tests/deploy, openssl for test certificates);
# matplotlib for the simulator's plot; wrk for the extender benchmark; a real
# container runtime for tests/cri (containerd with its CRI plugin, runc, the CNI
# plugins, iptables and ip, umoci to pack images, busybox-static for their shell).
apt_get install -y -qq --no-install-recommends \
    build-essential cmake pkg-config clang-14 clang-tidy clang-format-14 libclang-rt-14-dev cppcheck \
    libcmocka-dev libjansson-dev \
    libgrpc-dev libprotobuf-c-dev protobuf-c-compiler protobuf-compiler \
    libcurl4-openssl-dev libssl-dev libmicrohttpd-dev libgnutls28-dev libyaml-dev \
    python3-grpcio python3-grpc-tools python3-protobuf python3-pytest python3-yaml python3-venv \
    python3-matplotlib openssl wrk \
    containerd runc containernetworking-plugins iptables iproute2 umoci busybox-static >/dev/null
echo "install-deps.sh: done"
