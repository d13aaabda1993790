"""A fake kubelet for DRA drivers (grpc.aio): the plugin watcher's registration and the DRA manager's calls.

It behaves like the 1.36 kubelet (pkg/kubelet/pluginmanager and pkg/kubelet/cm/dra, read in the
1.36.2 tree microshift vendors, after the v1.32 tree the first version was written from; no
project test builds that code, see docs/dra.md) where a driver can tell the difference:
- the plugin watcher scans `plugins_registry/` at start and then sees new sockets (a name starting
  with "." is skipped); for each it dials the socket, asks GetInfo within 1 s, looks the type up
  (only "DRAPlugin" has a handler here), takes an empty endpoint as the registration socket
  itself, validates the supported services (an empty list is refused) and picks the first of the
  driver's list that it serves (`services`: SERVICES_1_36 = v1 and v1beta1, the default;
  SERVICES_1_32 = v1beta1 only, as 1.32 and 1.33). A 1.36 kubelet refuses a driver that lists
  neither; a 1.32 one fell back to "v1alpha4.Node" (which this fake, like our driver, cannot call).
  It registers the driver (a second registration replaces the first) and only then tells the
  plugin through NotifyRegistrationStatus; a refusal is told as well, with the kubelet's message.
  The real watcher is fsnotify feeding a reconciler that acts once a second (registration came
  0.5-0.8 s after the socket appeared under the harness); `reconcile_period` = REAL_RECONCILE_S
  acts that late, the default polls fast so that tests stay quick;
- the DRA calls go to the chosen service, v1 or v1beta1 (`Registered.service`); `calls` records
  them in the v1beta1 messages either way (the two are one wire format);
- the health stream (ResourceHealthStatus, on by default in 1.36; `health=False` is a kubelet
  without it): with each registration it opens dra-health/v1alpha1 NodeWatchResources on the
  driver's connection; every message is recorded (`health_messages`, arrival time) and merged into
  the health cache as updateHealthInfo does (a reported device replaces its entry, stamped at
  receipt; the others stay), `device_health()` is getHealthInfo (Unknown and no message once an
  entry is older than its health_check_timeout_seconds, 30 s when unset) — what a pod's
  `allocatedResourcesStatus` shows. When the stream ends (EOF, an error such as Unimplemented,
  which the kubelet logs at error level: `health_errors`) the driver's cache is cleared and the
  stream opened again `health_retry` (5 s) later; deregistration cancels it;
- the ResourceSlice wipes go through the API server, as the registration handler's do: a
  DeleteCollection of resource.k8s.io/v1beta1 resourceslices with the field selector
  `spec.nodeName=<node>` when the kubelet starts (once the Node object exists) and
  `spec.driver=<d>,spec.nodeName=<node>` when a driver's socket goes, each in a background task
  retrying with the handler's backoff (1 s, doubling), ordered against nothing: a wipe may land
  after the driver registered again (`wipe_delay` makes it late on purpose);
- `prepare(pod)` is the manager's PrepareResources: for each of the pod's `spec.resourceClaims` it
  finds the claim's name (`resourceClaimName`, or for a template the pod's
  `status.resourceClaimStatuses`, then the claim must be controlled by the pod), reads the claim
  from the API server itself, refuses the pod unless the claim's
  `status.reservedFor` holds the pod's uid and `status.allocation` is set, and adds the claim to
  its cache (keyed namespace/name, with the pod's uid, the drivers named by the allocation
  results, and the claim's uid as first read). A claim already prepared in this kubelet run is not
  sent again; the others go in one NodePrepareResources batch per driver, with the 45 s call
  timeout. An answer for a claim uid that was not asked, or one that leaves a claim out, or a
  claim's own error fails the pod's preparation with manager.go's message (`DraCallError`); each
  answered device is appended to the claim's cached devices; the answer is the CDI ids per
  container (GetResources);
- `unprepare(pod)` is UnprepareResources: only claims in the cache, only once the last pod using
  the claim goes (before that the pod's reference is dropped, no call), from the cache (the API
  server is not read), in one NodeUnprepareResources batch per driver;
- `restart()` keeps the claim cache as the checkpoint (dra_manager_state) does, but not which
  claims were prepared (the flag is in memory only, still in 1.36): after a restart a prepared
  claim is sent to NodePrepareResources again and the answer's devices are appended to the
  restored ones (the runtime is then handed each CDI id twice, as the real manager does).

Not modelled: the manager's 60 s reconcile loop (unprepare of pods no longer active); the
checkpoints' files and checksums (the claim cache's, and 1.36's dra_health_state, which a stream
ending clears anyway); 1.36's wiping delay (a deregistered driver's slices go 30 s later, and not
at all if it registers again within that time; here they go at once, as in 1.32); the API
versions 1.36 reads claims and wipes slices in (resource.k8s.io/v1; here v1beta1, which a driver
cannot tell); the pod status update a health change triggers (tests read `device_health()`
instead of allocatedResourcesStatus); the gRPC connection monitoring that marks a driver unusable.
Everything runs in the caller's event loop; `stop()` leaves no task, channel or server behind.
"""

