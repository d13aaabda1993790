"""The DRA driver's two gRPC servers: the DRA service and the plugin-watcher registration.

As the kubelet's own plugin helper (k8s.io/dynamic-resource-allocation/kubeletplugin) lays them out:
the service on `<kubelet plugins dir>/npu.huawei.com/dra.sock`, the registration socket
`<plugins_registry>/npu.huawei.com-reg.sock`, whose appearance the kubelet's plugin watcher
notices; it asks GetInfo, checks the type and the announced services, registers the driver and
says so through NotifyRegistrationStatus. A kubelet that restarts scans the directory again, so
the sockets stay as they are. Both are created mode 0600: only the kubelet (root) may connect.

The DRA socket serves the kubelet's DRAPlugin service twice, as dra/v1 (1.34+ prefer it) and
dra/v1beta1 (1.32, 1.33), one servicer behind both: the two differ in their package only (v1's
Device has a share_id we never set). Registration lists v1 first, since the kubelet takes the
first entry it knows. The same socket serves dra-health/v1alpha1 (dra/health_service.py).

The servicers translate only: the answers come from the DraDriver; a request that does not decode
is INVALID_ARGUMENT (as for the device-plugin API), a claim that fails is its own error.
"""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any, Protocol, cast

import grpc
from ascend_common.adapters.kubelet import dra_health_pb2_grpc as health_grpc
from ascend_common.adapters.kubelet import dra_pb2 as dra_v1beta1
from ascend_common.adapters.kubelet import dra_pb2_grpc as dra_v1beta1_grpc
from ascend_common.adapters.kubelet import dra_v1_pb2 as dra_v1
from ascend_common.adapters.kubelet import dra_v1_pb2_grpc as dra_v1_grpc
from ascend_common.adapters.kubelet import pluginregistration_pb2 as reg
from ascend_common.adapters.kubelet import pluginregistration_pb2_grpc as reg_grpc
from ascend_common.adapters.kubelet.constants import (
    DRA_PLUGIN_TYPE,
    DRA_V1_SERVICE_NAME,
    DRA_V1BETA1_SERVICE_NAME,
)
from ascend_common.kubenames import is_uid
from grpc import aio

from ascend_device_plugin.dra.driver import ClaimRef, DraDriver, Outcome
from ascend_device_plugin.dra.health_service import HealthService, HealthStreams
from ascend_device_plugin.dra.slice_devices import DRIVER
from ascend_device_plugin.metrics import PluginMetrics

log = logging.getLogger(__name__)
Ctx = aio.ServicerContext[Any, Any]


class ChangeSource(Protocol):
    def watch(self, callback: Callable[[], None]) -> Callable[[], None]: ...


DRA_SOCKET = "dra.sock"
REGISTRATION_SOCKET = f"{DRIVER}-reg.sock"
# Newest first: the kubelet picks the first service of this list that it serves.
SUPPORTED_SERVICES = (DRA_V1_SERVICE_NAME, DRA_V1BETA1_SERVICE_NAME)


async def _refs(claims: Any, context: Ctx) -> tuple[list[ClaimRef], dict[str, Outcome]]:
    """The request's claims the driver may act on, and the refusals of the others by uid. A claim
    without a uid refuses the whole call (the kubelet always sends one); a uid that is not one the
    API server could have given (it names a file under the CDI dir) refuses that claim alone,
    before anything is read, written or removed."""
    bad = [c for c in claims if not c.uid]
    if bad:
        await context.abort(grpc.StatusCode.INVALID_ARGUMENT, f"claim {bad[0].namespace}/{bad[0].name} has no uid")
    refs: list[ClaimRef] = []
    refused: dict[str, Outcome] = {}
    for c in claims:
        if is_uid(c.uid):
            refs.append(ClaimRef(c.namespace, c.name, c.uid))
            continue
        error = f"claim {c.namespace}/{c.name}: uid {c.uid[:80]!r} is not a Kubernetes UID"
        log.warning("dra claim refused: its uid is not a Kubernetes UID",
                    extra={"claim": f"{c.namespace}/{c.name}", "uid": c.uid[:200], "error": error})  # fmt: skip
        refused[c.uid] = Outcome(error=error)
    return refs, refused


class DraService:
    """The DRAPlugin servicer of both API versions: `api` is the generated message module of the one
    it is registered for (dra_v1_pb2 or dra_pb2), whose classes build the answers."""

    def __init__(self, driver: DraDriver, metrics: PluginMetrics | None = None, api: ModuleType = dra_v1beta1) -> None:
        self.driver = driver
        self.metrics = metrics
        self.api = api

    def _prepared(self, outcome: Outcome) -> Any:
        if outcome.error:
            return self.api.NodePrepareResourceResponse(error=outcome.error)
        devices = [
            self.api.Device(
                request_names=d.requestNames, pool_name=d.poolName, device_name=d.deviceName,
                cdi_device_ids=d.cdiDeviceIds,
            )
            for d in outcome.devices
        ]  # fmt: skip
        return self.api.NodePrepareResourceResponse(devices=devices)

    def _count(self, call: str, outcomes: dict[str, Outcome]) -> None:
        if self.metrics is not None:
            for outcome in outcomes.values():
                self.metrics.dra_claims.labels(call, "refused" if outcome.error else "ok").inc()

    async def NodePrepareResources(self, request: Any, context: Ctx) -> Any:
        refs, refused = await _refs(request.claims, context)
        outcomes = refused | await self.driver.prepare(refs)
        self._count("prepare", outcomes)
        return self.api.NodePrepareResourcesResponse(claims={uid: self._prepared(o) for uid, o in outcomes.items()})

    async def NodeUnprepareResources(self, request: Any, context: Ctx) -> Any:
        refs, refused = await _refs(request.claims, context)
        outcomes = refused | await self.driver.unprepare(refs)
        self._count("unprepare", outcomes)
        return self.api.NodeUnprepareResourcesResponse(
            claims={uid: self.api.NodeUnprepareResourceResponse(error=o.error) for uid, o in outcomes.items()}
        )


