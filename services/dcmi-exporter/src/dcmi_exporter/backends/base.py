"""The interface every chip backend implements.

Methods are synchronous and may block (a real library call can hang after a card drops):
the exporter calls them only from its call pool, with a timeout, and never holds a lock
across one. Errors are raised as `DcmiError` subclasses; per-field failures are returned as
`Reading.error(code)` inside the result so one unsupported field does not hide the others.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import NamedTuple, Protocol

from ascend_common.chips import ChipAddress
from ascend_common.goconv import atoi
from ascend_common.schemas.exporter import (
    Assertion,
    Chip,
    ChipDynamic,
    ChipStatic,
    ResetChannel,
    SwitchFaultData,
    UbPorts,
    Vnpu,
)
from ascend_common.schemas.reading import Reading


@dataclass(frozen=True)
class RawFaultEvent:
    """A fault event as the library's subscription callback delivers it."""

    logic_id: int
    code: str  # upper-case hex, no 0x
    severity: int
    assertion: Assertion
    raised_at_ms: int
    name: str = ""


@dataclass(frozen=True)
class RawSwitchEvent:
    """A switch fault event of an A3 node (sim only for now)."""

    logic_id: int | None
    data: SwitchFaultData


EventSink = Callable[[RawFaultEvent | RawSwitchEvent], None]


class Backend(Protocol):
    kind: str  # "sim" or "dcmi"
    profile: str | None

    def init(self) -> None:
        """Initialise the library; raises DcmiError when it cannot be used at all."""

    def version(self) -> Reading[str]: ...

    def discover(self) -> list[ChipAddress]:
        """Every chip on the node (card list, devices per card, logic and phy ids)."""

    def read_static(self, chip: ChipAddress) -> ChipStatic: ...

    def read_dynamic(self, chip: ChipAddress) -> ChipDynamic:
        """Health, codes, telemetry. Raises CardDropped when the chip answers "not ready"."""

    def subscribe(self, sink: EventSink) -> bool:
        """Register the fault-event callback; False when the library has no subscription.

        The sink may be called from any thread (the driver's) and must not block.
        """

    def outband_supported(self, chip: ChipAddress) -> bool: ...

    def reset(self, chip: ChipAddress, channel: ResetChannel) -> None:
        """Start a reset of one chip; completion is observed through `boot_status`."""

    def boot_status(self, chip: ChipAddress) -> int: ...

    def create_vnpu(self, chip: ChipAddress, template: str, vdev_id: int | None, vfg_id: int | None) -> Vnpu: ...

    def destroy_vnpu(self, chip: ChipAddress, vdev_id: int) -> None: ...

    def close(self) -> None: ...


class HangProbe(Protocol):
    """What hung-job detection reads besides the snapshot: network traffic and host CPU time.
    Async, and never in the DCMI call pool: the dcmi backend runs a tool and reads /proc."""

    async def traffic(self, chip: Chip) -> tuple[int, int] | None:
        """(tx, rx) counters of the chip's network; None when they cannot be read this round."""

    async def cpu_times(self, pids: Sequence[int]) -> CpuTimes:
        """CPU seconds (user + system) used so far by the host processes `pids`, and their start times."""


class CpuTimes(NamedTuple):
    seconds: int
    # Each pid's start time (any unit, compared only with itself), None when unknown: a pid whose
    # start time changed is another process (the kernel reused the pid).
    starts: tuple[int | None, ...]


class UbPortsProbe(Protocol):
    """The 950's ports that are down (`hccn_tool -g -dev_info` / `-port_info` on the dcmi backend).
    Async, outside the DCMI call pool, as HangProbe."""

    async def ub_ports(self, chip: Chip) -> UbPorts:
        """Raises `HccnError` (dcmi) or ValueError when the state cannot be read."""


# ---------------------------------------------------------------------- slow telemetry (metrics)

PCIE_KINDS = ("tx_p", "tx_np", "tx_cpl", "rx_p", "rx_np", "rx_cpl")  # dcmi_pcie_link_bandwidth_info's arrays


