"""Advertised device lists, natural order and chip lookup (contract section 2)."""

from __future__ import annotations

import itertools

import pytest
from ascend_common.chips import ChipFamily, ResourceType
from ascend_common.schemas.exporter import Vnpu
from ascend_device_plugin.model.chip_pod import ChipInfo
from ascend_device_plugin.model.ordering import natural_key, natural_sorted
from ascend_device_plugin.resources.devices import DeviceEntry, chip_of, physical_devices, vnpu_devices
from hypothesis import given
from hypothesis import strategies as st

R910 = ResourceType.ASCEND910
R310P = ResourceType.ASCEND310P


def chip(
    phy: int,
    *,
    rtype: ResourceType = R910,
    family: ChipFamily = ChipFamily.ASCEND910B,
    healthy: bool = True,
    numa: int | None = None,
    vnpus: tuple[Vnpu, ...] = (),
) -> ChipInfo:
    return ChipInfo(
        logic_id=phy + 100,  # logic ids differ from phy ids on purpose: ids must use phy
        phy_id=phy,
        card_id=phy // 2,
        name=f"{rtype.value}-{phy}",
        rtype=rtype,
        family=family,
        aicore=20,
        healthy=healthy,
        numa_node=numa,
        vnpus=vnpus,
    )


def vnpu(vdev: int, template: str, suffix: str, aicore: int) -> Vnpu:
    return Vnpu(vdev_id=vdev, vfg_id=0, template=template, suffix=suffix, aicore=aicore)


@pytest.mark.parametrize(
    ("items", "expected"),
    [
        (["Ascend910-10", "Ascend910-2", "Ascend910-1"], ["Ascend910-1", "Ascend910-2", "Ascend910-10"]),
        (["npu-core-10", "npu-core-9", "npu-core-100"], ["npu-core-9", "npu-core-10", "npu-core-100"]),
        (["ring-1", "numa-10", "numa-2"], ["numa-2", "numa-10", "ring-1"]),
        (["Ascend910-2c-100-0", "Ascend910-2c-99-0"], ["Ascend910-2c-99-0", "Ascend910-2c-100-0"]),
        (["a1", "a01"], ["a01", "a1"]),  # equal numbers: the text breaks the tie, so the order is total
        ([], []),
    ],
)
def test_natural_order(items: list[str], expected: list[str]) -> None:
    assert natural_sorted(items) == expected


@given(st.lists(st.text(alphabet="ab-0123456789", max_size=8), max_size=20))
def test_natural_order_is_total_and_stable(items: list[str]) -> None:
    once = natural_sorted(items)
    assert natural_sorted(reversed(items)) == once
    assert sorted(once) == sorted(items)
    assert all(natural_key(a) <= natural_key(b) for a, b in itertools.pairwise(once))


def test_device_list_is_one_device_per_chip_in_natural_order_with_health_and_numa() -> None:
    chips = [chip(p, healthy=p != 3, numa=p // 8) for p in reversed(range(16))]
    devices = physical_devices(chips, R910)
    assert [d.id for d in devices] == [f"Ascend910-{p}" for p in range(16)]
    assert devices[3] == DeviceEntry("Ascend910-3", False, 0)
    assert devices[10] == DeviceEntry("Ascend910-10", True, 1)
    assert sum(not d.healthy for d in devices) == 1


def test_device_list_takes_only_chips_of_the_resource_type() -> None:
    chips = [chip(0), chip(1, rtype=R310P, family=ChipFamily.ASCEND310P)]
    assert [d.id for d in physical_devices(chips, R910)] == ["Ascend910-0"]
    assert [d.id for d in physical_devices(chips, R310P)] == ["Ascend310P-1"]
    assert physical_devices(chips, ResourceType.NPU) == []


def test_shared_copies_carry_the_chip_health() -> None:
    chips = [
        chip(1, rtype=R310P, family=ChipFamily.ASCEND310P, healthy=False),
        chip(0, rtype=R310P, family=ChipFamily.ASCEND310P),
    ]
    devices = physical_devices(chips, R310P, share_count=3)
    assert [d.id for d in devices] == [
        "Ascend310P-0-0",
        "Ascend310P-0-1",
        "Ascend310P-0-2",
        "Ascend310P-1-0",
        "Ascend310P-1-1",
        "Ascend310P-1-2",
    ]
    assert [d.healthy for d in devices] == [True, True, True, False, False, False]


@pytest.mark.parametrize("share_count", [0, -1, 101])
def test_share_count_out_of_range_is_rejected(share_count: int) -> None:
    with pytest.raises(ValueError, match="share count"):
        physical_devices([chip(0)], R910, share_count=share_count)


def test_vnpu_devices_of_one_template_with_parent_health() -> None:
    chips = [
        chip(0, vnpus=(vnpu(100, "vir02", "2c", 2), vnpu(101, "vir04", "4c", 4), vnpu(102, "vir02", "2c", 2))),
        chip(1, healthy=False, numa=1, vnpus=(vnpu(200, "vir02", "2c", 2),)),
        chip(2),
    ]
    assert vnpu_devices(chips, "2c") == [
        DeviceEntry("Ascend910-2c-100-0", True, None),
        DeviceEntry("Ascend910-2c-102-0", True, None),
        DeviceEntry("Ascend910-2c-200-1", False, 1),
    ]
    assert [d.id for d in vnpu_devices(chips, "4c")] == ["Ascend910-4c-101-0"]
    assert vnpu_devices(chips, "8c") == []
    # A chip cut into vNPUs is not offered whole as well (found by the A3 drill).
    assert [d.id for d in physical_devices(chips, R910)] == ["Ascend910-2"]


def test_vnpu_devices_rejects_an_unknown_suffix() -> None:
    with pytest.raises(ValueError, match="unknown vNPU template suffix"):
        vnpu_devices([chip(0)], "3c")


@pytest.mark.parametrize(
    ("device_id", "phy"),
    [
        ("Ascend910-3", 3),
        ("Ascend910-15", 15),
        ("Ascend310P-2-1", 2),
        ("Ascend910-2c-100-5", 5),
        ("Ascend910-5c.1cpu.16g-7-4_3", 4),
        ("npu-9", 9),
    ],
)
def test_chip_of(device_id: str, phy: int) -> None:
    assert chip_of(device_id) == phy


@pytest.mark.parametrize("device_id", ["npu-core-1", "Ascend910", "", "Ascend910-x", "Ascend910-3c-1-0", "A" * 60])
def test_chip_of_rejects_ids_that_name_no_chip(device_id: str) -> None:
    with pytest.raises(ValueError):  # noqa: PT011 - the message comes from ascend_common
        chip_of(device_id)
