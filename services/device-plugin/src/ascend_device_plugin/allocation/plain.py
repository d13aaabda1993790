"""The plain path's report: the kubelet chose the ids, so the pod is found afterwards through the
kubelet's PodResources API, then annotated like any other allocation."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from ascend_common.chips import RESOURCE_PREFIX
from ascend_common.naming import parse_device_id

from ascend_device_plugin.allocation.report import PodSource, Report, whole_chips
from ascend_device_plugin.model.chip_pod import PodView

log = logging.getLogger(__name__)

# (resource, some of the ids) -> the (namespace, name) of the pod that got them, or None: the
# kubelet's PodResources lookup (kubelet.podresources.find_pod), which sits a layer above.
FindPod = Callable[[str, set[str]], Awaitable[tuple[str, str] | None]]


@dataclass
class PlainReport:
    report: Report
    pods: PodSource | None = None
    find_pod: FindPod | None = None

    def after(self, resource: str, containers: list[list[str]]) -> None:
        if self.report.patcher is None or self.find_pod is None or self.pods is None:
            return
        self.report.in_background(self._annotate(resource, containers), "annotate-plain")

    async def _annotate(self, resource: str, containers: list[list[str]]) -> None:
        assert self.report.patcher is not None and self.find_pod is not None and self.pods is not None
        ids = [i for c in containers for i in c]
        found = await self.find_pod(RESOURCE_PREFIX + resource, set(containers[0]))
        if found is None:
            log.warning("no pod found for an allocation", extra={"resource": resource, "devices": ids})
            return
        namespace, name = found
        pod = await self._cached(found)
        if pod is None:
            log.warning("allocated pod is not in the cache", extra={"pod": f"{namespace}/{name}"})
            return
        real = [parse_device_id(i).chip if whole_chips(self.report.resources, resource) else i for i in ids]
        try:
            await self.report.write(pod, self.report.annotations(pod, resource, real, ids))
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
