#!/usr/bin/env python3
"""Renders and lints deploy/helm/gpuslice with Helm itself: helm-python-sdk, the
Helm v4 Go SDK behind a C ABI (no helm binary needed). It lives in the deploy
tests' virtualenv (tests/deploy/make_venv.sh), so run this with that Python.

Every render is linted first (`helm lint --strict`: warnings are errors),
against the oldest Kubernetes version the chart supports. Helm renders a value
that does not exist as empty even then; test_deploy.py checks that every
`.Values.x` a template names is in values.yaml.

  render.py [--set key=value ...]            print the rendered chart (LOCAL_IMAGES first)
  render.py --write deploy/manifests         regenerate the plain manifests
"""
import argparse
import os
import sys

import helm_python as helm

ROOT = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
CHART = os.path.join(ROOT, "deploy", "helm", "gpuslice")
KUBE_VERSION = "v1.30.0"
RELEASE = "gpuslice"
# The chart has no default for our images (values.yaml says why): every render
# here names a local build's, what docs/operator-guide.md section 1 builds with
# REG=gpuslice TAG=dev, unless the caller's values name others.
LOCAL_IMAGES = ("image.repository=gpuslice/control", "image.tag=dev",
                "nodeAgent.image.repository=gpuslice/node", "nodeAgent.image.tag=dev")
# The plain manifests take their Secrets from deploy/certs/gen-certs.sh, so they
# hold no key material and render the same every time.
PLAIN_SETS = ("tls.source=existing",)
HEADER = ("# Generated from deploy/helm/gpuslice by tests/deploy/render.py --write "
          f"(default values, {' '.join('--set ' + s for s in LOCAL_IMAGES + PLAIN_SETS)}); "
          "edit the chart, not this file.\n")
WARNING = 2  # helm lint severities: 1 info, 2 warning, 3 error


class RenderError(Exception):
    pass


def merge(dst, src):
    for k, v in src.items():
        if isinstance(v, dict) and isinstance(dst.get(k), dict):
            merge(dst[k], v)
        else:
            dst[k] = v
    return dst


def set_values(sets):
    """--set a.b=v ... as Helm parses them, later ones winning."""
    values = {}
    for s in sets:
        merge(values, helm.parse_set_string(s))
    return values


def lint(sets=(), chart=CHART, values=None):
    """Problems `helm lint --strict` reports for these values (empty when clean)."""
    values = set_values(sets) if values is None else values
    report = helm.lint(chart, values, strict=True, kube_version=KUBE_VERSION)
    return report["errors"] + [f"{m['path']}: {m['error']}" for m in report["messages"]
                               if m["severity"] >= WARNING]


def render(sets=(), chart=CHART, values=None):
    """{template file name: rendered text} in file-name order, templates that render
    to nothing left out, for LOCAL_IMAGES and --set `sets`, or else for a ready
    `values` dict as it is. Raises RenderError when Helm would refuse to install
    (values.schema.json, `required`) or the chart does not lint clean."""
    values = set_values(LOCAL_IMAGES + tuple(sets)) if values is None else values
    # Rendered before linting: lint renders `required` and `fail` as warnings,
    # so their messages come from an install's render.
    try:
        out = helm.Chart.load(chart).render(values, name=RELEASE, is_install=True)
    except helm.HelmError as e:
        raise RenderError(f"helm install: {e}") from None
    problems = lint(chart=chart, values=values)
    if problems:
        raise RenderError("helm lint --strict: " + "; ".join(problems))
    files = {os.path.basename(p): t for p, t in out.items() if p.endswith(".yaml")}
    return {n: files[n] for n in sorted(files) if files[n].strip()}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--set", action="append", default=[])
    ap.add_argument("--write", metavar="DIR")
    a = ap.parse_args()
    try:
        files = render(PLAIN_SETS + tuple(a.set) if a.write else a.set)
    except (RenderError, helm.HelmError) as e:
        sys.exit(f"render.py: {e}")
    if a.write:
        for old in os.listdir(a.write):
            if old.endswith(".yaml"):
                os.unlink(os.path.join(a.write, old))
        for name, text in files.items():
            with open(os.path.join(a.write, name), "w") as f:
                f.write(HEADER + text.lstrip("\n"))
    else:
        sys.stdout.write("---\n".join(files.values()))


if __name__ == "__main__":
    main()
