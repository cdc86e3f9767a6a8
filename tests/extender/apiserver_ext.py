"""ExtApiServerStandIn: tests/k8s/apiserver_standin.py (imported, unchanged)
plus what the extender needs and the base lacks: node list and watch, and
POST .../pods/{name}/binding with the real API server's answers (201 with a
Status; 409 when the pod is already bound or the uid precondition fails;
404 for a missing pod). Still NOT Kubernetes."""
import json
import os
import sys
from urllib.parse import parse_qs, urlparse

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "k8s"))
import apiserver_standin  # noqa: E402
from apiserver_standin import ApiServerStandIn, status  # noqa: E402


class ExtApiServerStandIn(ApiServerStandIn):
    def __init__(self, tls=None):
        super().__init__(tls)
        self.bindings = []        # (ns, name, node)
        self.fail_bind_next = []  # HTTP statuses for the next bindings
        self.lose_bind_reply_next = []  # statuses for the next bindings, made all the same (a lost reply)
        self.hold_bind = {}  # node name -> threading.Event: bindings to it wait for the event (a slow API server)
        srv = self
        self.httpd.RequestHandlerClass.do_POST = lambda h: srv._handle(h, "POST")

    def _handle(self, h, method):
        u = urlparse(h.path)
        q = {k: v[0] for k, v in parse_qs(u.query).items()}
        parts = [p for p in u.path.split("/") if p]
        if method == "POST":
            body = h.rfile.read(int(h.headers.get("Content-Length", "0")))
            with self.lock:
                self.requests.append((method, h.path))
                self.bodies.append((method, h.path, body))
            if len(parts) == 7 and parts[:3] == ["api", "v1", "namespaces"] and \
                    parts[4] == "pods" and parts[6] == "binding":
                return self._bind(h, parts[3], parts[5], body)
            return self._send(h, 404, status(404, "NotFound", "not found"))
        if method == "GET" and parts == ["api", "v1", "nodes"]:
            with self.lock:
                if self.fail_next:
                    code = self.fail_next.pop(0)
                    return self._send(h, code, status(code, "InternalError", "injected failure"))
            return self._list_watch(h, q, "NodeList", lambda kind, obj: kind == "Node")
        return super()._handle(h, method)

    def _bind(self, h, ns, name, body):
        try:
            b = json.loads(body)
        except ValueError:
            return self._send(h, 400, status(400, "BadRequest", "binding is not JSON"))
        held = self.hold_bind.get(((b.get("target") or {}).get("name")))
        if held is not None:
            held.wait(30)
        with self.lock:
            if self.fail_bind_next:
                code = self.fail_bind_next.pop(0)
                return self._send(h, code, status(code, "InternalError", "injected binding failure"))
            o = self.objects.get(("Pod", ns, name))
            if o is None:
                return self._send(h, 404, status(404, "NotFound", f'pods "{name}" not found'))
            if b.get("kind") != "Binding" or (b.get("target") or {}).get("kind") != "Node":
                return self._send(h, 400, status(400, "BadRequest", "not a Binding to a Node"))
            want_uid = (b.get("metadata") or {}).get("uid")
            if want_uid and want_uid != o["metadata"]["uid"]:
                return self._send(h, 409, status(409, "Conflict", "Precondition failed: UID in "
                                                 f"precondition: {want_uid}, UID in object meta: "
                                                 f"{o['metadata']['uid']}"))
            if o.get("spec", {}).get("nodeName"):
                return self._send(h, 409, status(
                    409, "Conflict", f'pod {name} is already assigned to node '
                    f'"{o["spec"]["nodeName"]}"'))
            o.setdefault("spec", {})["nodeName"] = b["target"]["name"]
            self.bindings.append((ns, name, b["target"]["name"]))
            self._bump("Pod", o, "MODIFIED")
            if self.lose_bind_reply_next:
                code = self.lose_bind_reply_next.pop(0)
                return self._send(h, code, status(code, "InternalError", "injected: made, reply lost"))
            ok = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success",
                  "code": 201}
            return self._send(h, 201, ok)


def install():
    """Makes tests/k8s fixtures build this stand-in instead of the base."""
    apiserver_standin.ApiServerStandIn = ExtApiServerStandIn
