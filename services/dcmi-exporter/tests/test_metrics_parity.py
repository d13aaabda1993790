"""npu-exporter's extra metric families: the machine counts, the slow chip reads over the C double of
libdcmi.so, the RoCE counters' parser, and how a scrape renders the last samples.

Ported tables, named after the Go tests they come from (component/npu-exporter/collector/metrics):
TestCountHealthStatus (5 cases), TestUpdatePrometheusMachineHealthMetrics (2), TestCollectCardNum
(2 of its 3: a card count, a family without one; GetCardList failing has no counterpart),
TestCollectUtilCommon (2; a failing multi call falls back to v1 here, where the reference shows 0),
TestCollectUtilV1 (2), TestRoceCollectorIsSupported (2, plus the 910B and 310P),
TestGetLinkStatusCode (5), TestPreCollect (its 4 begin-index cases, plus an unknown main board, ours),
TestNodeBaseCollectorUpdatePrometheus (1), and the hccn helpers GetFloatDataFromStr (7, ours), getMainOptInfo (3,
ours) and the link parsers (ours).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, TypeAlias

import pytest
from ascend_common.chips import ChipAddress, ChipFamily
from ascend_common.schemas.exporter import Chip, ChipState, NodeInfo, SubscriptionState
from ascend_common.schemas.reading import Reading
from dcmi_exporter.backends.base import PCIE_KINDS, ChipTelemetry, HbmEcc, PcieBandwidth
from dcmi_exporter.backends.dcmi import DcmiBackend
from dcmi_exporter.backends.dcmi.hccn import ROCE_STAT_KEYS, HccnError, HccnNetStats, HccnTool, roce_stats
from dcmi_exporter.metrics.families import NET_FAMILIES, ChipCollector, card_count, health_counts
from dcmi_exporter.node.snapshot import Snapshot
from dcmi_exporter.tasks.telemetry import Samples

import tests.cdouble.fixtures as _fx  # the fixtures beside the C double
from tests.support.chips import exporter_chip

cdouble_build_dir = _fx.cdouble_build_dir
dcmi_double_path = _fx.dcmi_double_path
dcmi_double = _fx.dcmi_double

Control: TypeAlias = Any  # tests/cdouble/fixtures.py:DoubleControl, loaded by path
NOT_SUPPORTED = -8255
CHIP1 = ChipAddress(card_id=0, device_id=1, logic_id=1, phy_id=3)  # the double's default logic 1


def node() -> NodeInfo:
    return NodeInfo(
        backend="dcmi", profile=None, run_id="r", dcmi_version=Reading[str].ok("24.1.rc2"), card_count=1,
        chip_count=2, chips_by_state={}, subscription=SubscriptionState.LIVE, poll_period_s=1.0, started_at=0.0,
        updated_at=0.0, last_event_id=None, ready=True,
    )  # fmt: skip


def chip_with(logic: int, health: str, **kw: Any) -> Chip:
    """`health`: npu-exporter's Healthy / UnHealthy / Unknown (no read) / "" (an answer it cannot map)."""
    if health == "Unknown":
        return exporter_chip(logic, logic, state=ChipState.UNKNOWN, healthy=None, **kw)
    healthy = {"Healthy": True, "UnHealthy": False, "": None}[health]
    return exporter_chip(logic, logic, healthy=healthy, **kw)


def snapshot_of(chips: list[Chip]) -> Snapshot:
    return Snapshot.build(node(), {c.logic_id: c for c in chips})


def scrape(snap: Snapshot, samples: Samples | None = None) -> dict[str, dict[tuple[tuple[str, str], ...], float]]:
    """family sample name -> {sorted labels: value}."""
    out: dict[str, dict[tuple[tuple[str, str], ...], float]] = {}
    collector = ChipCollector(lambda: snap, dict, lambda: samples or Samples())
    for family in collector.collect():
        for sample in family.samples:
            out.setdefault(sample.name, {})[tuple(sorted(sample.labels.items()))] = sample.value
    return out


