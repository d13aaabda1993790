"""Allocate and GetPreferredAllocation: the kubelet's request -> what the container gets.

Paths (contract sections 3-5): plain (the kubelet's ids), Volcano (the devices Volcano wrote
on the oldest pending pod, which is marked taken), static vNPU, dynamic vNPU (`npu-core`:
the vNPU the pod's annotation names is created through the exporter) and 310P sharing. Reads
come from the pod cache. The Volcano path writes the pod twice: marked taken inside the call
(the kubelet's admission waits for it, as in the reference), then the allocation report once the
kubelet has its answer; the other paths write only the report, after the answer.
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
from collections.abc import Awaitable, Callable, Container, Coroutine, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import httpx
from ascend_common.adapters.clients.exporter import ExporterClient, ExporterError
from ascend_common.adapters.kubelet import deviceplugin_pb2 as pb
from ascend_common.chips import RESOURCE_PREFIX, ChipFamily, ResourceType
from ascend_common.inuse import ALLOCATION_PHASES, ASCEND_REAL
from ascend_common.naming import NPU_CORE, parse_device_id, vnpu_device_id

from ascend_device_plugin.core.allocate import (
    UB_DEVICE_DIRS,
    AllocDevice,
    ContainerAlloc,
    container_response,
    hccl_topo_path,
    validate_request,
)
from ascend_device_plugin.core.annotations import (
    config_devices,
    configuration_key,
    device_configuration,
    real_allocation_annotations,
)
from ascend_device_plugin.core.model import ChipInfo, PodView
from ascend_device_plugin.core.preferred import preferred_allocation
from ascend_device_plugin.core.topology import affinity_groups, device_groups
from ascend_device_plugin.core.volcano import VolcanoChoice, pick_pod, taken_patch
from ascend_device_plugin.inventory import Resources
from ascend_device_plugin.podresources import find_pod
from ascend_device_plugin.refusals import AllocationError, Refusal
from ascend_device_plugin.views import ViewBoard

log = logging.getLogger(__name__)
MAX_DEVICES_PER_CONTAINER = 128
MAX_CONTAINERS = 64
HOST_DEV_NODES = ("/dev/davinci_manager", "/dev/davinci_manager_docker", "/dev/hisi_hdc", "/dev/devmm_svm",
                  "/dev/dvpp_cmdlist")  # fmt: skip


class PodSource(Protocol):
    def pods(self) -> list[PodView]: ...

    def servable(self) -> list[PodView]:
        """The cached pods that pass core.volcano.may_serve: the only ones the Volcano path can choose."""

    async def refresh(self) -> None:
        """Re-list now (a cold cache may not have the pod an Allocate is for yet)."""


class Patcher(Protocol):
    async def patch_pod(
        self, namespace: str, name: str, annotations: dict[str, str], *, retries: int = 3, base_delay: float = 0.2
    ) -> None: ...


@dataclass(frozen=True)
class NodeFacts:
    host_ip: str = ""  # the node's InternalIP
    super_pod_id: int = -1
    server_index: str = ""


def invalid(cause: str, pod: PodView | None = None) -> AllocationError:
    return AllocationError(Refusal.INVALID_REQUEST, cause, pod=pod.key if pod is not None else None)


@dataclass
class Allocator:
    resources: Resources
    board: ViewBoard
    runtime_mode: bool = True
    volcano: bool = False
    pods: PodSource | None = None
    patcher: Patcher | None = None
    exporter: ExporterClient | None = None
    podresources_socket: Path | None = None
    node: Callable[[], NodeFacts] = NodeFacts
    dev_root: Path = Path("/")
    preset_vnpu: bool = True  # --preset-virtual-device
    # Marking the chosen pod taken: tries and the wait between them (the reference's RetryUpdateCount,
    # UpdatePodWaitTime); Allocate fails when the last try does.
    taken_tries: int = 3
    taken_wait_s: float = 0.2
    slow_node: Callable[[], Awaitable[dict[str, str]]] | None = None  # the slow-node notice's envs
    _taken: set[str] = field(default_factory=set)  # pod uids marked taken, before the cache sees it
    _background: set[asyncio.Task[None]] = field(default_factory=set)
    _created: dict[str, float] = field(default_factory=dict)  # vNPU name -> monotonic time we created it

    # ---- GetPreferredAllocation --------------------------------------------------------------

    def preferred_available(self, resource: str) -> bool:
        return resource == self._physical()

    def preferred(self, resource: str, request: pb.PreferredAllocationRequest) -> pb.PreferredAllocationResponse:
        groups = affinity_groups(self.resources.inventory.chips.values())
        responses = []
        for creq in request.container_requests:
            available = list(creq.available_deviceIDs)
            try:
                ids = preferred_allocation(
                    available, list(creq.must_include_deviceIDs), creq.allocation_size,
                    device_groups(available, groups),
                )  # fmt: skip
            except ValueError as exc:
                raise invalid(str(exc)) from None
            responses.append(pb.ContainerPreferredAllocationResponse(deviceIDs=ids))
        return pb.PreferredAllocationResponse(container_responses=responses)

    # ---- Allocate ----------------------------------------------------------------------------

    def _physical(self) -> str | None:
        rtype = self.resources.inventory.physical_type
        return rtype.value if rtype is not None else None

    def _validate(self, resource: str, request: pb.AllocateRequest) -> list[list[str]]:
        view = self.board.get(resource)
        if view is None:
            raise invalid(f"resource {resource} has no devices")
        known = {d.id for d in view.devices}
        if not request.container_requests:
            raise invalid("the request has no container")
        if len(request.container_requests) > MAX_CONTAINERS:
            raise invalid(f"the request has more than {MAX_CONTAINERS} containers")
        containers = []
        for i, creq in enumerate(request.container_requests):
            ids = list(creq.devices_ids)
            try:
                validate_request(ids, known, MAX_DEVICES_PER_CONTAINER)
            except ValueError as exc:
                raise invalid(f"container {i}: {exc}") from None
            containers.append(ids)
        return containers

    async def allocate(self, resource: str, request: pb.AllocateRequest) -> pb.AllocateResponse:
        # --enable-slow-node: every container gets the step-time notice. Read first, so that nothing is
        # awaited between the allocation and its answer (the report follows the answer: _after_answer).
        envs = await self.slow_node() if self.slow_node is not None else {}
        response = await self._allocate(resource, request)
        for container in response.container_responses:
            container.envs.update(envs)
        return response

    async def _allocate(self, resource: str, request: pb.AllocateRequest) -> pb.AllocateResponse:
        containers = self._validate(resource, request)
        if resource == NPU_CORE:
            return await self._dynamic(containers)
        # Under preset vNPU, a request for every chip of the node is served by the kubelet's ids (the
        # reference's Allocate: there is only one way to give them all).
        whole_node = self.preset_vnpu and sum(map(len, containers)) == len(self.resources.inventory.chips)
        if self.volcano and resource == self._physical() and not whole_node:
            return await self._volcano(resource, containers)
        responses = [self._response(self._devices(ids)) for ids in containers]
        self._after_plain(resource, containers)
        return pb.AllocateResponse(container_responses=responses)

    def _devices(self, ids: Sequence[str], real: Sequence[str] | None = None) -> list[AllocDevice]:
        out = []
        for kubelet_id, real_id in zip(ids, real or ids, strict=False):
            parsed = parse_device_id(real_id)
            out.append(AllocDevice(kubelet_id, parsed.phy_id, parsed.vdev_id))
        return out

    def _family(self) -> ChipFamily:
        infos = list(self.resources.inventory.chips.values())
        if not infos:
            raise AllocationError(Refusal.NO_INVENTORY, "no chip inventory yet")
        return infos[0].family

    def _host_dev_nodes(self) -> frozenset[str]:
        return frozenset(p for p in HOST_DEV_NODES if (self.dev_root / p.lstrip("/")).exists())

    def _ub_devices(self) -> list[str]:
        """Every file (not directory) under the UB device directories, each directory's in name order
        as os.ReadDir gives them (`addDevicesInDir`); a directory that cannot be read adds none."""
        found: list[str] = []
        for directory in UB_DEVICE_DIRS:
            try:
                entries = sorted(os.scandir(self.dev_root / directory.lstrip("/")), key=lambda e: e.name)
            except OSError:
                continue
            found.extend(f"{directory}/{e.name}" for e in entries if not e.is_dir(follow_symlinks=False))
        return found

    def _response(
        self, devices: list[AllocDevice], *, dynamic: bool = False, volcano: bool = False
    ) -> pb.ContainerAllocateResponse:
        inventory = self.resources.inventory
        first = min(inventory.chips.values(), key=lambda c: c.logic_id, default=None)
        family = self._family()
        try:
            alloc: ContainerAlloc = container_response(
                devices, family=family, runtime_mode=self.runtime_mode, dynamic=dynamic,
                # Device nodes are mounted only in direct-mount mode: no stat() of them per call otherwise.
                host_dev_nodes=frozenset() if self.runtime_mode else self._host_dev_nodes(), volcano=volcano,
                logic_by_phy={phy: chip.logic_id for phy, chip in inventory.chips.items()},
                hccl_topo=hccl_topo_path(
                    family, first.board_id if first else None, inventory.main_board_id,
                    inventory.super_pod.super_pod_type,
                ),
                ub_devices=() if self.runtime_mode else self._ub_devices(),
            )  # fmt: skip
        except ValueError as exc:
            raise invalid(str(exc)) from None
        return pb.ContainerAllocateResponse(
            envs=alloc.envs,
            devices=[pb.DeviceSpec(container_path=d.container_path, host_path=d.host_path, permissions=d.permissions)
                     for d in alloc.devices],
        )  # fmt: skip

    # ---- Volcano ----------------------------------------------------------------------------

    async def _volcano(self, resource: str, containers: list[list[str]]) -> pb.AllocateResponse:
        if self.pods is None or self.patcher is None:
            raise AllocationError(Refusal.NO_CLUSTER, "the Volcano path needs the cluster (--kube api)")
        kubelet_ids = [i for ids in containers for i in ids]
        choice = await self._choose(RESOURCE_PREFIX + resource, len(kubelet_ids))
        for reject in choice.rejects:
            log.warning("pod skipped: bad Volcano annotation", extra={"pod": reject.pod.key, "reason": reject.reason})
        if choice.pod is None:
            raise AllocationError(
                Refusal.NO_POD,
                f"no active pod annotated by Volcano for {len(kubelet_ids)} {resource}"
                + (f" ({len(choice.rejects)} with a malformed annotation)" if choice.rejects else ""),
            )
        pod, real = choice.pod, list(choice.devices)
        view = self.board.get(resource)
        known = {d.id for d in view.devices} if view is not None else set()
        if unknown := [r for r in real if r not in known]:
            raise invalid(f"Volcano chose devices this node does not have: {','.join(unknown)}", pod)
        await self._mark_taken(pod)
        # Serve the containers in order with the pod's real devices.
        responses, offset = [], 0
        for ids in containers:
            responses.append(self._response(self._devices(ids, real[offset : offset + len(ids)]), volcano=True))
            offset += len(ids)
        self.resources.volcano_allocated(pod.uid, dict(zip(kubelet_ids, real, strict=True)))

        def settle() -> dict[str, str]:
            log.info("allocated by Volcano", extra={"pod": pod.key, "devices": real, "kubelet_ids": kubelet_ids})
            return self._pod_annotations(pod, resource, real, kubelet_ids)

        self._after_answer(pod, settle)
        return pb.AllocateResponse(container_responses=responses)

    async def _mark_taken(self, pod: PodView) -> None:
        """Set the pod's predicate-time to the maximum on the API server before anything is handed out
        (the reference's getOldestPod -> TryUpdatePodCacheAnnotation): Volcano reads it to know the
        chips are in use. Transient failures are retried (taken_tries, taken_wait_s); when it cannot be
        written, Allocate fails, the kubelet fails the pod's admission and Volcano reschedules it. The
        pod is held in memory meanwhile, so a concurrent Allocate cannot choose it too."""
        assert self.patcher is not None
        self._taken.add(pod.uid)
        try:
            await self.patcher.patch_pod(
                pod.namespace, pod.name, taken_patch(), retries=self.taken_tries - 1, base_delay=self.taken_wait_s
            )
        except Exception as exc:
            self._taken.discard(pod.uid)
            log.error("Volcano pod not marked taken; nothing handed out", extra={"pod": pod.key, "error": str(exc)})
            raise AllocationError(
                Refusal.API_SERVER, f"cannot mark its Volcano allocation taken on the API server: {exc}", pod=pod.key
            ) from None

    async def _choose(self, resource_name: str, count: int, aicore: int | None = None) -> VolcanoChoice:
        """The pod from the cache; if none fits, re-list once (a cold cache) and look again."""
        assert self.pods is not None
        for attempt in range(2):
            # The taken ones are left out here: pick_pod parses only what is left.
            pods = [p for p in self.pods.servable() if p.uid not in self._taken]
            choice = pick_pod(pods, resource_name, count, chip_aicore=aicore)
            if choice.pod is not None or attempt:
                return choice
            await self.pods.refresh()
        raise AssertionError("unreachable")

    def _pod_annotations(
        self, pod: PodView, resource: str, real: Sequence[str], kubelet_ids: Sequence[str]
    ) -> dict[str, str]:
        preset_vnpu = resource not in (self._physical(), NPU_CORE)
        annotations = real_allocation_annotations(real, kubelet_ids, preset_vnpu=preset_vnpu)
        inventory = self.resources.inventory
        rtype, infos = inventory.physical_type, inventory.chips
        duo = any(c.product_type == "Atlas 300I Duo" for c in infos.values())
        key = configuration_key(rtype, atlas_300i_duo=duo) if rtype is not None else None
        if key is not None:
            node = self.node()
            devices, vnpu = config_devices(real, infos)
            # The 950's rack as its chips report it, whatever the pod type (`GetRackID`); -1 elsewhere.
            rack_id = inventory.super_pod.rack_id if rtype is ResourceType.NPU else -1
            annotations[key] = device_configuration(
                pod.name, pod.uid, node.host_ip, devices, vnpu=vnpu, super_pod_id=node.super_pod_id,
                rack_id=rack_id, server_index=node.server_index, server_ip=node.host_ip,
            )  # fmt: skip
        return annotations

    def _after_answer(self, pod: PodView, settle: Callable[[], dict[str, str]]) -> None:
        """What an allocation leaves for after the kubelet has its answer: `settle` logs it and returns
        the pod's annotations (the allocation report), which are then patched onto the pod with retries
        and backoff (libs/common).

        A task's first step runs after the Allocate handler has handed its answer to gRPC, so none of
        this delays the admission. The pod is held in memory meanwhile (no later Allocate can choose
        it again), and stop() awaits the task.
        """
        assert self.patcher is not None
        patcher = self.patcher

        async def finish() -> None:
            try:
                annotations = settle()
            except Exception:  # a bug in building the report: still mark the pod taken (a no-op if it is)
                log.exception("allocation report not built", extra={"pod": pod.key})
                annotations = taken_patch()
            try:
                await patcher.patch_pod(pod.namespace, pod.name, annotations)
            except Exception as exc:  # the allocation stands; the report is what failed
                log.error("could not annotate the allocated pod", extra={"pod": pod.key, "error": str(exc)})

        self._in_background(finish(), f"allocated-{pod.key}")

    def _in_background(self, work: Coroutine[Any, Any, None], name: str) -> None:
        """Run `work` after the answer; kept until done, and awaited (bounded) by stop()."""
        task = asyncio.create_task(work, name=name)
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    # ---- plain path: find the pod through PodResources, then annotate it ----------------------

    def _after_plain(self, resource: str, containers: list[list[str]]) -> None:
        if self.patcher is None or self.podresources_socket is None or self.pods is None:
            return
        self._in_background(self._annotate_plain(resource, containers), "annotate-plain")

    async def _annotate_plain(self, resource: str, containers: list[list[str]]) -> None:
        assert self.patcher is not None and self.podresources_socket is not None and self.pods is not None
        ids = [i for c in containers for i in c]
        found = await find_pod(self.podresources_socket, RESOURCE_PREFIX + resource, set(containers[0]))
        if found is None:
            log.warning("no pod found for an allocation", extra={"resource": resource, "devices": ids})
            return
        namespace, name = found
        pod = await self._cached(found)
        if pod is None:
            log.warning("allocated pod is not in the cache", extra={"pod": f"{namespace}/{name}"})
            return
        real = [parse_device_id(i).chip if resource == self._physical() else i for i in ids]
        try:
            await self.patcher.patch_pod(namespace, name, self._pod_annotations(pod, resource, real, ids))
        except Exception as exc:  # the container runs anyway; the annotation is a report
            log.error("could not annotate the pod", extra={"pod": pod.key, "error": str(exc)})

    async def _cached(self, key: tuple[str, str], within: float = 30.0) -> PodView | None:
        """The pod from the cache, waiting for the watch to bring it: the kubelet can name a pod
        (PodResources) before our watch has delivered it. One re-list after a second, in case the
        watch itself is stuck; then the watch alone (a re-list of a full node is not cheap)."""
        assert self.pods is not None
        loop = asyncio.get_running_loop()
        started = loop.time()
        relisted = False
        while True:
            pod = next((p for p in self.pods.pods() if (p.namespace, p.name) == key), None)
            waited = loop.time() - started
            if pod is not None or waited >= within:
                return pod
            if not relisted and waited >= 1.0:
                relisted = True
                await self.pods.refresh()
                continue
            await asyncio.sleep(0.1)

    # ---- dynamic vNPU (npu-core) ------------------------------------------------------------

    async def _dynamic(self, containers: list[list[str]]) -> pb.AllocateResponse:
        if self.pods is None or self.patcher is None or self.exporter is None:
            raise AllocationError(Refusal.NO_CLUSTER, "dynamic vNPU mode needs the cluster and the exporter")
        cores = [i for ids in containers for i in ids]
        infos = self.resources.inventory.chips
        aicore = max((c.aicore for c in infos.values()), default=0)
        choice = await self._choose(RESOURCE_PREFIX + NPU_CORE, len(cores), aicore)
        for reject in choice.rejects:
            log.warning("pod skipped: bad npu-core annotation", extra={"pod": reject.pod.key, "reason": reject.reason})
        if choice.pod is None or choice.dynamic is None:
            raise AllocationError(Refusal.NO_POD, f"no pending pod annotated for {len(cores)} npu-core")
        pod, want = choice.pod, choice.dynamic
        self._taken.add(pod.uid)
        chips: list[ChipInfo] = []
        for phy in want.phy_ids:
            if phy not in infos:
                raise invalid(f"chip {phy} is not on this node", pod)
            chips.append(infos[phy])
        real: list[str]
        if want.template is not None:
            chip = chips[0]
            try:
                vnpu = await self.exporter.create_vnpu(chip.logic_id, want.template)
            except ExporterError as exc:
                self._taken.discard(pod.uid)
                raise AllocationError(Refusal.NO_CAPACITY, exc.detail, pod=pod.key) from None
            name = vnpu_device_id(chip.rtype, vnpu.suffix, vnpu.vdev_id, chip.phy_id)
            self._created[name] = time.monotonic()
            devices = [AllocDevice(core, chip.phy_id, vnpu.vdev_id) for core in cores]
            real, vfg = [name], {name: vnpu.vfg_id}
        else:
            devices = [AllocDevice(core, chips[i % len(chips)].phy_id) for i, core in enumerate(cores)]
            real, vfg = [c.name for c in chips], {}
        responses, offset = [], 0
        for ids in containers:
            responses.append(self._response(devices[offset : offset + len(ids)], dynamic=True, volcano=True))
            offset += len(ids)
        self.resources.cores_allocated(pod.uid, {d.kubelet_id: d.phy_id for d in devices})

        def settle() -> dict[str, str]:
            log.info("allocated npu-core", extra={"pod": pod.key, "real": real, "cores": len(cores)})
            return {**taken_patch(), **real_allocation_annotations(real, cores, vfg_ids=vfg)}

        self._after_answer(pod, settle)
        return pb.AllocateResponse(container_responses=responses)

    def forget(self, present: Container[str]) -> None:
        """Drop what we remember of pods that are gone (`present`: the uids still there) to keep memory
        bounded. Walks what we remember, not `present` (the node's pods: maybe 10,000)."""
        self._taken = {uid for uid in self._taken if uid in present}

    async def collect_vnpus(self, grace_s: float) -> list[str]:
        """Dynamic mode: destroy the vNPUs no pending or running pod holds.

        A vNPU we created less than `grace_s` ago is kept: its pod's annotation may not have
        reached the cache yet. Returns the names destroyed.
        """
        if self.exporter is None or self.pods is None:
            return []
        held: set[str] = set()
        for pod in self.pods.pods():
            if pod.phase in ALLOCATION_PHASES:
                held |= {item.split("_")[0] for item in pod.annotations.get(ASCEND_REAL, "").split(",") if item}
        now = time.monotonic()
        destroyed = []
        for info in list(self.resources.inventory.chips.values()):
            for vnpu in info.vnpus:
                name = vnpu_device_id(info.rtype, vnpu.suffix, vnpu.vdev_id, info.phy_id)
                if name in held or now - self._created.get(name, -grace_s) < grace_s:
                    continue
                try:
                    await self.exporter.destroy_vnpu(info.logic_id, vnpu.vdev_id)
                except (ExporterError, httpx.HTTPError) as exc:
                    log.warning("could not destroy an unused vNPU", extra={"vnpu": name, "error": str(exc)})
                    continue
                self._created.pop(name, None)
                destroyed.append(name)
                log.info("destroyed an unused vNPU", extra={"vnpu": name, "chip": info.name})
        return destroyed

    async def stop(self, flush_s: float = 5.0) -> None:
        """Let the pending pod patches finish (bounded), then cancel what is left."""
        if self._background:
            await asyncio.wait(list(self._background), timeout=flush_s)
        for task in list(self._background):
            task.cancel()
        await asyncio.gather(*self._background, return_exceptions=True)
