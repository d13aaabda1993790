"""The node's chips as Dynamic Resource Allocation devices: the ResourceSlice the driver publishes.

Pure. Reference: component/ascend-dynamic-resource-allocation (internal/device/generation_910.go,
generation_950.go, internal/driver/driver.go `buildDriverResources`): driver `npu.huawei.com`, one
slice per node whose pool is the node name, a device per chip, attributes `deviceType` (the
device manager's dev type, `Ascend910A5` on the 950) and `physicId`.

Device names: the chip's name in lower case (`ascend910-<phy>`; the 950's `npu-<phy>` as it was).
The reference names a device after its chip, `Ascend910-<phy>`, which the API refuses: a device
name, and every device an allocation names, must be a DNS label (lowercase RFC 1123), on 1.32's
v1beta1 as on 1.36's v1, so a 910-family slice with those names is never published. The device
plugin's ids (kubelet device-plugin API, annotations) keep the chip's name: `chip_name` maps back.

Beyond the reference every device carries what the plugin knows of its chip:
`logicId`, `numaNode`, `cardId`, `hccsRing` (the chip's hot-reset group, named by its lowest logic
id, so that `matchAttribute` on it asks for chips of one ring), `superPodId`, `serverIndex`,
`rackId` (950) and the capacity `hbm`. Every device carries every attribute of its family, -1
where the chip did not report it (as the plugin's labels and annotations say "not read"), so that
a selector never meets a missing key (a CEL error, not a non-match); `hbm` is left out when unread,
as a made-up capacity would satisfy requests it cannot.

Health: where the apiserver keeps device taints (the DRADeviceTaints gate: alpha in 1.33, beta and
on by default in 1.36), a chip that is not healthy stays in the pool with the taint `unhealthy_taint`
names (NoSchedule: the scheduler allocates it to no claim that does not tolerate it; NoExecute only
for the fault levels the operator lists, as then the taint-eviction controller deletes the pods of
claims that hold it) and loses it when it recovers. Where taints are not kept (1.32's v1beta1 has
no such field; 1.33 to 1.35 unless the gate is on) the chip leaves the pool's next generation and
comes back when it recovers: the scheduler never allocates a device that is not in the current
generation of its pool. A chip the device plugin holds (`--kubelet-api both`) is left out either way:
it is not faulty, and no claim may have it whatever it tolerates.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Final

from ascend_common.chip_traits import SuperPodFields, traits
from ascend_common.chips import ChipFamily, ResourceType
from ascend_common.reset_groups import reset_group, topology_of
from ascend_common.schemas.exporter import Chip
from ascend_common.superpod import SuperPod

DRIVER: Final = "npu.huawei.com"
DEVICE_CLASS: Final = DRIVER
RESOURCE_GROUP: Final = "resource.k8s.io"
# Newest first: the version a slice is written in is the newest the apiserver serves.
API_VERSIONS: Final = ("v1", "v1beta1")

ATTR_DEVICE_TYPE: Final = "deviceType"
ATTR_PHYSIC_ID: Final = "physicId"
ATTR_LOGIC_ID: Final = "logicId"
ATTR_NUMA_NODE: Final = "numaNode"
ATTR_CARD_ID: Final = "cardId"
ATTR_HCCS_RING: Final = "hccsRing"
ATTR_SUPER_POD_ID: Final = "superPodId"
ATTR_SERVER_INDEX: Final = "serverIndex"
ATTR_RACK_ID: Final = "rackId"
CAPACITY_HBM: Final = "hbm"

AttributeValue = int | str | bool
UNKNOWN: Final = -1  # not reported, or not in a super pod

TAINT_UNHEALTHY: Final = f"{DRIVER}/unhealthy"
NO_SCHEDULE: Final = "NoSchedule"
NO_EXECUTE: Final = "NoExecute"


@dataclass(frozen=True)
class DeviceTaint:
    """A taint on a device (resource.k8s.io DeviceTaint without timeAdded, which the slice writer keeps)."""

    key: str
    value: str  # a label value: at most 63 characters of [A-Za-z0-9_.-]
    effect: str


@dataclass(frozen=True)
class DraDevice:
    """One chip as a DRA device: its name in the pool, attributes and capacities."""

    name: str
    phy_id: int
    logic_id: int
    attributes: Mapping[str, AttributeValue] = field(hash=False)
    capacity: Mapping[str, str] = field(hash=False)  # Kubernetes quantities, e.g. "65536Mi"
    taints: tuple[DeviceTaint, ...] = ()


def device_name(chip: str) -> str:
    """The chip's DRA device name, a DNS label: `Ascend910-3` -> `ascend910-3`, `npu-3` as it is.
    Also what a name the previous release checkpointed (the chip's own) stands for now."""
    return chip.lower()


_CHIP_TYPES: Final[Mapping[str, str]] = {t.value.lower(): t.value for t in ResourceType}


def chip_name(device: str) -> str:
    """The chip (the device plugin's id) a DRA device name stands for: `ascend910-3` -> `Ascend910-3`."""
    kind, sep, phy = device.rpartition("-")
    return f"{_CHIP_TYPES.get(kind.lower(), kind)}{sep}{phy}"


def device_type(family: ChipFamily) -> str:
    """The `deviceType` attribute: the reference's dev type (`Ascend910B`, `Ascend910A3`, `Ascend910A5`)."""
    return traits(family).device_type


def dra_devices(chips: Iterable[Chip], super_pod: SuperPod) -> list[DraDevice]:
    """Every chip of known family as a DRA device, by phy id, whatever its health."""
    known = [c for c in chips if c.family is not None and c.resource_type is not None]
    topologies = [t for t in (topology_of(c) for c in known) if t is not None]
    devices = []
    for chip in known:
        assert chip.family is not None  # filtered above; narrows for mypy
        s = chip.static
        attrs: dict[str, AttributeValue] = {
            ATTR_DEVICE_TYPE: device_type(chip.family),
            ATTR_PHYSIC_ID: chip.phy_id,
            ATTR_LOGIC_ID: chip.logic_id,
        }
        numa = s.numa_node.value if s.numa_node.is_ok and s.numa_node.value is not None else UNKNOWN
        topo = topology_of(chip)
        attrs[ATTR_NUMA_NODE] = max(numa, UNKNOWN)
        attrs[ATTR_CARD_ID] = max(chip.card_id, UNKNOWN)
        attrs[ATTR_HCCS_RING] = min(reset_group(topo, topologies)) if topo is not None else chip.logic_id
        attrs[ATTR_SUPER_POD_ID] = super_pod.super_pod_id
        attrs[ATTR_SERVER_INDEX] = super_pod.server_index
        if traits(chip.family).super_pod is SuperPodFields.RACK:
            attrs[ATTR_RACK_ID] = super_pod.rack_id
        capacity: dict[str, str] = {}
        hbm = chip.dynamic.hbm.value if chip.dynamic is not None and chip.dynamic.hbm.is_ok else None
        if hbm is not None and hbm.total_mb > 0:
            capacity[CAPACITY_HBM] = f"{hbm.total_mb}Mi"
        devices.append(DraDevice(device_name(chip.name), chip.phy_id, chip.logic_id, attrs, capacity))
    return sorted(devices, key=lambda d: d.phy_id)


def unhealthy_taint(fault: str, noexecute_levels: Collection[str] = ()) -> DeviceTaint:
    """The taint of a chip that is not healthy, `fault` saying why (its fault level, or the exporter's
    state). NoSchedule unless the operator listed the level for NoExecute: by default MindCluster's
    job-level recovery, not the taint-eviction controller, decides when a job leaves its chips."""
    return DeviceTaint(TAINT_UNHEALTHY, fault, NO_EXECUTE if fault in noexecute_levels else NO_SCHEDULE)


def pool_devices(
    devices: Sequence[DraDevice],
    healthy: Mapping[int, bool],
    faults: Mapping[int, str] | None = None,
    noexecute_levels: Collection[str] = (),
) -> list[DraDevice]:
    """The devices the pool offers (`healthy` by phy id; a chip it does not name is left out).

    `faults` (by phy id: why the chip is not healthy) is given where the apiserver keeps taints: an
    unhealthy chip it names stays, tainted. Otherwise, and for a chip it does not name (one the
    device plugin holds), an unhealthy chip is left out."""
    out = []
    for device in devices:
        if healthy.get(device.phy_id, False):
            out.append(device)
        elif faults is not None and device.phy_id in faults:
            taint = unhealthy_taint(faults[device.phy_id], noexecute_levels)
            out.append(replace(device, taints=(taint,)))
    return out


def _attribute(value: AttributeValue) -> dict[str, AttributeValue]:
    # bool before int: a bool is an int in Python, and the API keeps the two apart.
    if isinstance(value, bool):
        return {"bool": value}
    if isinstance(value, int):
        return {"int": value}
    return {"string": value}


def _taint_body(device: str, taint: DeviceTaint, since: Mapping[tuple[str, DeviceTaint], str]) -> dict[str, Any]:
    body = {"key": taint.key, "value": taint.value, "effect": taint.effect}
    # The apiserver stamps a taint written without timeAdded with the time of the write; eviction
    # (NoExecute, tolerationSeconds) counts from it, so a taint kept keeps the time it got first.
    added = since.get((device, taint))
    return {**body, "timeAdded": added} if added else body


def _device_body(device: DraDevice, api_version: str, since: Mapping[tuple[str, DeviceTaint], str]) -> dict[str, Any]:
    attrs = {name: _attribute(value) for name, value in device.attributes.items()}
    capacity = {name: {"value": quantity} for name, quantity in device.capacity.items()}
    inner: dict[str, Any] = {"attributes": attrs}
    if capacity:
        inner["capacity"] = capacity
    if device.taints:
        inner["taints"] = [_taint_body(device.name, t, since) for t in device.taints]
    # v1 flattened the device; v1beta1 keeps its fields under `basic`.
    return {"name": device.name, **inner} if api_version == "v1" else {"name": device.name, "basic": inner}


def slice_name(node: str) -> str:
    """The node's slice: one per node and driver (the reference's helper generates a name; we need a
    fixed one to update in place). At most 253 characters: a node name is at most 253 too, so the
    name keeps the node's head and stays unique through the driver suffix."""
    suffix = "-" + DRIVER
    return node[: 253 - len(suffix)] + suffix


def resource_slice(
    node: str,
    devices: Sequence[DraDevice],
    generation: int,
    api_version: str = "v1",
    taints_since: Mapping[tuple[str, DeviceTaint], str] | None = None,
) -> dict[str, Any]:
    """The ResourceSlice object for `node`'s pool at `generation` (no resourceVersion: the caller sets it);
    `taints_since`: the timeAdded the apiserver gave a device's taint, by (device name, taint)."""
    if api_version not in API_VERSIONS:
        raise ValueError(f"unsupported resource.k8s.io version {api_version!r}; known: {', '.join(API_VERSIONS)}")
    return {
        "apiVersion": f"{RESOURCE_GROUP}/{api_version}",
        "kind": "ResourceSlice",
        "metadata": {"name": slice_name(node), "labels": {"app.kubernetes.io/managed-by": "ascend-device-plugin"}},
        "spec": {
            "driver": DRIVER,
            "nodeName": node,
            "pool": {"name": node, "generation": generation, "resourceSliceCount": 1},
            "devices": [_device_body(d, api_version, taints_since or {}) for d in devices],
        },
    }


def written_taints(obj: Mapping[str, Any]) -> dict[tuple[str, DeviceTaint], str] | None:
    """The taints a slice as the apiserver answered holds, with their timeAdded, by (device name, taint)
    (v1's devices or v1beta1's `basic`); None when it holds none."""
    spec = obj.get("spec")
    devices = spec.get("devices") if isinstance(spec, Mapping) else None
    found: dict[tuple[str, DeviceTaint], str] = {}
    for device in devices if isinstance(devices, list) else []:
        if not isinstance(device, Mapping):
            continue
        basic = device.get("basic")
        inner = basic if isinstance(basic, Mapping) else device
        for t in inner.get("taints") or []:
            if isinstance(t, Mapping):
                taint = DeviceTaint(str(t.get("key", "")), str(t.get("value", "")), str(t.get("effect", "")))
                found[(str(device.get("name", "")), taint)] = str(t.get("timeAdded") or "")
    return found or None
