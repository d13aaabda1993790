"""Serving ASGI apps the way every service does: the API on a Unix socket, ops on TCP."""

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

import uvicorn

API_SOCKET_MODE = 0o660
# uvicorn refreshes its Date header once a second; that is all its loop needs to wake for.
TICK_S = 1.0


def bind_unix_socket(path: Path, mode: int = API_SOCKET_MODE, group: str | None = None) -> socket.socket:
    """Bind a listening Unix socket that nobody outside owner/group can reach, even briefly."""
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.is_symlink():
        raise RuntimeError(f"refusing to bind {path}: it is a symlink")
    if path.exists():
        if not stat.S_ISSOCK(path.lstat().st_mode):
            raise RuntimeError(f"refusing to replace {path}: not a socket")
        path.unlink()  # a stale socket from a previous run
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    old = os.umask(0o777 & ~mode)
    try:
        sock.bind(str(path))
    finally:
        os.umask(old)
    os.chmod(path, mode)
    if group is not None:
        os.chown(path, -1, grp.getgrnam(group).gr_gid)
    sock.listen(128)
    sock.setblocking(False)
    return sock


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
    config = uvicorn.Config(
        app, log_config=None, access_log=False, lifespan="off", timeout_graceful_shutdown=2, **kwargs
    )
    return QuietServer(config)
