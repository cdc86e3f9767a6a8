"""The chart's values.schema.json, as Helm applies it (helm-python-sdk): it
describes exactly the keys of values.yaml, Helm refuses an unknown key and a
wrong type at every level of them, and every image of the chart is a
{repository, tag} value that reaches the container it names."""
import copy
import functools
import json
import os
import re

import pytest
import yaml

import render

with open(os.path.join(render.CHART, "values.yaml")) as f:
    VALUES = yaml.safe_load(f)
with open(os.path.join(render.CHART, "values.schema.json")) as f:
    SCHEMA = json.load(f)
# A value of another type than each YAML type, as --set would pass it.
WRONG = {str: 12345, int: "twelve", bool: "yes", list: "a-string", dict: "a-string"}


def walk(node, path=()):
    """(path, value) of every key of values.yaml, depth first."""
    for k, v in node.items():
        yield path + (k,), v
        if isinstance(v, dict):
            yield from walk(v, path + (k,))


def nested(path, value):
    out = value
    for k in reversed(path):
        out = {k: out}
    return out


@functools.lru_cache(maxsize=None)
def helm_chart():
    return render.helm.Chart.load(render.CHART)


def refused(values):
    """Helm's schema error for these values over the defaults (as an install merges
    them), or "accepted"."""
    try:
        helm_chart().validate_schema(helm_chart().merge_values(values))
    except render.helm.HelmValuesError as e:
        return str(e)
    return "accepted"


def at(path):
    """Where Helm's error says a value is: a JSON pointer."""
    return "at '" + "".join("/" + k.replace("~", "~0").replace("/", "~1") for k in path) + "'"


def objects(schema, where="#"):
    """(where, object schema) of every object the schema describes."""
    if isinstance(schema, dict):
        if "properties" in schema:
            yield where, schema
        for k, v in schema.items():
            yield from objects(v, f"{where}/{k}")


def test_the_schema_describes_exactly_values_yaml():
    """The defaults pass, and the schema (no unknown keys) requires every key it
    names: so its keys are exactly those of values.yaml. A LabelSelector's keys
    alone are optional, as in Kubernetes."""
    assert refused({}) == "accepted"
    for where, o in objects(SCHEMA):
        assert o.get("additionalProperties") is False, where
        if not where.startswith("#/definitions/labelSelector"):
            assert sorted(o["required"]) == sorted(o["properties"]), where


def test_set_unknown_key_fails_through_render():
    with pytest.raises(render.RenderError, match="at '/nodeAgent': additional properties 'bogus' not allowed"):
        render.render(("nodeAgent.bogus=1",))


# matchLabels and dra.nodeSelector are maps of any label to a string (the
# wrong-type test covers them).
LEVELS = [()] + [p for p, v in walk(VALUES) if isinstance(v, dict) and p[-1] not in ("matchLabels", "nodeSelector")]


@pytest.mark.parametrize("path", LEVELS, ids=lambda p: ".".join(p) or "top")
def test_unknown_key_is_refused_at_every_level(path):
    assert f"{at(path)}: additional properties 'bogus' not allowed" in refused(nested(path + ("bogus",), 1))


@pytest.mark.parametrize("path", [p for p, _ in walk(VALUES)], ids=".".join)
def test_wrong_type_is_refused_at_every_key(path):
    value = VALUES
    for k in path:
        value = value[k]
    assert f"{at(path)}: got " in refused(nested(path, WRONG[type(value)]))


@pytest.mark.parametrize("sets,where", [
    (("extender.port=0",), "/extender/port"),
    (("webhook.defaultGpuCores=101",), "/webhook/defaultGpuCores"),
    (("webhook.failurePolicy=fail",), "/webhook/failurePolicy"),
    (("tls.source=selfsigned",), "/tls/source"),
    (("extender.policy=fastest",), "/extender/policy"),
    (("scheduler.httpTimeout=10",), "/scheduler/httpTimeout"),
    (("namespace=GPU_Slice",), "/namespace"),
    (("nodeAgent.image.tag=v1:2",), "/nodeAgent/image/tag"),
    (("nodeAgent.powerExponent=1.5",), "/nodeAgent/powerExponent"),
    (("nodeAgent.shareYieldUs=200000",), "/nodeAgent/shareYieldUs"),
    (("nodeAgent.shareYieldUs=-1",), "/nodeAgent/shareYieldUs"),
    (("image.repository=reg.example.com/control:v1",), "/image/repository"),
    (("networkPolicy.monitoring.podSelector.matchLabels.app=1",), "/networkPolicy/monitoring/podSelector/matchLabels/app"),
    (("webhook.gpuVisibilityExemptNamespaces={Not A Namespace}",), "/webhook/gpuVisibilityExemptNamespaces/0"),
])
def test_values_out_of_range_are_refused(sets, where):
    assert f"at '{where}'" in refused(render.set_values(sets))


OUR_IMAGES = {"image.repository": "reg.example.com/control", "image.tag": "1.0.0",
              "nodeAgent.image.repository": "reg.example.com/node", "nodeAgent.image.tag": "1.0.0"}


@pytest.mark.parametrize("unset", OUR_IMAGES)
def test_our_images_have_no_default(unset):
    """gpuslice publishes no images: a render that does not name one of them
    stops, naming the value to set, rather than pull a guessed name."""
    sets = [f"{k}={v}" for k, v in OUR_IMAGES.items() if k != unset]
    with pytest.raises(render.RenderError, match=f"{re.escape(unset)} is not set: give it the"):
        render.render(values=render.set_values(sets))
    render.render(values=render.set_values(sets + [f"{unset}={OUR_IMAGES[unset]}"]))


def image_values(node=VALUES, path=()):
    """Path of every {repository, tag} value of values.yaml."""
    if isinstance(node, dict):
        if {"repository", "tag"} <= node.keys():
            yield path
        for k, v in node.items():
            yield from image_values(v, path + (k,))


def container_images(files):
    out = {}
    for text in files.values():
        for o in yaml.safe_load_all(text):
            if o and o["kind"] in ("Deployment", "DaemonSet"):
                for c in o["spec"]["template"]["spec"]["containers"]:
                    out[(o["metadata"]["name"], c["name"])] = c["image"]
    return out


def test_every_image_is_repository_and_tag_and_reaches_its_container():
    paths = list(image_values())
    assert len(paths) == 3, paths  # control, kube-scheduler, node agent
    sets = []
    for i, p in enumerate(paths):
        key = ".".join(p)
        sets += [f"{key}.repository=reg.example.com/image{i}", f"{key}.tag=t{i}"]
    got = set(container_images(render.render(tuple(sets))).values())
    assert got == {f"reg.example.com/image{i}:t{i}" for i in range(len(paths))}


def test_image_check_is_real():
    broken = copy.deepcopy(VALUES)
    broken["nodeAgent"]["image"] = "gpuslice/node:dev"  # the single string of old
    assert ("nodeAgent",) not in set(image_values(broken))
