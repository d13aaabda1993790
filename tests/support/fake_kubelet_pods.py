"""A fake kubelet /pods endpoint over HTTPS on 127.0.0.1 (the reference's getPodFromKubelet reads it).

It answers `GET /pods` as the real kubelet does: a v1 PodList of the pods bound to its node,
when the bearer token is one it accepts (401 otherwise, as the kubelet's webhook authenticator
says) and the caller is allowed (403 with `forbid()`, as its webhook authorizer says). The pods
come from a FakeApiServer's store (those with spec.nodeName == node, so a test writes pods once
and both sources see them), or from `set_pods`. Its serving certificate is made by `make_cert`
(openssl CLI) for IP 127.0.0.1. Failure injection: `respond_with` (a status or a raw body for the
next answers), `set_down` (the port refuses connections: a dead kubelet). Every request is
recorded (path, the token it carried).
"""

from __future__ import annotations

import contextlib
import json
import socket
import ssl
import subprocess
import threading
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import TracebackType
from typing import Any

from tests.support.fake_apiserver import FakeApiServer

JsonObj = dict[str, Any]


@dataclass(frozen=True)
class Cert:
    cert: Path
    key: Path


def make_cert(directory: Path, name: str = "kubelet", ip: str = "127.0.0.1") -> Cert:
    """A self-signed serving certificate for `ip` (its own CA: give `cert` as --kubelet-ca)."""
    directory.mkdir(parents=True, exist_ok=True)
    cert, key = directory / f"{name}.crt", directory / f"{name}.key"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
         "-keyout", str(key), "-out", str(cert), "-days", "2", "-subj", f"/CN={name}",
         "-addext", f"subjectAltName=IP:{ip}", "-addext", "basicConstraints=critical,CA:TRUE"],
        check=True, capture_output=True,
    )  # fmt: skip
    return Cert(cert, key)


@dataclass(frozen=True)
class Seen:
    path: str
    token: str | None


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, addr: tuple[str, int], fake: FakeKubeletPods) -> None:
        self.fake = fake
        self.connections: set[socket.socket] = set()
        self.conn_lock = threading.Lock()
        super().__init__(addr, _Handler)

    def drop_connections(self) -> None:
        """A dead kubelet keeps no connection alive: the kept-alive ones are cut too."""
        with self.conn_lock:
            conns = list(self.connections)
        for conn in conns:
            with contextlib.suppress(OSError):
                conn.shutdown(socket.SHUT_RDWR)


class _Handler(BaseHTTPRequestHandler):
    server: _Server
    protocol_version = "HTTP/1.1"

    def setup(self) -> None:
        super().setup()
        with self.server.conn_lock:
            self.server.connections.add(self.connection)

    def finish(self) -> None:
        with self.server.conn_lock:
            self.server.connections.discard(self.connection)
        with contextlib.suppress(OSError):
            super().finish()

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_GET(self) -> None:
        fake = self.server.fake
        auth = self.headers.get("Authorization") or ""
        token = auth[7:] if auth.startswith("Bearer ") else None
        with fake.lock:
            fake.requests.append(Seen(self.path, token))
            canned = fake.canned
        if canned is not None:
            status, body = canned
            return self._send(status, body)
        if token is None or token not in fake.tokens:
            return self._send(401, b"Unauthorized")
        if fake.forbidden:
            return self._send(403, b"Forbidden (user=system:serviceaccount:x:y, verb=get, resource=nodes, "
                                   b"subresource(s)=[proxy])")  # fmt: skip
        if self.path != "/pods":
            return self._send(404, b"404 page not found")
        return self._send(200, json.dumps(fake.pod_list()).encode())

    def _send(self, status: int, body: bytes) -> None:
        self.send_response(status)
        self.send_header("Content-Type", "application/json" if status == 200 else "text/plain")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


class FakeKubeletPods:
    def __init__(
        self,
        cert: Cert,
        *,
        node: str = "node-a",
        api: FakeApiServer | None = None,
        tokens: set[str] | None = None,
        port: int = 0,
    ) -> None:
        self.cert = cert
        self.node = node
        self.api = api
        self.tokens: set[str] = set(tokens or ())
        self.lock = threading.Lock()
        self.requests: list[Seen] = []
        self.canned: tuple[int, bytes] | None = None
        self.forbidden = False
        self._pods: list[JsonObj] | None = None
        self._port = port
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None

    # -- lifecycle -------------------------------------------------------------------------

    def start(self) -> FakeKubeletPods:
        server = _Server(("127.0.0.1", self._port), self)
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(self.cert.cert, self.cert.key)
        server.socket = ctx.wrap_socket(server.socket, server_side=True)
        self._port = server.server_address[1]
        self._server = server
        self._thread = threading.Thread(target=server.serve_forever, name="fake-kubelet-pods", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        server, self._server = self._server, None
        if server is not None:
            server.shutdown()
            server.server_close()
            server.drop_connections()
        if self._thread is not None:
            self._thread.join(5)

    def set_down(self, down: bool) -> None:
        """A dead kubelet: the port refuses connections (down), then serves again on the same port."""
        if down:
            self.stop()
        elif self._server is None:
            self.start()

    def __enter__(self) -> FakeKubeletPods:
        return self.start()

    def __exit__(self, t: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None) -> None:
        self.stop()

    @property
    def port(self) -> int:
        return self._port

    # -- behaviour -------------------------------------------------------------------------

    def set_pods(self, pods: list[JsonObj]) -> None:
        with self.lock:
            self._pods = [dict(p) for p in pods]

    def respond_with(self, status: int | None, body: bytes = b"") -> None:
        """Answer every request with this status and body (None: back to normal)."""
        with self.lock:
            self.canned = None if status is None else (status, body)

    def forbid(self, forbidden: bool = True) -> None:
        with self.lock:
            self.forbidden = forbidden

    def pod_list(self) -> JsonObj:
        with self.lock:
            planted = self._pods
        if planted is not None:
            items = planted
        elif self.api is not None:
            items = [p for p in self.api.objects("pods") if (p.get("spec") or {}).get("nodeName") == self.node]
        else:
            items = []
        return {"kind": "PodList", "apiVersion": "v1", "metadata": {}, "items": items}

    def count(self) -> int:
        with self.lock:
            return len(self.requests)


def pod_source_args(kubelet: FakeKubeletPods, token_file: Path, period: float = 0.2) -> list[str]:
    """A service's flags to read its pods from `kubelet` (its token written to `token_file`)."""
    token_file.write_text(next(iter(kubelet.tokens)) + "\n")
    return [
        "--pod-source", "kubelet", "--kubelet-host", "127.0.0.1", "--kubelet-port", str(kubelet.port),
        "--kubelet-ca", str(kubelet.cert.cert), "--kubelet-token-file", str(token_file),
        "--kubelet-poll-period", str(period),
    ]  # fmt: skip


def pod_requests(api: FakeApiServer) -> list[str]:
    """The API server requests that read pods (gets, lists, watches); patches are writes, and allowed."""
    return [f"{r.method} {r.path}" for r in list(api.requests) if r.method == "GET" and "/pods" in r.path]
