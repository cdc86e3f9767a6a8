#!/bin/sh
# Shows gpuslice at work: a tenant under a 4 GiB limit is shown a 4 GiB GPU,
# is refused past it, and `gpuslice top` lists it. On a machine with an
# NVIDIA GPU it runs on that GPU; without one (or with --simulated) on
# gpuslice's simulated GPU (gpuslice run --simulated-gpu), and says so.
# The container "demo" stays for `gpuslice top` until `gpuslice rm demo`.
#   tools/demo.sh [--simulated] [--build DIR]   (DIR: default ./build)
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
build=$root/build
sim=0
while [ $# -gt 0 ]; do
    case $1 in
    --simulated) sim=1 ;;
    --build) build=$2; shift ;;
    *) echo "demo: unknown option '$1' (use --simulated, --build DIR)" >&2; exit 2 ;;
    esac
    shift
done
cli=$build/bin/gpuslice
if [ ! -x "$cli" ]; then
    echo "demo: $cli not found; build first (tools/build.sh)" >&2
    exit 2
fi
# The commands are shown as they can be pasted: gpuslice by its path unless
# it is the one on PATH.
shown=$cli
[ "$(command -v gpuslice 2>/dev/null || true)" = "$cli" ] && shown=gpuslice

gpu=
if [ "$sim" != 1 ] && command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then
    echo "demo: running on this machine's NVIDIA GPU:"
    nvidia-smi -L | head -n 1
else
    echo "demo: no NVIDIA GPU here, so this runs on gpuslice's SIMULATED GPU"
    echo "      (an 80 GiB device modelled by gpuslice's simulated driver, not a real one)"
    gpu="--simulated-gpu 80GiB "
fi
echo
echo "\$ $shown run ${gpu}--memory 4GiB --name demo -- python3 $root/tools/demo_tenant.py"
# shellcheck disable=SC2086 # $gpu is two words or none
"$cli" run $gpu--memory 4GiB --name demo -- python3 "$root/tools/demo_tenant.py" "$cli"
echo
echo "The container 'demo' stays until you remove it:"
echo "  $shown top ${gpu}  # its limit and use"
echo "  $shown rm demo  # remove it"
