"""Node labels and annotations (contract section 9)."""

from __future__ import annotations

import json

import pytest
from ascend_common.chips import ChipFamily, ResourceType
from ascend_device_plugin.core import ChipInfo, node_annotations, node_labels

R910 = ResourceType.ASCEND910


def test_node_labels_on_a_910b_node() -> None:
    labels = node_labels("910B3", ChipFamily.ASCEND910B, 20, "24.1.rc2", R910, 65536, {})
    assert labels == {
        "node.kubernetes.io/npu.chip.name": "910B3",
        "servertype": "Ascend910B-20",
        "huawei.com/driver.version": "24.1.rc2",
        "accelerator": "huawei-Ascend910",
        "mind-cluster/npu-chip-memory": "64G",
    }


def test_servertype_is_set_only_when_absent() -> None:
    labels = node_labels("910B3", ChipFamily.ASCEND910B, 20, "24.1.rc2", R910, 65536, {"servertype": "custom"})
    assert "servertype" not in labels


@pytest.mark.parametrize(
    ("family", "aicore", "servertype"),
    [
        (ChipFamily.ASCEND910, 32, "Ascend910-32"),
        (ChipFamily.ASCEND910A3, 24, "Ascend910A3-24"),
        (ChipFamily.ASCEND310P, 8, "Ascend310P-8"),
    ],
)
def test_servertype_is_family_and_ai_cores(family: ChipFamily, aicore: int, servertype: str) -> None:
    assert node_labels("x1", family, aicore, None, R910, None, {})["servertype"] == servertype


@pytest.mark.parametrize(
    ("family", "hbm", "memory"),
    [
        (ChipFamily.ASCEND910B, 65536, "64G"),
        (ChipFamily.ASCEND910B, 65535, "63G"),  # integer division, as the reference's MemorySize/1024
        (ChipFamily.ASCEND910A3, 65536, "64G"),
        (ChipFamily.ASCEND910, 32768, "32G"),
        (ChipFamily.ASCEND910B, None, None),
        (ChipFamily.ASCEND910B, 0, None),
        (ChipFamily.ASCEND310P, 24576, None),  # no on-chip memory label on 310 cards
    ],
)
def test_chip_memory_label(family: ChipFamily, hbm: int | None, memory: str | None) -> None:
    labels = node_labels("x1", family, 8, None, R910, hbm, {})
    assert labels.get("mind-cluster/npu-chip-memory") == memory


@pytest.mark.parametrize("version", [None, "", "24.1 rc2", "v" * 64, "-bad"])
def test_invalid_or_missing_label_values_are_left_out(version: str | None) -> None:
    labels = node_labels("910B3", ChipFamily.ASCEND910B, 20, version, R910, None, {})
    assert "huawei.com/driver.version" not in labels
    assert labels["accelerator"] == "huawei-Ascend910"


def test_accelerator_names_the_resource_type() -> None:
    assert (
        node_labels("Ascend950PR", ChipFamily.ASCEND950, 32, None, ResourceType.NPU, None, {})["accelerator"]
        == "huawei-npu"
    )


def chip(phy: int, ip: str | None, sdid: int | None) -> ChipInfo:
    return ChipInfo(
        logic_id=phy,
        phy_id=phy,
        card_id=phy,
        name=f"Ascend910-{phy}",
        rtype=R910,
        family=ChipFamily.ASCEND910A3,
        aicore=24,
        healthy=True,
        device_ip=ip,
        super_device_id=sdid,
    )


def test_node_annotations_golden() -> None:
    chips = [chip(2, "192.168.1.2", 2), chip(10, None, None), chip(0, "192.168.1.0", 0), chip(1, "192.168.1.1", 1)]
    annotations = node_annotations(chips)
    assert annotations == {
        "superPodID": "-1",
        "serverIndex": "-1",
        "baseDeviceInfos": (
            '{"Ascend910-0":{"IP":"192.168.1.0","SuperDeviceID":0},'
            '"Ascend910-1":{"IP":"192.168.1.1","SuperDeviceID":1},'
            '"Ascend910-10":{"IP":"","SuperDeviceID":0},'
            '"Ascend910-2":{"IP":"192.168.1.2","SuperDeviceID":2}}'
        ),
    }
    assert json.loads(annotations["baseDeviceInfos"])["Ascend910-2"]["IP"] == "192.168.1.2"


def test_node_annotations_in_a_super_pod() -> None:
    annotations = node_annotations([chip(0, "10.0.0.1", 8)], super_pod_id=3, server_index=1)
    assert annotations["superPodID"] == "3"
    assert annotations["serverIndex"] == "1"
    assert node_annotations([])["baseDeviceInfos"] == "{}"