@dataclass(frozen=True)
class HbmEcc:
    """`dcmi_get_device_ecc_info(HBM)`, as npu-exporter's ECCInfo (its two `next_isolated` counters unused)."""

    enable_flag: int
    single_bit_error_cnt: int
    double_bit_error_cnt: int
    total_single_bit_error_cnt: int
    total_double_bit_error_cnt: int
    single_bit_isolated_pages_cnt: int
    double_bit_isolated_pages_cnt: int


@dataclass(frozen=True)
class PcieBandwidth:
    """`dcmi_get_pcie_link_bandwidth_info`: per PCIE_KINDS entry, (min, max, avg) in MB/ms."""

    rates: dict[str, tuple[int, int, int]]


HCCS_PORTS = 8  # npu-exporter's MaxHccsNum: the ports it reads of the library's 16


@dataclass(frozen=True)
class HccsStats:
    """HCCS counters per port (index 0..HCCS_PORTS-1): `dcmi_get_device_info(HCCS, 5)` (u64), or
    sub-command 3 (u32) on a driver without 5, as npu-exporter's PreCollect picks."""

    tx_cnt: tuple[int, ...]
    rx_cnt: tuple[int, ...]
    crc_err_cnt: tuple[int, ...]


@dataclass(frozen=True)
class HccsBandwidth:
    """`dcmi_get_hccs_link_bandwidth_info`: the sampling interval (ms), the totals and per-port rates."""

    profiling_time_ms: int
    total_tx: float
    total_rx: float
    tx: tuple[float, ...]
    rx: tuple[float, ...]


@dataclass(frozen=True)
class Memory:
    """`dcmi_get_device_memory_info_v3` (the DDR of a chip without HBM), in MB."""

    total_mb: int
    available_mb: int


# The 950's UB port counters as `hccn_tool -g -stat -i <logic> -u <udie> -p <port>` prints them, by
# the tool's key names (the reference's UBCommonStats, then its UBOEExtensions): collector_for_ub.go.
UB_COMMON_KEYS = (
    "ub_ipv4_pkt_cnt_rx", "ub_ipv6_pkt_cnt_rx", "unic_ipv4_pkt_cnt_rx", "unic_ipv6_pkt_cnt_rx",
    "ub_compact_pkt_cnt_rx", "ub_umoc_ctph_cnt_rx", "ub_umoc_ntph_cnt_rx", "ub_mem_pkt_cnt_rx",
    "unknown_pkt_cnt_rx", "drop_ind_cnt_rx", "err_ind_cnt_rx", "to_host_pkt_cnt_rx", "to_imp_pkt_cnt_rx",
    "to_mar_pkt_cnt_rx", "to_link_pkt_cnt_rx", "to_noc_pkt_cnt_rx", "route_err_cnt_rx", "out_err_cnt_rx",
    "length_err_cnt_rx", "rx_busi_flit_num", "rx_send_ack_flit",
    "ub_ipv4_pkt_cnt_tx", "ub_ipv6_pkt_cnt_tx", "unic_ipv4_pkt_cnt_tx", "unic_ipv6_pkt_cnt_tx",
    "ub_compact_pkt_cnt_tx", "ub_umoc_ctph_cnt_tx", "ub_umoc_ntph_cnt_tx", "ub_mem_pkt_cnt_tx",
    "unknown_pkt_cnt_tx", "drop_ind_cnt_tx", "err_ind_cnt_tx", "lpbk_ind_cnt_tx", "out_err_cnt_tx",
    "length_err_cnt_tx", "tx_busi_flit_num", "tx_recv_ack_flit",
    "retry_req_sum", "retry_ack_sum", "crc_error_sum",
)  # fmt: skip
UBOE_KEYS = (
    "core_mib_rxpausepkts", "core_mib_txpausepkts", "core_mib_rxpfcpkts", "core_mib_txpfcpkts",
    "core_mib_rxbadpkts", "core_mib_txbadpkts", "core_mib_rxbadoctets", "core_mib_txbadoctets",
)  # fmt: skip
UBOE_PORT_KEY = "is_uboe_port"  # "1" on a UBoE port
UB_UNREADABLE = -1  # a counter the tool printed as NA, "not supported", nothing or not a number


