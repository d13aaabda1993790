"""Serving ASGI apps the way every service does: the API on a Unix socket, ops on TCP.

Every HTTP server of the three services is uvicorn (its h11 protocol), built by `server` with the
limits below; nothing here parses HTTP. The limits, in one place (docs/operations.md lists them):

- `HEAD_MAX_BYTES`: a request line and headers larger than this are answered 400 by h11
  (`h11_max_incomplete_event_size`);
- `KEEP_ALIVE_S`: an idle kept-alive connection is closed (`timeout_keep_alive`);
- `REQUEST_S`: a request must arrive whole, head and body, within this many seconds of the
  connection opening or of the previous answer, else the connection is closed (`DeadlineH11Protocol`);
- `MAX_CONNECTIONS`: past this many open connections, a request is answered 503 (`limit_concurrency`);
- `BACKLOG`: connections the kernel queues before they are accepted (`backlog`, and `listen`).

Request bodies on the Unix-socket APIs are bounded by FastAPI (`max_body_size`) and their tokens
checked before any byte of them is read: `ascend_common.adapters.guard`.
"""

from __future__ import annotations

import asyncio
import contextlib
import grp
import os
import socket
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import h11
import uvicorn
from uvicorn.protocols.http.h11_impl import H11Protocol

API_SOCKET_MODE = 0o660
# uvicorn refreshes its Date header once a second; that is all its loop needs to wake for.
TICK_S = 1.0
HEAD_MAX_BYTES = 16 * 1024  # h11's own default, stated: kubelet probes and Prometheus send a few hundred bytes
KEEP_ALIVE_S = 5  # uvicorn's default; Prometheus scrapes every 15 s or more and reconnects
REQUEST_S = 10.0  # far beyond a probe's or a local client's need; a stalled client holds a place this long
MAX_CONNECTIONS = 512  # well above probes + scrapers + local clients, well below a 1024 file limit
BACKLOG = 512


def clear_socket_path(path: Path) -> None:
    """Make `path` free for a socket: a stale one from a previous run is removed; a symlink or any
    other file is refused (RuntimeError). A service that binds late calls it at its start, so that
    a bad path fails the start and no client finds the previous run's socket meanwhile."""
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.is_symlink():
        raise RuntimeError(f"refusing to bind {path}: it is a symlink")
    if path.exists():
        if not stat.S_ISSOCK(path.lstat().st_mode):
            raise RuntimeError(f"refusing to replace {path}: not a socket")
        path.unlink()


def bind_unix_socket(path: Path, mode: int = API_SOCKET_MODE, group: str | None = None) -> socket.socket:
    """Bind a listening Unix socket that nobody outside owner/group can reach, even briefly."""
    clear_socket_path(path)
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    old = os.umask(0o777 & ~mode)
    try:
        sock.bind(str(path))
    finally:
        os.umask(old)
    os.chmod(path, mode)
    if group is not None:
        os.chown(path, -1, grp.getgrnam(group).gr_gid)
    sock.listen(BACKLOG)
    sock.setblocking(False)
    return sock


def bind_tcp_socket(host: str, port: int) -> socket.socket:
    """Bind the ops port before anything else starts, so that an address in use fails the start
    (an OSError here) instead of ending uvicorn's serve() with SystemExit later."""
    sock = socket.create_server((host, port), backlog=BACKLOG)
    sock.setblocking(False)
    return sock


class DeadlineH11Protocol(H11Protocol):
    """uvicorn's h11 protocol with one more timer: a request must arrive whole (request line,
    headers and body) within `REQUEST_S` of the connection opening or of the previous answer.

    uvicorn arms its keep-alive timer only after an answer and cancels it at the next byte that
    arrives, and has no other timer: a client that connects and sends nothing, or part of a request
    line, or a body a byte at a time, would hold its connection, and a place under `MAX_CONNECTIONS`,
    for ever. The timer reads h11's state and closes the transport as uvicorn's own keep-alive
    handler does; it parses nothing. A request whose body has arrived (h11 `DONE`) is never cut
    short, however long its answer takes (an event stream, a reset). uvicorn takes a protocol
    class through `Config(http=...)`.
    """

    _deadline: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._arm()

    def on_response_complete(self) -> None:
        super().on_response_complete()
        self._arm()

    def connection_lost(self, exc: Exception | None) -> None:
        if self._deadline is not None:
            self._deadline.cancel()
            self._deadline = None
        super().connection_lost(exc)

    def _arm(self) -> None:
        if self._deadline is not None:
            self._deadline.cancel()
        self._deadline = self.loop.call_later(REQUEST_S, self._expire)

    def _expire(self) -> None:
        self._deadline = None
        # IDLE: no whole request line and headers yet; SEND_BODY: its body has not all arrived.
        if self.conn.their_state in (h11.IDLE, h11.SEND_BODY) and not self.transport.is_closing():
            self.transport.close()


class QuietServer(uvicorn.Server):
    """A uvicorn server that leaves signals to the service (several servers share one process)
    and wakes once a second, not ten times.

    uvicorn's own loop wakes every 0.1 s to see whether `should_exit` was set, which made the
    two servers of a service most of its wake-ups when idle. Here setting `should_exit` wakes the
    loop at once, and the loop otherwise wakes only to refresh the Date header (once a second,
    as uvicorn does). Set `should_exit` on the event loop (an asyncio.Event is behind it); the
    services' stop hooks do. It overrides uvicorn's `main_loop` (0.54: libs/common/tests/test_serving.py
    checks the ticks, the Date header and the prompt exit).
    """

    def __init__(self, config: uvicorn.Config) -> None:
        self._exit = asyncio.Event()
        super().__init__(config)

    @property
    def should_exit(self) -> bool:
        return self._exit.is_set()

    @should_exit.setter
    def should_exit(self, value: bool) -> None:
        if value:
            self._exit.set()
        else:
            self._exit.clear()

    async def main_loop(self) -> None:
        # on_tick(0): uvicorn refreshes the Date header on ticks whose counter is a multiple of 10;
        # every tick here is one second apart.
        while not await self.on_tick(0):
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(TICK_S):
                    await self._exit.wait()

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield


def server(app: Any, **kwargs: Any) -> uvicorn.Server:
    """A uvicorn server for `app` with the limits above; serve it on a socket of `bind_unix_socket`
    or `bind_tcp_socket` (`server.serve(sockets=[sock])`)."""
    config = uvicorn.Config(
        app,
        http=DeadlineH11Protocol,
        ws="none",
        log_config=None,
        access_log=False,
        lifespan="off",
        timeout_graceful_shutdown=2,
        h11_max_incomplete_event_size=HEAD_MAX_BYTES,
        timeout_keep_alive=KEEP_ALIVE_S,
        limit_concurrency=MAX_CONNECTIONS,
        backlog=BACKLOG,
        **kwargs,
    )
    return QuietServer(config)
