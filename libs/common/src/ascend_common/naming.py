"""Resource names and device IDs (contract sections 2 and 5).

Device IDs are what the kubelet checkpoints, so they are a pure function of the chip's
identity and never of discovery order.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ascend_common.chips import RESOURCE_PREFIX, ResourceType
from ascend_common.vnpu import TEMPLATE_BY_SUFFIX

MAX_DEVICE_ID_LEN = 50
NPU_CORE = "npu-core"

_PHYS_TYPES = "|".join(re.escape(t.value) for t in ResourceType)
_SUFFIXES = "|".join(sorted((re.escape(s) for s in TEMPLATE_BY_SUFFIX), key=len, reverse=True))
# [0-9], not \d (which takes any script's digits), and fullmatch, not `$` (which takes a trailing
# newline): an id that parses must be one that chip_name() and friends could have written.
_PHYSICAL = re.compile(rf"(?P<type>{_PHYS_TYPES})-(?P<phy>[0-9]{{1,4}})")
_SHARED = re.compile(rf"(?P<type>{_PHYS_TYPES})-(?P<phy>[0-9]{{1,4}})-(?P<idx>[0-9]{{1,4}})")
_VNPU = re.compile(
    rf"(?P<type>{_PHYS_TYPES})-(?P<suffix>{_SUFFIXES})-(?P<vdev>[0-9]{{1,6}})-(?P<phy>[0-9]{{1,4}})(?:_(?P<vfg>[0-9]{{1,4}}))?"
)

# 310P mixed insert (the reference's -use310PMixedInsert, pkg/common/proto.go `Get310PProductType`):
# each card is advertised under the resource of its product (dcmi_get_product_type), its chips as
# `<resource>-<phyID>`. The chip keeps its name `Ascend310P-<phyID>` everywhere else.
MIXED_310P_RESOURCES: dict[str, str] = {
    "Atlas 300V Pro": "Ascend310P-VPro",
    "Atlas 300V": "Ascend310P-V",
    "Atlas 300I Pro": "Ascend310P-IPro",
}
_MIXED = re.compile(
    "(?P<product>"
    + "|".join(sorted(map(re.escape, MIXED_310P_RESOURCES.values()), key=len, reverse=True))
    + ")-(?P<phy>[0-9]{1,4})"
)


def resource_name(resource: str) -> str:
    """`huawei.com/<type>` for a physical or vNPU resource type such as `Ascend910-2c`."""
    return RESOURCE_PREFIX + resource


def chip_name(rtype: ResourceType, phy_id: int) -> str:
    """The name a chip has in every report, reset group and isolation list: `<type>-<phyID>`."""
    return _checked(f"{rtype.value}-{phy_id}")


def shared_device_id(rtype: ResourceType, phy_id: int, index: int) -> str:
    return _checked(f"{rtype.value}-{phy_id}-{index}")


def vnpu_device_id(rtype: ResourceType, suffix: str, vdev_id: int, phy_id: int) -> str:
    if suffix not in TEMPLATE_BY_SUFFIX:
        raise ValueError(f"unknown vNPU template suffix {suffix!r}")
    return _checked(f"{rtype.value}-{suffix}-{vdev_id}-{phy_id}")


def npu_core_id(n: int) -> str:
    return f"{NPU_CORE}-{n}"


def _checked(device_id: str) -> str:
    if len(device_id) > MAX_DEVICE_ID_LEN:
        raise ValueError(f"device id {device_id!r} is longer than {MAX_DEVICE_ID_LEN} characters")
    return device_id


@dataclass(frozen=True)
class ParsedDevice:
    rtype: ResourceType
    phy_id: int
    share_index: int | None = None
    vnpu_suffix: str | None = None
    vdev_id: int | None = None
    vfg_id: int | None = None
    # 310P mixed insert: the product resource the id was advertised under (e.g. "Ascend310P-V").
    product: str | None = None

    @property
    def chip(self) -> str:
        """The parent chip's name: a vNPU or a shared copy names the chip it lives on."""
        return chip_name(self.rtype, self.phy_id)


def parse_device_id(device_id: str) -> ParsedDevice:
    """Parse a physical, shared or vNPU device id (with an optional `_<vfgID>`); ValueError otherwise."""
    if len(device_id) > MAX_DEVICE_ID_LEN:
        raise ValueError(f"device id is longer than {MAX_DEVICE_ID_LEN} characters")
    if m := _PHYSICAL.fullmatch(device_id):
        return ParsedDevice(ResourceType(m["type"]), int(m["phy"]))
    if m := _SHARED.fullmatch(device_id):
        return ParsedDevice(ResourceType(m["type"]), int(m["phy"]), share_index=int(m["idx"]))
    if m := _MIXED.fullmatch(device_id):
        return ParsedDevice(ResourceType.ASCEND310P, int(m["phy"]), product=m["product"])
    if m := _VNPU.fullmatch(device_id):
        return ParsedDevice(
            ResourceType(m["type"]),
            int(m["phy"]),
            vnpu_suffix=m["suffix"],
            vdev_id=int(m["vdev"]),
            vfg_id=int(m["vfg"]) if m["vfg"] is not None else None,
        )
    raise ValueError(f"not an Ascend device id: {device_id!r}")


def mixed_device_id(resource: str, phy_id: int) -> str:
    """A chip's id under its 310P product resource (`assemble310PMixedPhyDevices`): `<resource>-<phyID>`."""
    if resource not in MIXED_310P_RESOURCES.values():
        raise ValueError(f"not a 310P mixed-insert resource: {resource!r}")
    return _checked(f"{resource}-{phy_id}")
