"""KubeletStandIn: a test stand-in for kubelet's device manager.

It is NOT kubelet. It does what kubelet does toward a device plugin, on
Debian's python3-grpcio with code generated from our own .proto files:
serves Registration on <dir>/kubelet.sock, and on each Register dials the
plugin's endpoint, opens ListAndWatch and keeps the latest device list. Tests
then call GetPreferredAllocation / Allocate / PreStartContainer through it.
restart() behaves like a kubelet restart: stops serving, deletes every
socket in the directory (the plugin's included) and serves a new
kubelet.sock.

Like kubelet it also serves the pod-resources API v1 (PodResourcesLister
List, on <podres_dir>/kubelet.sock) from what it allocated: admit() runs
GetPreferredAllocation + Allocate for a named pod/container, records which
container holds which devices, and then calls PreStartContainer, as
kubelet's container start does. Tests choose the order pods are admitted
in, and can make the List answer malformed (podres_answer: raw bytes,
podres_abort: a status code, extra_holdings: invented entries).
"""
import os
import threading
import time
from concurrent import futures

import grpc

import deviceplugin_v1beta1_pb2 as pb
import deviceplugin_v1beta1_service_pb2_grpc as svc
import podresources_v1_pb2 as prpb

RESOURCE = "gpuslice.io/gpu"


class _Registration(svc.RegistrationServicer):
    def __init__(self, owner):
        self.owner = owner

    def Register(self, request, context):
        if request.version != "v1beta1":
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, f"unsupported version {request.version}")
        self.owner._on_register(request)
        return pb.Empty()