@dataclass(frozen=True)
class UbPortStat:
    """One UB port's counters: every UB_COMMON_KEYS entry, and the UBOE_KEYS ones on a UBoE port
    only; a counter the tool did not print as a number is UB_UNREADABLE, as the reference's."""

    udie: int
    port: int
    counters: Mapping[str, int]


@dataclass(frozen=True)
class UbPortLink:
    """One 950 port's `link_status` (1 UP, 0 another state, -1 unreadable), `bandwidth_tx` /
    `bandwidth_rx` (MB/s) and `link_speed` (the tool's G), each only when read."""

    udie: int
    port: int
    values: Mapping[str, float]


# A 950 port's optical module as `hccn_tool -g -optical -u <udie> -p <port>`'s second table gives
# it (collector_for_optical.go's Npu keys): the lanes' powers, and how many optical_ rows it has.
OPTICAL_LANE_KEYS = tuple(
    (f"{way}_power_{lane}", f"{way.capitalize()}Power Lane{lane}(dBm)") for way in ("tx", "rx") for lane in range(4)
)
OPTICAL_INDEX_KEY = "optical_index"


@dataclass(frozen=True)
class UbPortOptical:
    """One 950 port's `optical_index_num` and the lane powers (`tx_power_0` .. `rx_power_3`) it could read."""

    udie: int
    port: int
    values: Mapping[str, float]


def optical_port_values(info: Mapping[str, str]) -> dict[str, float]:
    """The reference's storeOpticalNpuInfos as it shows: the index count always (-1 when it is not an
    integer); a lane's power only when it reads as a number other than -1 (its validateNum; empty,
    NA, "not supported" or another text reads -1)."""
    index = atoi(info.get(OPTICAL_INDEX_KEY, "")) if info.get(OPTICAL_INDEX_KEY) else None
    out: dict[str, float] = {"optical_index_num": float(index) if index is not None else -1.0}
    for name, key in OPTICAL_LANE_KEYS:
        text = info.get(key, "")
        if not text or "NA" in text or "not supported" in text:
            continue
        try:
            value = float(text)
        except ValueError:
            continue
        if value != -1 and value == value:  # NaN is no reading either
            out[name] = value
    return out


def ub_counter_value(text: str | None) -> int:
    """The reference's GetIntDataFromStr: NA, "not supported", missing or not a Go integer is -1."""
    if not text or "NA" in text or "not supported" in text:
        return UB_UNREADABLE
    value = atoi(text)
    return UB_UNREADABLE if value is None else value


def ub_port_stat(udie: int, port: int, info: Mapping[str, str]) -> UbPortStat:
    """A port's `-g -stat` output (`key : value` lines, trimmed) as the reference's getUBStatInfo
    keeps it: the UBoE counters only when `is_uboe_port` reads 1."""
    keys = UB_COMMON_KEYS + UBOE_KEYS if atoi(info.get(UBOE_PORT_KEY, "")) == 1 else UB_COMMON_KEYS
    return UbPortStat(udie, port, {key: ub_counter_value(info.get(key)) for key in keys})


# The vdev ids a vNPU may have (the reference's MinVDevID, MaxVDevID): npu-exporter neither queries
# nor serves a vNPU outside them.
VDEV_ID_MIN = 100
VDEV_ID_END = 1124


def valid_vdev_id(vdev_id: int) -> bool:
    return VDEV_ID_MIN <= vdev_id < VDEV_ID_END