class RegistrationService(reg_grpc.RegistrationServicer):
    def __init__(self, endpoint: Path, on_registered: Callable[[], None] = lambda: None) -> None:
        self.endpoint = endpoint
        self._on_registered = on_registered
        self.registered = False
        self.error = ""

    async def GetInfo(self, request: reg.InfoRequest, context: Ctx) -> reg.PluginInfo:
        return reg.PluginInfo(
            type=DRA_PLUGIN_TYPE,
            name=DRIVER,
            endpoint=str(self.endpoint),
            supported_versions=list(SUPPORTED_SERVICES),
        )

    async def NotifyRegistrationStatus(
        self, request: reg.RegistrationStatus, context: Ctx
    ) -> reg.RegistrationStatusResponse:
        self.registered, self.error = request.plugin_registered, request.error
        if request.plugin_registered:
            log.info("dra driver registered with the kubelet", extra={"driver": DRIVER})
            self._on_registered()
        else:
            log.error("the kubelet refused the dra driver", extra={"driver": DRIVER, "error": request.error})
        return reg.RegistrationStatusResponse()


def _clear(path: Path) -> None:
    # Once at start and stop, a directory entry: not worth a thread.
    path.parent.mkdir(parents=True, exist_ok=True)
    with contextlib.suppress(FileNotFoundError):
        path.unlink()


async def _start_unix(server: aio.Server, path: Path) -> None:
    _clear(path)
    server.add_insecure_port(f"unix://{path}")
    # Created 0600, not made 0600 after a window in which anyone could connect.
    old = os.umask(0o177)
    try:
        await server.start()
    finally:
        os.umask(old)
    os.chmod(path, 0o600)


class DraServers:
    """Both servers; the DRA service starts first, so the kubelet never finds a driver it cannot call."""

    def __init__(
        self,
        driver: DraDriver,
        plugins_dir: Path,
        registry_dir: Path,
        max_message: int,
        *,
        on_registered: Callable[[], None] = lambda: None,
        metrics: PluginMetrics | None = None,
        changes: ChangeSource | None = None,
    ) -> None:
        """`changes`: what tells the health stream that a chip's health (or its reason) changed."""
        self.socket_path = plugins_dir / DRIVER / DRA_SOCKET
        self.registration_path = registry_dir / REGISTRATION_SOCKET
        self.registration = RegistrationService(self.socket_path, on_registered)
        self._metrics = metrics
        self._driver = driver
        self.health = HealthStreams(driver.resources, driver.prepared_chips)
        driver.watch(self.health.refresh)
        self._changes = changes
        self._unwatch: Callable[[], None] | None = None
        self._max_message = max_message
        self._servers: list[tuple[aio.Server, Path]] = []

    def _server(self) -> aio.Server:
        return aio.server(
            options=[
                ("grpc.max_receive_message_length", self._max_message),
                ("grpc.max_send_message_length", self._max_message),
            ]
        )

    async def start(self) -> None:
        service = self._server()
        # The generated add_* functions want their own version's servicer class; ours serves both.
        v1 = cast(dra_v1_grpc.DRAPluginServicer, DraService(self._driver, self._metrics, dra_v1))
        v1beta1 = cast(dra_v1beta1_grpc.DRAPluginServicer, DraService(self._driver, self._metrics, dra_v1beta1))
        dra_v1_grpc.add_DRAPluginServicer_to_server(v1, service)
        dra_v1beta1_grpc.add_DRAPluginServicer_to_server(v1beta1, service)
        health_grpc.add_DRAResourceHealthServicer_to_server(HealthService(self.health), service)
        if self._changes is not None and self._unwatch is None:
            self._unwatch = self._changes.watch(self.health.refresh)
        self.health.refresh()
        await _start_unix(service, self.socket_path)
        self._servers.append((service, self.socket_path))
        registration = self._server()
        reg_grpc.add_RegistrationServicer_to_server(self.registration, registration)
        await _start_unix(registration, self.registration_path)
        self._servers.append((registration, self.registration_path))
        log.info(
            "dra driver serving",
            extra={"socket": str(self.socket_path), "registration": str(self.registration_path)},
        )

    async def stop(self) -> None:
        # Registration first: its socket going away is how the kubelet learns the driver left.
        self.health.close()
        for server, path in reversed(self._servers):
            _clear(path)
            await server.stop(grace=1.0)
        self._servers.clear()
        if self._unwatch is not None:
            self._unwatch()
            self._unwatch = None
