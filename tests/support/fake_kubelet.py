"""A fake kubelet for in-process tests (grpc.aio): the Registration service, the device manager's
client of every plugin that registers, and the PodResources API.

It behaves like the v1.32 device manager where a plugin can tell the difference (contract section 1):
- `start()` deletes the sockets in the plugin dir, then binds `kubelet.sock` and only listens
  `listen_delay` later, so a plugin that dials on the file event is refused at first;
- `Register` validates the version and the resource name (an error status otherwise), dials the
  plugin's endpoint and calls GetDevicePluginOptions before it answers, then reads ListAndWatch;
- a second registration of a resource whose previous stream from the same kubelet instance is
  still open is dropped (the plugin is told nothing), and the resource shows 0 allocatable;
- capacity counts every reported device, allocatable only Healthy ones, and none while the
  plugin's stream is closed or after a restart until it registers again.

Everything runs in the caller's event loop; `stop()` leaves no task, channel or server behind.
Unix socket paths are limited to 107 bytes: keep the plugin dir short (`short_tmp_dir()`).
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import os
import re
import shutil
import socket
import stat
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Coroutine, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import grpc
from ascend_common.adapters.kubelet import constants
from ascend_common.adapters.kubelet import deviceplugin_pb2 as dp
from ascend_common.adapters.kubelet import deviceplugin_pb2_grpc as dp_grpc
from ascend_common.adapters.kubelet import podresources_pb2 as pr
from ascend_common.adapters.kubelet import podresources_pb2_grpc as pr_grpc

from tests.support.waiting import WAIT_S, until

T = TypeVar("T")

CHECKPOINT = "kubelet_internal_checkpoint"  # the one file the real kubelet keeps across restarts
MAX_UNIX_PATH = 107
# The kubelet dials a registering plugin with a blocking 10 s dial.
DIAL_TIMEOUT_S = 10.0
# A plugin endpoint that is not there yet is retried quickly, not with gRPC's 1 s default backoff,
# so that a slow test means a slow plugin, not a slow fake.
_DIAL_OPTIONS = [
    ("grpc.initial_reconnect_backoff_ms", 20),
    ("grpc.min_reconnect_backoff_ms", 20),
    ("grpc.max_reconnect_backoff_ms", 200),
]
_UNSUPPORTED_VERSION = "requested API version {!r} is not supported by kubelet. Supported versions are [{!r}]"
_INVALID_RESOURCE = "the ResourceName {!r} is invalid"
_QUALIFIED_NAME = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")
_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
POLL_S = 0.01  # waits re-check this often: reading the fake's own state is cheap

# (namespace, pod, container, resource name, device ids) as given to set_pod_resources()
PodResourceEntry = tuple[str, str, str, str, Sequence[str]]


class Outcome(enum.StrEnum):
    ACCEPTED = "accepted"
    DROPPED = "dropped"  # valid, but the resource's previous stream was open: the kubelet kept that one
    REJECTED = "rejected"  # bad version or resource name: the plugin got an error
    FAILED = "failed"  # endpoint not reachable or GetDevicePluginOptions failed: the plugin got an error


@dataclass(frozen=True)
class Registration:
    instance: int
    resource_name: str
    endpoint: str
    version: str
    options: dp.DevicePluginOptions
    at: float  # time.monotonic() when the Register call arrived
    outcome: Outcome
    error: str | None = None


@dataclass(frozen=True)
class StreamMessage:
    """One ListAndWatch response as the kubelet received it."""

    instance: int
    resource_name: str
    at: float  # time.monotonic() at receipt
    devices: dict[str, str]  # id -> health
    response: dp.ListAndWatchResponse

    @property
    def healthy(self) -> set[str]:
        return {i for i, h in self.devices.items() if h == constants.HEALTHY}

    @property
    def unhealthy(self) -> set[str]:
        return {i for i, h in self.devices.items() if h != constants.HEALTHY}


@dataclass
class _Connection:
    """The device manager's client of one accepted registration."""

    registration: Registration
    channel: Any  # grpc.aio.Channel
    stub: Any  # DevicePluginStub on an aio channel
    options: dp.DevicePluginOptions | None = None
    devices: dict[str, str] = field(default_factory=dict)
    # "open" from the moment the registration is taken until the ListAndWatch stream ends: the
    # kubelet holds the client (and would drop a newer one) for all that time.
    open: bool = True
    closed: asyncio.Event = field(default_factory=asyncio.Event)
    end: str | None = None
    task: asyncio.Task[None] | None = None

    @property
    def instance(self) -> int:
        return self.registration.instance

    def mark_closed(self, why: str) -> None:
        if self.open:
            self.open = False
            self.end = why
            self.closed.set()

    async def close(self) -> None:
        if self.task is not None and not self.task.done():
            self.task.cancel()
            with contextlib.suppress(asyncio.CancelledError, TimeoutError):
                async with asyncio.timeout(5):
                    await self.task
        self.mark_closed("closed by the kubelet")
        await self.channel.close(None)


