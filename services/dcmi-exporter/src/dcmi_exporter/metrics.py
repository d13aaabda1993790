"""Prometheus metrics under the npu-exporter family names (contract section 11).

Chip families are collected from the snapshot at scrape time, so a scrape shows exactly
what the API shows. A chip that fails to answer keeps only its health series, at -1.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

from ascend_common.schemas.exporter import Chip, ChipState
from prometheus_client import CollectorRegistry
from prometheus_client.core import GaugeMetricFamily, InfoMetricFamily
from prometheus_client.registry import Collector

from dcmi_exporter import __version__
from dcmi_exporter.snapshot import Snapshot

LABELS = ["id", "model_name", "vdie_id", "pcie_bus_info"]


def _labels(chip: Chip) -> list[str]:
    name = chip.static.chip_name.value if chip.static.chip_name.is_ok else ""
    # vdie_id: the chip's VDIE on every family, "" when unread (npu-exporter setVdieID leaves it
    # empty then). pcie_bus_info stays "": not read.
    return [str(chip.phy_id), f"Ascend{name}" if name else "", chip.static.vdie_id or "", ""]


def health_value(chip: Chip) -> int:
    if chip.state is not ChipState.OK and chip.state is not ChipState.CARD_DROP:
        return -1
    if chip.healthy is None:
        return -1
    return 1 if chip.healthy else 0


def error_code_value(chip: Chip) -> int:
    """The first active code as an integer (npu-exporter's convention), 0 when none."""
    if chip.dynamic is None or not chip.dynamic.error_codes.is_ok or not chip.dynamic.error_codes.value:
        return 0
    return int(chip.dynamic.error_codes.value[0], 16)


class ChipCollector(Collector):
    def __init__(self, snapshot: Callable[[], Snapshot], stats: Callable[[], dict[str, float]]) -> None:
        self._snapshot = snapshot
        self._stats = stats

    def collect(self) -> Iterator[GaugeMetricFamily | InfoMetricFamily]:
        snap = self._snapshot()
        families = {
            name: GaugeMetricFamily(name, doc, labels=LABELS)
            for name, doc in (
                ("npu_chip_info_health_status", "chip health: 1 healthy, 0 unhealthy, -1 unknown"),
                ("npu_chip_info_network_status", "chip network health: 1 healthy, 0 unhealthy"),
                ("npu_chip_info_error_code", "first active error code of the chip"),
                ("npu_chip_info_temperature", "chip temperature in degrees C"),
                ("npu_chip_info_power", "chip power in W"),
                ("npu_chip_info_utilization", "AI core utilization in %"),
                ("npu_chip_info_hbm_total_memory", "HBM total in MB"),
                ("npu_chip_info_hbm_used_memory", "HBM used in MB"),
                ("npu_chip_info_process_info_num", "processes running on the chip"),
            )
        }
        for chip in snap.chips:
            labels = _labels(chip)
            families["npu_chip_info_health_status"].add_metric(labels, health_value(chip))
            dyn = chip.dynamic
            if chip.state is not ChipState.OK or dyn is None:
                continue  # the chip did not answer: its other series are dropped
            if chip.network_healthy is not None:
                families["npu_chip_info_network_status"].add_metric(labels, 1 if chip.network_healthy else 0)
            families["npu_chip_info_error_code"].add_metric(labels, error_code_value(chip))
            if dyn.temperature_c.is_ok and dyn.temperature_c.value is not None:
                families["npu_chip_info_temperature"].add_metric(labels, dyn.temperature_c.value)
            if dyn.power_w.is_ok and dyn.power_w.value is not None:
                families["npu_chip_info_power"].add_metric(labels, dyn.power_w.value)
            util = dyn.utilization.value if dyn.utilization.is_ok else None
            if util is not None and util.aicore_pct is not None:
                families["npu_chip_info_utilization"].add_metric(labels, util.aicore_pct)
            hbm = dyn.hbm.value if dyn.hbm.is_ok else None
            if hbm is not None:
                families["npu_chip_info_hbm_total_memory"].add_metric(labels, hbm.total_mb)
                families["npu_chip_info_hbm_used_memory"].add_metric(labels, hbm.used_mb)
            if dyn.processes.is_ok and dyn.processes.value is not None:
                families["npu_chip_info_process_info_num"].add_metric(labels, len(dyn.processes.value))
        machine = GaugeMetricFamily("machine_npu_nums", "NPU chips on the node")
        machine.add_metric([], len(snap.chips))
        yield machine
        yield from families.values()
        info = InfoMetricFamily("npu_exporter_version", "exporter and driver versions")
        version = snap.node.dcmi_version.value if snap.node.dcmi_version.is_ok else ""
        info.add_metric(
            [], {"exporterVersion": __version__, "dcmiVersion": version or "", "backend": snap.node.backend}
        )
        yield info
        for name, value in self._stats().items():
            gauge = GaugeMetricFamily(f"dcmi_exporter_{name}", name.replace("_", " "))
            gauge.add_metric([], value)
            yield gauge


def build_registry(snapshot: Callable[[], Snapshot], stats: Callable[[], dict[str, float]]) -> CollectorRegistry:
    """`stats`: the exporter's own gauges by name (events published, stream clients, hung calls)."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(ChipCollector(snapshot, stats))
    return registry
