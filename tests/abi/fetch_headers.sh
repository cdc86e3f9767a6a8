#!/bin/sh
# Puts NVIDIA's cuda.h and nvml.h under DIR/include for abi_check.sh, from
# their PyPI wheels (the CUDA runtime's and NVML's development files), so a
# machine without a CUDA toolkit checks our re-typed ABI too. Pinned; skipped
# when the stamp says these exact versions are there already.
set -eu
dir=$1
pkgs="nvidia-cuda-runtime-cu12==12.9.79 nvidia-nvml-dev-cu12==12.9.79"
# NVML's headers across the 535 branch's change of the _v3 process entry
# (nvml_v3_rule.sh): before it, its two releases, after it
older_nvml="12.1.105 12.2.81 12.2.128 12.2.140"
if [ -f "$dir/.stamp" ] && [ "$(cat "$dir/.stamp")" = "$pkgs $older_nvml" ]; then
    exit 0
fi
rm -rf "$dir"
mkdir -p "$dir/wheels" "$dir/unpacked" "$dir/include"
# pip from a virtualenv of its own: the python3 on PATH may have none
python3 -m venv "$dir/venv"
pip="$dir/venv/bin/pip"
# shellcheck disable=SC2086 # the list is split on purpose
"$pip" download -q --disable-pip-version-check --no-deps -d "$dir/wheels" $pkgs
for w in "$dir"/wheels/*.whl; do
    python3 -m zipfile -e "$w" "$dir/unpacked"
done
cp "$dir/unpacked/nvidia/cuda_runtime/include/cuda.h" "$dir/unpacked/nvidia/nvml_dev/include/nvml.h" "$dir/include/"
for v in $older_nvml; do
    rm -rf "$dir/wheels" "$dir/unpacked"
    "$pip" download -q --disable-pip-version-check --no-deps -d "$dir/wheels" "nvidia-nvml-dev-cu12==$v"
    python3 -m zipfile -e "$dir"/wheels/*.whl "$dir/unpacked"
    mkdir -p "$dir/nvml-$v"
    cp "$dir/unpacked/nvidia/nvml_dev/include/nvml.h" "$dir/nvml-$v/"
done
rm -rf "$dir/wheels" "$dir/unpacked" "$dir/venv"
printf '%s' "$pkgs $older_nvml" >"$dir/.stamp"
