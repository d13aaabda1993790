"""The 950's per-port families: UB counters (npu-exporter's UbCollector, collector_for_ub.go) and
link state, bandwidth and speed (its NetworkCollector on the 950, collector_for_network.go): how a port's
`hccn_tool -g -stat` output becomes counters, which ports are read, and how the counters render.

The tables port collector_for_ub_test.go: TestGetUBStatInfo (a UBoE port, a UB port, a failed
read), TestCollectUBInfo (one read per port of the table), TestIsSupportedUB (the 950 only) and
TestUpdatePrometheusUB (a series per port and counter, with udie and port); the counter parsing is
hccn_tool.go's GetIntDataFromStr. The network tables port collector_for_network_test.go:
TestCollectNetworkNpuInfo, TestNetworkCollectorIsSupported(2) and TestPromUpdateNetInfoNew, with
hccn_tool.go's getSpeedFromStrA5 and getUboeBandwidth; the optical ones
collector_for_optical_test.go: TestCollectOpticalNpuInfo, TestPromUpdateOpticalInfo(New), with
storeOpticalNpuInfos and hccn_tool.go's parseSecondTableColumns.
"""

from __future__ import annotations

import stat
from pathlib import Path

import pytest
from ascend_common.clock import SystemClock
from ascend_common.schemas.exporter import Chip, NodeInfo, SubscriptionState
from ascend_common.schemas.reading import Reading
from dcmi_exporter.backends.base import (
    UB_COMMON_KEYS,
    UBOE_KEYS,
    UbPortLink,
    UbPortOptical,
    UbPortStat,
    optical_port_values,
    ub_counter_value,
    ub_port_stat,
)
from dcmi_exporter.backends.dcmi.hccn import (
    HccnError,
    HccnNetStats,
    HccnTool,
    parse_optical_a5,
    parse_speed_a5,
    parse_uboe_bandwidth,
)
from dcmi_exporter.backends.sim.backend import SimBackend
from dcmi_exporter.metrics.families import (
    UB_LABELS,
    ChipCollector,
    ub_families,
    ub_family_names,
    ub_link_families,
    ub_optical_families,
)
from dcmi_exporter.node.snapshot import Snapshot
from dcmi_exporter.tasks.telemetry import Samples

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


# ------------------------------------------------------------------- the 950's per-port network


SPEED_TABLE = """+--------+--------+-------+
| UdieID | PortID | Speed |
+--------+--------+-------+
"""


@pytest.mark.parametrize(
    ("text", "speed"),
    [
        ("| 0 | 4 | x | 400 G |\n", 400),  # the fourth column, "<speed> <unit>"
        ("+---+\n| 0 | 4 | x | 200 G |\n+---+\n", 200),  # separators skipped
        ("| 0 | 4 | x | NA |\n", None),  # a port that is down
        ("| 0 | 4 | x | 400G |\n", None),  # not two parts
        ("| 0 | 4 |\n", None),  # too few columns
        ("", None),
    ],
)
def test_get_speed_from_str_a5(text: str, speed: int | None) -> None:
    if speed is None:
        with pytest.raises(HccnError):
            parse_speed_a5(text)
    else:
        assert parse_speed_a5(text) == speed


UBOE_BANDWIDTH = """[dev_name: ethc0] get bandwidth result
Bandwidth TX: 1.50 MB/sec
Bandwidth RX: 2.50 MB/sec
[dev_name: ethc1] get bandwidth result
Bandwidth TX: 3.50 MB/sec
Bandwidth RX: 4.50 MB/sec
"""


@pytest.mark.parametrize(
    ("text", "port", "want"),
    [
        (UBOE_BANDWIDTH, 8, (1.5, 2.5)),  # an even port: the first group
        (UBOE_BANDWIDTH, 9, (3.5, 4.5)),  # an odd one: the second
        (UBOE_BANDWIDTH.split("[dev_name: ethc1]")[0], 9, (None, None)),  # no second group
        ("[dev_name: ethc0]\nBandwidth TX: 1.00 MB/sec\n", 0, (None, None)),  # RX missing
    ],
)
def test_get_uboe_bandwidth(text: str, port: int, want: tuple[float | None, float | None]) -> None:
    assert parse_uboe_bandwidth(text, port) == want


