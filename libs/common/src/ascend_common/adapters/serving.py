"""Serving ASGI apps the way every service does: the API on a Unix socket, ops on TCP."""

from __future__ import annotations

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
    """A uvicorn server that leaves signals to the service: several servers share one process."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield


def server(app: Any, **kwargs: Any) -> uvicorn.Server:
    config = uvicorn.Config(
        app, log_config=None, access_log=False, lifespan="off", timeout_graceful_shutdown=2, **kwargs
    )
    return QuietServer(config)
