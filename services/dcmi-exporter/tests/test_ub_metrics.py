"""The 950's UB port families (npu-exporter's UbCollector, collector_for_ub.go): how a port's
`hccn_tool -g -stat` output becomes counters, which ports are read, and how the counters render.

The tables port collector_for_ub_test.go: TestGetUBStatInfo (a UBoE port, a UB port, a failed
read), TestCollectUBInfo (one read per port of the table), TestIsSupportedUB (the 950 only) and
TestUpdatePrometheusUB (a series per port and counter, with udie and port); the counter parsing is
hccn_tool.go's GetIntDataFromStr.
"""

from __future__ import annotations

import stat
from pathlib import Path

import pytest
from ascend_common.clock import SystemClock
from ascend_common.schemas.exporter import Chip, NodeInfo, SubscriptionState
from ascend_common.schemas.reading import Reading
from dcmi_exporter.backends.base import UB_COMMON_KEYS, UBOE_KEYS, UbPortStat, ub_counter_value, ub_port_stat
from dcmi_exporter.backends.dcmi.hccn import HccnNetStats, HccnTool
from dcmi_exporter.backends.sim.backend import SimBackend
from dcmi_exporter.metrics import UB_LABELS, ChipCollector, ub_families, ub_family_names
from dcmi_exporter.snapshot import Snapshot
from dcmi_exporter.telemetry_task import Samples

from tests.support.chips import exporter_chip

SEPARATOR = "+--------+--------+--------+----------+-------------+------------+"
HEADER = "| UdieID | PortID | Speed  | PortType | Link Status | Media Type |"


def a950(logic: int = 0) -> Chip:
    return exporter_chip(logic, logic, name="Ascend950DT", board=0x20, card_id=-1)


# ------------------------------------------------------------------- GetIntDataFromStr


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("123", 123),
        ("0", 0),
        ("-5", -5),  # Atoi takes a sign
        ("", -1),
        (None, -1),  # a key the tool did not print
        ("NA", -1),
        ("not supported", -1),
        ("12 pkts", -1),  # not an integer
        (" 12", -1),  # Atoi takes no space (the parser trims the value first)
        ("99999999999999999999", -1),  # past int64
    ],
)
def test_get_int_data_from_str(text: str | None, value: int) -> None:
    assert ub_counter_value(text) == value


# ------------------------------------------------------------------- TestGetUBStatInfo


@pytest.mark.parametrize(
    ("is_uboe", "uboe_counters"),
    [
        ("1", True),  # success, a UBoE port: the UBoE extensions too
        ("0", False),  # success, not a UBoE port: no UBoE extensions
        (None, False),  # no is_uboe_port line
        ("yes", False),  # not a number
    ],
)
def test_get_ub_stat_info(is_uboe: str | None, uboe_counters: bool) -> None:
    info = {"rx_busi_flit_num": "42", "crc_error_sum": "NA", "core_mib_rxpfcpkts": "7"}
    if is_uboe is not None:
        info["is_uboe_port"] = is_uboe
    got = ub_port_stat(1, 4, info)
    assert (got.udie, got.port) == (1, 4)
    assert set(got.counters) == set(UB_COMMON_KEYS) | (set(UBOE_KEYS) if uboe_counters else set())
    assert got.counters["rx_busi_flit_num"] == 42
    assert got.counters["crc_error_sum"] == -1
    assert got.counters["tx_busi_flit_num"] == -1  # not printed
    if uboe_counters:
        assert got.counters["core_mib_rxpfcpkts"] == 7
        assert got.counters["core_mib_txpfcpkts"] == -1


def port_tool(tmp_path: Path, rows: list[str], fail_port: int | None = None) -> tuple[Path, Path]:
    """A hccn_tool whose -dev_info lists `rows` and whose -stat answers per port (the port id in the
    flit counter), failing for `fail_port`; every run's arguments go to the returned log."""
    calls = tmp_path / "calls"
    table = tmp_path / "table"
    table.write_text("\n".join([SEPARATOR, HEADER, SEPARATOR, *rows, SEPARATOR]) + "\n")
    fail = f'[ "$8" = {fail_port} ] && exit 1\n' if fail_port is not None else ""
    path = tmp_path / "hccn_tool"
    path.write_text(
        "#!/bin/sh\n"
        f'echo "$*" >> {calls}\n'
        f'case "$*" in *-dev_info*) cat {table}; exit 0 ;; esac\n'
        f"{fail}"
        'echo "rx_busi_flit_num : $8"\n'
        'echo "is_uboe_port : $( [ "$8" = 8 ] && echo 1 || echo 0)"\n'
    )
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path, calls


async def test_get_ub_stat_info_failure_leaves_the_port_out(tmp_path: Path) -> None:
    """testGetUBStatCase3: a port whose read fails has no counters (the others keep theirs)."""
    rows = ["| 0 | 1 | 200 | UB | UP | Optical |", "| 0 | 2 | 200 | UB | UP | Optical |"]
    path, _ = port_tool(tmp_path, rows, fail_port=1)
    got = await HccnNetStats(HccnTool(path)).ub_stats(a950())
    assert got is not None
    assert [(s.udie, s.port) for s in got] == [(0, 2)]


# ------------------------------------------------------------------- TestCollectUBInfo


