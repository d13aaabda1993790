"""Allocate under soft share (Volcano `chip1softsharedev`): the kubelet asks for as many anonymous
ids as the pod's AI-core quota; the pod gets the one chip Volcano annotated, its quota file in a
directory of its own, and two mounts (reference plugin.go `doWithVolcanoSchedule`,
`getNPUInfoConfigDirFromPod`, `mountShareDeviceConfig`).

Everything is checked before anything is written (the reference writes what it can and lets the
pod run unlimited otherwise: its bugs 3 and 4); a refusal names the pod. Then the pod is marked
taken on the API server (as on the Volcano path), its directory made, and the answer given; the
report after it records AscendReal, kltDev and the vid (`huawei.com/scheduler.softShareDev.vnpuId`).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path

from ascend_common.adapters.kubelet import deviceplugin_pb2 as pb
from ascend_common.chip_traits import IdScheme, traits
from ascend_common.chips import RESOURCE_PREFIX
from ascend_common.naming import parse_device_id
from ascend_common.softshare import VNPU_ID

from ascend_device_plugin.allocation.containers import Containers
from ascend_device_plugin.allocation.refusals import AllocationError, Refusal
from ascend_device_plugin.allocation.report import Report
from ascend_device_plugin.allocation.response import AllocDevice
from ascend_device_plugin.model.chip_pod import ChipInfo, PodView
from ascend_device_plugin.softshare.dirs import SoftShareDirs
from ascend_device_plugin.softshare.pod import Quota, job_dir, job_name, mounts, npu_info_text, parse_quota, shm_id
from ascend_device_plugin.volcano.annotations import annotated_chips, annotation_key
from ascend_device_plugin.volcano.pods import VolcanoPods
from ascend_device_plugin.volcano.volcano_path import VolcanoPath

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class _Checked:
    chip: ChipInfo
    quota: Quota
    job: str  # `<namespace>.<job>`
    die: str


@dataclass
class SoftSharePath:
    containers: Containers
    pods: VolcanoPods
    report: Report
    volcano: VolcanoPath  # marks the chosen pod taken, as for any Volcano pod
    dirs: SoftShareDirs
    config_dir: Path  # --soft-share-dev-config-dir

    async def allocate(self, resource: str, containers: list[list[str]]) -> pb.AllocateResponse:
        if self.pods.source is None or self.report.patcher is None:
            raise AllocationError(Refusal.NO_CLUSTER, "soft share needs the cluster (--kube api)")
        kubelet_ids = [i for ids in containers for i in ids]
        choice = await self.pods.choose(RESOURCE_PREFIX + resource, len(kubelet_ids), soft_share=True)
        for reject in choice.rejects:
            log.warning(
                "pod skipped: bad soft-share annotation", extra={"pod": reject.pod.key, "reason": reject.reason}
            )
        if choice.pod is None:
            raise AllocationError(
                Refusal.NO_POD,
                f"no active soft-share pod annotated by Volcano with an AI-core quota of {len(kubelet_ids)}"
                + (f" ({len(choice.rejects)} with a malformed annotation)" if choice.rejects else ""),
            )
        pod = choice.pod
        checked = self._check(pod, resource, choice.devices)
        self.containers.take([checked.chip.name])
        if not await self.dirs.ready():
            raise self._refusal(pod, "the npu-info directory (--soft-share-npu-info-dir) is missing on the host")
        await self.volcano.mark_taken(pod)
        chip, quota = checked.chip, checked.quota
        try:
            made = await self.dirs.make(
                pod,
                checked.job,
                chip.phy_id,
                checked.die,
                lambda vid: npu_info_text(chip.phy_id, vid, quota, checked.die),
            )
        except OSError as exc:
            log.error("soft-share directory not made", extra={"pod": pod.key, "chip": chip.name, "error": str(exc)})
            raise self._refusal(pod, f"cannot write its quota file: {exc}") from None
        shm, info = mounts(self.config_dir, chip.phy_id, checked.die, made.path)
        responses = []
        for ids in containers:
            # The chip once, whatever the count: the ids are quota units, not devices.
            # The 950's runtime is told the chip's logic id (the one Volcano annotated), as on the
            # Volcano path; elsewhere Volcano's id passes through.
            response = self.containers.response(
                [AllocDevice(ids[0], chip.phy_id)], volcano=traits(chip.family).id_scheme is not IdScheme.LOGIC
            )
            response.mounts.extend(
                pb.Mount(container_path=m.container_path, host_path=m.host_path, read_only=m.read_only)
                for m in (shm, info)
            )
            responses.append(response)

        def settle() -> dict[str, str]:
            log.info(
                "allocated by soft share",
                extra={"pod": pod.key, "chip": chip.name, "vid": made.vid, "dir": str(made.path),
                       "aicore_quota": quota.aicore, "hbm_quota_mb": quota.hbm_mb, "kubelet_ids": len(kubelet_ids)},
            )  # fmt: skip
            return {**self.report.annotations(pod, resource, [chip.name], kubelet_ids), VNPU_ID: str(made.vid)}

        self.report.after_answer(pod, settle)
        return pb.AllocateResponse(container_responses=responses)

    def _check(self, pod: PodView, resource: str, devices: tuple[str, ...]) -> _Checked:
        """Everything the quota file and the mounts need, or the refusal naming the pod."""
        try:
            quota = parse_quota(pod.annotations)
            if len(devices) != 1:
                raise ValueError(f"soft share gives a pod one chip; {annotation_key(resource)} names {len(devices)}")
            chips = self.containers.resources.inventory.chips
            # On the 950 Volcano's soft-share policy annotates a logic id as every 950 policy does
            # (chip1softsharedev places through the shared SetNPUTopologyToPodFn): name it as the
            # Volcano path does, so the quota file, the mounts and AscendReal are the chip the
            # container gets (ASCEND_VISIBLE_DEVICES).
            family = next(iter(chips.values())).family if chips else None
            names = (
                annotated_chips(devices, family, {c.logic_id: c.name for c in chips.values()})
                if family is not None
                else list(devices)
            )
            name = names[0]
            chip = chips.get(parse_device_id(name).phy_id)
            if chip is None or chip.name != name:
                raise ValueError(f"Volcano chose chip {devices[0]}, which this node does not have")
            job = job_dir(pod.namespace, job_name(pod.labels))
            die = shm_id(chip.family, chip.vdie_id, chip.ddie_id)
        except ValueError as exc:
            raise self._refusal(pod, str(exc)) from None
        return _Checked(chip, quota, job, die)

    def _refusal(self, pod: PodView, cause: str) -> AllocationError:
        return AllocationError(Refusal.SOFT_SHARE, f"soft share: {cause}", pod=pod.key)
