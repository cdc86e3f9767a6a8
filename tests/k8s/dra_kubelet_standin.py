"""DraKubeletStandIn: a test stand-in for kubelet's DRA manager and plugin
watcher.

It is NOT kubelet. It does what kubelet does toward a DRA kubelet plugin, on
Debian's python3-grpcio with code generated from our own proto/ files
(pluginregistration_v1.proto, dra_v1*.proto):

- the plugin watcher: polls the registry directory for sockets; for each new
  one (a new inode: the plugin restarted) calls Registration.GetInfo, checks
  type "DRAPlugin" and the version "v1.DRAPlugin", dials the endpoint it
  names and calls NotifyRegistrationStatus;
- the DRA manager: prepare(claims) and unprepare(claims) call
  NodePrepareResources / NodeUnprepareResources on the registered plugin of
  a driver; prepare_retrying() retries, as kubelet does, until every claim
  answers without error or a deadline passes;
- the runtime's CDI step, which containerd 1.7+ and CRI-O do and Debian's
  containerd 1.6 cannot: cdi_edits() finds the CDI devices kubelet would
  hand to the runtime in the specs of a CDI directory and merges their
  containerEdits (env and mounts) as the CDI specification says.
"""
import glob
import json
import os
import threading
import time

import grpc

import dra_v1_pb2 as dpb
import dra_v1_service_pb2_grpc as dsvc
import pluginregistration_v1_pb2 as rpb
import pluginregistration_v1_pb2_grpc as rsvc

VERSION = "v1.DRAPlugin"


class DraKubeletStandIn:
    def __init__(self, registry_dir):
        self.dir = registry_dir
        os.makedirs(registry_dir, exist_ok=True)
        self.cv = threading.Condition()
        self.plugins = {}        # driver -> (endpoint, channel, stub)
        self.seen = {}           # registration socket path -> (inode, ctime): a new file is a new plugin
        self.registrations = []  # PluginInfo, in order
        self.refused = []        # (socket, why)
        self.stopping = False
        self.thread = threading.Thread(target=self._watch, daemon=True)
        self.thread.start()

    def _watch(self):
        while not self.stopping:
            for sock in glob.glob(os.path.join(self.dir, "*.sock")):
                try:
                    st = os.stat(sock)
                except OSError:
                    continue
                ino = (st.st_ino, st.st_ctime_ns)  # a recreated socket may reuse the inode
                if self.seen.get(sock) != ino:
                    self._register(sock, ino)
            time.sleep(0.05)

    def _register(self, sock, ino):
        try:
            with grpc.insecure_channel(f"unix:{sock}") as ch:
                reg = rsvc.RegistrationStub(ch)
                info = reg.GetInfo(rpb.InfoRequest(), timeout=5)
                why = ""
                if info.type != "DRAPlugin":
                    why = f"type {info.type!r} is not DRAPlugin"
                elif VERSION not in info.supported_versions:
                    why = f"no supported version in {list(info.supported_versions)}"
                elif not os.path.isabs(info.endpoint):
                    why = f"endpoint {info.endpoint!r} is not an absolute path"
                reg.NotifyRegistrationStatus(rpb.RegistrationStatus(plugin_registered=not why, error=why),
                                             timeout=5)
        except grpc.RpcError:
            return  # not serving yet: the next poll retries
        self.seen[sock] = ino
        with self.cv:
            if why:
                self.refused.append((sock, why))
            else:
                old = self.plugins.get(info.name)
                if old:
                    old[1].close()
                ch = grpc.insecure_channel(f"unix:{info.endpoint}")
                self.plugins[info.name] = (info.endpoint, ch, dsvc.DRAPluginStub(ch))
                self.registrations.append(info)
            self.cv.notify_all()

    def wait_registered(self, n=1, timeout=20):
        with self.cv:
            if not self.cv.wait_for(lambda: len(self.registrations) >= n, timeout):
                raise AssertionError(f"no DRA plugin registered {n} time(s) in {timeout}s "
                                     f"(refused: {self.refused})")
            return self.registrations[n - 1]

    def _stub(self, driver):
        with self.cv:
            return self.plugins[driver][2]

    @staticmethod
    def _claims(claims):
        return [dpb.Claim(namespace=c["metadata"]["namespace"], uid=c["metadata"]["uid"],
                          name=c["metadata"]["name"]) for c in claims]

    def prepare(self, driver, claims, timeout=30):
        """NodePrepareResources for claims (ResourceClaim objects); the
        answer's map, claim uid -> NodePrepareResourceResponse."""
        r = self._stub(driver).NodePrepareResources(
            dpb.NodePrepareResourcesRequest(claims=self._claims(claims)), timeout=timeout)
        return dict(r.claims)

    def unprepare(self, driver, claims, timeout=30):
        r = self._stub(driver).NodeUnprepareResources(
            dpb.NodeUnprepareResourcesRequest(claims=self._claims(claims)), timeout=timeout)
        return dict(r.claims)

    def prepare_retrying(self, driver, claims, deadline=20):
        """As kubelet: call again until every claim is prepared without
        error (a failed call, a plugin restarting, a claim with an error)."""
        end = time.time() + deadline
        last = None
        while time.time() < end:
            try:
                got = self.prepare(driver, claims, timeout=5)
                if all(c["metadata"]["uid"] in got and not got[c["metadata"]["uid"]].error for c in claims):
                    return got
                last = got
            except (grpc.RpcError, KeyError) as e:
                last = e
            time.sleep(0.1)
        raise AssertionError(f"claims not prepared in {deadline}s: {last}")

    def close(self):
        self.stopping = True
        self.thread.join(timeout=5)
        with self.cv:
            for _, ch, _ in self.plugins.values():
                ch.close()


def cdi_edits(cdi_dir, device_ids):
    """The env (dict) and mounts (list of dicts) that a CDI-aware runtime
    applies for device_ids ("vendor/class=name"), from the spec files in
    cdi_dir: each device's containerEdits after its spec's own. IDs of a
    kind no spec in cdi_dir has (nvidia.com/gpu: NVIDIA's own specs, which
    the simulated GPU has none of) are returned apart."""
    specs = []
    for f in sorted(glob.glob(os.path.join(cdi_dir, "*.json"))):
        with open(f) as fh:
            specs.append(json.load(fh))
    env, mounts, foreign = {}, [], []
    for did in device_ids:
        kind, name = did.split("=", 1)
        found = False
        for s in specs:
            if s["kind"] != kind:
                continue
            for d in s["devices"]:
                if d["name"] == name:
                    found = True
                    for edits in (s.get("containerEdits") or {}, d["containerEdits"]):
                        for kv in edits.get("env", []):
                            k, v = kv.split("=", 1)
                            env[k] = v
                        mounts += edits.get("mounts", [])
        if not found:
            if any(s["kind"] == kind for s in specs):
                raise AssertionError(f"CDI device {did} is in no spec of {cdi_dir}")
            foreign.append(did)
    return env, mounts, foreign
