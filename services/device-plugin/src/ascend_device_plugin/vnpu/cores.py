"""Dynamic vNPU mode: the `huawei.com/npu-core` resource and its health (contract section 4).

Each chip contributes as many `npu-core-<n>` devices as it has AI cores; the kubelet allocates
anonymous cores and Volcano's annotation says which chip (or vNPU) they really use. Cores are
not bound to chips, so when U chips are unhealthy exactly U x (AI cores per chip) cores are
reported Unhealthy: first the cores whose pod's real device sits on an unhealthy chip, then
free cores in ascending id order. Reference: pkg/server/plugin.go `getUnhealthyAICore`.

Differences from the reference: free cores are taken in natural order (`npu-core-2` before
`npu-core-10`) where the reference takes sets.String.List() order (plain string order); and when
too few free cores are left we mark all of them instead of none, so the kubelet never
over-counts healthy capacity.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from ascend_common.naming import npu_core_id

from ascend_device_plugin.model.chip_pod import ChipInfo
from ascend_device_plugin.model.ordering import natural_sorted


def core_ids(chips: Iterable[ChipInfo]) -> dict[str, int]:
    """`npu-core-<n>` -> phy id of the chip that contributes it; n counts from 0 across chips by phy id.

    The reference (pkg/common/device.go `FakeAiCoreDevice`) numbers cores in discovery order;
    phy order keeps the ids stable when discovery order changes.
    """
    out: dict[str, int] = {}
    n = 0
    for chip in sorted(chips, key=lambda c: c.phy_id):
        for _ in range(chip.aicore):
            out[npu_core_id(n)] = chip.phy_id
            n += 1
    return out


def core_health(chips: Iterable[ChipInfo], cores_in_use: Mapping[str, int]) -> dict[str, bool]:
    """core id -> healthy, for every core of `core_ids(chips)`.

    `cores_in_use` maps a kubelet core id to the phy id of its pod's real device.
    """
    chip_list = list(chips)
    cores = core_ids(chip_list)
    unhealthy_phys = {chip.phy_id for chip in chip_list if not chip.healthy}
    # U x (AI cores per chip); summed per chip so a node with mixed core counts stays exact.
    target = sum(chip.aicore for chip in chip_list if not chip.healthy)
    unhealthy = {core for core, phy in cores_in_use.items() if core in cores and phy in unhealthy_phys}
    missing = target - len(unhealthy)
    if missing > 0:
        free = natural_sorted(core for core in cores if core not in cores_in_use)
        unhealthy.update(free[:missing])
    return {core: core not in unhealthy for core in cores}
