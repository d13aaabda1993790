"""Serve the exporter: the local API on a Unix socket (0660), ops endpoints on TCP."""

from __future__ import annotations

import asyncio
import contextlib
import logging

from ascend_common.adapters.ops import ops_app
from ascend_common.adapters.serving import bind_unix_socket, clear_socket_path, server
from ascend_common.adapters.settings import parse_host_port

from dcmi_exporter.api import NOT_READ_YET, RETRY_AFTER_S, create_api
from dcmi_exporter.metrics.families import build_registry
from dcmi_exporter.runtime import Exporter
from dcmi_exporter.tasks.telemetry import Samples

log = logging.getLogger(__name__)


def readiness(exporter: Exporter) -> tuple[bool, dict[str, object]]:
    node = exporter.poller.snapshot.node
    if not node.ready:
        return False, {"reason": "chips not discovered and read yet"}
    return True, {"chips": node.chip_count}


async def serve(exporter: Exporter) -> int:
    """Run until SIGTERM/SIGINT; the exit status is 1 when an essential loop ended (ascend_common.adapters.lifecycle),
    one of the two servers included.

    The ops endpoints serve at once (/readyz says why the exporter is not ready); the socket is bound
    only once every chip was read: a client that finds it never reads an empty or partial node."""
    kit = exporter.lifecycle
    settings = exporter.settings
    clear_socket_path(settings.socket)  # a bad path fails here; the previous run's socket is gone
    host, port = parse_host_port(settings.metrics_addr)
    api = server(create_api(exporter))
    telemetry = exporter.telemetry
    registry = build_registry(
        lambda: exporter.poller.snapshot,
        exporter.stats,
        (lambda: telemetry.samples) if telemetry is not None else Samples,
        exporter.containers.current,
        exporter.containers.current_vnpus,
    )

    def metrics_held() -> str | None:
        return None if exporter.poller.snapshot.node.ready else NOT_READ_YET

    # The chip collector reads an immutable snapshot: it renders in a worker thread, off the loop.
    ops = server(
        ops_app(
            lambda: readiness(exporter),
            registry,
            render_in_thread=True,
            bad_inputs=exporter.bad_inputs.snapshot,
            metrics_held=metrics_held,
            retry_after_s=RETRY_AFTER_S,
        ),
        host=host,
        port=port,
    )
    servers = kit.scope("servers")

    def unlink_socket() -> None:
        with contextlib.suppress(FileNotFoundError):
            settings.socket.unlink()

    async def stop_exporter() -> None:
        await exporter.stop()
        log.info("exporter stopped")

    async def serve_api() -> None:
        await exporter.poller.read_once.wait()
        api_sock = bind_unix_socket(settings.socket, group=settings.socket_group)
        log.info(
            "dcmi-exporter serving",
            extra={"socket": str(settings.socket), "metrics_addr": settings.metrics_addr, "backend": settings.backend},
        )
        await api.serve(sockets=[api_sock])

    async def start() -> None:
        kit.on_stop(unlink_socket)
        kit.on_stop(stop_exporter)
        await exporter.start()
        api_task = servers.essential(serve_api(), "api")
        tasks = [api_task, servers.essential(ops.serve(), "ops")]

        async def stop_serving() -> None:
            log.info("dcmi-exporter stopping")
            if not exporter.poller.read_once.is_set():
                api_task.cancel()  # still waiting for the first read: nothing to drain
            api.should_exit = True
            ops.should_exit = True
            await asyncio.wait(tasks, timeout=5)
            log.info("servers stopped")

        kit.on_stop(stop_serving)
        log.info("dcmi-exporter started; the API socket follows the first read of every chip")

    return await kit.run(start)
