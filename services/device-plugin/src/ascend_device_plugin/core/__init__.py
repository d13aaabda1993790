"""Pure rules of the device plugin: no I/O, no gRPC, no Kubernetes client, no event loop."""

from __future__ import annotations

from ascend_common.gojson import go_json, go_map

from ascend_device_plugin.core.allocate import (
    AllocDevice,
    ContainerAlloc,
    DeviceNode,
    container_response,
    validate_request,
)
from ascend_device_plugin.core.annotations import (
    CONFIG_910_KEY,
    CONFIG_NPU_KEY,
    ConfigDevice,
    configuration_key,
    device_configuration,
    real_allocation_annotations,
)
from ascend_device_plugin.core.devices import DeviceEntry, chip_of, physical_devices, vnpu_devices
from ascend_device_plugin.core.model import ChipInfo, PodView
from ascend_device_plugin.core.node_labels import node_annotations, node_labels
from ascend_device_plugin.core.ordering import natural_key, natural_sorted
from ascend_device_plugin.core.preferred import preferred_allocation
from ascend_device_plugin.core.topology import affinity_groups, device_groups
from ascend_device_plugin.core.vnpu_cores import core_health, core_ids
from ascend_device_plugin.core.volcano import (
    PREDICATE_TIME,
    TAKEN,
    DynamicRequest,
    Reject,
    VolcanoChoice,
    annotation_key,
    parse_npu_core,
    parse_predicate_time,
    parse_real_devices,
    pick_pod,
    taken_patch,
)

__all__ = [
    "CONFIG_910_KEY",
    "CONFIG_NPU_KEY",
    "PREDICATE_TIME",
    "TAKEN",
    "AllocDevice",
    "ChipInfo",
    "ConfigDevice",
    "ContainerAlloc",
    "DeviceEntry",
    "DeviceNode",
    "DynamicRequest",
    "PodView",
    "Reject",
    "VolcanoChoice",
    "affinity_groups",
    "annotation_key",
    "chip_of",
    "configuration_key",
    "container_response",
    "core_health",
    "core_ids",
    "device_configuration",
    "device_groups",
    "go_json",
    "go_map",
    "natural_key",
    "natural_sorted",
    "node_annotations",
    "node_labels",
    "parse_npu_core",
    "parse_predicate_time",
    "parse_real_devices",
    "physical_devices",
    "pick_pod",
    "preferred_allocation",
    "real_allocation_annotations",
    "taken_patch",
    "validate_request",
    "vnpu_devices",
]