from __future__ import annotations

import asyncio
import contextlib
import stat
import time
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

import grpc
import urllib3
from ascend_common.adapters.kubelet import constants
from ascend_common.adapters.kubelet import dra_health_pb2 as health_pb
from ascend_common.adapters.kubelet import dra_health_pb2_grpc as health_grpc
from ascend_common.adapters.kubelet import dra_pb2 as dra
from ascend_common.adapters.kubelet import dra_pb2_grpc as dra_grpc
from ascend_common.adapters.kubelet import dra_v1_pb2 as dra_v1
from ascend_common.adapters.kubelet import dra_v1_pb2_grpc as dra_v1_grpc
from ascend_common.adapters.kubelet import pluginregistration_pb2 as reg
from ascend_common.adapters.kubelet import pluginregistration_pb2_grpc as reg_grpc
from kubernetes import client as k8s

JsonObj = dict[str, Any]

GET_INFO_TIMEOUT_S = 1.0  # operation_generator.go: context.WithTimeout(..., time.Second)
NOTIFY_TIMEOUT_S = 10.0  # notifyTimeoutDuration
DIAL_TIMEOUT_S = 10.0  # dialTimeoutDuration
V1ALPHA4_SERVICE = "v1alpha4.Node"
FAST_SCAN_S = 0.02  # the default: a fast poll stands in for fsnotify and the reconciler
REAL_RECONCILE_S = 1.0  # plugin_manager.go loopSleepDuration
WIPE_BACKOFF_S = (1.0, 2.0, 300.0)  # registration.go wipeResourceSlices: first wait, factor, cap
RESOURCE_GROUP = "resource.k8s.io"
CLAIM_VERSION = "v1beta1"  # manager.go: m.kubeClient.ResourceV1beta1().ResourceClaims(ns).Get
DEVICE_CLASS = "npu.huawei.com"  # a class a claim of our tests asks for (the one deploy/ ships)
# The services a kubelet can call, in dra_plugin.go's servicesSupportedByKubelet.
SERVICES_1_36 = (constants.DRA_V1_SERVICE_NAME, constants.DRA_V1BETA1_SERVICE_NAME)
SERVICES_1_32 = (constants.DRA_V1BETA1_SERVICE_NAME,)  # 1.32 and 1.33: v1beta1 only
HEALTH_NAMES = {health_pb.HEALTHY: "Healthy", health_pb.UNHEALTHY: "Unhealthy", health_pb.UNKNOWN: "Unknown"}


class DraCallError(Exception):
    """The pod's preparation (or unpreparation) failed, with the DRA manager's message."""


@dataclass(frozen=True)
class Registered:
    name: str
    endpoint: str
    service: str  # the chosen gRPC service, e.g. "v1beta1.DRAPlugin"
    socket: Path  # the registration socket


@dataclass
class Call:
    """One gRPC call to a driver, as sent and as answered (empty answers when the call failed)."""

    method: str  # "NodePrepareResources" or "NodeUnprepareResources"
    driver: str
    claims: list[dra.Claim]
    devices: dict[str, list[dra.Device]] = field(default_factory=dict)  # by claim uid, in answer order
    errors: dict[str, str] = field(default_factory=dict)  # by claim uid

    @property
    def uids(self) -> list[str]:
        return [c.uid for c in self.claims]


