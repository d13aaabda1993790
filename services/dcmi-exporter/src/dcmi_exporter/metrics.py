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
from dcmi_exporter.backends.base import PCIE_KINDS, ChipTelemetry
from dcmi_exporter.snapshot import Snapshot
from dcmi_exporter.telemetry_task import Samples

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
    def __init__(
        self,
        snapshot: Callable[[], Snapshot],
        stats: Callable[[], dict[str, float]],
        samples: Callable[[], Samples] = Samples,
    ) -> None:
        """`samples`: the slow sources' last samples (telemetry_task.py); none by default."""
        self._snapshot = snapshot
        self._stats = stats
        self._samples = samples

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
        yield from machine_families(snap)
        yield from families.values()
        yield from sample_families(snap, self._samples())
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


def build_registry(
    snapshot: Callable[[], Snapshot],
    stats: Callable[[], dict[str, float]],
    samples: Callable[[], Samples] = Samples,
) -> CollectorRegistry:
    """`stats`: the exporter's own gauges by name (events published, stream clients, hung calls).
    `samples`: the slow sources' last samples (telemetry_task.py)."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(ChipCollector(snapshot, stats, samples))
    return registry


# ---------------------------------------------------------------------- npu-exporter parity

# Families with npu-exporter's names and help texts (collector/metrics/*.go), label set LABELS.
# (name, help, how a ChipTelemetry gives the value or None)
TELEMETRY_FAMILIES: tuple[tuple[str, str, Callable[[ChipTelemetry], float | None]], ...] = (
    ("npu_chip_info_voltage", "the npu voltage", lambda t: t.voltage_v),
    (
        "npu_chip_info_aicore_current_freq",
        "the npu ai core current frequency, unit is 'MHz'",
        lambda t: t.aicore_freq_mhz,
    ),
    ("npu_chip_info_overall_utilization", "the overall utilization of npu", lambda t: t.overall_pct),
    ("npu_chip_info_vector_utilization", "the vector utilization", lambda t: t.vector_pct),
    ("npu_chip_info_cube_utilization", "the cube utilization", lambda t: t.cube_pct),
    (
        "npu_chip_info_hbm_ecc_enable_flag",
        "whether HBM ecc detection is enabled",
        lambda t: t.hbm_ecc.enable_flag if t.hbm_ecc else None,
    ),
    (
        "npu_chip_info_hbm_ecc_single_bit_error_cnt",
        "HBM Single Bit Error Count",
        lambda t: t.hbm_ecc.single_bit_error_cnt if t.hbm_ecc else None,
    ),
    (
        "npu_chip_info_hbm_ecc_double_bit_error_cnt",
        "HBM Double Bit Error Count",
        lambda t: t.hbm_ecc.double_bit_error_cnt if t.hbm_ecc else None,
    ),
    (
        "npu_chip_info_hbm_ecc_total_single_bit_error_cnt",
        "HBM Single Bit Aggregate Total Err Cnt",
        lambda t: t.hbm_ecc.total_single_bit_error_cnt if t.hbm_ecc else None,
    ),
    (
        "npu_chip_info_hbm_ecc_total_double_bit_error_cnt",
        "HBM Double Bit Aggregate Total Err Cnt",
        lambda t: t.hbm_ecc.total_double_bit_error_cnt if t.hbm_ecc else None,
    ),
    (
        "npu_chip_info_hbm_ecc_single_bit_isolated_pages_cnt",
        "HBM Single Bit Isolated Pages Count",
        lambda t: t.hbm_ecc.single_bit_isolated_pages_cnt if t.hbm_ecc else None,
    ),
    (
        "npu_chip_info_hbm_ecc_double_bit_isolated_pages_cnt",
        "HBM Double Bit Isolated Pages Count",
        lambda t: t.hbm_ecc.double_bit_isolated_pages_cnt if t.hbm_ecc else None,
    ),
)

# npu-exporter's PCIe families: one per PCIE_KINDS entry, label pcie_bw_type = min/max/avg.
PCIE_FAMILIES: dict[str, tuple[str, str]] = {
    "tx_p": ("npu_chip_info_pcie_tx_p_bw", "the npu receive remote write operate's speed, unit is 'MB/ms'"),
    "tx_np": ("npu_chip_info_pcie_tx_np_bw", "the npu receive remote read operate's speed, unit is 'MB/ms'"),
    "tx_cpl": ("npu_chip_info_pcie_tx_cpl_bw", "the npu read cpl's responese bw speed from remote, unit is 'MB/ms'"),
    "rx_p": ("npu_chip_info_pcie_rx_p_bw", "the npu write bw to remote's speed, unit is 'MB/ms'"),
    "rx_np": ("npu_chip_info_pcie_rx_np_bw", "the npu read bw's speed from remote, unit is 'MB/ms'"),
    "rx_cpl": ("npu_chip_info_pcie_rx_cpl_bw", "the npu reply remote read operate cpl's speed, unit is 'MB/ms'"),
}
PCIE_BW_TYPES = ("minPcieBw", "maxPcieBw", "avgPcieBw")  # the order of PcieBandwidth.rates' tuples

# npu-exporter's RoCE collector: family -> the `hccn_tool -stat -g` key it shows.
NET_FAMILIES: dict[str, str] = {
    "npu_chip_mac_rx_pause_num": "mac_rx_mac_pause_num",
    "npu_chip_mac_tx_pause_num": "mac_tx_mac_pause_num",
    "npu_chip_mac_rx_pfc_pkt_num": "mac_rx_pfc_pkt_num",
    "npu_chip_mac_tx_pfc_pkt_num": "mac_tx_pfc_pkt_num",
    "npu_chip_mac_rx_bad_pkt_num": "mac_rx_bad_pkt_num",
    "npu_chip_mac_tx_bad_pkt_num": "mac_tx_bad_pkt_num",
    "npu_chip_mac_tx_bad_oct_num": "mac_tx_bad_oct_num",
    "npu_chip_mac_rx_bad_oct_num": "mac_rx_bad_oct_num",
    "npu_chip_info_rx_fcs_num": "mac_rx_fcs_err_pkt_num",
    "npu_chip_roce_rx_all_pkt_num": "roce_rx_all_pkt_num",
    "npu_chip_roce_tx_all_pkt_num": "roce_tx_all_pkt_num",
    "npu_chip_roce_rx_err_pkt_num": "roce_rx_err_pkt_num",
    "npu_chip_roce_tx_err_pkt_num": "roce_tx_err_pkt_num",
    "npu_chip_roce_rx_cnp_pkt_num": "roce_rx_cnp_pkt_num",
    "npu_chip_roce_tx_cnp_pkt_num": "roce_tx_cnp_pkt_num",
    "npu_chip_roce_new_pkt_rty_num": "roce_new_pkt_rty_num",
    "npu_chip_roce_unexpected_ack_num": "roce_unexpected_ack_num",
    "npu_chip_roce_out_of_order_num": "roce_out_of_order_num",
    "npu_chip_roce_verification_err_num": "roce_verification_err_num",
    "npu_chip_roce_qp_status_err_num": "roce_qp_status_err_num",
    "npu_chip_info_rx_ecn_num": "roce_ecn_db_num",
}


# npu-exporter's optical collector (910 families): family -> the `hccn_tool -optical -g` key.
OPTICAL_FAMILIES: dict[str, tuple[str, str]] = {
    "npu_chip_optical_state": ("present", "the npu interface receive optical-state"),
    "npu_chip_optical_vcc": ("Vcc", "the npu interface receive optical-vcc"),
    "npu_chip_optical_temp": ("temperature", "the npu interface receive optical-temperature"),
    **{
        f"npu_chip_optical_tx_power_{i}": (f"Tx_Power{i}", f"npu interface receive optical-tx-power-{i}")
        for i in range(4)
    },
    **{
        f"npu_chip_optical_rx_power_{i}": (f"Rx_Power{i}", f"npu interface receive optical-rx-power-{i}")
        for i in range(4)
    },
}


# npu-exporter's NetworkCollector (910 families): family -> (the link sample's key, help).
LINK_FAMILIES: dict[str, tuple[str, str]] = {
    "npu_chip_info_link_status": ("link_status", "the npu link status"),
    "npu_chip_link_speed": ("link_speed", "the npu interface receive link speed, unit is 'Mb/s'"),
    "npu_chip_link_up_num": ("link_up_num", "the npu interface receive link-up num"),
    "npu_chip_info_bandwidth_tx": ("bandwidth_tx", "the npu interface transport speed, unit is 'MB/s'"),
    "npu_chip_info_bandwidth_rx": ("bandwidth_rx", "the npu interface receive speed, unit is 'MB/s'"),
}


def health_counts(snap: Snapshot) -> tuple[int, int, int]:
    """(healthy, unhealthy, unknown) chips, as npu-exporter's countHealthStatus: a chip whose
    health could not be read is unknown."""
    values = [health_value(chip) for chip in snap.chips]
    return values.count(1), values.count(0), values.count(-1)


def card_count(snap: Snapshot) -> int | None:
    """Cards holding a chip; None on a v2 (950) node, whose chips have no card (npu-exporter shows
    machine_card_nums on the 310P, 910, 910B and A3 only)."""
    cards = {chip.card_id for chip in snap.chips if chip.card_id >= 0}
    return len(cards) if cards else None


def machine_families(snap: Snapshot) -> Iterator[GaugeMetricFamily]:
    healthy, unhealthy, unknown = health_counts(snap)
    for name, doc, value in (
        ("machine_healthy_npu_nums", "Amount of healthy npu on the machine.", healthy),
        ("machine_unhealthy_npu_nums", "Amount of unhealthy npu on the machine.", unhealthy),
        (
            "machine_unknown_npu_nums",
            "Amount of the npus whose health status cannot be obtained via DCMI interface on the machine.",
            unknown,
        ),
    ):
        gauge = GaugeMetricFamily(name, doc)
        gauge.add_metric([], value)
        yield gauge
    cards = card_count(snap)
    if cards is not None:
        gauge = GaugeMetricFamily("machine_card_nums", "Amount of card installed on the machine.")
        gauge.add_metric([], cards)
        yield gauge


def sample_families(snap: Snapshot, samples: Samples) -> Iterator[GaugeMetricFamily]:
    """The slow sources' families, for the chips that answer now (a silent chip keeps its health
    series only, as in the poll's families)."""
    answering = [chip for chip in snap.chips if chip.state is ChipState.OK and chip.dynamic is not None]
    telemetry = [(chip, samples.chips[chip.logic_id]) for chip in answering if chip.logic_id in samples.chips]
    for name, doc, value_of in TELEMETRY_FAMILIES:
        family = GaugeMetricFamily(name, doc, labels=LABELS)
        for chip, sample in telemetry:
            value = value_of(sample)
            if value is not None:
                family.add_metric(_labels(chip), value)
        yield family
    pcie = {
        kind: GaugeMetricFamily(name, doc, labels=[*LABELS, "pcie_bw_type"])
        for kind, (name, doc) in PCIE_FAMILIES.items()
    }
    for chip, sample in telemetry:
        if sample.pcie is None:
            continue
        for kind in PCIE_KINDS:
            for bw_type, value in zip(PCIE_BW_TYPES, sample.pcie.rates[kind], strict=True):
                pcie[kind].add_metric([*_labels(chip), bw_type], value)
    yield from pcie.values()
    for table, by_logic in ((OPTICAL_FAMILIES, samples.optical), (LINK_FAMILIES, samples.link)):
        read = [(chip, by_logic[chip.logic_id]) for chip in answering if chip.logic_id in by_logic]
        for name, (key, doc) in table.items():
            family = GaugeMetricFamily(name, doc, labels=LABELS)
            for chip, values in read:
                if key in values:  # npu-exporter shows no value it could not read
                    family.add_metric(_labels(chip), values[key])
            yield family
    net = [(chip, samples.net[chip.logic_id]) for chip in answering if chip.logic_id in samples.net]
    for name, key in NET_FAMILIES.items():
        family = GaugeMetricFamily(name, f"npu interface receive {key.replace('_', '-')}", labels=LABELS)
        for chip, stats in net:
            value = stats.get(key, 0)  # a counter the tool did not print: 0, as the reference
            if value is not None:  # None: read outside the counter's range, dropped
                family.add_metric(_labels(chip), value)
        yield family
