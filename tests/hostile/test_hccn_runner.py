"""A hostile `hccn_tool` (issue 32): the tool is a file on the host, so whatever it prints, however
long it runs and whatever it leaves behind must cost one read of one chip, nothing more.

- a tool whose child sleeps 60 s holding its stdout: the run ends within its bound, the process
  group is gone, the runner's slots are free, and in a running exporter a fresh fault on another
  chip still reaches GET /v1/chips within two rounds while the tool keeps wedging;
- a link read that fails with the exporter at DEBUG: logged, no traceback, the link metrics stay;
- counters outside an unsigned 64-bit counter's range: not exported, logged once per chip and counter;
- a 950 port table of 10,000 rows: refused, one tool run, logged once per chip.
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import stat
import time
from collections.abc import Iterator
from functools import partial
from pathlib import Path

import httpx
import pytest
from ascend_common.chips import ChipAddress
from ascend_common.schemas.exporter import Chip
from ascend_common.schemas.reading import Reading
from dcmi_exporter.backends.dcmi.hccn import HccnError, HccnTool, HccnTraffic, HccnUbPorts
from dcmi_exporter.node.snapshot import chip_discovered, placeholder_static
from prometheus_client.parser import text_string_to_metric_families

from tests.cdouble.fixtures import cdouble_build_dir, dcmi_double_path  # noqa: F401 - pytest fixtures
from tests.exporter.test_events import chip_codes
from tests.support.exporter import ExporterProc, running_exporter
from tests.support.waiting import START_S, until

TIMEOUT_S = 0.5  # the runner's timeout in these tests (the exporter's --hccn-timeout)
BOUND_S = TIMEOUT_S + 2.0  # what a wedged run may cost: its timeout, the runner's 1 s reap bound, slack
UB_DOWN, UB_SEPARATE = "81B18603", "020001002"


def script(path: Path, body: str) -> Path:
    path.write_text("#!/bin/sh\n" + body)
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path


def wedge(record: Path) -> str:
    """Shell: start a child that sleeps 60 s holding stdout, record '<tool pid> <child pid>', wait."""
    return f'sleep 60 & echo "$$ $!" >> {record}; wait\n'


def alive(pid: int) -> bool:
    """Whether `pid` runs (a zombie waiting for its parent to reap it does not)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0]
    except (FileNotFoundError, ProcessLookupError, IndexError):
        return False
    return state not in ("Z", "X")


def dead(pid: int) -> bool:
    return not alive(pid)


def group_members(pgid: int) -> list[int]:
    """The live processes of process group `pgid`, from /proc."""
    members = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rpartition(")")[2].split()
        except (FileNotFoundError, ProcessLookupError):
            continue
        if len(fields) > 2 and int(fields[2]) == pgid and fields[0] not in ("Z", "X"):
            members.append(int(entry.name))
    return members


def recorded(record: Path) -> list[tuple[int, int]]:
    if not record.exists():
        return []
    return [(int(a), int(b)) for a, b in (line.split() for line in record.read_text().splitlines() if line.strip())]


@pytest.fixture
def leftovers(tmp_path: Path) -> Iterator[Path]:
    """The wedging tool's record; whatever it names is killed after the test, pass or fail (a runner
    that leaves its tool's child behind would leave a 60 s sleeper per run)."""
    record = tmp_path / "wedged"
    yield record
    for _, child in recorded(record):
        if alive(child):
            os.kill(child, signal.SIGKILL)


def chip(logic: int, phy: int, name: str = "Ascend910B3") -> Chip:
    static = placeholder_static(-8005).model_copy(update={"chip_name": Reading[str].ok(name)})
    return chip_discovered(ChipAddress(card_id=logic, device_id=0, logic_id=logic, phy_id=phy), static)


# ---------------------------------------------------------------------- a tool whose child holds stdout