def value(families: dict[str, dict[tuple[tuple[str, str], ...], float]], name: str) -> float:
    [only] = families[name].values()
    return only


# ------------------------------------------------------------------- machine counts (collector_for_npu_test)

COUNT_HEALTH_STATUS = [
    ("should count all healthy chips", ["Healthy", "Healthy"], (2, 0, 0)),
    ("should count mixed health statuses", ["Healthy", "UnHealthy", "Unknown", "UnHealthy"], (1, 2, 1)),
    ("should count chips missing from cache as unknown", ["Healthy", "Unknown"], (1, 0, 1)),
    ("should treat unsupported health status as unknown", ["Healthy", ""], (1, 0, 1)),
    ("should return zero when no chips", [], (0, 0, 0)),
]


@pytest.mark.parametrize(("name", "healths", "expected"), COUNT_HEALTH_STATUS, ids=[c[0] for c in COUNT_HEALTH_STATUS])
def test_count_health_status(name: str, healths: list[str], expected: tuple[int, int, int]) -> None:
    """TestCountHealthStatus."""
    snap = snapshot_of([chip_with(i, h) for i, h in enumerate(healths)])
    assert health_counts(snap) == expected


MACHINE_HEALTH = [
    ("should report all healthy chips", {}, (8, 0, 0)),
    ("should report mixed health statuses", {0: "Healthy", 1: "UnHealthy", 2: "UnHealthy", 3: "Unknown"}, (5, 2, 1)),
]


@pytest.mark.parametrize(("name", "by_phy", "expected"), MACHINE_HEALTH, ids=[c[0] for c in MACHINE_HEALTH])
def test_update_prometheus_machine_health_metrics(
    name: str, by_phy: dict[int, str], expected: tuple[int, int, int]
) -> None:
    """TestUpdatePrometheusMachineHealthMetrics: the scraped gauges, 8 chips."""
    families = scrape(snapshot_of([chip_with(i, by_phy.get(i, "Healthy")) for i in range(8)]))
    assert value(families, "machine_npu_nums") == 8
    got = tuple(value(families, f"machine_{kind}_npu_nums") for kind in ("healthy", "unhealthy", "unknown"))
    assert got == expected


