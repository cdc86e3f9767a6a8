"""Fixtures for the CRI tests: a private containerd (runtime.py) with the
images built from this build (images.py), the real node agent beside
tests/k8s's stand-ins (kubelet's device manager, the API server), and the
CRI kubelet stand-in (cri_kubelet.py) that runs pods in real containers."""
import importlib.util
import os
import shutil
import subprocess
import sys
import tempfile

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
K8S = os.path.join(ROOT, "tests", "k8s")
TENANT_IMAGE = "gpuslice.test/tenant:1"
# The chart's image name, as containerd resolves it.
AGENT_IMAGE = "docker.io/gpuslice/node:dev"
LIB_CONTAINER = "/opt/gpuslice/libgpuslice.so"

sys.path.insert(0, HERE)
sys.path.insert(0, K8S)
import images  # noqa: E402 -- from HERE
import runtime as cri_runtime  # noqa: E402 -- from HERE; "runtime" is also a fixture


def _load_k8s_conftest():
    """tests/k8s's GpuNode (the agent beside its stand-ins), under another
    module name than this conftest's."""
    spec = importlib.util.spec_from_file_location("k8s_conftest", os.path.join(K8S, "conftest.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


k8s = _load_k8s_conftest()


def _gen_cri(out):
    subprocess.run([sys.executable, "-m", "grpc_tools.protoc", "-I", HERE, f"--python_out={out}",
                    f"--grpc_python_out={out}", os.path.join(HERE, "cri_runtime_v1.proto")], check=True)


# Short, under /tmp: the gRPC socket's path must fit in sun_path.
WORKDIR = tempfile.mkdtemp(prefix="gs-cri-")


def pytest_sessionstart(session):
    """The gRPC code, before the test modules (which import it) load."""
    if os.geteuid() != 0:
        # CTest counts exit code 77 as skipped (SKIP_RETURN_CODE).
        pytest.exit("tests/cri: skipped: containerd, runc, mounts and cgroups need root", returncode=77)
    gen = os.path.join(WORKDIR, "gen")
    k8s._gen_protos(gen)
    _gen_cri(gen)


def pytest_unconfigure(config):
    shutil.rmtree(WORKDIR, ignore_errors=True)


@pytest.fixture(scope="session")
def workdir():
    return WORKDIR


@pytest.fixture(scope="session")
def runtime(workdir):
    """containerd with the pause, tenant and agent images imported;
    everything it started is gone at the end, and the session fails if not."""
    from cri_kubelet import CriKubelet  # generated code: after sessionstart
    missing = [p for p in (cri_runtime.CONTAINERD, cri_runtime.CTR, cri_runtime.RUNC, images.UMOCI, images.BUSYBOX,
                           os.path.join(cri_runtime.CNI_BIN, "bridge")) if not os.access(p, os.X_OK)]
    assert not missing, f"tests/cri needs {missing}: run tools/install-deps.sh"
    rt = cri_runtime.Containerd(os.path.join(workdir, "ctd"))
    try:
        rt.start()
        img = os.path.join(workdir, "images")
        os.makedirs(img)
        rt.import_image(images.build_pause(img, cri_runtime.PAUSE_IMAGE, os.environ["GS_CRI_PAUSE"]),
                        cri_runtime.PAUSE_IMAGE)
        rt.import_image(images.build_tenant(img, TENANT_IMAGE, os.environ["GS_CLIENT"],
                                            os.environ["GPUSLICE_SIMDRIVER_DIR"], os.environ["GPUSLICE_LIB"]),
                        TENANT_IMAGE)
        rt.import_image(images.build_agent(img, AGENT_IMAGE, os.path.join(ROOT, "deploy", "node", "Dockerfile"),
                                           ROOT, os.environ["GS_CRI_BUILD_DIR"], os.environ["GPUSLICE_SIMDRIVER_DIR"]),
                        AGENT_IMAGE)
        rt.cri = CriKubelet(rt.sock, None, rt.cgroup_parent, os.path.join(workdir, "kubelet"), k8s.NODE)
        v = rt.cri.version()
        assert (v.runtime_name, v.runtime_api_version) == ("containerd", "v1"), v
        yield rt
    finally:
        errors = rt.stop()
        if rt.cri:
            rt.cri.close()
        left = rt.leftovers()
        assert not errors and not left, f"teardown: errors {errors}, left behind {left}"


@pytest.fixture
def node(runtime, tmp_path):
    """The node agent with the kubelet device-manager and API-server
    stand-ins; the CRI kubelet stand-in at node.cri, wired to them."""
    n = k8s.GpuNode(tmp_path)
    preload = tmp_path / "ld.so.preload"
    preload.write_text(LIB_CONTAINER + "\n")
    n.agent_args = ["--lib-host", os.environ["GPUSLICE_LIB"], "--lib-container", LIB_CONTAINER,
                    "--preload-host", str(preload)]
    n.start_agent()
    n.cri = runtime.cri
    n.cri.devices = n.kubelet
    yield n
    _remove_pods(n)


@pytest.fixture
def bare_node(runtime, tmp_path):
    """The stand-ins of node, without the agent: a test runs it."""
    n = k8s.GpuNode(tmp_path)
    n.cri = runtime.cri
    n.cri.devices = n.kubelet
    yield n
    _remove_pods(n)


def _remove_pods(n):
    try:
        for sb in n.cri.sandboxes():
            n.cri.stop_sandbox(sb.id)
            n.cri.remove_sandbox(sb.id)
    finally:
        n.close()
