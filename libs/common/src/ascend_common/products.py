"""What a 950 (A5) node is, as a product: its card type, product type and chips per node.

Pure rules on what the chips report (board id, main board id, super-pod type), shared by the
plugin (the `cardType` annotation, `HCCL_TOPO_FILE_PATH` in Allocate, node labels) and the
fault-manager (`RackID` in the device-info ConfigMap).
Reference: device-plugin pkg/server/manager_v2.go `getCardType`, pkg/server/plugin_v2.go
`getProductTypeKey`, pkg/server/npu_base_v2.go `hcclTopoFilePathMap`, pkg/common/constants_v2.go;
ascend-common devmanager/common utils_v2.go `GetMaxNpuCountPerNode`, constants_v2.go.
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import IntEnum
from typing import Final


class ProductType(IntEnum):
    """The 950's product types: the super-pod type its chips report (`dcmi_spod_info.super_pod_type`),
    or the card type of an Atlas 350 card (the reference's ProductType* constants)."""

    SERVER = 0
    POD_1D = 1
    POD_2D = 2
    SERVER_16P = 3
    SERVER_32P = 4
    CARD_1P = 5
    CARD_4P = 6


# Super-pod types whose nodes sit in a rack of a 1D / 2D pod: only they have a rack id to publish.
POD_TYPES_WITH_RACK: Final = frozenset({ProductType.POD_1D, ProductType.POD_2D})

# Atlas 350 300I cards: their board ids, and the main board that names the card type.
ATLAS_350_BOARD_IDS: Final = frozenset({0x1A, 0x1B, 0x1C})
ATLAS_350_CARD = "300I-Atlas350"
ATLAS_350_4P_CARD = "300I-Atlas350-4p"
ATLAS_350_MAIN_BOARD_IDS: Final = {0x68: ATLAS_350_CARD, 0x6C: ATLAS_350_4P_CARD}
_CARD_PRODUCT_TYPES: Final = {ATLAS_350_CARD: ProductType.CARD_1P, ATLAS_350_4P_CARD: ProductType.CARD_4P}

DEFAULT_CHIPS_PER_NODE = 8  # the reference's api.NpuCountPerNode
# 950 main boards with a UBoE device, the parameter plane (withUBOEDevicesMainBoardID).
UBOE_BOARDS: Final = frozenset({0x23, 0x25, 0x27})
# Customised main boards with another number of chips (A5UBXMainBoardId, A5TXMainBoardId, A5DYMainBoardId).
CHIPS_PER_NODE_BY_MAIN_BOARD: Final = {0x44: 16, 0x46: 4, 0x48: 4}

# The HCCL topology file of each product type, set as HCCL_TOPO_FILE_PATH in an Allocate response.
HCCL_TOPO_DIR = "/usr/local/Ascend/driver/topo/950"
HCCL_TOPO_FILES: Final[Mapping[int, str]] = {
    ProductType.SERVER: f"{HCCL_TOPO_DIR}/atlas_850_1.json",
    ProductType.POD_1D: f"{HCCL_TOPO_DIR}/atlas_950_1.json",
    ProductType.POD_2D: f"{HCCL_TOPO_DIR}/atlas_950_2.json",
    ProductType.SERVER_16P: f"{HCCL_TOPO_DIR}/atlas_850_2.json",
    ProductType.SERVER_32P: f"{HCCL_TOPO_DIR}/atlas_850_3.json",
    ProductType.CARD_1P: f"{HCCL_TOPO_DIR}/atlas_350_1.json",
    ProductType.CARD_4P: f"{HCCL_TOPO_DIR}/atlas_350_3.json",
}


def card_type(board_id: int | None, main_board_id: int | None) -> str | None:
    """The card type of an Atlas 350 card (`getCardType`): an Atlas 350 board id with the main board
    0x68 or 0x6C; None for anything else, an unread board id or an unread main board id."""
    if board_id not in ATLAS_350_BOARD_IDS or main_board_id is None:
        return None
    return ATLAS_350_MAIN_BOARD_IDS.get(main_board_id)


def product_type(card: str | None, super_pod_type: int | None) -> int | None:
    """The node's product type (`getProductTypeKey`): an Atlas 350 card is a 1P / 4P card whatever
    its chips report; otherwise the super-pod type the chips report, as is (None, or SuperPod's -1,
    when none answered). A value outside ProductType is returned too: the reference keeps it, and
    finds no topology file for it."""
    if card is not None and card in _CARD_PRODUCT_TYPES:
        return _CARD_PRODUCT_TYPES[card]
    return super_pod_type


def hccl_topo_file(product: int | None) -> str | None:
    """HCCL_TOPO_FILE_PATH for a product type (`hcclTopoFilePathMap`); None: the variable is not set."""
    return None if product is None else HCCL_TOPO_FILES.get(product)


def max_chips_per_node(main_board_id: int | None) -> int:
    """How many chips a node of this main board has at most (`GetMaxNpuCountPerNode`)."""
    if main_board_id is None:
        return DEFAULT_CHIPS_PER_NODE
    return CHIPS_PER_NODE_BY_MAIN_BOARD.get(main_board_id, DEFAULT_CHIPS_PER_NODE)


def is_pod_scene(super_pod_type: int | None) -> bool:
    """A node of a 1D or 2D pod (`isPodScene`): the only nodes that publish their rack id (label
    `huawei.com/topotree.rackid`, annotation `rackID`, `RackID` in the device-info ConfigMap)."""
    return super_pod_type in POD_TYPES_WITH_RACK