def is_extended_resource_name(name: str) -> bool:
    """v1helper.IsExtendedResourceName: `domain/name`, outside kubernetes.io, that is still a qualified
    name once prefixed with `requests.` (how the kubelet validates a plugin's resource name)."""
    if "/" not in name or "kubernetes.io/" in name or name.startswith("requests."):
        return False
    prefix, _, short = f"requests.{name}".partition("/")
    return (
        len(prefix) <= 253
        and bool(_DNS_SUBDOMAIN.match(prefix))
        and 0 < len(short) <= 63
        and bool(_QUALIFIED_NAME.match(short))
    )


@contextlib.contextmanager
def short_tmp_dir(prefix: str = "fk-") -> Iterator[Path]:
    """A fresh directory with a path short enough for unix sockets (pytest's tmp_path can exceed 107 bytes)."""
    path = Path(tempfile.mkdtemp(prefix=prefix, dir="/tmp"))
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def remove_sockets(directory: Path) -> list[str]:
    """What the kubelet does to its plugin dir on start: every socket goes (the checkpoint stays)."""
    removed = []
    with contextlib.suppress(FileNotFoundError):
        for entry in os.scandir(directory):
            if entry.name == CHECKPOINT:
                continue
            with contextlib.suppress(FileNotFoundError):
                if stat.S_ISSOCK(entry.stat(follow_symlinks=False).st_mode):
                    os.unlink(entry.path)
                    removed.append(entry.name)
    return removed


class _RegistrationServicer(dp_grpc.RegistrationServicer):
    def __init__(self, kubelet: FakeKubelet) -> None:
        self._kubelet = kubelet

    async def Register(self, request: dp.RegisterRequest, context: Any) -> dp.Empty:
        return await self._kubelet._register(request, context)


class _PodResourcesServicer(pr_grpc.PodResourcesListerServicer):
    def __init__(self, kubelet: FakeKubelet) -> None:
        self._kubelet = kubelet

    async def List(self, request: pr.ListPodResourcesRequest, context: Any) -> pr.ListPodResourcesResponse:
        self._kubelet.podresources_calls += 1
        out = pr.ListPodResourcesResponse()
        out.CopyFrom(self._kubelet._pod_resources)
        return out

    async def GetAllocatableResources(
        self, request: pr.AllocatableResourcesRequest, context: Any
    ) -> pr.AllocatableResourcesResponse:
        self._kubelet.podresources_calls += 1
        kl = self._kubelet
        devices = [
            pr.ContainerDevices(resource_name=resource, device_ids=sorted(kl.healthy_ids(resource)))
            for resource in sorted(kl._connections)
            if kl.allocatable(resource)
        ]
        return pr.AllocatableResourcesResponse(devices=devices)


