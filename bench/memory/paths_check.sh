#!/usr/bin/env bash
# The rarer memory paths on a real GPU (issue 16, finding 8): builds the
# interposer and paths_check, then runs paths_check.py, which prints a
# markdown report (under a 1 GiB limit and native). Run from the repository
# root; writes $OUT/memory-paths.md.
set -euo pipefail
OUT=${OUT:-/tmp/gpuslice-bench}
mkdir -p "$OUT"
LIB=$(bash bench/build_interposer.sh)
gcc -O2 -Wall -o build-gpu/paths_check bench/memory/paths_check.c -ldl
STATE=$(mktemp -d)
{
  echo "# Memory paths under a limit: $(date -u +%F)"
  echo
  echo "device: $(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader -i 0)"
  echo "commit: ${COMMIT:-$(git rev-parse --short HEAD 2>/dev/null || echo unknown)}"
  echo
  python3 bench/memory/paths_check.py build-gpu/paths_check "$LIB" "$STATE"
} | tee "$OUT/memory-paths.md"
