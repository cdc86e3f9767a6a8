#!/usr/bin/env bash
# Checks src/abi/'s re-typed CUDA and NVML ABI against NVIDIA's cuda.h (and
# nvml.h, where INCLUDE_DIR has one): the value of every constant our
# headers name, and the layouts in abi_layouts.def. Needs the headers, not a
# GPU: CTest's abi_matches_nvidia_headers runs it on those of PyPI's wheels,
# or give it a toolkit's. From the repo root:
#   bash tests/abi/abi_check.sh [INCLUDE_DIR (default /usr/local/cuda/include)]
# Exit 0 when all match; 1 with the differences printed.
set -euo pipefail
export LC_ALL=C # gcc quotes names in ASCII then
inc=${1:-/usr/local/cuda/include}
here=$(cd "$(dirname "$0")" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
[ -f "$inc/cuda.h" ] || { echo "abi_check: no cuda.h under $inc" >&2; exit 2; }
nvml=()
[ -f "$inc/nvml.h" ] && nvml=(-DABI_NVML)
headers=(src/abi/cuda_abi.h)
[ ${#nvml[@]} -gt 0 ] && headers+=(src/abi/nvml_abi.h)
# enum members and object-like #defines of the CU/CUDA/NVML families
# (every one, also those of an enum written on one line)
grep -hoE '\b(CU|CUDA|NVML)_[A-Z0-9_]+\s*=[^=]' "${headers[@]}" | sed -E 's/\s*=.*//' >"$tmp/names"
grep -hoE '^#define (CU|CUDA|NVML)_[A-Z0-9_]+ ' "${headers[@]}" | awk '{print $2}' >>"$tmp/names"
sort -u "$tmp/names" -o "$tmp/names"
build() { # $1: output; the rest: compiler flags
    local out=$1
    shift
    gcc -std=gnu11 -I"$tmp" -I"$here" "$@" -o "$out" "$here/abi_print.c" 2>"$out.err"
}
# names the toolkit lacks (our own, or gone from it) are reported, not compared
missing=()
for _ in 1 2 3 4 5 6 7 8; do
    sed 's/.*/ABI_CONST(&)/' "$tmp/names" >"$tmp/consts.inc"
    # the internal view also declares the legacy (_v1) structs we re-type
    if build "$tmp/theirs" -DABI_TOOLKIT -D__CUDA_API_VERSION_INTERNAL "${nvml[@]}" -I"$inc"; then break; fi
    gone=$(LC_ALL=C grep -oE "'(CU|CUDA|NVML)_[A-Z0-9_]+' undeclared" "$tmp/theirs.err" | tr -d "'" |
        awk '{print $1}' | sort -u || true)
    [ -n "$gone" ] || { cat "$tmp/theirs.err" >&2; exit 2; }
    missing+=($gone)
    grep -vxF -f <(printf '%s\n' $gone) "$tmp/names" >"$tmp/names.left" || true
    mv "$tmp/names.left" "$tmp/names"
done
build "$tmp/ours" "${nvml[@]}" || { cat "$tmp/ours.err" >&2; exit 2; }
"$tmp/ours" >"$tmp/ours.txt"
"$tmp/theirs" >"$tmp/theirs.txt"
echo "abi_check: $(wc -l <"$tmp/ours.txt") values and layouts against $inc ($( [ ${#nvml[@]} -gt 0 ] && echo with || echo without) nvml.h)"
[ ${#missing[@]} -eq 0 ] || echo "abi_check: not in NVIDIA's headers (ours only): ${missing[*]}"
if diff -u --label ours --label toolkit "$tmp/ours.txt" "$tmp/theirs.txt"; then
    echo "abi_check: all match"
else
    exit 1
fi
