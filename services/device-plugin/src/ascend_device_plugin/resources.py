"""The resource manager: chips + verdicts + pods -> what every resource advertises.

Kept apart from the gRPC servers (as NVIDIA's plugin keeps its resource manager apart from
its server): it turns inputs into `ChipInfo`s with a final health, then into device lists
through the pure rules of `core`, and publishes them on the ViewBoard, which wakes the
ListAndWatch streams of exactly the resources that changed.
"""

from __future__ import annotations

import logging
from collections.abc import Container, Iterable, Mapping
from dataclasses import dataclass, field

from ascend_common.chips import ResourceType
from ascend_common.faults import FaultCodeTable
from ascend_common.inuse import chips_in_use_for_health
from ascend_common.naming import NPU_CORE
from ascend_common.schemas.exporter import Chip
from ascend_common.schemas.verdict import ChipVerdict

from ascend_device_plugin.core.devices import DeviceEntry, device_list, vnpu_devices
from ascend_device_plugin.core.model import POD_PENDING, POD_RUNNING, ChipInfo, PodView
from ascend_device_plugin.core.vnpu_cores import core_health, core_ids
from ascend_device_plugin.health import HealthDecision, HealthSource, decide
from ascend_device_plugin.metrics import PluginMetrics
from ascend_device_plugin.views import AdvertisedDevice, ViewBoard

log = logging.getLogger(__name__)


def chip_info(chip: Chip, healthy: bool) -> ChipInfo | None:
    """The plugin's view of an exporter chip; None for a chip of unknown family."""
    if chip.family is None or chip.resource_type is None:
        return None
    s, d = chip.static, chip.dynamic
    return ChipInfo(
        logic_id=chip.logic_id,
        phy_id=chip.phy_id,
        card_id=chip.card_id,
        name=chip.name,
        rtype=chip.resource_type,
        family=chip.family,
        aicore=s.aicore.value if s.aicore.is_ok and s.aicore.value else 0,
        healthy=healthy,
        numa_node=s.numa_node.value if s.numa_node.is_ok else None,
        device_ip=s.device_ip.value if s.device_ip.is_ok else None,
        board_id=s.board_id.value if s.board_id.is_ok else None,
        product_type=s.product_type.value if s.product_type.is_ok else None,
        partner_card=s.partner_card.value if s.partner_card.is_ok else None,
        super_device_id=s.super_device_id.value if s.super_device_id.is_ok else None,
        vnpus=tuple(d.vnpus.value or ()) if d is not None and d.vnpus.is_ok else (),
    )


