"""Dynamic vNPU (`npu-core`): the vNPU the pod's annotation names is created through the exporter
when the pod is allocated, and destroyed once no pending or running pod holds it."""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field

import httpx
from ascend_common.adapters.clients.exporter import ExporterClient, ExporterError
from ascend_common.adapters.kubelet import deviceplugin_pb2 as pb
from ascend_common.chips import RESOURCE_PREFIX
from ascend_common.inuse import ALLOCATION_PHASES, ASCEND_REAL
from ascend_common.naming import NPU_CORE, vnpu_device_id

from ascend_device_plugin.allocation.annotations import real_allocation_annotations, taken_patch
from ascend_device_plugin.allocation.containers import Containers, invalid
from ascend_device_plugin.allocation.refusals import AllocationError, Refusal
from ascend_device_plugin.allocation.report import Report
from ascend_device_plugin.allocation.response import AllocDevice
from ascend_device_plugin.model.chip_pod import ChipInfo
from ascend_device_plugin.volcano.pods import VolcanoPods

log = logging.getLogger(__name__)


@dataclass
class DynamicVnpu:
    containers: Containers
    pods: VolcanoPods
    report: Report
    exporter: ExporterClient | None = None
    _created: dict[str, float] = field(default_factory=dict)  # vNPU name -> monotonic time we created it

    async def allocate(self, containers: list[list[str]]) -> pb.AllocateResponse:
        if self.pods.source is None or self.report.patcher is None or self.exporter is None:
            raise AllocationError(Refusal.NO_CLUSTER, "dynamic vNPU mode needs the cluster and the exporter")
        cores = [i for ids in containers for i in ids]
        infos = self.containers.resources.inventory.chips
        aicore = max((c.aicore for c in infos.values()), default=0)
        choice = await self.pods.choose(RESOURCE_PREFIX + NPU_CORE, len(cores), aicore)
        for reject in choice.rejects:
            log.warning("pod skipped: bad npu-core annotation", extra={"pod": reject.pod.key, "reason": reject.reason})
        if choice.pod is None or choice.dynamic is None:
            raise AllocationError(Refusal.NO_POD, f"no pending pod annotated for {len(cores)} npu-core")
        pod, want = choice.pod, choice.dynamic
        chips: list[ChipInfo] = []
        for phy in want.phy_ids:
            if phy not in infos:
                raise invalid(f"chip {phy} is not on this node", pod)
            chips.append(infos[phy])
        self.containers.take(c.name for c in chips)  # a vNPU's chip is not a whole chip for a claim
        self.pods.taken.add(pod.uid)
        real: list[str]
        if want.template is not None:
            chip = chips[0]
            try:
                vnpu = await self.exporter.create_vnpu(chip.logic_id, want.template)
            except ExporterError as exc:
                self.pods.taken.discard(pod.uid)
                raise AllocationError(Refusal.NO_CAPACITY, exc.detail, pod=pod.key) from None
            name = vnpu_device_id(chip.rtype, vnpu.suffix, vnpu.vdev_id, chip.phy_id)
            self._created[name] = time.monotonic()
            devices = [AllocDevice(core, chip.phy_id, vnpu.vdev_id) for core in cores]
            real, vfg = [name], {name: vnpu.vfg_id}
        else:
            devices = [AllocDevice(core, chips[i % len(chips)].phy_id) for i, core in enumerate(cores)]
            real, vfg = [c.name for c in chips], {}
        responses, offset = [], 0
        for ids in containers:
            responses.append(self.containers.response(devices[offset : offset + len(ids)], dynamic=True, volcano=True))
            offset += len(ids)
        self.containers.resources.cores_allocated(pod.uid, {d.kubelet_id: d.phy_id for d in devices})

        def settle() -> dict[str, str]:
            log.info("allocated npu-core", extra={"pod": pod.key, "real": real, "cores": len(cores)})
            return {**taken_patch(), **real_allocation_annotations(real, cores, vfg_ids=vfg)}

        self.report.after_answer(pod, settle)
        return pb.AllocateResponse(container_responses=responses)

    async def collect(self, grace_s: float) -> list[str]:
        """Destroy the vNPUs no pending or running pod holds.

        A vNPU we created less than `grace_s` ago is kept: its pod's annotation may not have
        reached the cache yet. Returns the names destroyed.
        """
        if self.exporter is None or self.pods.source is None:
            return []
        held: set[str] = set()
        for pod in self.pods.source.pods():
            if pod.phase in ALLOCATION_PHASES:
                held |= {item.split("_")[0] for item in pod.annotations.get(ASCEND_REAL, "").split(",") if item}
        now = time.monotonic()
        destroyed = []
        for info in list(self.containers.resources.inventory.chips.values()):
            for vnpu in info.vnpus:
                name = vnpu_device_id(info.rtype, vnpu.suffix, vnpu.vdev_id, info.phy_id)
                if name in held or now - self._created.get(name, -grace_s) < grace_s:
                    continue
                try:
                    await self.exporter.destroy_vnpu(info.logic_id, vnpu.vdev_id)
                except (ExporterError, httpx.HTTPError) as exc:
                    log.warning("could not destroy an unused vNPU", extra={"vnpu": name, "error": str(exc)})
                    continue
                self._created.pop(name, None)
                destroyed.append(name)
                log.info("destroyed an unused vNPU", extra={"vnpu": name, "chip": info.name})
        return destroyed
