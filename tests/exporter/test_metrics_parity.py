"""npu-exporter's extra families scraped from a running exporter over the C double of libdcmi.so and a
fake `hccn_tool`; a tool that hangs 30 s holds back no other family."""

from __future__ import annotations

import time
from pathlib import Path

import httpx
from dcmi_exporter.backends.base import PCIE_KINDS
from dcmi_exporter.metrics.families import (
    LINK_FAMILIES,
    NET_FAMILIES,
    OPTICAL_FAMILIES,
    PCIE_FAMILIES,
    TELEMETRY_FAMILIES,
)
from prometheus_client.parser import text_string_to_metric_families

from tests.cdouble.fixtures import cdouble_build_dir, dcmi_double_path  # noqa: F401 - pytest fixtures
from tests.support.exporter import ExporterProc, running_exporter
from tests.support.waiting import START_S, until

ROOT = Path(__file__).resolve().parents[2]
LAYOUT = "chip 0 0 0 2\nchip 0 1 1 3\nchip 1 0 2 0\nchip 1 1 3 1\n"
ADDED = [
    *(name for name, _, _ in TELEMETRY_FAMILIES),
    *(name for name, _ in PCIE_FAMILIES.values()),
    *NET_FAMILIES,
    *OPTICAL_FAMILIES,
    *LINK_FAMILIES,
    "machine_healthy_npu_nums",
    "machine_unhealthy_npu_nums",
    "machine_unknown_npu_nums",
    "machine_card_nums",
]

PERIODS = ("--telemetry-period", "0.2", "--net-stats-period", "0.2")
Scrape = dict[str, dict[tuple[tuple[str, str], ...], float]]


def fake_hccn_tool(tmp: Path) -> tuple[Path, Path, Path]:
    """(tool, hang switch, started marker): `-i <phy> -stat -g` prints counters, `-optical -g` a
    module and `-link` / `-speed` / `-link_stat` / `-bandwidth -g` a link, derived from the phy id;
    while the switch file exists the tool marks that it ran and sleeps 30 s."""
    tool, hang, started = tmp / "hccn_tool", tmp / "hang", tmp / "hung-run"
    tool.write_text(
        "#!/bin/sh\n"
        f'if [ -e "{hang}" ]; then touch "{started}"; exec sleep 30; fi\n'
        'phy="$2"\n'
        'if [ "$3" = -optical ]; then\n'
        '  printf "present : present\\nVcc : 3.%s V\\ntemperature : 40 C\\n" "$phy"\n'
        '  for i in 0 1 2; do printf "Tx_Power$i : 0.6 mW\\nRx_Power$i : 0.5 mW\\n"; done\n'
        '  tx3="0.7 mW"; [ "$phy" = 3 ] && tx3=NA\n'
        '  printf "Tx_Power3 : %s\\nRx_Power3 : 0.4 mW\\n" "$tx3"; exit 0\n'
        "fi\n"
        'case "$3" in\n'
        "  -link) echo 'link status: UP'; exit 0;;\n"
        "  -speed) echo 'Speed: 200000 Mb/s'; exit 0;;\n"
        '  -link_stat) echo "[device $phy]link up count : $((phy + 1))"; exit 0;;\n'
        "  -bandwidth) printf 'Bandwidth TX: 1.50 MB/sec\\nBandwidth RX: 2.50 MB/sec\\n'; exit 0;;\n"
        "esac\n"
        "printf 'roce_tx_all_pkt_num:%s\\nroce_rx_all_pkt_num:%s\\nmac_rx_fcs_err_pkt_num:%s\\n'"
        ' $((1000 + phy)) $((2000 + phy)) "$phy"\n'
    )
    tool.chmod(0o755)
    return tool, hang, started


def scrape(ep: ExporterProc, timeout: float = 5.0) -> Scrape:
    text = httpx.get(ep.metrics_url + "/metrics", timeout=timeout).text
    out: Scrape = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            out.setdefault(sample.name, {})[tuple(sorted(sample.labels.items()))] = sample.value
    return out


