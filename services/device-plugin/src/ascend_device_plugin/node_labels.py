"""Node labels and annotations (contract section 9).

Reference: pkg/server/manager.go `getNewNodeLabel`, `setAcceleratorLabel`, `addTopologyLabel`,
`getNewNodeAnnotation`, `getDevType`, `getNpuBaseInfo`; pkg/common `IsContainAll300IDuo`,
`HasOnChipMemory`; keys and values from pkg/common/constants*.go, ascend-common/api and
ascend-common/devmanager/common. The card type (manager_v2.go `getCardType`) and the pod scene
(`isPodScene`) are the shared rules of ascend_common.products.

The reference's `RealCardType` is our chip family (`Ascend910` is the 910A, `Ascend950` the
reference's Ascend910A5 generation).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping

from ascend_common.chip_traits import SuperPodFields, traits
from ascend_common.chips import ChipFamily, ResourceType
from ascend_common.gojson import GoJSON, go_json, go_map
from ascend_common.products import card_type, is_pod_scene
from ascend_common.superpod import NO_SUPER_POD, SuperPod

from ascend_device_plugin.levels.level_lists import LevelLists, rendered
from ascend_device_plugin.model.chip_pod import ChipInfo

CHIP_NAME_LABEL = "node.kubernetes.io/npu.chip.name"
SERVER_TYPE_LABEL = "servertype"
DRIVER_VERSION_LABEL = "huawei.com/driver.version"
ACCELERATOR_LABEL = "accelerator"
ACCELERATOR_TYPE_LABEL = "accelerator-type"
INFER_CARD_LABEL = "infer-card-type"
CHIP_MEMORY_LABEL = "mind-cluster/npu-chip-memory"
TOPO_SUPER_POD_LABEL = "huawei.com/topotree.superpodid"
TOPO_RACK_LABEL = "huawei.com/topotree.rackid"
TOPO_SERVER_LABEL = "huawei.com/topotree.serverid"

SUPER_POD_ID_ANNOTATION = "superPodID"
SERVER_INDEX_ANNOTATION = "serverIndex"
SERVER_TYPE_ANNOTATION = "serverType"
CARD_TYPE_ANNOTATION = "cardType"
RACK_ID_ANNOTATION = "rackID"
BASE_DEVICE_INFOS_ANNOTATION = "baseDeviceInfos"

# Volcano's Ascend plugin picks the 910B inference-card policy from this value.
A300I_A2_LABEL = "card-910b-infer"
A300I_DUO_LABEL = "card-300i-duo"
ATLAS_300I_DUO = "Atlas 300I Duo"  # dcmi_get_product_type of a 300I Duo card
# A Kubernetes label value; one that does not match would make the whole node patch fail.
_LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")
_MAX_LABEL_VALUE = 63


def node_labels(
    chip_name: str,
    family: ChipFamily,
    aicore: int,
    driver_version: str | None,
    rtype: ResourceType,
    hbm_total_mb: int | None,
    existing: Mapping[str, str],
    *,
    board_id: int | None = None,
    product_types: Iterable[str | None] = (),
    super_pod: SuperPod = NO_SUPER_POD,
) -> dict[str, str]:
    """The labels to set on the node. Values that are empty or not valid label values are left out.

    `board_id` is the first chip's; `product_types` are every chip's (None: unreadable, skipped).
    """
    row = traits(family)
    wanted: dict[str, str | None] = {CHIP_NAME_LABEL: chip_name, DRIVER_VERSION_LABEL: driver_version}
    # An administrator may have set servertype by hand (e.g. a public name); it is kept, but the A5
    # generation names its server type by the generic prefix and always writes it.
    if row.server_label_forced or SERVER_TYPE_LABEL not in existing:
        wanted[SERVER_TYPE_LABEL] = f"{row.server_label_prefix}-{aicore}"
    # HBM on the chip: the 310 cards have DDR, and the reference writes no memory label there.
    if row.on_chip_memory and hbm_total_mb is not None and hbm_total_mb > 0:
        wanted[CHIP_MEMORY_LABEL] = f"{hbm_total_mb // 1024}G"
    # The Atlas 300I A2 boards are the only ones the reference labels with an accelerator type; every
    # other accelerator-type value (module-910b-8, module-a3-16-super-pod, ...) is set by the administrator.
    if board_id in row.infer_card_boards:
        wanted[ACCELERATOR_TYPE_LABEL] = A300I_A2_LABEL
    if all_300i_duo(product_types):
        wanted[INFER_CARD_LABEL] = A300I_DUO_LABEL
    if row.accelerator_label:  # the reference's acceleratorLabelMap (no Ascend310B entry)
        wanted[ACCELERATOR_LABEL] = f"huawei-{rtype.value}"
    wanted.update(topology_labels(family, super_pod))
    return {key: value for key, value in wanted.items() if value and _valid_label_value(value)}


def all_300i_duo(product_types: Iterable[str | None]) -> bool:
    """Every card that answered is an Atlas 300I Duo (and at least one answered): `IsContainAll300IDuo`."""
    known = {product for product in product_types if product is not None}
    return known == {ATLAS_300I_DUO}


def topology_labels(family: ChipFamily, super_pod: SuperPod) -> dict[str, str]:
    """`huawei.com/topotree.*` labels: the super pod on A3; super pod, rack (1D/2D pods) and server on A5."""
    labels: dict[str, str] = {}
    fields = traits(family).super_pod
    if fields is SuperPodFields.NONE:
        return labels
    if super_pod.super_pod_id >= 0:
        labels[TOPO_SUPER_POD_LABEL] = str(super_pod.super_pod_id)
    if fields is SuperPodFields.RACK:
        if is_pod_scene(super_pod.super_pod_type) and super_pod.rack_id >= 0:
            labels[TOPO_RACK_LABEL] = str(super_pod.rack_id)
        if super_pod.server_index >= 0:
            labels[TOPO_SERVER_LABEL] = str(super_pod.server_index)
    return labels


def _valid_label_value(value: str) -> bool:
    return len(value) <= _MAX_LABEL_VALUE and _LABEL_VALUE.match(value) is not None


def server_type(family: ChipFamily) -> str:
    """The `serverType` annotation (`getDevType`): "A3" on A3, "npu" on A5, "" on older chips."""
    return traits(family).server_type


def node_annotations(
    chips: Iterable[ChipInfo],
    super_pod: SuperPod = NO_SUPER_POD,
    main_board_id: int | None = None,
    levels: LevelLists | None = None,
) -> dict[str, str]:
    """`superPodID`, `serverIndex`, `serverType`, `baseDeviceInfos`, and `cardType` / `rackID` where they apply.

    baseDeviceInfos is a Go map[string]*NpuBaseInfo: keys in Go's sorted order, an unreadable
    IP as "" and a missing SDID as 0 (the Go zero values); on A5 each entry starts with the
    chip's logic id as `DeviceID`, and a 950 chip with rank levels (`levels`, by phy id) ends with
    its `levelList` (omitted when it has none).
    """
    ordered = sorted(chips, key=lambda chip: chip.logic_id)
    infos: dict[str, GoJSON] = {chip.name: _base_info(chip, levels or {}) for chip in ordered}
    annotations = {
        SUPER_POD_ID_ANNOTATION: str(super_pod.super_pod_id),
        SERVER_INDEX_ANNOTATION: str(super_pod.server_index),
        BASE_DEVICE_INFOS_ANNOTATION: go_json(go_map(infos)),
    }
    if not ordered:
        return annotations
    first = ordered[0]  # the reference reads the board of its first device
    annotations[SERVER_TYPE_ANNOTATION] = server_type(first.family)
    if (card := card_type(first.board_id, main_board_id)) is not None:
        annotations[CARD_TYPE_ANNOTATION] = card
    if traits(first.family).super_pod is SuperPodFields.RACK and is_pod_scene(super_pod.super_pod_type):
        annotations[RACK_ID_ANNOTATION] = str(super_pod.rack_id)
    return annotations


def _base_info(chip: ChipInfo, levels: LevelLists) -> GoJSON:
    info: dict[str, GoJSON] = {"IP": chip.device_ip or "", "SuperDeviceID": chip.super_device_id or 0}
    if traits(chip.family).rank_levels:
        # NpuBaseInfo.DeviceID is an omitempty pointer set only on A5, and it comes first.
        info = {"DeviceID": chip.logic_id, **info}
        if (level_list := rendered(levels, chip.phy_id)) is not None:
            info["levelList"] = level_list  # NpuBaseInfo's last field, omitempty
    return info
