"""Allocate on the Volcano path: serve the containers with the devices Volcano wrote on the oldest
pending pod, which is marked taken inside the call (the kubelet's admission waits for it, as in the
reference); the allocation report follows the answer."""

from __future__ import annotations

import logging
from dataclasses import dataclass

from ascend_common.adapters.kubelet import deviceplugin_pb2 as pb
from ascend_common.chip_traits import IdScheme, traits
from ascend_common.chips import RESOURCE_PREFIX

from ascend_device_plugin.allocation.annotations import taken_patch
from ascend_device_plugin.allocation.containers import Containers, alloc_devices, invalid
from ascend_device_plugin.allocation.refusals import AllocationError, Refusal
from ascend_device_plugin.allocation.report import Report
from ascend_device_plugin.inventory.views import ViewBoard
from ascend_device_plugin.model.chip_pod import PodView
from ascend_device_plugin.volcano.annotations import annotated_chips
from ascend_device_plugin.volcano.pods import VolcanoPods

log = logging.getLogger(__name__)


@dataclass
class VolcanoPath:
    board: ViewBoard
    containers: Containers
    pods: VolcanoPods
    report: Report
    # Marking the chosen pod taken: tries and the wait between them (the reference's RetryUpdateCount,
    # UpdatePodWaitTime); Allocate fails when the last try does.
    taken_tries: int = 3
    taken_wait_s: float = 0.2

    async def allocate(self, resource: str, containers: list[list[str]]) -> pb.AllocateResponse:
        if self.pods.source is None or self.report.patcher is None:
            raise AllocationError(Refusal.NO_CLUSTER, "the Volcano path needs the cluster (--kube api)")
        kubelet_ids = [i for ids in containers for i in ids]
        choice = await self.pods.choose(RESOURCE_PREFIX + resource, len(kubelet_ids))
        for reject in choice.rejects:
            log.warning("pod skipped: bad Volcano annotation", extra={"pod": reject.pod.key, "reason": reject.reason})
        if choice.pod is None:
            raise AllocationError(
                Refusal.NO_POD,
                f"no active pod annotated by Volcano for {len(kubelet_ids)} {resource}"
                + (f" ({len(choice.rejects)} with a malformed annotation)" if choice.rejects else ""),
            )
        pod = choice.pod
        chips = self.containers.resources.inventory.chips.values()
        family = next(iter(chips)).family if chips else None
        try:
            real = (
                annotated_chips(choice.devices, family, {c.logic_id: c.name for c in chips})
                if family is not None
                else list(choice.devices)
            )
        except ValueError as exc:
            raise invalid(str(exc), pod) from None
        view = self.board.get(resource)
        known = {d.id for d in view.devices} if view is not None else set()
        if unknown := [r for r in real if r not in known]:
            raise invalid(f"Volcano chose devices this node does not have: {','.join(unknown)}", pod)
        self.containers.take(real)
        await self.mark_taken(pod)
        # Serve the containers in order with the pod's real devices. A 950's annotated logic ids are
        # chip names by now, so the runtime's ids are derived from the chips as on the plain path
        # (`getFinalVisibleDevices`' conversion), which gives back exactly the annotated logic ids.
        pass_through = family is None or traits(family).id_scheme is not IdScheme.LOGIC
        responses, offset = [], 0
        for ids in containers:
            responses.append(
                self.containers.response(alloc_devices(ids, real[offset : offset + len(ids)]), volcano=pass_through)
            )
            offset += len(ids)
        self.containers.resources.volcano_allocated(pod.uid, dict(zip(kubelet_ids, real, strict=True)))

        def settle() -> dict[str, str]:
            log.info("allocated by Volcano", extra={"pod": pod.key, "devices": real, "kubelet_ids": kubelet_ids})
            return self.report.annotations(pod, resource, real, kubelet_ids)

        self.report.after_answer(pod, settle)
        return pb.AllocateResponse(container_responses=responses)

    async def mark_taken(self, pod: PodView) -> None:
        """Set the pod's predicate-time to the maximum on the API server before anything is handed out
        (the reference's getOldestPod -> TryUpdatePodCacheAnnotation): Volcano reads it to know the
        chips are in use. Transient failures are retried (taken_tries, taken_wait_s); when it cannot be
        written, Allocate fails, the kubelet fails the pod's admission and Volcano reschedules it. The
        pod is held in memory meanwhile, so a concurrent Allocate cannot choose it too."""
        assert self.report.patcher is not None
        self.pods.taken.add(pod.uid)
        try:
            await self.report.patcher.patch_pod(
                pod.namespace, pod.name, taken_patch(), retries=self.taken_tries - 1, base_delay=self.taken_wait_s
            )
        except Exception as exc:
            self.pods.taken.discard(pod.uid)
            log.error("Volcano pod not marked taken; nothing handed out", extra={"pod": pod.key, "error": str(exc)})
            raise AllocationError(
                Refusal.API_SERVER, f"cannot mark its Volcano allocation taken on the API server: {exc}", pod=pod.key
            ) from None
