"""The 950 (A5) generation's pure rules: detection, card type, product type, chips per node.

Ported from the reference's ascend-common devmanager/common utils_test.go (TestGetDevTypeAndA3BoardIds)
and utils_v2_test.go (TestGetMaxNpuCountPerNode), device-plugin pkg/server/manager_v2_test.go
(TestGetCardType), plugin_v2_test.go (TestSetServerHcclTopoFilePathEnv, TestSetCardHcclTopoFilePathEnv:
the product-type and topology-file half; the Allocate half is the plugin's) and npu_base_v2_test.go
(TestProductBaseMethodIsPodScene). One test per Go test, one parameter row per convey case; rows
without a Go counterpart are marked "ours". The Go tests mock the device manager; here the facts
it would answer are the arguments of the pure functions.
"""

from __future__ import annotations

import pytest
from ascend_common.chip_traits import resource_type
from ascend_common.chips import A3_BOARD_IDS, ChipFamily, detect_family, is_a5_chip
from ascend_common.products import (
    ATLAS_350_4P_CARD,
    ATLAS_350_CARD,
    HCCL_TOPO_FILES,
    ProductType,
    card_type,
    hccl_topo_file,
    is_pod_scene,
    max_chips_per_node,
    product_type,
)

A800I_A3_BOARD, A800I_A3_BOARD_2 = 0xB3, 0xB4
A300I_A2_BOARD = 0x28  # the reference's A300IA2BoardId
NAME_32 = "Ascend950" + "X" * 23
NAME_33 = NAME_32 + "X"

# ----- utils_test.go: TestGetDevTypeAndA3BoardIds, and Is910A5Chip (no Go test of its own) ---------


@pytest.mark.parametrize(
    ("name", "board", "family"),
    [
        pytest.param("", A800I_A3_BOARD_2, ChipFamily.ASCEND910A3, id="01-board 0xb4 is A3 whatever the name"),
        pytest.param(
            "Ascend950PR", A800I_A3_BOARD, ChipFamily.ASCEND910A3, id="ours: an A3 board wins over a 950 name"
        ),
        pytest.param("310P3", 0xB0, ChipFamily.ASCEND910A3, id="ours: and over any other name"),
        pytest.param("Ascend950B", None, ChipFamily.ASCEND950, id="ours: Ascend950B"),
        pytest.param("Ascend950PR", 0x1B, ChipFamily.ASCEND950, id="ours: Ascend950PR on an Atlas 350 board"),
        pytest.param(NAME_32, None, ChipFamily.ASCEND950, id="ours: 32 characters"),
        pytest.param("Ascend950310P", None, ChipFamily.ASCEND950, id="ours: the 950 rule comes before the 310 ones"),
    ],
)
def test_get_dev_type(name: str, board: int | None, family: ChipFamily) -> None:
    assert detect_family(name, board) is family


@pytest.mark.parametrize("board", [A800I_A3_BOARD_2, A800I_A3_BOARD])
def test_is_910a3_chip(board: int) -> None:
    """02-board 0xb4 and the existing 0xb3 are A3 boards."""
    assert board in A3_BOARD_IDS


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("Ascend950PR", True),
        ("Ascend950B", True),
        ("Ascend950", True),
        (NAME_32, True),
        (NAME_33, False),
        ("Ascend95", False),
        ("ascend950PR", False),
        ("910B3", False),
        ("", False),
    ],
)
def test_is_910a5_chip(name: str, expected: bool) -> None:
    assert is_a5_chip(name) is expected


def test_a_33_character_950_name_is_no_known_chip() -> None:
    with pytest.raises(ValueError, match="unknown chip name"):
        detect_family(NAME_33)


def test_the_950_is_advertised_as_npu() -> None:
    assert resource_type(detect_family("Ascend950B")).value == "npu"


# ----- manager_v2_test.go: TestGetCardType ----------------------------------------------------------


@pytest.mark.parametrize(
    ("board", "main_board", "expected"),
    [
        pytest.param(None, 0x68, None, id="get board info error"),
        pytest.param(0x1A, 0x68, ATLAS_350_CARD, id="success"),
        pytest.param(A300I_A2_BOARD, 0x68, None, id="failed"),
        pytest.param(0x1B, 0x68, "300I-Atlas350", id="ours: board 0x1b, main board 0x68"),
        pytest.param(0x1C, 0x6C, "300I-Atlas350-4p", id="ours: board 0x1c, main board 0x6c"),
        pytest.param(0x1A, 0x6B, None, id="ours: board 0x1a, main board 0x6b"),
        pytest.param(0x1B, None, None, id="ours: main board not read"),
    ],
)
def test_get_card_type(board: int | None, main_board: int | None, expected: str | None) -> None:
    assert card_type(board, main_board) == expected


