"""The devices each resource advertises to the kubelet (contract section 2).

IDs are a pure function of the chip's identity (phy id, template, vdev id), never of discovery
order, because the kubelet checkpoints allocations by ID across plugin restarts.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import NamedTuple

from ascend_common.chips import ResourceType
from ascend_common.naming import chip_name, parse_device_id, shared_device_id, vnpu_device_id
from ascend_common.vnpu import TEMPLATE_BY_SUFFIX

from ascend_device_plugin.model.chip_pod import ChipInfo
from ascend_device_plugin.model.ordering import natural_key
from ascend_device_plugin.softshare.switch import ids_per_chip

MAX_SHARE_COUNT = 100  # the reference's MaxShareDevCount (pkg/common/constants.go)


class DeviceEntry(NamedTuple):
    id: str
    healthy: bool
    numa: int | None


def physical_devices(
    chips: Iterable[ChipInfo], rtype: ResourceType, *, share_count: int = 1, soft_share: bool = False
) -> list[DeviceEntry]:
    """The physical resource `huawei.com/<rtype>`: one device per chip, or copies of it.

    How many ids a chip is comes from its family (softshare/switch.ids_per_chip): `share_count` on
    the 310P/310B, 100 under soft share, else one. Copies (`<type>-<phy>-<idx>`, idx 0..N-1) carry
    the chip's health and NUMA node: a broken chip takes all its copies down. A chip cut into
    vNPUs is offered only as those (the reference lists a chip as physical when its VDevNum is 0),
    or it could be handed out twice.
    """
    if not 1 <= share_count <= MAX_SHARE_COUNT:
        raise ValueError(f"share count {share_count} is outside 1..{MAX_SHARE_COUNT}")
    out: list[DeviceEntry] = []
    for chip in chips:
        if chip.rtype is not rtype or chip.vnpus:
            continue
        copies = ids_per_chip(chip.family, share_count, soft_share)
        if copies == 1:
            out.append(DeviceEntry(chip_name(rtype, chip.phy_id), chip.healthy, chip.numa_node))
        else:
            out.extend(
                DeviceEntry(shared_device_id(rtype, chip.phy_id, idx), chip.healthy, chip.numa_node)
                for idx in range(copies)
            )
    return sorted(out, key=lambda d: natural_key(d.id))


def vnpu_devices(chips: Iterable[ChipInfo], suffix: str) -> list[DeviceEntry]:
    """A static vNPU resource `huawei.com/<type>-<suffix>`: every vNPU of that template.

    A vNPU has no health of its own: it is as healthy as the chip it lives on.
    """
    if suffix not in TEMPLATE_BY_SUFFIX:
        raise ValueError(f"unknown vNPU template suffix {suffix!r}")
    out = [
        DeviceEntry(vnpu_device_id(chip.rtype, suffix, v.vdev_id, chip.phy_id), chip.healthy, chip.numa_node)
        for chip in chips
        for v in chip.vnpus
        if v.suffix == suffix
    ]
    return sorted(out, key=lambda d: natural_key(d.id))


def chip_of(device_id: str) -> int:
    """The phy id of the chip a physical, shared or vNPU device id lives on; ValueError otherwise."""
    return parse_device_id(device_id).phy_id
