"""Annotation repair, driven by the pod cache: the report the plugin wrote on a pod is written back
when a pod event shows it edited or lost (allocation/repair_rules.py has the rules).

What we wrote is kept in memory per pod uid: recorded when the allocation report's patch succeeds
(`Report.write`), dropped when the pod is deleted or finishes. A restarted plugin has no record: it
adopts what each allocated pod (Pending or Running, with kltDev) carries when the cache first shows
it, so an edit made while the plugin was away stands (the reference, which recomputes from the
kubelet's PodResources every 5 s, corrects only a pod that lost AscendReal).

One repair per pod at a time; its patch brings a MODIFIED event of its own, which checks again.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Protocol

from ascend_common.pods import FINISHED_PHASES

from ascend_device_plugin.allocation.repair_rules import adoptable, kept, repair_patch
from ascend_device_plugin.model.chip_pod import PodView

log = logging.getLogger(__name__)


class Patcher(Protocol):
    """Writes annotations on a pod (the pod cache's client): the report's writes and the repairs."""

    async def patch_pod(
        self, namespace: str, name: str, annotations: dict[str, str], *, retries: int = 3, base_delay: float = 0.2
    ) -> None: ...


SHOWN_CHARS = 200  # of an edited value, in the log line (a configuration annotation can be kilobytes)


@dataclass
class AnnotationRepair:
    patcher: Patcher
    written: dict[str, dict[str, str]] = field(default_factory=dict)  # pod uid -> the repaired keys we wrote
    _repairs: dict[str, asyncio.Task[None]] = field(default_factory=dict)  # by pod uid, while in flight

    def wrote(self, pod: PodView, annotations: Mapping[str, str]) -> None:
        """The allocation report reached the pod (a later container's report adds to the record)."""
        if values := kept(annotations):
            self.written.setdefault(pod.uid, {}).update(values)

    def pod_changed(self, kind: str, pod: PodView) -> None:
        """One pod event of the cache (ADDED, MODIFIED, DELETED), in order."""
        if kind == "DELETED" or pod.phase in FINISHED_PHASES:
            self.written.pop(pod.uid, None)
            return
        written = self.written.get(pod.uid)
        if written is None:
            if (adopted := adoptable(pod)) is not None:
                self.written[pod.uid] = adopted
            return
        if pod.deleting:
            return  # its devices are being freed: left alone
        patch = repair_patch(written, pod)
        if not patch or pod.uid in self._repairs:
            return
        log.warning(
            "pod annotations edited or lost: writing them back",
            extra={
                "pod": pod.key,
                "annotations": sorted(patch),
                "found": {k: (pod.annotations[k][:SHOWN_CHARS] if k in pod.annotations else None) for k in patch},
            },
        )
        task = asyncio.create_task(self._repair(pod, patch), name=f"repair-{pod.key}")
        self._repairs[pod.uid] = task
        task.add_done_callback(lambda _: self._repairs.pop(pod.uid, None))

    async def _repair(self, pod: PodView, patch: dict[str, str]) -> None:
        try:
            # Conflicts, throttling and server errors are retried with backoff (adapters.kube.patch).
            await self.patcher.patch_pod(pod.namespace, pod.name, patch)
        except Exception as exc:  # the pod keeps running; the next pod event tries again
            log.error("could not repair the pod's annotations", extra={"pod": pod.key, "error": str(exc)})
        else:
            log.info("pod annotations repaired", extra={"pod": pod.key, "annotations": sorted(patch)})

    async def stop(self) -> None:
        for task in list(self._repairs.values()):
            task.cancel()
        await asyncio.gather(*self._repairs.values(), return_exceptions=True)