def by_id(families: Scrape, name: str, **match: str) -> dict[str, float]:
    """phy id -> value of the series of `name` whose labels include `match`."""
    out: dict[str, float] = {}
    for labels, value in families.get(name, {}).items():
        d = dict(labels)
        if all(d.get(k) == v for k, v in match.items()):
            out[d["id"]] = value
    return out


async def test_every_added_family_is_scraped_with_the_librarys_and_the_tools_values(
    dcmi_double_path: Path,  # noqa: F811
    tmp_path: Path,
) -> None:
    tool, _, _ = fake_hccn_tool(tmp_path)
    config = tmp_path / "double.conf"
    config.write_text(
        LAYOUT + "int voltage 1 8537\nint aicore_freq 1 1650\nint util_vector 1 61\nint util_cube 1 62\n"
        "int util_overall 1 63\nint ecc_double 1 4\nint ecc_double_pages 1 2\nint pcie_rx_p_avg 1 777\n"
        "int health 2 2\nrc dcmi_get_device_health 3 -8255\n"
    )
    args = ("--library", str(dcmi_double_path), "--hccn-tool", str(tool), *PERIODS)
    with running_exporter(tmp_path / "run", *args, backend="dcmi", env={"DCMI_DOUBLE_CONFIG": str(config)}) as ep:

        def complete() -> Scrape | None:
            families = scrape(ep)
            every = all(len(by_id(families, n)) == 4 for n in ("npu_chip_info_voltage", "npu_chip_roce_rx_all_pkt_num"))
            return families if every else None

        families = await until(complete, START_S, "every chip's telemetry and RoCE counters")
    missing = [name for name in ADDED if name not in families]
    assert not missing, missing
    # Chip logic 1 is phy 3.
    assert by_id(families, "npu_chip_info_voltage")["3"] == 85.37
    assert by_id(families, "npu_chip_info_aicore_current_freq")["3"] == 1650
    assert by_id(families, "npu_chip_info_vector_utilization")["3"] == 61
    assert by_id(families, "npu_chip_info_cube_utilization")["3"] == 62
    assert by_id(families, "npu_chip_info_overall_utilization")["3"] == 63
    assert by_id(families, "npu_chip_info_hbm_ecc_double_bit_error_cnt")["3"] == 4
    assert by_id(families, "npu_chip_info_hbm_ecc_double_bit_isolated_pages_cnt")["3"] == 2
    assert by_id(families, "npu_chip_info_pcie_rx_p_bw", pcie_bw_type="avgPcieBw")["3"] == 777
    for kind in PCIE_KINDS:
        name = PCIE_FAMILIES[kind][0]
        assert {dict(k)["pcie_bw_type"] for k in families[name]} == {"minPcieBw", "maxPcieBw", "avgPcieBw"}
    assert by_id(families, "npu_chip_roce_tx_all_pkt_num") == {"2": 1002, "3": 1003, "0": 1000, "1": 1001}
    assert by_id(families, "npu_chip_roce_rx_all_pkt_num")["3"] == 2003
    assert by_id(families, "npu_chip_info_rx_fcs_num")["3"] == 3
    assert by_id(families, "npu_chip_mac_tx_pause_num")["3"] == 0  # not printed by the tool: 0, as the reference
    assert by_id(families, "npu_chip_optical_vcc") == {"2": 3.2, "3": 3.3, "0": 3.0, "1": 3.1}
    assert by_id(families, "npu_chip_optical_state")["3"] == 1
    assert by_id(families, "npu_chip_info_link_status")["3"] == 1
    assert by_id(families, "npu_chip_link_speed")["3"] == 200000
    assert by_id(families, "npu_chip_link_up_num") == {"2": 3, "3": 4, "0": 1, "1": 2}
    assert (by_id(families, "npu_chip_info_bandwidth_tx")["3"], by_id(families, "npu_chip_info_bandwidth_rx")["3"]) == (
        1.5,
        2.5,
    )
    assert by_id(families, "npu_chip_optical_rx_power_3")["3"] == 0.4
    assert by_id(families, "npu_chip_optical_tx_power_3") == {"2": 0.7, "0": 0.7, "1": 0.7}  # phy 3's NA: no series
    # logic 2 (phy 0) unhealthy, logic 3 (phy 1) health unreadable: unknown.
    assert [families[f"machine_{k}_npu_nums"][()] for k in ("healthy", "unhealthy", "unknown")] == [2, 1, 1]
    assert families["machine_card_nums"][()] == 2


