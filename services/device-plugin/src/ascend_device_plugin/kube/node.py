"""The node's own Node, watched by name: its InternalIP, labels and annotations, and the facts the
allocation report takes from it; who reacts to a change of it is told (old, new)."""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from ascend_common.adapters.kube.client import ApiClient, core_v1
from ascend_common.adapters.kube.patch import SlimNode, slim_node
from ascend_common.adapters.kube.watch import WatchedObject
from ascend_common.gojson import INT32

from ascend_device_plugin.allocation.report import HostFacts

log = logging.getLogger(__name__)
NodeListener = Callable[[SlimNode | None, SlimNode], None]


@dataclass
class NodeFollower:
    node_name: str
    # Told each change, in order. A list the build connects: the labels read this Node and write it back.
    on_change: list[NodeListener] = field(default_factory=list)
    node: SlimNode | None = None
    watch: WatchedObject | None = field(init=False, default=None)  # once there is an ApiClient

    def start(self, api: ApiClient) -> None:
        self.watch = WatchedObject("node", core_v1(api).list_node, name=self.node_name)
        self.watch.on_change.append(self._changed)
        self.watch.start()

    def _changed(self) -> None:
        obj = self.watch.object if self.watch is not None else None
        if obj is None:
            log.warning("the node is not in the API server", extra={"node": self.node_name})
            return
        old, self.node = self.node, slim_node(obj)
        for listener in self.on_change:
            listener(old, self.node)

    def wrote(self, node: SlimNode) -> None:
        """The Node as a patch of it answered."""
        self.node = node

    async def wait_listed(self, timeout: float) -> None:  # noqa: ASYNC109 - a bounded wait is the API
        """Until the Node's first list, if it has not been seen yet (at most `timeout` s)."""
        if self.node is None and self.watch is not None:
            await self.watch.wait_synced(timeout)

    def internal_ip(self) -> str:
        return self.node.internal_ip if self.node is not None else ""

    def labels(self) -> Mapping[str, str]:
        return self.node.labels if self.node is not None else {}

    def facts(self) -> HostFacts:
        if self.node is None:
            return HostFacts()
        a = self.node.annotations
        return HostFacts(
            host_ip=self.node.internal_ip,
            super_pod_id=_int(a.get("superPodID"), -1),
            server_index=a.get("serverIndex", ""),
        )

    async def stop(self) -> None:
        if self.watch is not None:
            await self.watch.stop()


def _int(value: str | None, default: int) -> int:
    """An int32 from a node annotation (it goes into the rank table, an int32 for its readers), else `default`."""
    try:
        number = int(value) if value is not None else default
    except ValueError:
        return default
    return number if INT32[0] <= number <= INT32[1] else default
