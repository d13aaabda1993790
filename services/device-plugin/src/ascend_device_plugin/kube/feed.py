"""The node's pods from the shared pod source (one watch, slim records, or the kubelet's /pods) into
the index (kube/pods.py), and who is told: each event as it comes, each pod gone, and the pods as a
whole (a burst of events, a re-list or a patch storm, becomes one `on_pods`)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field

from ascend_common.adapters.kube.client import ApiClient
from ascend_common.adapters.kubelet.source import KubeletSource
from ascend_common.adapters.pod_source import PodSource, build_pod_source
from ascend_common.pods import FINISHED_PHASES, SlimPod

from ascend_device_plugin.kube.pods import NodePods, pod_view
from ascend_device_plugin.model.chip_pod import PodView

POD_DEBOUNCE_S = 0.01


@dataclass
class PodFeed:
    index: NodePods
    node_name: str
    # Told once a burst of events settled, and after refresh().
    on_pods: Callable[[], None]
    # Told every pod event as it comes (the annotation repair compares each with what it wrote).
    on_pod_event: Callable[[str, PodView], None] | None = None
    # Told when a pod is deleted or reaches a finished phase (soft share frees its directory then).
    on_pod_gone: Callable[[PodView], None] | None = None
    # --pod-source kubelet: the kubelet whose /pods is read (None: the API server's list+watch).
    kubelet: KubeletSource | None = None
    cache: PodSource | None = field(init=False, default=None)  # once there is an ApiClient
    _pending: asyncio.TimerHandle | None = field(init=False, default=None)

    # The allocation paths' PodSource (allocation.report): they read the index and re-list through here.
    def pods(self) -> list[PodView]:
        return self.index.pods()

    def servable(self) -> list[PodView]:
        return self.index.servable()

    async def start(self, api: ApiClient) -> None:
        if self.cache is None:
            self.cache = build_pod_source(api, self.node_name, self.kubelet)
            self.cache.on_change.append(self.pod_changed)
        await self.cache.start()

    def pod_changed(self, kind: str, pod: SlimPod) -> None:
        old, view = self.index.apply(kind, pod)
        if self.on_pod_event is not None:
            self.on_pod_event(kind, view if view is not None else pod_view(pod))
        if self.on_pod_gone is not None:
            if view is None:
                self.on_pod_gone(pod_view(pod))  # the deleted object's last state
            elif view.phase in FINISHED_PHASES and (old is None or old.phase not in FINISHED_PHASES):
                self.on_pod_gone(view)
        if self._pending is None:
            self._pending = asyncio.get_running_loop().call_later(POD_DEBOUNCE_S, self._flush)

    def _flush(self) -> None:
        self._pending = None
        self.on_pods()

    async def wait_synced(self, timeout: float) -> bool:  # noqa: ASYNC109 - a bounded wait is the API
        """True once the pod cache has its first list (False: not within `timeout` s)."""
        return self.cache is not None and await self.cache.wait_synced(timeout)

    async def refresh(self) -> None:
        if self.cache is not None:
            await self.cache.relist(timeout=2.0)
        self._flush()

    async def stop(self) -> None:
        if self._pending is not None:
            self._pending.cancel()
        if self.cache is not None:
            await self.cache.stop()