@dataclass(frozen=True)
class DeviceHealth:
    """One device of one health-stream message, as the kubelet's health cache keeps it."""

    health: str  # "Healthy", "Unhealthy" or "Unknown" (v1.ResourceHealthStatus)
    message: str
    timeout_s: float  # health_check_timeout_seconds, or the kubelet's default
    at: float  # time.monotonic() when the message arrived (the kubelet stamps receipt, not the driver's time)


@dataclass(frozen=True)
class HealthMessage:
    """One NodeWatchResources message as it arrived: by (pool, device)."""

    driver: str
    at: float  # time.monotonic()
    devices: dict[tuple[str, str], DeviceHealth]


@dataclass
class ClaimInfo:
    """claiminfo.go's ClaimInfo: the checkpointed state, plus `prepared`, which is not checkpointed."""

    namespace: str
    name: str
    uid: str  # as first read; a claim re-created under the same name keeps the cached uid
    pod_uids: set[str]
    devices: dict[str, list[dra.Device]]  # DriverState: by driver, every device any answer named
    prepared: bool = False

    def cdi_ids(self, request: str) -> list[str]:
        """cdiDevicesAsList: the CDI ids of the devices for `request` (all of them for "")."""
        return [
            cdi
            for devices in self.devices.values()
            for device in devices
            if not request or not device.request_names or request in device.request_names
            for cdi in device.cdi_device_ids
        ]


def _name_of(obj: Mapping[str, Any]) -> tuple[str, str, str]:
    meta = obj.get("metadata") or {}
    return str(meta.get("namespace") or ""), str(meta.get("name") or ""), str(meta.get("uid") or "")


