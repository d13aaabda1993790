"""hccn_tool: the parsers (issue 24's rows, and hccn_tool_test.go's tables named after their Go
tests) and the runner over fake tools (scripts in a tmp dir)."""

from __future__ import annotations

import asyncio
import logging
import os
import stat
import time
from pathlib import Path

import pytest
from ascend_common.chips import ChipAddress
from ascend_common.schemas.exporter import Chip
from ascend_common.schemas.reading import Reading
from dcmi_exporter.backends.dcmi.hccn import (
    OUTPUT_LIMIT,
    HccnError,
    HccnRoceLink,
    HccnTool,
    HccnTraffic,
    HccnUbPorts,
    parse_counters,
    parse_dev_info,
    parse_link_status,
    parse_stat,
    parse_ub_stat,
    roce_stats,
    roce_traffic,
    ub_counter,
)
from dcmi_exporter.node.snapshot import chip_discovered, placeholder_static

SEPARATOR = "+--------+--------+--------+----------+-------------+------------+"
HEADER = "| UdieID | PortID | Speed  | PortType | Link Status | Media Type |"


def table(*rows: str) -> str:
    """hccnToolTable: separator, header, separator, rows, separator."""
    return "\n".join([SEPARATOR, HEADER, SEPARATOR, *rows, SEPARATOR])


SAMPLE_DEV_INFO = table(
    "| 0      | 4      | 200    | ETH      | DOWN        | Electrical |",
    "| 0      | 5      | 200    | ETH      | UP          | Electrical |",
    "| 1      | 8      | 200    | UB       | DOWN        | Optical    |",
    "| 1      | 9      | 200    | UB       | UP          | Optical    |",
)


# ---------------------------------------------------------------------- parsers


def test_roce_stat_issue_row() -> None:
    assert roce_traffic(parse_stat("roce_tx_all_pkt_num:120\nroce_rx_all_pkt_num:30")) == (120, 30)


@pytest.mark.parametrize(
    ("text", "parsed"),
    [
        ("a:1\nb:2\n", {"a": 1, "b": 2}),
        ("a: 1\n", {}),  # no trim: Atoi refuses " 1"
        (" a:1\n", {" a": 1}),  # nor is the key trimmed
        ("a:\nb:x\nc:1:2\nd:-3\ne:+4\nf:1_0\n", {"d": -3, "e": 4}),
        ("", {}),
    ],
)
def test_get_npu_stat_info(text: str, parsed: dict[str, int]) -> None:  # GetNPUStatInfo's loop
    assert parse_stat(text) == parsed


def test_roce_stat_without_a_counter_is_unreadable() -> None:
    with pytest.raises(HccnError, match="roce_rx_all_pkt_num"):
        roce_traffic(parse_stat("roce_tx_all_pkt_num:120\n"))


def test_dev_info_issue_row() -> None:
    assert parse_dev_info(table("| 0 | 4 | 200 | ETH | DOWN | Electrical |")) == {0: [4]}


@pytest.mark.parametrize(  # TestParseDeviceTable
    ("name", "text", "want"),
    [
        ("parse mixed ETH and UB ports", SAMPLE_DEV_INFO, {0: [4, 5], 1: [8, 9]}),
        (
            "stop at third separator",
            table("| 0 | 4 | 200 | ETH | DOWN | Electrical |") + "\n| 1 | 8 | 2 | UB | UP | O |",
            {0: [4]},
        ),
        ("empty lines", "", None),
        ("only header no data", table(), None),
        ("too few columns", table("| 0      | 4      | ETH      | DOWN        |"), None),
        ("non-integer UdieID", table("| ab     | 4      | 200    | ETH      | DOWN        | Electrical |"), None),
    ],
)
def test_parse_device_table(name: str, text: str, want: dict[int, list[int]] | None) -> None:
    if want is None:
        with pytest.raises(HccnError):
            parse_dev_info(text)
    else:
        assert parse_dev_info(text) == want, name


def test_ub_stat_na_is_skipped() -> None:
    stat = parse_ub_stat("tx_busi_flit_num : NA\nrx_busi_flit_num : 250\n")
    assert stat == {"tx_busi_flit_num": "NA", "rx_busi_flit_num": "250"}
    assert ub_counter(stat["tx_busi_flit_num"]) == 0
    assert ub_counter(stat["rx_busi_flit_num"]) == 250


