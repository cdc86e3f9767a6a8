#!/bin/sh
# tools/ctest-retry.sh BUILD_DIR PASS FLAKY_FILE [CTEST ARGS...]
# Runs BUILD_DIR's CTest tests once, then the ones that failed once more. A
# test that fails twice fails the run. One that failed and then passed is
# flaky: "PASS: test" goes into FLAKY_FILE, so that tools/test.sh names it in
# its summary, even though the run passes. Two passes may share a build
# directory at once: each keeps its results in a file of its own (JUnit XML),
# not in ctest's LastTestsFailed.log.
set -eu
[ $# -ge 3 ] || { echo "usage: $0 BUILD_DIR PASS FLAKY_FILE [CTEST ARGS...]" >&2; exit 2; }
dir=$1 pass=$2 flaky=$3
shift 3
junit=$(mktemp)
trap 'rm -f "$junit"' EXIT

# The names of the tests the last run failed, one a line.
failed() { sed -n 's/.*<testcase name="\([^"]*\)".*status="fail".*/\1/p' "$junit"; }

ctest --test-dir "$dir" --output-on-failure --output-junit "$junit" "$@" && exit 0
first=$(failed | tr '\n' ' ')
[ -n "$first" ] || exit 1 # ctest itself failed: no test to run again
echo "ctest-retry: $pass: running once more what failed: $first"
status=0
# Test names are [A-Za-z0-9_]: a name is its own regular expression.
ctest --test-dir "$dir" --output-on-failure --output-junit "$junit" \
    -R "^($(failed | paste -sd'|' -))\$" "$@" || status=$?
again=" $(failed | tr '\n' ' ') "
for t in $first; do
    case $again in
    *" $t "*) echo "ctest-retry: $pass: $t failed twice" ;;
    *)
        echo "$pass: $t" >>"$flaky"
        echo "ctest-retry: $pass: FLAKY: $t failed once, then passed"
        ;;
    esac
done
exit "$status"
