"""Chip families, resource and device naming (contract sections 2, 5, 10)."""

from __future__ import annotations

import pytest
from ascend_common.chip_traits import resource_type
from ascend_common.chips import ChipFamily, ResourceType, detect_family
from ascend_common.naming import (
    chip_name,
    npu_core_id,
    parse_device_id,
    resource_name,
    shared_device_id,
    vnpu_device_id,
)
from ascend_common.vnpu import TEMPLATE_BY_SUFFIX, TEMPLATES, template_allowed


@pytest.mark.parametrize(
    ("name", "board", "family"),
    [
        ("310P3", None, ChipFamily.ASCEND310P),
        ("310P1", 0x10, ChipFamily.ASCEND310P),
        ("310B1", None, ChipFamily.ASCEND310B),
        ("310", None, ChipFamily.ASCEND310),
        ("910B3", None, ChipFamily.ASCEND910B),
        ("910B4", 0x22, ChipFamily.ASCEND910B),
        ("910B3", 0xB0, ChipFamily.ASCEND910A3),
        ("910B2", 0x81, ChipFamily.ASCEND910A3),
        ("910_9391", 0xD1, ChipFamily.ASCEND910A3),  # A3 is decided by the board first
        ("910A", None, ChipFamily.ASCEND910),
        ("910ProB", 0xB0 + 0x100, ChipFamily.ASCEND910),
        ("Ascend950PR", None, ChipFamily.ASCEND950),
    ],
)
def test_detect_family(name: str, board: int | None, family: ChipFamily) -> None:
    assert detect_family(name, board) is family


@pytest.mark.parametrize("name", ["", "A100", "Ascend", "710"])
def test_detect_family_rejects_unknown_names(name: str) -> None:
    with pytest.raises(ValueError, match="unknown chip name"):
        detect_family(name)


@pytest.mark.parametrize(
    ("family", "rtype"),
    [
        (ChipFamily.ASCEND910, "Ascend910"),
        (ChipFamily.ASCEND910B, "Ascend910"),
        (ChipFamily.ASCEND910A3, "Ascend910"),
        (ChipFamily.ASCEND310, "Ascend310"),
        (ChipFamily.ASCEND310B, "Ascend310"),
        (ChipFamily.ASCEND310P, "Ascend310P"),
        (ChipFamily.ASCEND950, "npu"),
    ],
)
def test_resource_type(family: ChipFamily, rtype: str) -> None:
    assert resource_type(family).value == rtype
    assert resource_name(rtype) == f"huawei.com/{rtype}"


@pytest.mark.parametrize(
    ("make", "expected"),
    [
        (lambda: chip_name(ResourceType.ASCEND910, 3), "Ascend910-3"),
        (lambda: shared_device_id(ResourceType.ASCEND310P, 1, 2), "Ascend310P-1-2"),
        (lambda: vnpu_device_id(ResourceType.ASCEND910, "2c", 100, 0), "Ascend910-2c-100-0"),
        (
            lambda: vnpu_device_id(ResourceType.ASCEND910, "10c.3cpu.16g.ndvpp", 101, 7),
            "Ascend910-10c.3cpu.16g.ndvpp-101-7",
        ),
        (lambda: npu_core_id(17), "npu-core-17"),
    ],
)
def test_device_ids(make: object, expected: str) -> None:
    assert make() == expected  # type: ignore[operator]


@pytest.mark.parametrize(
    ("device_id", "rtype", "phy", "share", "suffix", "vdev", "vfg", "chip"),
    [
        ("Ascend910-3", "Ascend910", 3, None, None, None, None, "Ascend910-3"),
        ("npu-12", "npu", 12, None, None, None, None, "npu-12"),
        ("Ascend310P-1-2", "Ascend310P", 1, 2, None, None, None, "Ascend310P-1"),
        ("Ascend910-2c-100-0", "Ascend910", 0, None, "2c", 100, None, "Ascend910-0"),
        ("Ascend910-5c.1cpu.16g-104-6_2", "Ascend910", 6, None, "5c.1cpu.16g", 104, 2, "Ascend910-6"),
        ("Ascend310P-4c.3cpu.ndvpp-120-1", "Ascend310P", 1, None, "4c.3cpu.ndvpp", 120, None, "Ascend310P-1"),
    ],
)
def test_parse_device_id(
    device_id: str,
    rtype: str,
    phy: int,
    share: int | None,
    suffix: str | None,
    vdev: int | None,
    vfg: int | None,
    chip: str,
) -> None:
    parsed = parse_device_id(device_id)
    assert (parsed.rtype.value, parsed.phy_id, parsed.share_index) == (rtype, phy, share)
    assert (parsed.vnpu_suffix, parsed.vdev_id, parsed.vfg_id) == (suffix, vdev, vfg)
    assert parsed.chip == chip


@pytest.mark.parametrize(
    "bad",
    [
        "",
        "Ascend910",
        "Ascend910-",
        "Ascend910--1",
        "Ascend910-x",
        "GPU-0",
        "Ascend910-3c-1-0",
        "Ascend910-1-2-3-4",
        "Ascend910-" + "9" * 60,
        "ascend910-1",
        " Ascend910-1",
    ],
)
def test_parse_device_id_rejects(bad: str) -> None:
    with pytest.raises(ValueError):  # noqa: PT011 - the message varies by the reason
        parse_device_id(bad)


def test_device_ids_are_capped_at_50_characters() -> None:
    with pytest.raises(ValueError, match="longer than 50"):
        shared_device_id(ResourceType.ASCEND310P, 10**40, 1)


def test_vnpu_id_needs_a_known_suffix() -> None:
    with pytest.raises(ValueError, match="unknown vNPU template suffix"):
        vnpu_device_id(ResourceType.ASCEND910, "3c", 100, 0)


@pytest.mark.parametrize(
    ("template", "suffix", "aicore"),
    [
        ("vir01", "1c", 1),
        ("vir02_1c", "2c.1cpu", 2),
        ("vir10_3c_16g_nm", "10c.3cpu.16g.ndvpp", 10),
        ("vir10_4c_16g_m", "10c.4cpu.16g.dvpp", 10),
        ("vir12_3c_32g", "12c.3cpu.32g", 12),
        ("vir16", "16c", 16),
    ],
)
def test_templates(template: str, suffix: str, aicore: int) -> None:
    assert TEMPLATES[template].suffix == suffix
    assert TEMPLATES[template].aicore == aicore
    assert TEMPLATE_BY_SUFFIX[suffix].name == template


@pytest.mark.parametrize(
    ("family", "template", "allowed"),
    [
        (ChipFamily.ASCEND310P, "vir04_3c", True),
        (ChipFamily.ASCEND310P, "vir08", False),
        (ChipFamily.ASCEND910, "vir16", True),
        (ChipFamily.ASCEND910, "vir05_1c_16g", False),
        (ChipFamily.ASCEND910B, "vir10_3c_16g_nm", True),
        (ChipFamily.ASCEND910B, "vir16", False),
        (ChipFamily.ASCEND910A3, "vir12_3c_32g", True),
        (ChipFamily.ASCEND910A3, "vir03_1c_8g", False),
        (ChipFamily.ASCEND310, "vir01", False),
    ],
)
def test_template_allowed(family: ChipFamily, template: str, allowed: bool) -> None:
    assert template_allowed(family, template) is allowed
