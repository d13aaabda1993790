"""Serve the exporter: the local API on a Unix socket (0660), ops endpoints on TCP."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal

from ascend_common.adapters.serving import bind_unix_socket, server
from ascend_common.adapters.settings import parse_host_port
from ascend_common.essential import exit_status, stop_service_when_one_ends

from dcmi_exporter.api import create_api, create_ops_app
from dcmi_exporter.runtime import Exporter

log = logging.getLogger(__name__)


async def serve(exporter: Exporter) -> int:
    """Run until SIGTERM/SIGINT; the exit status is 1 when an essential loop ended (see `essential`)."""
    settings = exporter.settings
    api_sock = bind_unix_socket(settings.socket, group=settings.socket_group)
    host, port = parse_host_port(settings.metrics_addr)
    api = server(create_api(exporter))
    ops = server(create_ops_app(exporter), host=host, port=port)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    stop_service_when_one_ends()
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
    return exit_status()
