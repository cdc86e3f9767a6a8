#!/usr/bin/env bash
# docs/compute.md's results table on one card, in device calls of under ten
# minutes each (the device tool's limit), so that a new card gets every row
# with little device time lost between calls. From the repo root:
#   OUT=DIR bash bench/compute/table.sh PART [TAG]
# PART (wall times from the calls of compute-2026-12-05.md, -12-05b-h100.md and earlier):
#   single  a new container's first second (caps 30 / 70, 8 s runs), GPU-bound
#           matmul under caps 10-90 in turns, two and four containers
#                                     (466 s on an H100 with the launch loop)
#   fresh   the single part's first call alone: a new container's first second
#           (caps 30 / 70, 8 s runs) after 8 s runs alone and capped (about
#           85 s on an H100, the interposer's build included)
#   launch  the paired launch loop (launch_rate.c, no limit and cap 99)
#   loads   torch.compile training and the decoder under caps 10 / 30 /
#           50 / 70 / 90 in turns        (8-9.5 min on an H100; the budget's bound:
#           at 4123e38 it ran out after the decoder, which runs first)
#   train   the training alone of the two (~4-5 min)
#   decoder the decoder alone of the two (~4 min)
#   graphs  torch.compile CUDA-graph inference the same way      (~5 min)
#   coloc   the heavy decoder beside matmul training: plain, caps 70 / 30,
#           shares 70 : 30, MPS 70 % / 30 % threads, with the limited
#           tenants' debug logs  (5-6 min; once over 6 min)
#   light   the same with the light decoder (about 5 min at c78301b)
#   turns   the light decoder's pairs in turns: plain, caps 70 / 30, shares
#           70 : 30 in one directory and in the node agent's layout, the
#           share decoder beside the plain training and the plain decoder
#           beside the share training (each decoder also in a turn above),
#           a second share decoder beside the plain training, and yielding
#           every 250 / 500 us (209 s on an H100 at 9111205)
#   decfree the decoder under cap 90 (running free) and under the interposer
#           with no limit (cap 100), three processes each, beside two plain
#           ones in the same turns: whether running free costs the decoder
#           more than the interposer does
#   pods    two containers (caps 30 / 70, shares 30 : 70) in the node agent's
#           layout, then each in a pid namespace of its own with its own
#           /proc, as a pod without hostPID (8 s runs, ~100 s)
# Each part's run_gpu.sh calls write under $OUT/PART-N/ (gputime.jsonl, the
# debug logs packed as logs.tgz); `python3 bench/compute/summarize.py $OUT` reads
# them all, and `python3 bench/compute/fit_exponent.py $OUT` fits the card's power
# exponent from the single part's sweep.
# TAG (default: the commit git names) goes on every line: name it on the device,
# whose copy's git metadata may be older than its sources (41f365d's call
# said 117295c). A part stops its own calls at
# TABLE_BUDGET_S (570 s) in all, so the device call returns what it has: give
# a device call of under ten minutes a smaller budget, or the call is killed
# before its files are packed. With PACK=FILE the part packs $OUT into FILE
# (a .tgz) as it ends: the device tool brings back eight files at most, two
# folders down, and a part writes more. The device-call pattern:
#   TABLE_BUDGET_S=330 PACK=$OUT/coloc.tgz OUT=/tmp/coloc bash bench/compute/table.sh coloc 41f365d   # the commit, read here
set -euo pipefail
cd "$(dirname "$0")/../.."
part=${1:-}
tag=${2:-$(git rev-parse --short HEAD 2>/dev/null || echo unknown)}
OUT=${OUT:-$(mktemp -d)}
start=$(date +%s)

budget=${TABLE_BUDGET_S:-570}
case $budget in
'' | *[!0-9]*)
    echo "table.sh: TABLE_BUDGET_S must be whole seconds, not '$budget'" >&2
    exit 2
    ;;
esac

# One run_gpu.sh call with what is left of the part's budget.
call() {
    local n=$1
    shift
    local left=$((budget - ($(date +%s) - start)))
    if [ "$left" -le 30 ]; then
        echo "table.sh: no time left for $part-$n ($*)" >&2
        return 0
    fi
    mkdir -p "$OUT/$part-$n"
    OUT=$OUT/$part-$n timeout "$left" bash bench/compute/run_gpu.sh "$@" --tag "$tag" \
        >"$OUT/$part-$n/out.txt" 2>&1 || echo "table.sh: $part-$n ended with $?" >&2
}

case $part in
single)
    BENCH_SECS=8 call 1 --only matmul,fresh --caps 30,70 --log "$OUT/$part-1/logs"
    call 2 --only capturns,matmul --caps 10,30,50,70,90 --copies 2 --plain-copies 1 --log "$OUT/$part-2/logs"
    BENCH_SECS=8 call 3 --only two,four
    ;;
fresh)
    BENCH_SECS=8 call 1 --only matmul,fresh --caps 30,70 --log "$OUT/$part-1/logs"
    ;;
launch)
    call 1 --only launchc
    ;;
loads)
    call 1 --only capturns,train,decoder --caps 10,30,50,70,90 --copies 2 --plain-copies 1 \
        --log "$OUT/$part-1/logs"
    ;;
train | decoder)
    call 1 --only "capturns,$part" --caps 10,30,50,70,90 --copies 2 --plain-copies 1 \
        --log "$OUT/$part-1/logs"
    ;;
graphs)
    call 1 --only capturns,graphinf --caps 10,30,50,70,90 --copies 2 --plain-copies 1 \
        --log "$OUT/$part-1/logs"
    ;;
coloc)
    call 1 --only coloc,mps --coloc-modes plain,share70/30,cap70/30,mps70/30 --inf-load decoder-heavy \
        --log "$OUT/$part-1/logs"
    ;;
light)
    call 1 --only coloc,mps --coloc-modes plain,share70/30,cap70/30,mps70/30 --inf-load decoder \
        --log "$OUT/$part-1/logs"
    ;;
turns)
    call 1 --only turns --turn-cycles 4 --turn-yield 250,500 --log "$OUT/$part-1/logs"
    ;;
decfree)
    call 1 --only capturns,decoder --caps 90,100 --copies 3 --plain-copies 2 --log "$OUT/$part-1/logs"
    ;;
pods)
    BENCH_SECS=8 call 1 --only two,pod --log "$OUT/$part-1/logs"
    ;;
*)
    echo "usage: OUT=DIR bash bench/compute/table.sh single|fresh|launch|loads|train|decoder|graphs|coloc|light|turns|decfree|pods [TAG]" >&2
    exit 2
    ;;
esac
# MPS is quit by gputime.py's under_mps; make sure no daemon outlives the call
echo quit | CUDA_MPS_PIPE_DIRECTORY=/tmp/mps-pipe nvidia-cuda-mps-control >/dev/null 2>&1 || true
echo "table.sh: $part done in $(($(date +%s) - start)) s; results under $OUT"
if [ -n "${PACK:-}" ]; then
    tar czf "$PACK" -C "$OUT" . && echo "table.sh: packed into $PACK"
fi
