"""`/healthz`, `/readyz` and `/metrics` on TCP, for kubelet probes and Prometheus: one ASGI app
for the three services, served by uvicorn (`serving.server`, whose limits apply).

uvicorn parses the requests; this app only routes three GET paths, and answers as the services'
FastAPI apps did: JSON bodies rendered as Starlette renders them, a JSON 404 for any other path,
a JSON 405 (with `allow: GET`) for any other method, HEAD included, and a 307 to the path without
its trailing slash. It reads no request body: uvicorn discards one, and `serving`'s request
deadline closes a connection whose body never comes.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest

# ready?, and what /readyz says besides its "status": {"reason": "..."}, {"chips": 8}
Readiness = Callable[[], tuple[bool, Mapping[str, object]]]
Scope = Mapping[str, Any]
Receive = Callable[[], Awaitable[Mapping[str, Any]]]
Send = Callable[[Mapping[str, Any]], Awaitable[None]]
App = Callable[[Scope, Receive, Send], Awaitable[None]]
ROUTES = ("/healthz", "/readyz", "/metrics")
JSON = b"application/json"


def json_body(content: Mapping[str, object]) -> bytes:
    """As Starlette's JSONResponse renders it: compact, UTF-8, no NaN."""
    return json.dumps(content, ensure_ascii=False, allow_nan=False, separators=(",", ":")).encode()


async def respond(
    send: Send,
    status: int,
    body: bytes = b"",
    content_type: bytes | None = JSON,
    extra: tuple[tuple[bytes, bytes], ...] = (),
) -> None:
    headers = [(b"content-length", str(len(body)).encode()), *extra]
    if content_type is not None:
        headers.append((b"content-type", content_type))
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


def redirect_location(scope: Scope, path: str) -> bytes:
    """Where Starlette's trailing-slash redirect points: the Host the client named, else our address."""
    host = next((value for name, value in scope["headers"] if name == b"host"), b"")
    if not host:
        server = scope.get("server") or ("localhost", None)
        host = (server[0] if server[1] is None else f"{server[0]}:{server[1]}").encode()
    query = scope.get("query_string", b"")
    return b"%s://%s%s%s" % (scope["scheme"].encode(), host, path.encode(), b"?" + query if query else b"")


def ops_app(
    readiness: Readiness,
    registry: CollectorRegistry,
    *,
    render_in_thread: bool = False,
    bad_inputs: Callable[[], Mapping[str, str]] | None = None,
    metrics_held: Callable[[], str | None] | None = None,
    retry_after_s: int = 1,
) -> App:
    """The ops app of a service: its readiness, and the registry /metrics renders (in a worker thread
    with `render_in_thread`, for a registry whose collectors are slow and thread-safe).

    `bad_inputs`: the optional inputs refused (name -> why), shown by /readyz as `bad_inputs`. They
    leave readiness as it is: the service runs without them, and an operator reads which to fix.
    While `metrics_held` gives a reason, /metrics answers 503 with it and `Retry-After:
    retry_after_s`: a scrape of families that would miss what exists is refused, not answered."""

    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":  # lifespan is off and websockets are not served (serving.server)
            return
        path = scope["path"]
        if path not in ROUTES:
            if path.endswith("/") and path[:-1] in ROUTES:
                await respond(send, 307, content_type=None, extra=((b"location", redirect_location(scope, path[:-1])),))
            else:
                await respond(send, 404, json_body({"detail": "Not Found"}))
            return
        if scope["method"] != "GET":
            await respond(send, 405, json_body({"detail": "Method Not Allowed"}), extra=((b"allow", b"GET"),))
        elif path == "/healthz":
            await respond(send, 200, json_body({"status": "ok"}))
        elif path == "/readyz":
            ok, detail = readiness()
            body = {"status": "ready" if ok else "not ready", **detail}
            if bad_inputs is not None and (bad := bad_inputs()):
                body["bad_inputs"] = dict(bad)
            await respond(send, 200 if ok else 503, json_body(body))
        elif metrics_held is not None and (held := metrics_held()) is not None:
            await respond(
                send, 503, json_body({"detail": held}), extra=((b"retry-after", str(retry_after_s).encode()),)
            )
        else:
            text = await asyncio.to_thread(generate_latest, registry) if render_in_thread else generate_latest(registry)
            await respond(send, 200, text, CONTENT_TYPE_LATEST.encode())

    return app