@pytest.mark.parametrize(
    ("value", "counted"),
    [("12", 12), ("0", 0), ("-5", 0), ("not supported", 0), ("", 0), (None, 0), ("1.5", 0), ("NA", 0)],
)
def test_get_int_data_from_str(value: str | None, counted: int) -> None:  # GetIntDataFromStr, then > 0
    assert ub_counter(value) == counted


# ---------------------------------------------------------------------- fake tools


def tool(tmp_path: Path, body: str, name: str = "hccn_tool") -> Path:
    path = tmp_path / name
    path.write_text("#!/bin/sh\n" + body)
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path


def chip(logic: int, phy: int, chip_name: str = "Ascend910B3") -> Chip:
    static = placeholder_static(-8005).model_copy(update={"chip_name": Reading[str].ok(chip_name)})
    return chip_discovered(ChipAddress(card_id=logic, device_id=0, logic_id=logic, phy_id=phy), static)


ROCE = 'echo "roce_tx_all_pkt_num:1000"; echo "roce_rx_all_pkt_num:500"\n'


async def test_roce_traffic_runs_the_tool_with_the_phy_id(tmp_path: Path) -> None:
    log_file = tmp_path / "args"
    path = tool(tmp_path, f'echo "$@" >> {log_file}\n{ROCE}')
    traffic = HccnTraffic(HccnTool(path))
    assert await traffic.traffic(chip(0, 6)) == (1000, 500)
    assert log_file.read_text() == "-i 6 -stat -g\n"


