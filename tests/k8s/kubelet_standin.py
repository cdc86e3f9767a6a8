"""KubeletStandIn: a test stand-in for kubelet's device manager.

It is NOT kubelet. It does what kubelet does toward a device plugin, on
Debian's python3-grpcio with code generated from our own .proto files:
serves Registration on <dir>/kubelet.sock, and on each Register dials the
plugin's endpoint, opens ListAndWatch and keeps the latest device list. Tests
then call GetPreferredAllocation / Allocate / PreStartContainer through it.
restart() behaves like a kubelet restart: stops serving, deletes every
socket in the directory (the plugin's included) and serves a new
kubelet.sock.
"""
import os
import threading
import time
from concurrent import futures

import grpc

import deviceplugin_v1beta1_pb2 as pb
import deviceplugin_v1beta1_service_pb2_grpc as svc


class _Registration(svc.RegistrationServicer):
    def __init__(self, owner):
        self.owner = owner

    def Register(self, request, context):
        if request.version != "v1beta1":
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, f"unsupported version {request.version}")
        self.owner._on_register(request)
        return pb.Empty()


class KubeletStandIn:
    def __init__(self, plugin_dir):
        self.dir = plugin_dir
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

    def raw_call(self, method, payload, timeout=10):
        """Sends bytes that may not decode, as a broken client would."""
        call = self.channel.unary_unary(method, request_serializer=None, response_deserializer=None)
        return call(payload, timeout=timeout)