def network_tool(tmp_path: Path, rows: list[str]) -> tuple[Path, Path]:
    """A hccn_tool answering -dev_info with `rows`, -link UP except on port 3 (DOWN) and failing on
    port 6, -bandwidth with the port id (the bond with 7 / 8), -speed 400 G (NA on port 3)."""
    calls = tmp_path / "calls"
    table = tmp_path / "table"
    table.write_text("\n".join([SEPARATOR, HEADER, SEPARATOR, *rows, SEPARATOR]) + "\n")
    path = tmp_path / "hccn_tool"
    path.write_text(
        "#!/bin/sh\n"
        f'echo "$*" >> {calls}\n'
        'case "$*" in\n'
        f"  *-dev_info*) cat {table} ;;\n"
        "  *-link*-p\\ 6) exit 1 ;;\n"
        '  *-link*-p\\ 3) echo "link status: DOWN" ;;\n'
        '  *-link*) echo "link status: UP" ;;\n'
        '  *-bandwidth*-d*) printf "[dev_name: a]\\nBandwidth TX: 7.00 MB/sec\\nBandwidth RX: 8.00 MB/sec\\n" ;;\n'
        '  *-bandwidth*) echo "Bandwidth TX: $8.00 MB/sec"; echo "Bandwidth RX: $8.50 MB/sec" ;;\n'
        '  *-speed*-p\\ 3) echo "| 0 | 3 | NA |" ;;\n'
        '  *-speed*) echo "| 0 | x | y | 400 G |" ;;\n'
        "esac\n"
    )
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path, calls


async def test_collect_network_npu_info(tmp_path: Path) -> None:
    """One link, bandwidth and speed read per port of udie 0 then 1; a failed link read is -1 (its
    Unknown), a down port has no speed; a UBoE (ETH) port's bandwidth is the bond's."""
    rows = [
        "| 0 | 3 | 200 | UB | DOWN | Optical |",
        "| 0 | 1 | 200 | UB | UP | Optical |",
        "| 1 | 6 | 200 | UB | UP | Optical |",
        "| 1 | 8 | 200 | ETH | UP | Optical |",
    ]
    path, calls = network_tool(tmp_path, rows)
    got = await HccnNetStats(HccnTool(path)).ub_links(a950(2))
    assert got == [
        UbPortLink(0, 1, {"link_status": 1, "bandwidth_tx": 1.0, "bandwidth_rx": 1.5, "link_speed": 400}),
        UbPortLink(0, 3, {"link_status": 0, "bandwidth_tx": 3.0, "bandwidth_rx": 3.5}),
        UbPortLink(1, 6, {"link_status": -1, "bandwidth_tx": 6.0, "bandwidth_rx": 6.5, "link_speed": 400}),
        UbPortLink(1, 8, {"link_status": 1, "bandwidth_tx": 7.0, "bandwidth_rx": 8.0, "link_speed": 400}),
    ]
    runs = calls.read_text().splitlines()
    assert runs[0] == "-g -dev_info -i 2"
    assert runs[1:4] == [
        "-g -link -i 2 -u 0 -p 1",
        "-g -bandwidth -i 2 -u 0 -p 1 -time 100",
        "-g -speed -i 2 -u 0 -p 1",
    ]
    assert "-g -bandwidth -i 2 -d bond2" in runs


async def test_network_collector_is_supported(tmp_path: Path) -> None:
    """TestNetworkCollectorIsSupported / IsSupported2: the 950 but not on the Atlas 350 1P (0x68)."""
    path, calls = network_tool(tmp_path, ["| 0 | 1 | 200 | UB | UP | Optical |"])
    probe = HccnNetStats(HccnTool(path))
    on_350_1p = exporter_chip(0, 0, name="Ascend950PR", board=0x20, card_id=-1)
    on_350_1p = on_350_1p.model_copy(
        update={"static": on_350_1p.static.model_copy(update={"main_board_id": Reading[int].ok(0x68)})}
    )
    assert await probe.ub_links(on_350_1p) is None
    assert await probe.ub_links(exporter_chip(0, 0)) is None  # a 910B: its own per-chip link families
    assert not calls.exists()
    assert await probe.ub_links(a950()) is not None
    assert await HccnNetStats(HccnTool(tmp_path / "missing")).ub_links(a950()) is None