async def test_a_tool_whose_child_holds_stdout_ends_in_bound_with_its_group_killed_and_frees_its_slot(
    tmp_path: Path, leftovers: Path
) -> None:
    tool = script(tmp_path / "hccn_tool", f'[ "$1" = ok ] && {{ echo fine; exit 0; }}\n{wedge(leftovers)}')
    runner = HccnTool(tool, timeout_s=TIMEOUT_S)  # two slots, as the exporter's
    started = time.monotonic()
    async with asyncio.timeout(10):  # a runner that waits for the pipe would wait the child's 60 s
        results = await asyncio.gather(runner.run("x"), runner.run("y"), return_exceptions=True)
    assert time.monotonic() - started < BOUND_S, "each run ends within its timeout and the reap bound"
    assert all(isinstance(r, HccnError) and "process group killed" in str(r) for r in results), results
    runs = recorded(leftovers)
    assert len(runs) == 2
    for tool_pid, child in runs:
        assert tool_pid not in (os.getpid(), os.getpgid(0)), "the tool runs in a session of its own"
        await until(partial(dead, child), 2, "the tool's child killed with its group")
        assert group_members(tool_pid) == [], "nothing of the tool's process group is left"
    # Both slots are free again: a good run answers at once.
    async with asyncio.timeout(BOUND_S):
        assert await runner.run("ok") == "fine\n"


async def test_a_wedged_chip_stops_no_other_chips_next_round_in_a_running_exporter(
    dcmi_double_path: Path,  # noqa: F811
    tmp_path: Path,
    leftovers: Path,
) -> None:
    """Four 950 chips on the C double; the tool wedges on every run for logic 0 and answers for the
    others (all ports up). After the first rounds (logic 0 wedged once), the library lists 81B18603
    on logic 0 and 1: the next UB round reads both, logic 0 wedges again, and logic 1 still gets its
    derived 020001002 within two rounds (a round ends within max(poll period, --hccn-timeout))."""
    calls = tmp_path / "calls"
    table = "\n".join(
        [
            "+--------+--------+",
            "| UdieID | PortID | Speed | PortType | Link Status | Media Type |",
            "+--------+--------+",
            "| 0      | 1      | 200   | UB       | UP          | Optical    |",
            "+--------+--------+",
        ]
    )
    tool = script(
        tmp_path / "hccn_tool",
        f'echo "$*" >> {calls}\n'
        f'case "$*" in *"-i 0"*) {wedge(leftovers).strip()} ;; esac\n'
        f'case "$*" in *-dev_info*) cat <<EOF\n{table}\nEOF\n;; *) exit 2 ;; esac\n',
    )
    layout = "rc dcmi_init * -8255\nchip 0 0 0 4\nchip 0 1 1 5\nchip 1 0 2 6\nchip 1 1 3 7\n"
    layout += "str chip_name * Ascend950PR\nint board_id * 0x50\n"
    config = tmp_path / "double.conf"
    config.write_text(layout)
    args = ("--library", str(dcmi_double_path), "--hccn-tool", str(tool), "--hccn-timeout", str(TIMEOUT_S))
    env = {"DCMI_DOUBLE_CONFIG": str(config)}
    with running_exporter(tmp_path / "run", *args, backend="dcmi", env=env) as ep:
        async with ep.client() as client:
            await until(lambda: len(recorded(leftovers)) >= 1, START_S, "the first wedged run (logic 0)")
            await asyncio.sleep(BOUND_S)  # past the first round: logic 1, 2 and 3 read, all ports up
            assert [await chip_codes(client, i) for i in range(4)] == [[]] * 4

            config.write_text(layout + f"codes 0 {UB_DOWN}\ncodes 1 {UB_DOWN}\n")  # a fresh fault
            changed_at = time.monotonic()

            async def separated() -> bool:
                return UB_SEPARATE in await chip_codes(client, 1)

            # Two rounds of at most max(0.2, 0.5) s each after the poll (0.2 s) that sees the code.
            await until(separated, 0.2 + 2 * TIMEOUT_S + 2.0, "logic 1's 020001002 while logic 0 wedges")
            assert time.monotonic() - changed_at < 0.2 + 2 * TIMEOUT_S + 2.0
            assert await chip_codes(client, 1) == [UB_DOWN, UB_SEPARATE]
            await until(lambda: len(recorded(leftovers)) >= 2, BOUND_S, "logic 0 read (and wedged) again")
            assert "-g -dev_info -i 1" in calls.read_text().splitlines()

        await asyncio.sleep(BOUND_S)
        for tool_pid, child in recorded(leftovers):
            assert not alive(child), "a wedged run's child outlives its timeout"
            assert group_members(tool_pid) == []
        unreadable = [e for e in ep.logs() if e.get("event") == "950 port state unreadable; UB codes stay as they are"]
        assert [e["logic_id"] for e in unreadable] == [0], "logged once, for the wedged chip only"
        assert not [e for e in ep.logs() if "exc_info" in e or e.get("level") == "critical"]
        assert ep.stop() == 0


