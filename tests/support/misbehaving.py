"""Misbehaving HTTP clients on raw sockets (issue 22): what another pod on the node network, or a
process that may reach a Unix socket, could send to a service. Each returns what it measured; the
tests in tests/exporter, tests/faultmanager and tests/plugin hold the bounds.

The limits they meet are ascend_common.adapters.serving's (docs/operations.md, "HTTP limits").
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

import psutil
from ascend_common.adapters.serving import REQUEST_S

HALF_OPEN = 300
# A connection must be closed within the request deadline, plus what a loaded machine may add.
CLOSE_BOUND_S = REQUEST_S + 5.0


def host_port(url: str) -> tuple[str, int]:
    parts = urlsplit(url)
    assert parts.hostname is not None and parts.port is not None
    return parts.hostname, parts.port


async def read_status(reader: asyncio.StreamReader, timeout: float = 10.0) -> int | None:
    """The status of the answer, or None when the server closed the connection without one."""
    async with asyncio.timeout(timeout):
        line = await reader.readline()
    if not line:
        return None
    return int(line.split(b" ", 2)[1])


async def huge_content_length(url: str, digits: int = 5000) -> int | None:
    """A request whose Content-Length has `digits` digits: the status answered (None: closed)."""
    reader, writer = await asyncio.open_connection(*host_port(url))
    try:
        writer.write(b"POST /readyz HTTP/1.1\r\nHost: x\r\nContent-Length: " + b"9" * digits + b"\r\n\r\n")
        await writer.drain()
        return await read_status(reader)
    finally:
        writer.close()


async def closed_within(reader: asyncio.StreamReader, bound: float) -> float:
    """Seconds until the server closes the connection (reading what it sends meanwhile)."""
    started = time.monotonic()
    async with asyncio.timeout(bound):
        while await reader.read(65536):
            pass
    return time.monotonic() - started


async def body_never_arrives(url: str) -> tuple[int | None, float]:
    """A GET that declares a body it never sends: the status, and the seconds until the server closed."""
    reader, writer = await asyncio.open_connection(*host_port(url))
    try:
        writer.write(b"GET /healthz HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\n")
        await writer.drain()
        status = await read_status(reader)
        return status, await closed_within(reader, CLOSE_BOUND_S)
    finally:
        writer.close()


async def body_trickles(url: str) -> float:
    """A POST whose body comes a byte a second: the seconds until the server closed."""
    reader, writer = await asyncio.open_connection(*host_port(url))

    async def trickle() -> None:
        with contextlib.suppress(ConnectionError):
            writer.write(b"POST /healthz HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\n")
            while True:
                await asyncio.sleep(1)
                writer.write(b"x")
                await writer.drain()

    dripping = asyncio.create_task(trickle())
    try:
        return await closed_within(reader, CLOSE_BOUND_S)
    finally:
        dripping.cancel()
        writer.close()


@dataclass
class HalfOpen:
    """Connections that sent part of a request line and stall."""

    writers: list[asyncio.StreamWriter]
    readers: list[asyncio.StreamReader]

    def close(self) -> None:
        for writer in self.writers:
            writer.close()


async def open_half(url: str, count: int = HALF_OPEN) -> HalfOpen:
    host, port = host_port(url)
    half = HalfOpen([], [])
    for i in range(count):
        reader, writer = await asyncio.open_connection(host, port)
        # Alternately: part of a request line, and a whole line with part of its headers.
        writer.write(b"GET /readyz HT" if i % 2 else b"GET /readyz HTTP/1.1\r\nHost: x\r\nUser-Ag")
        half.readers.append(reader)
        half.writers.append(writer)
    await asyncio.gather(*(w.drain() for w in half.writers))
    return half


async def readyz_seconds(url: str) -> tuple[int | None, float]:
    """One /readyz on a fresh connection: its status and how long the answer took."""
    started = time.monotonic()
    reader, writer = await asyncio.open_connection(*host_port(url))
    try:
        writer.write(b"GET /readyz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        await writer.drain()
        status = await read_status(reader)
        return status, time.monotonic() - started
    finally:
        writer.close()


@dataclass(frozen=True)
class Upload:
    status: int | None
    sent: int  # bytes of body the client got to send before the answer (or the close)
    rss_growth: int  # the service's largest resident set during the upload, minus the one before


async def unauthenticated_upload(
    socket_path: Path, method: str, path: str, pid: int, total: int = 300 << 20, *, chunked: bool = False
) -> Upload:
    """A `total`-byte body without a token to a Unix-socket API, sent only as far as the server reads
    it: the client stops as soon as an answer (or a close) comes."""
    proc = psutil.Process(pid)
    before = peak = proc.memory_info().rss
    reader, writer = await asyncio.open_unix_connection(str(socket_path))
    framing = b"Transfer-Encoding: chunked" if chunked else b"Content-Length: %d" % total
    writer.write(b"%s %s HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n%s\r\n\r\n" % (
        method.encode(), path.encode(), framing))  # fmt: skip
    answer = asyncio.create_task(read_status(reader, timeout=60))
    piece = b"[" * (1 << 20)
    sent = 0
    try:
        while sent < total and not answer.done():
            data = b"%x\r\n%s\r\n" % (len(piece), piece) if chunked else piece
            writer.write(data)
            try:
                async with asyncio.timeout(0.5):  # a server that stops reading: look for its answer
                    await writer.drain()
            except TimeoutError:
                await asyncio.wait([answer], timeout=5)
            except ConnectionError:
                break
            sent += len(piece)
            peak = max(peak, proc.memory_info().rss)
        status = await answer
    finally:
        writer.close()
    peak = max(peak, proc.memory_info().rss)
    return Upload(status, sent, peak - before)


def tracebacks(log_path: Path) -> list[str]:
    """Log lines that carry a traceback (a JSON line's "exc", or one printed raw)."""
    return [line for line in log_path.read_text().splitlines() if "Traceback" in line]


@dataclass(frozen=True)
class OpsReport:
    huge_length_status: int | None  # None: the connection was closed without an answer
    readyz_status: int | None  # with HALF_OPEN connections open
    readyz_s: float
    never_status: int | None  # the GET whose body never arrives
    never_closed_s: float
    trickle_closed_s: float
    half_open_closed_s: float  # until the last of a sample of the half-open connections was closed


async def misbehave_on_ops_port(url: str) -> OpsReport:
    """Everything at once on one ops port: the waits overlap, so it takes about one request deadline."""
    huge = await huge_content_length(url)
    half = await open_half(url)
    try:
        readyz_status, readyz_s = await readyz_seconds(url)
        (never_status, never_s), trickle_s, half_s = await asyncio.gather(
            body_never_arrives(url),
            body_trickles(url),
            asyncio.gather(*(closed_within(r, CLOSE_BOUND_S) for r in half.readers[::30])),
        )
    finally:
        half.close()
    return OpsReport(huge, readyz_status, readyz_s, never_status, never_s, trickle_s, max(half_s))


async def assert_ops_port_holds(url: str, log_path: Path) -> None:
    """What every service's ops port must show against those clients (issue 22): a huge
    Content-Length answered 4xx or closed, /readyz within 1 s beside HALF_OPEN half-open connections,
    every stalled connection closed within the request deadline, and no traceback in the log."""
    report = await misbehave_on_ops_port(url)
    assert report.huge_length_status is None or 400 <= report.huge_length_status < 500, report
    assert report.readyz_status == 200 and report.readyz_s < 1.0, report
    assert report.never_status == 200 and report.never_closed_s < CLOSE_BOUND_S, report
    assert report.trickle_closed_s < CLOSE_BOUND_S, report
    assert report.half_open_closed_s < CLOSE_BOUND_S, report
    assert not tracebacks(log_path)
