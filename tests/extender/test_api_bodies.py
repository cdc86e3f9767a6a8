"""Every body the extender and the node agent sent to the API-server stand-in
during the extender and node-agent tests (the Binding, the merge patches of
pod and node annotations), checked strictly against the official Kubernetes
JSON schemas (kubernetes-validate, unknown fields are errors). The stand-in
saved them under $GS_STANDIN_BODIES. Merge patches are partial objects: they
are checked as the object they patch, with their null values (RFC 7386
deletions) checked apart, since a schema cannot say that."""
import glob
import json
import os
import re

import kubernetes_validate
import pytest

K8S_VERSION = "1.30.0"  # as tests/deploy
DIR = os.environ.get("GS_STANDIN_BODIES", "")
KINDS = [(re.compile(r"^/api/v1/namespaces/[^/]+/pods/[^/]+/binding$"), "Binding"),
         (re.compile(r"^/api/v1/namespaces/[^/]+/pods/[^/?]+$"), "Pod"),
         (re.compile(r"^/api/v1/nodes/[^/?]+$"), "Node")]


def bodies():
    out = []
    for f in sorted(glob.glob(os.path.join(DIR, "*.jsonl"))):
        with open(f) as fh:
            out += [json.loads(line) for line in fh]
    return out


def kind_of(path):
    for rx, kind in KINDS:
        if rx.match(path):
            return kind
    raise AssertionError(f"a body was sent to {path}, which no check here knows")


def split_nulls(obj, where=""):
    """obj without its null values, and the paths of those (deletions)."""
    if not isinstance(obj, dict):
        return obj, []
    kept, gone = {}, []
    for k, v in obj.items():
        if v is None:
            gone.append(f"{where}/{k}")
        else:
            kept[k], g = split_nulls(v, f"{where}/{k}")
            gone += g
    return kept, gone


def test_bodies_were_collected():
    got = bodies()
    kinds = {(b["method"], kind_of(b["path"])) for b in got}
    # The producing tests bind pods, claim nodes and record allocations.
    assert {("POST", "Binding"), ("PATCH", "Pod"), ("PATCH", "Node")} <= kinds, kinds


@pytest.mark.parametrize("b", bodies(), ids=lambda b: f"{b['method']} {b['path']}")
def test_body_matches_the_official_schema(b):
    kind = kind_of(b["path"])
    obj = json.loads(b["body"])
    if b["method"] == "POST":
        assert kind == "Binding"
        kubernetes_validate.validate(obj, K8S_VERSION, strict=True)
        return
    assert b["method"] == "PATCH" and isinstance(obj, dict)
    kept, gone = split_nulls(obj)
    # A merge patch may delete only annotations, never a field the schema needs.
    assert all(g.startswith("/metadata/annotations/gpuslice.io/") for g in gone), gone
    kubernetes_validate.validate(dict(kept, apiVersion="v1", kind=kind), K8S_VERSION, strict=True)


def test_the_schema_check_is_real():
    bad = {"apiVersion": "v1", "kind": "Binding", "metadata": {"name": "p"},
           "target": {"kind": "Node", "name": "n", "nodeName": "n"}}
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(bad, K8S_VERSION, strict=True)
    patch = {"apiVersion": "v1", "kind": "Pod",
             "metadata": {"annotations": {"gpuslice.io/allocated": {"v": 1}}}}
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(patch, K8S_VERSION, strict=True)
