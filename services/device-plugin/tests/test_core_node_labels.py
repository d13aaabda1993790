"""Node labels and annotations (contract section 9)."""

from __future__ import annotations

import dataclasses
import json

import pytest
from ascend_common.chips import ChipFamily, ResourceType
from ascend_common.superpod import SuperPod
from ascend_device_plugin.model.chip_pod import ChipInfo
from ascend_device_plugin.node_labels import node_annotations, node_labels

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
        "serverType": "A3",
        "baseDeviceInfos": (
            '{"Ascend910-0":{"IP":"192.168.1.0","SuperDeviceID":0},'
            '"Ascend910-1":{"IP":"192.168.1.1","SuperDeviceID":1},'
            '"Ascend910-10":{"IP":"","SuperDeviceID":0},'
            '"Ascend910-2":{"IP":"192.168.1.2","SuperDeviceID":2}}'
        ),
    }
    assert json.loads(annotations["baseDeviceInfos"])["Ascend910-2"]["IP"] == "192.168.1.2"


def test_node_annotations_in_a_super_pod() -> None:
    annotations = node_annotations([chip(0, "10.0.0.1", 8)], SuperPod(super_pod_id=3, server_index=1))
    assert annotations["superPodID"] == "3"
    assert annotations["serverIndex"] == "1"
    assert node_annotations([]) == {"superPodID": "-1", "serverIndex": "-1", "baseDeviceInfos": "{}"}


def test_a5_servertype_is_always_written_with_the_npu_prefix() -> None:
    labels = node_labels("Ascend950PR", ChipFamily.ASCEND950, 25, None, ResourceType.NPU, None, {"servertype": "x"})
    assert labels["servertype"] == "npu-25"


@pytest.mark.parametrize(
    ("family", "board", "expected"),
    [
        (ChipFamily.ASCEND910B, 0x28, "card-910b-infer"),
        (ChipFamily.ASCEND910B, 0x29, "card-910b-infer"),
        (ChipFamily.ASCEND910B, 0x22, None),  # an HCCS training board
        (ChipFamily.ASCEND910B, 0x33, None),  # no HCCS, but not a 300I A2
        (ChipFamily.ASCEND910B, None, None),  # board id unreadable
        (ChipFamily.ASCEND910, 0x28, None),  # only 910B chips on these boards are inference cards
        (ChipFamily.ASCEND310P, 0x28, None),
    ],
)
def test_accelerator_type_only_on_300i_a2_boards(family: ChipFamily, board: int | None, expected: str | None) -> None:
    labels = node_labels("x1", family, 20, None, R910, None, {}, board_id=board)
    assert labels.get("accelerator-type") == expected


def test_accelerator_type_overwrites_a_hand_set_value() -> None:
    labels = node_labels("910B4", ChipFamily.ASCEND910B, 20, None, R910, None, {"accelerator-type": "x"}, board_id=0x28)
    assert labels["accelerator-type"] == "card-910b-infer"


@pytest.mark.parametrize(
    ("products", "expected"),
    [
        (["Atlas 300I Duo"] * 4, "card-300i-duo"),
        (["Atlas 300I Duo", None], "card-300i-duo"),  # an unreadable card is skipped, as the reference skips it
        (["Atlas 300I Duo", "Atlas 300I Pro"], None),  # a mixed node
        (["Atlas 300I Duo", ""], None),
        ([None], None),
        ([], None),
    ],
)
def test_infer_card_type_needs_every_card_a_300i_duo(products: list[str | None], expected: str | None) -> None:
    r310p = ResourceType.ASCEND310P
    labels = node_labels("310P3", ChipFamily.ASCEND310P, 8, None, r310p, None, {}, product_types=products)
    assert labels.get("infer-card-type") == expected


def test_310b_has_no_accelerator_label() -> None:
    labels = node_labels("310B1", ChipFamily.ASCEND310B, 8, None, ResourceType.ASCEND310, None, {})
    assert "accelerator" not in labels
    assert labels["servertype"] == "Ascend310B-8"


@pytest.mark.parametrize(
    ("family", "expected"),
    [
        (ChipFamily.ASCEND910A3, {"huawei.com/topotree.superpodid": "7"}),
        (
            ChipFamily.ASCEND950,
            {
                "huawei.com/topotree.superpodid": "7",
                "huawei.com/topotree.rackid": "2",
                "huawei.com/topotree.serverid": "4",
            },
        ),
        (ChipFamily.ASCEND910B, {}),
        (ChipFamily.ASCEND910, {}),
        (ChipFamily.ASCEND310P, {}),
    ],
)
def test_topology_labels_by_family(family: ChipFamily, expected: dict[str, str]) -> None:
    pod = SuperPod(super_pod_id=7, server_index=4, rack_id=2, super_pod_type=1)
    labels = node_labels("x1", family, 8, None, R910, None, {}, super_pod=pod)
    assert {k: v for k, v in labels.items() if k.startswith("huawei.com/topotree.")} == expected


def a5_chip(logic: int, phy: int) -> ChipInfo:
    return ChipInfo(
        logic_id=logic,
        phy_id=phy,
        card_id=phy,
        name=f"npu-{phy}",
        rtype=ResourceType.NPU,
        family=ChipFamily.ASCEND950,
        aicore=25,
        healthy=True,
        device_ip="10.0.0.1",
        board_id=0x1A,
    )


def test_a5_base_device_infos_lead_with_the_logic_id() -> None:
    annotations = node_annotations([a5_chip(1, 0), a5_chip(0, 1)])
    assert annotations["baseDeviceInfos"] == (
        '{"npu-0":{"DeviceID":1,"IP":"10.0.0.1","SuperDeviceID":0},'
        '"npu-1":{"DeviceID":0,"IP":"10.0.0.1","SuperDeviceID":0}}'
    )
    assert annotations["serverType"] == "npu"


@pytest.mark.parametrize(
    ("board", "main_board", "expected"),
    [
        (0x1A, 0x68, "300I-Atlas350"),
        (0x1B, 0x68, "300I-Atlas350"),
        (0x1C, 0x6C, "300I-Atlas350-4p"),
        (0x1A, 0x69, None),  # another main board
        (0x1A, None, None),  # main board unread
        (0x28, 0x68, None),  # not a 300I A5 board
    ],
)
def test_card_type_annotation(board: int, main_board: int | None, expected: str | None) -> None:
    chips = [dataclasses.replace(a5_chip(0, 0), board_id=board)]
    assert node_annotations(chips, main_board_id=main_board).get("cardType") == expected
