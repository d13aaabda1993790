"""What the resource manager gives its readers, and the interfaces they see it through.

The manager (resources.py) owns the plugin's resource state. The Kubernetes bridge reads an
`Inventory`, a frozen snapshot replaced at each change (`InventorySource`); the allocator reads
it too and reports what it allocated through `Resources`' two methods. Listeners (the metrics)
are told what was published. Nothing outside the manager writes its state.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Protocol

from ascend_common.chips import ResourceType
from ascend_common.schemas.exporter import Chip
from ascend_common.superpod import NO_SUPER_POD, SuperPod

from ascend_device_plugin.inventory.views import AdvertisedDevice
from ascend_device_plugin.model.chip_pod import ChipHealth, ChipInfo


@dataclass(frozen=True)
class Inventory:
    """The node's chips as last recomputed; its mappings are read-only views that never change."""

    physical_type: ResourceType | None  # the node's physical resource; None before any chip
    chips: Mapping[int, ChipInfo]  # by phy id, with their final health
    reported: Mapping[int, Chip]  # by logic id, as the exporter last reported them
    # Volcano path: kubelet device id -> the real device Volcano chose for the pod behind it.
    volcano_map: Mapping[str, str]
    super_pod: SuperPod = NO_SUPER_POD  # what the chips report of the node's super pod
    main_board_id: int | None = None  # the node's main board (None: no chip reported a valid one)
    # By phy id: each chip's health decision and its reason (the DRA health stream's message).
    health: Mapping[int, ChipHealth] = field(default_factory=lambda: MappingProxyType({}))
    exporter_lost: bool = False  # the exporter's grace period is over: no chip's state is known

    @classmethod
    def empty(cls) -> Inventory:
        return cls(None, MappingProxyType({}), MappingProxyType({}), MappingProxyType({}))


class InventorySource(Protocol):
    """The resource manager as the Kubernetes bridge sees it: the latest snapshot, read-only."""

    @property
    def inventory(self) -> Inventory: ...


class Resources(InventorySource, Protocol):
    """The resource manager as the allocator sees it: the snapshot, and two allocations to report."""

    def volcano_allocated(self, pod_uid: str, kubelet_to_real: Mapping[str, str]) -> None:
        """The pod's kubelet ids stand for these real devices (their health follows them)."""

    def cores_allocated(self, pod_uid: str, core_to_phy: Mapping[str, int]) -> None:
        """Dynamic vNPU mode: the pod's npu-core ids live on these chips (by phy id)."""


class InventoryListener(Protocol):
    """Told what the manager publishes (metrics.py listens)."""

    def devices_published(self, resource: str, devices: tuple[AdvertisedDevice, ...]) -> None: ...