def test_prom_update_net_info_new() -> None:
    """Four series per port (state, tx, rx, speed), each with the port's udie and port labels; a
    value not read has no series."""
    card = ["0", "Ascend950DT", "", "", "", "", ""]
    links = [
        UbPortLink(0, 1, {"link_status": 1, "bandwidth_tx": 100, "bandwidth_rx": 200, "link_speed": 400}),
        UbPortLink(1, 2, {"link_status": -1}),
    ]
    families = ub_link_families([(card, links)])
    assert list(families) == [
        "npu_chip_info_link_status", "npu_chip_info_bandwidth_tx", "npu_chip_info_bandwidth_rx",
        "npu_chip_info_link_speed",
    ]  # fmt: skip
    got = {
        name: [(s.labels["udie"], s.labels["port"], s.value) for s in family.samples]
        for name, family in families.items()
    }
    assert got == {
        "npu_chip_info_link_status": [("0", "1", 1), ("1", "2", -1)],
        "npu_chip_info_bandwidth_tx": [("0", "1", 100)],
        "npu_chip_info_bandwidth_rx": [("0", "1", 200)],
        "npu_chip_info_link_speed": [("0", "1", 400)],
    }
    assert all(list(s.labels) == UB_LABELS for f in families.values() for s in f.samples)


def test_the_950s_link_families_replace_the_910s_on_a_950_node() -> None:
    """One family per name in a scrape: the per-port one where 950 samples are, the per-chip one else."""
    snap = Snapshot.build(node(), {0: a950(0)})
    samples = Samples(ub_link={0: [UbPortLink(0, 1, {"link_status": 1})]})
    families = [f for f in ChipCollector(lambda: snap, dict, lambda: samples).collect()]
    [link] = [f for f in families if f.name == "npu_chip_info_link_status"]
    assert [s.labels["port"] for s in link.samples] == ["1"]
    snap_910 = Snapshot.build(node(), {0: exporter_chip(0, 0)})
    samples_910 = Samples(link={0: {"link_status": 1}})
    collected = ChipCollector(lambda: snap_910, dict, lambda: samples_910).collect()
    [link] = [f for f in collected if f.name == "npu_chip_info_link_status"]
    [only] = link.samples
    assert set(only.labels) == {
        "id", "model_name", "vdie_id", "pcie_bus_info", "namespace", "pod_name", "container_name"
    }  # fmt: skip


@pytest.mark.parametrize(("profile", "served"), [("a5-8", True), ("a5-atlas350-4p", True), ("a5-atlas350-4", False)])
def test_the_simulators_port_links(profile: str, served: bool) -> None:
    backend = SimBackend(profile, clock=SystemClock())
    [first, *_] = backend.discover()
    got = backend.ub_links(first.logic_id)
    if not served:
        assert got is None
        return
    assert got is not None and all(link.values["link_status"] == 1 for link in got)
    backend.set_ub_port(first.logic_id, 0, 2, "UB", up=False, event=False)
    after = {(link.udie, link.port): link.values for link in backend.ub_links(first.logic_id) or []}
    assert after[(0, 2)]["link_status"] == 0 and "link_speed" not in after[(0, 2)]


# ------------------------------------------------------------------- the 950's per-port optical

SEP = "+-----+"
# Five separators before the data rows, the sixth ends them (parseSecondTableColumns); a power row
# has eleven `|` parts, its key in the fourth column and its value in the fifth.
OPTICAL_A5 = "\n".join(
    [
        SEP, "| module | x |", SEP, "| a | b |", SEP, "| header | x |", SEP, SEP,
        "| 0 | 4 | a | TxPower Lane0(dBm) | 1.25 | b | c | d | e | f |",
        "| 0 | 4 | a | RxPower Lane0(dBm) | -3.10 | b | c | d | e | f |",  # a `-`: skipped, as the reference
        "| 0 | 4 | a | RxPower Lane1(dBm) | NA | b | c | d | e | f |",
        "| 0 | 4 | a | TxPower Lane1(dBm) | 2.0 | b |",  # too few parts
        "| optical_0 | x |",
        "| optical_1 | x |",
        "| short |",
        SEP,
        "| 0 | 4 | a | TxPower Lane2(dBm) | 9.9 | b | c | d | e | f |",  # after the sixth separator
    ]
)  # fmt: skip


def test_parse_second_table_columns() -> None:
    assert parse_optical_a5(OPTICAL_A5) == {
        "TxPower Lane0(dBm)": "1.25",
        "RxPower Lane1(dBm)": "NA",
        "optical_index": "2",
    }
    with pytest.raises(HccnError):
        parse_optical_a5("no such table\n")  # no "Power": not valid


