"""The DRA driver's two gRPC servers: the DRA service and the plugin-watcher registration.

As the kubelet's own plugin helper (k8s.io/dynamic-resource-allocation/kubeletplugin) lays them out:
the service on `<kubelet plugins dir>/npu.huawei.com/dra.sock`, the registration socket
`<plugins_registry>/npu.huawei.com-reg.sock`, whose appearance the kubelet's plugin watcher
notices; it asks GetInfo, checks the type and the announced services, registers the driver and
says so through NotifyRegistrationStatus. A kubelet that restarts scans the directory again, so
the sockets stay as they are. Both are created mode 0600: only the kubelet (root) may connect.

The servicers translate only: the answers come from the DraDriver; a request that does not decode
is INVALID_ARGUMENT (as for the device-plugin API), a claim that fails is its own error.
"""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import grpc
from ascend_common.adapters.kubelet import dra_pb2 as dra
from ascend_common.adapters.kubelet import dra_pb2_grpc as dra_grpc
from ascend_common.adapters.kubelet import pluginregistration_pb2 as reg
from ascend_common.adapters.kubelet import pluginregistration_pb2_grpc as reg_grpc
from ascend_common.adapters.kubelet.constants import DRA_PLUGIN_TYPE, DRA_V1BETA1_SERVICE_NAME
from ascend_common.kubenames import is_uid
from grpc import aio

from ascend_device_plugin.core.dra import DRIVER
from ascend_device_plugin.dra.driver import ClaimRef, DraDriver, Outcome
from ascend_device_plugin.metrics import PluginMetrics

log = logging.getLogger(__name__)
Ctx = aio.ServicerContext[Any, Any]
DRA_SOCKET = "dra.sock"
REGISTRATION_SOCKET = f"{DRIVER}-reg.sock"


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


def _device(d: Any) -> dra.Device:
    return dra.Device(
        request_names=d.requestNames, pool_name=d.poolName, device_name=d.deviceName, cdi_device_ids=d.cdiDeviceIds
    )


def _prepared(outcome: Outcome) -> dra.NodePrepareResourceResponse:
    if outcome.error:
        return dra.NodePrepareResourceResponse(error=outcome.error)
    return dra.NodePrepareResourceResponse(devices=[_device(d) for d in outcome.devices])


class DraService(dra_grpc.DRAPluginServicer):
    def __init__(self, driver: DraDriver, metrics: PluginMetrics | None = None) -> None:
        self.driver = driver
        self.metrics = metrics

    def _count(self, call: str, outcomes: dict[str, Outcome]) -> None:
        if self.metrics is not None:
            for outcome in outcomes.values():
                self.metrics.dra_claims.labels(call, "refused" if outcome.error else "ok").inc()

    async def NodePrepareResources(
        self, request: dra.NodePrepareResourcesRequest, context: Ctx
    ) -> dra.NodePrepareResourcesResponse:
        refs, refused = await _refs(request.claims, context)
        outcomes = refused | await self.driver.prepare(refs)
        self._count("prepare", outcomes)
        return dra.NodePrepareResourcesResponse(claims={uid: _prepared(o) for uid, o in outcomes.items()})

    async def NodeUnprepareResources(
        self, request: dra.NodeUnprepareResourcesRequest, context: Ctx
    ) -> dra.NodeUnprepareResourcesResponse:
        refs, refused = await _refs(request.claims, context)
        outcomes = refused | await self.driver.unprepare(refs)
        self._count("unprepare", outcomes)
        return dra.NodeUnprepareResourcesResponse(
            claims={uid: dra.NodeUnprepareResourceResponse(error=o.error) for uid, o in outcomes.items()}
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
            supported_versions=[DRA_V1BETA1_SERVICE_NAME],
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
    ) -> None:
        self.socket_path = plugins_dir / DRIVER / DRA_SOCKET
        self.registration_path = registry_dir / REGISTRATION_SOCKET
        self.registration = RegistrationService(self.socket_path, on_registered)
        self._service = DraService(driver, metrics)
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
        dra_grpc.add_DRAPluginServicer_to_server(self._service, service)
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
        for server, path in reversed(self._servers):
            _clear(path)
            await server.stop(grace=1.0)
        self._servers.clear()