async def test_collect_ub_info_reads_each_port_of_udie_0_then_1(tmp_path: Path) -> None:
    """One -stat run per port of the table, udie 0 then 1, ports in order; a udie other than 0 and 1
    is not asked; a UBoE port has the UBoE counters."""
    rows = [
        "| 1 | 8 | 200 | ETH | UP | Optical |",
        "| 0 | 5 | 200 | UB | UP | Optical |",
        "| 0 | 3 | 200 | UB | DOWN | Optical |",
        "| 2 | 0 | 200 | UB | UP | Optical |",
    ]
    path, calls = port_tool(tmp_path, rows)
    got = await HccnNetStats(HccnTool(path)).ub_stats(a950(3))
    assert got is not None
    assert [(s.udie, s.port) for s in got] == [(0, 3), (0, 5), (1, 8)]
    assert [s.counters["rx_busi_flit_num"] for s in got] == [3, 5, 8]
    assert ["core_mib_rxpausepkts" in s.counters for s in got] == [False, False, True]
    assert calls.read_text().splitlines() == [
        "-g -dev_info -i 3",
        "-g -stat -i 3 -u 0 -p 3",
        "-g -stat -i 3 -u 0 -p 5",
        "-g -stat -i 3 -u 1 -p 8",
    ]


# ------------------------------------------------------------------- TestIsSupportedUB


async def test_is_supported_ub_the_950_only(tmp_path: Path) -> None:
    path, calls = port_tool(tmp_path, ["| 0 | 1 | 200 | UB | UP | Optical |"])
    probe = HccnNetStats(HccnTool(path))
    assert await probe.ub_stats(exporter_chip(0, 0)) is None  # a 910B: no tool run
    assert await probe.ub_stats(exporter_chip(0, 0, name="310P3")) is None
    assert not calls.exists()
    assert await HccnNetStats(HccnTool(tmp_path / "missing")).ub_stats(a950()) is None  # no port table


async def test_no_port_answering_gives_no_counters(tmp_path: Path) -> None:
    path, _ = port_tool(tmp_path, ["| 0 | 1 | 200 | UB | UP | Optical |"], fail_port=1)
    assert await HccnNetStats(HccnTool(path)).ub_stats(a950()) is None


# ------------------------------------------------------------------- TestUpdatePrometheusUB


def test_update_prometheus_ub_a_series_per_port_and_counter() -> None:
    card = ["0", "Ascend950DT", "", "", "ns", "pod", "ctr"]
    ub = UbPortStat(0, 3, {key: 1 for key in UB_COMMON_KEYS})
    uboe = UbPortStat(1, 8, {key: 2 for key in (*UB_COMMON_KEYS, *UBOE_KEYS)})
    families = {f.name: f for f in ub_families([(card, [ub, uboe])])}
    assert list(families) == ub_family_names()
    for key in UB_COMMON_KEYS:
        samples = families[f"npu_chip_info_{key}"].samples
        assert [(s.labels["udie"], s.labels["port"], s.value) for s in samples] == [("0", "3", 1), ("1", "8", 2)]
    for key in UBOE_KEYS:
        [only] = families[f"npu_chip_info_{key}"].samples
        assert only.labels == dict(zip(UB_LABELS, [*card, "1", "8"], strict=True)) and only.value == 2
    assert "npu_chip_info_crc_error_sum" in families
    assert families["npu_chip_info_crc_error_sum"].documentation == "number of crc check errors on ub port"


def node() -> NodeInfo:
    return NodeInfo(
        backend="dcmi", profile=None, run_id="r", dcmi_version=Reading[str].ok("26.0"), card_count=0,
        chip_count=2, chips_by_state={}, subscription=SubscriptionState.LIVE, poll_period_s=1.0, started_at=0.0,
        updated_at=0.0, last_event_id=None, ready=True,
    )  # fmt: skip


def test_ub_samples_render_for_the_950_only() -> None:
    """A sample kept for another chip type (no such read, but the rule is the collector's) shows nothing."""
    chips = {0: a950(0), 1: exporter_chip(1, 1)}
    stat = [UbPortStat(0, 0, {"crc_error_sum": 4})]
    snap = Snapshot.build(node(), chips)
    collector = ChipCollector(lambda: snap, dict, lambda: Samples(ub={0: stat, 1: stat}))
    families = {f.name: f for f in collector.collect()}
    assert [s.labels["id"] for s in families["npu_chip_info_crc_error_sum"].samples] == ["0"]


# ------------------------------------------------------------------- the simulator


@pytest.mark.parametrize(
    ("profile", "uboe_ports"),
    [("a5-8", [(0, 8), (1, 8)]), ("a5-superpod-8", []), ("a5-atlas350-4", [])],
)
def test_the_simulators_ub_ports(profile: str, uboe_ports: list[tuple[int, int]]) -> None:
    backend = SimBackend(profile, clock=SystemClock())
    [first, *_] = backend.discover()
    got = backend.ub_stats(first.logic_id)
    assert got is not None
    ub = [(udie, port) for udie in (0, 1) for port in range(4)]
    assert [(s.udie, s.port) for s in got] == sorted(ub + uboe_ports)
    assert [(s.udie, s.port) for s in got if "core_mib_rxpfcpkts" in s.counters] == uboe_ports
    assert all(s.counters["crc_error_sum"] == 0 for s in got)
    other = SimBackend("910b-8", clock=SystemClock())
    [first, *_] = other.discover()
    assert other.ub_stats(first.logic_id) is None