class KubeletStandIn:
    def __init__(self, plugin_dir, podres_dir=None):
        self.dir = plugin_dir
        self.podres_sock = os.path.join(podres_dir, "kubelet.sock") if podres_dir else None
        self.holdings = []      # (namespace, pod, container, [device ids]), as kubelet records them
        self.extra_holdings = []
        self.podres_answer = None   # raw bytes to answer List with
        self.podres_abort = None    # grpc.StatusCode to fail List with
        self.podres_calls = 0
        self.podres_server = None
        self.sock = os.path.join(plugin_dir, "kubelet.sock")
        self.cv = threading.Condition()
        self.registrations = []
        self.devices = {}       # id -> health
        self.topology = {}      # id -> [numa ids]
        self.updates = 0
        self.channel = None
        self.stub = None
        self.server = None
        self.stream_thread = None
        self._start()
        if self.podres_sock:
            self._start_podres()

    def _start_podres(self):
        def list_call(request, context):
            with self.cv:
                self.podres_calls += 1
                answer, abort = self.podres_answer, self.podres_abort
                held = list(self.holdings) + list(self.extra_holdings)
            if abort is not None:
                context.abort(abort, "pod-resources stand-in: injected failure")
            if answer is not None:
                return answer
            pods = {}
            for ns, pod, cont, ids in held:
                pods.setdefault((ns, pod), []).append(prpb.ContainerResources(
                    name=cont, devices=[prpb.ContainerDevices(resource_name=RESOURCE,
                                                              device_ids=list(ids))]))
            resp = prpb.ListPodResourcesResponse(pod_resources=[
                prpb.PodResources(name=pod, namespace=ns, containers=conts)
                for (ns, pod), conts in pods.items()])
            return resp.SerializeToString()
        handler = grpc.method_handlers_generic_handler("v1.PodResourcesLister", {
            "List": grpc.unary_unary_rpc_method_handler(list_call)})
        self.podres_server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
        self.podres_server.add_generic_rpc_handlers((handler,))
        self.podres_server.add_insecure_port("unix:" + self.podres_sock)
        self.podres_server.start()

    def _start(self):
        self.server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
        svc.add_RegistrationServicer_to_server(_Registration(self), self.server)
        self.server.add_insecure_port("unix:" + self.sock)
        self.server.start()

    def _on_register(self, req):
        # Like kubelet: dial the plugin and watch its devices, in the background.
        with self.cv:
            self.registrations.append(req)
            if self.channel:
                self.channel.close()
            self.channel = grpc.insecure_channel("unix:" + os.path.join(self.dir, req.endpoint))
            self.stub = svc.DevicePluginStub(self.channel)
            stub = self.stub
            self.cv.notify_all()
        t = threading.Thread(target=self._watch, args=(stub,), daemon=True)
        t.start()

    def _watch(self, stub):
        try:
            for resp in stub.ListAndWatch(pb.Empty()):
                with self.cv:
                    self.devices = {d.ID: d.health for d in resp.devices}
                    self.topology = {d.ID: [n.ID for n in d.topology.nodes] for d in resp.devices}
                    self.updates += 1
                    self.cv.notify_all()
        except grpc.RpcError:
            pass  # plugin went away; it registers again

    def wait(self, pred, timeout=10.0, what="condition"):
        end = time.time() + timeout
        with self.cv:
            while not pred():
                left = end - time.time()
                if left <= 0:
                    raise AssertionError(f"kubelet stand-in: timed out waiting for {what}")
                self.cv.wait(left)

    def wait_registered(self, count=1, timeout=15.0):
        self.wait(lambda: len(self.registrations) >= count, timeout, f"{count} registration(s)")
        self.wait(lambda: self.updates > 0, timeout, "a ListAndWatch update")

    def healthy(self):
        with self.cv:
            return sorted(i for i, h in self.devices.items() if h == "Healthy")

    def restart(self):
        self.server.stop(None).wait()
        with self.cv:
            if self.channel:
                self.channel.close()
            self.channel = self.stub = None
            self.updates = 0
            self.devices = {}
        for name in os.listdir(self.dir):
            path = os.path.join(self.dir, name)
            if not os.path.isdir(path):
                os.unlink(path)
        self._start()

    def close(self):
        self.server.stop(None).wait()
        if self.podres_server:
            self.podres_server.stop(None).wait()
        if self.channel:
            self.channel.close()

    # ---- calls kubelet makes ----
    def options(self):
        return self.stub.GetDevicePluginOptions(pb.Empty(), timeout=10)

    def preferred(self, available, size, must=()):
        req = pb.PreferredAllocationRequest(container_requests=[
            pb.ContainerPreferredAllocationRequest(available_deviceIDs=list(available),
                                                   must_include_deviceIDs=list(must),
                                                   allocation_size=size)])
        return list(self.stub.GetPreferredAllocation(req, timeout=10).container_responses[0].deviceIDs)

    def allocate(self, ids, timeout=20):
        req = pb.AllocateRequest(container_requests=[pb.ContainerAllocateRequest(devices_ids=list(ids))])
        return self.stub.Allocate(req, timeout=timeout).container_responses[0]

    def prestart(self, ids, timeout=20):
        req = pb.PreStartContainerRequest(devices_ids=list(ids))
        return self.stub.PreStartContainer(req, timeout=timeout)

    def held(self):
        with self.cv:
            return {i for h in self.holdings for i in h[3]}

    def record(self, pod, ids, ns="default", container="main"):
        """What kubelet's device manager does once Allocate succeeded."""
        with self.cv:
            self.holdings.append((ns, pod, container, list(ids)))

    def release(self, pod, ns="default"):
        with self.cv:
            self.holdings = [h for h in self.holdings if (h[0], h[1]) != (ns, pod)]

    def admit(self, pod, size=1, ns="default", container="main", prestart=True):
        """Admits one pod's GPU container as kubelet does: preferred
        allocation among the free devices, Allocate, record, and (at the
        container's start) PreStartContainer. Returns (ids, AllocateResponse)."""
        with self.cv:
            free = sorted(i for i, h in self.devices.items() if h == "Healthy")
        free = [i for i in free if i not in self.held()]
        ids = self.preferred(free, size)
        resp = self.allocate(ids)
        self.record(pod, ids, ns, container)
        if prestart:
            self.prestart(ids)
        return ids, resp

    def raw_call(self, method, payload, timeout=10):
        """Sends bytes that may not decode, as a broken client would."""
        call = self.channel.unary_unary(method, request_serializer=None, response_deserializer=None)
        return call(payload, timeout=timeout)