# ---------------------------------------------------------------------- the exporter's metric families

LAYOUT_910 = "chip 0 0 0 2\nchip 0 1 1 3\nchip 1 0 2 0\nchip 1 1 3 1\n"
NET_ARGS = ("--net-stats-period", "0.2", "--hccn-timeout", "2")


def metrics_tool(tmp_path: Path, stat_lines: str) -> Path:
    """A 910's tool: `-stat -g` prints `stat_lines` (shell, `$phy` set), `-link -g` says UP,
    `-speed -g` fails, `-link_stat` and `-bandwidth` answer, anything else exits 2."""
    return script(
        tmp_path / "hccn_tool",
        'phy="$2"\n'
        'case "$3" in\n'
        f"  -stat) {stat_lines} ;;\n"
        "  -link) echo 'link status: UP' ;;\n"
        "  -speed) echo 'no such port' >&2; exit 5 ;;\n"
        '  -link_stat) echo "[device $phy]link up count : 1" ;;\n'
        "  -bandwidth) printf 'Bandwidth TX: 1.50 MB/sec\\nBandwidth RX: 2.50 MB/sec\\n' ;;\n"
        "  *) exit 2 ;;\n"
        "esac\n",
    )


def scrape(ep: ExporterProc) -> dict[str, dict[str, float]]:
    """family -> phy id -> value."""
    out: dict[str, dict[str, float]] = {}
    for family in text_string_to_metric_families(httpx.get(ep.metrics_url + "/metrics", timeout=5).text):
        for sample in family.samples:
            if "id" in sample.labels:
                out.setdefault(sample.name, {})[sample.labels["id"]] = sample.value
    return out


async def test_a_failing_link_read_at_debug_level_is_logged_without_a_traceback_and_the_link_metrics_stay(
    dcmi_double_path: Path,  # noqa: F811
    tmp_path: Path,
) -> None:
    tool = metrics_tool(tmp_path, "echo roce_tx_all_pkt_num:1; echo roce_rx_all_pkt_num:2")
    config = tmp_path / "double.conf"
    config.write_text(LAYOUT_910)
    args = ("--library", str(dcmi_double_path), "--hccn-tool", str(tool), *NET_ARGS, "--log-level", "DEBUG")
    with running_exporter(tmp_path / "run", *args, backend="dcmi", env={"DCMI_DOUBLE_CONFIG": str(config)}) as ep:

        def linked() -> dict[str, dict[str, float]] | None:
            families = scrape(ep)
            return families if len(families.get("npu_chip_info_link_status", {})) == 4 else None

        families = await until(linked, START_S, "every chip's link state")
        await asyncio.sleep(1.0)  # several more net rounds at DEBUG
        families = scrape(ep)
        assert families["npu_chip_info_link_status"] == {"0": 1, "1": 1, "2": 1, "3": 1}
        assert families["npu_chip_link_up_num"] == {"0": 1, "1": 1, "2": 1, "3": 1}
        assert "npu_chip_link_speed" not in families, "the failed speed read shows no value"
        logs = ep.logs()
    failed = [e for e in logs if e.get("event") == "hccn_tool link read failed"]
    assert failed and all(e["level"] == "debug" and e["command"] == "-speed -g" for e in failed), failed[:2]
    assert "no such port" in failed[0]["error"]
    assert not [e for e in logs if "exc_info" in e or "Traceback" in str(e.get("error", ""))]
    assert not [e for e in logs if e.get("event") == "network read failed"]


