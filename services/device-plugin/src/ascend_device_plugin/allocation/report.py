"""The allocation report: the annotations an allocated pod gets (AscendReal, kltDev, the device
configuration), patched onto it after the kubelet has its answer, with retries and backoff; and the
cluster as the allocation paths see it (PodSource, Patcher, HostFacts)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Coroutine, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from ascend_common.chips import ResourceType
from ascend_common.naming import MIXED_310P_RESOURCES, NPU_CORE

from ascend_device_plugin.allocation.annotations import (
    config_devices,
    configuration_key,
    device_configuration,
    real_allocation_annotations,
    taken_patch,
)
from ascend_device_plugin.allocation.repair import AnnotationRepair, Patcher
from ascend_device_plugin.inventory.snapshot import Resources
from ascend_device_plugin.levels.level_source import LevelSource
from ascend_device_plugin.model.chip_pod import PodView

log = logging.getLogger(__name__)


class PodSource(Protocol):
    def pods(self) -> list[PodView]: ...

    def servable(self) -> list[PodView]:
        """The cached pods that pass volcano.annotations.may_serve: the only ones the Volcano path can choose."""

    async def refresh(self) -> None:
        """Re-list now (a cold cache may not have the pod an Allocate is for yet)."""


@dataclass(frozen=True)
class HostFacts:
    host_ip: str = ""  # the node's InternalIP
    super_pod_id: int = -1
    server_index: str = ""


def physical(resources: Resources) -> str | None:
    """The node's physical resource name (None before the inventory)."""
    rtype = resources.inventory.physical_type
    return rtype.value if rtype is not None else None


def whole_chips(resources: Resources, resource: str) -> bool:
    """Whether the resource's ids stand for whole chips: the physical resource, or a 310P card
    product's under mixed insert."""
    return resource == physical(resources) or resource in MIXED_310P_RESOURCES.values()


@dataclass
class Report:
    resources: Resources
    patcher: Patcher | None = None
    node: Callable[[], HostFacts] = HostFacts
    levels: LevelSource | None = None  # each 950 chip's `levelList`; None: none published
    repair: AnnotationRepair | None = None  # told what reached each pod, to write it back if edited or lost
    _background: set[asyncio.Task[None]] = field(default_factory=set)

    def annotations(
        self, pod: PodView, resource: str, real: Sequence[str], kubelet_ids: Sequence[str]
    ) -> dict[str, str]:
        preset_vnpu = not whole_chips(self.resources, resource) and resource != NPU_CORE
        annotations = real_allocation_annotations(real, kubelet_ids, preset_vnpu=preset_vnpu)
        inventory = self.resources.inventory
        rtype, infos = inventory.physical_type, inventory.chips
        duo = any(c.product_type == "Atlas 300I Duo" for c in infos.values())
        key = configuration_key(rtype, atlas_300i_duo=duo) if rtype is not None else None
        if key is not None:
            node = self.node()
            levels = self.levels.levels(inventory) if self.levels is not None else None
            devices, vnpu = config_devices(real, infos, levels)
            # The 950's rack as its chips report it, whatever the pod type (`GetRackID`); -1 elsewhere.
            rack_id = inventory.super_pod.rack_id if rtype is ResourceType.NPU else -1
            annotations[key] = device_configuration(
                pod.name, pod.uid, node.host_ip, devices, vnpu=vnpu, super_pod_id=node.super_pod_id,
                rack_id=rack_id, server_index=node.server_index, server_ip=node.host_ip,
            )  # fmt: skip
        return annotations

    def after_answer(self, pod: PodView, settle: Callable[[], dict[str, str]]) -> None:
        """What an allocation leaves for after the kubelet has its answer: `settle` logs it and returns
        the pod's annotations (the allocation report), which are then patched onto the pod with retries
        and backoff (libs/common).

        A task's first step runs after the Allocate handler has handed its answer to gRPC, so none of
        this delays the admission. The pod is held in memory meanwhile (no later Allocate can choose
        it again), and stop() awaits the task.
        """
        assert self.patcher is not None

        async def finish() -> None:
            try:
                annotations = settle()
            except Exception:  # a bug in building the report: still mark the pod taken (a no-op if it is)
                log.exception("allocation report not built", extra={"pod": pod.key})
                annotations = taken_patch()
            try:
                await self.write(pod, annotations)
            except Exception as exc:  # the allocation stands; the report is what failed
                log.error("could not annotate the allocated pod", extra={"pod": pod.key, "error": str(exc)})

        self.in_background(finish(), f"allocated-{pod.key}")

    async def write(self, pod: PodView, annotations: dict[str, str]) -> None:
        """Patch the report onto the pod (retried with backoff), then remember it for repair."""
        assert self.patcher is not None
        await self.patcher.patch_pod(pod.namespace, pod.name, annotations)
        if self.repair is not None:
            self.repair.wrote(pod, annotations)

    def in_background(self, work: Coroutine[Any, Any, None], name: str) -> None:
        """Run `work` after the answer; kept until done, and awaited (bounded) by stop()."""
        task = asyncio.create_task(work, name=name)
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    async def stop(self, flush_s: float = 5.0) -> None:
        """Let the pending pod patches finish (bounded), then cancel what is left."""
        if self._background:
            await asyncio.wait(list(self._background), timeout=flush_s)
        for task in list(self._background):
            task.cancel()
        await asyncio.gather(*self._background, return_exceptions=True)
