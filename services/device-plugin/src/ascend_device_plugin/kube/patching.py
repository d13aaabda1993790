"""The pod patches the allocation report and its repair write (libs/common's patch helper retries
conflicts, throttling and server errors with backoff)."""

from __future__ import annotations

from dataclasses import dataclass

from ascend_common.adapters.kube.patch import patch_pod_annotations

from ascend_device_plugin.kube.connection import ApiConnection


@dataclass
class PodPatcher:
    connection: ApiConnection

    async def patch_pod(
        self, namespace: str, name: str, annotations: dict[str, str], *, retries: int = 3, base_delay: float = 0.2
    ) -> None:
        await patch_pod_annotations(
            self.connection.client, namespace, name, annotations, retries, base_delay=base_delay
        )
