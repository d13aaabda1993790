"""The node's labels and annotations (contract section 9), rendered from the chips, the exporter's
NodeInfo and the Node's InternalIP, written only when their bytes differ, one write at a time."""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass, field

from ascend_common.adapters.kube.client import KubeApiError
from ascend_common.adapters.kube.patch import SlimNode, patch_node

from ascend_device_plugin.inventory.snapshot import InventorySource
from ascend_device_plugin.kube.connection import ApiConnection
from ascend_device_plugin.kube.node import NodeFollower
from ascend_device_plugin.levels.level_source import LevelSource
from ascend_device_plugin.node_labels import node_annotations, node_labels

log = logging.getLogger(__name__)
NODE_FIRST_LIST_S = 5.0  # how long the first labels wait for the Node's watch to list it


@dataclass
class NodeLabels:
    connection: ApiConnection
    node: NodeFollower
    # Each 950 chip's `levelList` for baseDeviceInfos (None: no levels published).
    levels: LevelSource | None = None
    # What the labels were last asked for (chips_changed), so that a change of the Node's InternalIP
    # or of the exporter's NodeInfo re-renders them from the same inventory.
    _inputs: tuple[InventorySource, str | None] | None = field(init=False, default=None)
    _again: bool = field(init=False, default=False)  # asked again while a write ran: render once more
    _written: dict[str, str] = field(init=False, default_factory=dict)
    _task: asyncio.Task[None] | None = field(init=False, default=None)

    def chips_changed(self, source: InventorySource, driver_version: str | None) -> None:
        """Write node labels and annotations when they change."""
        self._inputs = (source, driver_version)
        self.relabel()

    def node_changed(self, old: SlimNode | None, new: SlimNode) -> None:
        old_ip = old.internal_ip if old is not None else ""
        if new.internal_ip != old_ip and self.levels is not None:
            # A card's or a plain server's level 0 is named by the InternalIP.
            log.info("node InternalIP changed; re-rendering the levelList",
                     extra={"node": self.node.node_name, "old": old_ip, "new": new.internal_ip})  # fmt: skip
            self.relabel()

    def relabel(self) -> None:
        """Render the labels and annotations again from the last chips_changed inputs (the exporter's
        NodeInfo or the Node's InternalIP changed); written only when their bytes differ."""
        if self._inputs is None:
            return  # no chips yet: the first chips_changed renders
        if self._task is not None and not self._task.done():
            self._again = True  # one write at a time; the running one renders once more
            return
        self._task = asyncio.create_task(self._rounds(), name="node-labels")

    def settled(self) -> bool:
        """No render under way (tests wait for it)."""
        return self._task is not None and self._task.done()

    async def _rounds(self) -> None:
        while self._inputs is not None:
            self._again = False
            await self._write(*self._inputs)
            if not self._again:
                return

    async def _write(self, source: InventorySource, version: str | None) -> None:
        inventory = source.inventory  # as the task starts: changes made meanwhile were skipped above
        infos = sorted(inventory.chips.values(), key=lambda c: c.phy_id)
        chips = [c for c in inventory.reported.values() if c.state == "ok"]
        if not infos or not chips:
            return
        first = chips[0]
        hbm = first.dynamic.hbm.value if first.dynamic and first.dynamic.hbm.is_ok else None
        chip_name = first.static.chip_name.value or ""
        pod = inventory.super_pod
        labels = node_labels(
            chip_name,
            infos[0].family,
            infos[0].aicore,
            version,
            infos[0].rtype,
            hbm.total_mb if hbm else None,
            self.node.labels(),
            board_id=first.static.board_id.value if first.static.board_id.is_ok else None,
            product_types=[c.product_type for c in infos],
            super_pod=pod,
        )
        levels = None
        if self.levels is not None:
            # A card's or a plain server's level 0 is named by the InternalIP: wait for the
            # Node's first list rather than publish "" until the next chip change.
            await self.node.wait_listed(NODE_FIRST_LIST_S)
            await self.levels.load_topology(inventory)
            levels = self.levels.levels(inventory)
        annotations = node_annotations(infos, pod, main_board_id=inventory.main_board_id, levels=levels)
        wanted = {**{f"l:{k}": v for k, v in labels.items()}, **{f"a:{k}": v for k, v in annotations.items()}}
        if wanted == self._written:
            return
        name = self.node.node_name
        try:
            self.node.wrote(await patch_node(self.connection.client, name, labels=labels, annotations=annotations))
            self._written = wanted
        except KubeApiError as exc:
            log.warning("cannot label the node", extra={"node": name, "error": str(exc)})

    def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
