"""A stateful fake kube-apiserver on 127.0.0.1, good enough for the official `kubernetes` client.

Core/v1: pods (namespaced and cluster-wide), nodes, configmaps, and events (create only); and
resource.k8s.io's ResourceSlices (with deletecollection), ResourceClaims and DeviceClasses.
It keeps the parts of the real server's behaviour that our code depends on:

- one global resourceVersion counter; every write that changes an object bumps it (a no-op
  update or patch does not, as on a real server); objects carry uid, creationTimestamp and
  resourceVersion;
- list with fieldSelector (metadata.name, metadata.namespace, spec.nodeName, status.phase on
  pods; anything else is a 400), equality-based labelSelector, and limit/continue paging over a
  consistent snapshot;
- watch (chunked newline-delimited JSON) from a resourceVersion, with timeoutSeconds, with
  ADDED/DELETED synthesised when an object enters or leaves the selection, and an ERROR event
  with code 410 once that resourceVersion has fallen out of the bounded history; with
  allowWatchBookmarks, a BOOKMARK every `bookmark_interval_s` (the watch cache's minute) and one
  2 s before the watch's timeout, as the real watch cache sends them to a plain watch;
- optimistic concurrency (stale metadata.resourceVersion on PUT or PATCH -> 409), 409
  AlreadyExists, 404, merge/strategic-merge/JSON patch, graceful pod deletion;
- a node's `status` subresource: PUT or PATCH there change only its status, PUT or PATCH of
  the node only the rest;
- failure injection (`fail_next`, `delay`, `set_down`) and a request log for assertions, with
  each request's verb as the apiserver's metrics name it (`verb_counts`: GET, LIST, WATCH, ...).

Writes are validated as the real server validates them where our code writes (tests/support/
kube_validation.py: ResourceSlices, ResourceClaims, DeviceClasses, ConfigMaps; object names of
every kind): a write the real server refuses is a 422 here too. The helpers (`add_pod`, `modify`,
`remove`, ...) write core objects straight into the store without that validation, so tests can
plant objects a real apiserver would refuse; resource.k8s.io objects planted so are validated
all the same (they stand in for the scheduler's writes, which the real server checks).

Device taints on ResourceSlices (`device_taints`): where the server keeps them (1.36: the
DRADeviceTaints gate is beta and on), a taint written without `timeAdded` gets the time of the
write, to the second (SetDefaults_DeviceTaint), before validation; where it does not (1.32's
v1beta1 has no such field; 1.33 to 1.35 have it behind the alpha gate, off by default), the
`taints` of every device are dropped, silently, before validation (the registry's
dropDisabledFields), unless the slice as stored holds some already (the gate was on then).
Default: kept where v1 is served (as 1.36 does), dropped on a v1beta1-only server (as 1.32).
"""

from __future__ import annotations

import base64
import contextlib
import copy
import json
import re
import socket
import threading
import time
import uuid
from collections import OrderedDict, deque
from collections.abc import Callable, Generator, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import TracebackType
from typing import Any, Literal
from urllib.parse import parse_qsl, urlsplit

from kubernetes import client as k8s

from tests.support.kube_validation import VALIDATORS, validate_object_meta

JsonObj = dict[str, Any]
Key = tuple[str, str]  # (namespace or "", name)

_RFC3339_MICRO = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}(Z|[+-]\d\d:\d\d)")
_DNS1123_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_REASONS = {
    400: "BadRequest",
    403: "Forbidden",
    404: "NotFound",
    405: "MethodNotAllowed",
    409: "Conflict",
    410: "Expired",
    415: "UnsupportedMediaType",
    422: "Invalid",
    429: "TooManyRequests",
    500: "InternalError",
    503: "ServiceUnavailable",
    504: "Timeout",
}


@dataclass(frozen=True)
class _Kind:
    plural: str
    kind: str
    namespaced: bool
    verbs: frozenset[str]
    fields: Mapping[str, Callable[[JsonObj], str]]
    group: str = ""  # "": the core group, under /api/v1; else under /apis/<group>/<version>


def _meta(obj: JsonObj, key: str) -> str:
    return str(obj.get("metadata", {}).get(key) or "")


_ALL_VERBS = frozenset({"get", "list", "watch", "create", "update", "patch", "delete"})
_KINDS: dict[str, _Kind] = {
    "pods": _Kind(
        "pods",
        "Pod",
        True,
        _ALL_VERBS,
        {
            "metadata.name": lambda o: _meta(o, "name"),
            "metadata.namespace": lambda o: _meta(o, "namespace"),
            "spec.nodeName": lambda o: str((o.get("spec") or {}).get("nodeName") or ""),
            "status.phase": lambda o: str((o.get("status") or {}).get("phase") or ""),
        },
    ),
    "nodes": _Kind("nodes", "Node", False, _ALL_VERBS, {"metadata.name": lambda o: _meta(o, "name")}),
    "configmaps": _Kind(
        "configmaps",
        "ConfigMap",
        True,
        _ALL_VERBS,
        {"metadata.name": lambda o: _meta(o, "name"), "metadata.namespace": lambda o: _meta(o, "namespace")},
    ),
    "events": _Kind("events", "Event", True, frozenset({"create"}), {}),
}

# Dynamic Resource Allocation (resource.k8s.io): served in the versions a FakeApiServer is given
# (`resource_api_versions`), none by default, as the real 1.20 apiserver here serves none. Objects
# are stored as written, whatever version they were written in (the fake converts nothing).
RESOURCE_GROUP = "resource.k8s.io"


def _spec_field(name: str) -> Callable[[JsonObj], str]:
    return lambda o: str((o.get("spec") or {}).get(name) or "")


_KINDS.update(
    {
        # deletecollection: the kubelet's registration handler wipes a node's (or a driver's) slices so.
        "resourceslices": _Kind(
            "resourceslices", "ResourceSlice", False, _ALL_VERBS | {"deletecollection"},
            {"metadata.name": lambda o: _meta(o, "name"), "spec.nodeName": _spec_field("nodeName"),
             "spec.driver": _spec_field("driver")},
            RESOURCE_GROUP,
        ),
        "resourceclaims": _Kind(
            "resourceclaims", "ResourceClaim", True, _ALL_VERBS,
            {"metadata.name": lambda o: _meta(o, "name"), "metadata.namespace": lambda o: _meta(o, "namespace")},
            RESOURCE_GROUP,
        ),
        "deviceclasses": _Kind(
            "deviceclasses", "DeviceClass", False, _ALL_VERBS, {"metadata.name": lambda o: _meta(o, "name")},
            RESOURCE_GROUP,
        ),
    }
)  # fmt: skip


