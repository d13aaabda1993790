"""Run a dcmi-exporter as a real process on a real Unix socket, and talk to it."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
from ascend_common.adapters.clients.stream import data_events
from httpx_sse import EventSource, ServerSentEvent

from tests.support.waiting import START_S, WaitTimedOut, ready, until_sync

ROOT = Path(__file__).resolve().parents[2]
TOKENS = {
    "all": ("t-all-" + "0" * 26, "reset,vnpu,sim"),
    "reset": ("t-reset-" + "1" * 24, "reset"),
    "vnpu": ("t-vnpu-" + "2" * 25, "vnpu"),
    "sim": ("t-sim-" + "3" * 26, "sim"),
    "containers": ("t-containers-" + "4" * 19, "containers"),
}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def auth(kind: str = "all") -> dict[str, str]:
    return {"Authorization": f"Bearer {TOKENS[kind][0]}"}


@dataclass
class ExporterProc:
    proc: subprocess.Popen[bytes]
    socket: Path
    metrics_url: str
    log_path: Path
    args: list[str] = field(default_factory=list)

    def client(self, timeout: float = 10.0) -> httpx.AsyncClient:
        transport = httpx.AsyncHTTPTransport(uds=str(self.socket))
        return httpx.AsyncClient(transport=transport, base_url="http://exporter", timeout=timeout)

    def sync_client(self, timeout: float = 10.0) -> httpx.Client:
        return httpx.Client(
            transport=httpx.HTTPTransport(uds=str(self.socket)), base_url="http://exporter", timeout=timeout
        )

    def logs(self) -> list[dict[str, Any]]:
        out = []
        for line in self.log_path.read_text().splitlines():
            try:
                out.append(json.loads(line))
            except json.JSONDecodeError:
                continue
        return out

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 10.0) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                # Leave the stacks in the log for the failure report (faulthandler), then kill it anyway.
                logged = self.log_path.stat().st_size
                self.proc.send_signal(signal.SIGUSR1)
                with contextlib.suppress(WaitTimedOut):
                    until_sync(lambda: b"most recent call first" in self.log_path.read_bytes()[logged:], 2, "stacks")
                self.proc.kill()
                self.proc.wait(5)
        return self.proc.returncode


def start_exporter(
    tmp: Path,
    *extra: str,
    profile: str = "910b-8",
    backend: str = "sim",
    env: dict[str, str] | None = None,
    wait_ready: bool = True,
) -> ExporterProc:
    tmp.mkdir(parents=True, exist_ok=True)
    token_file = tmp / "tokens"
    token_file.write_text("".join(f"{tok} {scopes}\n" for tok, scopes in TOKENS.values()))
    sock = tmp / "exporter.sock"
    port = free_port()
    args = [
        sys.executable,
        "-m",
        "dcmi_exporter.cli",
        "--backend",
        backend,
        "--profile",
        profile,
        "--socket",
        str(sock),
        "--metrics-addr",
        f"127.0.0.1:{port}",
        "--token-file",
        str(token_file),
        "--poll-period",
        "0.2",
        "--call-timeout",
        "0.5",
        *extra,
    ]
    log_path = tmp / "exporter.log"
    proc = subprocess.Popen(
        args, stdout=log_path.open("wb"), stderr=subprocess.STDOUT, env={**os.environ, **(env or {})}, cwd=ROOT
    )
    ep = ExporterProc(proc, sock, f"http://127.0.0.1:{port}", log_path, args)
    if wait_ready:

        def awaited() -> str:  # asked on failure only: the log as it is then
            return f"the exporter to be ready (log: {log_path.read_text()[-2000:]})"

        until_sync(lambda: _ready(ep), START_S, awaited)
    return ep


def _ready(ep: ExporterProc) -> bool:
    return ready("exporter", ep.proc, ep.metrics_url, ep.log_path)


@contextmanager
def running_exporter(tmp: Path, *extra: str, **kw: Any) -> Iterator[ExporterProc]:
    ep = start_exporter(tmp, *extra, **kw)
    try:
        yield ep
    finally:
        ep.stop()


@asynccontextmanager
async def event_stream(
    client: httpx.AsyncClient, last_event_id: str | None = None
) -> AsyncIterator[AsyncIterator[ServerSentEvent]]:
    headers = {"Last-Event-ID": last_event_id} if last_event_id else {}
    async with client.stream("GET", "/v1/events", headers=headers, timeout=httpx.Timeout(10, read=30)) as resp:
        assert resp.status_code == 200
        assert resp.headers["content-type"].startswith("text/event-stream")
        yield data_events(EventSource(resp))


async def take(
    messages: AsyncIterator[ServerSentEvent], n: int, kinds: set[str] | None = None
) -> list[ServerSentEvent]:
    """The next `n` messages (of the given event kinds), bounded by the caller's timeout."""
    out: list[ServerSentEvent] = []
    async for msg in messages:
        if kinds is None or msg.event in kinds:
            out.append(msg)
            if len(out) == n:
                break
    return out