class FakeKubelet:
    """See the module docstring. Attributes tests read:

    instance              1 after the first start(), +1 per start()/restart()
    listening             kubelet.sock accepts connections (False between bind and listen)
    registrations         every Register call that got an answer, in the order answered
    registration_counts   Counter of Register calls per (instance, resource name)
    streams               resource -> every ListAndWatch message, all instances
    podresources_calls    how many PodResources calls were served
    """

    def __init__(
        self,
        plugin_dir: Path,
        podresources_dir: Path | None = None,
        *,
        listen_delay: float = 0.05,
        dial_timeout: float = DIAL_TIMEOUT_S,
        call_timeout: float = 10.0,
        stream_close_grace: float = 0.2,
    ) -> None:
        self.plugin_dir = Path(plugin_dir)
        self.podresources_dir = Path(podresources_dir) if podresources_dir is not None else None
        self.socket_path = self.plugin_dir / constants.KUBELET_SOCKET
        self.podresources_socket = (
            self.podresources_dir / constants.KUBELET_SOCKET if self.podresources_dir is not None else None
        )
        for path in (self.socket_path, self.podresources_socket):
            if path is not None and len(os.fsencode(path)) > MAX_UNIX_PATH - 40:
                # 40 bytes of head room for the plugins' endpoint names (Ascend910-10c.3cpu.16g.ndvpp.sock).
                raise ValueError(f"{path} is too long for unix sockets with plugin endpoints: use short_tmp_dir()")
        self.listen_delay = listen_delay
        self.dial_timeout = dial_timeout
        self.call_timeout = call_timeout
        # A plugin that stopped its old server just before registering again has closed the old
        # stream already; give the close that long to reach us before calling it a double registration.
        self.stream_close_grace = stream_close_grace

        self.instance = 0
        self.listening = False  # kubelet.sock accepts connections (it is bound earlier)
        self.registrations: list[Registration] = []
        self.registration_counts: Counter[tuple[int, str]] = Counter()
        self.streams: dict[str, list[StreamMessage]] = {}
        self.podresources_calls = 0
        self.removed_sockets: list[list[str]] = []  # per start(): what it deleted

        self._connections: dict[str, _Connection] = {}  # resource -> the client the kubelet holds
        self._last_outcome: dict[tuple[int, str], Outcome] = {}
        self._pod_resources = pr.ListPodResourcesResponse()
        self._running = False
        self._tasks: set[asyncio.Task[Any]] = set()
        self._private_dir: Path | None = None
        self._server: Any = None  # grpc.aio.Server behind the proxy
        self._podresources_server: Any = None
        self._listen_sock: socket.socket | None = None
        self._proxy: asyncio.Server | None = None

    # ---- lifecycle -------------------------------------------------------------------------

    async def start(self, *, clean: bool = True, listen_delay: float | None = None) -> None:
        """Start a kubelet instance: delete stale sockets (unless clean=False), bind kubelet.sock, listen later."""
        if self._running:
            raise RuntimeError("the fake kubelet is already running")
        self.plugin_dir.mkdir(parents=True, exist_ok=True)
        self.removed_sockets.append(remove_sockets(self.plugin_dir) if clean else [])
        self.instance += 1
        self._running = True
        try:
            # The gRPC server listens on a private socket; kubelet.sock is a plain socket that we
            # bind now and listen on later, proxying to it. That reproduces the real kubelet's
            # order (file event at bind(), connections refused until listen()) with one inode and
            # one create event, which gRPC's own bind-and-listen cannot.
            self._private_dir = Path(tempfile.mkdtemp(prefix="fkp-", dir="/tmp"))
            internal = self._private_dir / "registration.sock"
            self._server = grpc.aio.server()
            dp_grpc.add_RegistrationServicer_to_server(_RegistrationServicer(self), self._server)
            self._server.add_insecure_port(f"unix://{internal}")
            await self._server.start()
            if self.podresources_socket is not None:
                self.podresources_socket.parent.mkdir(parents=True, exist_ok=True)
                with contextlib.suppress(FileNotFoundError):
                    self.podresources_socket.unlink()
                self._podresources_server = grpc.aio.server()
                pr_grpc.add_PodResourcesListerServicer_to_server(_PodResourcesServicer(self), self._podresources_server)
                self._podresources_server.add_insecure_port(f"unix://{self.podresources_socket}")
                await self._podresources_server.start()

            with contextlib.suppress(FileNotFoundError):
                self.socket_path.unlink()  # clean=False may have kept the previous instance's socket
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            self._listen_sock = sock
            sock.bind(str(self.socket_path))
            sock.setblocking(False)
            delay = self.listen_delay if listen_delay is None else listen_delay
            if delay > 0:
                await asyncio.sleep(delay)

            async def proxy(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
                await self._proxy_connection(reader, writer, internal)

            self._proxy = await asyncio.start_unix_server(proxy, sock=sock)
            self._listen_sock = None  # owned by the asyncio server now
            self.listening = True
        except BaseException:
            await self.stop()
            raise

    async def stop(self) -> None:
        """Stop this instance like a killed kubelet: connections to plugins drop, kubelet.sock stays."""
        if not self._running:
            return
        self._running = False
        self.listening = False
        if self._proxy is not None:
            self._proxy.close()
        if self._listen_sock is not None:
            self._listen_sock.close()
            self._listen_sock = None
        await self._cancel_tasks()
        if self._proxy is not None:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(5):
                    await self._proxy.wait_closed()
            self._proxy = None
        for server in (self._server, self._podresources_server):
            if server is not None:
                await server.stop(None)
        self._server = self._podresources_server = None
        for conn in list(self._connections.values()):
            await conn.close()
        await self._cancel_tasks()  # anything a cancelled Register handler spawned on its way out
        if self._private_dir is not None:
            shutil.rmtree(self._private_dir, ignore_errors=True)
            self._private_dir = None

    async def restart(self, *, listen_delay: float | None = None) -> None:
        """A kubelet restart: stop, delete every socket in the plugin dir, re-create kubelet.sock."""
        await self.stop()
        await self.start(clean=True, listen_delay=listen_delay)

    async def __aenter__(self) -> FakeKubelet:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    @property
    def running(self) -> bool:
        return self._running

    def running_tasks(self) -> int:
        return sum(not t.done() for t in self._tasks)

    # ---- what the kubelet sees ---------------------------------------------------------------

    @property
    def dropped_registrations(self) -> list[Registration]:
        return [r for r in self.registrations if r.outcome is Outcome.DROPPED]

    def registration_count(self, resource: str, instance: int | None = None) -> int:
        """Register calls for `resource` in `instance` (default: the current one), whatever their outcome."""
        return self.registration_counts[(self.instance if instance is None else instance, resource)]

    def devices(self, resource: str) -> dict[str, str]:
        """The latest device list the kubelet got for `resource` (any instance): id -> health."""
        messages = self.streams.get(resource)
        return dict(messages[-1].devices) if messages else {}

    def connected(self, resource: str) -> bool:
        """The kubelet holds an open ListAndWatch stream of `resource` in the current instance."""
        conn = self._connections.get(resource)
        return conn is not None and conn.open and conn.instance == self.instance and self._running

    def capacity(self, resource: str) -> int:
        """Node capacity: every device reported, healthy or not (kept after a disconnect, like the kubelet)."""
        return len(self.devices(resource))

    def healthy_ids(self, resource: str) -> set[str]:
        return {i for i, h in self.devices(resource).items() if h == constants.HEALTHY}

    def allocatable(self, resource: str) -> int:
        """Node allocatable: Healthy devices of a connected plugin; 0 after a dropped registration."""
        if not self.connected(resource):
            return 0  # the kubelet marks a disconnected resource's devices unhealthy
        if self._last_outcome.get((self.instance, resource)) is Outcome.DROPPED:
            return 0
        return len(self.healthy_ids(resource))

    def options_of(self, resource: str) -> dp.DevicePluginOptions | None:
        """The options the kubelet fetched when it accepted the current registration."""
        conn = self._connections.get(resource)
        return conn.options if conn is not None else None

    async def wait_for(
        self,
        resource: str,
        predicate: Callable[[StreamMessage], bool] | None = None,
        timeout: float = WAIT_S,
        *,
        after: int = 0,
        instance: int | None = None,
    ) -> StreamMessage:
        """The first ListAndWatch message of `resource` from index `after` on (already received or
        not) that satisfies `predicate`, from `instance` if given; WaitTimedOut after `timeout` s."""

        def check() -> StreamMessage | None:
            for msg in self.streams.get(resource, [])[after:]:
                if (instance is None or msg.instance == instance) and (predicate is None or predicate(msg)):
                    return msg
            return None

        def describe() -> str:
            seen = self.streams.get(resource, [])
            last = seen[-1].devices if seen else None
            return f"a ListAndWatch message of {resource} to match ({len(seen)} seen, last {last})"

        return await until(check, timeout, describe, interval=POLL_S)

    async def wait_registered(
        self,
        resource: str,
        timeout: float = WAIT_S,
        *,
        instance: int | None = None,
    ) -> Registration:
        """The accepted registration of `resource` in `instance` (default: the current one)."""

        def check() -> Registration | None:
            want = self.instance if instance is None else instance
            for reg in self.registrations:
                if reg.resource_name == resource and reg.instance == want and reg.outcome is Outcome.ACCEPTED:
                    return reg
            return None

        return await until(check, timeout, f"{resource} to register", interval=POLL_S)

    # ---- calls the kubelet makes -------------------------------------------------------------

    async def options(self, resource: str) -> dp.DevicePluginOptions:
        result: dp.DevicePluginOptions = await self._call(resource, "GetDevicePluginOptions", dp.Empty())
        return result

    async def allocate(self, resource: str, containers: Sequence[Sequence[str]]) -> dp.AllocateResponse:
        """Allocate with one ContainerAllocateRequest per list of ids, as the kubelet does per pod."""
        request = dp.AllocateRequest(
            container_requests=[dp.ContainerAllocateRequest(devices_ids=list(ids)) for ids in containers]
        )
        result: dp.AllocateResponse = await self._call(resource, "Allocate", request)
        return result

    async def preferred(
        self, resource: str, available: Sequence[str], must_include: Sequence[str], size: int
    ) -> list[str]:
        """GetPreferredAllocation for one container; returns its preferred device ids."""
        request = dp.PreferredAllocationRequest(
            container_requests=[
                dp.ContainerPreferredAllocationRequest(
                    available_deviceIDs=list(available), must_include_deviceIDs=list(must_include), allocation_size=size
                )
            ]
        )
        response: dp.PreferredAllocationResponse = await self._call(resource, "GetPreferredAllocation", request)
        if len(response.container_responses) != 1:
            raise AssertionError(f"expected one container response, got {len(response.container_responses)}")
        return list(response.container_responses[0].deviceIDs)

    async def pre_start(self, resource: str, ids: Sequence[str]) -> dp.PreStartContainerResponse:
        request = dp.PreStartContainerRequest(devices_ids=list(ids))
        result: dp.PreStartContainerResponse = await self._call(
            resource, "PreStartContainer", request, deadline_s=constants.PRE_START_CONTAINER_TIMEOUT_S
        )
        return result

    # ---- PodResources -----------------------------------------------------------------------

    def set_pod_resources(self, entries: Iterable[PodResourceEntry]) -> None:
        """What List answers from now on: (namespace, pod, container, resource, ids) rows, grouped
        by pod and container in first-seen order. A row with an empty resource adds a container
        without devices."""
        pods: dict[tuple[str, str], dict[str, list[pr.ContainerDevices]]] = {}
        for namespace, pod, container, resource, ids in entries:
            devices = pods.setdefault((namespace, pod), {}).setdefault(container, [])
            if resource:
                devices.append(pr.ContainerDevices(resource_name=resource, device_ids=list(ids)))
        self._pod_resources = pr.ListPodResourcesResponse(
            pod_resources=[
                pr.PodResources(
                    name=pod,
                    namespace=namespace,
                    containers=[pr.ContainerResources(name=c, devices=d) for c, d in containers.items()],
                )
                for (namespace, pod), containers in pods.items()
            ]
        )

    # ---- internals ---------------------------------------------------------------------------

    async def _register(self, request: dp.RegisterRequest, context: Any) -> dp.Empty:
        at = time.monotonic()
        instance = self.instance
        resource = request.resource_name
        key = (instance, resource)
        self.registration_counts[key] += 1

        def registration(outcome: Outcome, error: str | None = None) -> Registration:
            options = dp.DevicePluginOptions()
            options.CopyFrom(request.options)
            return Registration(instance, resource, request.endpoint, request.version, options, at, outcome, error)

        def record(outcome: Outcome, error: str | None = None) -> None:
            self.registrations.append(registration(outcome, error))
            self._last_outcome[key] = outcome

        error = None
        if request.version != constants.VERSION:
            error = _UNSUPPORTED_VERSION.format(request.version, constants.VERSION)
        elif not is_extended_resource_name(resource):
            error = _INVALID_RESOURCE.format(resource)
        elif not request.endpoint or "/" in request.endpoint:
            error = f"invalid endpoint {request.endpoint!r}: a socket file name in the plugin dir"
        if error is not None:
            record(Outcome.REJECTED, error)
            await context.abort(grpc.StatusCode.UNKNOWN, error)

        old = self._connections.get(resource)
        if old is not None and old.open and old.instance == instance:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(self.stream_close_grace):
                    await old.closed.wait()
            if old.open:
                # The real kubelet answers this Register normally; the plugin cannot tell.
                record(Outcome.DROPPED)
                return dp.Empty()

        channel = grpc.aio.insecure_channel(f"unix://{self.plugin_dir / request.endpoint}", options=_DIAL_OPTIONS)
        conn = _Connection(
            registration=registration(Outcome.ACCEPTED), channel=channel, stub=dp_grpc.DevicePluginStub(channel)
        )
        self._connections[resource] = conn  # held from now on: a concurrent Register of it is dropped
        try:
            async with asyncio.timeout(self.dial_timeout):
                await channel.channel_ready()
            async with asyncio.timeout(self.call_timeout):
                conn.options = await conn.stub.GetDevicePluginOptions(dp.Empty())
        except (TimeoutError, grpc.aio.AioRpcError) as exc:
            error = f"failed to dial device plugin {request.endpoint}: {exc!r}"
        except BaseException:
            conn.mark_closed("Register cancelled")
            self._forget(conn)
            await channel.close(None)
            raise
        if error is not None:
            conn.mark_closed(error)
            self._forget(conn)
            await channel.close(None)
            record(Outcome.FAILED, error)
            await context.abort(grpc.StatusCode.UNKNOWN, error)
        conn.task = self._spawn(self._watch(conn))
        record(Outcome.ACCEPTED)
        return dp.Empty()

    def _forget(self, conn: _Connection) -> None:
        if self._connections.get(conn.registration.resource_name) is conn:
            del self._connections[conn.registration.resource_name]

    async def _watch(self, conn: _Connection) -> None:
        resource = conn.registration.resource_name
        try:
            call = conn.stub.ListAndWatch(dp.Empty())
            async for response in call:
                msg = StreamMessage(
                    instance=conn.instance,
                    resource_name=resource,
                    at=time.monotonic(),
                    devices={d.ID: d.health for d in response.devices},
                    response=response,
                )
                conn.devices = msg.devices
                self.streams.setdefault(resource, []).append(msg)
            conn.mark_closed("ListAndWatch ended by the plugin")
        except grpc.aio.AioRpcError as exc:
            conn.mark_closed(f"ListAndWatch failed: {exc.code().name} {exc.details()}")
        finally:
            conn.mark_closed("ListAndWatch cancelled by the kubelet")

    async def _proxy_connection(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, internal: Path
    ) -> None:
        task = asyncio.current_task()
        if task is not None:
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)
        upstream: asyncio.StreamWriter | None = None
        try:
            up_reader, upstream = await asyncio.open_unix_connection(str(internal))
            pumps = [
                asyncio.ensure_future(_pump(reader, upstream)),
                asyncio.ensure_future(_pump(up_reader, writer)),
            ]
            try:
                await asyncio.wait(pumps, return_when=asyncio.FIRST_COMPLETED)
            finally:
                for pump in pumps:
                    pump.cancel()
                await asyncio.gather(*pumps, return_exceptions=True)
        except OSError:
            pass  # the gRPC server is gone: the plugin sees its connection close
        finally:
            for w in (writer, upstream):
                if w is not None:
                    w.close()

    def _spawn(self, coro: Coroutine[Any, Any, T]) -> asyncio.Task[T]:
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    async def _cancel_tasks(self) -> None:
        tasks = [t for t in self._tasks if not t.done()]
        for task in tasks:
            task.cancel()
        if tasks:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(5):
                    await asyncio.gather(*tasks, return_exceptions=True)

    async def _call(self, resource: str, method: str, request: Any, deadline_s: float | None = None) -> Any:
        conn = self._connections.get(resource)
        if conn is None or conn.instance != self.instance or not self._running:
            raise LookupError(f"{resource} is not registered with this kubelet instance")
        return await getattr(conn.stub, method)(
            request, timeout=self.call_timeout if deadline_s is None else deadline_s
        )


async def _pump(src: asyncio.StreamReader, dst: asyncio.StreamWriter) -> None:
    with contextlib.suppress(OSError):
        while data := await src.read(65536):
            dst.write(data)
            await dst.drain()