@pytest.mark.parametrize(
    ("info", "values"),
    [
        (
            {"TxPower Lane0(dBm)": "1.0", "RxPower Lane0(dBm)": "5.0", "optical_index": "1"},
            {"optical_index_num": 1.0, "tx_power_0": 1.0, "rx_power_0": 5.0},
        ),  # TestCollectOpticalNpuInfo's table
        ({"optical_index": "0"}, {"optical_index_num": 0.0}),
        ({"optical_index": "x"}, {"optical_index_num": -1.0}),  # GetIntDataFromStrNpu's error: -1, shown
        (
            {"TxPower Lane3(dBm)": "-1", "RxPower Lane2(dBm)": "not supported", "RxPower Lane3(dBm)": "abc"},
            {"optical_index_num": -1.0},
        ),  # -1 and unreadable powers: no series (validateNum)
    ],
)
def test_store_optical_npu_infos(info: dict[str, str], values: dict[str, float]) -> None:
    assert optical_port_values(info) == values


def optical_tool(tmp_path: Path, rows: list[str]) -> tuple[Path, Path]:
    calls = tmp_path / "calls"
    table = tmp_path / "table"
    table.write_text("\n".join([SEPARATOR, HEADER, SEPARATOR, *rows, SEPARATOR]) + "\n")
    answer = tmp_path / "optical"
    answer.write_text(OPTICAL_A5 + "\n")
    path = tmp_path / "hccn_tool"
    path.write_text(
        "#!/bin/sh\n"
        f'echo "$*" >> {calls}\n'
        'case "$*" in\n'
        f"  *-dev_info*) cat {table} ;;\n"
        '  *-optical*-p\\ 2) echo "no module" ;;\n'
        f"  *-optical*) cat {answer} ;;\n"
        "esac\n"
    )
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path, calls


async def test_collect_optical_npu_info(tmp_path: Path) -> None:
    """One -optical run per port, udie 0 then 1; a port whose output has no power has no series."""
    rows = ["| 1 | 0 | 200 | UB | UP | Optical |", "| 0 | 2 | 200 | UB | UP | Optical |"]
    path, calls = optical_tool(tmp_path, rows)
    got = await HccnNetStats(HccnTool(path)).ub_optical(a950(1))
    assert got == [UbPortOptical(1, 0, {"optical_index_num": 2.0, "tx_power_0": 1.25})]
    assert calls.read_text().splitlines() == [
        "-g -dev_info -i 1",
        "-g -optical -i 1 -u 0 -p 2",
        "-g -optical -i 1 -u 1 -p 0",
    ]


@pytest.mark.parametrize(
    ("board", "supported"), [(0x25, True), (0x20, True), (0x68, False), (0x6C, False), (0x03, False)]
)
async def test_optical_collector_is_supported(tmp_path: Path, board: int, supported: bool) -> None:
    path, _ = optical_tool(tmp_path, ["| 0 | 1 | 200 | UB | UP | Optical |"])
    chip = a950()
    chip = chip.model_copy(update={"static": chip.static.model_copy(update={"main_board_id": Reading[int].ok(board)})})
    got = await HccnNetStats(HccnTool(path)).ub_optical(chip)
    assert (got is not None) is supported


def test_prom_update_optical_info_new() -> None:
    card = ["0", "Ascend950DT", "", "", "", "", ""]
    ports = [
        UbPortOptical(0, 1, {"optical_index_num": 1, "tx_power_0": 1.5, "rx_power_3": 0.5}),
        UbPortOptical(1, 0, {"optical_index_num": -1}),
    ]
    families = {f.name: f for f in ub_optical_families([(card, ports)])}
    assert len(families) == 9
    got = {name: [(s.labels["udie"], s.labels["port"], s.value) for s in f.samples] for name, f in families.items()}
    assert got["npu_chip_info_optical_index_num"] == [("0", "1", 1), ("1", "0", -1)]
    assert got["npu_chip_info_optical_tx_power_0"] == [("0", "1", 1.5)]
    assert got["npu_chip_info_optical_rx_power_3"] == [("0", "1", 0.5)]
    assert got["npu_chip_info_optical_tx_power_1"] == []


@pytest.mark.parametrize(("profile", "served"), [("a5-8", True), ("a5-superpod-8", False), ("a5-atlas350-4p", False)])
def test_the_simulators_port_optical(profile: str, served: bool) -> None:
    backend = SimBackend(profile, clock=SystemClock())
    [first, *_] = backend.discover()
    got = backend.ub_optical(first.logic_id)
    if not served:
        assert got is None
        return
    assert got is not None and all(len(o.values) == 9 for o in got)
    backend.set_ub_port(first.logic_id, 0, 1, "UB", up=False, event=False)
    after = {(o.udie, o.port): o.values for o in backend.ub_optical(first.logic_id) or []}
    assert "rx_power_0" not in after[(0, 1)] and "tx_power_0" in after[(0, 1)]
