"""CriKubelet: a test stand-in for kubelet's pod lifecycle, over a real
container runtime.

It is NOT kubelet. It makes the CRI v1 calls kubelet makes for a pod
(RunPodSandbox, then per container start: the device plugin's
PreStartContainer, CreateContainer, StartContainer; a restart creates the
next attempt in the same sandbox; deletion is StopPodSandbox and
RemovePodSandbox), and turns a pod spec into CRI configs the way kubelet
does: securityContext (the container's fields over the pod's, fsGroup a
supplementary group), env (values and the spec.nodeName field), hostPath
and secret volumes, the memory limit, and the device plugin's Allocate
answer (envs, mounts, device nodes, annotations). Like a kubelet with
SeccompDefault on, a container with no seccompProfile gets the runtime's
default profile. The device-plugin side is tests/k8s's KubeletStandIn
(Allocate, pod-resources), which this drives.

What stands in for the GPU: NVIDIA's container toolkit would add the device
nodes and mount the driver's libraries; here the images carry the
simulated driver, and each pod gets a directory for the simulated GPU's
state file: one of its own, or one that pods sharing a simulated GPU are
given (the simulator tells their processes apart across pid namespaces)."""
import os
import shutil
import time

import grpc

import cri_runtime_v1_pb2 as cri
import cri_runtime_v1_pb2_grpc as cri_grpc

SIM_DIR = "/var/lib/gpuslice-sim"
CGROUP_ROOT = "/sys/fs/cgroup"
MIB = 1 << 20
UNITS = {"Ki": 1 << 10, "Mi": 1 << 20, "Gi": 1 << 30}
SECCOMP = {"RuntimeDefault": cri.SecurityProfile.RuntimeDefault,
           "Unconfined": cri.SecurityProfile.Unconfined}


def quantity(q):
    """A memory quantity in bytes ("256Mi", "64Mi", "1Gi" or plain bytes)."""
    for suffix, mult in UNITS.items():
        if q.endswith(suffix):
            return int(q[:-2]) * mult
    return int(q)


# How long an exited container's log may stay empty or still grow before
# it is read anyway.
LOG_SETTLE_S = 2.0


def log_size(path):
    """The size of file path; -1 where it cannot be read."""
    try:
        return os.stat(path).st_size
    except OSError:
        return -1


def log_held_open(path):
    """Whether any process holds file path open."""
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        fds = f"/proc/{pid}/fd"
        try:
            names = os.listdir(fds)
        except OSError:
            continue
        for fd in names:
            try:
                if os.readlink(os.path.join(fds, fd)) == path:
                    return True
            except OSError:
                pass
    return False


class Pod:
    def __init__(self, name, uid, spec, ns="default"):
        self.name, self.uid, self.spec, self.ns = name, uid, spec, ns
        self.sandbox_id = None
        self.sandbox_config = None
        self.ids = None          # device IDs kubelet's device manager holds
        self.alloc = None        # the device plugin's ContainerAllocateResponse
        self.host_paths = {}     # volume name -> host path
        self.dir = None          # kubelet's per-pod directory (secrets, logs)
        self.sim_dir = None      # the simulated GPU's state directory
        self.attempt = -1
        self.container_id = None

    @property
    def container(self):
        return self.spec["containers"][0]


