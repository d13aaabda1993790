"""The plugin's ops endpoints (ascend_common.adapters.ops on uvicorn) answer as the FastAPI app did,
byte for byte where a client looks, with the limits of ascend_common.adapters.serving."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from collections.abc import AsyncIterator

import httpx
import pytest
import uvicorn
from ascend_common.adapters.ops import ops_app
from ascend_common.adapters.serving import bind_tcp_socket, server
from ascend_device_plugin.metrics import PluginMetrics
from prometheus_client import CONTENT_TYPE_LATEST

from tests.support.waiting import until

Reply = tuple[int, dict[str, str], bytes]


class Readiness:
    def __init__(self) -> None:
        self.ok = False

    def __call__(self) -> tuple[bool, dict[str, object]]:
        return (True, {"reason": "8 resources registered"}) if self.ok else (False, {"reason": "no chips yet"})


class OpsServer:
    """The plugin's ops server as app.serve runs it: uvicorn on a socket bound first."""

    def __init__(self, ready: Readiness, metrics: PluginMetrics) -> None:
        self.sock = bind_tcp_socket("127.0.0.1", 0)
        self.port = int(self.sock.getsockname()[1])
        self.server: uvicorn.Server = server(ops_app(ready, metrics.registry))
        self.task: asyncio.Task[None] | None = None

    async def start(self) -> None:
        self.task = asyncio.create_task(self.server.serve(sockets=[self.sock]))
        await until(lambda: self.server.started, what="the ops server to start")

    async def stop(self) -> None:
        self.server.should_exit = True
        if self.task is not None:
            await asyncio.wait_for(self.task, 5)


@pytest.fixture
async def ops() -> AsyncIterator[tuple[OpsServer, Readiness]]:
    metrics = PluginMetrics()
    metrics.devices.labels("Ascend910", "Healthy").set(8)
    ready = Readiness()
    server = OpsServer(ready, metrics)
    await server.start()
    try:
        yield server, ready
    finally:
        await server.stop()


async def read_reply(reader: asyncio.StreamReader, *, head: bool = False) -> Reply:
    status_line = await reader.readuntil(b"\r\n")
    version, status, _ = status_line.decode().split(" ", 2)
    assert version == "HTTP/1.1"
    headers: dict[str, str] = {}
    while (line := await reader.readuntil(b"\r\n")) != b"\r\n":
        name, _, value = line.decode().partition(":")
        headers[name.lower()] = value.strip()
    if head:
        body = b""
    elif "content-length" in headers:
        body = await reader.readexactly(int(headers["content-length"]))
    else:  # uvicorn's 400 to a request h11 could not parse: delimited by the close, as HTTP/1.1 allows
        body = await reader.read()
    return int(status), headers, body


async def exchange(server: OpsServer, request: bytes, *, head: bool = False) -> tuple[Reply, bool]:
    """One request on a fresh connection: the reply, and whether the server closed the connection after it."""
    reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
    try:
        writer.write(request)
        await writer.drain()
        reply = await read_reply(reader, head=head)
        closed = await asyncio.wait_for(reader.read(1), 2) == b"" if reply[1].get("connection") == "close" else False
        return reply, closed
    finally:
        writer.close()


async def test_the_three_routes_answer_as_before(ops: tuple[OpsServer, Readiness]) -> None:
    server, ready = ops
    async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{server.port}") as client:
        health = await client.get("/healthz")
        assert (health.status_code, health.headers["content-type"], health.content) == (
            200, "application/json", b'{"status":"ok"}'
        )  # fmt: skip
        not_ready = await client.get("/readyz")
        assert (not_ready.status_code, not_ready.headers["content-type"], not_ready.content) == (
            503, "application/json", b'{"status":"not ready","reason":"no chips yet"}'
        )  # fmt: skip
        ready.ok = True
        is_ready = await client.get("/readyz")
        assert (is_ready.status_code, json.loads(is_ready.content)) == (
            200, {"status": "ready", "reason": "8 resources registered"}
        )  # fmt: skip
        metrics = await client.get("/metrics?x=1")
        assert metrics.status_code == 200 and metrics.headers["content-type"] == CONTENT_TYPE_LATEST
        assert 'ascend_device_plugin_devices{health="Healthy",resource="Ascend910"} 8.0' in metrics.text


