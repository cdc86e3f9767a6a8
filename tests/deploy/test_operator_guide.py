"""docs/operator-guide.md's commands as written: its `helm install` rendered by
Helm (render.py) with exactly the guide's flags, its `sed` run on a copy of the
plain manifests, each result checked against the official schemas, and every
image a pod pulls one that the guide builds (section 1) or an upstream one.
Every `--set key=` in docs/ names a value of the chart."""
import glob
import os
import re
import shlex
import shutil
import subprocess

import kubernetes_validate
import pytest
import yaml

import render

GUIDE = os.path.join(render.ROOT, "docs", "operator-guide.md")
K8S_VERSION = "1.30.0"
UPSTREAM = "registry.k8s.io/"  # the guide names kube-scheduler's own image
ASSIGNMENT = re.compile(r"^[A-Z_]+=\S+(\s+[A-Z_]+=\S+)*$")
INLINE_SET = re.compile(r"--set(?:-string)? ([A-Za-z0-9_.]+)=")


def shell_commands(markdown):
    """Every command of the ```sh blocks, continuation lines joined."""
    cmds = []
    for block in re.findall(r"```sh\n(.*?)```", markdown, re.S):
        for cmd in block.replace("\\\n", " ").splitlines():
            cmd = cmd.split(" #", 1)[0].strip()
            if cmd:
                cmds.append(cmd)
    return cmds


def guide(text=None):
    """(variables the guide assigns, images it builds, its commands) of the guide."""
    if text is None:
        with open(GUIDE) as f:
            text = f.read()
    cmds = shell_commands(text)
    env = {}
    for c in cmds:
        if ASSIGNMENT.match(c):
            env.update(a.split("=", 1) for a in c.split())
    built = set()
    for c in cmds:
        words = expand(c, env)
        if words[:2] == ["docker", "build"]:
            built.add(words[words.index("-t") + 1])
    return env, built, cmds


def expand(cmd, env):
    return [re.sub(r"\$(\w+)", lambda m: env[m.group(1)], w) for w in shlex.split(cmd)]


def helm_values(words):
    """The values a `helm install|upgrade RELEASE CHART --set…` gives the chart, merged
    in Helm's order (--set before --set-string); any other flag fails the test."""
    sets, strings, positional = [], [], []
    it = iter(words[2:])
    for w in it:
        if w == "--set":
            sets.append(next(it))
        elif w == "--set-string":
            strings.append(next(it))
        elif w.startswith("-"):
            pytest.fail(f"the guide's helm command has {w}, which this test does not model")
        else:
            positional.append(w)
    assert [os.path.normpath(os.path.join(render.ROOT, p)) for p in positional[1:]] == [render.CHART]
    values = render.set_values(sets)
    for s in strings:
        render.merge(values, render.helm.parse_set_string_values(s))
    return values


def objects_of(texts):
    return [o for t in texts for o in yaml.safe_load_all(t) if o]


def images(objs):
    return {c["image"] for o in objs if o["kind"] in ("Deployment", "DaemonSet")
            for c in o["spec"]["template"]["spec"]["containers"]}


def check(objs, built):
    """Every object valid; every image built by the guide or upstream."""
    assert objs
    for o in objs:
        kubernetes_validate.validate(o, K8S_VERSION, strict=True)
    pulled = images(objs)
    missing = {i for i in pulled if i not in built and not i.startswith(UPSTREAM)}
    assert not missing, f"pods would pull images the guide never builds: {sorted(missing)} (built: {sorted(built)})"
    assert built <= pulled


def helm_commands(cmds):
    return [c for c in cmds if c.startswith(("helm install", "helm upgrade"))]


def test_guide_builds_images_in_a_registry():
    env, built, _ = guide()
    assert env["REG"] and env["TAG"]
    assert built == {f"{env['REG']}/control:{env['TAG']}", f"{env['REG']}/node:{env['TAG']}"}


def test_helm_install_as_written():
    env, built, cmds = guide()
    (install,) = helm_commands(cmds)
    check(objects_of(render.render(values=helm_values(expand(install, env))).values()), built)


def test_plain_manifests_as_written(tmp_path):
    env, built, cmds = guide()
    seds = [c for c in cmds if c.startswith("sed ")]
    assert seds
    shutil.copytree(os.path.join(render.ROOT, "deploy", "manifests"), tmp_path / "deploy" / "manifests")
    for c in seds:
        subprocess.run(["sh", "-c", c], cwd=tmp_path, env={**os.environ, **env}, check=True)
    texts = []
    for f in sorted(glob.glob(str(tmp_path / "deploy" / "manifests" / "*.yaml"))):
        with open(f) as fh:
            texts.append(fh.read())
    check(objects_of(texts), built)


def test_guide_check_is_real():
    env, built, _ = guide()
    # The guide's first install before issue 30 named only the control image: the
    # chart now refuses it instead of pulling a node image nobody pushed.
    old = "helm install gpuslice deploy/helm/gpuslice --set image.repository=$REG/control --set image.tag=$TAG"
    with pytest.raises(render.RenderError, match="nodeAgent.image.repository is not set"):
        render.render(values=helm_values(expand(old, env)))
    # An image the guide never builds is caught.
    typo = old + " --set nodeAgent.image.repository=$REG/agent --set nodeAgent.image.tag=$TAG"
    objs = objects_of(render.render(values=helm_values(expand(typo, env))).values())
    with pytest.raises(AssertionError, match="never builds: .'registry.example.com/gpuslice/agent:0.1.0'"):
        check(objs, built)


def leaf_keys(node, path=""):
    for k, v in node.items():
        if isinstance(v, dict) and v:
            yield from leaf_keys(v, f"{path}{k}.")
        else:
            yield f"{path}{k}"


@pytest.mark.parametrize("page", sorted(glob.glob(os.path.join(render.ROOT, "docs", "*.md"))),
                         ids=os.path.basename)
def test_every_set_in_docs_names_a_value(page):
    with open(os.path.join(render.CHART, "values.yaml")) as f:
        leaves = set(leaf_keys(yaml.safe_load(f)))
    with open(page) as f:
        named = set(INLINE_SET.findall(f.read()))
    assert named <= leaves, f"{os.path.basename(page)}: no such value: {sorted(named - leaves)}"
