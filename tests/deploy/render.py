#!/usr/bin/env python3
"""Our stand-in for `helm template` (helm is not installable here): it renders
deploy/helm/gpuslice/templates/*.yaml by replacing `{{ .Values.a.b }}` with the
value from values.yaml (plus --set a.b=v overrides). That is the only template
syntax the chart uses; anything else inside {{ }} is an error, so the chart
cannot silently grow syntax this renderer would mishandle. It is NOT Helm.

  render.py [--set key=value ...]            print the rendered chart
  render.py --write deploy/manifests         regenerate the plain manifests
"""
import argparse
import os
import re
import sys

import yaml

ROOT = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
CHART = os.path.join(ROOT, "deploy", "helm", "gpuslice")
EXPR = re.compile(r"\{\{-?\s*(.*?)\s*-?\}\}")
VALUE = re.compile(r"^\.Values((?:\.[A-Za-z_][A-Za-z0-9_]*)+)$")


class RenderError(Exception):
    pass


def load_values(overrides=()):
    with open(os.path.join(CHART, "values.yaml")) as f:
        values = yaml.safe_load(f)
    for o in overrides:
        key, _, val = o.partition("=")
        cur = values
        parts = key.split(".")
        for p in parts[:-1]:
            cur = cur.setdefault(p, {})
        cur[parts[-1]] = yaml.safe_load(val)
    return values


def lookup(values, path, where):
    cur = values
    for p in path.strip(".").split("."):
        if not isinstance(cur, dict) or p not in cur:
            raise RenderError(f"{where}: .Values{path} is not in values.yaml")
        cur = cur[p]
    if isinstance(cur, (dict, list)) or cur is None:
        raise RenderError(f"{where}: .Values{path} is not a scalar")
    if isinstance(cur, bool):
        return "true" if cur else "false"
    return str(cur)


def render_text(text, values, where):
    def sub(m):
        v = VALUE.match(m.group(1))
        if not v:
            raise RenderError(f"{where}: unsupported template syntax {{{{ {m.group(1)} }}}} "
                              "(only {{ .Values.x }} is handled by this stand-in)")
        return lookup(values, v.group(1), where)
    return EXPR.sub(sub, text)


def render(values):
    """{template file name: rendered text}, in file-name order."""
    out = {}
    tdir = os.path.join(CHART, "templates")
    for name in sorted(os.listdir(tdir)):
        if name.endswith(".yaml"):
            with open(os.path.join(tdir, name)) as f:
                out[name] = render_text(f.read(), values, name)
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--set", action="append", default=[])
    ap.add_argument("--write", metavar="DIR")
    a = ap.parse_args()
    files = render(load_values(a.set))
    if a.write:
        for name, text in files.items():
            with open(os.path.join(a.write, name), "w") as f:
                f.write("# Generated from deploy/helm/gpuslice by tests/deploy/render.py "
                        "(default values); edit the chart, not this file.\n" + text)
    else:
        sys.stdout.write("---\n".join(files.values()))


if __name__ == "__main__":
    main()
