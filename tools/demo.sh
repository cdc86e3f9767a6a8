#!/bin/sh
# Shows gpuslice at work: a tenant under a 4 GiB limit is shown a 4 GiB GPU,
# is refused past it, and `gpuslice top` lists it. On a machine with an
# NVIDIA GPU it runs on that GPU; without one (or with GPUSLICE_DEMO_SIM=1)
# on gpuslice's simulated GPU from the build tree, and says so.
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
build=${GPUSLICE_BUILD_DIR:-$root/build}
cli=$build/bin/gpuslice
if [ ! -x "$cli" ]; then
    echo "demo: $cli not found; build first (tools/build.sh)" >&2
    exit 2
fi
sim=${GPUSLICE_DEMO_SIM:-0}
# Ours to read, not the tenant's: gpuslice run refuses GPUSLICE_* names it does not know.
unset GPUSLICE_BUILD_DIR GPUSLICE_DEMO_SIM
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT INT TERM

if [ "$sim" != 1 ] && command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then
    echo "demo: running on this machine's NVIDIA GPU:"
    nvidia-smi -L | head -n 1
else
    echo "demo: no NVIDIA GPU here, so this runs on gpuslice's SIMULATED GPU"
    echo "      (an 80 GiB device modelled by $build/simdriver/libcuda.so.1, not a real one)"
    export LD_LIBRARY_PATH="$build/simdriver${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
    export GPUSLICE_SIM_STATE="$tmp/gpu.state" GPUSLICE_SIM_MEM=80GiB
fi
export GPUSLICE_STATE_DIR="$tmp/state"
echo
echo "\$ gpuslice run --memory 4GiB --name demo -- python3 tools/demo_tenant.py"
"$cli" run --memory 4GiB --name demo -- python3 "$root/tools/demo_tenant.py" "$cli"