async def test_a_hccn_tool_that_hangs_30s_delays_no_other_metric(
    dcmi_double_path: Path,  # noqa: F811
    tmp_path: Path,
) -> None:
    tool, hang, started = fake_hccn_tool(tmp_path)
    config = tmp_path / "double.conf"
    config.write_text(LAYOUT)
    args = ("--library", str(dcmi_double_path), "--hccn-tool", str(tool), *PERIODS)
    with running_exporter(tmp_path / "run", *args, backend="dcmi", env={"DCMI_DOUBLE_CONFIG": str(config)}) as ep:
        await until(lambda: len(by_id(scrape(ep), "npu_chip_roce_rx_all_pkt_num")) == 4, START_S, "RoCE counters")
        hang.touch()
        await until(started.exists, START_S, "a hccn_tool run that hangs")
        # The tool now sleeps 30 s (the runner kills it after its own 10 s). Meanwhile the library's
        # families follow the chips within a few of their periods, and every scrape answers at once.
        config.write_text(LAYOUT + "int voltage 1 9123\nint temperature 1 77\n")
        changed_at = time.monotonic()

        def moved() -> Scrape | None:
            began = time.monotonic()
            families = scrape(ep, timeout=5.0)
            # Well under the runner's 10 s: a scrape never waits for the tool (slack for a loaded CI).
            assert time.monotonic() - began < 3.0, "a scrape waits for nothing"
            fresh = by_id(families, "npu_chip_info_voltage").get("3") == 91.23
            return families if fresh and by_id(families, "npu_chip_info_temperature").get("3") == 77 else None

        # Within 8 s: before the runner gives up on the hung tool (10 s), so not after it.
        families = await until(moved, 8.0, "the new voltage and temperature while hccn_tool hangs")
        assert time.monotonic() - changed_at < 8.0
        assert started.exists() and hang.exists()  # still inside the tool's 30 s
        assert by_id(families, "npu_chip_info_health_status") == {"0": 1, "1": 1, "2": 1, "3": 1}
        assert ep.stop(timeout=10) == 0, "SIGTERM ends the exporter while a hccn_tool run hangs"


def test_every_added_family_is_listed_in_the_wire_formats_beside_npu_exporters_name() -> None:
    doc = (ROOT / "docs" / "wire-formats.md").read_text()
    missing = [name for name in ADDED if f"`{name}`" not in doc]
    assert not missing, missing


def test_the_issue_35_families_are_listed_in_the_wire_formats() -> None:
    """The per-chip-type families (tests/exporter/test_metrics_families.py); an HCCS port family as
    its numbered run, `x_1` .. `x_7`."""
    from dcmi_exporter.metrics.families import (
        ERROR_CODE_FAMILIES,
        EXTRA_FAMILIES,
        HCCS_PORT_FAMILIES,
        HCCS_TOTAL_FAMILIES,
    )

    doc = (ROOT / "docs" / "wire-formats.md").read_text()
    names = [
        *(name for name, _, _, _ in EXTRA_FAMILIES),
        *(name for name, _, _ in HCCS_TOTAL_FAMILIES),
        *(f"{prefix}1` .. `{prefix}7" for prefix, _, _ in HCCS_PORT_FAMILIES),
        ERROR_CODE_FAMILIES[0], ERROR_CODE_FAMILIES[1], ERROR_CODE_FAMILIES[-1],
        "npu_chip_info_name", "npu_chip_info_serial_number", "npu_chip_info_product_type",
        "npu_chip_info_process_info", "node_base_info", "npu_exporter_version_info",
        "npu_chip_info_hbm_utilization", "npu_chip_info_hbm_temperature", "npu_chip_info_hbm_bandwidth_utilization",
    ]  # fmt: skip
    missing = [name for name in names if f"`{name}" not in doc]
    assert not missing, missing