# ----- utils_v2_test.go: TestGetMaxNpuCountPerNode -------------------------------------------------


@pytest.mark.parametrize(
    ("main_board", "expected"),
    [
        pytest.param(0x44, 16, id="Override for A5UBX MainBoard"),
        pytest.param(0x46, 4, id="Override for A5TX MainBoard"),
        pytest.param(0x48, 4, id="Override for A5DY MainBoard"),
        pytest.param(99999, 8, id="Unknown MainBoard - return default"),
        pytest.param(0, 8, id="Zero MainBoard ID"),
        pytest.param(None, 8, id="ours: main board not read"),
    ],
)
def test_get_max_npu_count_per_node(main_board: int | None, expected: int) -> None:
    assert max_chips_per_node(main_board) == expected


# ----- plugin_v2_test.go: the product type and its topology file ----------------------------------


@pytest.mark.parametrize(
    ("card", "super_pod_type", "topo_file"),
    [
        pytest.param("server", None, None, id="case 3 GetSuperPodInfo error"),
        pytest.param("server", 10, None, id="case 4 superPodType illegal"),
        pytest.param("server", 1, "/usr/local/Ascend/driver/topo/950/atlas_950_1.json", id="case 5 set env ok"),
        pytest.param(ATLAS_350_CARD, None, "/usr/local/Ascend/driver/topo/950/atlas_350_1.json", id="case 6"),
        pytest.param(ATLAS_350_4P_CARD, None, "/usr/local/Ascend/driver/topo/950/atlas_350_3.json", id="case 7"),
        pytest.param(None, -1, None, id="ours: SuperPod's unread type"),
    ],
)
def test_set_hccl_topo_file_path_env(card: str | None, super_pod_type: int | None, topo_file: str | None) -> None:
    assert hccl_topo_file(product_type(card, super_pod_type)) == topo_file


@pytest.mark.parametrize(
    ("product", "file"),
    [
        (0, "atlas_850_1.json"),
        (1, "atlas_950_1.json"),
        (2, "atlas_950_2.json"),
        (3, "atlas_850_2.json"),
        (4, "atlas_850_3.json"),
        (5, "atlas_350_1.json"),
        (6, "atlas_350_3.json"),
        (7, None),
        (-1, None),
        (None, None),
    ],
)
def test_hccl_topo_file_of_each_product_type(product: int | None, file: str | None) -> None:
    """Ours: the seven product keys of hcclTopoFilePathMap, and nothing for any other value."""
    expected = None if file is None else f"/usr/local/Ascend/driver/topo/950/{file}"
    assert hccl_topo_file(product) == expected


def test_product_types_are_the_references() -> None:
    assert [(p.name, p.value) for p in ProductType] == [
        ("SERVER", 0),
        ("POD_1D", 1),
        ("POD_2D", 2),
        ("SERVER_16P", 3),
        ("SERVER_32P", 4),
        ("CARD_1P", 5),
        ("CARD_4P", 6),
    ]
    assert set(HCCL_TOPO_FILES) == set(ProductType)


@pytest.mark.parametrize(
    ("card", "super_pod_type", "expected"),
    [
        (ATLAS_350_CARD, ProductType.POD_2D, ProductType.CARD_1P),
        (ATLAS_350_4P_CARD, None, ProductType.CARD_4P),
        (None, ProductType.SERVER_16P, ProductType.SERVER_16P),
        ("server", 10, 10),
        (None, None, None),
    ],
)
def test_product_type(card: str | None, super_pod_type: int | None, expected: int | None) -> None:
    """Ours: the card type wins over what the chips report (getProductTypeKey)."""
    assert product_type(card, super_pod_type) == expected


# ----- npu_base_v2_test.go: TestProductBaseMethodIsPodScene -----------------------------------------


@pytest.mark.parametrize(
    ("super_pod_type", "expected"),
    [
        pytest.param(None, False, id="01-product is empty"),
        pytest.param(ProductType.POD_2D, True, id="02-product is 2d"),
        pytest.param(ProductType.SERVER, False, id="03-server with super pod"),
        pytest.param(ProductType.SERVER, False, id="04-super server"),
        pytest.param(ProductType.POD_1D, True, id="ours: 1d"),
        pytest.param(ProductType.CARD_4P, False, id="ours: a card"),
    ],
)
def test_product_base_is_pod_scene(super_pod_type: int | None, expected: bool) -> None:
    assert is_pod_scene(super_pod_type) is expected
