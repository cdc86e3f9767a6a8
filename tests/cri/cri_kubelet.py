"""CriKubelet: a test stand-in for kubelet's pod lifecycle, over a real
container runtime.

It is NOT kubelet. It makes the CRI v1 calls kubelet makes for a pod
(RunPodSandbox, then per container start: the device plugin's
PreStartContainer, CreateContainer, StartContainer; a restart creates the
next attempt in the same sandbox; deletion is StopPodSandbox and
RemovePodSandbox), and turns the pod's securityContext and the device
plugin's Allocate answer (envs, mounts, device nodes, annotations) into the
ContainerConfig the way kubelet does. The device-plugin side is
tests/k8s's KubeletStandIn (Allocate, pod-resources), which this drives.

What stands in for the GPU: NVIDIA's container toolkit would add the device
nodes and mount the driver's libraries; here the tenant image carries the
simulated driver, and each pod gets a directory of its own for the
simulated GPU's state file (the simulator tells processes apart by pid, and
a pid namespace's pids mean nothing outside it)."""
import os
import shutil
import time
import uuid as uuidlib

import grpc

import cri_runtime_v1_pb2 as cri
import cri_runtime_v1_pb2_grpc as cri_grpc

SIM_DIR = "/var/lib/gpuslice-sim"
CGROUP_ROOT = "/sys/fs/cgroup"
MIB = 1 << 20


class Pod:
    def __init__(self, name, uid, spec, ns="default"):
        self.name, self.uid, self.spec, self.ns = name, uid, spec, ns
        self.sandbox_id = None
        self.sandbox_config = None
        self.ids = None          # device IDs kubelet's device manager holds
        self.alloc = None        # the device plugin's ContainerAllocateResponse
        self.sim_dir = None
        self.attempt = -1
        self.container_id = None


