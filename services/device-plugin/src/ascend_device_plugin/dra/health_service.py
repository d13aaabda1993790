"""The DRA health stream (dra-health/v1alpha1 DRAResourceHealth.NodeWatchResources).

A 1.36 kubelet (ResourceHealthStatus on by default) opens it on the driver's socket once the
driver registered, and opens it again 5 s after it ends. Each message is the complete list of the
devices of prepared claims with their health (dra.health_reports); the kubelet keeps each device's
last report for its timeout and then takes it as Unknown, so the list goes out on every change and
again every RESEND_S without one. A stream opened later gets the current list first.

Several streams at once (a kubelet that reconnects before noticing the old one is gone, a test's
second reader) each get every change: the hub renders the list once per change, on the event loop,
and offers it to a one-slot queue per stream, replacing what that stream has not taken yet. A slow
reader so sees the latest list, and never holds up the hub or another stream.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Iterable
from typing import Any, Final

from ascend_common.adapters.kubelet import dra_health_pb2 as health_pb
from ascend_common.adapters.kubelet import dra_health_pb2_grpc as health_grpc
from ascend_common.adapters.kubelet.constants import DRA_HEALTH_DEFAULT_TIMEOUT_S
from grpc import aio

from ascend_device_plugin.dra.health_reports import DeviceHealth, DeviceReport, PreparedChip, device_reports
from ascend_device_plugin.inventory.snapshot import InventorySource

log = logging.getLogger(__name__)
Ctx = aio.ServicerContext[Any, Any]
Reports = tuple[DeviceReport, ...]

# Well inside the kubelet's timeout, so that a device of a quiet node never turns Unknown there.
RESEND_S: Final = DRA_HEALTH_DEFAULT_TIMEOUT_S / 3
TIMEOUT_S: Final = int(DRA_HEALTH_DEFAULT_TIMEOUT_S)  # told with each device: the kubelet's default, said outright

_WIRE: Final = {
    DeviceHealth.HEALTHY: health_pb.HEALTHY,
    DeviceHealth.UNHEALTHY: health_pb.UNHEALTHY,
    DeviceHealth.UNKNOWN: health_pb.UNKNOWN,
}


class HealthStreams:
    """The current health list and the open streams waiting for its changes."""

    def __init__(self, resources: InventorySource, prepared: Callable[[], Iterable[PreparedChip]]) -> None:
        self._resources = resources
        self._prepared = prepared
        self._current: Reports = ()
        self._streams: set[asyncio.Queue[Reports | None]] = set()
        self.refresh()

    @property
    def current(self) -> Reports:
        return self._current

    @property
    def streams(self) -> int:
        return len(self._streams)

    def refresh(self) -> None:
        """Render the list again; offer it to every stream if it changed. Cheap: prepared devices only."""
        inventory = self._resources.inventory
        reports = device_reports(self._prepared(), inventory.health, exporter_lost=inventory.exporter_lost)
        if reports == self._current:
            return
        self._current = reports
        for queue in self._streams:
            _offer(queue, reports)

    def close(self) -> None:
        """End every stream (the server is stopping): the kubelet sees the stream end, not hang."""
        for queue in self._streams:
            _offer(queue, None)

    async def follow(self) -> AsyncGenerator[Reports, None]:
        """The current list, then each change (and the list again after RESEND_S without one)."""
        queue: asyncio.Queue[Reports | None] = asyncio.Queue(maxsize=1)
        self._streams.add(queue)
        try:
            yield self._current
            while True:
                try:
                    async with asyncio.timeout(RESEND_S):
                        reports = await queue.get()
                except TimeoutError:
                    reports = self._current
                if reports is None:
                    return
                yield reports
        finally:
            self._streams.discard(queue)


def _offer(queue: asyncio.Queue[Reports | None], reports: Reports | None) -> None:
    # One slot: what the stream has not taken yet is older than this, and the list is complete.
    with contextlib.suppress(asyncio.QueueEmpty):
        queue.get_nowait()
    queue.put_nowait(reports)


def response(reports: Reports, now: float) -> health_pb.NodeWatchResourcesResponse:
    stamp = int(now)
    return health_pb.NodeWatchResourcesResponse(
        devices=[
            health_pb.DeviceHealth(
                device=health_pb.DeviceIdentifier(pool_name=r.pool, device_name=r.device),
                health=_WIRE[r.health],
                last_updated_time=stamp,
                health_check_timeout_seconds=TIMEOUT_S,
                message=r.message,
            )
            for r in reports
        ]
    )


class HealthService(health_grpc.DRAResourceHealthServicer):
    def __init__(self, streams: HealthStreams) -> None:
        self.streams = streams

    async def NodeWatchResources(
        self, request: health_pb.NodeWatchResourcesRequest, context: Ctx
    ) -> AsyncIterator[health_pb.NodeWatchResourcesResponse]:
        log.info("dra health stream opened", extra={"streams": self.streams.streams + 1})
        try:
            async for reports in self.streams.follow():
                yield response(reports, time.time())
        finally:
            log.info("dra health stream closed", extra={"streams": self.streams.streams})
