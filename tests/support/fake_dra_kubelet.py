"""A fake kubelet for DRA drivers (grpc.aio): the plugin watcher's registration and the DRA manager's calls.

It behaves like the v1.32 kubelet (pkg/kubelet/pluginmanager and pkg/kubelet/cm/dra, vendored with
kubeedge) where a driver can tell the difference:
- the plugin watcher scans `plugins_registry/` at start and then sees new sockets (a name starting
  with "." is skipped); for each it dials the socket, asks GetInfo within 1 s, looks the type up
  (only "DRAPlugin" has a handler here), takes an empty endpoint as the registration socket
  itself, validates the supported services (an empty list is refused), picks "v1beta1.DRAPlugin"
  if listed, else falls back to "v1alpha4.Node" (which this fake, like our driver, cannot call),
  registers the driver (a second registration replaces the first) and only then tells the plugin
  through NotifyRegistrationStatus; a refusal is told as well, with the kubelet's message;
- a socket that goes away deregisters its driver, and the kubelet wipes the driver's ResourceSlices
  of its node (`on_deregister` here, since the fake has no clientset of its own); a kubelet that
  starts wipes every ResourceSlice of its node before any driver registers (`on_start`);
- NodePrepareResources / NodeUnprepareResources go to the registered endpoint with the 45 s call
  timeout; an answer for a claim uid that was not asked, or one that leaves a claim out, is an
  error of the whole call (`DraCallError`), as in manager.go; a claim's own error is returned per
  claim (manager.go then fails the pod's preparation with "NodePrepareResources failed for claim
  <ns>/<name>: <error>", which `PrepareResult.raise_for_errors` reproduces).

Everything runs in the caller's event loop; `stop()` leaves no task, channel or server behind.
"""

from __future__ import annotations

import asyncio
import contextlib
import stat
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import grpc
from ascend_common.adapters.kubelet import constants
from ascend_common.adapters.kubelet import dra_pb2 as dra
from ascend_common.adapters.kubelet import dra_pb2_grpc as dra_grpc
from ascend_common.adapters.kubelet import pluginregistration_pb2 as reg
from ascend_common.adapters.kubelet import pluginregistration_pb2_grpc as reg_grpc

GET_INFO_TIMEOUT_S = 1.0  # operation_generator.go: context.WithTimeout(..., time.Second)
NOTIFY_TIMEOUT_S = 10.0  # notifyTimeoutDuration
DIAL_TIMEOUT_S = 10.0  # dialTimeoutDuration
V1ALPHA4_SERVICE = "v1alpha4.Node"
SCAN_S = 0.02  # the real watcher uses fsnotify; a fast poll stands in for it


class DraCallError(Exception):
    """The whole call failed, as the DRA manager would report it."""


@dataclass(frozen=True)
class Registered:
    name: str
    endpoint: str
    service: str  # the chosen gRPC service, e.g. "v1beta1.DRAPlugin"
    socket: Path  # the registration socket


@dataclass
class PrepareResult:
    devices: dict[str, list[dra.Device]] = field(default_factory=dict)  # by claim uid
    errors: dict[str, str] = field(default_factory=dict)  # by claim uid

    def raise_for_errors(self, claims: Sequence[dra.Claim]) -> None:
        for claim in claims:
            if claim.uid in self.errors:
                raise DraCallError(
                    f"NodePrepareResources failed for claim {claim.namespace}/{claim.name}: {self.errors[claim.uid]}"
                )