@dataclass(frozen=True)
class VnpuActivity:
    """One vNPU's use as npu-exporter's VDevActivityInfo holds it: `dcmi_get_device_info(VDEV_MNG,
    GET_VDEV_ACTIVITY)`, with the AI cores of the vNPU's resource query (`GET_VDEV_RESOURCE`)."""

    vdev_id: int
    aicore: float  # AI cores the vNPU has
    aicore_pct: int
    total_memory: int  # the library's unit, as npu-exporter serves it (its help text says KB)
    used_memory: int  # total less free


@dataclass(frozen=True)
class ChipTelemetry:
    """What npu-exporter reads besides our poll, one sample of one chip; None: the library did not
    answer that field (unsupported on this chip, or failed this round)."""

    voltage_v: float | None = None
    aicore_freq_mhz: int | None = None
    vector_pct: int | None = None
    cube_pct: int | None = None
    overall_pct: int | None = None
    hbm_ecc: HbmEcc | None = None
    pcie: PcieBandwidth | None = None
    hccs: HccsStats | None = None
    hccs_bandwidth: HccsBandwidth | None = None
    sio_crc_err: tuple[int, int] | None = None  # (tx, rx) between the dies: dcmi_get_device_info(SIO, 0)
    memory: Memory | None = None
    # The card's elabel serial number (dcmi_get_card_elabel_v2); "NA" when the read failed, as the
    # reference writes it.
    serial_number: str | None = None
    # The activity of each of the chip's vNPUs that could be read, in vdev-id order (a vNPU whose
    # query failed is left out).
    vnpus: tuple[VnpuActivity, ...] = ()


class NetStatsProbe(Protocol):
    """The RoCE / MAC counters of a chip (`hccn_tool -i <phy> -stat -g` on the dcmi backend), by
    the tool's key names. Async, outside the DCMI call pool, as HangProbe."""

    async def net_stats(self, chip: Chip) -> Mapping[str, int | None] | None:
        """None when the chip has no such counters (a family without RoCE) or they cannot be read; a
        counter None was read outside its type's range and is dropped (a missing one reads as 0)."""

    async def optical(self, chip: Chip) -> dict[str, float] | None:
        """The optical module (`hccn_tool -i <phy> -optical -g`): `present` (1 / 0) and the readable
        powers, Vcc and temperature by the tool's key names; None as for net_stats."""

    async def link(self, chip: Chip) -> dict[str, float] | None:
        """`link_status` (1 UP, 0 another state, -1 unreadable), `link_speed` (Mb/s), `link_up_num`,
        `bandwidth_tx` / `bandwidth_rx` (MB/s), each only when read; None as for net_stats."""

    async def ub_links(self, chip: Chip) -> list[UbPortLink] | None:
        """The 950's per-port link state, bandwidth and speed (`hccn_tool -g -link` / `-bandwidth` /
        `-speed` with `-u <udie> -p <port>`), ports as ub_stats; None on another family, on a main
        board npu-exporter's NetworkCollector skips, or when the port table cannot be read."""

    async def ub_optical(self, chip: Chip) -> list[UbPortOptical] | None:
        """The 950's per-port optical modules (`hccn_tool -g -optical -i <logic> -u <udie> -p <port>`),
        ports as ub_stats, a port whose read fails left out; None on another family, on a main board
        npu-exporter's OpticalCollector skips, or when the port table cannot be read."""

    async def ub_stats(self, chip: Chip) -> list[UbPortStat] | None:
        """The 950's UB port counters (`hccn_tool -g -stat -i <logic> -u <udie> -p <port>`), a port of
        udie 0 then 1 each, in port order; a port that cannot be read is left out; None on another
        family, or when the port table cannot be read."""


class RoceLinkProbe(Protocol):
    """The 910's RoCE link state (`hccn_tool -i <phy> -link -g` on the dcmi backend). Async, outside the
    DCMI call pool, as HangProbe."""

    async def link_status(self, chip: Chip) -> str:
        """ "UP", "DOWN" or whatever else the tool says; raises `HccnError` (dcmi) or ValueError when
        the state cannot be read."""
