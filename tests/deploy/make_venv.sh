#!/bin/sh
# Creates the deploy tests' virtualenv under the build tree (never the system's
# Python): Helm itself (helm-python-sdk, Helm v4's Go SDK as a shared library,
# ~75 MB download), the official Kubernetes JSON schemas (kubernetes-validate)
# and a CEL engine (cel-expr-python, the CEL C++ implementation). Pinned;
# skipped when the stamp says these exact versions are already installed.
set -eu
venv=$1
pkgs="helm-python-sdk==0.2.2 kubernetes-validate==1.37.0 cel-expr-python==0.1.3 PyYAML==6.0.3 pytest==9.2.0"
if [ -f "$venv/.stamp" ] && [ "$(cat "$venv/.stamp")" = "$pkgs" ]; then
    exit 0
fi
rm -rf "$venv"
python3 -m venv "$venv"
# shellcheck disable=SC2086 # the list is split on purpose
"$venv/bin/pip" install -q --disable-pip-version-check $pkgs
printf '%s' "$pkgs" >"$venv/.stamp"
