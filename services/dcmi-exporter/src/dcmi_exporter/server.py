"""Serve the exporter: the local API on a Unix socket (0660), ops endpoints on TCP."""

from __future__ import annotations

import asyncio
import contextlib
import grp
import logging
import os
import signal
import socket
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import uvicorn
from ascend_common.settings import parse_host_port
from fastapi import FastAPI

from dcmi_exporter.api import create_api, create_ops_app
from dcmi_exporter.runtime import Exporter

log = logging.getLogger(__name__)
SOCKET_MODE = 0o660


def bind_unix_socket(path: Path, mode: int = SOCKET_MODE, group: str | None = None) -> socket.socket:
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


class _Server(uvicorn.Server):
    """A uvicorn server that leaves signals to us: two servers share one process."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield


def _server(app: FastAPI, **kwargs: Any) -> uvicorn.Server:
    config = uvicorn.Config(
        app, log_config=None, access_log=False, lifespan="off", timeout_graceful_shutdown=2, **kwargs
    )
    return _Server(config)


async def serve(exporter: Exporter) -> None:
    settings = exporter.settings
    api_sock = bind_unix_socket(settings.socket, group=settings.socket_group)
    host, port = parse_host_port(settings.metrics_addr)
    api = _server(create_api(exporter))
    ops = _server(create_ops_app(exporter), host=host, port=port)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    await exporter.start()
    tasks = [
        asyncio.create_task(api.serve(sockets=[api_sock]), name="api"),
        asyncio.create_task(ops.serve(), name="ops"),
    ]
    log.info(
        "dcmi-exporter serving",
        extra={"socket": str(settings.socket), "metrics_addr": settings.metrics_addr, "backend": settings.backend},
    )
    waiter = asyncio.create_task(stop.wait())
    done, _ = await asyncio.wait([waiter, *tasks], return_when=asyncio.FIRST_COMPLETED)
    for task in done:
        if task is not waiter and task.exception() is not None:
            log.error("server stopped", extra={"error": repr(task.exception())})
    log.info("dcmi-exporter stopping")
    api.should_exit = True
    ops.should_exit = True
    await asyncio.wait(tasks, timeout=5)
    log.info("servers stopped")
    waiter.cancel()
    await exporter.stop()
    log.info("exporter stopped")
    with contextlib.suppress(FileNotFoundError):
        settings.socket.unlink()
