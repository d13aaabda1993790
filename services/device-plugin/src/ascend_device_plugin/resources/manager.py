"""The resource manager: chips + verdicts + pods -> what every resource advertises.

Kept apart from the gRPC servers (as NVIDIA's plugin keeps its resource manager apart from
its server): its inputs are methods, it turns them into `ChipInfo`s with a final health, then
into device lists through the pure rules (devices, mixed, vnpu.cores, softshare.switch,
volcano.annotations), and publishes them on the ViewBoard, which wakes the ListAndWatch streams of
exactly the resources that changed. Readers get a frozen
`Inventory`; listeners (the metrics) are told what was published. It alone writes its state.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Container, Iterable, Mapping
from dataclasses import replace
from types import MappingProxyType

from ascend_common.chips import ResourceType
from ascend_common.faults import FaultCodeTable
from ascend_common.inuse import ALLOCATION_PHASES, chips_in_use_for_health
from ascend_common.naming import NPU_CORE
from ascend_common.schemas.exporter import Chip
from ascend_common.schemas.verdict import ChipVerdict
from ascend_common.superpod import NO_SUPER_POD, SuperPod, main_board_id, super_device_id, super_pod

from ascend_device_plugin.inventory.snapshot import Inventory, InventoryListener
from ascend_device_plugin.inventory.views import AdvertisedDevice, ViewBoard
from ascend_device_plugin.model.chip_pod import ChipHealth, ChipInfo, PodView
from ascend_device_plugin.model.eid import UrmaEids
from ascend_device_plugin.resources.devices import DeviceEntry, physical_devices, vnpu_devices
from ascend_device_plugin.resources.health import EXPORTER_LOST, HealthDecision, HealthSource, decide
from ascend_device_plugin.resources.mixed import card_usage_refusal, mixed_devices
from ascend_device_plugin.softshare.switch import ignored_share_count, soft_share_refusal
from ascend_device_plugin.vnpu.cores import core_health, core_ids
from ascend_device_plugin.volcano.annotations import kubelet_map

log = logging.getLogger(__name__)


def chip_info(chip: Chip, healthy: bool, fault: str = "") -> ChipInfo | None:
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
        fault=fault,
        numa_node=s.numa_node.value if s.numa_node.is_ok else None,
        device_ip=s.device_ip.value if s.device_ip.is_ok else None,
        board_id=s.board_id.value if s.board_id.is_ok else None,
        product_type=s.product_type.value if s.product_type.is_ok else None,
        partner_card=s.partner_card.value if s.partner_card.is_ok else None,
        super_device_id=super_device_id(s),
        vnpus=tuple(d.vnpus.value or ()) if d is not None and d.vnpus.is_ok else (),
        vdie_id=s.vdie_id,
        ddie_id=s.ddie_id,
        super_pod_type=s.super_pod_type.value if s.super_pod_type.is_ok else None,
        urma=tuple(UrmaEids(d.index, tuple(d.eids)) for d in s.urma or ()),
    )


class ResourceManager:
    def __init__(
        self,
        board: ViewBoard,
        table: FaultCodeTable,
        listener: InventoryListener,
        *,
        share_count: int = 1,
        soft_share: bool = False,
        preset_virtual_device: bool = True,
        mixed_310p: bool = False,
    ) -> None:
        self._board = board
        self._table = table
        self._listener = listener
        self._share_count = share_count
        self._soft_share = soft_share
        self._share_warned = False  # the ignored --share-dev-count is logged once
        self._preset_virtual_device = preset_virtual_device
        self._mixed_310p = mixed_310p  # --use-310p-mixed-insert: one resource per card product
        self._mixed_skipped: list[str] = []  # chips mixed insert cannot name (logged when this changes)
        self._chips: dict[int, Chip] = {}  # by logic id
        self._verdicts: dict[str, ChipVerdict] = {}
        self._fault_manager_connected = False
        self._exporter_lost = False
        # The chips in use for health (ascend_common.inuse.chips_in_use_for_health), kept by the caller
        # per pod event: a pass over 10,000 cached pods per recompute would cost milliseconds.
        self._in_use_for_health: set[str] = set()
        # Per pod uid, so that a finished pod's entries go with it:
        # Volcano path: kubelet device id -> the real device Volcano chose for the pod behind it;
        # dynamic vNPU mode: npu-core id -> phy id of the chip its pod's vNPU lives on.
        self._volcano_by_pod: dict[str, dict[str, str]] = {}
        self._cores_by_pod: dict[str, dict[str, int]] = {}
        self._unmappable: set[str] = set()  # pods whose kltDev/AscendReal could not be read (logged once)
        self._decisions: dict[int, HealthDecision] = {}  # by logic id
        self._super_pod: SuperPod = NO_SUPER_POD
        self._main_board_id: int | None = None
        self._inventory = Inventory.empty()
        # `--kubelet-api both`: chips the DRA driver prepared for claims, Unhealthy for the kubelet here.
        self._withheld: frozenset[str] = frozenset()
        self._watchers: list[Callable[[], None]] = []

    def watch(self, callback: Callable[[], None]) -> Callable[[], None]:
        """Call `callback` after every recompute (on the event loop thread); returns the unwatch.
        For readers that need more than the published devices: a reason that changed while the
        health did not publishes nothing on the ViewBoard."""
        self._watchers.append(callback)
        return lambda: self._watchers.remove(callback) if callback in self._watchers else None

    @property
    def inventory(self) -> Inventory:
        return self._inventory

    def soft_share_refusal(self) -> str | None:
        """Why soft share cannot run on the chips known so far (softshare/switch), or None."""
        return soft_share_refusal((c.family for c in self._inventory.chips.values()), self._soft_share)

    def start_refusal(self) -> str | None:
        """Why the plugin cannot serve the chips known so far (soft share, 310P mixed insert), or None."""
        chips = self._inventory.chips.values()
        return self.soft_share_refusal() or card_usage_refusal(self._mixed_310p, (c.product_type for c in chips))

    # ---- inputs ------------------------------------------------------------------------------

    def set_chips(self, chips: Mapping[int, Chip]) -> None:
        self._chips.update(chips)
        # Every chip, whatever its state: the static data stays what the chip last reported. Card
        # order, as the reference walks the cards for the main board id (all chips of a node report
        # the same super pod).
        statics = [c.static for c in sorted(self._chips.values(), key=lambda c: (c.card_id, c.device_id))]
        self._super_pod, self._main_board_id = super_pod(statics), main_board_id(statics)
        self._recompute()

    def set_verdicts(self, verdicts: Mapping[str, ChipVerdict], connected: bool) -> None:
        self._verdicts = dict(verdicts)
        self._fault_manager_connected = connected
        self._recompute()

    def set_exporter_lost(self, lost: bool) -> None:
        if lost != self._exporter_lost:
            log.warning("exporter grace period over" if lost else "exporter is back", extra={"lost": lost})
            self._exporter_lost = lost
            self._recompute()

    def set_pods(
        self, pods: list[PodView], in_use_for_health: set[str] | None = None, holding: Container[str] | None = None
    ) -> None:
        """The node's pods; `in_use_for_health` and `holding` (uids of the Pending and Running pods)
        when the caller keeps them already, so that no pass over the pods is made."""
        self._in_use_for_health = chips_in_use_for_health(pods) if in_use_for_health is None else in_use_for_health
        # A pod that is gone or finished no longer holds its devices: forget its mappings.
        if holding is None:
            holding = {p.uid for p in pods if p.phase in ALLOCATION_PHASES}
        for table in (self._volcano_by_pod, self._cores_by_pod):
            for uid in [uid for uid in table if uid not in holding]:
                del table[uid]
        self._recompute()

    def restore_volcano(self, allocated: Mapping[str, PodView]) -> None:
        """After a restart the kubelet still holds the ids it was given; the pods' kltDev and
        AscendReal (`allocated`: the holders that carry kltDev, by uid) say which real chip each
        stands for, so their health keeps following it. Needs the chips (they give the type)."""
        rtype = self._physical_type()
        if rtype is None:
            return
        restored = False
        for uid, pod in allocated.items():
            if uid in self._volcano_by_pod or uid in self._unmappable:
                continue
            try:
                mapping = kubelet_map(pod.annotations, rtype)
            except ValueError as exc:
                self._unmappable.add(uid)
                log.warning("kubelet ids of a pod not restored", extra={"pod": pod.key, "reason": str(exc)})
                continue
            if mapping:
                self._volcano_by_pod[uid] = mapping
                restored = True
        if restored:
            self._recompute()

    # An allocation changes no chip's health, only which device ids report it: the chips' decisions
    # stand and only the device lists are published again (an Allocate waits for this, a recompute
    # of every chip's health would add most of a millisecond to it).

    def volcano_allocated(self, pod_uid: str, kubelet_to_real: Mapping[str, str]) -> None:
        self._volcano_by_pod[pod_uid] = dict(kubelet_to_real)
        self._inventory = replace(self._inventory, volcano_map=self._volcano_map())
        self._publish_devices()

    def cores_allocated(self, pod_uid: str, core_to_phy: Mapping[str, int]) -> None:
        self._cores_by_pod[pod_uid] = dict(core_to_phy)
        self._publish_devices()

    # ---- recompute and publish ---------------------------------------------------------------

    def _physical_type(self) -> ResourceType | None:
        types = {c.resource_type for c in self._chips.values() if c.resource_type is not None}
        return min(types) if types else None

    def _recompute(self) -> None:
        in_use = self._in_use_for_health
        infos: dict[int, ChipInfo] = {}
        health: dict[int, ChipHealth] = {}
        for chip in self._chips.values():
            decision = (
                HealthDecision(False, HealthSource.EXPORTER, "the exporter is unreachable", EXPORTER_LOST)
                if self._exporter_lost
                else decide(
                    chip, self._verdicts.get(chip.name), self._fault_manager_connected, self._table,
                    chip.name in in_use,
                )
            )  # fmt: skip
            previous = self._decisions.get(chip.logic_id)
            if previous is None or previous.healthy != decision.healthy:
                log.info(
                    "chip health",
                    extra={"chip": chip.name, "healthy": decision.healthy, "source": decision.source.value,
                           "reason": decision.reason},
                )  # fmt: skip
            self._decisions[chip.logic_id] = decision
            if (info := chip_info(chip, decision.healthy, decision.fault)) is not None:
                infos[info.phy_id] = info
                health[info.phy_id] = ChipHealth(decision.healthy, _message(decision, self._verdicts.get(chip.name)))
        self._inventory = Inventory(
            self._physical_type(), MappingProxyType(infos), MappingProxyType(dict(self._chips)),
            self._volcano_map(), self._super_pod, self._main_board_id, MappingProxyType(health), self._exporter_lost,
        )  # fmt: skip
        self._publish_devices()
        for callback in list(self._watchers):
            callback()

    def _volcano_map(self) -> Mapping[str, str]:
        return MappingProxyType({k: v for mapping in self._volcano_by_pod.values() for k, v in mapping.items()})

    def _publish_devices(self) -> None:
        """Every resource's device list from the inventory's chips (their health decided already)."""
        inventory = self._inventory
        rtype = inventory.physical_type
        if rtype is None:
            return
        chips = [replace(c, healthy=False) if c.name in self._withheld else c for c in inventory.chips.values()]
        if not self._share_warned and chips:
            warning = ignored_share_count((c.family for c in chips), self._share_count, self._soft_share)
            if warning is not None:
                log.warning("share count ignored", extra={"reason": warning})
            self._share_warned = True
        if self._mixed_310p:
            self._publish_mixed(chips)
            return
        physical = physical_devices(chips, rtype, share_count=self._share_count, soft_share=self._soft_share)
        # Soft-share ids are anonymous (the reference maps real -> real): a chip's 100 ids report
        # the chip, whichever pod Volcano placed on it.
        self._publish(rtype.value, physical if self._soft_share else self._remap(physical))
        if self._preset_virtual_device:
            for suffix in sorted({v.suffix for c in chips for v in c.vnpus}):
                self._publish(f"{rtype.value}-{suffix}", vnpu_devices(chips, suffix))
        else:
            cores_in_use = {k: v for mapping in self._cores_by_pod.values() for k, v in mapping.items()}
            health = core_health(chips, cores_in_use)
            numa = {c.phy_id: c.numa_node for c in chips}
            cores = core_ids(chips)
            self._publish(NPU_CORE, [DeviceEntry(core, health[core], numa.get(cores[core])) for core in cores])

    def _publish_mixed(self, chips: list[ChipInfo]) -> None:
        """310P mixed insert: each product's resource, nothing under the physical one (no vNPUs either)."""
        mixed = mixed_devices(chips)
        if mixed.skipped != self._mixed_skipped:
            self._mixed_skipped = mixed.skipped
            if mixed.skipped:
                log.error(
                    "chips not advertised: mixed insert needs their product type",
                    extra={"chips": mixed.skipped},
                )
        for resource, entries in sorted(mixed.by_resource.items()):
            self._publish(resource, entries)

    def _remap(self, entries: list[DeviceEntry]) -> list[DeviceEntry]:
        """Volcano path: a kubelet id reports the health of the real device behind it."""
        mapping = self._inventory.volcano_map
        if not mapping:
            return entries
        health = {e.id: e.healthy for e in entries}
        return [e._replace(healthy=health.get(mapping.get(e.id, e.id), e.healthy)) for e in entries]

    def _publish(self, resource: str, entries: Iterable[DeviceEntry]) -> None:
        devices = tuple(AdvertisedDevice(e.id, e.healthy, e.numa) for e in entries)
        if self._board.publish(resource, devices):
            self._listener.devices_published(resource, devices)

    def set_withheld(self, names: frozenset[str]) -> None:
        """`--kubelet-api both`: these chips (by name) are prepared for DRA claims, so the device
        plugin advertises them Unhealthy (the kubelet allocates only Healthy devices) until they are
        released. Their health as the inventory says it, which the ResourceSlice follows, is unchanged."""
        if names != self._withheld:
            self._withheld = names
            self._publish_devices()


def _message(decision: HealthDecision, verdict: ChipVerdict | None) -> str:
    """The decision's reason, with the fault codes the verdict it rests on names."""
    if verdict is not None and verdict.codes and decision.source in (HealthSource.VERDICT, HealthSource.LAST_VERDICT):
        return f"{decision.reason}, fault codes {' '.join(verdict.codes)}"
    return decision.reason
