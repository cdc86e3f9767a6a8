#!/bin/sh
# Runs `gpuslice sim` on every openb pod list (seeds 42-51, all policies) and
# writes bench/results/sim-openb-<date>.{csv,png} and sim-summary-openb-<date>.md.
# usage: bench/sim/run_openb.sh [BUILD_DIR] [MACHINE TEXT]
set -eu
root=$(cd "$(dirname "$0")/../.." && pwd)
build=${1:-$root/build}
machine=${2:-"$(nproc)-core CPU dev machine"}
sim=$(find "$build" -name gpuslice-sim -type f -perm -u+x | head -n1)
[ -n "$sim" ] || { echo "run_openb.sh: gpuslice-sim not found under $build" >&2; exit 1; }
day=$(date +%Y-%m-%d)
commit=$(git -C "$root" rev-parse --short HEAD)
lists=openb_pod_list_default,openb_pod_list_gpushare20,openb_pod_list_gpushare40,openb_pod_list_gpushare60,openb_pod_list_gpushare80,openb_pod_list_gpushare100,openb_pod_list_gpuspec33,openb_pod_list_multigpu50,openb_pod_list_cpu050
out=$root/bench/results
nice -n 10 "$sim" --pods "$lists" --policy all --seeds 42-51 \
  --csv "$out/sim-openb-$day.csv" --summary "$out/sim-summary-openb-$day.md" \
  --plot "$out/sim-openb-$day.png" --plot-script "$root/bench/sim/plot_sim.py" \
  --label "Run $day on a $machine, commit $commit, nodes openb_node_list_gpu_node.csv (1213 nodes, 6212 GPUs)."
