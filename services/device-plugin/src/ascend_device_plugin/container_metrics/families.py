"""npu-exporter's container families (`container_npu_*`, `npu_container_info`), computed from what
the kubelet's PodResources API says each container holds and the exporter's chip readings.

npu-exporter (component/npu-exporter/collector) learns which container holds which chip from the
container runtime (`GetContainerNPUInfo`: device id -> the containers that hold it) and labels each
chip series with the container's `namespace`, `pod_name` and `container_name` when exactly one
container holds the chip (`getContainerLabels`, `updateFrame`). Here the same map is built from
PodResources `List` (the exporter may not speak gRPC), and the families are served by the plugin.
Pure: the shell (ascend_device_plugin.container_metrics.sampler) reads the sources on its own period.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from ascend_common.cardlabel import card_labels
from ascend_common.chips import RESOURCE_PREFIX
from ascend_common.naming import parse_device_id
from ascend_common.schemas.exporter import Chip, ChipState

# colcommon.CardLabel (collector/common/metrics_collector.go, constants.go).
CARD_LABELS = ("id", "model_name", "vdie_id", "pcie_bus_info", "namespace", "pod_name", "container_name")
# cardLabelForContainer (collector_for_npu.go init): the card label with `id` renamed, then the container's.
INFO_LABELS = ("npuID", *CARD_LABELS[1:], "containerID", "containerName")

INFO = "npu_container_info"
UTILIZATION = "container_npu_utilization"
TOTAL_MEMORY = "container_npu_total_memory"
USED_MEMORY = "container_npu_used_memory"
# (name, npu-exporter's help text, labels), in the order npu-exporter describes them.
FAMILIES: tuple[tuple[str, str, tuple[str, ...]], ...] = (
    (INFO, "the container name and deviceID relationship", INFO_LABELS),
    (TOTAL_MEMORY, "npu total memory in container, unit is 'MB'", CARD_LABELS),
    (USED_MEMORY, "the npu used memory in container, unit is 'MB'", CARD_LABELS),
    (UTILIZATION, "npu ai core utilization in container, unit is '%'", CARD_LABELS),
)


@dataclass(frozen=True)
class ContainerDevices:
    """One `ContainerDevices` of a PodResources `List` answer, with the container that holds it."""

    namespace: str
    pod: str
    container: str
    resource: str  # e.g. huawei.com/Ascend910
    device_ids: tuple[str, ...]


@dataclass(frozen=True, order=True)
class ContainerRef:
    """npu-exporter's DevicesInfo: the container's name is `<namespace>_<pod>_<container>`."""

    namespace: str
    pod: str
    container: str

    @property
    def joined(self) -> str:
        return f"{self.namespace}_{self.pod}_{self.container}"


@dataclass(frozen=True)
class Sample:
    family: str
    labels: tuple[str, ...]
    value: float


# A device a container holds: its chip's phy id, and the vNPU's vdev id (None: the chip itself).
DeviceKey = tuple[int, int | None]


def container_map(
    listing: Iterable[ContainerDevices],
    real: Mapping[tuple[str, str], str] | None = None,
    *,
    kubelet_chips: bool = True,
) -> dict[DeviceKey, list[ContainerRef]]:
    """Device -> the containers holding it (npu-exporter's GetContainerNPUInfo), in container order.

    Only `huawei.com/` resources count, and only ids that name a chip or a vNPU (a dynamic-mode
    `npu-core-<n>` names neither). `real`: a pod's `huawei.com/AscendReal` annotation by
    (namespace, pod). On the Volcano path the kubelet's ids are not the chips the container got;
    the annotation is (the plugin writes it), so a pod with one container holding our devices is
    mapped by it. `kubelet_chips` False (--volcano-type): a kubelet id that names a chip is not
    believed, so a pod whose annotation is not known yet, or that has several such containers, maps
    only its vNPUs (whose ids are the vNPUs they got). A container holding a chip twice (shared
    copies) counts once.
    """
    held: dict[ContainerRef, list[str]] = {}
    for row in listing:
        if row.resource.startswith(RESOURCE_PREFIX):
            held.setdefault(ContainerRef(row.namespace, row.pod, row.container), []).extend(row.device_ids)
    per_pod: dict[tuple[str, str], int] = {}
    for ref in held:
        per_pod[(ref.namespace, ref.pod)] = per_pod.get((ref.namespace, ref.pod), 0) + 1
    out: dict[DeviceKey, list[ContainerRef]] = {}
    for ref, ids in held.items():
        annotated = (real or {}).get((ref.namespace, ref.pod))
        keys = _keys(ids)
        if annotated and per_pod[(ref.namespace, ref.pod)] == 1:
            keys = _keys([i for i in annotated.split(",") if i])
        elif not kubelet_chips:
            keys = [key for key in keys if key[1] is not None]
        for key in keys:
            holders = out.setdefault(key, [])
            if ref not in holders:
                holders.append(ref)
    return out


def chip_holders(
    listing: Iterable[ContainerDevices],
    real: Mapping[tuple[str, str], str] | None = None,
    *,
    kubelet_chips: bool = True,
) -> dict[int, list[ContainerRef]]:
    """Chip (phy id) -> the containers holding the chip itself, not one of its vNPUs: what
    npu-exporter's CardLabel names on the chip's series."""
    return {
        phy: refs
        for (phy, vdev), refs in container_map(listing, real, kubelet_chips=kubelet_chips).items()
        if vdev is None
    }


def vnpu_holders(
    listing: Iterable[ContainerDevices],
    real: Mapping[tuple[str, str], str] | None = None,
    *,
    kubelet_chips: bool = True,
) -> dict[int, list[ContainerRef]]:
    """vNPU (vdev id) -> the containers holding it: what npu-exporter's VnpuCollector names on the
    vNPU's `vnpu_pod_*` series (its container map keys a vNPU by its vdev id alone)."""
    return {
        vdev: refs
        for (_, vdev), refs in container_map(listing, real, kubelet_chips=kubelet_chips).items()
        if vdev is not None
    }


def _keys(ids: Sequence[str]) -> list[DeviceKey]:
    keys: list[DeviceKey] = []
    for device_id in ids:
        try:
            parsed = parse_device_id(device_id)
        except ValueError:
            continue  # not a chip of ours (npu-core-<n>, another vendor's id)
        keys.append((parsed.phy_id, parsed.vdev_id))
    return keys


def model_name(chip: Chip) -> str:
    """The `model_name` label as the exporter's chip series carry it (dcmi_exporter.metrics.families), so
    the two endpoints' series join on it."""
    name = chip.static.chip_name.value if chip.static.chip_name.is_ok else ""
    return f"Ascend{name}" if name else ""


def container_labels(holders: Sequence[ContainerRef]) -> tuple[str, str, str]:
    """(namespace, pod_name, container_name) of a chip (getContainerLabels)."""
    return card_labels(holders)


def container_samples(
    listing: Iterable[ContainerDevices],
    chips: Iterable[Chip],
    real: Mapping[tuple[str, str], str] | None = None,
    *,
    with_values: bool = True,
    kubelet_chips: bool = True,
) -> list[Sample]:
    """The container families' samples, chip by chip in phy-id order.

    As npu-exporter: a chip (or vNPU) held by exactly one container gets `npu_container_info`
    (updateContainerInfo); a physical chip also gets the container's AI-core utilization and HBM
    total / used (updateContainerUtilization, updateHbmInfo), which a vNPU does not ("vnpu not
    support this metrics"), nor a reading the exporter could not take (validateNum). A chip that
    several containers hold (shared copies) has no container series. `containerID` is empty: the
    PodResources API does not name the runtime's containers. `with_values` False (the exporter's
    readings are stale): the info series only. `kubelet_chips`: see container_map.
    """
    by_device = container_map(listing, real, kubelet_chips=kubelet_chips)
    out: list[Sample] = []
    for chip in sorted(chips, key=lambda c: c.phy_id):
        card = (str(chip.phy_id), model_name(chip), chip.static.vdie_id or "", "")
        vdevs = sorted(vdev for phy, vdev in by_device if phy == chip.phy_id and vdev is not None)
        for vdev in [None, *vdevs]:
            holders = by_device.get((chip.phy_id, vdev), [])
            if len(holders) != 1:
                continue
            labels = (*card, *container_labels(holders))
            out.append(Sample(INFO, (*labels, "", holders[0].joined), 1.0))
            if vdev is None and with_values:
                out.extend(_values(chip, labels))
    return out


def _values(chip: Chip, labels: tuple[str, ...]) -> list[Sample]:
    dyn = chip.dynamic
    if chip.state is not ChipState.OK or dyn is None:
        return []
    out: list[Sample] = []
    hbm = dyn.hbm.value if dyn.hbm.is_ok else None
    if hbm is not None:
        out.append(Sample(TOTAL_MEMORY, labels, float(hbm.total_mb)))
        out.append(Sample(USED_MEMORY, labels, float(hbm.used_mb)))
    util = dyn.utilization.value if dyn.utilization.is_ok else None
    if util is not None and util.aicore_pct is not None:
        out.append(Sample(UTILIZATION, labels, float(util.aicore_pct)))
    return out
