#!/bin/sh
# tools/checkers.sh [ROOT]: cppcheck over src/ and tests/, the .clang-format
# check (clang-format 14) and clang-tidy (checks in .clang-tidy) over every
# src/ directory whose code is complete, all three at once. clang-tidy needs
# ROOT/build's compile_commands.json (tools/test.sh's release build). Each
# prints a line when it ends, with its time; clang-tidy also every 20 files.
# Exits non-zero if any of them finds something, after printing what.
set -eu
root=${1:-$(cd "$(dirname "$0")/.." && pwd)}
logs=$(mktemp -d)
trap 'rm -rf "$logs"' EXIT
t0=$(date +%s)

run_cppcheck() {
    cppcheck --quiet --error-exitcode=1 --enable=warning,performance,portability \
        --inline-suppr --suppress=missingIncludeSystem -I "$root/src" \
        "$root/src" "$root/tests"
}

run_format() {
    # shellcheck disable=SC2046 # the file list is meant to split
    clang-format-14 --dry-run --Werror $(find "$root/src" "$root/tests" "$root/bench" -name '*.[ch]')
}

# Two lanes of files, one clang-tidy a file: it is single threaded and by
# far the longest of the three.
run_clang_tidy() {
    files=$(ls "$root"/src/core/*.c "$root"/src/interposer/*.c "$root"/src/cli/*.c \
        "$root"/src/policy/*.c "$root"/src/sim/*.c "$root"/src/k8s/*.c "$root"/src/deviceplugin/*.c \
        "$root"/src/extender/*.c "$root"/src/webhook/*.c)
    total=$(echo "$files" | wc -l)
    for lane in 0 1; do
        (
            n=0 status=0
            for f in $files; do
                n=$((n + 1))
                [ $((n % 2)) -eq "$lane" ] || continue
                clang-tidy -p "$root/build" --quiet "$f" || status=1
                [ $((n % 20)) -ge 2 ] || echo "[clang-tidy] file $n of $total ($(($(date +%s) - t0))s)" >&3
            done
            echo "$status" >"$logs/clang_tidy.lane$lane"
        ) &
    done
    wait
    [ "$(cat "$logs/clang_tidy.lane0" "$logs/clang_tidy.lane1")" = "0
0" ]
}

# Starts one checker in the background; its output goes to its log, then its
# exit status to NAME.rc (renamed into place: never read half written).
start() {
    (
        rc=0
        case $1 in
        cppcheck) run_cppcheck ;;
        format) run_format ;;
        clang_tidy) run_clang_tidy ;;
        esac >"$logs/$1.log" 2>&1 || rc=1
        echo "$rc" >"$logs/$1.rc.new" && mv "$logs/$1.rc.new" "$logs/$1.rc"
    ) 3>&1 &
}

start cppcheck
start format
start clang_tidy

status=0
pending="cppcheck format clang_tidy"
while [ -n "$pending" ]; do
    sleep 1
    left=
    for c in $pending; do
        if [ ! -e "$logs/$c.rc" ]; then
            left="$left $c"
        elif [ "$(cat "$logs/$c.rc")" -eq 0 ]; then
            echo "[$c] passed ($(($(date +%s) - t0))s)"
        else
            echo "[$c] FAILED ($(($(date +%s) - t0))s):"
            cat "$logs/$c.log"
            status=1
        fi
    done
    pending=$left
done
wait
exit "$status"
