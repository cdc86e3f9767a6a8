"""ApiServerStandIn: a test stand-in for the Kubernetes API server.

It is NOT Kubernetes. It keeps what the node agent relies on, with real
shapes: Pod and Node objects as JSON, one global resourceVersion counter,
JSON merge patches (RFC 7386) that answer 409 Conflict with a Status object
when the patch carries a stale metadata.resourceVersion, list responses
with metadata.resourceVersion, field selector spec.nodeName, and watch
streams (one JSON event per line, chunked) that start after a given
resourceVersion and answer an ERROR event with code 410 when it is too old.
With close_watches set, every watch ends at once with no event (a broken
API server or proxy), so clients' re-watch backoff can be counted.
Every body a client writes (PATCH, POST) is kept in `bodies`; with
$GS_STANDIN_BODIES naming a directory, close() also saves them there as JSON
lines, for tests/k8s/test_api_bodies.py to check against the official schemas.
For the DRA driver it also keeps resource.k8s.io/v1 objects: ResourceClaims
(GET by namespace and name; tests put them, allocated, as the scheduler
would) and ResourceSlices (GET, POST to create with 409 AlreadyExists, PUT
to replace with 409 Conflict on a stale resourceVersion).
No auth, no admission, no other kinds.
"""
import copy
import json
import os
import ssl
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlparse


def merge_patch(target, patch):
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    if not isinstance(target, dict):
        target = {}
    out = dict(target)
    for k, v in patch.items():
        if v is None:
            out.pop(k, None)
        else:
            out[k] = merge_patch(out.get(k), v)
    return out


def status(code, reason, message):
    return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": message, "reason": reason, "code": code}


