"""The plugin's edge to the cluster: the node's pods, its Node, pod patches, node labels.

Wraps the shared pod cache (one watch, slim records), a watch of the node's own Node by name
and the patch helpers of libs/common; the Allocate path reads pods from here without an API
call (the Volcano path only the pods it can serve, indexed per event) and patches the pod it
allocated. Nothing here reads the API server on a timer.
"""

from __future__ import annotations

import asyncio
import logging
from collections import Counter
from collections.abc import Callable, KeysView, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from ascend_common.adapters.inputs import BadInputs
from ascend_common.adapters.kube.client import ApiClient, KubeApiError, core_v1, json_of
from ascend_common.adapters.kube.config import build_api_client
from ascend_common.adapters.kube.patch import (
    SlimNode,
    patch_node,
    patch_pod_annotations,
    remove_node_resources,
    slim_node,
)
from ascend_common.adapters.kube.watch import WatchedObject
from ascend_common.adapters.kubelet.source import KubeletSource
from ascend_common.adapters.pod_source import PodSource, build_pod_source
from ascend_common.chips import RESOURCE_PREFIX, ResourceType
from ascend_common.gojson import INT32
from ascend_common.inuse import ALLOCATION_PHASES, KLT_DEV, health_share
from ascend_common.jsonin import InputError
from ascend_common.pods import FINISHED_PHASES, SlimPod

from ascend_device_plugin.allocation.report import HostFacts
from ascend_device_plugin.allocation.response import SLOW_NODE_CONFIGMAP, parse_slow_node
from ascend_device_plugin.inventory.snapshot import InventorySource
from ascend_device_plugin.levels.level_source import LevelSource
from ascend_device_plugin.model.chip_pod import PodView
from ascend_device_plugin.node_labels import node_annotations, node_labels
from ascend_device_plugin.settings import PluginSettings
from ascend_device_plugin.volcano.annotations import may_serve

log = logging.getLogger(__name__)
RETIRE_RETRY_S = 60.0  # a failed removal of an earlier generation's resource is tried again so often
NODE_FIRST_LIST_S = 5.0  # how long the first labels wait for the Node's watch to list it
SLOW_NODE_INPUT = "slow_node_configmap"  # its name in /readyz bad_inputs
SLOW_NODE_READ_S = 2.0  # inside Allocate: a slow apiserver must not stall admissions for long
POD_DEBOUNCE_S = 0.01
# The resources an earlier release's plugin advertised for chips a node type now offers under
# another name: the 950 generation is `huawei.com/npu` where it was `huawei.com/Ascend910`. The
# kubelet never takes a resource nobody advertises off the node's capacity, so the plugin does
# (the reference's RemoveOldResource, at start, on a node that is not of an old device type).
RETIRED_RESOURCES = {ResourceType.NPU: (RESOURCE_PREFIX + ResourceType.ASCEND910.value,)}


def pod_view(pod: SlimPod) -> PodView:
    return PodView(
        namespace=pod.namespace,
        name=pod.name,
        uid=pod.uid,
        phase=pod.phase,
        annotations=pod.annotations,
        requests=pod.requests,
        labels=pod.labels,
        deleting=pod.deleting,
        created=pod.created,
    )


