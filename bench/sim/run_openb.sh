#!/bin/sh
# Runs `gpuslice sim` on every openb pod list and the CPU-bound mixes
# (seeds 42-51; fgd, bestfit, binpack and fraglook) and writes
# bench/results/sched-<date>-sim.md (summary) and sched-<date>-sim.png.
# usage: bench/sim/run_openb.sh [BUILD_DIR] [MACHINE TEXT]
set -eu
root=$(cd "$(dirname "$0")/../.." && pwd)
build=${1:-$root/build}
machine=${2:-"$(nproc)-core CPU dev machine"}
cli=$build/bin/gpuslice
[ -x "$cli" ] || { echo "run_openb.sh: $cli not found; build first" >&2; exit 1; }
day=$(date +%Y-%m-%d)
commit=$(git -C "$root" rev-parse --short HEAD)
lists=default,cpu050,gpushare20,gpushare40,gpushare60,gpushare80,gpushare100,gpuspec33,multigpu50,default+cpu2,default+cpu2.5
out=$root/bench/results
nice -n 10 "$cli" sim --pods "$lists" --policy fgd,bestfit,binpack,fraglook --seeds 42-51 \
  --summary "$out/sched-$day-sim.md" --plot "$out/sched-$day-sim.png" \
  --plot-script "$root/bench/sim/plot_sim.py" \
  --label "Run $day on a $machine, commit $commit, nodes openb_node_list_gpu_node.csv (1213 nodes, 6212 GPUs)."