def test_collect_card_num() -> None:
    """TestCollectCardNum: the cards holding chips on a card-addressed node; a v2 (950) node, whose
    chips have no card, shows no machine_card_nums (npu-exporter: not supported there)."""
    two_per_card = [chip_with(i, "Healthy", card_id=i // 2) for i in range(8)]
    assert card_count(snapshot_of(two_per_card)) == 4
    assert value(scrape(snapshot_of(two_per_card)), "machine_card_nums") == 4
    no_cards = [chip_with(i, "Healthy", card_id=-1) for i in range(4)]
    assert card_count(snapshot_of(no_cards)) is None
    assert "machine_card_nums" not in scrape(snapshot_of(no_cards))


# ------------------------------------------------------------------- the slow reads over the C double


def make_backend(double: Control) -> DcmiBackend:
    backend = DcmiBackend(double.path, numa_root=Path("/nonexistent"))
    backend.init()
    return backend


def test_read_telemetry_reports_what_the_library_answers(dcmi_double: Control) -> None:
    double = dcmi_double
    for field, v in (
        ("voltage", 8537), ("aicore_freq", 1650), ("util_vector", 61), ("util_cube", 62), ("util_overall", 63),
        ("ecc_enable", 1), ("ecc_single", 11), ("ecc_double", 12), ("ecc_total_single", 13),
        ("ecc_total_double", 14), ("ecc_single_pages", 15), ("ecc_double_pages", 16),
    ):  # fmt: skip
        double.set_int(field, 1, v)
    for i, kind in enumerate(PCIE_KINDS):
        for j, stat in enumerate(("min", "max", "avg")):
            double.set_int(f"pcie_{kind}_{stat}", 1, 7000 + 10 * i + j)
    t = make_backend(double).read_telemetry(CHIP1)
    assert t.voltage_v == pytest.approx(85.37)  # 0.01 V units
    assert t.aicore_freq_mhz == 1650
    assert (t.vector_pct, t.cube_pct, t.overall_pct) == (61, 62, 63)
    assert t.hbm_ecc == HbmEcc(1, 11, 12, 13, 14, 15, 16)
    assert t.pcie is not None
    assert t.pcie.rates == {kind: (7000 + 10 * i, 7001 + 10 * i, 7002 + 10 * i) for i, kind in enumerate(PCIE_KINDS)}
    assert double.call_count("dcmi_get_pcie_link_bandwidth_info", 1) == 1


def test_a_field_the_library_refuses_drops_that_field_only(dcmi_double: Control) -> None:
    double = dcmi_double
    double.set_rc("dcmi_get_device_voltage", 1, NOT_SUPPORTED)
    double.set_rc("dcmi_get_pcie_link_bandwidth_info", 1, -8001)
    t = make_backend(double).read_telemetry(CHIP1)
    assert t.voltage_v is None and t.pcie is None
    assert t.aicore_freq_mhz == 1800 and t.hbm_ecc is not None and t.overall_pct == 51  # the double's defaults


def test_collect_util_common(dcmi_double: Control) -> None:
    """TestCollectUtilCommon: the multi-utilization call gives all four; when it fails, the v1 call
    gives vector and overall (the reference's determineUtilizationFunc falls back), cube none."""
    double = dcmi_double
    double.set_int("util_vector", 1, 71)
    double.set_int("util_cube", 1, 72)
    double.set_int("util_overall", 1, 73)
    backend = make_backend(double)
    t = backend.read_telemetry(CHIP1)
    assert (t.vector_pct, t.cube_pct, t.overall_pct) == (71, 72, 73)
    double.set_rc("dcmi_get_device_multi_utilization_rate", 1, -8001)
    t = backend.read_telemetry(CHIP1)
    assert (t.vector_pct, t.cube_pct, t.overall_pct) == (71, None, 73)


def test_collect_util_v1(dcmi_double: Control) -> None:
    """TestCollectUtilV1: without the multi call, vector (12) and overall (13) each on their own; a
    chip that supports neither (the 910A) has none, and cube is never read through v1."""
    double = dcmi_double
    double.set_rc("dcmi_get_device_multi_utilization_rate", -1, NOT_SUPPORTED)
    backend = make_backend(double)
    t = backend.read_telemetry(CHIP1)
    assert (t.vector_pct, t.cube_pct, t.overall_pct) == (31, None, 51)
    double.set_rc("dcmi_get_device_utilization_rate", 1, NOT_SUPPORTED)
    t = backend.read_telemetry(CHIP1)
    assert (t.vector_pct, t.cube_pct, t.overall_pct) == (None, None, None)


def test_read_telemetry_on_a_v2_library_goes_through_the_dcmiv2_calls(dcmi_double: Control) -> None:
    double = dcmi_double
    double.set_rc("dcmi_init", -1, NOT_SUPPORTED)
    double.set_int("voltage", 1, 9001)
    backend = make_backend(double)
    assert backend.generation.by_logic_id
    t = backend.read_telemetry(ChipAddress(card_id=-1, device_id=-1, logic_id=1, phy_id=3))
    assert t.voltage_v == pytest.approx(90.01) and t.hbm_ecc is not None and t.pcie is not None
    assert double.call_count("dcmiv2_get_device_voltage", 1) == 1
    assert double.call_count("dcmi_get_device_voltage", 1) == 0


# ------------------------------------------------------------------- RoCE counters (collector_for_roce_test)

STAT_OUTPUT = (
    "roce_tx_all_pkt_num:120\nroce_rx_all_pkt_num:340\nmac_rx_fcs_err_pkt_num:2\nbad line\nroce_ecn_db_num:NA\n"
)


def test_roce_stats_reads_the_collectors_keys_and_a_missing_one_as_zero() -> None:
    from dcmi_exporter.backends.dcmi.hccn import parse_stat

    stats = roce_stats(parse_stat(STAT_OUTPUT))
    assert set(stats) == set(ROCE_STAT_KEYS) == set(NET_FAMILIES.values())
    assert (stats["roce_tx_all_pkt_num"], stats["roce_rx_all_pkt_num"], stats["mac_rx_fcs_err_pkt_num"]) == (
        120,
        340,
        2,
    )
    assert stats["roce_ecn_db_num"] == 0 and stats["mac_tx_bad_pkt_num"] == 0
    with pytest.raises(HccnError):
        roce_stats(parse_stat("link status: UP\n"))


ROCE_SUPPORTED = [
    ("910B: a training card", "910B3", 0x22, True),
    ("A3: a training card", "910B3", 0xB0, True),
    ("950: UB ports, not RoCE", "Ascend950PR", 0x00, False),
    ("310P: an inference card", "310P3", 0x00, False),
]


@pytest.mark.parametrize(
    ("name", "chip_name", "board", "supported"), ROCE_SUPPORTED, ids=[c[0] for c in ROCE_SUPPORTED]
)
async def test_roce_collector_is_supported(
    name: str, chip_name: str, board: int, supported: bool, tmp_path: Path
) -> None:
    """TestRoceCollectorIsSupported: training cards only, never the 950; an unsupported chip runs no tool."""
    tool = tmp_path / "hccn_tool"
    ran = tmp_path / "ran"
    tool.write_text(f"#!/bin/sh\necho \"$@\" >> {ran}\nprintf '{STAT_OUTPUT}'\n")
    tool.chmod(0o755)
    chip = exporter_chip(0, 5, name=chip_name, board=board)
    stats = await HccnNetStats(HccnTool(tool)).net_stats(chip)
    if supported:
        assert stats is not None and stats["roce_rx_all_pkt_num"] == 340
        assert ran.read_text().split() == ["-i", "5", "-stat", "-g"]
    else:
        assert stats is None and not ran.exists()


async def test_a_failing_tool_gives_no_counters() -> None:
    chip = exporter_chip(0, 5)
    assert await HccnNetStats(HccnTool(Path("/nonexistent/hccn_tool"))).net_stats(chip) is None


# ------------------------------------------------------------------- rendering the samples


def sample() -> ChipTelemetry:
    rates = {kind: (10 * i, 10 * i + 2, 10 * i + 1) for i, kind in enumerate(PCIE_KINDS)}
    return ChipTelemetry(
        voltage_v=0.85, aicore_freq_mhz=1800, vector_pct=1, cube_pct=2, overall_pct=3,
        hbm_ecc=HbmEcc(1, 4, 5, 6, 7, 8, 9), pcie=PcieBandwidth(rates=rates),
    )  # fmt: skip


def test_samples_render_under_npu_exporters_names_and_a_silent_chip_has_none() -> None:
    chips = [chip_with(0, "Healthy"), chip_with(1, "Unknown")]
    samples = Samples(chips={0: sample(), 1: sample()}, net={0: {"roce_tx_all_pkt_num": 9}, 1: {}})
    families = scrape(snapshot_of(chips), samples)
    labels = (
        ("container_name", ""), ("id", "0"), ("model_name", "Ascend910B3"), ("namespace", ""),
        ("pcie_bus_info", ""), ("pod_name", ""), ("vdie_id", ""),
    )  # fmt: skip  # npu-exporter's CardLabel: no container holds the chip
    for name, expected in (
        ("npu_chip_info_voltage", 0.85), ("npu_chip_info_aicore_current_freq", 1800),
        ("npu_chip_info_vector_utilization", 1), ("npu_chip_info_cube_utilization", 2),
        ("npu_chip_info_overall_utilization", 3), ("npu_chip_info_hbm_ecc_enable_flag", 1),
        ("npu_chip_info_hbm_ecc_single_bit_error_cnt", 4), ("npu_chip_info_hbm_ecc_double_bit_error_cnt", 5),
        ("npu_chip_info_hbm_ecc_total_single_bit_error_cnt", 6),
        ("npu_chip_info_hbm_ecc_total_double_bit_error_cnt", 7),
        ("npu_chip_info_hbm_ecc_single_bit_isolated_pages_cnt", 8),
        ("npu_chip_info_hbm_ecc_double_bit_isolated_pages_cnt", 9),
        ("npu_chip_roce_tx_all_pkt_num", 9), ("npu_chip_roce_rx_all_pkt_num", 0),
    ):  # fmt: skip
        assert families[name] == {labels: expected}, name  # chip 1 does not answer: no series
    rx_p = families["npu_chip_info_pcie_rx_p_bw"]
    by_type = {dict(k)["pcie_bw_type"]: v for k, v in rx_p.items()}
    assert by_type == {"minPcieBw": 30, "maxPcieBw": 32, "avgPcieBw": 31}
    assert {dict(k)["id"] for k in rx_p} == {"0"}


def test_no_samples_no_series() -> None:
    families = scrape(snapshot_of([chip_with(0, "Healthy")]))
    assert "npu_chip_info_voltage" not in families and "npu_chip_roce_tx_all_pkt_num" not in families
    assert value(families, "machine_healthy_npu_nums") == 1


def test_sim_answers_by_family() -> None:
    from ascend_common.clock import SystemClock
    from dcmi_exporter.backends.sim import SimBackend

    for profile, family in (("910b-8", ChipFamily.ASCEND910B), ("310p-4", ChipFamily.ASCEND310P)):
        backend = SimBackend(profile, clock=SystemClock())
        [first, *_] = backend.discover()
        t = backend.read_telemetry(first)
        assert t.voltage_v is not None and t.overall_pct is not None
        assert (t.hbm_ecc is not None) is (family is ChipFamily.ASCEND910B)
        assert (t.pcie is not None) is (family is ChipFamily.ASCEND910B)
        stats = backend.net_stats(first.logic_id)
        assert (stats is not None) is (family is ChipFamily.ASCEND910B)
        optical = backend.optical(first.logic_id)
        assert (optical is not None) is (family is ChipFamily.ASCEND910B)
        link = backend.link(first.logic_id)
        assert (link is not None) is (family is ChipFamily.ASCEND910B)


# ------------------------------------------------------------------- optical module (hccn_tool -optical -g)

OPTICAL_OUTPUT = (
    "present : present\nVcc : 3.28 V\ntemperature : 41 C\nTx Power0 : 0.65 mW\nTx_Power1 : NA\n"
    "Rx_Power0 : 0.55 mW\nRx_Power1 : not supported mW\nRx_Power2 : 0.5\nRx_Power3 : x mW\nbad line\n"
)

OPTICAL_NUMBER = [
    ("a number and its unit", "3.28 V", 3.28),
    ("empty", "", None),
    ("NA", "NA", None),
    ("not supported", "not supported", None),
    ("no unit", "0.5", None),
    ("three parts", "0.5 m W", None),
    ("not a number", "x mW", None),
]


@pytest.mark.parametrize(("name", "text", "expected"), OPTICAL_NUMBER, ids=[c[0] for c in OPTICAL_NUMBER])
def test_get_float_data_from_str(name: str, text: str, expected: float | None) -> None:
    """The reference's GetFloatDataFromStr (its -1 is our None: npu-exporter never shows it)."""
    from dcmi_exporter.backends.dcmi.hccn import optical_number

    assert optical_number(text) == expected


def test_get_main_opt_info() -> None:
    """npu-exporter's getMainOptInfo over a `-optical -g` output: keys with spaces become `_`."""
    from dcmi_exporter.backends.dcmi.hccn import optical_values, parse_optical

    info = parse_optical(OPTICAL_OUTPUT)
    assert info["Tx_Power0"] == "0.65 mW"
    assert optical_values(info) == {
        "present": 1.0, "Vcc": 3.28, "temperature": 41.0, "Tx_Power0": 0.65, "Rx_Power0": 0.55,
    }  # fmt: skip
    assert optical_values({"present": "not present"}) == {"present": 0.0}
    assert optical_values({"present": "unknown"}) == {}


async def test_optical_read_through_the_runner_on_the_910_families_only(tmp_path: Path) -> None:
    tool = tmp_path / "hccn_tool"
    tool.write_text(f"#!/bin/sh\n[ \"$3\" = -optical ] && printf '{OPTICAL_OUTPUT}'\n")
    tool.chmod(0o755)
    probe = HccnNetStats(HccnTool(tool))
    values = await probe.optical(exporter_chip(0, 5))
    assert values is not None and values["Vcc"] == 3.28
    assert await probe.optical(exporter_chip(0, 5, name="Ascend950PR", board=0)) is None
    assert await HccnNetStats(HccnTool(tmp_path / "missing")).optical(exporter_chip(0, 5)) is None


def test_optical_samples_render_only_what_was_read() -> None:
    samples = Samples(optical={0: {"present": 1.0, "Rx_Power2": -3.5}})
    families = scrape(snapshot_of([chip_with(0, "Healthy")]), samples)
    assert value(families, "npu_chip_optical_state") == 1.0
    assert value(families, "npu_chip_optical_rx_power_2") == -3.5
    assert families.get("npu_chip_optical_vcc", {}) == {}


# ------------------------------------------------------------------- link (collector_for_network_test, hccn_tool.go)

LINK_STATUS_CODE = [
    ("should return UnRetError when status is NotReport", "NotReport", None),
    ("should return FailedValue when status is Unknown", "Unknown", -1),
    ("should return HealthyCode when status is LinkUp", "UP", 1),
    ("should return UnhealthyCode when status is LinkDown", "DOWN", 0),
    ("should return UnhealthyCode when status is other value", "other", 0),
]


@pytest.mark.parametrize(("name", "status", "code"), LINK_STATUS_CODE, ids=[c[0] for c in LINK_STATUS_CODE])
def test_get_link_status_code(name: str, status: str, code: int | None) -> None:
    """TestGetLinkStatusCode, as a scrape shows it: UnRetError is never shown (None), FailedValue
    is shown as -1."""
    from dcmi_exporter.backends.dcmi.hccn import link_status_code

    assert link_status_code(status) == code


def test_link_parsers_read_the_tools_outputs_as_the_reference() -> None:
    from dcmi_exporter.backends.dcmi import hccn

    assert hccn.parse_link_status("link status: DOWN\n") == "DOWN"
    with pytest.raises(HccnError):
        hccn.parse_link_status("link status is DOWN\n")
    assert hccn.parse_link_speed("Speed: 100000 Mb/s\n") == 100000
    for bad in ("Speed: Unknown! Mb/s\n", "Speed: fast Mb/s\n", "Speed 100000\n"):
        with pytest.raises(HccnError):
            hccn.parse_link_speed(bad)
    assert hccn.parse_link_up_num("[device 0]link up count : 3\n[device 0]link down count : 2\n") == 3
    for bad in ("[device 0]link up count: 3\n", "nothing\n"):
        with pytest.raises(HccnError):
            hccn.parse_link_up_num(bad)
    assert hccn.parse_bandwidth("Bandwidth TX: 1.50 MB/sec\nBandwidth RX: 2.25 MB/sec\n") == (1.5, 2.25)
    assert hccn.parse_bandwidth("Bandwidth TX: x MB/sec\n") == (None, None)


async def test_link_read_through_the_runner_and_a_failed_state_shows_minus_one(tmp_path: Path) -> None:
    tool = tmp_path / "hccn_tool"
    tool.write_text(
        '#!/bin/sh\ncase "$3" in\n'
        "  -link) echo 'link status: UP';;\n  -speed) echo 'Speed: 200000 Mb/s';;\n"
        "  -link_stat) echo '[device 5]link up count : 4';;\n"
        "  -bandwidth) printf 'Bandwidth TX: 3.00 MB/sec\\nBandwidth RX: 4.00 MB/sec\\n';;\nesac\n"
    )
    tool.chmod(0o755)
    got = await HccnNetStats(HccnTool(tool)).link(exporter_chip(0, 5))
    assert got == {"link_status": 1, "link_speed": 200000, "link_up_num": 4, "bandwidth_tx": 3.0, "bandwidth_rx": 4.0}
    missing = await HccnNetStats(HccnTool(tmp_path / "missing")).link(exporter_chip(0, 5))
    assert missing == {"link_status": -1}
    assert await HccnNetStats(HccnTool(tool)).link(exporter_chip(0, 5, name="310P3")) is None


def test_link_samples_render_under_npu_exporters_names() -> None:
    samples = Samples(link={0: {"link_status": 0, "link_speed": 100000, "bandwidth_rx": 1.5}})
    families = scrape(snapshot_of([chip_with(0, "Healthy")]), samples)
    assert value(families, "npu_chip_info_link_status") == 0
    assert value(families, "npu_chip_link_speed") == 100000
    assert value(families, "npu_chip_info_bandwidth_rx") == 1.5
    assert families.get("npu_chip_link_up_num", {}) == {}


# ------------------------------------------------------------------- HCCS, SIO, DDR, elabel
# (collector_for_hccs.go, collector_for_sio.go, collector_for_ddr.go, npu_collector.go setElabelInfo)


def test_hccs_sio_memory_and_serial_read_over_the_c_double(dcmi_double: Control) -> None:
    double = dcmi_double
    double.set_int("hccs_tx_1", 1, 11)
    double.set_int("hccs_rx_7", 1, 77)
    double.set_int("hccs_crc_3", 1, 3)
    double.set_int("hccs_bw_tx_2", 1, 250)  # hundredths of MB/s
    double.set_int("hccs_bw_total_rx", 1, 1234)
    double.set_int("sio_tx", 1, 5)
    double.set_int("sio_rx", 1, 6)
    double.set_int("mem_total", 1, 16384)
    double.set_int("mem_avail", 1, 1024)
    t = make_backend(double).read_telemetry(CHIP1)
    assert t.hccs is not None and t.hccs_bandwidth is not None
    assert (t.hccs.tx_cnt[1], t.hccs.rx_cnt[7], t.hccs.crc_err_cnt[3]) == (11, 77, 3)
    assert len(t.hccs.tx_cnt) == 8  # npu-exporter's MaxHccsNum of the library's 16
    assert t.hccs_bandwidth.tx[2] == 2.5 and t.hccs_bandwidth.total_rx == 12.34
    assert t.hccs_bandwidth.profiling_time_ms == 200
    assert t.sio_crc_err == (5, 6)
    assert t.memory is not None and (t.memory.total_mb, t.memory.available_mb) == (16384, 1024)
    assert t.serial_number == "SN2"  # the card's elabel: card 0's first chip is phy 2


def test_hccs_counters_are_64_bit_and_a_failed_elabel_reads_na(dcmi_double: Control) -> None:
    """npu-exporter's PreCollect asks sub-command 5 (u64) first; setElabelInfo writes "NA" on a failure."""
    double = dcmi_double
    double.set_int("hccs_tx_4", 1, 2**32 + 9)
    double.set_rc("dcmi_get_card_elabel_v2", -1, NOT_SUPPORTED)
    double.set_rc("dcmi_get_device_memory_info_v3", 1, NOT_SUPPORTED)
    t = make_backend(double).read_telemetry(CHIP1)
    assert t.serial_number == "NA" and t.memory is None
    assert t.hccs is not None and t.hccs.tx_cnt[4] == 2**32 + 9  # the u64 call answered


def test_hccs_families_render_ports_one_to_seven_and_minus_one_for_a_failed_read() -> None:
    from dcmi_exporter.backends.base import HccsBandwidth, HccsStats

    ports = tuple(range(100, 108))
    ok = ChipTelemetry(
        hccs=HccsStats(tx_cnt=ports, rx_cnt=ports, crc_err_cnt=(0,) * 8),
        hccs_bandwidth=HccsBandwidth(profiling_time_ms=200, total_tx=1.0, total_rx=2.0, tx=(0.5,) * 8, rx=(0.5,) * 8),
    )
    families = scrape(
        snapshot_of([chip_with(0, "Healthy"), chip_with(1, "Healthy")]), Samples(chips={0: ok, 1: ChipTelemetry()})
    )
    tx = {dict(k)["id"]: v for k, v in families["npu_chip_info_hccs_statistic_info_tx_cnt_7"].items()}
    assert tx == {"0": 107, "1": -1}
    assert "npu_chip_info_hccs_statistic_info_tx_cnt_0" not in families
    assert value_of_id(families, "npu_chip_info_hccs_bandwidth_info_profiling_time", "0") == 200
    assert value_of_id(families, "npu_chip_info_hccs_bandwidth_info_total_rx", "1") == -1


def value_of_id(families: dict[str, dict[tuple[tuple[str, str], ...], float]], name: str, phy: str) -> float:
    [only] = [v for k, v in families[name].items() if dict(k)["id"] == phy]
    return only


def test_error_codes_up_to_ten_and_none_without_a_code() -> None:
    """npu-exporter's updateErrorCodesInfo: error_code, error_code_1 .. error_code_9, one per code."""
    codes = [f"80E0{i:04X}" for i in range(12)]
    chip = chip_with(0, "UnHealthy")
    assert chip.dynamic is not None
    chip = chip.model_copy(
        update={"dynamic": chip.dynamic.model_copy(update={"error_codes": Reading[list[str]].ok(codes)})}
    )
    families = scrape(snapshot_of([chip, chip_with(1, "Healthy")]))
    assert value_of_id(families, "npu_chip_info_error_code", "0") == 0x80E00000
    assert value_of_id(families, "npu_chip_info_error_code_9", "0") == 0x80E00009
    assert "npu_chip_info_error_code_10" not in families
    assert {dict(k)["id"] for k in families["npu_chip_info_error_code"]} == {"0"}  # chip 1: no code, no series


PRE_COLLECT = [
    ("should set beginIndex to num1 when devType is Ascend910B", 0x22, None, 1),
    ("should set beginIndex to num1 when IsA900A3SuperPod returns true", 0xB0, 0x18, 1),
    ("should set beginIndex to num1 when Is800IA3Chip returns true", 0xB0, 0x14, 1),
    ("should set beginIndex to num2 when IsA9000A3SuperPod returns true", 0xB0, 0x1C, 2),
    ("mainBoardId not supported: the reference leaves 0 (port 0 shown), ours 1", 0xB0, 0x99, 1),
]


@pytest.mark.parametrize(("name", "board", "main_board", "first"), PRE_COLLECT, ids=[c[0] for c in PRE_COLLECT])
def test_pre_collect_begin_index(name: str, board: int, main_board: int | None, first: int) -> None:
    """TestPreCollect (collector_for_hccs_test.go), its begin-index cases: the first HCCS port shown."""
    from dcmi_exporter.metrics.families import hccs_first_port

    chip = exporter_chip(0, 0, board=board)
    if main_board is not None:
        static = chip.static.model_copy(update={"main_board_id": Reading[int].ok(main_board)})
        chip = chip.model_copy(update={"static": static})
    assert hccs_first_port(chip) == first


def test_node_base_collector_update_prometheus() -> None:
    """TestNodeBaseCollectorUpdatePrometheus: one node_base_info series, value 1, labels exporterVersion
    and driverVersion (the library's version); npu_exporter_version_info has exporterVersion only."""
    from dcmi_exporter import __version__

    families = scrape(snapshot_of([chip_with(0, "Healthy")]))
    assert families["node_base_info"] == {(("driverVersion", "24.1.rc2"), ("exporterVersion", __version__)): 1}
    assert families["npu_exporter_version_info"] == {(("exporterVersion", __version__),): 1}