class FakeDraKubelet:
    def __init__(
        self,
        root: Path,
        *,
        api: k8s.ApiClient | None = None,
        node: str = "node-a",
        reconcile_period: float = FAST_SCAN_S,
        wipe_delay: float = 0.0,
        services: Sequence[str] = SERVICES_1_36,
        health: bool = True,
        health_retry: float = constants.DRA_HEALTH_RETRY_S,
    ) -> None:
        self.registry_dir = root / "plugins_registry"
        self.plugins_dir = root / "plugins"
        self.node = node
        self.plugins: dict[str, Registered] = {}
        self.refusals: list[str] = []  # what the watcher told plugins it refused
        self.calls: list[Call] = []  # every gRPC call to a driver, in order
        self.deregistered: list[str] = []  # drivers whose sockets went
        self.wipes: list[str] = []  # field selectors of the slice wipes done, in the order they landed
        self.claims: dict[str, ClaimInfo] = {}  # the claim info cache, by namespace/name; survives restart()
        self._api = api  # the kubelet's client; None: no claim can be read and no slice is wiped
        self._reconcile_period = reconcile_period
        self.wipe_delay = wipe_delay  # before each wipe's first attempt (a test may change it)
        self._seen: dict[Path, tuple[int, int]] = {}
        self._task: asyncio.Task[None] | None = None
        self._wiping: set[asyncio.Task[None]] = set()
        self._channels: dict[str, grpc.aio.Channel] = {}
        self.services = tuple(services)  # what this kubelet can call; SERVICES_1_32 speaks v1beta1 only
        self._health = health  # ResourceHealthStatus: open NodeWatchResources to each registered driver
        self.health_retry = health_retry  # between a health stream's end and the next attempt
        self.health_messages: list[HealthMessage] = []  # every health-stream message, in arrival order
        self.health_errors: list[str] = []  # how each health stream ended (the kubelet logs these)
        self.health_cache: dict[str, dict[tuple[str, str], DeviceHealth]] = {}  # by driver, then (pool, device)
        self.health_changed = asyncio.Event()  # set at every health message (a waiter clears it)
        self._streams: dict[str, asyncio.Task[None]] = {}

    async def start(self) -> None:
        self.registry_dir.mkdir(parents=True, exist_ok=True)
        self.plugins_dir.mkdir(parents=True, exist_ok=True)
        self._wipe_later("")  # NewRegistrationHandler: every slice of the node, in the background
        await self._scan()  # traversePluginDir
        self._task = asyncio.create_task(self._watch(), name="fake-dra-plugin-watcher")

    async def stop(self) -> None:
        tasks = [t for t in (self._task, *self._wiping, *self._streams.values()) if t is not None]
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        self._task = None
        self._wiping.clear()
        self._streams.clear()
        for channel in self._channels.values():
            await channel.close()
        self._channels.clear()

    async def restart(self) -> None:
        """A kubelet restart: it forgets every driver (and a wipe not yet done), keeps its checkpoint (the
        claim cache) without the prepared flags, then finds the sockets in the registry dir again."""
        await self.stop()
        self.plugins.clear()
        self._seen.clear()
        for info in self.claims.values():
            info.prepared = False  # newClaimInfoFromState: prepared is false
        await self.start()

    # ---- the plugin watcher ------------------------------------------------------------------

    async def _watch(self) -> None:
        while True:
            await asyncio.sleep(self._reconcile_period)
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
                # A socket made again (the kubelet's fsnotify Create: a new desired-state timestamp),
                # not one chmodded after its bind (fsnotify Chmod: the kubelet does nothing). ctime
                # would count the plugin's chmod to 0600 as a new socket, re-register it and close the
                # channel under a call in flight, which the real kubelet never does.
                present[path] = (st.st_ino, st.st_mtime_ns)
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
                stream = self._streams.pop(name, None)
                if stream is not None:
                    stream.cancel()  # DeRegisterPlugin: HealthStreamCancel
                channel = self._channels.pop(name, None)
                if channel is not None:
                    asyncio.get_running_loop().create_task(channel.close())
                self.deregistered.append(name)
                # DeRegisterPlugin: the driver may have died without cleaning up and may never come back.
                self._wipe_later(name)

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
            # validateSupportedServices: the first of the driver's list that this kubelet serves.
            service = next((v for v in info.supported_versions if v in self.services), "")
            if not service and constants.DRA_V1_SERVICE_NAME in self.services:
                await self._refuse(
                    client,
                    "RegisterPlugin error -- plugin validation failed with err: invalid supported gRPC versions of "
                    f"DRA driver plugin {info.name} at endpoint {endpoint}: none of services supported by the plugin "
                    f"({list(info.supported_versions)!r}) are supported by the kubelet ({list(self.services)!r})",
                )
            service = service or V1ALPHA4_SERVICE  # 1.32 fell back to the alpha API it still had
            old = self._channels.pop(info.name, None)
            if old is not None:
                await old.close()
            old_stream = self._streams.pop(info.name, None)
            if old_stream is not None:
                old_stream.cancel()
            self.plugins[info.name] = Registered(info.name, endpoint, service, socket)
            if self._health:
                # DRAPluginManager.add: the health stream starts with the plugin, before the status is told.
                self._streams[info.name] = asyncio.get_running_loop().create_task(
                    self._watch_health(info.name), name=f"fake-dra-health-{info.name}"
                )
            registered = reg.RegistrationStatus(plugin_registered=True)
            await client.NotifyRegistrationStatus(registered, timeout=NOTIFY_TIMEOUT_S)

    async def _refuse(self, client: reg_grpc.RegistrationAsyncStub, error: str) -> None:
        self.refusals.append(error)
        await client.NotifyRegistrationStatus(
            reg.RegistrationStatus(plugin_registered=False, error=error), timeout=NOTIFY_TIMEOUT_S
        )
        raise DraCallError(error)

    # ---- the health stream (ResourceHealthStatus) ----------------------------------------------

    def _channel(self, driver: str) -> grpc.aio.Channel:
        channel = self._channels.get(driver)
        if channel is None:
            channel = self._channels[driver] = grpc.aio.insecure_channel(f"unix://{self.plugins[driver].endpoint}")
        return channel

    async def _watch_health(self, driver: str) -> None:
        """wait.UntilWithContext(NodeWatchResources + HandleWatchResourcesStream, 5 s) until deregistered."""
        while True:
            try:
                stream = health_grpc.DRAResourceHealthStub(self._channel(driver)).NodeWatchResources(
                    health_pb.NodeWatchResourcesRequest()
                )
                async for message in stream:
                    self._health_message(driver, message)
                self.health_errors.append("EOF")
            except grpc.aio.AioRpcError as exc:
                # An Unimplemented driver lands here every 5 s: "Error receiving from WatchResources stream".
                self.health_errors.append(f"{exc.code().name}: {exc.details()}")
            finally:
                self.health_cache.pop(driver, None)  # clearDriver on stream exit
            await asyncio.sleep(self.health_retry)

    def _health_message(self, driver: str, message: health_pb.NodeWatchResourcesResponse) -> None:
        """updateHealthInfo: the reported devices replace their entries; the others stay until they time out."""
        now = time.monotonic()
        devices = {
            (d.device.pool_name, d.device.device_name): DeviceHealth(
                HEALTH_NAMES.get(d.health, "Unknown"),
                d.message if len(d.message) <= 1024 else d.message[:1021] + "...",
                float(d.health_check_timeout_seconds) if d.health_check_timeout_seconds > 0
                else constants.DRA_HEALTH_DEFAULT_TIMEOUT_S,
                now,
            )
            for d in message.devices
        }  # fmt: skip
        self.health_messages.append(HealthMessage(driver, now, devices))
        self.health_cache.setdefault(driver, {}).update(devices)
        self.health_changed.set()

    def device_health(self, driver: str, pool: str, device: str) -> tuple[str, str]:
        """getHealthInfo: what allocatedResourcesStatus shows for the device (health, message);
        Unknown and no message when never reported or not reported within its timeout."""
        entry = self.health_cache.get(driver, {}).get((pool, device))
        if entry is None or time.monotonic() - entry.at > entry.timeout_s:
            return "Unknown", ""
        return entry.health, entry.message

    async def wait_health(
        self, driver: str, pool: str, device: str, health: str, *, after: int = 0, within: float = 10.0
    ) -> HealthMessage:
        """The first health message after the first `after` that reports `device` as `health`."""
        async with asyncio.timeout(within):
            while True:
                for message in self.health_messages[after:]:
                    entry = message.devices.get((pool, device))
                    if message.driver == driver and entry is not None and entry.health == health:
                        return message
                after = len(self.health_messages)
                self.health_changed.clear()
                await self.health_changed.wait()

    # ---- the registration handler's ResourceSlice wipes --------------------------------------

    def _wipe_later(self, driver: str) -> None:
        if self._api is None:
            return
        task = asyncio.get_running_loop().create_task(self._wipe(driver), name=f"fake-dra-wipe-{driver or 'node'}")
        self._wiping.add(task)
        task.add_done_callback(self._wiping.discard)

    async def _wipe(self, driver: str) -> None:
        await asyncio.sleep(self.wipe_delay)
        delay, factor, cap = WIPE_BACKOFF_S
        while True:
            try:
                self.wipes.append(await asyncio.to_thread(self._delete_slices, driver))
                return
            except (k8s.ApiException, OSError, urllib3.exceptions.HTTPError):
                await asyncio.sleep(delay)  # ExponentialBackoffWithContext: log and try again
                delay = min(delay * factor, cap)

    def _delete_slices(self, driver: str) -> str:
        """One attempt (blocking: run in a thread): the Node must exist, then DeleteCollection."""
        assert self._api is not None
        # The answers are not needed (an error status still raises): unparsed, they cost no model
        # building; the client's stubs name the model even then, hence the casts.
        node = cast(urllib3.BaseHTTPResponse, k8s.CoreV1Api(self._api).read_node(self.node, _preload_content=False))
        node.drain_conn()  # read, so the connection goes back to the pool whole
        node.release_conn()
        # fields.Set.String() sorts the keys.
        selector = f"spec.nodeName={self.node}" if not driver else f"spec.driver={driver},spec.nodeName={self.node}"
        deleted = cast(
            urllib3.BaseHTTPResponse,
            k8s.ResourceV1beta1Api(self._api).delete_collection_resource_slice(
                field_selector=selector, _preload_content=False
            ),
        )
        deleted.drain_conn()
        deleted.release_conn()
        return selector

    # ---- the DRA manager ---------------------------------------------------------------------

    def _claim_name(
        self, pod: Mapping[str, Any], pod_claim: Mapping[str, Any], what: str = "prepare"
    ) -> tuple[str | None, bool]:
        """resourceclaim.Name: the claim's name (None: no claim was generated) and whether the pod must own it."""
        namespace, name, _ = _name_of(pod)
        if pod_claim.get("resourceClaimName"):
            return str(pod_claim["resourceClaimName"]), False
        if pod_claim.get("resourceClaimTemplateName"):
            for status in (pod.get("status") or {}).get("resourceClaimStatuses") or []:
                if status.get("name") == pod_claim.get("name"):
                    claim = status.get("resourceClaimName")
                    return (str(claim) if claim else None), True
            raise DraCallError(f'{what} resource claim: pod "{namespace}/{name}": ResourceClaim not created yet')
        raise DraCallError(
            f'{what} resource claim: pod "{namespace}/{name}", spec.resourceClaim {pod_claim.get("name")!r}: '
            "none of the supported fields are set"
        )

    async def _read_claim(self, namespace: str, name: str, pod_name: str) -> Mapping[str, Any]:
        if self._api is None:
            raise DraCallError("the fake DRA kubelet was given no API client: it cannot read claims")
        custom = k8s.CustomObjectsApi(self._api)
        try:
            claim = await asyncio.to_thread(
                custom.get_namespaced_custom_object, RESOURCE_GROUP, CLAIM_VERSION, namespace, "resourceclaims", name
            )
        except k8s.ApiException as exc:
            raise DraCallError(
                f"failed to fetch ResourceClaim {name} referenced by pod {pod_name}: {exc.status} {exc.reason}"
            ) from exc
        if not isinstance(claim, Mapping):
            raise DraCallError(f"failed to fetch ResourceClaim {name} referenced by pod {pod_name}: no object")
        return claim

    async def prepare(self, pod: Mapping[str, Any]) -> dict[str, list[str]]:
        """PrepareResources, then GetResources: the CDI ids each container is handed (DraCallError on failure)."""
        namespace, pod_name, pod_uid = _name_of(pod)
        batches: dict[str, list[dra.Claim]] = {}
        sent: dict[str, ClaimInfo] = {}  # by claim uid: marked prepared once every batch succeeded
        for pod_claim in (pod.get("spec") or {}).get("resourceClaims") or []:
            name, must_check_owner = self._claim_name(pod, pod_claim)
            if name is None:
                continue
            claim = await self._read_claim(namespace, name, pod_name)
            claim_ns, claim_name, claim_uid = _name_of(claim)
            status = claim.get("status") or {}
            if must_check_owner and not (
                claim_ns == namespace
                and any(
                    ref.get("controller") and ref.get("uid") == pod_uid
                    for ref in (claim.get("metadata") or {}).get("ownerReferences") or []
                )
            ):
                raise DraCallError(
                    f"ResourceClaim {claim_ns}/{claim_name} was not created for pod {namespace}/{pod_name} "
                    "(pod is not owner)"
                )
            if not any(ref.get("uid") == pod_uid for ref in status.get("reservedFor") or []):
                raise DraCallError(
                    f"pod {pod_name}({pod_uid}) is not allowed to use resource claim {name}({claim_uid})"
                )
            info = self.claims.get(f"{claim_ns}/{claim_name}")
            if info is None:
                allocation = status.get("allocation")
                if not allocation:
                    raise DraCallError(f"locked cache operation: claim {claim_ns}/{claim_name}: not allocated")
                drivers = [r.get("driver", "") for r in (allocation.get("devices") or {}).get("results") or []]
                info = ClaimInfo(claim_ns, claim_name, claim_uid, set(), {d: [] for d in drivers})
                self.claims[f"{claim_ns}/{claim_name}"] = info
            info.pod_uids.add(pod_uid)
            if info.prepared:
                continue  # prepared in this kubelet run: not sent again
            sent[info.uid] = info
            for driver in info.devices:
                batches.setdefault(driver, []).append(dra.Claim(namespace=info.namespace, uid=info.uid, name=info.name))
        for driver, claims in batches.items():
            call = await self._call("NodePrepareResources", driver, claims)
            for uid in call.devices.keys() | call.errors.keys():
                if uid not in sent or uid not in call.uids:
                    raise DraCallError(f"NodePrepareResources returned result for unknown claim UID {uid}")
            for uid in [*call.errors, *call.devices]:
                info = sent[uid]
                if uid in call.errors:
                    raise DraCallError(
                        f"NodePrepareResources failed for claim {info.namespace}/{info.name}: {call.errors[uid]}"
                    )
                info.devices.setdefault(driver, []).extend(call.devices[uid])
            if len(claims) - len(call.devices) - len(call.errors):
                raise DraCallError(
                    f"NodePrepareResources left out {len(claims) - len(call.devices) - len(call.errors)} claims"
                )
        for info in sent.values():
            info.prepared = True
        return self._resources(pod)

    def _resources(self, pod: Mapping[str, Any]) -> dict[str, list[str]]:
        """GetResources for each container: the CDI ids of the claims it uses."""
        namespace = _name_of(pod)[0]
        spec = pod.get("spec") or {}
        names = {c.get("name"): self._claim_name(pod, c)[0] for c in spec.get("resourceClaims") or []}
        out: dict[str, list[str]] = {}
        for container in spec.get("containers") or []:
            ids: list[str] = []
            for used in (container.get("resources") or {}).get("claims") or []:
                claim_name = names.get(used.get("name"))
                info = self.claims.get(f"{namespace}/{claim_name}") if claim_name else None
                if claim_name and info is None:
                    raise DraCallError(f"unable to get claim info for claim {claim_name} in namespace {namespace}")
                if info is not None:
                    ids.extend(info.cdi_ids(str(used.get("request") or "")))
            out[str(container.get("name"))] = ids
        return out

    async def unprepare(self, pod: Mapping[str, Any]) -> None:
        """UnprepareResources (DraCallError on failure): from the cache, once the last pod using a claim goes."""
        namespace, _, pod_uid = _name_of(pod)
        batches: dict[str, list[dra.Claim]] = {}
        done: dict[str, ClaimInfo] = {}
        for pod_claim in (pod.get("spec") or {}).get("resourceClaims") or []:
            name, _ = self._claim_name(pod, pod_claim, "unprepare")
            info = self.claims.get(f"{namespace}/{name}") if name is not None else None
            if info is None:
                continue  # not cached: nothing to unprepare
            if len(info.pod_uids) > 1:
                info.pod_uids.discard(pod_uid)  # other pods still use it
                continue
            done[info.uid] = info
            for driver in info.devices:
                batches.setdefault(driver, []).append(dra.Claim(namespace=info.namespace, uid=info.uid, name=info.name))
        for driver, claims in batches.items():
            call = await self._call("NodeUnprepareResources", driver, claims)
            for uid in [*call.errors, *call.devices]:
                if uid not in call.uids:
                    raise DraCallError(f"NodeUnprepareResources returned result for unknown claim UID {uid}")
                if uid in call.errors:
                    info = done[uid]
                    raise DraCallError(
                        f"NodeUnprepareResources failed for claim {info.namespace}/{info.name}: {call.errors[uid]}"
                    )
            if len(claims) - len(call.devices) - len(call.errors):
                raise DraCallError(
                    f"NodeUnprepareResources left out {len(claims) - len(call.devices) - len(call.errors)} claims"
                )
        for info in done.values():
            del self.claims[f"{info.namespace}/{info.name}"]

    async def _call(self, method: str, driver: str, claims: list[dra.Claim]) -> Call:
        """One gRPC call, recorded; its answer by claim uid (an unprepare's successes under `devices`, empty)."""
        call = Call(method, driver, claims)
        self.calls.append(call)
        plugin = self.plugins.get(driver)
        if plugin is None:
            what = "failed to get gRPC client for driver" if method == "NodePrepareResources" else (
                "get gRPC client for DRA driver")  # fmt: skip
            raise DraCallError(f"{what} {driver}: plugin name {driver} not found in the list of registered DRA plugins")
        if plugin.service not in (constants.DRA_V1_SERVICE_NAME, constants.DRA_V1BETA1_SERVICE_NAME):
            raise DraCallError(f"{method} failed: internal error: unsupported chosen service: {plugin.service!r}")
        channel = self._channel(driver)
        stub = _Stub(channel, v1=plugin.service == constants.DRA_V1_SERVICE_NAME)
        try:
            if method == "NodePrepareResources":
                prepared = await stub.NodePrepareResources(
                    dra.NodePrepareResourcesRequest(claims=claims), timeout=constants.DRA_CALL_TIMEOUT_S
                )
                for uid, answer in prepared.claims.items():
                    if answer.error:
                        call.errors[uid] = answer.error
                    else:
                        call.devices[uid] = list(answer.devices)
            else:
                unprepared = await stub.NodeUnprepareResources(
                    dra.NodeUnprepareResourcesRequest(claims=claims), timeout=constants.DRA_CALL_TIMEOUT_S
                )
                for uid, result in unprepared.claims.items():
                    if result.error:
                        call.errors[uid] = result.error
                    else:
                        call.devices[uid] = []
        except grpc.aio.AioRpcError as exc:
            raise DraCallError(f"{method} failed: {exc.code().name}: {exc.details()}") from exc
        return call