class ApiServerStandIn:
    def __init__(self, tls=None):
        """tls: (certificate, key, client CA or None): serve HTTPS, and with
        a client CA answer only clients holding a certificate it issued
        (as kube-apiserver's --client-ca-file); self.peers then logs each
        request's client certificate subject CN."""
        self.lock = threading.Condition()
        self.rv = 100
        self.objects = {}  # (kind, ns, name) -> obj
        self.events = []   # (rv, type, kind, obj)
        self.oldest_event_rv = 0
        self.requests = []  # (method, path) log
        self.fail_next = []  # HTTP statuses to answer the next requests with
        self.garbage_next = 0  # next N GETs answer a body that is not JSON
        self.touch_before_patch = 0  # next N conditional patches race a real writer
        self.race_pod_patch = None  # annotations another writer puts on the next patched Pod first
        self.conflicts = 0
        self.close_watches = False  # watches end at once, with no event
        self.bodies = []  # (method, path, raw body) of every PATCH and POST
        self.peers = []  # the client certificate's CN of each request over TLS, or None
        self.max_page = None  # a list with ?limit= answers at most this many items a page
        self.stopping = False
        srv = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *a):
                pass

            def do_GET(self):
                srv._handle(self, "GET")

            def do_PATCH(self):
                srv._handle(self, "PATCH")

            def do_POST(self):
                srv._handle(self, "POST")

            def do_PUT(self):
                srv._handle(self, "PUT")

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        scheme = "http"
        if tls:
            ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            ctx.load_cert_chain(tls[0], tls[1])
            if tls[2]:
                ctx.verify_mode = ssl.CERT_REQUIRED
                ctx.load_verify_locations(tls[2])
            self.httpd.socket = ctx.wrap_socket(self.httpd.socket, server_side=True)
            scheme = "https"
        self.url = f"{scheme}://127.0.0.1:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def close(self):
        with self.lock:
            self.stopping = True
            self.lock.notify_all()
        self.httpd.shutdown()
        self.httpd.server_close()
        out = os.environ.get("GS_STANDIN_BODIES")
        if out and self.bodies:
            os.makedirs(out, exist_ok=True)
            with open(os.path.join(out, f"{os.getpid()}-{id(self)}.jsonl"), "a") as f:
                for m, path, body in self.bodies:
                    f.write(json.dumps({"method": m, "path": path,
                                        "body": body.decode(errors="replace")}) + "\n")

    # ---- object store ----
    def _bump(self, kind, obj, etype):
        self.rv += 1
        obj["metadata"]["resourceVersion"] = str(self.rv)
        self.events.append((self.rv, etype, kind, copy.deepcopy(obj)))
        self.lock.notify_all()

    def put(self, kind, obj):
        with self.lock:
            md = obj.setdefault("metadata", {})
            md.setdefault("uid", str(uuid.uuid4()))
            md.setdefault("creationTimestamp",
                          time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()))
            key = (kind, md.get("namespace", ""), md["name"])
            etype = "MODIFIED" if key in self.objects else "ADDED"
            self.objects[key] = obj
            self._bump(kind, obj, etype)
            return copy.deepcopy(obj)

    def get(self, kind, name, ns=""):
        with self.lock:
            o = self.objects.get((kind, ns, name))
            return copy.deepcopy(o) if o else None

    def delete(self, kind, name, ns=""):
        with self.lock:
            o = self.objects.pop((kind, ns, name))
            self._bump(kind, o, "DELETED")

    def watch_requests(self):
        with self.lock:
            return sum(1 for m, p in self.requests if m == "GET" and "watch=1" in p)

    def set_close_watches(self, on):
        """From now on, watches end at once (open ones within 0.2 s)."""
        with self.lock:
            self.close_watches = on
            self.lock.notify_all()

    def compact(self):
        """Forget the event history (watches from older versions get 410)."""
        with self.lock:
            self.oldest_event_rv = self.rv
            self.events = []

    # ---- HTTP ----
    def _send(self, h, code, body, ctype="application/json"):
        data = body if isinstance(body, bytes) else json.dumps(body).encode()
        h.send_response(code)
        h.send_header("Content-Type", ctype)
        h.send_header("Content-Length", str(len(data)))
        h.end_headers()
        h.wfile.write(data)

    def _handle(self, h, method):
        u = urlparse(h.path)
        q = {k: v[0] for k, v in parse_qs(u.query).items()}
        parts = [p for p in u.path.split("/") if p]
        body = b""
        if method in ("PATCH", "POST", "PUT"):
            body = h.rfile.read(int(h.headers.get("Content-Length", "0")))
        peer = h.connection.getpeercert() if hasattr(h.connection, "getpeercert") else None
        cn = dict(x[0] for x in peer["subject"]).get("commonName") if peer else None
        with self.lock:
            self.requests.append((method, h.path))
            self.peers.append(cn)
            if method in ("PATCH", "POST", "PUT"):
                self.bodies.append((method, h.path, body))
            if self.fail_next:
                code = self.fail_next.pop(0)
                return self._send(h, code, status(code, "InternalError", "injected failure"))
            if method == "GET" and self.garbage_next > 0 and q.get("watch") != "1":
                self.garbage_next -= 1
                return self._send(h, 200, b"{not json]", "application/json")
        if parts[:3] == ["apis", "resource.k8s.io", "v1"]:
            return self._resource(h, method, parts[3:], body)
        if parts[:2] != ["api", "v1"]:
            return self._send(h, 404, status(404, "NotFound", "not found"))
        rest = parts[2:]
        if rest == ["pods"] and method == "GET":
            return self._pods(h, q)
        if len(rest) == 2 and rest[0] == "nodes":
            return self._object(h, method, "Node", "", rest[1], body)
        if len(rest) == 4 and rest[0] == "namespaces" and rest[2] == "pods":
            return self._object(h, method, "Pod", rest[1], rest[3], body)
        return self._send(h, 404, status(404, "NotFound", "not found"))

    def _object(self, h, method, kind, ns, name, body):
        with self.lock:
            o = self.objects.get((kind, ns, name))
            if o is None:
                return self._send(h, 404, status(404, "NotFound", f"{kind} {name} not found"))
            if method == "GET":
                return self._send(h, 200, o)
            if h.headers.get("Content-Type") != "application/merge-patch+json":
                return self._send(h, 415, status(415, "UnsupportedMediaType", "merge patch only"))
            try:
                patch = json.loads(body)
            except ValueError:
                return self._send(h, 400, status(400, "BadRequest", "patch is not JSON"))
            want = (patch.get("metadata") or {}).get("resourceVersion") if isinstance(patch, dict) else None
            if want is not None and kind == "Pod" and self.race_pod_patch:
                # Another writer (a second extender replica) annotates the pod first.
                o["metadata"].setdefault("annotations", {}).update(self.race_pod_patch)
                self.race_pod_patch = None
                self._bump(kind, o, "MODIFIED")
            if want is not None and self.touch_before_patch > 0:
                # A real concurrent writer changes the object first.
                self.touch_before_patch -= 1
                o["metadata"].setdefault("labels", {})["standin/touched"] = str(self.rv)
                self._bump(kind, o, "MODIFIED")
            if want is not None and want != o["metadata"]["resourceVersion"]:
                self.conflicts += 1
                return self._send(h, 409, status(
                    409, "Conflict", f"Operation cannot be fulfilled on {kind.lower()}s \"{name}\": "
                    "the object has been modified; please apply your changes to the latest version "
                    "and try again"))
            if isinstance(patch, dict) and isinstance(patch.get("metadata"), dict):
                patch["metadata"].pop("resourceVersion", None)
            new = merge_patch(o, patch)
            self.objects[(kind, ns, name)] = new
            self._bump(kind, new, "MODIFIED")
            return self._send(h, 200, new)

    def _resource(self, h, method, rest, body):
        """resource.k8s.io/v1: ResourceClaims (GET) and ResourceSlices
        (GET, POST, PUT)."""
        if len(rest) == 4 and rest[0] == "namespaces" and rest[2] == "resourceclaims" and method == "GET":
            return self._object(h, method, "ResourceClaim", rest[1], rest[3], body)
        if rest[:1] != ["resourceslices"] or len(rest) > 2:
            return self._send(h, 404, status(404, "NotFound", "not found"))
        if method == "GET" and len(rest) == 2:
            return self._object(h, method, "ResourceSlice", "", rest[1], body)
        try:
            obj = json.loads(body)
            name = obj["metadata"]["name"]
        except (ValueError, KeyError, TypeError):
            return self._send(h, 400, status(400, "BadRequest", "body is not an object with a name"))
        with self.lock:
            cur = self.objects.get(("ResourceSlice", "", name))
            if method == "POST" and len(rest) == 1:
                if cur is not None:
                    return self._send(h, 409, status(409, "AlreadyExists", f"resourceslices \"{name}\" already exists"))
            elif method == "PUT" and len(rest) == 2 and rest[1] == name:
                if cur is None:
                    return self._send(h, 404, status(404, "NotFound", f"ResourceSlice {name} not found"))
                if obj["metadata"].get("resourceVersion") != cur["metadata"]["resourceVersion"]:
                    self.conflicts += 1
                    return self._send(h, 409, status(409, "Conflict", f"resourceslices \"{name}\": the object "
                                                     "has been modified"))
                obj["metadata"]["uid"] = cur["metadata"]["uid"]
            else:
                return self._send(h, 405, status(405, "MethodNotAllowed", f"{method} {h.path}"))
        return self._send(h, 201 if method == "POST" else 200, self.put("ResourceSlice", obj))

    def _match(self, kind, obj, node):
        return kind == "Pod" and (node is None or obj.get("spec", {}).get("nodeName") == node)

    def _pods(self, h, q):
        node = None
        fs = q.get("fieldSelector")
        if fs:
            if not fs.startswith("spec.nodeName="):
                return self._send(h, 400, status(400, "BadRequest", "unsupported field selector"))
            node = fs.split("=", 1)[1]
        return self._list_watch(h, q, "PodList", lambda kind, obj: self._match(kind, obj, node))

    def _list_watch(self, h, q, list_kind, match):
        """A list (one object of kind list_kind) or, with watch=1, a chunked
        watch from resourceVersion on (410 when it is older than the oldest
        event kept) of the objects match(kind, obj) selects."""
        if q.get("watch") != "1":
            with self.lock:
                items = [o for key, o in sorted(self.objects.items()) if match(key[0], o)]
                meta = {"resourceVersion": str(self.rv)}
                if "limit" in q:  # pages, each as small as the server likes (at most the limit)
                    start = 0
                    if q.get("continue"):  # the token as sent: '&', '=' and '/' must come escaped
                        at, rv = q["continue"].removeprefix("at=").split("&rv=")
                        start, meta["resourceVersion"] = int(at), rv.removesuffix("/")
                    size = min(int(q["limit"]), self.max_page or int(q["limit"]))
                    if start + size < len(items):
                        meta["continue"] = f"at={start + size}&rv={meta['resourceVersion']}/"
                    items = items[start:start + size]
                return self._send(h, 200, {"kind": list_kind, "apiVersion": "v1", "metadata": meta,
                                           "items": items})
        since = int(q.get("resourceVersion", "0") or 0)
        deadline = time.time() + int(q.get("timeoutSeconds", "60"))
        h.send_response(200)
        h.send_header("Content-Type", "application/json")
        h.send_header("Transfer-Encoding", "chunked")
        h.end_headers()

        def chunk(obj):
            data = (json.dumps(obj) + "\n").encode()
            h.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
            h.wfile.flush()
        try:
            with self.lock:
                if since < self.oldest_event_rv:
                    chunk({"type": "ERROR", "object": status(410, "Expired", "too old resource version")})
                    h.wfile.write(b"0\r\n\r\n")
                    return
            sent = since
            while time.time() < deadline and not self.stopping and not self.close_watches:
                with self.lock:
                    evs = [e for e in self.events if e[0] > sent]
                    if not evs:
                        self.lock.wait(0.2)
                        continue
                for rv, etype, kind, obj in evs:
                    sent = rv
                    if match(kind, obj):
                        chunk({"type": etype, "object": obj})
            h.wfile.write(b"0\r\n\r\n")
        except (BrokenPipeError, ConnectionResetError):
            pass