async def test_the_tool_sees_path_and_ld_library_path_only(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LD_LIBRARY_PATH", "/opt/x")
    monkeypatch.setenv("SECRET_TOKEN", "s3cr3t")
    path = tool(tmp_path, "env\n")
    out = await HccnTool(path).run()
    names = {line.split("=", 1)[0] for line in out.splitlines()} - {"PWD", "SHLVL", "_"}  # the shell's own
    assert names == {"PATH", "LD_LIBRARY_PATH"}
    assert "LD_LIBRARY_PATH=/opt/x" in out.splitlines()


async def test_stdout_is_capped_at_1_mib(tmp_path: Path) -> None:
    path = tool(tmp_path, "head -c 3000000 /dev/zero | tr '\\0' 'a'\n")
    out = await HccnTool(path).run()
    assert len(out) == OUTPUT_LIMIT


async def test_a_stuck_tool_is_killed_and_only_that_rounds_traffic_is_unknown(tmp_path: Path) -> None:
    marker = tmp_path / "stuck"
    pid_file = tmp_path / "pid"
    path = tool(tmp_path, f"if [ -e {marker} ]; then echo $$ > {pid_file}; exec sleep 30; fi\n{ROCE}")
    traffic = HccnTraffic(HccnTool(path, timeout_s=0.3))
    assert await traffic.traffic(chip(0, 0)) == (1000, 500)
    marker.touch()
    started = time.monotonic()
    assert await traffic.traffic(chip(0, 0)) is None
    assert time.monotonic() - started < 5
    stuck_pid = int(pid_file.read_text())
    with pytest.raises(ProcessLookupError):  # killed and reaped, not left to sleep
        os.kill(stuck_pid, 0)
    marker.unlink()
    assert await traffic.traffic(chip(0, 0)) == (1000, 500)


@pytest.mark.parametrize("body", ["echo garbage; echo more:garbage\n", "echo 'hccn_tool: device busy' >&2; exit 3\n"])
async def test_garbage_or_failure_is_logged_once_per_chip(
    tmp_path: Path, body: str, caplog: pytest.LogCaptureFixture
) -> None:
    traffic = HccnTraffic(HccnTool(tool(tmp_path, body)))
    chips = [chip(0, 2), chip(1, 3)]
    with caplog.at_level(logging.INFO, logger="dcmi_exporter.backends.dcmi.hccn"):
        for _ in range(4):  # four rounds
            assert [await traffic.traffic(c) for c in chips] == [None, None]
    lines = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert sorted(r.__dict__["logic_id"] for r in lines) == [0, 1]
    if "exit 3" in body:
        assert "device busy" in lines[0].__dict__["error"]


async def test_a_missing_tool_is_unknown_traffic(tmp_path: Path) -> None:
    traffic = HccnTraffic(HccnTool(tmp_path / "absent"))
    assert await traffic.traffic(chip(0, 0)) is None


async def test_at_most_two_run_at_once(tmp_path: Path) -> None:
    trace = tmp_path / "trace"
    path = tool(tmp_path, f"echo start >> {trace}; sleep 0.3; echo end >> {trace}\n")
    runner = HccnTool(path)
    await asyncio.gather(*(runner.run() for _ in range(6)))
    running = peak = 0
    for line in trace.read_text().split():
        running += 1 if line == "start" else -1
        peak = max(peak, running)
    assert peak == 2


async def test_950_port_table_read_once_then_ub_stat_per_port(tmp_path: Path) -> None:
    log_file = tmp_path / "args"
    dev_info = "\n".join(f"echo '{line}'" for line in SAMPLE_DEV_INFO.split("\n"))
    body = f"""echo "$@" >> {log_file}
case "$*" in
  *-dev_info*) {dev_info.replace(chr(10), "; ")} ;;
  *"-p 4"*) echo "tx_busi_flit_num : 100"; echo "rx_busi_flit_num : NA" ;;
  *"-p 5"*) exit 1 ;;
  *) echo "tx_busi_flit_num : 10"; echo "rx_busi_flit_num : 20" ;;
esac
"""
    traffic = HccnTraffic(HccnTool(tool(tmp_path, body)))
    chips = [chip(0, 0, "Ascend950PR"), chip(1, 1, "Ascend950PR")]
    assert await traffic.traffic(chips[0]) == (100 + 10 + 10, 0 + 20 + 20)
    assert await traffic.traffic(chips[1]) == (120, 40)
    calls = log_file.read_text().splitlines()
    assert calls.count("-g -dev_info -i 0") == 1 and not any("dev_info -i 1" in c for c in calls)
    assert "-g -stat -i 1 -u 1 -p 9" in calls


# ---------------------------------------------------------------------- RoCE link (issue 26 item 2)


@pytest.mark.parametrize(
    ("text", "status"),
    [
        ("link status: DOWN\n", "DOWN"),  # the reference's comment: "success result example is: link status: DOWN"
        ("link status: UP\n", "UP"),
        ("link status: UP", "UP"),
        ("link status:\nUP\n", None),  # newlines removed, not replaced: two parts
        ("link  status: UP\n", None),  # split on single spaces: four parts
        ("link status: UP (100G)\n", None),
        ("", None),
        ("link status: \n", ""),  # three parts, the third empty: no "DOWN", so no link-down code either
    ],
)
def test_get_npu_link_status(text: str, status: str | None) -> None:  # GetNPULinkStatus's parse
    if status is None:
        with pytest.raises(HccnError, match="-link output"):
            parse_link_status(text)
    else:
        assert parse_link_status(text) == status


async def test_roce_link_runs_the_tool_with_the_phy_id(tmp_path: Path) -> None:
    log_file = tmp_path / "args"
    path = tool(tmp_path, f'echo "$@" >> {log_file}\necho "link status: DOWN"\n')
    assert await HccnRoceLink(HccnTool(path)).link_status(chip(1, 5)) == "DOWN"
    assert log_file.read_text() == "-i 5 -link -g\n"


async def test_a_failing_link_read_is_an_hccn_error(tmp_path: Path) -> None:
    path = tool(tmp_path, 'echo "device 5 not found" >&2; exit 1\n')
    with pytest.raises(HccnError, match="device 5 not found"):
        await HccnRoceLink(HccnTool(path)).link_status(chip(1, 5))


# ---------------------------------------------------------------------- hostile tools (issue 32)


async def test_a_run_its_caller_gives_up_on_leaves_no_process(tmp_path: Path) -> None:
    pids = tmp_path / "pids"
    path = tool(tmp_path, f'sleep 60 & echo "$$ $!" > {pids}; wait\n')
    runner = HccnTool(path)  # 10 s timeout: the caller's 0.3 s deadline comes first
    started = time.monotonic()
    with pytest.raises(TimeoutError):
        async with asyncio.timeout(0.3):
            await runner.run()
    assert time.monotonic() - started < 2.5, "a cancelled run ends within the reap bound"
    group, child = (int(p) for p in pids.read_text().split())
    for pid in (group, child):
        deadline = time.monotonic() + 2
        while _running(pid) and time.monotonic() < deadline:
            await asyncio.sleep(0.02)
        assert not _running(pid), pid


def _running(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0] not in ("Z", "X")
    except FileNotFoundError:
        return False


@pytest.mark.parametrize(
    ("text", "counters", "dropped"),
    [
        ("a:1\nb:0\n", {"a": 1, "b": 0}, {}),
        ("a:18446744073709551615\n", {"a": 2**64 - 1}, {}),  # the largest uint64
        ("a:18446744073709551616\n", {}, {"a": "18446744073709551616"}),
        ("a:-9200000000000000000\n", {}, {"a": "-9200000000000000000"}),
        ("a:-1\nb:+7\n", {"b": 7}, {"a": "-1"}),
        ("a:" + "9" * 5000 + "\n", {}, {"a": "9" * 22}),  # kept short in the log, never converted
        ("a:NA\nb: 3\nc:1:2\nd:\n", {}, {}),  # not a number, a space, two colons, nothing: skipped
    ],
)
def test_counters_are_unsigned_64_bit(text: str, counters: dict[str, int], dropped: dict[str, str]) -> None:
    assert parse_counters(text) == (counters, dropped)


def test_a_dropped_roce_counter_is_none_a_missing_one_0() -> None:
    stats = roce_stats({"roce_tx_all_pkt_num": 5}, ["mac_rx_bad_pkt_num"])
    assert (stats["roce_tx_all_pkt_num"], stats["mac_rx_bad_pkt_num"], stats["roce_rx_all_pkt_num"]) == (5, None, 0)
    assert roce_stats({}, ["mac_rx_bad_pkt_num"])["mac_rx_bad_pkt_num"] is None  # read, out of range: a RoCE port


def test_a_table_of_64_rows_is_read_and_65_refused() -> None:
    rows = [f"| {i // 8} | {i % 8} | 200 | UB | UP | Optical |" for i in range(65)]
    assert sum(len(p) for p in parse_dev_info(table(*rows[:64])).values()) == 64
    with pytest.raises(HccnError, match="more than 64 rows"):
        parse_dev_info(table(*rows))


async def test_the_950_port_table_is_read_again_after_its_ttl_or_when_no_port_answers(tmp_path: Path) -> None:
    log_file, ports = tmp_path / "args", tmp_path / "ports"
    ports.write_text("| 0 | 4 | 200 | UB | UP | Optical |\n")
    # A port answers (its id as both counters) while it is in the table.
    body = f"""echo "$@" >> {log_file}
case "$*" in
  *-dev_info*) echo '{SEPARATOR}'; echo '{HEADER}'; echo '{SEPARATOR}'; cat {ports}; echo '{SEPARATOR}' ;;
  *) grep -q "| $8 |" {ports} || exit 1; echo "tx_busi_flit_num : $8"; echo "rx_busi_flit_num : $8" ;;
esac
"""
    traffic = HccnTraffic(HccnTool(tool(tmp_path, body)))
    c = chip(0, 0, "Ascend950PR")
    assert await traffic.traffic(c) == (4, 4)
    ports.write_text("| 0 | 6 | 200 | UB | UP | Optical |\n")  # port 4 gone, 6 new
    assert await traffic.traffic(c) is None, "no port of the cached table answers"
    assert await traffic.traffic(c) == (6, 6), "read again after a round with no port answering"
    ports.write_text("| 0 | 4 | 200 | UB | UP | Optical |\n| 0 | 6 | 200 | UB | UP | Optical |\n")
    assert await traffic.traffic(c) == (6, 6), "within the TTL the table is kept"
    traffic.ports.ttl_s = 0.0
    assert await traffic.traffic(c) == (10, 10), "past the TTL it is read again"
    assert log_file.read_text().splitlines().count("-g -dev_info -i 0") == 3


async def test_the_wired_state_of_ports_gone_from_the_table_is_forgotten(tmp_path: Path) -> None:
    ports = tmp_path / "ports"
    body = f"""case "$*" in
  *-dev_info*) echo '{SEPARATOR}'; echo '{HEADER}'; echo '{SEPARATOR}'; cat {ports}; echo '{SEPARATOR}' ;;
  *-port_info*) echo "port_enable : on" ;;
esac
"""
    reader = HccnUbPorts(HccnTool(tool(tmp_path, body)))
    for port in range(5):
        ports.write_text(f"| 0 | {port} | 200 | UB | DOWN | Optical |\n")
        assert (await reader.snapshot(0)).ub_down == 1
    assert list(reader._wired) == [(0, 0, 4)]
