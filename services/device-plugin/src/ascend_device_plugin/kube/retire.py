"""The resources an earlier release's plugin advertised for chips a node type now offers under
another name, taken off the node's capacity once (the reference's RemoveOldResource, at start, on
a node that is not of an old device type): the kubelet never takes a resource nobody advertises."""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass, field

from ascend_common.adapters.kube.client import KubeApiError
from ascend_common.adapters.kube.patch import SlimNode, remove_node_resources
from ascend_common.chips import RESOURCE_PREFIX, ResourceType

from ascend_device_plugin.kube.connection import ApiConnection

log = logging.getLogger(__name__)
RETIRE_RETRY_S = 60.0  # a failed removal of an earlier generation's resource is tried again so often
# The 950 generation is `huawei.com/npu` where it was `huawei.com/Ascend910`.
RETIRED_RESOURCES = {ResourceType.NPU: (RESOURCE_PREFIX + ResourceType.ASCEND910.value,)}


@dataclass
class OldResources:
    connection: ApiConnection
    node_name: str
    retry_s: float = RETIRE_RETRY_S
    _retire: tuple[str, ...] = field(init=False, default=())  # of the node's type, once its chips are known
    _retired: bool = field(init=False, default=False)
    _task: asyncio.Task[None] | None = field(init=False, default=None)

    def chips_known(self, rtype: ResourceType | None) -> None:
        """The node's physical resource type (None: not known yet)."""
        if rtype is not None:
            self._retire = RETIRED_RESOURCES.get(rtype, ())
            self._try()

    def node_changed(self, old: SlimNode | None, new: SlimNode) -> None:
        self._try()

    def _try(self) -> None:
        if not self._retire or self._retired or (self._task is not None and not self._task.done()):
            return
        self._task = asyncio.create_task(self._remove(self._retire), name="remove-old-resource")

    async def _remove(self, resources: tuple[str, ...]) -> None:
        node = self.node_name
        while True:
            try:
                removed = await remove_node_resources(self.connection.client, node, resources)
                break
            except KubeApiError as exc:
                log.error("cannot remove the old resource from the node", extra={"node": node, "error": str(exc)})
            await asyncio.sleep(self.retry_s)  # only while it fails: once removed, never again
        self._retired = True
        if removed:
            log.info("old resource removed from the node", extra={"node": node, "resources": removed})
        else:
            log.info("old resource not in the node's capacity", extra={"node": node, "resources": list(resources)})

    def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