class CriKubelet:
    def __init__(self, sock, devices, cgroup_parent, workdir, node_name):
        self.channel = grpc.insecure_channel("unix:" + sock)
        self.rt = cri_grpc.RuntimeServiceStub(self.channel)
        self.devices = devices   # tests/k8s KubeletStandIn, or None
        self.cgroup_parent = cgroup_parent
        self.dir = workdir
        self.node_name = node_name

    def close(self):
        self.channel.close()

    def version(self):
        return self.rt.Version(cri.VersionRequest(version="v1"), timeout=30)

    # ---- pods ----
    def run_pod(self, name, uid, spec, ns="default", secrets=None, sim_dir=None):
        """Admission (for a GPU pod: GetPreferredAllocation and Allocate,
        the device manager's part) and RunPodSandbox. secrets: secret name ->
        {key: bytes}, for the pod's secret volumes. sim_dir: the simulated
        GPU's state directory, when pods share one (else the pod's own)."""
        pod = Pod(name, uid, spec, ns)
        if self._wants_gpu(pod):
            pod.ids, pod.alloc = self.devices.admit(name, ns=ns, prestart=False)
        pod.dir = os.path.join(self.dir, "pods", uid)
        os.makedirs(pod.dir)
        pod.sim_dir = str(sim_dir) if sim_dir else os.path.join(pod.dir, "sim")
        os.makedirs(pod.sim_dir, exist_ok=True)
        os.chmod(pod.sim_dir, 0o777)  # the pod's processes run as any uid
        self._volumes(pod, secrets or {})
        sec = spec.get("securityContext", {})
        pod.sandbox_config = cri.PodSandboxConfig(
            metadata=cri.PodSandboxMetadata(name=name, uid=uid, namespace=ns),
            hostname=name, log_directory=os.path.join(pod.dir, "logs"),
            linux=cri.LinuxPodSandboxConfig(
                cgroup_parent=f"{self.cgroup_parent}/pod{uid}",
                security_context=cri.LinuxSandboxSecurityContext(
                    namespace_options=cri.NamespaceOption(network=cri.POD, pid=cri.CONTAINER, ipc=cri.POD),
                    supplemental_groups=[sec["fsGroup"]] if "fsGroup" in sec else [],
                    seccomp=self._seccomp(sec))))
        resp = self.rt.RunPodSandbox(cri.RunPodSandboxRequest(config=pod.sandbox_config), timeout=60)
        pod.sandbox_id = resp.pod_sandbox_id
        return pod

    @staticmethod
    def _wants_gpu(pod):
        limits = pod.container.get("resources", {}).get("limits", {})
        return "gpuslice.io/gpu" in limits

    @staticmethod
    def _volumes(pod, secrets):
        """Host paths of the pod's volumes: hostPath as given (created for
        DirectoryOrCreate, refused when a Directory is missing, as kubelet
        does), a secret's items written under the pod's directory."""
        for vol in pod.spec.get("volumes", []):
            if "hostPath" in vol:
                hp = vol["hostPath"]
                if hp.get("type") == "DirectoryOrCreate":
                    os.makedirs(hp["path"], mode=0o755, exist_ok=True)
                elif hp.get("type") == "Directory" and not os.path.isdir(hp["path"]):
                    raise AssertionError(f"volume {vol['name']}: hostPath {hp['path']} is not a directory")
                pod.host_paths[vol["name"]] = hp["path"]
            elif "secret" in vol:
                s = vol["secret"]
                d = os.path.join(pod.dir, "volumes", vol["name"])
                os.makedirs(d)
                data = secrets[s["secretName"]]
                for item in s.get("items") or [{"key": k, "path": k} for k in data]:
                    path = os.path.join(d, item["path"])
                    with open(path, "wb") as f:
                        f.write(data[item["key"]])
                    os.chmod(path, s.get("defaultMode", 0o644))
                pod.host_paths[vol["name"]] = d
            else:
                raise AssertionError(f"volume {vol['name']}: this stand-in has no such volume type")

    def delete_pod(self, pod):
        """What kubelet does once the pod is deleted: stop and remove the
        sandbox (its containers with it), remove the pod's cgroup (kubelet's,
        not the runtime's: it fails while a process is left in it) and its
        directory, release the devices."""
        self.stop_sandbox(pod.sandbox_id)
        self.remove_sandbox(pod.sandbox_id)
        for ctl in os.listdir(CGROUP_ROOT):
            path = os.path.join(CGROUP_ROOT, ctl, self.cgroup_parent.lstrip("/"), f"pod{pod.uid}")
            if os.path.isdir(path) and not os.path.islink(os.path.join(CGROUP_ROOT, ctl)):
                os.rmdir(path)
        shutil.rmtree(pod.dir)
        if pod.ids:
            self.devices.release(pod.name, pod.ns)

    # ---- containers ----
    @staticmethod
    def _seccomp(sec):
        return cri.SecurityProfile(profile_type=SECCOMP[sec.get("seccompProfile", {}).get("type",
                                                                                          "RuntimeDefault")])

    def _security(self, pod):
        psec = pod.spec.get("securityContext", {})
        csec = dict(psec, **pod.container.get("securityContext", {}))
        s = cri.LinuxContainerSecurityContext(
            namespace_options=cri.NamespaceOption(network=cri.POD, pid=cri.CONTAINER, ipc=cri.POD),
            seccomp=self._seccomp(csec), privileged=csec.get("privileged", False),
            no_new_privs=not csec.get("allowPrivilegeEscalation", True),
            readonly_rootfs=csec.get("readOnlyRootFilesystem", False),
            supplemental_groups=[psec["fsGroup"]] if "fsGroup" in psec else [])
        if "runAsUser" in csec:
            s.run_as_user.value = csec["runAsUser"]
        if "runAsGroup" in csec:
            s.run_as_group.value = csec["runAsGroup"]
        caps = csec.get("capabilities", {})
        # CRI takes the names without kubelet's "CAP_" prefix the same way.
        s.capabilities.add_capabilities.extend(caps.get("add", []))
        s.capabilities.drop_capabilities.extend(caps.get("drop", []))
        return s

    def _env(self, pod):
        out = []
        for e in pod.container.get("env", []):
            if "value" in e:
                out.append(cri.KeyValue(key=e["name"], value=e["value"]))
            elif e.get("valueFrom", {}).get("fieldRef", {}).get("fieldPath") == "spec.nodeName":
                out.append(cri.KeyValue(key=e["name"], value=self.node_name))
            else:
                raise AssertionError(f"env {e['name']}: this stand-in cannot resolve {e}")
        return out

    def _mounts(self, pod):
        return [cri.Mount(container_path=m["mountPath"], host_path=pod.host_paths[m["name"]],
                          readonly=m.get("readOnly", False))
                for m in pod.container.get("volumeMounts", [])]

    def _config(self, pod, extra_env):
        c = pod.container
        envs = self._env(pod) + [cri.KeyValue(key=k, value=v) for k, v in extra_env.items()]
        mounts = self._mounts(pod) + [cri.Mount(container_path=SIM_DIR, host_path=pod.sim_dir)]
        devices, annotations = [], {}
        if pod.alloc is not None:
            a = pod.alloc
            envs += [cri.KeyValue(key=k, value=v) for k, v in sorted(a.envs.items())]
            mounts += [cri.Mount(container_path=m.container_path, host_path=m.host_path, readonly=m.read_only)
                       for m in a.mounts]
            devices = [cri.Device(container_path=d.container_path, host_path=d.host_path,
                                  permissions=d.permissions) for d in a.devices]
            annotations = dict(a.annotations)
        linux = cri.LinuxContainerConfig(security_context=self._security(pod))
        mem = c.get("resources", {}).get("limits", {}).get("memory")
        if mem:
            linux.resources.memory_limit_in_bytes = quantity(mem)
        return cri.ContainerConfig(
            metadata=cri.ContainerMetadata(name=c["name"], attempt=pod.attempt),
            image=cri.ImageSpec(image=c["image"]), command=c.get("command", []), args=c.get("args", []),
            envs=envs, mounts=mounts, devices=devices, annotations=annotations,
            log_path=f"{c['name']}/{pod.attempt}.log", linux=linux)

    def start(self, pod, extra_env=None):
        """One start of the pod's container (the first, or a restart in the
        same sandbox): PreStartContainer for a GPU pod, CreateContainer,
        StartContainer. extra_env: what stands in for the GPU's runtime hook."""
        if pod.ids:
            self.devices.prestart(pod.ids)
        pod.attempt += 1
        req = cri.CreateContainerRequest(pod_sandbox_id=pod.sandbox_id, config=self._config(pod, extra_env or {}),
                                         sandbox_config=pod.sandbox_config)
        pod.container_id = self.rt.CreateContainer(req, timeout=60).container_id
        self.rt.StartContainer(cri.StartContainerRequest(container_id=pod.container_id), timeout=60)
        return pod.container_id

    def status(self, cid):
        return self.rt.ContainerStatus(cri.ContainerStatusRequest(container_id=cid), timeout=10).status

    def wait_state(self, cid, state, timeout=60):
        end = time.time() + timeout
        while True:
            st = self.status(cid)
            if st.state == state:
                return st
            if time.time() > end:
                raise AssertionError(f"container {cid} still {cri.ContainerState.Name(st.state)} "
                                     f"after {timeout} s ({st.reason} {st.message})")
            time.sleep(0.05)

    def wait_exited(self, cid, timeout=60):
        """Waits until the container has exited and containerd has written
        all its output: containerd reports EXITED once the copies from the
        container's pipes end, while its log writer may still hold the last
        lines, and closes the log file only after them (read at once, a
        pod's log came back empty)."""
        end = time.time() + timeout
        st = self.wait_state(cid, cri.CONTAINER_EXITED, timeout)
        path = os.path.realpath(st.log_path)
        while st.log_path and log_held_open(path):
            if time.time() > end:
                raise AssertionError(f"container {cid} exited, its log {path} still open after {timeout} s")
            time.sleep(0.05)
        # nor held open by anyone, a pod's log once still read empty in a
        # loaded CI run (its script prints at least its exit status): the
        # size must hold still, and an empty log gets a moment more
        if st.log_path:
            settled = time.time() + LOG_SETTLE_S
            size = log_size(path)
            while time.time() < min(end, settled):
                time.sleep(0.1)
                now = log_size(path)
                if now == size and now > 0:
                    break
                size = now
        return st

    def kill(self, cid):
        """The container's process killed, as a liveness failure or an OOM
        would: StopContainer with no grace period."""
        self.rt.StopContainer(cri.StopContainerRequest(container_id=cid, timeout=0), timeout=60)

    def output(self, pod, attempt=None):
        """The container's stdout and stderr, from its CRI log file
        (lines: time, stream, tag, text)."""
        path = os.path.join(pod.sandbox_config.log_directory, pod.container["name"],
                            f"{pod.attempt if attempt is None else attempt}.log")
        lines, partial = [], {}
        for line in open(path, encoding="utf-8", errors="replace"):
            parts = line.rstrip("\n").split(" ", 3)
            if len(parts) < 3:
                continue
            stream, tag, text = parts[1], parts[2], parts[3] if len(parts) == 4 else ""
            # a line longer than containerd's buffer comes in P(artial)
            # pieces, then its F(ull) end
            text = partial.pop(stream, "") + text
            if tag == "P":
                partial[stream] = text
            else:
                lines.append(text)
        return lines + list(partial.values())

    def wait_output(self, pod, pred, timeout=60):
        end = time.time() + timeout
        lines = []
        while time.time() < end:
            try:
                lines = self.output(pod)
            except OSError:
                lines = []
            if pred(lines):
                return lines
            time.sleep(0.05)
        raise AssertionError(f"{pod.name}: output never matched; got {lines}")

    def sandboxes(self):
        return list(self.rt.ListPodSandbox(cri.ListPodSandboxRequest(), timeout=10).items)

    def containers(self):
        return list(self.rt.ListContainers(cri.ListContainersRequest(), timeout=10).containers)

    def stop_sandbox(self, sid):
        self.rt.StopPodSandbox(cri.StopPodSandboxRequest(pod_sandbox_id=sid), timeout=60)

    def remove_sandbox(self, sid):
        self.rt.RemovePodSandbox(cri.RemovePodSandboxRequest(pod_sandbox_id=sid), timeout=60)
