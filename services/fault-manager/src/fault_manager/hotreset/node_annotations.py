"""The node object's annotations, where hot reset keeps ResetInfo: the API server, or files (offline)."""

from __future__ import annotations

from collections.abc import Mapping

from ascend_common.adapters.kube.client import ApiClient, KubeNotFound
from ascend_common.adapters.kube.configmaps import OfflineConfigMaps
from ascend_common.adapters.kube.patch import get_node, patch_node

from fault_manager.hotreset.reset_info import RESET_INFO_ANNOTATION


class ApiNodeAnnotations:
    def __init__(self, api: ApiClient, node: str) -> None:
        self._api = api
        self._node = node

    async def read(self) -> Mapping[str, str] | None:
        try:
            return (await get_node(self._api, self._node)).annotations
        except KubeNotFound:  # no node object: nothing was left on it
            return None

    async def write_reset_info(self, info: str) -> None:
        await patch_node(self._api, self._node, annotations={RESET_INFO_ANNOTATION: info})


class OfflineNodeAnnotations:
    def __init__(self, objects: OfflineConfigMaps, node: str) -> None:
        self._objects = objects
        self._node = node

    async def read(self) -> Mapping[str, str] | None:
        return await self._objects.node_annotations(self._node)

    async def write_reset_info(self, info: str) -> None:
        await self._objects.annotate_node(self._node, {RESET_INFO_ANNOTATION: info})