class _Stub:
    """The chosen service's client, speaking in the v1beta1 messages the fake records: a v1 call
    converts the request and the answer through their bytes (the wire is one; v1 adds Device.share_id,
    which no driver here sets), as dra_plugin.go's V1Beta1ClientWrapper converts the other way."""

    def __init__(self, channel: grpc.aio.Channel, *, v1: bool) -> None:
        self._v1 = dra_v1_grpc.DRAPluginStub(channel) if v1 else None
        self._v1beta1 = dra_grpc.DRAPluginStub(channel)

    async def NodePrepareResources(
        self, request: dra.NodePrepareResourcesRequest, *, timeout: float
    ) -> dra.NodePrepareResourcesResponse:
        if self._v1 is None:
            return await self._v1beta1.NodePrepareResources(request, timeout=timeout)
        v1_request = dra_v1.NodePrepareResourcesRequest.FromString(request.SerializeToString())
        answer = await self._v1.NodePrepareResources(v1_request, timeout=timeout)
        return dra.NodePrepareResourcesResponse.FromString(answer.SerializeToString())

    async def NodeUnprepareResources(
        self, request: dra.NodeUnprepareResourcesRequest, *, timeout: float
    ) -> dra.NodeUnprepareResourcesResponse:
        if self._v1 is None:
            return await self._v1beta1.NodeUnprepareResources(request, timeout=timeout)
        v1_request = dra_v1.NodeUnprepareResourcesRequest.FromString(request.SerializeToString())
        answer = await self._v1.NodeUnprepareResources(v1_request, timeout=timeout)
        return dra.NodeUnprepareResourcesResponse.FromString(answer.SerializeToString())


