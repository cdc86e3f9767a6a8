#!/usr/bin/env bash
# Checks src/interposer/nvml_procs.c's rule for the size of a _v3 process
# entry against NVIDIA's nvml.h of each release under DIR/nvml-*/ (and
# DIR/include/): 32 bytes where the library declares
# nvmlDeviceGetConfComputeMemSizeInfo but not
# nvmlDeviceGetRunningProcessDetailList, 24 otherwise. The header's own
# sizeof(nvmlProcessInfo_t), which its library's _v3 fills, must agree.
# From the repo root: bash tests/abi/nvml_v3_rule.sh DIR
set -euo pipefail
dir=$1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
printf '#include <stdio.h>\n#include <nvml.h>\nint main(void) { printf("%%zu\\n", sizeof(nvmlProcessInfo_t)); return 0; }\n' \
    >"$tmp/size.c"
bad=0
n=0
for h in "$dir"/nvml-*/nvml.h "$dir/include/nvml.h"; do
    gcc -I"$(dirname "$h")" -o "$tmp/size" "$tmp/size.c"
    size=$("$tmp/size")
    conf=$(grep -c 'nvmlDeviceGetConfComputeMemSizeInfo(' "$h" || true)
    detail=$(grep -c 'nvmlDeviceGetRunningProcessDetailList(' "$h" || true)
    rule=24
    [ "$conf" -gt 0 ] && [ "$detail" -eq 0 ] && rule=32
    echo "nvml_v3_rule: $h: sizeof(nvmlProcessInfo_t) $size, the rule says $rule"
    [ "$size" = "$rule" ] || bad=1
    n=$((n + 1))
done
[ "$n" -ge 2 ] || { echo "nvml_v3_rule: no headers under $dir" >&2; exit 2; }
exit $bad