async def test_counters_outside_their_range_are_not_exported_and_logged_once_per_chip_and_counter(
    dcmi_double_path: Path,  # noqa: F811
    tmp_path: Path,
) -> None:
    # phy 3 prints a negative and an over-uint64 counter; every chip a good one.
    stat_lines = (
        'echo roce_tx_all_pkt_num:7; [ "$phy" = 3 ] && '
        "{ echo mac_rx_bad_pkt_num:-9200000000000000000; echo mac_tx_bad_pkt_num:18446744073709551616; }; "
        "echo mac_rx_fcs_err_pkt_num:18446744073709551615"
    )
    tool = metrics_tool(tmp_path, stat_lines)
    config = tmp_path / "double.conf"
    config.write_text(LAYOUT_910)
    args = ("--library", str(dcmi_double_path), "--hccn-tool", str(tool), *NET_ARGS)
    with running_exporter(tmp_path / "run", *args, backend="dcmi", env={"DCMI_DOUBLE_CONFIG": str(config)}) as ep:

        def counted() -> dict[str, dict[str, float]] | None:
            families = scrape(ep)
            return families if len(families.get("npu_chip_roce_tx_all_pkt_num", {})) == 4 else None

        await until(counted, START_S, "every chip's RoCE counters")
        await asyncio.sleep(1.0)  # several more net rounds
        families = scrape(ep)
        logs = ep.logs()
    assert families["npu_chip_roce_tx_all_pkt_num"] == {"0": 7, "1": 7, "2": 7, "3": 7}
    assert families["npu_chip_mac_rx_bad_pkt_num"] == {"0": 0, "1": 0, "2": 0}, "phy 3's -9.2e18: no sample"
    assert families["npu_chip_mac_tx_bad_pkt_num"] == {"0": 0, "1": 0, "2": 0}, "phy 3's 2**64: no sample"
    assert families["npu_chip_info_rx_fcs_num"] == dict.fromkeys("0123", float(2**64 - 1)), "the largest uint64 is one"
    dropped = [e for e in logs if e.get("event") == "counter out of range; not exported"]
    assert sorted((e["chip"], e["counter"], e["value"]) for e in dropped) == [
        ("Ascend910-3", "mac_rx_bad_pkt_num", "-9200000000000000000"),
        ("Ascend910-3", "mac_tx_bad_pkt_num", "18446744073709551616"),
    ], "once per chip and counter, over many rounds"
    assert all(e["level"] == "warning" for e in dropped)


# ---------------------------------------------------------------------- a 950 port table of 10,000 rows


def huge_table_tool(tmp_path: Path, calls: Path) -> Path:
    rows = tmp_path / "dev_info"
    lines = ["+---+", "| UdieID | PortID | Speed | PortType | Link Status | Media Type |", "+---+"]
    lines += [f"| {i // 64} | {i % 64} | 200 | UB | DOWN | Optical |" for i in range(10_000)]
    rows.write_text("\n".join([*lines, "+---+"]) + "\n")
    return script(
        tmp_path / "hccn_tool",
        f'echo "$*" >> {calls}\ncase "$*" in *-dev_info*) cat {rows} ;; *-port_info*) echo "port_enable : on" ;; '
        '*) echo "tx_busi_flit_num : 1"; echo "rx_busi_flit_num : 1" ;; esac\n',
    )


async def test_a_port_table_of_10000_rows_is_refused_with_one_tool_run_and_logged_once(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    calls = tmp_path / "calls"
    tool = HccnTool(huge_table_tool(tmp_path, calls))
    traffic, ports = HccnTraffic(tool), HccnUbPorts(tool)
    chip0 = chip(0, 0, "Ascend950PR")
    with caplog.at_level(logging.INFO, logger="dcmi_exporter.backends.dcmi.hccn"):
        async with asyncio.timeout(10):  # a table read row by row would take 10,000 runs per chip
            for _ in range(3):  # three rounds
                assert await traffic.traffic(chip0) is None
                with pytest.raises(HccnError, match="more than 64 rows"):
                    await ports.snapshot(0)
    runs = calls.read_text().splitlines()
    assert runs == ["-g -dev_info -i 0"] * 6, "one -dev_info run per read, no port run"
    warnings = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert [r.getMessage() for r in warnings] == [
        "no network traffic for hang detection; AI core, HBM and CPU decide until it is back"
    ], "logged once for the chip, not every round"
    assert "more than 64 rows" in warnings[0].__dict__["error"]
