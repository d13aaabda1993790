"""Node labels and annotations (contract section 9).

Reference: pkg/server/manager.go `getNewNodeLabel`, `getNpuBaseInfo`; pkg/server/labelers.go
(chip memory only on chips with on-chip memory: `common.HasOnChipMemory`).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping

from ascend_common.chips import ChipFamily, ResourceType
from ascend_common.gojson import GoJSON, go_json, go_map

from ascend_device_plugin.core.model import ChipInfo

CHIP_NAME_LABEL = "node.kubernetes.io/npu.chip.name"
SERVER_TYPE_LABEL = "servertype"
DRIVER_VERSION_LABEL = "huawei.com/driver.version"
ACCELERATOR_LABEL = "accelerator"
CHIP_MEMORY_LABEL = "mind-cluster/npu-chip-memory"
SUPER_POD_ID_ANNOTATION = "superPodID"
SERVER_INDEX_ANNOTATION = "serverIndex"
BASE_DEVICE_INFOS_ANNOTATION = "baseDeviceInfos"

# HBM on the chip: 310 / 310B / 310P cards have DDR, and the reference writes no memory label there.
_ON_CHIP_MEMORY = frozenset({ChipFamily.ASCEND910, ChipFamily.ASCEND910B, ChipFamily.ASCEND910A3, ChipFamily.ASCEND950})
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
) -> dict[str, str]:
    """The labels to set on the node. Values that are empty or not valid label values are left out."""
    wanted: dict[str, str | None] = {
        CHIP_NAME_LABEL: chip_name,
        ACCELERATOR_LABEL: f"huawei-{rtype.value}",
        DRIVER_VERSION_LABEL: driver_version,
    }
    # An administrator may have set servertype by hand (e.g. a public name); never overwrite it.
    if SERVER_TYPE_LABEL not in existing:
        wanted[SERVER_TYPE_LABEL] = f"{family.value}-{aicore}"
    if family in _ON_CHIP_MEMORY and hbm_total_mb is not None and hbm_total_mb > 0:
        wanted[CHIP_MEMORY_LABEL] = f"{hbm_total_mb // 1024}G"
    return {key: value for key, value in wanted.items() if value and _valid_label_value(value)}


def _valid_label_value(value: str) -> bool:
    return len(value) <= _MAX_LABEL_VALUE and _LABEL_VALUE.match(value) is not None


def node_annotations(chips: Iterable[ChipInfo], super_pod_id: int = -1, server_index: int = -1) -> dict[str, str]:
    """`superPodID`, `serverIndex` and `baseDeviceInfos` = {"<chip>": {"IP", "SuperDeviceID"}}.

    baseDeviceInfos is a Go map[string]*NpuBaseInfo: keys in Go's sorted order, an unreadable
    IP as "" and a missing SDID as 0 (the Go zero values).
    """
    infos: dict[str, GoJSON] = {
        chip.name: {"IP": chip.device_ip or "", "SuperDeviceID": chip.super_device_id or 0} for chip in chips
    }
    return {
        SUPER_POD_ID_ANNOTATION: str(super_pod_id),
        SERVER_INDEX_ANNOTATION: str(server_index),
        BASE_DEVICE_INFOS_ANNOTATION: go_json(go_map(infos)),
    }
