"""Pod annotations the plugin writes after an allocation (contract section 5).

Reference: pkg/device/ascendcommon.go `AddPodAnnotation`, pkg/common/common.go
`GetPodConfiguration`, pkg/common/proto.go `Instance` / `Device` (json tags and field order).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import NamedTuple

from ascend_common.chip_traits import traits
from ascend_common.chips import ResourceType
from ascend_common.gojson import GoJSON, go_json, go_map
from ascend_common.inuse import ASCEND_REAL, KLT_DEV
from ascend_common.naming import parse_device_id

from ascend_device_plugin.levels.level_lists import LevelLists, rendered
from ascend_device_plugin.model.chip_pod import ChipInfo

__all__ = [
    "CONFIG_910_KEY",
    "CONFIG_NPU_KEY",
    "PREDICATE_TIME",
    "SDID_NOT_LISTED",
    "SDID_UNREAD",
    "TAKEN",
    "UINT64_MAX",
    "UNKNOWN_DEVICE_IP",
    "VNPU_DEVICE_IP",
    "ConfigDevice",
    "config_devices",
    "configuration_key",
    "device_configuration",
    "go_json",
    "go_map",
    "real_allocation_annotations",
    "taken_patch",
]

CONFIG_910_KEY = "ascend.kubectl.kubernetes.io/ascend-910-configuration"
CONFIG_NPU_KEY = "ascend.kubectl.kubernetes.io/ascend-npu-configuration"
VNPU_DEVICE_IP = "127.0.0.1"  # the reference's DefaultDeviceIP
UNKNOWN_DEVICE_IP = "-1"
# super_device_id of a physical chip whose SDID was never read: the reference writes the Go zero
# value its NpuDevice keeps when dcmi_get_super_pod_info failed (every chip off a super pod).
SDID_UNREAD = 0
SDID_NOT_LISTED = -2  # the reference's SdIdAbnormal: the phy id is not in the node's device list
# Volcano's predicate-time, which the plugin sets to TAKEN on a pod once it has handed the pod's
# devices out. Here, with the rest of what an allocation writes on its pod, because every path's
# report writes it (volcano.annotations reads it when picking a pod).
PREDICATE_TIME = "predicate-time"
UINT64_MAX = 2**64 - 1
TAKEN = str(UINT64_MAX)  # "18446744073709551615": the pod's devices were handed out already


def taken_patch() -> dict[str, str]:
    """The annotation patch that marks a pod's Volcano devices as handed out."""
    return {PREDICATE_TIME: TAKEN}


def real_allocation_annotations(
    real: Sequence[str],
    kubelet_ids: Sequence[str],
    *,
    preset_vnpu: bool = False,
    vfg_ids: Mapping[str, int] | None = None,
) -> dict[str, str]:
    """`huawei.com/AscendReal` and `huawei.com/kltDev`, each sorted and comma-joined.

    Sorted in Go's sort.Strings order (plain string order, `Ascend910-10` before `Ascend910-2`):
    the reference's real list comes out of sets.String.List(), which sorts that way.
    `preset_vnpu`: a static vNPU resource - the reference writes neither key; we still write
    kltDev so the fault-manager can see which chips are in use (the vNPU ids name their chip).
    `vfg_ids`: dynamic vNPU mode - a created vNPU's name gets its `_<vfgID>` suffix.
    """
    annotations = {KLT_DEV: ",".join(sorted(set(kubelet_ids)))}
    if not preset_vnpu:
        vfg = vfg_ids or {}
        names = {f"{name}_{vfg[name]}" if name in vfg else name for name in real}
        annotations[ASCEND_REAL] = ",".join(sorted(names))
    return annotations


class ConfigDevice(NamedTuple):
    phy_id: int
    device_ip: str | None = None  # None: could not be read
    super_device_id: int | None = None  # None: omitted (config_devices gives one to every physical chip)
    level_list: list[GoJSON] | None = None  # a 950 chip's rank levels; None: omitted (omitempty)


