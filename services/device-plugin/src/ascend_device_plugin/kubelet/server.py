"""One grpc.aio DevicePlugin server per resource, on `<resource>.sock` (mode 0600).

The servicer only translates: the device lists come from the ViewBoard, allocations from
the Allocator, whose refusals (`AllocationError`) become gRPC statuses here and nowhere else.
ListAndWatch is push-driven: it waits on the board and sends as soon as the
resource's view changes; the list-watch period only bounds how long it waits to re-check.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import grpc
from ascend_common.adapters.kubelet import deviceplugin_pb2 as pb
from ascend_common.adapters.kubelet import deviceplugin_pb2_grpc as pb_grpc
from ascend_common.adapters.kubelet.constants import HEALTHY, UNHEALTHY
from google.protobuf.message import DecodeError
from grpc import aio

from ascend_device_plugin.allocation.refusals import AllocationError, Refusal
from ascend_device_plugin.allocator import Allocator
from ascend_device_plugin.inventory.views import ResourceView, ViewBoard
from ascend_device_plugin.metrics import PluginMetrics

log = logging.getLogger(__name__)
Ctx = aio.ServicerContext[Any, Any]


STATUS = {
    Refusal.INVALID_REQUEST: grpc.StatusCode.INVALID_ARGUMENT,
    Refusal.NO_CLUSTER: grpc.StatusCode.FAILED_PRECONDITION,
    Refusal.NO_POD: grpc.StatusCode.FAILED_PRECONDITION,
    Refusal.NO_INVENTORY: grpc.StatusCode.UNAVAILABLE,
    Refusal.API_SERVER: grpc.StatusCode.UNAVAILABLE,
    Refusal.NO_CAPACITY: grpc.StatusCode.RESOURCE_EXHAUSTED,
    Refusal.SOFT_SHARE: grpc.StatusCode.FAILED_PRECONDITION,
    Refusal.DRA_CLAIM: grpc.StatusCode.FAILED_PRECONDITION,
}


def status_of(error: AllocationError) -> grpc.StatusCode:
    """The gRPC status the kubelet gets for a refusal."""
    return STATUS[error.kind]


def to_message(view: ResourceView) -> pb.ListAndWatchResponse:
    devices = []
    for d in view.devices:
        device = pb.Device(ID=d.id, health=HEALTHY if d.healthy else UNHEALTHY)
        if d.numa_node is not None:
            device.topology.nodes.append(pb.NUMANode(ID=d.numa_node))
        devices.append(device)
    return pb.ListAndWatchResponse(devices=devices)


class DevicePluginService(pb_grpc.DevicePluginServicer):
    def __init__(
        self, resource: str, board: ViewBoard, allocator: Allocator, period: float, metrics: PluginMetrics
    ) -> None:
        self.resource = resource
        self.board = board
        self.allocator = allocator
        self.period = period
        self.metrics = metrics

    async def GetDevicePluginOptions(self, request: pb.Empty, context: Ctx) -> pb.DevicePluginOptions:
        return pb.DevicePluginOptions(
            pre_start_required=False,
            get_preferred_allocation_available=self.allocator.preferred_available(self.resource),
        )

    async def ListAndWatch(self, request: pb.Empty, context: Ctx) -> AsyncIterator[pb.ListAndWatchResponse]:
        sent: tuple[object, ...] | None = None
        version = -1
        log.info("kubelet opened ListAndWatch", extra={"resource": self.resource})
        while True:
            view = self.board.get(self.resource)
            if view is not None and view.version != version:
                version = view.version
                # A resync sends only when the devices differ from what the kubelet holds.
                if view.devices != sent:
                    sent = view.devices
                    self.metrics.list_and_watch_sends.labels(self.resource).inc()
                    yield to_message(view)
            await self.board.wait_change(self.resource, version, self.period)

    async def GetPreferredAllocation(
        self, request: pb.PreferredAllocationRequest, context: Ctx
    ) -> pb.PreferredAllocationResponse:
        try:
            return self.allocator.preferred(self.resource, request)
        except AllocationError as exc:
            await context.abort(status_of(exc), exc.message)
            raise  # unreachable: abort raises

    async def Allocate(self, request: pb.AllocateRequest, context: Ctx) -> pb.AllocateResponse:
        started = time.perf_counter()
        try:
            response = await self.allocator.allocate(self.resource, request)
        except AllocationError as exc:
            self.metrics.allocations.labels(self.resource, "refused").inc()
            log.warning("allocate refused", extra={"resource": self.resource, "error": exc.message})
            await context.abort(status_of(exc), exc.message)
            raise
        self.metrics.allocations.labels(self.resource, "ok").inc()
        self.metrics.allocate_seconds.labels(self.resource).observe(time.perf_counter() - started)
        return response

    async def PreStartContainer(
        self, request: pb.PreStartContainerRequest, context: Ctx
    ) -> pb.PreStartContainerResponse:
        return pb.PreStartContainerResponse()


class _Undecodable:
    """A request body that is not a message of the method's type."""

    __slots__ = ("error",)

    def __init__(self, error: str) -> None:
        self.error = error