@dataclass
class KubeBridge:
    # None until start() builds it from `kubeconfig` (the asyncio client's loader is a coroutine).
    api: ApiClient | None
    node_name: str
    on_pods: Callable[[], None]
    cache: PodSource | None = field(init=False, default=None)  # once there is an ApiClient
    node: SlimNode | None = None
    kubeconfig: str | Path | None = None
    _views: dict[str, PodView] = field(default_factory=dict)  # by pod uid, following the cache
    _list: list[PodView] | None = None
    # Kept up to date one pod event at a time, like the views: a pass over every cached pod per
    # event costs milliseconds of the event loop on a 10,000-pod node, and Allocate waits behind it.
    _health_chips: Counter[str] = field(default_factory=Counter)  # chip -> pods using it for health
    # Uids of the pods that hold what they were allocated: those in the phases whose allocations
    # ascend_common.inuse.chips_in_use_for_allocation counts, from Allocate on (before the pod's
    # kltDev/AscendReal lands, the predicate cannot name its chips yet, but its mappings must stay).
    _holding: set[str] = field(default_factory=set)
    _allocated: dict[str, PodView] = field(default_factory=dict)  # holders that carry kltDev (by uid)
    _servable: dict[str, PodView] = field(default_factory=dict)  # pods the Volcano path can choose (by uid)
    _labels_written: dict[str, str] = field(default_factory=dict)
    _tasks: list[asyncio.Task[None]] = field(default_factory=list)
    _label_task: asyncio.Task[None] | None = None
    _pending: asyncio.TimerHandle | None = None
    _retire: tuple[str, ...] = ()  # RETIRED_RESOURCES of the node's type, once its chips are known
    _retired: bool = False
    _retire_task: asyncio.Task[None] | None = None
    # Told when a pod is deleted or reaches a finished phase (soft share frees its directory then).
    on_pod_gone: Callable[[PodView], None] | None = None
    # Each 950 chip's `levelList` for baseDeviceInfos (set by the app; None: no levels published).
    levels: LevelSource | None = None
    retire_retry_s: float = RETIRE_RETRY_S
    # The node's own Node, watched by name (once there is an ApiClient): its InternalIP and labels.
    node_watch: WatchedObject | None = field(init=False, default=None)
    # What the labels were last asked for (chips_changed), so that a change of the Node's InternalIP
    # or of the exporter's NodeInfo re-renders them from the same inventory.
    _label_inputs: tuple[InventorySource, str | None] | None = None
    _labels_again: bool = False  # asked again while a write ran: render once more when it ends
    # Told every pod event as it comes (the annotation repair compares each with what it wrote).
    on_pod_event: Callable[[str, PodView], None] | None = None
    bad_inputs: BadInputs = field(default_factory=BadInputs)  # the plugin's /readyz names them
    # --pod-source kubelet: the kubelet whose /pods is read (None: the API server's list+watch).
    kubelet: KubeletSource | None = None

    def __post_init__(self) -> None:
        if self.api is not None:
            self._follow_pods(self.api)

    def _follow_pods(self, api: ApiClient) -> PodSource:
        self.cache = build_pod_source(api, self.node_name, self.kubelet)
        self.cache.on_change.append(self._pods_changed)
        return self.cache

    @classmethod
    def create(cls, settings: PluginSettings, on_pods: Callable[[], None]) -> KubeBridge:
        return cls(None, settings.node_name, on_pods, kubeconfig=settings.kubeconfig, kubelet=settings.kubelet_source())

    @property
    def _client(self) -> ApiClient:
        """The ApiClient, for the calls made once start() has built it (the cache's included)."""
        if self.api is None:
            raise RuntimeError("KubeBridge is not started")
        return self.api

    def _pods_changed(self, kind: str, pod: SlimPod) -> None:
        # Views are kept per pod, so an event costs one conversion, not one per cached pod;
        # a burst of events (a re-list, a patch storm) becomes one recompute.
        old = self._views.get(pod.uid)
        if old is not None:
            self._count(old, -1)
        view: PodView | None = None
        if kind == "DELETED":
            self._views.pop(pod.uid, None)
        else:
            view = pod_view(pod)
            self._views[pod.uid] = view
            self._count(view, 1)
        if self.on_pod_event is not None:
            self.on_pod_event(kind, view if view is not None else pod_view(pod))
        if self.on_pod_gone is not None:
            if view is None:
                self.on_pod_gone(pod_view(pod))  # the deleted object's last state
            elif view.phase in FINISHED_PHASES and (old is None or old.phase not in FINISHED_PHASES):
                self.on_pod_gone(view)
        self._list = None
        if self._pending is None:
            self._pending = asyncio.get_running_loop().call_later(POD_DEBOUNCE_S, self._flush)

    def _count(self, view: PodView, step: int) -> None:
        """Add (step 1) or take away (step -1) one pod's share of the chips in use for health, of the
        holders and of the pods the Volcano path can choose."""
        if step > 0 and may_serve(view):
            self._servable[view.uid] = view
        elif step < 0:
            self._servable.pop(view.uid, None)
        if view.phase in ALLOCATION_PHASES:
            if step > 0:
                self._holding.add(view.uid)
                if KLT_DEV in view.annotations:
                    self._allocated[view.uid] = view
            else:
                self._holding.discard(view.uid)
                self._allocated.pop(view.uid, None)
        for chip in health_share(view):
            self._health_chips[chip] += step
            if self._health_chips[chip] <= 0:
                del self._health_chips[chip]

    def in_use_for_health(self) -> set[str]:
        """The chips in use for health (what chips_in_use_for_health(pods()) would say)."""
        return set(self._health_chips)

    def holding(self) -> set[str]:
        """Uids of the Pending and Running pods; read it, do not keep or change it."""
        return self._holding

    def allocated(self) -> Mapping[str, PodView]:
        """Pending and Running pods that carry an allocation's `kltDev` annotation, by uid."""
        return self._allocated

    def servable(self) -> list[PodView]:
        return list(self._servable.values())

    def uids(self) -> KeysView[str]:
        return self._views.keys()

    def _flush(self) -> None:
        self._pending = None
        self.on_pods()

    def pods(self) -> list[PodView]:
        if self._list is None:
            self._list = list(self._views.values())
        return self._list

    async def wait_synced(self, timeout: float) -> bool:  # noqa: ASYNC109 - a bounded wait is the API
        """True once the pod cache has its first list (False: not within `timeout` s)."""
        return self.cache is not None and await self.cache.wait_synced(timeout)

    async def refresh(self) -> None:
        if self.cache is not None:
            await self.cache.relist(timeout=2.0)
        self._flush()

    async def patch_pod(
        self, namespace: str, name: str, annotations: dict[str, str], *, retries: int = 3, base_delay: float = 0.2
    ) -> None:
        await patch_pod_annotations(self._client, namespace, name, annotations, retries, base_delay=base_delay)

    async def slow_node_envs(self) -> dict[str, str]:
        """PERF_DUMP_PATH / PERF_DUMP_CONFIG from ConfigMap kube-system/steptime-dtpgroup, read at each
        Allocate as the reference does; nothing when it is missing, unreadable or malformed."""
        namespace, name = SLOW_NODE_CONFIGMAP
        read = core_v1(self._client).read_namespaced_config_map
        try:
            body = await json_of(await read(name, namespace, timeout=SLOW_NODE_READ_S))
        except Exception as exc:  # a notice, not a condition of the allocation
            log.debug("no slow-node notice", extra={"configmap": f"{namespace}/{name}", "error": str(exc)})
            return {}
        data = body.get("data") if isinstance(body, dict) else None
        try:
            if not isinstance(data, dict):
                raise InputError(f"{namespace}/{name}: data is not a map")
            envs = parse_slow_node(data)
        except InputError as exc:
            # Read at each Allocate: logged when the reason is new, not every time.
            self.bad_inputs.refused(SLOW_NODE_INPUT, str(exc), "step time configmap unreadable; no slow-node notice")
            return {}
        self.bad_inputs.accepted(SLOW_NODE_INPUT)
        return envs

    def node_facts(self) -> HostFacts:
        if self.node is None:
            return HostFacts()
        a = self.node.annotations
        return HostFacts(
            host_ip=self.node.internal_ip,
            super_pod_id=_int(a.get("superPodID"), -1),
            server_index=a.get("serverIndex", ""),
        )

    async def start(self) -> None:
        if self.api is None:
            self.api = await build_api_client(kubeconfig=self.kubeconfig)
        await (self.cache or self._follow_pods(self.api)).start()
        self.node_watch = WatchedObject("node", core_v1(self.api).list_node, name=self.node_name)
        self.node_watch.on_change.append(self._node_changed)
        self.node_watch.start()

    def _node_changed(self) -> None:
        obj = self.node_watch.object if self.node_watch is not None else None
        if obj is None:
            log.warning("the node is not in the API server", extra={"node": self.node_name})
            return
        node = slim_node(obj)
        old_ip = self.node.internal_ip if self.node is not None else ""
        self.node = node
        if node.internal_ip != old_ip and self.levels is not None:
            # A card's or a plain server's level 0 is named by the InternalIP.
            log.info("node InternalIP changed; re-rendering the levelList",
                     extra={"node": self.node_name, "old": old_ip, "new": node.internal_ip})  # fmt: skip
            self.relabel()
        self._retire_old_resources()

    def chips_changed(self, source: InventorySource, driver_version: str | None) -> None:
        """Write node labels and annotations (contract section 9) when they change; take the
        resources of an earlier generation off the node once."""
        if (rtype := source.inventory.physical_type) is not None:
            self._retire = RETIRED_RESOURCES.get(rtype, ())
            self._retire_old_resources()
        self._label_inputs = (source, driver_version)
        self.relabel()

    def relabel(self) -> None:
        """Render the labels and annotations again from the last chips_changed inputs (the exporter's
        NodeInfo or the Node's InternalIP changed); written only when their bytes differ."""
        if self._label_inputs is None:
            return  # no chips yet: the first chips_changed renders
        if self._label_task is not None and not self._label_task.done():
            self._labels_again = True  # one write at a time; the running one renders once more
            return
        self._label_task = asyncio.create_task(self._label_rounds(), name="node-labels")

    async def _label_rounds(self) -> None:
        while self._label_inputs is not None:
            self._labels_again = False
            await self._write_labels(*self._label_inputs)
            if not self._labels_again:
                return

    def _retire_old_resources(self) -> None:
        if not self._retire or self._retired or (self._retire_task is not None and not self._retire_task.done()):
            return
        self._retire_task = asyncio.create_task(self._remove_old_resources(self._retire), name="remove-old-resource")

    async def _remove_old_resources(self, resources: tuple[str, ...]) -> None:
        node = self.node_name
        while True:
            try:
                removed = await remove_node_resources(self._client, node, resources)
                break
            except KubeApiError as exc:
                log.error("cannot remove the old resource from the node", extra={"node": node, "error": str(exc)})
            await asyncio.sleep(self.retire_retry_s)  # only while it fails: once removed, never again
        self._retired = True
        if removed:
            log.info("old resource removed from the node", extra={"node": node, "resources": removed})
        else:
            log.info("old resource not in the node's capacity", extra={"node": node, "resources": list(resources)})

    async def _write_labels(self, source: InventorySource, version: str | None) -> None:
        inventory = source.inventory  # as the task starts: changes made meanwhile were skipped above
        infos = sorted(inventory.chips.values(), key=lambda c: c.phy_id)
        chips = [c for c in inventory.reported.values() if c.state == "ok"]
        if not infos or not chips:
            return
        first = chips[0]
        hbm = first.dynamic.hbm.value if first.dynamic and first.dynamic.hbm.is_ok else None
        chip_name = first.static.chip_name.value or ""
        existing = self.node.labels if self.node is not None else {}
        pod = inventory.super_pod
        labels = node_labels(
            chip_name,
            infos[0].family,
            infos[0].aicore,
            version,
            infos[0].rtype,
            hbm.total_mb if hbm else None,
            existing,
            board_id=first.static.board_id.value if first.static.board_id.is_ok else None,
            product_types=[c.product_type for c in infos],
            super_pod=pod,
        )
        levels = None
        if self.levels is not None:
            if self.node is None and self.node_watch is not None:
                # A card's or a plain server's level 0 is named by the InternalIP: wait for the
                # Node's first list rather than publish "" until the next chip change.
                await self.node_watch.wait_synced(NODE_FIRST_LIST_S)
            await self.levels.load_topology(inventory)
            levels = self.levels.levels(inventory)
        annotations = node_annotations(infos, pod, main_board_id=inventory.main_board_id, levels=levels)
        wanted = {**{f"l:{k}": v for k, v in labels.items()}, **{f"a:{k}": v for k, v in annotations.items()}}
        if wanted == self._labels_written:
            return
        try:
            self.node = await patch_node(self._client, self.node_name, labels=labels, annotations=annotations)
            self._labels_written = wanted
        except KubeApiError as exc:
            log.warning("cannot label the node", extra={"node": self.node_name, "error": str(exc)})

    async def stop(self) -> None:
        if self._pending is not None:
            self._pending.cancel()
        for task in [*self._tasks, *(t for t in (self._label_task, self._retire_task) if t is not None)]:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        if self.node_watch is not None:
            await self.node_watch.stop()
        if self.cache is not None:
            await self.cache.stop()
        if self.api is not None:
            await self.api.close()  # type: ignore[no-untyped-call]  # its aiohttp session


def _int(value: str | None, default: int) -> int:
    """An int32 from a node annotation (it goes into the rank table, an int32 for its readers), else `default`."""
    try:
        number = int(value) if value is not None else default
    except ValueError:
        return default
    return number if INT32[0] <= number <= INT32[1] else default