# ---- what the tests put in the API server: pods and claims as the scheduler leaves them ----------


def pod_using(
    name: str,
    claims: Sequence[str],
    *,
    namespace: str = "default",
    node: str = "node-a",
    uid: str | None = None,
) -> JsonObj:
    """A pod naming existing claims directly (spec.resourceClaims[].resourceClaimName), one container using them."""
    refs = [{"name": f"claim-{i}", "resourceClaimName": claim} for i, claim in enumerate(claims)]
    return {
        "metadata": {"name": name, "namespace": namespace, "uid": uid or str(uuid.uuid4())},
        "spec": {
            "nodeName": node,
            "resourceClaims": refs,
            "containers": [
                {"name": "main", "image": "train", "resources": {"claims": [{"name": r["name"]} for r in refs]}}
            ],
        },
    }


def allocated_claim(
    name: str, results: Sequence[Mapping[str, str]], *pods: Mapping[str, Any], namespace: str = "default"
) -> JsonObj:
    """A ResourceClaim (v1beta1) allocated with `results` and reserved for `pods`, as the scheduler leaves it."""
    return {
        "apiVersion": f"{RESOURCE_GROUP}/{CLAIM_VERSION}",
        "kind": "ResourceClaim",
        "metadata": {"name": name, "namespace": namespace},
        # v1beta1 requires a request's class; the name of ours serves for any driver's results.
        "spec": {
            "devices": {
                "requests": [{"name": r.get("request", "npu"), "deviceClassName": DEVICE_CLASS} for r in results[:1]]
            }
        },
        "status": {
            "allocation": {"devices": {"results": [dict(r) for r in results]}},
            "reservedFor": [
                {"resource": "pods", "name": p["metadata"]["name"], "uid": p["metadata"]["uid"]} for p in pods
            ],
        },
    }
