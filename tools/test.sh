#!/bin/sh
# The whole test suite, as CI runs it:
#   1. Release build (-O2, -Werror) and every CTest test;
#   2. the same under AddressSanitizer + UndefinedBehaviorSanitizer;
#   3. cppcheck over src/ and tests/, the .clang-format check, clang-tidy over every src/ directory
#      whose code is complete (see the list below);
#   4. each libFuzzer target for a short run over its corpus.
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
jobs=$(nproc)
fuzz_secs=${GS_FUZZ_SECONDS:-30}

step() { printf '\n==== %s ====\n' "$*"; }

# Tests labelled "root" need it (the node agent hands state to pods' uids;
# pid namespaces): a normal user's run leaves them out and says so.
ctest_scope=
if [ "$(id -u)" -ne 0 ]; then
    ctest_scope="-LE root"
    echo "test.sh: not root: the tests labelled 'root' (node agent, pid namespaces) are left out;" \
         "run as root to include them"
fi

step "release build"
cmake -S "$root" -B "$root/build" -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$root/build" -j"$jobs"
step "release tests"
# A test that fails is run once more: a few tests time real processes on a
# shared 2-core machine. A real regression fails both times.
# shellcheck disable=SC2086 # ctest_scope is empty or two words
ctest --test-dir "$root/build" -j"$jobs" --output-on-failure --repeat until-pass:2 $ctest_scope

step "sanitizer build (ASan + UBSan)"
cmake -S "$root" -B "$root/build-asan" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DGPUSLICE_SANITIZE=ON >/dev/null
cmake --build "$root/build-asan" -j"$jobs"
step "sanitizer tests"
# shellcheck disable=SC2086
ctest --test-dir "$root/build-asan" -j"$jobs" --output-on-failure --repeat until-pass:2 $ctest_scope

step "cppcheck"
cppcheck --quiet --error-exitcode=1 --enable=warning,performance,portability \
    --inline-suppr --suppress=missingIncludeSystem -I "$root/src" \
    "$root/src" "$root/tests"

step "format (.clang-format, clang-format 14)"
# shellcheck disable=SC2046 # the file list is meant to split
clang-format-14 --dry-run --Werror $(find "$root/src" "$root/tests" "$root/bench" -name '*.[ch]')

step "clang-tidy (checks in .clang-tidy)"
# shellcheck disable=SC2046 # the file list is meant to split
clang-tidy -p "$root/build" --quiet $(ls "$root"/src/core/*.c "$root"/src/interposer/*.c "$root"/src/cli/*.c \
    "$root"/src/policy/*.c "$root"/src/sim/*.c "$root"/src/k8s/*.c "$root"/src/deviceplugin/*.c \
    "$root"/src/extender/*.c "$root"/src/webhook/*.c)

# A fixed count of inputs from a fixed seed: the run is the same on every
# machine, so CI checks exactly what was checked before the commit. Longer,
# exploring runs: tools/fuzz.sh SECONDS.
step "fuzz (${GS_FUZZ_RUNS:-200000} inputs per target, seed 1)"
GS_FUZZ_RUNS=${GS_FUZZ_RUNS:-200000} "$root/tools/fuzz.sh" "$fuzz_secs"

[ -z "$ctest_scope" ] || echo "test.sh: tests labelled 'root' were not run (not root)"
step "all checks passed"
