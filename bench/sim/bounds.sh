#!/bin/sh
# The strict oracle bound (bench/sim/oracle_bound.py) per pod list and seed,
# for the lists of the openb table and the CPU-bound mixes; prints
# "list seed bound". About 25 s per list and seed on a 2-core machine.
# usage: bench/sim/bounds.sh BUILD_DIR TRACE_DIR [SEEDS...]
set -eu
build=$1 trace=$2
shift 2
seeds=${*:-42}
here=$(cd "$(dirname "$0")" && pwd)
nodes=$trace/openb_node_list_gpu_node.csv
gpus=$(awk -F, 'NR > 1 { g += $4 } END { print g }' "$nodes")
tmp=$(mktemp)
trap 'rm -f "$tmp"' EXIT
for list in default+cpu2 default+cpu2.5 default cpu050 gpushare20 gpushare40 gpushare60 \
            gpushare80 gpushare100 gpuspec33 multigpu50; do
    name=${list%%+*} mix=""
    [ "$name" = "$list" ] || mix="+${list#*+}"
    for seed in $seeds; do
        "$build/bench/gpuslice-sim-waste" "$nodes" "$trace/openb_pod_list_$name.csv$mix" order \
            "$seed" > "$tmp"
        printf '%s %s %s\n' "$list" "$seed" \
            "$(/usr/bin/python3 "$here/oracle_bound.py" "$tmp" "$gpus" | awk '{ print $3 }')"
    done
done