def config_devices(
    real: Sequence[str], chips: Mapping[int, ChipInfo], levels: LevelLists | None = None
) -> tuple[list[ConfigDevice], bool]:
    """The rank-configuration devices of an allocation's real device ids (`chips` by phy id), and
    whether they are vNPUs.

    Reference: common.go `getDeviceFromAllDeviceInfo`. A physical chip always gets a
    `super_device_id`: its SDID, SDID_UNREAD when the super-pod information could not be read,
    SDID_NOT_LISTED when the phy id is not a chip of this node. A vNPU gets none. On a 950 node
    every `device_ip` is "" (its library has no IP call, and `GetDeviceIP` answers "" there), and a
    physical chip with rank levels (`levels`, by phy id) carries its `levelList` (common.go copies
    `npuDevice.LevelList`).
    """
    no_ip = any(not traits(chip.family).device_ip for chip in chips.values())
    devices: list[ConfigDevice] = []
    vnpu = False
    for device_id in real:
        parsed = parse_device_id(device_id)
        vnpu = vnpu or parsed.vdev_id is not None
        chip = chips.get(parsed.phy_id)
        if parsed.vdev_id is not None:
            sdid = None
        elif chip is None:
            sdid = SDID_NOT_LISTED
        else:
            sdid = SDID_UNREAD if chip.super_device_id is None else chip.super_device_id
        device_ip = "" if no_ip else (chip.device_ip if chip else None)
        level_list = rendered(levels or {}, parsed.phy_id) if parsed.vdev_id is None else None
        devices.append(ConfigDevice(parsed.phy_id, device_ip, sdid, level_list))
    return devices, vnpu


def device_configuration(
    pod_name: str,
    pod_uid: str,
    host_ip: str,
    devices: Sequence[ConfigDevice] | Sequence[tuple[int, str | None, int | None]],
    *,
    vnpu: bool,
    super_pod_id: int = -1,
    rack_id: int = -1,
    server_index: str = "",
    server_ip: str = "",
) -> str:
    """The rank-table annotation value, byte for byte as the reference's json.Marshal(Instance).

    Devices sorted by phy id; `device_ip` is 127.0.0.1 for a vNPU and -1 when unknown;
    `super_device_id` (a string, after `device_ip`, as proto.go `Device` has it with omitempty)
    is omitted when None and always for a vNPU (the reference sets it for physical chips only);
    a ConfigDevice's `levelList` follows it, omitted when None or empty.
    No devices gives `"devices":null`, as a nil Go slice does.
    """
    by_phy: dict[int, tuple[str | None, int | None, list[GoJSON] | None]] = {}
    for device in devices:
        level_list = device.level_list if isinstance(device, ConfigDevice) else None
        by_phy.setdefault(device[0], (device[1], device[2], level_list))
    entries: list[GoJSON] = []
    for phy_id in sorted(by_phy):
        device_ip, sdid, level_list = by_phy[phy_id]
        entry: dict[str, GoJSON] = {
            "device_id": str(phy_id),
            "device_ip": VNPU_DEVICE_IP if vnpu else (UNKNOWN_DEVICE_IP if device_ip is None else device_ip),
        }
        if not vnpu and sdid is not None:
            entry["super_device_id"] = str(sdid)
        if not vnpu and level_list:
            entry["levelList"] = level_list  # proto.go Device's last field, omitempty
        entries.append(entry)
    instance: dict[str, GoJSON] = {  # proto.go Instance, in field order
        "pod_name": pod_name,
        "server_id": pod_uid,
        "host_ip": host_ip,
        "super_pod_id": super_pod_id,
        "devices": entries or None,
        "rack_id": rack_id,
        "server_index": server_index,
        "server_ip": server_ip,
    }
    return go_json(instance)


def configuration_key(rtype: ResourceType, *, atlas_300i_duo: bool = False) -> str | None:
    """Which annotation carries the configuration, or None when the resource gets none.

    Ascend910 always, a node of Atlas 300I Duo cards (Ascend310P) too (reference:
    `tool.name == Ascend910 || IsContainAll300IDuo()`), the 950 generation its own key.
    """
    if rtype is ResourceType.ASCEND910 or (rtype is ResourceType.ASCEND310P and atlas_300i_duo):
        return CONFIG_910_KEY
    if rtype is ResourceType.NPU:
        return CONFIG_NPU_KEY
    return None
