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

# The names of the tests of the last run with junit status $1 ("fail";
# "notrun": skipped, or not run because a test it depends on failed; "run":
# passed), one a line.
with_status() { sed -n "s/.*<testcase name=\"\([^\"]*\)\".*status=\"$1\".*/\1/p" "$junit"; }

ctest --test-dir "$dir" --output-on-failure --output-junit "$junit" "$@" && exit 0
first=$(with_status fail | tr '\n' ' ')
[ -n "$first" ] || exit 1 # ctest itself failed, or only tests not run: nothing to run again
# what did not run because a failed test it depends on failed runs again too
again_names=$( (with_status fail; with_status notrun) | paste -sd'|' -)
echo "ctest-retry: $pass: running once more what failed: $first"
status=0
# Test names are [A-Za-z0-9_]: a name is its own regular expression.
ctest --test-dir "$dir" --output-on-failure --output-junit "$junit" -R "^($again_names)\$" "$@" || status=$?
passed=" $(with_status run | tr '\n' ' ') "
for t in $first; do
    case $passed in
    *" $t "*)
        echo "$pass: $t" >>"$flaky"
        echo "ctest-retry: $pass: FLAKY: $t failed once, then passed"
        ;;
    *)
        # failed again, or not run at all (say, left out by a label now):
        # never counted as a pass
        echo "ctest-retry: $pass: $t failed twice, or did not run again"
        status=1
        ;;
    esac
done
exit "$status"
