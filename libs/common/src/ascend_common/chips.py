"""Chips, cards and their families (contract sections 2 and 10)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import StrEnum


class ChipFamily(StrEnum):
    ASCEND310 = "Ascend310"
    ASCEND310B = "Ascend310B"
    ASCEND310P = "Ascend310P"
    ASCEND910 = "Ascend910"  # 910A
    ASCEND910B = "Ascend910B"
    ASCEND910A3 = "Ascend910A3"
    ASCEND950 = "Ascend950"


class ResourceType(StrEnum):
    """The physical resource a chip is advertised under: `huawei.com/<type>`."""

    ASCEND910 = "Ascend910"
    ASCEND310 = "Ascend310"
    ASCEND310P = "Ascend310P"
    NPU = "npu"


RESOURCE_PREFIX = "huawei.com/"

# Board ids of Atlas A3 boards (the reference's a3BoardIds, ascend-common devmanager/common
# constants.go). The reference decides A3 by board id before looking at the chip name.
A3_BOARD_IDS: frozenset[int] = frozenset({0xB0, 0xB1, 0xB2, 0xB3, 0xB4, 0x81, 0x83, 0xD1, 0xD3})
# 910B boards without HCCS: each chip is its own reset group (contract section 8).
NO_HCCS_910B_BOARD_IDS: frozenset[int] = frozenset({0x28, 0x29, 0x33, 0x3C})
# The 950 generation (the reference's Ascend910A5): a chip name with this prefix and at most
# A5_CHIP_NAME_MAX_LEN characters (devmanager/common utils_v2.go `Is910A5Chip`).
A5_CHIP_PREFIX = "Ascend950"
A5_CHIP_NAME_MAX_LEN = 32

_910B_NAME = re.compile(r"^910B\d")


def is_a5_chip(chip_name: str) -> bool:
    """Whether the DCMI chip name is a 950 chip (`Is910A5Chip`); a longer name is not one."""
    return len(chip_name) <= A5_CHIP_NAME_MAX_LEN and chip_name.startswith(A5_CHIP_PREFIX)


def detect_family(chip_name: str, board_id: int | None = None) -> ChipFamily:
    """Chip family from the DCMI chip name and board id (contract section 10; the reference's
    `GetDevType`): an A3 board id first, whatever the name; then a 950 name; then the older names.

    Raises ValueError for a name that belongs to no known family, so that an unknown chip
    is reported as such instead of being advertised under a guessed resource.
    """
    name = chip_name.strip()
    if board_id is not None and board_id in A3_BOARD_IDS:
        return ChipFamily.ASCEND910A3
    if is_a5_chip(name):
        return ChipFamily.ASCEND950
    if name.startswith("310P"):
        return ChipFamily.ASCEND310P
    if "310B" in name:
        return ChipFamily.ASCEND310B
    if "310" in name:
        return ChipFamily.ASCEND310
    if _910B_NAME.match(name):
        return ChipFamily.ASCEND910B
    if name.startswith("910"):
        return ChipFamily.ASCEND910
    raise ValueError(f"unknown chip name {chip_name!r}")


def is_910_family(family: ChipFamily) -> bool:
    return family in (ChipFamily.ASCEND910, ChipFamily.ASCEND910B, ChipFamily.ASCEND910A3)


@dataclass(frozen=True, order=True)
class ChipAddress:
    """Where a chip sits: DCMI addresses it by (card, device); the node by logic id; reports by phy id."""

    card_id: int
    device_id: int
    logic_id: int
    phy_id: int


@dataclass(frozen=True)
class ChipTopology:
    """What the reset-group and allocation rules need to know about one chip."""

    logic_id: int
    phy_id: int
    card_id: int
    family: ChipFamily
    board_id: int | None = None
    product_type: str | None = None
    partner_card: int | None = None  # A3: dcmi_get_netdev_brother_device