def _lenient(parse: Callable[[bytes], object]) -> Callable[[bytes], object]:
    def deserialize(data: bytes) -> object:
        try:
            return parse(data)
        except DecodeError as exc:
            return _Undecodable(str(exc))

    return deserialize


async def _refuse(request: object, context: Ctx) -> None:
    if isinstance(request, _Undecodable):
        await context.abort(grpc.StatusCode.INVALID_ARGUMENT, f"malformed request: {request.error}")


def _unary(method: Callable[[Any, Ctx], Awaitable[Any]]) -> Callable[[Any, Ctx], Awaitable[Any]]:
    async def handle(request: Any, context: Ctx) -> Any:
        await _refuse(request, context)
        return await method(request, context)

    return handle


def _stream(method: Callable[[Any, Ctx], AsyncIterator[Any]]) -> Callable[[Any, Ctx], AsyncIterator[Any]]:
    async def handle(request: Any, context: Ctx) -> AsyncIterator[Any]:
        await _refuse(request, context)
        async for response in method(request, context):
            yield response

    return handle


def add_to_server(service: DevicePluginService, server: aio.Server) -> None:
    """What the generated add_DevicePluginServicer_to_server does, except for a request body that
    does not decode (bad wire format, invalid UTF-8 in a string): grpc reports its deserializer's
    failure as UNKNOWN, the kubelet gets INVALID_ARGUMENT from us."""
    Unary = Callable[[Any, Ctx], Awaitable[Any]]
    unary: dict[str, tuple[Unary, Callable[[bytes], object], Callable[[Any], bytes]]] = {
        "GetDevicePluginOptions": (
            service.GetDevicePluginOptions,
            pb.Empty.FromString,
            pb.DevicePluginOptions.SerializeToString,
        ),
        "GetPreferredAllocation": (
            service.GetPreferredAllocation,
            pb.PreferredAllocationRequest.FromString,
            pb.PreferredAllocationResponse.SerializeToString,
        ),
        "Allocate": (service.Allocate, pb.AllocateRequest.FromString, pb.AllocateResponse.SerializeToString),
        "PreStartContainer": (
            service.PreStartContainer,
            pb.PreStartContainerRequest.FromString,
            pb.PreStartContainerResponse.SerializeToString,
        ),
    }
    handlers: dict[str, grpc.RpcMethodHandler[Any, Any]] = {
        name: grpc.unary_unary_rpc_method_handler(
            _unary(method), request_deserializer=_lenient(parse), response_serializer=serialize
        )
        for name, (method, parse, serialize) in unary.items()
    }
    handlers["ListAndWatch"] = grpc.unary_stream_rpc_method_handler(
        _stream(service.ListAndWatch),
        request_deserializer=_lenient(pb.Empty.FromString),
        response_serializer=pb.ListAndWatchResponse.SerializeToString,
    )
    server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler("v1beta1.DevicePlugin", handlers),))


class ResourceServer:
    """The server of one resource; started again after every kubelet restart."""

    def __init__(
        self, resource: str, socket_path: Path, service: DevicePluginService, max_message: int, max_streams: int
    ):
        self.resource = resource
        self.socket_path = socket_path
        self.service = service
        self.max_message = max_message
        self.max_streams = max_streams
        self._server: aio.Server | None = None

    @property
    def endpoint(self) -> str:
        return self.socket_path.name

    async def start(self) -> None:
        with contextlib.suppress(FileNotFoundError):
            self.socket_path.unlink()
        server = aio.server(
            options=[
                ("grpc.max_receive_message_length", self.max_message),
                ("grpc.max_send_message_length", self.max_message),
                ("grpc.max_concurrent_streams", self.max_streams),
                ("grpc.max_connection_idle_ms", 3_600_000),
            ],
            maximum_concurrent_rpcs=self.max_streams * 4,
        )
        add_to_server(self.service, server)
        server.add_insecure_port(f"unix://{self.socket_path}")
        # Only the kubelet (root) may connect: create the socket 0600, not 0600-after-a-while.
        old = os.umask(0o177)
        try:
            await server.start()
        finally:
            os.umask(old)
        os.chmod(self.socket_path, 0o600)
        self._server = server

    async def stop(self) -> None:
        if self._server is not None:
            await self._server.stop(grace=None)
            self._server = None
        with contextlib.suppress(FileNotFoundError):
            self.socket_path.unlink()

    def socket_present(self) -> bool:
        return self.socket_path.exists()

    async def wait_stopped(self) -> None:
        if self._server is not None:
            await asyncio.shield(self._server.wait_for_termination())
