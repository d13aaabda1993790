"""Keeps one registration per resource per kubelet instance.

The kubelet deletes the plugin sockets and re-creates `kubelet.sock` when it restarts. We
notice through inotify on the plugin dir (a slow poll of the socket's inode backs it up, or
replaces it where inotify is unavailable), stop each old server before starting it again
(the kubelet drops a registration made while the old stream is open), and dial the new
kubelet every few tens of milliseconds until it listens (the file exists from bind(),
before listen()).
"""

from __future__ import annotations

import asyncio
import logging
import stat
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import grpc
from ascend_common.adapters.kubelet import deviceplugin_pb2 as pb
from ascend_common.adapters.kubelet import deviceplugin_pb2_grpc as pb_grpc
from ascend_common.adapters.kubelet.constants import KUBELET_SOCKET, VERSION
from ascend_common.chips import RESOURCE_PREFIX
from grpc import aio

from ascend_device_plugin.kubelet.dirwatch import DirWatch
from ascend_device_plugin.kubelet.server import ResourceServer
from ascend_device_plugin.metrics import PluginMetrics

log = logging.getLogger(__name__)
POLL_S = 0.05  # without inotify
BACKUP_POLL_S = 1.0  # with inotify
DIAL_RETRY_S = 0.03
REGISTER_DEADLINE_S = 10.0


class UnsafePath(Exception):
    pass


def check_path(path: Path, require_root: bool, want_dir: bool) -> None:
    """Refuse a symlink, a wrong file type, or (in production) a file not owned by root."""
    st = path.lstat()
    if stat.S_ISLNK(st.st_mode):
        raise UnsafePath(f"{path} is a symlink")
    if want_dir and not stat.S_ISDIR(st.st_mode):
        raise UnsafePath(f"{path} is not a directory")
    if not want_dir and not stat.S_ISSOCK(st.st_mode):
        raise UnsafePath(f"{path} is not a socket")
    if require_root and st.st_uid != 0:
        raise UnsafePath(f"{path} is owned by uid {st.st_uid}, not root")


def socket_identity(path: Path) -> tuple[int, int] | None:
    try:
        st = path.lstat()
    except FileNotFoundError:
        return None
    return (st.st_ino, st.st_ctime_ns)


@dataclass
class Registrar:
    plugin_dir: Path
    servers: Callable[[], dict[str, ResourceServer]]  # the current servers by resource
    options: Callable[[str], pb.DevicePluginOptions]
    metrics: PluginMetrics
    require_root: bool = True
    kubelet_instance: tuple[int, int] | None = None
    registered: dict[str, tuple[int, int]] = field(default_factory=dict)  # resource -> kubelet instance
    registrations: int = 0
    _lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    _retry_at: dict[str, float] = field(default_factory=dict)  # resource -> loop time of the next try
    _missing_logged: set[str] = field(default_factory=set)
    _dirwatch: DirWatch | None = None
    _task: asyncio.Task[None] | None = None

    @property
    def kubelet_socket(self) -> Path:
        return self.plugin_dir / KUBELET_SOCKET

    def all_registered(self) -> bool:
        current = self.kubelet_instance
        return current is not None and all(self.registered.get(r) == current for r in self.servers())

    async def start(self) -> None:
        check_path(self.plugin_dir, self.require_root, want_dir=True)
        # Sockets only: the kubelet's and ours (a vanished one is logged); not its checkpoint.
        self._dirwatch = DirWatch(self.plugin_dir, wanted=lambda name: name.endswith(".sock"))
        self._dirwatch.start()
        self._task = asyncio.create_task(self._watch(), name="kubelet-watch")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
        if self._dirwatch is not None:
            self._dirwatch.stop()

    async def _watch(self) -> None:
        assert self._dirwatch is not None
        while True:
            try:
                await self.sync()
            except Exception:  # keep watching whatever one round did
                log.exception("registration round failed")
            await self._dirwatch.wait(BACKUP_POLL_S if self._dirwatch.active else POLL_S)

    async def sync(self) -> None:
        """One round: restart and register whatever needs it for the current kubelet."""
        async with self._lock:
            instance = socket_identity(self.kubelet_socket)
            if instance is None:
                return  # no kubelet: keep serving; it will re-create its socket
            if instance != self.kubelet_instance:
                check_path(self.kubelet_socket, self.require_root, want_dir=False)
                log.info("kubelet socket (re)created", extra={"inode": instance[0]})
                self.kubelet_instance = instance
            for resource, server in sorted(self.servers().items()):
                if self.registered.get(resource) == instance:
                    # Registered with this kubelet. A vanished socket alone is not a reason to
                    # register again (twice per kubelet instance leaks a client in the kubelet):
                    # the kubelet deletes our sockets when it restarts, and then its own socket
                    # is re-created, which is what starts the next registration.
                    if not server.socket_present() and resource not in self._missing_logged:
                        self._missing_logged.add(resource)
                        log.warning(
                            "plugin socket vanished; waiting for a kubelet restart", extra={"resource": resource}
                        )
                    continue
                self._missing_logged.discard(resource)
                if asyncio.get_running_loop().time() < self._retry_at.get(resource, 0.0):
                    continue
                # This kubelet has not seen this resource: restart the server (the kubelet
                # dropped the old one's socket when it restarted), then register it once.
                await server.stop()
                await server.start()
                if await self._register(resource, server, instance):
                    self.registered[resource] = instance
                    self._retry_at.pop(resource, None)
                else:
                    self._retry_at[resource] = asyncio.get_running_loop().time() + 1.0

    async def _register(self, resource: str, server: ResourceServer, instance: tuple[int, int]) -> bool:
        request = pb.RegisterRequest(
            version=VERSION,
            endpoint=server.endpoint,
            resource_name=RESOURCE_PREFIX + resource,
            options=self.options(resource),
        )
        loop = asyncio.get_running_loop()
        deadline = loop.time() + REGISTER_DEADLINE_S
        while loop.time() < deadline:
            if socket_identity(self.kubelet_socket) != instance:
                return False  # the kubelet restarted again meanwhile: the next round handles it
            try:
                async with aio.insecure_channel(f"unix://{self.kubelet_socket}") as channel:
                    await pb_grpc.RegistrationStub(channel).Register(request, timeout=1.0)
            except grpc.aio.AioRpcError as exc:
                if exc.code() in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED):
                    await asyncio.sleep(DIAL_RETRY_S)
                    continue
                log.error("kubelet refused the registration", extra={"resource": resource, "error": exc.details()})
                return False
            self.registrations += 1
            self.metrics.registrations.labels(resource).inc()
            log.info("registered with the kubelet", extra={"resource": RESOURCE_PREFIX + resource})
            return True
        log.error("kubelet did not answer the registration", extra={"resource": resource})
        return False

    async def shutdown(self) -> None:
        await self.stop()
        for server in self.servers().values():
            await server.stop()