class ApiError(Exception):
    """An error the fake answers with a Status object, as the real server does."""

    def __init__(self, code: int, message: str, reason: str | None = None, details: JsonObj | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.reason = reason or _REASONS.get(code, "Unknown")
        self.details = details

    def status(self) -> JsonObj:
        out: JsonObj = {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
            "code": self.code,
        }
        if self.details:
            out["details"] = self.details
        return out


@dataclass
class RecordedRequest:
    method: str
    path: str
    query: dict[str, str]
    body: Any
    content_type: str | None
    status: int = 0  # filled in once answered; 0 while a watch is still streaming
    at: float = field(default_factory=time.monotonic)  # when it came in

    @property
    def verb(self) -> str:
        """The verb apiserver_request_total gives it: a GET is a WATCH, a LIST or a GET of one object."""
        if self.method != "GET":
            return self.method
        if self.query.get("watch") in ("true", "1"):
            return "WATCH"
        parts = [p for p in self.path.split("/") if p]
        rest = parts[2:] if parts[:1] == ["api"] else parts[3:]
        if len(rest) >= 3 and rest[0] == "namespaces":
            rest = rest[2:]
        return "LIST" if len(rest) == 1 else "GET"


@dataclass
class _FailRule:
    remaining: int
    status: int
    path_prefix: str | None
    method: str | None
    retry_after: int

    def matches(self, method: str, path: str) -> bool:
        return (self.method is None or self.method == method) and (
            self.path_prefix is None or path.startswith(self.path_prefix)
        )


@dataclass(frozen=True)
class _Event:
    rv: int
    plural: str
    type: str
    obj: JsonObj
    prev: JsonObj | None


@dataclass(frozen=True)
class _Selector:
    fields: tuple[tuple[str, str, bool], ...] = ()  # (field, value, equal)
    labels: tuple[tuple[str, str | None, bool], ...] = ()  # (key, value or None for existence, equal)

    def matches(self, kind: _Kind, obj: JsonObj) -> bool:
        for name, value, equal in self.fields:
            if (kind.fields[name](obj) == value) != equal:
                return False
        labels = obj.get("metadata", {}).get("labels") or {}
        for key, lvalue, equal in self.labels:
            present = key in labels if lvalue is None else labels.get(key) == lvalue
            if present != equal:
                return False
        return True


@dataclass
class _Route:
    kind: _Kind
    namespace: str | None  # None: all namespaces (or a cluster-scoped kind)
    name: str | None
    subresource: str | None


@dataclass
class _Snapshot:
    rv: int
    items: list[JsonObj] = field(default_factory=list)


def now_rfc3339(ts: float | None = None) -> str:
    return datetime.fromtimestamp(time.time() if ts is None else ts, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def merge_patch(target: Any, patch: Any, *, strategic: bool = False) -> Any:
    """RFC 7386 merge: maps merge recursively, null deletes a key, anything else replaces.

    Strategic merge is approximated by this (lists are replaced, not merged by key); its
    `$`-directives are dropped because no caller of ours sends list-merge instructions.
    """
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    out = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if strategic and key.startswith("$"):
            continue
        if value is None:
            out.pop(key, None)
        else:
            out[key] = merge_patch(out.get(key), value, strategic=strategic)
    return out


def _pointer(path: str) -> list[str]:
    if path == "":
        return []
    if not path.startswith("/"):
        raise ApiError(422, f"invalid JSON pointer {path!r}")
    return [p.replace("~1", "/").replace("~0", "~") for p in path[1:].split("/")]


def json_patch(doc: Any, ops: Any) -> Any:
    """RFC 6902 add/remove/replace/test (what kubectl and client-go send)."""
    if not isinstance(ops, list):
        raise ApiError(400, "a JSON patch must be a list of operations")
    doc = copy.deepcopy(doc)
    for op in ops:
        if not isinstance(op, dict) or "op" not in op or "path" not in op:
            raise ApiError(400, f"malformed JSON patch operation {op!r}")
        parts = _pointer(str(op["path"]))
        if not parts:
            raise ApiError(422, "JSON patch on the whole document is not supported")
        parent: Any = doc
        for part in parts[:-1]:
            if isinstance(parent, dict) and part in parent:
                parent = parent[part]
            elif isinstance(parent, list) and part.isdigit() and int(part) < len(parent):
                parent = parent[int(part)]
            else:
                raise ApiError(422, f"jsonpatch {op['op']}: missing path {op['path']}")
        last = parts[-1]
        kind = op["op"]
        if isinstance(parent, dict):
            if kind == "add" or (kind == "replace" and last in parent):
                parent[last] = copy.deepcopy(op.get("value"))
            elif kind == "remove" and last in parent:
                del parent[last]
            elif kind == "test" and parent.get(last) == op.get("value") and last in parent:
                pass
            else:
                raise ApiError(422, f"jsonpatch {kind} operation does not apply: {op['path']}")
        elif isinstance(parent, list):
            index = len(parent) if last == "-" else (int(last) if last.isdigit() else -1)
            if kind == "add" and 0 <= index <= len(parent):
                parent.insert(index, copy.deepcopy(op.get("value")))
            elif kind in ("replace", "remove", "test") and 0 <= index < len(parent):
                if kind == "replace":
                    parent[index] = copy.deepcopy(op.get("value"))
                elif kind == "remove":
                    del parent[index]
                elif parent[index] != op.get("value"):
                    raise ApiError(422, f"jsonpatch test failed: {op['path']}")
            else:
                raise ApiError(422, f"jsonpatch {kind} operation does not apply: {op['path']}")
        else:
            raise ApiError(422, f"jsonpatch {kind}: {op['path']} is not inside an object or a list")
    return doc


def _keep_other_half(route: _Route, old: JsonObj, new: JsonObj) -> None:
    """A node's status is written through its `status` subresource only, and its spec through the
    node itself: the real apiserver keeps the other half as it was (pkg/registry/core/node/strategy.go
    nodeStrategy / nodeStatusStrategy PrepareForUpdate), silently, and answers 200."""
    if route.kind.plural != "nodes":
        return
    kept = "spec" if route.subresource == "status" else "status"
    if kept in old:
        new[kept] = copy.deepcopy(old[kept])
    else:
        new.pop(kept, None)


def _parse_selector(kind: _Kind, field_sel: str | None, label_sel: str | None) -> _Selector:
    fields: list[tuple[str, str, bool]] = []
    for term in filter(None, (t.strip() for t in (field_sel or "").split(","))):
        m = re.fullmatch(r"([^=!]+)(==|=|!=)(.*)", term)
        if not m:
            raise ApiError(400, f"invalid field selector: {term!r}")
        name, op, value = m.group(1).strip(), m.group(2), m.group(3).strip()
        if name not in kind.fields:
            raise ApiError(400, f'field label not supported: "{name}"')
        fields.append((name, value, op != "!="))
    labels: list[tuple[str, str | None, bool]] = []
    for term in filter(None, (t.strip() for t in (label_sel or "").split(","))):
        m = re.fullmatch(r"([A-Za-z0-9._/-]+)\s*(==|=|!=)\s*([A-Za-z0-9._-]*)", term)
        if m:
            labels.append((m.group(1), m.group(3), m.group(2) != "!="))
        elif re.fullmatch(r"!?[A-Za-z0-9._/-]+", term):
            labels.append((term.lstrip("!"), None, not term.startswith("!")))
        else:
            # Set-based selectors (in, notin) are not needed by our code; refuse them loudly.
            raise ApiError(400, f"unsupported label selector: {term!r}")
    return _Selector(tuple(fields), tuple(labels))


def _quantity(value: int | str) -> str:
    return str(value)


class _HttpServer(ThreadingHTTPServer):
    # Handler threads are joined at shutdown (after their sockets are shut down), so a test
    # never leaves a thread streaming into a closed fake.
    daemon_threads = False
    block_on_close = True
    allow_reuse_address = True

    def __init__(self, addr: tuple[str, int], fake: FakeApiServer) -> None:
        self.fake = fake
        self.connections: set[socket.socket] = set()
        self.conn_lock = threading.Lock()
        super().__init__(addr, _Handler)

    def drop_connections(self) -> None:
        with self.conn_lock:
            conns = list(self.connections)
        for conn in conns:
            with contextlib.suppress(OSError):
                conn.shutdown(socket.SHUT_RDWR)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _HttpServer

    def setup(self) -> None:
        super().setup()
        # The real apiserver (Go's net/http) sets TCP_NODELAY on every connection. Without it the
        # body, written after the headers, waits for the client's delayed ACK: 40 ms a request.
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        with self.server.conn_lock:
            self.server.connections.add(self.connection)

    def finish(self) -> None:
        with self.server.conn_lock:
            self.server.connections.discard(self.connection)
        with contextlib.suppress(OSError):  # the peer may be gone already
            super().finish()

    def log_message(self, format: str, *args: Any) -> None:
        pass  # the request log is the record; stderr noise only hides test output

    def do_GET(self) -> None:
        self._dispatch("GET")

    def do_POST(self) -> None:
        self._dispatch("POST")

    def do_PUT(self) -> None:
        self._dispatch("PUT")

    def do_PATCH(self) -> None:
        self._dispatch("PATCH")

    def do_DELETE(self) -> None:
        self._dispatch("DELETE")

    def _dispatch(self, method: str) -> None:
        fake = self.server.fake
        parts = urlsplit(self.path)
        query = dict(parse_qsl(parts.query, keep_blank_values=True))
        try:
            length = max(0, int(self.headers.get("Content-Length") or 0))
        except ValueError:
            length = 0
        raw = self.rfile.read(length) if length else b""
        content_type = (self.headers.get("Content-Type") or "").split(";")[0].strip() or None
        body: Any = None
        bad_body = False
        if raw:
            try:
                body = json.loads(raw)
            except ValueError:
                body, bad_body = raw.decode("utf-8", "replace"), True
        record = RecordedRequest(method, parts.path, query, body, content_type)
        fake._record(record)
        try:
            fake._before_request(method, parts.path)
            if bad_body:
                raise ApiError(400, "request body is not valid JSON")
            watching = method == "GET" and query.get("watch") in ("true", "1")
            if watching:
                record.status = 200
                self._watch(fake, parts.path, query)
                return
            code, payload = fake._handle(method, parts.path, query, body, content_type)
        except ApiError as err:
            record.status = err.code
            headers = {}
            if err.code == 429 and err.details and "retryAfterSeconds" in err.details:
                headers["Retry-After"] = str(err.details["retryAfterSeconds"])
            self._send_json(err.code, err.status(), headers)
            return
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True
            return
        record.status = code
        self._send_json(code, payload)

    def _send_json(self, code: int, payload: JsonObj, headers: Mapping[str, str] | None = None) -> None:
        data = json.dumps(payload, separators=(",", ":")).encode()
        try:
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            for key, value in (headers or {}).items():
                self.send_header(key, value)
            self.end_headers()
            self.wfile.write(data)
        except OSError:
            self.close_connection = True

    def _watch(self, fake: FakeApiServer, path: str, query: Mapping[str, str]) -> None:
        # Validate before the 200 goes out, so a bad selector is a plain 400 as on a real server.
        events = fake._watch_events(path, query)
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        # Chunked encoding matters: urllib3's stream() on a close-delimited body reads to EOF.
        self.close_connection = True
        try:
            for event in events:
                data = json.dumps(event, separators=(",", ":")).encode() + b"\n"
                self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
            self.wfile.write(b"0\r\n\r\n")
        except OSError:
            pass
        finally:
            events.close()


class FakeApiServer:
    """See the module docstring. Use as a context manager or call start()/stop()."""

    def __init__(
        self,
        *,
        history: int = 1000,
        graceful_pod_delete: bool = True,
        host: str = "127.0.0.1",
        resource_api_versions: tuple[str, ...] = (),
        device_taints: bool | None = None,
        bookmark_interval_s: float = 60.0,
    ) -> None:
        self._host = host
        self.bookmark_interval_s = bookmark_interval_s
        # Set, every watch opened from now on ends after this many seconds, whatever it asked for,
        # and says nothing: as a proxy with a short idle timeout cuts watches.
        self.cut_watches_after_s: float | None = None
        self.resource_api_versions = resource_api_versions
        self.device_taints = "v1" in resource_api_versions if device_taints is None else device_taints
        self._port = 0
        self._cond = threading.Condition(threading.RLock())
        self._rv = 1
        self._store: dict[str, dict[Key, JsonObj]] = {plural: {} for plural in _KINDS}
        self._history: deque[_Event] = deque()
        self._history_max = history
        self._floor = 1  # events with rv <= floor are no longer in the history
        self._graceful = graceful_pod_delete
        self._snapshots: OrderedDict[str, _Snapshot] = OrderedDict()
        self._fail_rules: list[_FailRule] = []
        self._delay_s = 0.0
        self._down: Literal["up", "refuse", "503"] = "up"
        self._epoch = 0  # bumped when live watches must end (stop, set_down)
        self._compactions = 0  # bumped when live watches must end with a 410
        self._live_watches = 0
        self._stopping = threading.Event()
        self._server: _HttpServer | None = None
        self._thread: threading.Thread | None = None
        self._clients: list[Any] = []
        self.requests: list[RecordedRequest] = []

    # -- lifecycle -------------------------------------------------------------------------

    def start(self) -> str:
        if self._server is not None:
            return self.url
        self._stopping.clear()
        self._serve()
        return self.url

    def _serve(self) -> None:
        server = _HttpServer((self._host, self._port), self)
        self._port = server.server_address[1]
        self._server = server
        self._thread = threading.Thread(
            target=server.serve_forever, kwargs={"poll_interval": 0.05}, name="fake-apiserver", daemon=True
        )
        self._thread.start()

    def _halt(self) -> None:
        server, thread = self._server, self._thread
        self._server, self._thread = None, None
        if server is None:
            return
        with self._cond:
            self._epoch += 1
            self._cond.notify_all()
        server.shutdown()
        server.drop_connections()
        server.server_close()  # joins the handler threads
        if thread is not None:
            thread.join(timeout=5)

    def stop(self) -> None:
        self._stopping.set()
        for api in self._clients:
            api.close()
        self._clients.clear()
        self._halt()

    def __enter__(self) -> FakeApiServer:
        self.start()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    @property
    def url(self) -> str:
        return f"http://{self._host}:{self._port}"

    def api_client(self) -> Any:
        """A kubernetes.client.ApiClient pointed at this server (closed by stop())."""
        cfg = k8s.Configuration()
        cfg.host = self.url
        cfg.proxy = None  # the client reads HTTP(S)_PROXY from the environment; never for a local fake
        api = k8s.ApiClient(cfg)
        self._clients.append(api)
        return api

    # -- failure injection -----------------------------------------------------------------

    def fail_next(
        self,
        n: int,
        status: int,
        path_prefix: str | None = None,
        method: str | None = None,
        *,
        retry_after: int = 1,
    ) -> None:
        """Answer the next `n` matching requests with `status` (429 carries Retry-After)."""
        with self._cond:
            self._fail_rules.append(_FailRule(n, status, path_prefix, method.upper() if method else None, retry_after))

    def clear_failures(self) -> None:
        with self._cond:
            self._fail_rules.clear()
            self._delay_s = 0.0

    def delay(self, seconds: float) -> None:
        """Hold every following request `seconds` before answering it (0 turns it off)."""
        with self._cond:
            self._delay_s = max(0.0, seconds)

    def set_down(self, down: bool, mode: Literal["refuse", "503"] = "refuse") -> None:
        """Take the server down: close the port (connection refused) or answer 503; live watches end."""
        if not down:
            if self._down == "refuse" and not self._stopping.is_set():
                self._serve()  # same port: clients keep their URL
            self._down = "up"
            return
        self._down = mode
        if mode == "refuse":
            self._halt()
        else:
            with self._cond:
                self._epoch += 1
                self._cond.notify_all()
            if self._server is not None:
                self._server.drop_connections()

    def compact(self, *, expire_live_watches: bool = True) -> None:
        """Forget the whole watch history: a watch from an older resourceVersion gets 410.

        With `expire_live_watches`, every watch open now also gets an ERROR 410 and ends, as when
        the apiserver's watch cache is re-initialised; without it, watchers that are up to date
        carry on (only lagging or reconnecting ones see the 410).
        """
        with self._cond:
            self._history.clear()
            self._floor = self._rv
            self._snapshots.clear()
            if expire_live_watches:
                self._compactions += 1
            self._cond.notify_all()

    # -- inspection ------------------------------------------------------------------------

    @property
    def live_watches(self) -> int:
        """Watches being served right now; once counted, a watch sees every later write and compact()."""
        with self._cond:
            return self._live_watches

    @property
    def resource_version(self) -> int:
        with self._cond:
            return self._rv

    def objects(self, kind: str) -> list[JsonObj]:
        with self._cond:
            return [copy.deepcopy(o) for _, o in sorted(self._store[kind].items())]

    def get_object(self, kind: str, name: str, namespace: str = "") -> JsonObj | None:
        with self._cond:
            obj = self._store[kind].get(self._key(_KINDS[kind], namespace, name))
            return copy.deepcopy(obj) if obj is not None else None

    def verb_counts(self, since: int = 0) -> dict[str, int]:
        """Requests by verb as apiserver_request_total counts them (GET of one object, LIST, WATCH,
        POST, PUT, PATCH, DELETE), from the `since`-th request on; a watch counts when it is opened."""
        with self._cond:
            requests = self.requests[since:]
        counts: dict[str, int] = {}
        for r in requests:
            counts[r.verb] = counts.get(r.verb, 0) + 1
        return counts

    def count(self, method: str | None = None, path_prefix: str | None = None, *, watch: bool | None = None) -> int:
        with self._cond:
            return sum(
                1
                for r in self.requests
                if (method is None or r.method == method.upper())
                and (path_prefix is None or r.path.startswith(path_prefix))
                and (watch is None or (r.query.get("watch") in ("true", "1")) == watch)
            )

    # -- direct store helpers (no HTTP, no validation) -------------------------------------

    def add_pod(
        self,
        name: str,
        namespace: str = "default",
        node: str = "node-a",
        *,
        phase: str = "Running",
        annotations: Mapping[str, str] | None = None,
        labels: Mapping[str, str] | None = None,
        requests: Mapping[str, int | str] | None = None,
        containers: Sequence[Mapping[str, int | str]] | None = None,
        uid: str | None = None,
    ) -> JsonObj:
        """Plant a pod; `requests` fills one container's limits and requests, `containers` one each."""
        specs = list(containers) if containers is not None else [requests or {}]
        pod: JsonObj = {
            "metadata": {"name": name, "namespace": namespace, "annotations": dict(annotations or {})},
            "spec": {
                "nodeName": node,
                "containers": [
                    {
                        "name": f"c{i}",
                        "image": "busybox",
                        "resources": {
                            "limits": {k: _quantity(v) for k, v in res.items()},
                            "requests": {k: _quantity(v) for k, v in res.items()},
                        },
                    }
                    for i, res in enumerate(specs)
                ],
            },
            "status": {"phase": phase},
        }
        if labels:
            pod["metadata"]["labels"] = dict(labels)
        if uid:
            pod["metadata"]["uid"] = uid
        return self.put_object("pods", pod)

    def add_node(
        self,
        name: str,
        *,
        labels: Mapping[str, str] | None = None,
        annotations: Mapping[str, str] | None = None,
        internal_ip: str = "192.0.2.10",
    ) -> JsonObj:
        node: JsonObj = {
            "metadata": {"name": name, "labels": dict(labels or {}), "annotations": dict(annotations or {})},
            "spec": {},
            "status": {"addresses": [{"type": "InternalIP", "address": internal_ip}]},
        }
        return self.put_object("nodes", node)

    def add_configmap(self, name: str, namespace: str, data: Mapping[str, str], **labels: str) -> JsonObj:
        cm: JsonObj = {"metadata": {"name": name, "namespace": namespace, "labels": dict(labels)}, "data": dict(data)}
        return self.put_object("configmaps", cm)

    def put_object(self, kind: str, obj: JsonObj, *, checked: bool = True) -> JsonObj:
        """Create or overwrite an object as-is (metadata is completed); emits ADDED or MODIFIED.
        `checked=False` plants a resource.k8s.io object the real server would refuse (for a test of
        how a reader copes with one)."""
        k = _KINDS[kind]
        obj = copy.deepcopy(obj)
        meta = obj.setdefault("metadata", {})
        with self._cond:
            key = self._key(k, meta.get("namespace") or "default", str(meta.get("name")))
            old = self._store[kind].get(key)
            if old is not None:
                meta.setdefault("uid", old["metadata"]["uid"])
                meta.setdefault("creationTimestamp", old["metadata"]["creationTimestamp"])
            if checked:
                self._check_planted(k, obj, old)
            return copy.deepcopy(self._write(k, key, obj, old))

    def modify(
        self, kind: str, name: str, namespace: str = "", mutate: Callable[[JsonObj], None] | None = None
    ) -> JsonObj:
        """Apply `mutate` to a copy of the stored object and store it (MODIFIED)."""
        k = _KINDS[kind]
        with self._cond:
            key = self._key(k, namespace, name)
            old = self._store[kind].get(key)
            if old is None:
                raise KeyError(f"{kind} {namespace}/{name} not found")
            new = copy.deepcopy(old)
            if mutate is not None:
                mutate(new)
            self._check_planted(k, new, old)
            return copy.deepcopy(self._write(k, key, new, old))

    def remove(self, kind: str, name: str, namespace: str = "") -> None:
        """Remove an object for real (DELETED), e.g. a pod the kubelet finished terminating."""
        with self._cond:
            key = self._key(_KINDS[kind], namespace, name)
            if key not in self._store[kind]:
                raise KeyError(f"{kind} {namespace}/{name} not found")
            self._delete_now(_KINDS[kind], key)

    # -- store internals (call with the lock held) -----------------------------------------

    @staticmethod
    def _key(kind: _Kind, namespace: str | None, name: str) -> Key:
        return ((namespace or "default") if kind.namespaced else "", name)

    def _record(self, record: RecordedRequest) -> None:
        with self._cond:
            self.requests.append(record)

    def _emit(self, plural: str, type_: str, obj: JsonObj, prev: JsonObj | None) -> None:
        self._history.append(_Event(self._rv, plural, type_, obj, prev))
        while len(self._history) > self._history_max:
            self._floor = self._history.popleft().rv
        self._cond.notify_all()

    def _write(self, kind: _Kind, key: Key, obj: JsonObj, old: JsonObj | None) -> JsonObj:
        """Store `obj` (a fresh dict nobody else holds) under `key`; stored dicts are never mutated."""
        meta = obj.setdefault("metadata", {})
        meta["name"] = key[1]
        if kind.namespaced:
            meta["namespace"] = key[0]
        else:
            meta.pop("namespace", None)
        obj["kind"], obj["apiVersion"] = kind.kind, self._api_version(kind, obj.get("apiVersion"))
        if old is not None:
            meta["uid"] = old["metadata"]["uid"]
            meta["creationTimestamp"] = old["metadata"]["creationTimestamp"]
            meta["resourceVersion"] = old["metadata"]["resourceVersion"]
            if obj == old:
                return old  # a no-op write changes nothing, as on a real server
        else:
            meta.setdefault("uid", str(uuid.uuid4()))
            meta.setdefault("creationTimestamp", now_rfc3339())
            if kind.plural == "pods":
                obj.setdefault("status", {}).setdefault("phase", "Pending")
        self._rv += 1
        meta["resourceVersion"] = str(self._rv)
        self._store[kind.plural][key] = obj
        self._emit(kind.plural, "ADDED" if old is None else "MODIFIED", obj, old)
        return obj

    def _delete_now(self, kind: _Kind, key: Key) -> JsonObj:
        old = self._store[kind.plural].pop(key)
        self._rv += 1
        gone = copy.deepcopy(old)
        gone["metadata"]["resourceVersion"] = str(self._rv)
        self._emit(kind.plural, "DELETED", gone, old)
        return gone

    # -- HTTP semantics --------------------------------------------------------------------

    def _before_request(self, method: str, path: str) -> None:
        with self._cond:
            if self._down == "503":
                raise ApiError(503, "the fake apiserver is down")
            delay = self._delay_s
            for rule in self._fail_rules:
                if rule.remaining > 0 and rule.matches(method, path):
                    rule.remaining -= 1
                    self._fail_rules = [r for r in self._fail_rules if r.remaining > 0]
                    details = {"retryAfterSeconds": rule.retry_after} if rule.status == 429 else None
                    raise ApiError(rule.status, f"injected failure {rule.status}", details=details)
        if delay:
            # Waits in small steps so that stop() or set_down() is never held up by a delayed request.
            epoch, until = self._epoch, time.monotonic() + delay
            while time.monotonic() < until and self._epoch == epoch and not self._stopping.is_set():
                time.sleep(min(0.02, max(0.0, until - time.monotonic())))

    def _route(self, path: str) -> _Route:
        parts = [p for p in path.split("/") if p]
        group = ""
        if parts[:2] == ["apis", RESOURCE_GROUP] and len(parts) > 2 and parts[2] in self.resource_api_versions:
            group, rest = RESOURCE_GROUP, parts[3:]
        elif parts[:2] == ["api", "v1"]:
            rest = parts[2:]
        else:
            raise ApiError(404, f"the server could not find the requested resource ({path})")
        namespace: str | None = None
        if len(rest) >= 3 and rest[0] == "namespaces":
            namespace, rest = rest[1], rest[2:]
        if not rest or rest[0] not in _KINDS or len(rest) > 3:
            raise ApiError(404, f"the server could not find the requested resource ({path})")
        kind = _KINDS[rest[0]]
        if kind.group != group:
            raise ApiError(404, f"the server could not find the requested resource ({path})")
        if namespace is not None and not kind.namespaced:
            raise ApiError(404, f"{kind.plural} are not namespaced")
        name = rest[1] if len(rest) > 1 else None
        sub = rest[2] if len(rest) > 2 else None
        if sub is not None and sub != "status":
            raise ApiError(404, f"unknown subresource {sub}")
        if kind.namespaced and name is not None and namespace is None:
            raise ApiError(404, f"the server could not find the requested resource ({path})")
        return _Route(kind, namespace, name, sub)

    def _not_found(self, route: _Route) -> ApiError:
        return ApiError(
            404,
            f'{route.kind.plural} "{route.name}" not found',
            details={"name": route.name, "kind": route.kind.plural},
        )

    def _handle(
        self, method: str, path: str, query: Mapping[str, str], body: Any, content_type: str | None
    ) -> tuple[int, JsonObj]:
        if method == "GET" and [p for p in path.split("/") if p] == ["apis", RESOURCE_GROUP]:
            return 200, self._group_discovery(path)
        route = self._route(path)
        kind = route.kind
        verb = {
            ("GET", False): "list",
            ("GET", True): "get",
            ("POST", False): "create",
            ("PUT", True): "update",
            ("PATCH", True): "patch",
            ("DELETE", True): "delete",
            ("DELETE", False): "deletecollection",
        }.get((method, route.name is not None))
        if verb is None or verb not in kind.verbs:
            raise ApiError(405, f"{method} is not supported on {path}")
        dry_run = query.get("dryRun") == "All"
        with self._cond:
            if verb == "list":
                return 200, self._list(route, query)
            if verb == "create":
                return 201, self._create(route, body, dry_run)
            if verb == "deletecollection":
                return 200, self._delete_collection(route, query, dry_run)
            assert route.name is not None
            key = self._key(kind, route.namespace, route.name)
            old = self._store[kind.plural].get(key)
            if old is None:
                raise self._not_found(route)
            if verb == "get":
                return 200, copy.deepcopy(old)
            if verb == "update":
                return 200, self._replace(route, key, old, body, dry_run)
            if verb == "patch":
                return 200, self._patch(route, key, old, body, content_type, dry_run)
            return 200, self._delete(route, key, old, query, body, dry_run)

    def _api_version(self, kind: _Kind, written: Any) -> str:
        """A group kind keeps the served version it was written in (else the first served one)."""
        if not kind.group:
            return "v1"
        served = [f"{kind.group}/{v}" for v in self.resource_api_versions] or [f"{kind.group}/v1"]
        return written if written in served else served[0]

    def _group_discovery(self, path: str) -> JsonObj:
        """GET /apis/resource.k8s.io: the APIGroup document, 404 when no version is served."""
        if not self.resource_api_versions:
            raise ApiError(404, f"the server could not find the requested resource ({path})")
        versions = [{"groupVersion": f"{RESOURCE_GROUP}/{v}", "version": v} for v in self.resource_api_versions]
        return {"kind": "APIGroup", "apiVersion": "v1", "name": RESOURCE_GROUP, "versions": versions,
                "preferredVersion": versions[0]}  # fmt: skip

    def _list(self, route: _Route, query: Mapping[str, str]) -> JsonObj:
        kind = route.kind
        token = query.get("continue")
        if token:
            try:
                state = json.loads(base64.urlsafe_b64decode(token.encode()))
                snap_id, offset = str(state["id"]), int(state["offset"])
            except (ValueError, KeyError, TypeError) as exc:
                raise ApiError(400, f"invalid continue token: {exc}") from exc
            snap = self._snapshots.get(snap_id)
            if snap is None:
                raise ApiError(410, "the provided continue parameter is too old")
        else:
            selector = _parse_selector(kind, query.get("fieldSelector"), query.get("labelSelector"))
            wanted = query.get("resourceVersion")
            if wanted and wanted != "0":
                if not wanted.isdigit():
                    raise ApiError(400, f"invalid resourceVersion {wanted!r}")
                if int(wanted) > self._rv:
                    raise ApiError(504, f"Too large resource version: {wanted}, current: {self._rv}")
            items = [
                o
                for key, o in sorted(self._store[kind.plural].items())
                if (route.namespace is None or key[0] == route.namespace) and selector.matches(kind, o)
            ]
            snap_id, offset, snap = uuid.uuid4().hex, 0, _Snapshot(self._rv, items)
        limit = int(query["limit"]) if query.get("limit", "").isdigit() and int(query["limit"]) > 0 else 0
        end = offset + limit if limit else len(snap.items)
        meta: JsonObj = {"resourceVersion": str(snap.rv)}
        if end < len(snap.items):
            self._snapshots[snap_id] = snap
            while len(self._snapshots) > 16:
                self._snapshots.popitem(last=False)
            meta["continue"] = base64.urlsafe_b64encode(json.dumps({"id": snap_id, "offset": end}).encode()).decode()
            meta["remainingItemCount"] = len(snap.items) - end
        else:
            self._snapshots.pop(snap_id, None)
        # Objects are never mutated once stored, so serialising the references is safe.
        return {"kind": f"{kind.kind}List", "apiVersion": "v1", "metadata": meta, "items": snap.items[offset:end]}

    def _validate_new(self, route: _Route, body: Any) -> JsonObj:
        if not isinstance(body, dict):
            raise ApiError(400, "the request body must be a JSON object")
        obj = copy.deepcopy(body)
        meta = obj.get("metadata")
        if not isinstance(meta, dict):
            raise ApiError(422, f"{route.kind.kind}: metadata is required")
        if not meta.get("name") and meta.get("generateName"):
            meta["name"] = f"{meta['generateName']}{uuid.uuid4().hex[:5]}"
        name = meta.get("name")
        if not isinstance(name, str) or not name:
            raise ApiError(422, f"{route.kind.kind}: metadata.name: Required value")
        # core/v1 Events keep the legacy validation (k8s pkg/apis/core/validation/events.go
        # legacyValidateEvent): only their namespace must be a DNS subdomain, so the reference's
        # "<pod>.EventReleaseUpgradeFault.<ms>" is accepted; every other kind checks its name.
        legacy_event = route.kind.kind == "Event"
        if not legacy_event and (len(name) > 253 or not _DNS1123_SUBDOMAIN.match(name)):
            raise ApiError(422, f'{route.kind.kind} "{name}" is invalid: metadata.name: a lowercase RFC 1123 subdomain')
        event_time = obj.get("eventTime") if legacy_event else None
        if event_time is not None and not (isinstance(event_time, str) and _RFC3339_MICRO.fullmatch(event_time)):
            # metav1.MicroTime decodes only RFC3339Micro: "2006-01-02T15:04:05.000000Z07:00".
            raise ApiError(
                400,
                f'Event in version "v1" cannot be handled as a Event: parsing time {event_time!r} as '
                '"2006-01-02T15:04:05.000000Z07:00"',
            )
        if legacy_event:
            _legacy_validate_event(route.namespace or "default", obj)
        return obj

    def _slice_strategy(self, obj: JsonObj, old: JsonObj | None) -> None:
        """What the real server does to a slice's taints before validating it (module docstring)."""
        version = self._api_version(_KINDS["resourceslices"], obj.get("apiVersion")).rpartition("/")[2]

        def taint_lists(slice_obj: JsonObj | None) -> list[tuple[dict[str, Any], list[Any]]]:
            devices = ((slice_obj or {}).get("spec") or {}).get("devices")
            found = []
            for device in devices if isinstance(devices, list) else []:
                inner = device.get("basic") if version == "v1beta1" and isinstance(device, dict) else device
                if isinstance(inner, dict) and isinstance(inner.get("taints"), list):
                    found.append((inner, inner["taints"]))
            return found

        in_use = any(taints for _, taints in taint_lists(old))
        now = now_rfc3339()
        for inner, taints in taint_lists(obj):
            if not (self.device_taints or in_use):
                del inner["taints"]
                continue
            for taint in taints:
                if isinstance(taint, dict) and not taint.get("timeAdded"):
                    taint["timeAdded"] = now

    def _check(self, kind: _Kind, obj: JsonObj, old: JsonObj | None) -> None:
        """422 for what the real apiserver's validation of `kind` refuses (tests/support/kube_validation.py),
        after the field drops and defaults the real server applies first (`_slice_strategy`)."""
        if kind.plural == "resourceslices":
            self._slice_strategy(obj, old)
        errors = validate_object_meta(obj)
        validate = VALIDATORS.get(kind.plural)
        if validate is not None:
            written = {**obj, "apiVersion": self._api_version(kind, obj.get("apiVersion"))}
            errors += validate(written, old)
        if errors:
            group = f".{kind.group}" if kind.group else ""
            name = obj.get("metadata", {}).get("name")
            raise ApiError(422, f'{kind.kind}{group} "{name}" is invalid: [{", ".join(errors)}]')

    def _check_planted(self, kind: _Kind, obj: JsonObj, old: JsonObj | None) -> None:
        # A test plants resource.k8s.io objects standing in for the scheduler or another driver,
        # which the real apiserver validates as it does ours: a claim allocated with a device name
        # the API refuses could never reach the driver. Core kinds stay plantable as-is.
        if kind.group:
            self._check(kind, obj, old)

    def _create(self, route: _Route, body: Any, dry_run: bool) -> JsonObj:
        kind = route.kind
        obj = self._validate_new(route, body)
        meta = obj["metadata"]
        if kind.namespaced:
            ns = route.namespace or "default"
            if meta.get("namespace") not in (None, "", ns):
                raise ApiError(
                    400, "the namespace of the provided object does not match the namespace sent on the request"
                )
            meta["namespace"] = ns
        for server_field in ("uid", "resourceVersion", "creationTimestamp", "deletionTimestamp"):
            meta.pop(server_field, None)
        key = self._key(kind, meta.get("namespace"), meta["name"])
        if key in self._store[kind.plural]:
            raise ApiError(
                409,
                f'{kind.plural} "{meta["name"]}" already exists',
                reason="AlreadyExists",
                details={"name": meta["name"], "kind": kind.plural},
            )
        self._check(kind, obj, None)
        if dry_run:
            return obj
        return copy.deepcopy(self._write(kind, key, obj, None))

    def _check_rv(self, route: _Route, old: JsonObj, wanted: Any) -> None:
        if wanted not in (None, "") and str(wanted) != old["metadata"]["resourceVersion"]:
            raise ApiError(
                409,
                f'Operation cannot be fulfilled on {route.kind.plural} "{route.name}": the object has been '
                "modified; please apply your changes to the latest version and try again",
                details={"name": route.name, "kind": route.kind.plural},
            )

    def _replace(self, route: _Route, key: Key, old: JsonObj, body: Any, dry_run: bool) -> JsonObj:
        obj = self._validate_new(route, body)
        if obj["metadata"]["name"] != route.name:
            raise ApiError(400, "the name of the object does not match the name on the URL")
        self._check_rv(route, old, obj["metadata"].get("resourceVersion"))
        # Fields the server owns survive a replace, as on a real server.
        for owned in ("deletionTimestamp", "deletionGracePeriodSeconds"):
            if owned in old["metadata"]:
                obj["metadata"][owned] = old["metadata"][owned]
        _keep_other_half(route, old, obj)
        self._check(route.kind, obj, old)
        if dry_run:
            return obj
        return copy.deepcopy(self._write(route.kind, key, obj, old))

    def _patch(
        self, route: _Route, key: Key, old: JsonObj, body: Any, content_type: str | None, dry_run: bool
    ) -> JsonObj:
        if content_type == "application/json-patch+json":
            new = json_patch(old, body)
        elif content_type in ("application/merge-patch+json", "application/strategic-merge-patch+json"):
            if not isinstance(body, dict):
                raise ApiError(400, "a merge patch must be a JSON object")
            self._check_rv(route, old, (body.get("metadata") or {}).get("resourceVersion"))
            new = merge_patch(old, body, strategic=content_type.startswith("application/strategic"))
        else:
            raise ApiError(415, f"unsupported patch type {content_type!r}")
        if not isinstance(new.get("metadata"), dict):
            raise ApiError(422, "metadata cannot be removed")
        for label_map in ("labels", "annotations"):
            values = new["metadata"].get(label_map)
            if values is not None and (
                not isinstance(values, dict) or not all(isinstance(v, str) for v in values.values())
            ):
                raise ApiError(422, f"metadata.{label_map} must map strings to strings")
        _keep_other_half(route, old, new)
        self._check(route.kind, new, old)
        if dry_run:
            return dict(new)
        return copy.deepcopy(self._write(route.kind, key, new, old))

    def _delete(
        self, route: _Route, key: Key, old: JsonObj, query: Mapping[str, str], body: Any, dry_run: bool
    ) -> JsonObj:
        opts = body if isinstance(body, dict) else {}
        pre = opts.get("preconditions") or {}
        if pre.get("uid") not in (None, old["metadata"]["uid"]):
            raise ApiError(409, "Precondition failed: UID in precondition does not match")
        self._check_rv(route, old, pre.get("resourceVersion"))
        grace_raw = query.get("gracePeriodSeconds", opts.get("gracePeriodSeconds"))
        try:
            grace = int(grace_raw) if grace_raw is not None else None
        except (TypeError, ValueError) as exc:
            raise ApiError(400, f"invalid gracePeriodSeconds {grace_raw!r}") from exc
        kind = route.kind
        if kind.plural == "pods" and self._graceful and grace != 0:
            if "deletionTimestamp" in old["metadata"]:
                return copy.deepcopy(old)
            if grace is None:
                grace = int((old.get("spec") or {}).get("terminationGracePeriodSeconds") or 30)
            new = copy.deepcopy(old)
            new["metadata"]["deletionTimestamp"] = now_rfc3339(time.time() + grace)
            new["metadata"]["deletionGracePeriodSeconds"] = grace
            return new if dry_run else copy.deepcopy(self._write(kind, key, new, old))
        if dry_run:
            return copy.deepcopy(old)
        gone = self._delete_now(kind, key)
        if kind.plural == "pods":
            return gone
        return {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Success",
            "details": {"name": route.name, "kind": kind.plural, "uid": old["metadata"]["uid"]},
        }

    def _delete_collection(self, route: _Route, query: Mapping[str, str], dry_run: bool) -> JsonObj:
        """DELETE on the collection: every object the selectors match goes (a DELETED event each); the
        answer is the list of what was deleted, as the real server's (generic registry DeleteCollection)."""
        kind = route.kind
        selector = _parse_selector(kind, query.get("fieldSelector"), query.get("labelSelector"))
        keys = [
            key
            for key, o in sorted(self._store[kind.plural].items())
            if (route.namespace is None or key[0] == route.namespace) and selector.matches(kind, o)
        ]
        gone = [copy.deepcopy(self._store[kind.plural][k]) for k in keys] if dry_run else [
            self._delete_now(kind, k) for k in keys]  # fmt: skip
        return {"kind": f"{kind.kind}List", "apiVersion": self._api_version(kind, None),
                "metadata": {"resourceVersion": str(self._rv)}, "items": gone}  # fmt: skip

    def _watch_events(self, path: str, query: Mapping[str, str]) -> Generator[JsonObj, None, None]:
        route = self._route(path)
        if route.name is not None or "watch" not in route.kind.verbs:
            raise ApiError(405, f"watch is not supported on {path}")
        kind = route.kind
        selector = _parse_selector(kind, query.get("fieldSelector"), query.get("labelSelector"))
        timeout_raw = query.get("timeoutSeconds", "")
        timeout = float(timeout_raw) if timeout_raw.isdigit() else 1800.0
        bookmarks = query.get("allowWatchBookmarks") in ("true", "1")
        wanted = query.get("resourceVersion", "")
        if wanted and not wanted.isdigit():
            raise ApiError(400, f"invalid resourceVersion {wanted!r}")
        with self._cond:
            epoch = self._epoch
            initial: list[JsonObj] = []
            if wanted in ("", "0"):
                # No resourceVersion: the current state as synthetic ADDED events, then changes.
                since = self._rv
                initial = [
                    {"type": "ADDED", "object": o}
                    for key, o in sorted(self._store[kind.plural].items())
                    if (route.namespace is None or key[0] == route.namespace) and selector.matches(kind, o)
                ]
            else:
                since = int(wanted)
            compactions = self._compactions
        deadline = time.monotonic() + timeout
        if self.cut_watches_after_s is not None:
            deadline, bookmarks = min(deadline, time.monotonic() + self.cut_watches_after_s), False
        return self._stream(route, selector, since, initial, deadline, (epoch, compactions), bookmarks)

    def _expired(self, since: int) -> JsonObj:
        return {
            "type": "ERROR",
            "object": {
                "kind": "Status",
                "apiVersion": "v1",
                "metadata": {},
                "status": "Failure",
                "message": f"too old resource version: {since} ({self._floor + 1})",
                "reason": "Expired",
                "code": 410,
            },
        }

    def _visible(self, route: _Route, selector: _Selector, obj: JsonObj | None) -> bool:
        if obj is None:
            return False
        ns_ok = route.namespace is None or obj["metadata"].get("namespace") == route.namespace
        return ns_ok and selector.matches(route.kind, obj)

    def _stream(
        self,
        route: _Route,
        selector: _Selector,
        since: int,
        initial: list[JsonObj],
        deadline: float,
        generation: tuple[int, int],
        bookmarks: bool = False,
    ) -> Generator[JsonObj, None, None]:
        epoch, compactions = generation
        with self._cond:
            self._live_watches += 1
        try:
            yield from initial
            yield from self._follow(route, selector, since, deadline, epoch, compactions, bookmarks)
        finally:
            with self._cond:
                self._live_watches -= 1

    def _bookmark(self, route: _Route, rv: int) -> JsonObj:
        kind = route.kind
        meta = {"resourceVersion": str(rv)}
        return {"type": "BOOKMARK", "object": {"kind": kind.kind, "apiVersion": self._api_version(kind, None),
                                               "metadata": meta}}  # fmt: skip

    def _follow(
        self,
        route: _Route,
        selector: _Selector,
        since: int,
        deadline: float,
        epoch: int,
        compactions: int,
        bookmarks: bool = False,
    ) -> Iterator[JsonObj]:
        # The watch cache's bookmarks (cacheWatcher.nextBookmarkTime): one a minute, the last 2 s before
        # the timeout (so that a watcher resumes from a fresh resourceVersion), none once that is past;
        # none unless asked for.
        def bookmark_after(now: float) -> float:
            at = min(now + self.bookmark_interval_s, deadline - 2.0)
            return at if bookmarks and at >= now else float("inf")

        next_bookmark = bookmark_after(time.monotonic())
        while True:
            batch: list[JsonObj] = []
            with self._cond:
                while True:
                    if self._epoch != epoch or self._stopping.is_set():
                        return
                    if since < self._floor or self._compactions != compactions:
                        # The watcher fell behind the bounded history: 410, and the stream ends.
                        batch.append(self._expired(since))
                        break
                    if self._history and self._history[-1].rv > since:
                        break
                    now = time.monotonic()
                    remaining = deadline - now
                    if remaining <= 0:
                        return
                    if now >= next_bookmark:
                        # Every change up to now has been looked at: the watcher may resume from here.
                        since = max(since, self._rv)
                        batch.append(self._bookmark(route, since))
                        next_bookmark = bookmark_after(now)
                        break
                    self._cond.wait(min(remaining, 0.5, max(0.0, next_bookmark - now)))
                if not batch:  # a bookmark fills the batch on its own
                    for ev in self._history:
                        if ev.rv <= since or ev.plural != route.kind.plural:
                            continue
                        now_in = ev.type != "DELETED" and self._visible(route, selector, ev.obj)
                        was_in = self._visible(route, selector, ev.prev)
                        if now_in and was_in:
                            batch.append({"type": "MODIFIED", "object": ev.obj})
                        elif now_in:
                            batch.append({"type": "ADDED", "object": ev.obj})
                        elif was_in:
                            batch.append({"type": "DELETED", "object": ev.obj})
                    since = self._history[-1].rv
            # Written outside the lock: a slow reader must not stall the writers.
            yield from batch
            if batch and batch[-1]["type"] == "ERROR":
                return


def write_kubeconfig(path: Path, url: str) -> Path:
    """A kubeconfig for a service process to reach this fake (no auth, plain HTTP)."""
    cluster = {"name": "fake", "cluster": {"server": url}}
    context = {"name": "fake", "context": {"cluster": "fake", "user": "fake"}}
    config = {"apiVersion": "v1", "kind": "Config", "current-context": "fake", "clusters": [cluster],
              "users": [{"name": "fake", "user": {}}], "contexts": [context]}  # fmt: skip
    path.write_text(json.dumps(config))
    return path


def _legacy_validate_event(namespace: str, obj: JsonObj) -> None:
    """k8s pkg/apis/core/validation/events.go `legacyValidateEvent` for a core/v1 Event (422 when it fails)."""
    involved = obj.get("involvedObject") or {}
    involved_ns = involved.get("namespace") or "" if isinstance(involved, dict) else ""
    problems: list[str] = []
    if not obj.get("eventTime"):
        if (not involved_ns and namespace not in ("", "default")) or (involved_ns and involved_ns != namespace):
            problems.append("involvedObject.namespace: does not match event.namespace")
    else:
        if not involved_ns and namespace not in ("default", "kube-system"):
            problems.append("involvedObject.namespace: does not match event.namespace")
        for key, limit in (("reportingComponent", 253), ("reportingInstance", 128), ("action", 128), ("reason", 128)):
            value = obj.get(key) or ""
            if not value:
                problems.append(f"{key}: Required value")
            elif len(value) > limit:
                problems.append(f"{key}: can have at most {limit} characters")
        if len(obj.get("message") or "") > 1024:
            problems.append("message: can have at most 1024 characters")
    if problems:
        raise ApiError(422, f"Event is invalid: {'; '.join(problems)}")