class FakeDraKubelet:
    def __init__(
        self,
        root: Path,
        *,
        on_deregister: Callable[[str], None] = lambda name: None,
        on_start: Callable[[], None] = lambda: None,
    ) -> None:
        self.registry_dir = root / "plugins_registry"
        self.plugins_dir = root / "plugins"
        self.plugins: dict[str, Registered] = {}
        self.refusals: list[str] = []  # what the watcher told plugins it refused
        self.calls: list[tuple[str, list[str]]] = []  # (method, claim uids), in order
        self.deregistered: list[str] = []  # drivers whose ResourceSlices the kubelet would wipe
        self._on_deregister = on_deregister
        self._on_start = on_start  # NewRegistrationHandler wipes every slice of the node when the kubelet starts
        self._seen: dict[Path, tuple[int, int]] = {}
        self._task: asyncio.Task[None] | None = None
        self._channels: dict[str, grpc.aio.Channel] = {}

    async def start(self) -> None:
        self.registry_dir.mkdir(parents=True, exist_ok=True)
        self.plugins_dir.mkdir(parents=True, exist_ok=True)
        self._on_start()
        await self._scan()  # traversePluginDir
        self._task = asyncio.create_task(self._watch(), name="fake-dra-plugin-watcher")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
        for channel in self._channels.values():
            await channel.close()
        self._channels.clear()

    async def restart(self) -> None:
        """A kubelet restart: it forgets every driver, then finds the sockets in the registry dir again."""
        await self.stop()
        self.plugins.clear()
        self._seen.clear()
        await self.start()

    # ---- the plugin watcher ------------------------------------------------------------------

    async def _watch(self) -> None:
        while True:
            await asyncio.sleep(SCAN_S)
            await self._scan()

    async def _scan(self) -> None:
        present: dict[Path, tuple[int, int]] = {}
        for path in sorted(self.registry_dir.iterdir()):
            if path.name.startswith("."):
                continue
            try:
                st = path.lstat()
            except FileNotFoundError:
                continue
            if stat.S_ISSOCK(st.st_mode):
                present[path] = (st.st_ino, st.st_ctime_ns)
        for path in [p for p in self._seen if p not in present]:
            del self._seen[path]
            self._deregister(path)
        for path, identity in present.items():
            if self._seen.get(path) == identity:
                continue
            self._seen[path] = identity
            with contextlib.suppress(grpc.aio.AioRpcError, TimeoutError, DraCallError):
                await self._register(path)

    def _deregister(self, socket: Path) -> None:
        for name, plugin in list(self.plugins.items()):
            if plugin.socket == socket:
                del self.plugins[name]
                channel = self._channels.pop(name, None)
                if channel is not None:
                    asyncio.get_running_loop().create_task(channel.close())
                self.deregistered.append(name)
                self._on_deregister(name)

    async def _register(self, socket: Path) -> None:
        async with grpc.aio.insecure_channel(f"unix://{socket}") as channel:
            async with asyncio.timeout(DIAL_TIMEOUT_S):
                await channel.channel_ready()
            client = reg_grpc.RegistrationStub(channel)
            info = await client.GetInfo(reg.InfoRequest(), timeout=GET_INFO_TIMEOUT_S)
            if info.type != constants.DRA_PLUGIN_TYPE:
                await self._refuse(
                    client,
                    f"RegisterPlugin error -- no handler registered for plugin type: {info.type} at socket {socket}",
                )
            endpoint = info.endpoint or str(socket)
            if not info.supported_versions:
                await self._refuse(
                    client,
                    "RegisterPlugin error -- plugin validation failed with err: invalid versions of plugin "
                    f"{info.name}: empty list of supported gRPC services (aka supported versions)",
                )
            service = (
                constants.DRA_V1BETA1_SERVICE_NAME
                if constants.DRA_V1BETA1_SERVICE_NAME in info.supported_versions
                else V1ALPHA4_SERVICE
            )
            old = self._channels.pop(info.name, None)
            if old is not None:
                await old.close()
            self.plugins[info.name] = Registered(info.name, endpoint, service, socket)
            registered = reg.RegistrationStatus(plugin_registered=True)
            await client.NotifyRegistrationStatus(registered, timeout=NOTIFY_TIMEOUT_S)

    async def _refuse(self, client: reg_grpc.RegistrationAsyncStub, error: str) -> None:
        self.refusals.append(error)
        await client.NotifyRegistrationStatus(
            reg.RegistrationStatus(plugin_registered=False, error=error), timeout=NOTIFY_TIMEOUT_S
        )
        raise DraCallError(error)

    # ---- the DRA manager's calls -------------------------------------------------------------

    def _stub(self, driver: str) -> dra_grpc.DRAPluginAsyncStub:
        plugin = self.plugins.get(driver)
        if plugin is None:
            raise DraCallError(f"plugin name {driver} not found in the list of registered DRA plugins")
        if plugin.service != constants.DRA_V1BETA1_SERVICE_NAME:
            raise DraCallError(f"internal error: unsupported chosen service: {plugin.service!r}")
        channel = self._channels.get(driver)
        if channel is None:
            channel = self._channels[driver] = grpc.aio.insecure_channel(f"unix://{plugin.endpoint}")
        return dra_grpc.DRAPluginStub(channel)

    async def prepare(self, driver: str, claims: Sequence[dra.Claim]) -> PrepareResult:
        self.calls.append(("NodePrepareResources", [c.uid for c in claims]))
        response = await self._stub(driver).NodePrepareResources(
            dra.NodePrepareResourcesRequest(claims=claims), timeout=constants.DRA_CALL_TIMEOUT_S
        )
        result = PrepareResult()
        asked = {c.uid for c in claims}
        for uid, answer in response.claims.items():
            if uid not in asked:
                raise DraCallError(f"NodePrepareResources returned result for unknown claim UID {uid}")
            if answer.error:
                result.errors[uid] = answer.error
            else:
                result.devices[uid] = list(answer.devices)
        if len(claims) - len(response.claims):
            raise DraCallError(f"NodePrepareResources left out {len(claims) - len(response.claims)} claims")
        return result

    async def unprepare(self, driver: str, claims: Sequence[dra.Claim]) -> dict[str, str]:
        """The per-claim errors (none: every claim unprepared)."""
        self.calls.append(("NodeUnprepareResources", [c.uid for c in claims]))
        response = await self._stub(driver).NodeUnprepareResources(
            dra.NodeUnprepareResourcesRequest(claims=claims), timeout=constants.DRA_CALL_TIMEOUT_S
        )
        asked = {c.uid for c in claims}
        errors = {}
        for uid, answer in response.claims.items():
            if uid not in asked:
                raise DraCallError(f"NodeUnprepareResources returned result for unknown claim UID {uid}")
            if answer.error:
                errors[uid] = answer.error
        if len(claims) - len(response.claims):
            raise DraCallError(f"NodeUnprepareResources left out {len(claims) - len(response.claims)} claims")
        return errors
