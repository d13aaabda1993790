"""What a change of each input does to the plugin: the exporter's chips and NodeInfo, the fault-manager's
verdicts, the node's pods. The followers call these; app.py only connects them."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Container, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ascend_common.adapters.lifecycle import TaskScope
from ascend_common.schemas.exporter import Chip, NodeInfo
from ascend_common.schemas.verdict import ChipVerdict

from ascend_device_plugin.kubelet.servers import ResourceServers
from ascend_device_plugin.resources.manager import ResourceManager
from ascend_device_plugin.softshare.dirs import SoftShareDirs

if TYPE_CHECKING:
    # Only with a cluster (the Kubernetes client is most of an offline plugin's memory) or DRA.
    from ascend_device_plugin.handover import DraHandover
    from ascend_device_plugin.kube.edge import KubeEdge
    from ascend_device_plugin.kube.pods import NodePods

GRACE_CHECK_S = 0.5


class SoftShareRefused(ValueError):
    """The node's chips cannot take a mode that is on: soft share (softshare/switch.soft_share_refusal)
    or 310P mixed insert (resources/mixed.card_usage_refusal)."""


@dataclass
class ChipInputs:
    manager: ResourceManager
    servers: ResourceServers
    loops: TaskScope  # where a refusal after start ends the plugin
    node_info: Callable[[], NodeInfo | None]  # the exporter follower's NodeInfo
    volcano: bool = False  # --volcano-type: the allocations are restored from the pods' annotations
    pods: NodePods | None = None  # with a cluster: the node's pods
    kube: KubeEdge | None = None  # with a cluster: the node's labels and old resources follow the chips
    handover: DraHandover | None = None  # with DRA: the slice looks again after a fault may have changed
    started: bool = False  # start() checked the chips it saw; later chips are checked as they come
    _refused: bool = field(init=False, default=False)

    def chips_changed(self, changed: Mapping[int, Chip]) -> None:
        self.manager.set_chips(changed)
        self.fault_may_have_changed()
        if (reason := self.manager.start_refusal()) is not None:
            # Before start() has checked, it refuses (exit 2); after, the plugin stops (exit 1) and
            # serves nothing of these chips meanwhile.
            if self.started and not self._refused:
                self._refused = True
                self.loops.essential(_refuse(reason), "soft-share-check")
            return
        if self.pods is not None and self.volcano:
            self.manager.restore_volcano(self.pods.allocated())
        self.servers.ensure()
        if self.kube is not None:
            node = self.node_info()
            version = node.dcmi_version.value if node is not None and node.dcmi_version.is_ok else None
            self.kube.chips_changed(self.manager, version)

    def node_changed(self, node: NodeInfo) -> None:
        # The levelList's level 3 comes from NodeInfo's NIC mapping and addresses (LevelSource reads
        # the follower's node); the labels are re-rendered and written only if their bytes changed.
        if self.kube is not None:
            self.kube.labels.relabel()

    def verdicts_changed(self, verdicts: Mapping[str, ChipVerdict], connected: bool) -> None:
        self.manager.set_verdicts(verdicts, connected)
        self.fault_may_have_changed()

    def fault_may_have_changed(self) -> None:
        # A faulty chip's fault level (its taint's value and effect) can change while it stays
        # Unhealthy, which wakes nothing through the device lists: the slice looks again (a write
        # only if its devices differ).
        if self.handover is not None:
            self.handover.kick()

    async def watch_exporter(self, unreachable_for: Callable[[], float], grace_s: float) -> None:
        """The chips turn Unhealthy once the exporter has been unreachable for longer than `grace_s`."""
        while True:
            self.manager.set_exporter_lost(unreachable_for() > grace_s)
            await asyncio.sleep(GRACE_CHECK_S)


@dataclass
class PodInputs:
    manager: ResourceManager
    pods: NodePods
    forget_taken: Callable[[Container[str]], None]  # the allocator's memory of pods taken
    volcano: bool = False
    handover: DraHandover | None = None
    soft_share_dirs: SoftShareDirs | None = None

    def pods_changed(self) -> None:
        if self.volcano:
            self.manager.restore_volcano(self.pods.allocated())
        self.manager.set_pods(
            self.pods.pods(), in_use_for_health=self.pods.in_use_for_health(), holding=self.pods.holding()
        )
        self.forget_taken(self.pods.uids())
        if self.handover is not None:
            self.handover.pods_changed(self.pods.pods())
        if self.soft_share_dirs is not None:
            self.soft_share_dirs.forget(self.pods.uids())


async def _refuse(reason: str) -> None:
    raise SoftShareRefused(reason)
