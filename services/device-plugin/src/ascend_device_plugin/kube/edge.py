"""The kube edge's pieces together where the plugin needs them so: start and stop in order (the
connection first, then the pod feed and the Node's watch over it; on stop the connection last), and
what a change of the chips does to the node."""

from __future__ import annotations

from dataclasses import dataclass

from ascend_device_plugin.inventory.snapshot import InventorySource
from ascend_device_plugin.kube.connection import ApiConnection
from ascend_device_plugin.kube.feed import PodFeed
from ascend_device_plugin.kube.labels import NodeLabels
from ascend_device_plugin.kube.node import NodeFollower
from ascend_device_plugin.kube.retire import OldResources


@dataclass
class KubeEdge:
    connection: ApiConnection
    feed: PodFeed
    node: NodeFollower
    labels: NodeLabels
    retire: OldResources

    def chips_changed(self, source: InventorySource, driver_version: str | None) -> None:
        """The node follows its chips: an earlier generation's resources come off it once its chips
        say its type, and its labels and annotations are written when they change."""
        self.retire.chips_known(source.inventory.physical_type)
        self.labels.chips_changed(source, driver_version)

    async def start(self) -> None:
        api = await self.connection.open()
        await self.feed.start(api)
        self.node.start(api)

    async def stop(self) -> None:
        self.labels.stop()
        self.retire.stop()
        await self.feed.stop()
        await self.node.stop()
        await self.connection.close()
