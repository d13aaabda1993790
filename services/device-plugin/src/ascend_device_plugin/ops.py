"""`/healthz`, `/readyz` and `/metrics` on TCP for kubelet probes and Prometheus.

Three GET routes do not need a web framework: FastAPI, Starlette and uvicorn cost the plugin
9 MB of resident memory and uvicorn's 10 Hz tick most of its idle CPU. A small HTTP/1.1 responder
on asyncio streams answers as the FastAPI app did (status codes, JSON bodies, content types, a JSON 404
or 405 for any other path or method, the redirect of a trailing slash) and keeps a connection
alive between requests as HTTP/1.1 wants it (Prometheus reuses its own) until it idles.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import Callable
from dataclasses import dataclass
from email.utils import formatdate
from urllib.parse import unquote

from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from ascend_device_plugin.metrics import PluginMetrics

log = logging.getLogger(__name__)
ROUTES = ("/healthz", "/readyz", "/metrics")
JSON = "application/json"
IDLE_S = 5.0  # a kept-alive connection with no next request is closed (uvicorn's keep-alive timeout)
MAX_LINE = 8192
MAX_HEADERS = 100
MAX_BODY = 1 << 20  # a body no route reads; read past (to keep the connection in step), or the connection closed
REASONS = {
    200: "OK",
    307: "Temporary Redirect",
    400: "Bad Request",
    404: "Not Found",
    405: "Method Not Allowed",
    503: "Service Unavailable",
}


@dataclass(frozen=True)
class Response:
    status: int
    body: bytes = b""
    content_type: str | None = None
    headers: tuple[tuple[str, str], ...] = ()


def json_response(status: int, content: dict[str, str], headers: tuple[tuple[str, str], ...] = ()) -> Response:
    """As Starlette's JSONResponse renders it: compact, UTF-8, no NaN."""
    body = json.dumps(content, ensure_ascii=False, allow_nan=False, separators=(",", ":")).encode()
    return Response(status, body, JSON, headers)


BAD_REQUEST = Response(400, b"Invalid HTTP request received.", "text/plain; charset=utf-8")


@dataclass(frozen=True)
class OpsRoutes:
    metrics: PluginMetrics
    readiness: Callable[[], tuple[bool, str]]

    def respond(self, method: str, target: str, host: str | None) -> Response:
        path, _, query = target.partition("?")
        path = unquote(path)
        if path not in ROUTES:
            if path.endswith("/") and path.rstrip("/") in ROUTES:
                location = f"http://{host or 'localhost'}{path.rstrip('/')}" + (f"?{query}" if query else "")
                return Response(307, headers=(("location", location),))
            return json_response(404, {"detail": "Not Found"})
        if method != "GET":
            return json_response(405, {"detail": "Method Not Allowed"}, (("allow", "GET"),))
        if path == "/healthz":
            return json_response(200, {"status": "ok"})
        if path == "/readyz":
            ok, reason = self.readiness()
            return json_response(200 if ok else 503, {"status": "ready" if ok else "not ready", "reason": reason})
        return Response(200, generate_latest(self.metrics.registry), CONTENT_TYPE_LATEST)


def encode(response: Response, *, head: bool, close: bool) -> bytes:
    lines = [f"HTTP/1.1 {response.status} {REASONS[response.status]}", f"date: {formatdate(usegmt=True)}"]
    lines += [f"{name}: {value}" for name, value in response.headers]
    lines.append(f"content-length: {len(response.body)}")
    if response.content_type is not None:
        lines.append(f"content-type: {response.content_type}")
    if close:
        lines.append("connection: close")
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + (b"" if head else response.body)


class _BadRequest(Exception):
    pass


@dataclass(frozen=True)
class Request:
    method: str
    target: str
    version: str
    headers: dict[str, str]  # lower-case names

    @property
    def keep_alive(self) -> bool:
        """HTTP/1.1 unless the client says close; an HTTP/1.0 connection is closed after one answer, as uvicorn did."""
        return self.version == "HTTP/1.1" and "close" not in self.headers.get("connection", "").lower()


async def read_request(reader: asyncio.StreamReader) -> Request | None:
    """The next request's head; None when the client closed the connection before one."""
    try:
        line = await reader.readuntil(b"\r\n")
    except asyncio.IncompleteReadError as exc:
        if exc.partial.strip():
            raise _BadRequest from None
        return None
    except asyncio.LimitOverrunError:
        raise _BadRequest from None
    parts = line.decode("latin-1").rstrip("\r\n").split(" ")
    if len(parts) != 3 or parts[2] not in ("HTTP/1.0", "HTTP/1.1") or not parts[0].isalpha() or not parts[1]:
        raise _BadRequest
    headers: dict[str, str] = {}
    for _ in range(MAX_HEADERS + 1):
        try:
            raw = await reader.readuntil(b"\r\n")
        except (asyncio.IncompleteReadError, asyncio.LimitOverrunError):
            raise _BadRequest from None
        if raw == b"\r\n":
            return Request(parts[0], parts[1], parts[2], headers)
        name, colon, value = raw.decode("latin-1").partition(":")
        if not colon or not name or name != name.strip():
            raise _BadRequest
        headers[name.lower()] = value.strip()
    raise _BadRequest


async def skip_body(reader: asyncio.StreamReader, request: Request) -> bool:
    """Read past the request's body; False when it cannot be (the connection must close after the answer)."""
    if "transfer-encoding" in request.headers:
        return False
    length = request.headers.get("content-length", "0")
    if not length.isdigit() or int(length) > MAX_BODY:
        return False
    with contextlib.suppress(asyncio.IncompleteReadError):
        await reader.readexactly(int(length))
        return True
    return False


class OpsServer:
    """The ops endpoints on a TCP port, served on the event loop."""

    def __init__(self, routes: OpsRoutes) -> None:
        self.routes = routes
        self._server: asyncio.Server | None = None
        self._connections: set[asyncio.Task[None]] = set()

    @property
    def port(self) -> int:
        assert self._server is not None
        return int(self._server.sockets[0].getsockname()[1])

    async def start(self, host: str, port: int) -> None:
        """Listen; an address in use raises OSError here."""
        self._server = await asyncio.start_server(self._serve, host, port, limit=MAX_LINE)

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
            self._server = None
        for task in list(self._connections):
            task.cancel()
        await asyncio.gather(*self._connections, return_exceptions=True)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._connections.add(task)
        try:
            await self._exchange(reader, writer)
        except (ConnectionError, TimeoutError):
            pass  # the client went away or idled: nothing to answer
        finally:
            self._connections.discard(task)
            writer.close()
            with contextlib.suppress(ConnectionError):
                await writer.wait_closed()

    async def _exchange(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while True:
            try:
                async with asyncio.timeout(IDLE_S):
                    request = await read_request(reader)
            except _BadRequest:
                log.debug("invalid ops request", extra={"peer": str(writer.get_extra_info("peername"))})
                writer.write(encode(BAD_REQUEST, head=False, close=True))
                await writer.drain()
                return
            if request is None:
                return
            keep = request.keep_alive and await skip_body(reader, request)
            response = self.routes.respond(request.method, request.target, request.headers.get("host"))
            writer.write(encode(response, head=request.method == "HEAD", close=not keep))
            await writer.drain()
            if not keep:
                return
