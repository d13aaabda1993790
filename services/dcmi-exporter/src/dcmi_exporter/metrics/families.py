"""Prometheus metrics under the npu-exporter family names (contract section 11).

Chip families are collected from the snapshot at scrape time, so a scrape shows exactly
what the API shows. A chip that fails to answer keeps only its health and name series, health at -1.
Which family a chip type shows follows npu-exporter's collectors (their IsSupported and supported-
device maps, collector/metrics/collector_for_*.go); the table tests hold each chip type to them.

Every chip series carries npu-exporter's CardLabel: the chip, and the namespace, pod and container
that hold it ("" when none does, "not_displayed_for_multi_pod" in all three when several do). The
device plugin tells the exporter who holds which chip (containers.py); the families are rebuilt at
every scrape, so a label that changes leaves no stale series behind.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

from ascend_common.cardlabel import card_labels
from ascend_common.chip_traits import MetricGroup, families_with, traits
from ascend_common.chips import ChipFamily
from ascend_common.schemas.exporter import Chip, ChipState, ContainerHolder
from prometheus_client import CollectorRegistry
from prometheus_client.core import GaugeMetricFamily, InfoMetricFamily
from prometheus_client.registry import Collector

from dcmi_exporter import __version__
from dcmi_exporter.backends.base import (
    HCCS_PORTS,
    PCIE_KINDS,
    UB_COMMON_KEYS,
    UBOE_KEYS,
    ChipTelemetry,
    UbPortLink,
    UbPortOptical,
    UbPortStat,
    VnpuActivity,
    valid_vdev_id,
)
from dcmi_exporter.metrics.holders import Holders
from dcmi_exporter.node.snapshot import Snapshot
from dcmi_exporter.tasks.telemetry import Samples

CHIP_LABELS = ["id", "model_name", "vdie_id", "pcie_bus_info"]
LABELS = [*CHIP_LABELS, "namespace", "pod_name", "container_name"]  # npu-exporter's CardLabel
NAME_LABELS = ["id", "name", *LABELS[2:]]  # npu_chip_info_name: CardLabel with model_name renamed
MAX_ERROR_CODES = 10  # npu-exporter's MaxErrorCodeLen
ERROR_CODE_FAMILIES = (
    "npu_chip_info_error_code",
    *(f"npu_chip_info_error_code_{i}" for i in range(1, MAX_ERROR_CODES)),
)
_MB = 1024 * 1024

_ALL = frozenset(ChipFamily)
# npu-exporter's supported-device maps, by family (collector_for_*.go): the table's metric groups.
HBM_FAMILIES = families_with(lambda row: MetricGroup.HBM in row.metrics)
DDR_FAMILIES = families_with(lambda row: MetricGroup.DDR in row.metrics)
OVERALL_UTIL_FAMILIES = families_with(lambda row: MetricGroup.OVERALL_UTIL in row.metrics)
CUBE_UTIL_FAMILIES = families_with(lambda row: MetricGroup.CUBE_UTIL in row.metrics)
VECTOR_UTIL_FAMILIES = families_with(lambda row: MetricGroup.VECTOR_UTIL in row.metrics)
PCIE_FAMILY_SET = families_with(lambda row: MetricGroup.PCIE in row.metrics)
HCCS_FAMILIES = families_with(lambda row: MetricGroup.HCCS in row.metrics)
SIO_FAMILIES = families_with(lambda row: MetricGroup.SIO in row.metrics)
PRODUCT_TYPE_FAMILIES = families_with(lambda row: MetricGroup.PRODUCT_TYPE in row.metrics)
UB_FAMILIES = families_with(lambda row: MetricGroup.UB in row.metrics)  # UbCollector.IsSupported: Ascend910A5 only
VNPU_FAMILIES = families_with(lambda row: MetricGroup.VNPU in row.metrics)  # VnpuCollector's supportedVnpuDevices
# A9000 A3 super-pod main boards number their HCCS ports from 2, every other board from 1
# (npu-exporter's HccsCollector.PreCollect).
A9000_A3_MAIN_BOARDS = frozenset({0x1C, 0x1D})


def _chip_labels(chip: Chip) -> list[str]:
    name = chip.static.chip_name.value if chip.static.chip_name.is_ok else ""
    # vdie_id: the chip's VDIE on every family, "" when unread (npu-exporter setVdieID leaves it
    # empty then). pcie_bus_info stays "": not read.
    return [str(chip.phy_id), f"Ascend{name}" if name else "", chip.static.vdie_id or "", ""]


def _labels(chip: Chip, holders: Holders | None = None) -> list[str]:
    return [*_chip_labels(chip), *card_labels((holders or {}).get(chip.phy_id, ()))]


def supports(chip: Chip, families: frozenset[ChipFamily]) -> bool:
    return chip.family is not None and chip.family in families


def health_value(chip: Chip) -> int:
    if chip.state is not ChipState.OK and chip.state is not ChipState.CARD_DROP:
        return -1
    if chip.healthy is None:
        return -1
    return 1 if chip.healthy else 0


def error_code_values(chip: Chip) -> list[int]:
    """The active codes as integers, the first MAX_ERROR_CODES (npu-exporter's updateErrorCodesInfo):
    one family each, none at all on a chip without a code."""
    if chip.dynamic is None or not chip.dynamic.error_codes.is_ok or not chip.dynamic.error_codes.value:
        return []
    return [int(code, 16) for code in chip.dynamic.error_codes.value[:MAX_ERROR_CODES]]


class ChipCollector(Collector):
    def __init__(
        self,
        snapshot: Callable[[], Snapshot],
        stats: Callable[[], dict[str, float]],
        samples: Callable[[], Samples] = Samples,
        holders: Callable[[], Holders] = dict,
        vnpu_holders: Callable[[], Holders] = dict,
    ) -> None:
        """`samples`: the slow sources' last samples (telemetry_task.py); none by default.
        `holders`: the containers holding each chip, by phy id (containers.py); `vnpu_holders`: those
        holding each vNPU, by vdev id; none by default."""
        self._snapshot = snapshot
        self._stats = stats
        self._samples = samples
        self._holders = holders
        self._vnpu_holders = vnpu_holders

    def collect(self) -> Iterator[GaugeMetricFamily | InfoMetricFamily]:
        snap = self._snapshot()
        holders = self._holders()
        families = {
            name: GaugeMetricFamily(name, doc, labels=LABELS)
            for name, doc in (
                ("npu_chip_info_health_status", "chip health: 1 healthy, 0 unhealthy, -1 unknown"),
                ("npu_chip_info_network_status", "chip network health: 1 healthy, 0 unhealthy"),
                *((name, "the npu error code") for name in ERROR_CODE_FAMILIES),
                ("npu_chip_info_temperature", "chip temperature in degrees C"),
                ("npu_chip_info_power", "chip power in W"),
                ("npu_chip_info_utilization", "AI core utilization in %"),
                ("npu_chip_info_hbm_total_memory", "HBM total in MB"),
                ("npu_chip_info_hbm_used_memory", "HBM used in MB"),
                ("npu_chip_info_hbm_utilization", "the npu hbm utilization"),
                ("npu_chip_info_hbm_temperature", "the npu hbm temperature"),
                ("npu_chip_info_hbm_bandwidth_utilization", "the npu hbm bandwidth util rate"),
                ("npu_chip_info_process_info_num", "processes running on the chip"),
            )
        }
        name_family = GaugeMetricFamily("npu_chip_info_name", "the Ascend npu name with value '1'", labels=NAME_LABELS)
        process_info = GaugeMetricFamily(
            "npu_chip_info_process_info",
            "the npu process info, unit is 'MB'. if process run on host, container_id and container_name will be empty",
            labels=[*LABELS, "process_id", "container_id"],
        )
        product = GaugeMetricFamily(
            "npu_chip_info_product_type", "the npu product_type information", labels=[*LABELS, "product_type"]
        )
        for chip in snap.chips:
            labels = _labels(chip, holders)
            families["npu_chip_info_health_status"].add_metric(labels, health_value(chip))
            name_family.add_metric(labels, 1)
            dyn = chip.dynamic
            if chip.state is not ChipState.OK or dyn is None:
                continue  # the chip did not answer: its other series are dropped
            if chip.network_healthy is not None:
                families["npu_chip_info_network_status"].add_metric(labels, 1 if chip.network_healthy else 0)
            for family_name, code in zip(ERROR_CODE_FAMILIES, error_code_values(chip), strict=False):
                families[family_name].add_metric(labels, code)
            if dyn.temperature_c.is_ok and dyn.temperature_c.value is not None:
                families["npu_chip_info_temperature"].add_metric(labels, dyn.temperature_c.value)
            if dyn.power_w.is_ok and dyn.power_w.value is not None:
                families["npu_chip_info_power"].add_metric(labels, dyn.power_w.value)
            util = dyn.utilization.value if dyn.utilization.is_ok else None
            if util is not None and util.aicore_pct is not None:
                families["npu_chip_info_utilization"].add_metric(labels, util.aicore_pct)
            hbm = dyn.hbm.value if dyn.hbm.is_ok else None
            if hbm is not None and supports(chip, HBM_FAMILIES):
                families["npu_chip_info_hbm_total_memory"].add_metric(labels, hbm.total_mb)
                families["npu_chip_info_hbm_used_memory"].add_metric(labels, hbm.used_mb)
                if hbm.temperature_c is not None:
                    families["npu_chip_info_hbm_temperature"].add_metric(labels, hbm.temperature_c)
                if hbm.bandwidth_util_pct is not None:
                    families["npu_chip_info_hbm_bandwidth_utilization"].add_metric(labels, hbm.bandwidth_util_pct)
                if util is not None and util.hbm_pct is not None:
                    families["npu_chip_info_hbm_utilization"].add_metric(labels, util.hbm_pct)
            if dyn.processes.is_ok and dyn.processes.value is not None:
                families["npu_chip_info_process_info_num"].add_metric(labels, len(dyn.processes.value))
                # No process is matched to its container (the exporter sees no container runtime):
                # npu-exporter's labels for an unmatched process, the holder's three left "".
                for proc in dyn.processes.value:
                    proc_labels = [*_chip_labels(chip), "", "", "", str(proc.pid), ""]
                    process_info.add_metric(proc_labels, proc.memory_bytes / _MB)
            product_type = chip.static.product_type.value if chip.static.product_type.is_ok else None
            if product_type and supports(chip, PRODUCT_TYPE_FAMILIES):
                product.add_metric([*labels, product_type], 1)
        machine = GaugeMetricFamily("machine_npu_nums", "NPU chips on the node")
        machine.add_metric([], len(snap.chips))
        yield machine
        yield from machine_families(snap)
        yield from families.values()
        yield from (name_family, process_info, product)
        samples = self._samples()
        yield from sample_families(snap, samples, holders)
        yield from vnpu_families(snap, samples, self._vnpu_holders())
        version = snap.node.dcmi_version.value if snap.node.dcmi_version.is_ok else ""
        node_base = GaugeMetricFamily(
            "node_base_info", "the common information of this node", labels=["exporterVersion", "driverVersion"]
        )
        node_base.add_metric([__version__, version or ""], 1)
        yield node_base
        info = InfoMetricFamily("npu_exporter_version", "exporter version with value '1'")
        info.add_metric([], {"exporterVersion": __version__})
        yield info
        for name, value in self._stats().items():
            gauge = GaugeMetricFamily(f"dcmi_exporter_{name}", name.replace("_", " "))
            gauge.add_metric([], value)
            yield gauge


def build_registry(
    snapshot: Callable[[], Snapshot],
    stats: Callable[[], dict[str, float]],
    samples: Callable[[], Samples] = Samples,
    holders: Callable[[], Holders] = dict,
    vnpu_holders: Callable[[], Holders] = dict,
) -> CollectorRegistry:
    """`stats`: the exporter's own gauges by name (events published, stream clients, hung calls).
    `samples`: the slow sources' last samples (telemetry_task.py). `holders`: who holds each chip;
    `vnpu_holders`: who holds each vNPU, by vdev id."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(ChipCollector(snapshot, stats, samples, holders, vnpu_holders))
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

# The chip families each TELEMETRY_FAMILIES entry is shown on (npu-exporter's supported maps); all
# others on every family.
TELEMETRY_ONLY_ON: dict[str, frozenset[ChipFamily]] = {
    "npu_chip_info_overall_utilization": OVERALL_UTIL_FAMILIES,
    "npu_chip_info_vector_utilization": VECTOR_UTIL_FAMILIES,
    "npu_chip_info_cube_utilization": CUBE_UTIL_FAMILIES,
    **{name: HBM_FAMILIES for name, _, _ in TELEMETRY_FAMILIES if name.startswith("npu_chip_info_hbm_ecc_")},
}

# npu-exporter's HCCS families (collector_for_hccs.go): per port, then the bandwidth's totals.
HCCS_STAT_PREFIX = "npu_chip_info_hccs_statistic_info_"
HCCS_BW_PREFIX = "npu_chip_info_hccs_bandwidth_info_"
HCCS_PORT_FAMILIES: tuple[tuple[str, str, str], ...] = (  # (family prefix, help prefix, sample field)
    (f"{HCCS_STAT_PREFIX}tx_cnt_", "transmitted message count for hccs", "tx_cnt"),
    (f"{HCCS_STAT_PREFIX}rx_cnt_", "received message count for hccs", "rx_cnt"),
    (f"{HCCS_STAT_PREFIX}crc_err_cnt_", "crc error count for hccs", "crc_err_cnt"),
    (f"{HCCS_BW_PREFIX}tx_", "single-link transmission data bandwidth for hccs", "tx"),
    (f"{HCCS_BW_PREFIX}rx_", "single-link receive data bandwidth for hccs", "rx"),
)
HCCS_TOTAL_FAMILIES: tuple[tuple[str, str, str], ...] = (
    (f"{HCCS_BW_PREFIX}profiling_time", "sampling interval for hccs bandwidth", "profiling_time_ms"),
    (f"{HCCS_BW_PREFIX}total_tx", "total sent data bandwidth", "total_tx"),
    (f"{HCCS_BW_PREFIX}total_rx", "total received data bandwidth", "total_rx"),
)
FAILED_VALUE = -1  # what npu-exporter shows for a read that failed (its FailedMetricValue)


def pcie_supported(chip: Chip) -> bool:
    if chip.family is None or not supports(chip, PCIE_FAMILY_SET):
        return False
    boards = traits(chip.family).pcie_main_boards
    if boards is None:
        return True
    board = chip.static.main_board_id.value if chip.static.main_board_id.is_ok else None
    return board in boards


def hccs_first_port(chip: Chip) -> int:
    board = chip.static.main_board_id.value if chip.static.main_board_id.is_ok else None
    return 2 if board in A9000_A3_MAIN_BOARDS else 1


def hccs_family_names(first_port: int = 1) -> list[str]:
    return [
        *(f"{prefix}{port}" for prefix, _, _ in HCCS_PORT_FAMILIES for port in range(first_port, HCCS_PORTS)),
        *(name for name, _, _ in HCCS_TOTAL_FAMILIES),
    ]


# The other slow families, each from one ChipTelemetry field, on the chip families npu-exporter asks.
EXTRA_FAMILIES: tuple[tuple[str, str, frozenset[ChipFamily], Callable[[ChipTelemetry], float | None]], ...] = (
    (
        "npu_chip_info_sio_crc_tx_err_cnt",
        "sio transmitted error count between die",
        SIO_FAMILIES,
        lambda t: t.sio_crc_err[0] if t.sio_crc_err else None,
    ),
    (
        "npu_chip_info_sio_crc_rx_err_cnt",
        "sio received error count between die",
        SIO_FAMILIES,
        lambda t: t.sio_crc_err[1] if t.sio_crc_err else None,
    ),
    (
        "npu_chip_info_total_memory",
        "the npu total memory",
        DDR_FAMILIES,
        lambda t: t.memory.total_mb if t.memory else None,
    ),
    (
        "npu_chip_info_used_memory",
        "the npu used memory",
        DDR_FAMILIES,
        lambda t: t.memory.total_mb - t.memory.available_mb if t.memory else None,
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


# npu-exporter's UbCollector (collector_for_ub.go), 950 only: a family per counter of a UB port's
# `hccn_tool -g -stat`, named npu_chip_info_<the tool's key>, labels CardLabel + udie + port; the
# UBoE counters on a UBoE port only. (key, what it counts on the port)
UB_HELP: dict[str, str] = {
    "ub_ipv4_pkt_cnt_rx": "ipv4 ub packets received",
    "ub_ipv6_pkt_cnt_rx": "ipv6 ub packets received",
    "unic_ipv4_pkt_cnt_rx": "ipv4 unic packets received",
    "unic_ipv6_pkt_cnt_rx": "ipv6 unic packets received",
    "ub_compact_pkt_cnt_rx": "cfg6 packets received",
    "ub_umoc_ctph_cnt_rx": "cfg7 clan packets received",
    "ub_umoc_ntph_cnt_rx": "cfg7 not clan packets received",
    "ub_mem_pkt_cnt_rx": "ub mem packets received",
    "unknown_pkt_cnt_rx": "unknown packets received",
    "drop_ind_cnt_rx": "packets with drop_ind received",
    "err_ind_cnt_rx": "err packets received",
    "to_host_pkt_cnt_rx": "received packets landed after routing",
    "to_imp_pkt_cnt_rx": "received enumeration, configuration and management packets landed after routing",
    "to_mar_pkt_cnt_rx": "received ub memory packets landed after routing",
    "to_link_pkt_cnt_rx": "received packets forwarded to the same port's tx after routing",
    "to_noc_pkt_cnt_rx": "received p2p packets after routing",
    "route_err_cnt_rx": "received packets with a routing lookup error",
    "out_err_cnt_rx": "received packets found erroneous by validation",
    "length_err_cnt_rx": "received packets with a length error",
    "rx_busi_flit_num": "flits of service packets received from the mac",
    "rx_send_ack_flit": "acks released to the peer by rx",
    "ub_ipv4_pkt_cnt_tx": "ipv4 ub packets sent",
    "ub_ipv6_pkt_cnt_tx": "ipv6 ub packets sent",
    "unic_ipv4_pkt_cnt_tx": "ipv4 unic packets sent",
    "unic_ipv6_pkt_cnt_tx": "ipv6 unic packets sent",
    "ub_compact_pkt_cnt_tx": "cfg6 packets sent",
    "ub_umoc_ctph_cnt_tx": "cfg7 clan packets sent",
    "ub_umoc_ntph_cnt_tx": "cfg7 not clan packets sent",
    "ub_mem_pkt_cnt_tx": "ub mem packets sent",
    "unknown_pkt_cnt_tx": "unknown packets sent",
    "drop_ind_cnt_tx": "packets with drop_ind sent",
    "err_ind_cnt_tx": "err packets sent",
    "lpbk_ind_cnt_tx": "packets looped back at nl by tx",
    "out_err_cnt_tx": "sent packets found erroneous by validation",
    "length_err_cnt_tx": "sent packets with a length error",
    "tx_busi_flit_num": "flits of service packets sent from the mac",
    "tx_recv_ack_flit": "acks released to the peer by tx",
    "retry_req_sum": "retransmission attempts initiated",
    "retry_ack_sum": "response retransmissions",
    "crc_error_sum": "crc check errors",
    "core_mib_rxpausepkts": "uboe rx pause frames",
    "core_mib_txpausepkts": "uboe tx pause frames",
    "core_mib_rxpfcpkts": "uboe rx pfc frames",
    "core_mib_txpfcpkts": "uboe tx pfc frames",
    "core_mib_rxbadpkts": "uboe rx bad packets",
    "core_mib_txbadpkts": "uboe tx bad packets",
    "core_mib_rxbadoctets": "uboe bytes in rx bad packets",
    "core_mib_txbadoctets": "uboe bytes in tx bad packets",
}
UB_PREFIX = "npu_chip_info_"
UB_LABELS = [*LABELS, "udie", "port"]


def ub_family_names() -> list[str]:
    return [f"{UB_PREFIX}{key}" for key in (*UB_COMMON_KEYS, *UBOE_KEYS)]


def ub_families(read: list[tuple[list[str], list[UbPortStat]]]) -> Iterator[GaugeMetricFamily]:
    """The UB families of each chip's ports (its CardLabel values, its ports' counters): a series per
    port and counter the port has (the UBoE ones on a UBoE port only), -1 where the tool printed no
    number, as npu-exporter's promUpdateUbInfo."""
    for key in (*UB_COMMON_KEYS, *UBOE_KEYS):
        family = GaugeMetricFamily(f"{UB_PREFIX}{key}", f"number of {UB_HELP[key]} on ub port", labels=UB_LABELS)
        for labels, ports in read:
            for stat in ports:
                if key in stat.counters:
                    family.add_metric([*labels, str(stat.udie), str(stat.port)], stat.counters[key])
        yield family


# npu-exporter's NetworkCollector on the 950 (initNpuNetWorkDesc): per port, labels UB_LABELS; the
# link state and the bandwidth share their names with the 910's per-chip families (LINK_FAMILIES).
# family -> (the sample's key, help)
UB_LINK_FAMILIES: dict[str, tuple[str, str]] = {
    "npu_chip_info_link_status": ("link_status", "the npu link status on ub port"),
    "npu_chip_info_bandwidth_tx": ("bandwidth_tx", "the npu port transport speed, unit is 'MB/s'"),
    "npu_chip_info_bandwidth_rx": ("bandwidth_rx", "the npu port receive speed, unit is 'MB/s'"),
    "npu_chip_info_link_speed": ("link_speed", "the npu port link speed, unit is 'G'"),
}
# The 950 main boards the NetworkCollector skips (notSupportedNetworkNpuDevices: the Atlas 350 1P).
UB_LINK_UNSUPPORTED_BOARDS = frozenset({0x68})


def ub_link_supported(chip: Chip) -> bool:
    board = chip.static.main_board_id.value if chip.static.main_board_id.is_ok else None
    return supports(chip, UB_FAMILIES) and board not in UB_LINK_UNSUPPORTED_BOARDS


def ub_link_families(read: list[tuple[list[str], list[UbPortLink]]]) -> dict[str, GaugeMetricFamily]:
    """The 950's per-port link families: a series per port and value it read (a state that could not
    be read is -1; a bandwidth or speed that could not be read has none), as promUpdateNetInfoNew."""
    out: dict[str, GaugeMetricFamily] = {}
    for name, (key, doc) in UB_LINK_FAMILIES.items():
        family = out[name] = GaugeMetricFamily(name, doc, labels=UB_LABELS)
        for labels, ports in read:
            for link in ports:
                if key in link.values:
                    family.add_metric([*labels, str(link.udie), str(link.port)], link.values[key])
    return out


# npu-exporter's OpticalCollector on the 950 (initNpuOpticalDesc): per port, labels UB_LABELS.
# family -> (the sample's key, help)
UB_OPTICAL_FAMILIES: dict[str, tuple[str, str]] = {
    "npu_chip_info_optical_index_num": ("optical_index_num", "the npu link optical index num on ub port"),
    **{
        f"npu_chip_info_optical_{way}_power_{lane}": (
            f"{way}_power_{lane}",
            f"npu interface receive optical_{way}_power_{lane} on ub port",
        )
        for way in ("tx", "rx")
        for lane in range(4)
    },
}
# The 950 main boards the OpticalCollector skips (notSupportedOpticalNpuDevices).
UB_OPTICAL_UNSUPPORTED_BOARDS = frozenset({0x68, 0x6B, 0x6C, 0x03, 0x07})


def ub_optical_supported(chip: Chip) -> bool:
    board = chip.static.main_board_id.value if chip.static.main_board_id.is_ok else None
    return supports(chip, UB_FAMILIES) and board not in UB_OPTICAL_UNSUPPORTED_BOARDS


def ub_optical_families(read: list[tuple[list[str], list[UbPortOptical]]]) -> Iterator[GaugeMetricFamily]:
    """The 950's per-port optical families: the index count of every port read, a lane's power where
    it was read, as promUpdateOpticalInfoNew."""
    for name, (key, doc) in UB_OPTICAL_FAMILIES.items():
        family = GaugeMetricFamily(name, doc, labels=UB_LABELS)
        for labels, ports in read:
            for optical in ports:
                if key in optical.values:
                    family.add_metric([*labels, str(optical.udie), str(optical.port)], optical.values[key])
        yield family


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


def sample_families(snap: Snapshot, samples: Samples, holders: Holders | None = None) -> Iterator[GaugeMetricFamily]:
    """The slow sources' families, for the chips that answer now (a silent chip keeps its health
    series only, as in the poll's families)."""
    answering = [chip for chip in snap.chips if chip.state is ChipState.OK and chip.dynamic is not None]
    telemetry = [
        (chip, _labels(chip, holders), samples.chips[chip.logic_id])
        for chip in answering
        if chip.logic_id in samples.chips
    ]
    for name, doc, value_of in TELEMETRY_FAMILIES:
        family = GaugeMetricFamily(name, doc, labels=LABELS)
        only_on = TELEMETRY_ONLY_ON.get(name, _ALL)
        for chip, labels, sample in telemetry:
            value = value_of(sample)
            if value is not None and supports(chip, only_on):
                family.add_metric(labels, value)
        yield family
    for name, doc, only_on, value_of in EXTRA_FAMILIES:
        family = GaugeMetricFamily(name, doc, labels=LABELS)
        for chip, labels, sample in telemetry:
            value = value_of(sample)
            if value is not None and supports(chip, only_on):
                family.add_metric(labels, value)
        yield family
    serial = GaugeMetricFamily(
        "npu_chip_info_serial_number", "the npu serial number information", labels=[*LABELS, "serial_number"]
    )
    for _, labels, sample in telemetry:
        if sample.serial_number is not None:
            serial.add_metric([*labels, sample.serial_number], 1)
    yield serial
    yield from hccs_families(
        [(chip, labels, sample) for chip, labels, sample in telemetry if supports(chip, HCCS_FAMILIES)]
    )
    pcie = {
        kind: GaugeMetricFamily(name, doc, labels=[*LABELS, "pcie_bw_type"])
        for kind, (name, doc) in PCIE_FAMILIES.items()
    }
    for chip, labels, sample in telemetry:
        if sample.pcie is None or not pcie_supported(chip):
            continue
        for kind in PCIE_KINDS:
            for bw_type, value in zip(PCIE_BW_TYPES, sample.pcie.rates[kind], strict=True):
                pcie[kind].add_metric([*labels, bw_type], value)
    yield from pcie.values()
    ub_links = ub_link_families(
        [
            (_labels(chip, holders), samples.ub_link[chip.logic_id])
            for chip in answering
            if chip.logic_id in samples.ub_link and ub_link_supported(chip)
        ]
    )
    for table, by_logic in ((OPTICAL_FAMILIES, samples.optical), (LINK_FAMILIES, samples.link)):
        read = [(_labels(chip, holders), by_logic[chip.logic_id]) for chip in answering if chip.logic_id in by_logic]
        for name, (key, doc) in table.items():
            family = GaugeMetricFamily(name, doc, labels=LABELS)
            for labels, values in read:
                if key in values:  # npu-exporter shows no value it could not read
                    family.add_metric(labels, values[key])
            if name in ub_links:  # one family of the name: the 950's per-port one on a 950 node
                ub = ub_links.pop(name)
                family = ub if ub.samples and not family.samples else family
            yield family
    yield from ub_links.values()
    yield from ub_optical_families(
        [
            (_labels(chip, holders), samples.ub_optical[chip.logic_id])
            for chip in answering
            if chip.logic_id in samples.ub_optical and ub_optical_supported(chip)
        ]
    )
    yield from ub_families(
        [
            (_labels(chip, holders), samples.ub[chip.logic_id])
            for chip in answering
            if chip.logic_id in samples.ub and supports(chip, UB_FAMILIES)
        ]
    )
    net = [(_labels(chip, holders), samples.net[chip.logic_id]) for chip in answering if chip.logic_id in samples.net]
    for name, key in NET_FAMILIES.items():
        family = GaugeMetricFamily(name, f"npu interface receive {key.replace('_', '-')}", labels=LABELS)
        for labels, stats in net:
            value = stats.get(key, 0)  # a counter the tool did not print: 0, as the reference
            if value is not None:  # None: read outside the counter's range, dropped
                family.add_metric(labels, value)
        yield family


def hccs_families(read: list[tuple[Chip, list[str], ChipTelemetry]]) -> Iterator[GaugeMetricFamily]:
    """Ports from the chip's first (1, or 2 on an A9000 A3 super pod) to 7; a read that failed shows
    -1 in each of its families, as npu-exporter's buildFailedHccsInfo."""
    families: dict[str, GaugeMetricFamily] = {}
    for prefix, doc, _ in HCCS_PORT_FAMILIES:
        for port in range(HCCS_PORTS):
            families[f"{prefix}{port}"] = GaugeMetricFamily(f"{prefix}{port}", f"{doc} {port}", labels=LABELS)
    for name, doc, _ in HCCS_TOTAL_FAMILIES:
        families[name] = GaugeMetricFamily(name, doc, labels=LABELS)
    for chip, labels, sample in read:
        first = hccs_first_port(chip)
        for prefix, _, field in HCCS_PORT_FAMILIES:
            source: object = sample.hccs if field.endswith("_cnt") else sample.hccs_bandwidth
            values = getattr(source, field) if source is not None else (FAILED_VALUE,) * HCCS_PORTS
            for port in range(first, HCCS_PORTS):
                families[f"{prefix}{port}"].add_metric(labels, values[port])
        for name, _, field in HCCS_TOTAL_FAMILIES:
            bw = sample.hccs_bandwidth
            families[name].add_metric(labels, getattr(bw, field) if bw is not None else FAILED_VALUE)
    yield from families.values()


# ---------------------------------------------------------------------- the 310P's vNPUs

# npu-exporter's VnpuCollector (collector_for_vnpu.go): its CardLabel with `vdie_id` and
# `pcie_bus_info` replaced by the vNPU's id and AI cores, and `is_virtual` after the holder.
VNPU_LABELS = ["id", "model_name", "v_dev_id", "aicore_count", "namespace", "pod_name", "container_name", "is_virtual"]
# (name, help, the activity's value), in the order VnpuCollector describes them.
VNPU_POD_FAMILIES: tuple[tuple[str, str, Callable[[VnpuActivity], float]], ...] = (
    ("vnpu_pod_aicore_utilization", "the vnpu aicore utilization rate, unit is '%'", lambda a: a.aicore_pct),
    ("vnpu_pod_total_memory", "the vnpu total memory on pod, unit is 'KB'", lambda a: a.total_memory),
    ("vnpu_pod_used_memory", "the vnpu used memory on pod, unit is 'KB'", lambda a: a.used_memory),
)


def vnpu_labels(chip: Chip, activity: VnpuActivity, holder: ContainerHolder) -> list[str]:
    """npu-exporter's getPodDisplayInfo: the chip's id and model name, the vNPU's id, its AI cores
    with two decimals, the holder, and `true` (every vNPU the library describes is virtual)."""
    chip_id, model_name, *_ = _chip_labels(chip)
    return [
        chip_id,
        model_name,
        str(activity.vdev_id),
        f"{activity.aicore:.2f}",
        holder.namespace,
        holder.pod,
        holder.container,
        "true",
    ]


def vnpu_families(snap: Snapshot, samples: Samples, holders: Holders) -> Iterator[GaugeMetricFamily]:
    """One series per family for each vNPU of an answering 310P chip whose activity was read, with a
    valid vdev id and exactly one container holding it (VnpuCollector.UpdatePrometheus): a vNPU that
    nobody, or several, hold has none."""
    read = [
        (vnpu_labels(chip, activity, held[0]), activity)
        for chip in snap.chips
        if chip.state is ChipState.OK and chip.dynamic is not None and supports(chip, VNPU_FAMILIES)
        and chip.logic_id in samples.chips
        for activity in samples.chips[chip.logic_id].vnpus
        if valid_vdev_id(activity.vdev_id) and len(held := holders.get(activity.vdev_id, ())) == 1
    ]  # fmt: skip
    for name, doc, value_of in VNPU_POD_FAMILIES:
        family = GaugeMetricFamily(name, doc, labels=VNPU_LABELS)
        for labels, activity in read:
            family.add_metric(labels, value_of(activity))
        yield family