async def test_other_paths_and_methods_get_what_fastapi_gave(ops: tuple[OpsServer, Readiness]) -> None:
    server, _ = ops
    (status, headers, body), _ = await exchange(server, b"GET /nope HTTP/1.1\r\nHost: x\r\n\r\n")
    assert (status, headers["content-type"], body) == (404, "application/json", b'{"detail":"Not Found"}')
    (status, headers, body), _ = await exchange(
        server, b"POST /healthz HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n"
    )
    assert (status, headers["allow"], body) == (405, "GET", b'{"detail":"Method Not Allowed"}')
    (status, headers, body), _ = await exchange(server, b"HEAD /healthz HTTP/1.1\r\nHost: x\r\n\r\n", head=True)
    assert (status, headers["allow"], headers["content-length"]) == (405, "GET", "31")
    (status, headers, body), _ = await exchange(server, b"GET /healthz/?a=b HTTP/1.1\r\nHost: node:9092\r\n\r\n")
    assert (status, headers["location"], body) == (307, "http://node:9092/healthz?a=b", b"")


async def test_a_bad_request_is_refused_and_the_connection_closed(ops: tuple[OpsServer, Readiness]) -> None:
    server, _ = ops
    (status, headers, body), closed = await exchange(server, b"garbage\r\n\r\n")
    assert (status, headers["content-type"], body) == (
        400, "text/plain; charset=utf-8", b"Invalid HTTP request received."
    )  # fmt: skip
    assert closed
    (status, _, _), closed = await exchange(server, b"GET /healthz HTTP/1.1\r\nno colon here\r\n\r\n")
    assert status == 400 and closed


async def test_keep_alive_as_http_wants_it(ops: tuple[OpsServer, Readiness]) -> None:
    server, _ = ops
    # HTTP/1.0: answered, then closed.
    (status, headers, body), closed = await exchange(server, b"GET /healthz HTTP/1.0\r\n\r\n")
    assert (status, body, headers["connection"], closed) == (200, b'{"status":"ok"}', "close", True)
    # HTTP/1.1: a body no route reads is read past, and the next request is answered on the same connection.
    reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
    try:
        writer.write(b"POST /readyz HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhello")
        writer.write(b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        await writer.drain()
        assert (await read_reply(reader))[0] == 405
        status, headers, body = await read_reply(reader)
        assert (status, body, headers["connection"]) == (200, b'{"status":"ok"}', "close")
        assert await asyncio.wait_for(reader.read(1), 2) == b""
    finally:
        writer.close()


async def test_stop_closes_open_connections(ops: tuple[OpsServer, Readiness]) -> None:
    server, _ = ops
    reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
    writer.write(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
    await writer.drain()
    assert (await read_reply(reader))[0] == 200
    await server.stop()
    assert await asyncio.wait_for(reader.read(1), 2) == b""
    writer.close()


def test_the_plugin_process_loads_no_web_framework() -> None:
    """What the plugin imports to serve (the cluster bridge included) pulls in uvicorn for its ops port
    (issue 22: one ops server on a library), and neither FastAPI nor Starlette."""
    code = (
        "import sys, ascend_device_plugin.cli, ascend_device_plugin.app, ascend_device_plugin.kube.edge, "
        "ascend_device_plugin.kube.patching, ascend_device_plugin.kube.slow_node; "
        "print(sorted({m.split('.')[0] for m in sys.modules} & {'fastapi', 'starlette', 'uvicorn'}))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60)
    assert out.stdout.strip() == "['uvicorn']"