@dataclass
class ResourceManager:
    board: ViewBoard
    table: FaultCodeTable
    metrics: PluginMetrics
    share_count: int = 1
    preset_virtual_device: bool = True
    chips: dict[int, Chip] = field(default_factory=dict)
    verdicts: dict[str, ChipVerdict] = field(default_factory=dict)
    fault_manager_connected: bool = False
    exporter_lost: bool = False
    pods: list[PodView] = field(default_factory=list)
    # The chips in use for health (ascend_common.inuse.chips_in_use_for_health), read from `pods`
    # once per pod change: recompute() also runs on every Volcano Allocate, where a pass over
    # 10,000 cached pods would cost milliseconds.
    in_use_for_health: set[str] = field(default_factory=set)
    # Per pod uid, so that a finished pod's entries go with it:
    # Volcano path: kubelet device id -> the real device Volcano chose for the pod behind it;
    # dynamic vNPU mode: npu-core id -> phy id of the chip its pod's vNPU lives on.
    volcano_by_pod: dict[str, dict[str, str]] = field(default_factory=dict)
    cores_by_pod: dict[str, dict[str, int]] = field(default_factory=dict)
    infos: dict[int, ChipInfo] = field(default_factory=dict)  # by phy id
    decisions: dict[int, HealthDecision] = field(default_factory=dict)  # by logic id

    @property
    def physical_type(self) -> ResourceType | None:
        types = {c.resource_type for c in self.chips.values() if c.resource_type is not None}
        return min(types) if types else None

    def recompute(self) -> None:
        in_use = self.in_use_for_health
        infos: dict[int, ChipInfo] = {}
        for chip in self.chips.values():
            decision = (
                HealthDecision(False, HealthSource.EXPORTER, "the exporter is unreachable")
                if self.exporter_lost
                else decide(
                    chip, self.verdicts.get(chip.name), self.fault_manager_connected, self.table, chip.name in in_use
                )
            )
            previous = self.decisions.get(chip.logic_id)
            if previous is None or previous.healthy != decision.healthy:
                log.info(
                    "chip health",
                    extra={"chip": chip.name, "healthy": decision.healthy, "source": decision.source.value,
                           "reason": decision.reason},
                )  # fmt: skip
            self.decisions[chip.logic_id] = decision
            if (info := chip_info(chip, decision.healthy)) is not None:
                infos[info.phy_id] = info
        self.infos = infos
        rtype = self.physical_type
        if rtype is None:
            return
        chips = list(infos.values())
        self._publish(rtype.value, self._remap(device_list(chips, rtype, share_count=self.share_count)))
        if self.preset_virtual_device:
            for suffix in sorted({v.suffix for c in chips for v in c.vnpus}):
                self._publish(f"{rtype.value}-{suffix}", vnpu_devices(chips, suffix))
        else:
            health = core_health(chips, self.cores_in_use)
            numa = {phy: c.numa_node for phy, c in infos.items()}
            cores = core_ids(chips)
            self._publish(NPU_CORE, [DeviceEntry(core, health[core], numa.get(cores[core])) for core in cores])

    @property
    def volcano_map(self) -> dict[str, str]:
        return {k: v for mapping in self.volcano_by_pod.values() for k, v in mapping.items()}

    @property
    def cores_in_use(self) -> dict[str, int]:
        return {k: v for mapping in self.cores_by_pod.values() for k, v in mapping.items()}

    def _remap(self, entries: list[DeviceEntry]) -> list[DeviceEntry]:
        """Volcano path: a kubelet id reports the health of the real device behind it."""
        mapping = self.volcano_map
        if not mapping:
            return entries
        health = {e.id: e.healthy for e in entries}
        return [e._replace(healthy=health.get(mapping.get(e.id, e.id), e.healthy)) for e in entries]

    def _publish(self, resource: str, entries: Iterable[DeviceEntry]) -> None:
        devices = tuple(AdvertisedDevice(e.id, e.healthy, e.numa) for e in entries)
        if self.board.publish(resource, devices):
            healthy = sum(d.healthy for d in devices)
            self.metrics.devices.labels(resource, "Healthy").set(healthy)
            self.metrics.devices.labels(resource, "Unhealthy").set(len(devices) - healthy)

    # ---- inputs ------------------------------------------------------------------------------

    def set_chips(self, chips: Mapping[int, Chip]) -> None:
        self.chips.update(chips)
        self.recompute()

    def set_verdicts(self, verdicts: Mapping[str, ChipVerdict], connected: bool) -> None:
        self.verdicts = dict(verdicts)
        self.fault_manager_connected = connected
        self.recompute()

    def set_exporter_lost(self, lost: bool) -> None:
        if lost != self.exporter_lost:
            log.warning("exporter grace period over" if lost else "exporter is back", extra={"lost": lost})
            self.exporter_lost = lost
            self.recompute()

    def set_pods(
        self, pods: list[PodView], in_use_for_health: set[str] | None = None, holding: Container[str] | None = None
    ) -> None:
        """The node's pods; `in_use_for_health` and `holding` (uids of the Pending and Running pods)
        when the caller keeps them already, so that no pass over the pods is made."""
        self.pods = pods
        self.in_use_for_health = chips_in_use_for_health(pods) if in_use_for_health is None else in_use_for_health
        # A pod that is gone or finished no longer holds its devices: forget its mappings.
        if holding is None:
            holding = {p.uid for p in pods if p.phase in (POD_PENDING, POD_RUNNING)}
        for table in (self.volcano_by_pod, self.cores_by_pod):
            for uid in [uid for uid in table if uid not in holding]:
                del table[uid]
        self.recompute()
