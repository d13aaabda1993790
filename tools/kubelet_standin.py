# grpcio ships no type information; with types-grpcio installed this line disables nothing.
# mypy: disable-error-code="import-untyped"
"""Kubelet stand-in for local mode: shows what the kubelet would see of the device plugin.

    python -m tools.kubelet_standin --plugin-dir D [--podresources-dir P]

Serves the kubelet's Registration service on D/kubelet.sock (after deleting the stale sockets in
D, as the kubelet does on start), connects to every plugin that registers, and prints one line per
ListAndWatch update:

    huawei.com/Ascend910: 8 devices, 7 Healthy; Unhealthy: Ascend910-3

With --podresources-dir it also serves an empty PodResources API on P/kubelet.sock (no pods run in
local mode). Registrations, dropped registrations and disconnects are logged to stderr. SIGINT or
SIGTERM stops it and removes its sockets. A development tool: no service imports it.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import os
import re
import signal
import stat
import sys
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import grpc
from ascend_common.adapters.kubelet import constants
from ascend_common.adapters.kubelet import deviceplugin_pb2 as dp
from ascend_common.adapters.kubelet import deviceplugin_pb2_grpc as dp_grpc
from ascend_common.adapters.kubelet import podresources_pb2 as pr
from ascend_common.adapters.kubelet import podresources_pb2_grpc as pr_grpc

log = logging.getLogger("kubelet-standin")

CHECKPOINT = "kubelet_internal_checkpoint"
DIAL_TIMEOUT_S = 10.0  # the kubelet's blocking dial of a registering plugin
CALL_TIMEOUT_S = 10.0
_DIAL_OPTIONS = [("grpc.initial_reconnect_backoff_ms", 20), ("grpc.max_reconnect_backoff_ms", 200)]


def _natural_key(device_id: str) -> list[Any]:
    # Ascend910-2 before Ascend910-10.
    return [int(part) if part.isdigit() else part for part in re.split(r"(\d+)", device_id)]


def format_update(resource: str, devices: Iterable[dp.Device]) -> str:
    """One line per ListAndWatch update; anything but "Healthy" counts as unhealthy, as in the kubelet."""
    devices = list(devices)
    unhealthy = sorted((d.ID for d in devices if d.health != constants.HEALTHY), key=_natural_key)
    line = f"{resource}: {len(devices)} devices, {len(devices) - len(unhealthy)} Healthy"
    if unhealthy:
        line += f"; Unhealthy: {', '.join(unhealthy)}"
    return line


def remove_stale_sockets(directory: Path) -> None:
    """The kubelet deletes the sockets in its plugin dir on start: plugins take that as a cue to re-register."""
    with contextlib.suppress(FileNotFoundError), os.scandir(directory) as entries:
        for entry in entries:
            if entry.name == CHECKPOINT:
                continue
            with contextlib.suppress(FileNotFoundError):
                if stat.S_ISSOCK(entry.stat(follow_symlinks=False).st_mode):
                    os.unlink(entry.path)


@dataclass
class _Plugin:
    resource: str
    endpoint: str
    channel: Any  # grpc.aio.Channel
    open: bool = True
    closed: asyncio.Event = field(default_factory=asyncio.Event)
    task: asyncio.Task[None] | None = None

    def mark_closed(self) -> None:
        self.open = False
        self.closed.set()


class KubeletStandin(dp_grpc.RegistrationServicer, pr_grpc.PodResourcesListerServicer):
    def __init__(
        self, plugin_dir: Path, on_update: Callable[[str], object], podresources_dir: Path | None = None
    ) -> None:
        self.plugin_dir = plugin_dir
        self.socket_path = plugin_dir / constants.KUBELET_SOCKET
        self.podresources_socket = podresources_dir / constants.KUBELET_SOCKET if podresources_dir else None
        self.on_update = on_update
        self._plugins: dict[str, _Plugin] = {}
        self._latest: dict[str, list[dp.Device]] = {}
        self._servers: list[Any] = []

    async def start(self) -> None:
        self.plugin_dir.mkdir(parents=True, exist_ok=True)
        remove_stale_sockets(self.plugin_dir)
        server = grpc.aio.server()
        dp_grpc.add_RegistrationServicer_to_server(self, server)
        server.add_insecure_port(f"unix://{self.socket_path}")
        self._servers.append(server)
        if self.podresources_socket is not None:
            self.podresources_socket.parent.mkdir(parents=True, exist_ok=True)
            pr_server = grpc.aio.server()
            pr_grpc.add_PodResourcesListerServicer_to_server(self, pr_server)
            pr_server.add_insecure_port(f"unix://{self.podresources_socket}")
            self._servers.append(pr_server)
        for s in self._servers:
            await s.start()
        log.info("kubelet stand-in serving Registration on %s", self.socket_path)

    async def stop(self) -> None:
        for s in self._servers:
            await s.stop(None)
        self._servers.clear()
        for plugin in list(self._plugins.values()):
            await self._disconnect(plugin)
        # gRPC unlinks its unix sockets on stop; make sure of it, a stale kubelet.sock would
        # invite plugins to register with nobody.
        for path in (self.socket_path, self.podresources_socket):
            if path is not None:
                with contextlib.suppress(FileNotFoundError):
                    path.unlink()

    async def Register(self, request: dp.RegisterRequest, context: Any) -> dp.Empty:
        resource = request.resource_name
        if request.version != constants.VERSION:
            await context.abort(
                grpc.StatusCode.UNKNOWN,
                f"requested API version {request.version!r} is not supported; supported: {constants.VERSION!r}",
            )
        if "/" not in resource or not request.endpoint or "/" in request.endpoint:
            await context.abort(grpc.StatusCode.UNKNOWN, f"invalid registration {resource!r} at {request.endpoint!r}")
        old = self._plugins.get(resource)
        if old is not None and old.open:
            # Mirror the real kubelet, which drops a new server while the old one's stream is
            # open (the resource then shows allocatable 0): local mode should show that bug too.
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(0.2):
                    await old.closed.wait()
            if old.open:
                log.warning(
                    "%s: registration of %s dropped: the stream of %s is still open (the real kubelet would "
                    "show allocatable 0)",
                    resource,
                    request.endpoint,
                    old.endpoint,
                )
                return dp.Empty()
        channel = grpc.aio.insecure_channel(f"unix://{self.plugin_dir / request.endpoint}", options=_DIAL_OPTIONS)
        plugin = _Plugin(resource, request.endpoint, channel)
        self._plugins[resource] = plugin
        stub: Any = dp_grpc.DevicePluginStub(channel)
        try:
            async with asyncio.timeout(DIAL_TIMEOUT_S):
                await channel.channel_ready()
            async with asyncio.timeout(CALL_TIMEOUT_S):
                options: dp.DevicePluginOptions = await stub.GetDevicePluginOptions(dp.Empty())
        except (TimeoutError, grpc.aio.AioRpcError) as exc:
            await self._disconnect(plugin)
            await context.abort(grpc.StatusCode.UNKNOWN, f"failed to dial device plugin {request.endpoint}: {exc!r}")
        except BaseException:
            await self._disconnect(plugin)
            raise
        log.info(
            "%s registered at %s (pre_start_required=%s, get_preferred_allocation_available=%s)",
            resource,
            request.endpoint,
            options.pre_start_required,
            options.get_preferred_allocation_available,
        )
        plugin.task = asyncio.get_running_loop().create_task(self._watch(plugin, stub))
        return dp.Empty()

    async def _watch(self, plugin: _Plugin, stub: Any) -> None:
        why = "stream ended by the plugin"
        try:
            async for response in stub.ListAndWatch(dp.Empty()):
                self._latest[plugin.resource] = list(response.devices)
                self.on_update(format_update(plugin.resource, response.devices))
        except grpc.aio.AioRpcError as exc:
            why = f"{exc.code().name}: {exc.details()}"
        finally:
            plugin.mark_closed()
        log.info("%s disconnected (%s): its devices count as unhealthy until it registers again", plugin.resource, why)

    async def _disconnect(self, plugin: _Plugin) -> None:
        if plugin.task is not None and not plugin.task.done():
            plugin.task.cancel()
            with contextlib.suppress(asyncio.CancelledError, TimeoutError):
                async with asyncio.timeout(5):
                    await plugin.task
        plugin.mark_closed()
        await plugin.channel.close(None)
        if self._plugins.get(plugin.resource) is plugin:
            del self._plugins[plugin.resource]

    async def List(self, request: pr.ListPodResourcesRequest, context: Any) -> pr.ListPodResourcesResponse:
        return pr.ListPodResourcesResponse()  # no pods run in local mode

    async def GetAllocatableResources(
        self, request: pr.AllocatableResourcesRequest, context: Any
    ) -> pr.AllocatableResourcesResponse:
        return pr.AllocatableResourcesResponse(
            devices=[
                pr.ContainerDevices(
                    resource_name=resource,
                    device_ids=[d.ID for d in devices if d.health == constants.HEALTHY],
                )
                for resource, devices in sorted(self._latest.items())
                if resource in self._plugins and self._plugins[resource].open
            ]
        )


async def run(
    plugin_dir: Path,
    on_update: Callable[[str], object] = print,
    stop_event: asyncio.Event | None = None,
    *,
    podresources_dir: Path | None = None,
) -> None:
    """Serve until `stop_event` is set (forever if None, until cancelled); always cleans up."""
    standin = KubeletStandin(Path(plugin_dir), on_update, Path(podresources_dir) if podresources_dir else None)
    await standin.start()
    try:
        await (stop_event or asyncio.Event()).wait()
    finally:
        # Shielded so that a cancelled run() still closes its servers, channels and sockets.
        await asyncio.shield(standin.stop())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.kubelet_standin", description=__doc__.split("\n\n")[0])
    parser.add_argument("--plugin-dir", type=Path, required=True, help="the device-plugin dir (kubelet.sock goes here)")
    parser.add_argument("--podresources-dir", type=Path, help="also serve an empty PodResources API here")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s kubelet-standin %(message)s", stream=sys.stderr)

    async def serve() -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop.set)
        await run(
            args.plugin_dir,
            on_update=lambda line: print(line, flush=True),
            stop_event=stop,
            podresources_dir=args.podresources_dir,
        )

    asyncio.run(serve())
    return 0


if __name__ == "__main__":
    sys.exit(main())