class CriKubelet:
    def __init__(self, sock, devices, cgroup_parent, workdir):
        self.channel = grpc.insecure_channel("unix:" + sock)
        self.rt = cri_grpc.RuntimeServiceStub(self.channel)
        self.devices = devices   # tests/k8s KubeletStandIn
        self.cgroup_parent = cgroup_parent
        self.dir = workdir

    def close(self):
        self.channel.close()

    def version(self):
        return self.rt.Version(cri.VersionRequest(version="v1"), timeout=10)

    # ---- pods ----
    def run_pod(self, name, uid, spec, ns="default"):
        """Admission (GetPreferredAllocation, Allocate: the device manager)
        and RunPodSandbox."""
        pod = Pod(name, uid, spec, ns)
        pod.ids, pod.alloc = self.devices.admit(name, ns=ns, prestart=False)
        pod.sim_dir = os.path.join(self.dir, "sim", uid)
        os.makedirs(pod.sim_dir)
        os.chmod(pod.sim_dir, 0o777)  # the pod's processes run as any uid
        sec = spec.get("securityContext", {})
        pod.sandbox_config = cri.PodSandboxConfig(
            metadata=cri.PodSandboxMetadata(name=name, uid=uid, namespace=ns),
            hostname=name, log_directory=os.path.join(self.dir, "pods", f"{ns}_{name}_{uid}"),
            linux=cri.LinuxPodSandboxConfig(
                cgroup_parent=f"{self.cgroup_parent}/pod{uid}",
                security_context=cri.LinuxSandboxSecurityContext(
                    namespace_options=cri.NamespaceOption(network=cri.POD, pid=cri.CONTAINER, ipc=cri.POD),
                    supplemental_groups=[sec["fsGroup"]] if "fsGroup" in sec else [],
                    seccomp=cri.SecurityProfile(profile_type=cri.SecurityProfile.RuntimeDefault))))
        resp = self.rt.RunPodSandbox(cri.RunPodSandboxRequest(config=pod.sandbox_config), timeout=60)
        pod.sandbox_id = resp.pod_sandbox_id
        return pod

    def delete_pod(self, pod):
        """What kubelet does once the pod is deleted: stop and remove the
        sandbox (its containers with it), remove the pod's cgroup (kubelet's,
        not the runtime's: it fails while a process is left in it), release
        the devices."""
        self.stop_sandbox(pod.sandbox_id)
        self.remove_sandbox(pod.sandbox_id)
        for ctl in os.listdir(CGROUP_ROOT):
            path = os.path.join(CGROUP_ROOT, ctl, self.cgroup_parent.lstrip("/"), f"pod{pod.uid}")
            if os.path.isdir(path) and not os.path.islink(os.path.join(CGROUP_ROOT, ctl)):
                os.rmdir(path)
        shutil.rmtree(pod.sim_dir)
        self.devices.release(pod.name, pod.ns)

    # ---- containers ----
    def _security(self, pod):
        """The container's securityContext as kubelet maps it: the
        container's fields win over the pod's; fsGroup is a supplementary
        group of every process."""
        psec = pod.spec.get("securityContext", {})
        csec = dict(psec, **pod.spec["containers"][0].get("securityContext", {}))
        s = cri.LinuxContainerSecurityContext(
            namespace_options=cri.NamespaceOption(network=cri.POD, pid=cri.CONTAINER, ipc=cri.POD),
            seccomp=cri.SecurityProfile(profile_type=cri.SecurityProfile.RuntimeDefault),
            no_new_privs=not csec.get("allowPrivilegeEscalation", True),
            readonly_rootfs=csec.get("readOnlyRootFilesystem", False),
            supplemental_groups=[psec["fsGroup"]] if "fsGroup" in psec else [])
        if "runAsUser" in csec:
            s.run_as_user.value = csec["runAsUser"]
        if "runAsGroup" in csec:
            s.run_as_group.value = csec["runAsGroup"]
        caps = csec.get("capabilities", {})
        s.capabilities.add_capabilities.extend(caps.get("add", []))
        s.capabilities.drop_capabilities.extend(caps.get("drop", []))
        return s

    def _config(self, pod, image, command):
        a = pod.alloc
        envs = [cri.KeyValue(key=k, value=v) for k, v in sorted(a.envs.items())]
        envs += [cri.KeyValue(key="GPUSLICE_SIM_STATE", value=f"{SIM_DIR}/gpu.state"),
                 cri.KeyValue(key="GPUSLICE_SIM_DEVICES", value="1"),
                 cri.KeyValue(key="GPUSLICE_SIM_CTX_OVERHEAD", value=str(64 * MIB))]
        mounts = [cri.Mount(container_path=m.container_path, host_path=m.host_path, readonly=m.read_only)
                  for m in a.mounts]
        mounts.append(cri.Mount(container_path=SIM_DIR, host_path=pod.sim_dir))
        devices = [cri.Device(container_path=d.container_path, host_path=d.host_path,
                              permissions=d.permissions) for d in a.devices]
        name = pod.spec["containers"][0]["name"]
        return cri.ContainerConfig(
            metadata=cri.ContainerMetadata(name=name, attempt=pod.attempt),
            image=cri.ImageSpec(image=image), command=command, envs=envs, mounts=mounts,
            devices=devices, annotations=dict(a.annotations), log_path=f"{name}/{pod.attempt}.log",
            linux=cri.LinuxContainerConfig(security_context=self._security(pod)))

    def start(self, pod, image, command):
        """One start of the pod's container (the first, or a restart in the
        same sandbox): PreStartContainer, CreateContainer, StartContainer."""
        self.devices.prestart(pod.ids)
        pod.attempt += 1
        req = cri.CreateContainerRequest(pod_sandbox_id=pod.sandbox_id,
                                         config=self._config(pod, image, command),
                                         sandbox_config=pod.sandbox_config)
        pod.container_id = self.rt.CreateContainer(req, timeout=60).container_id
        self.rt.StartContainer(cri.StartContainerRequest(container_id=pod.container_id), timeout=60)
        return pod.container_id

    def status(self, cid):
        return self.rt.ContainerStatus(cri.ContainerStatusRequest(container_id=cid), timeout=10).status

    def wait_exited(self, cid, timeout=60):
        end = time.time() + timeout
        while time.time() < end:
            st = self.status(cid)
            if st.state == cri.CONTAINER_EXITED:
                return st
            time.sleep(0.05)
        raise AssertionError(f"container {cid} still {cri.ContainerState.Name(st.state)} after {timeout} s")

    def kill(self, cid):
        """The container's process killed, as a liveness failure or an OOM
        would: StopContainer with no grace period."""
        self.rt.StopContainer(cri.StopContainerRequest(container_id=cid, timeout=0), timeout=60)

    def output(self, pod, attempt=None):
        """The container's stdout and stderr, from its CRI log file
        (lines: time, stream, tag, text)."""
        name = pod.spec["containers"][0]["name"]
        path = os.path.join(pod.sandbox_config.log_directory, name,
                            f"{pod.attempt if attempt is None else attempt}.log")
        lines = []
        for line in open(path, encoding="utf-8", errors="replace"):
            parts = line.rstrip("\n").split(" ", 3)
            lines.append(parts[3] if len(parts) == 4 else "")
        return lines

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

    # What runtime.Containerd.stop needs to clear what a failed test left.
    def list_sandboxes(self):
        return self.sandboxes()

    def stop_sandbox(self, sid):
        self.rt.StopPodSandbox(cri.StopPodSandboxRequest(pod_sandbox_id=sid), timeout=60)

    def remove_sandbox(self, sid):
        self.rt.RemovePodSandbox(cri.RemovePodSandboxRequest(pod_sandbox_id=sid), timeout=60)


def new_uid():
    return str(uuidlib.uuid4())
