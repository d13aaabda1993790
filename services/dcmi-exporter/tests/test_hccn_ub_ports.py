"""The 950's down-port snapshot from hccn_tool (`GetUBPortsDownSnapshot`): the port table parser
(hccn_tool_test.go's TestGetAllUBPortsFromHccnLines), the count (TestGetUBPortsDownSnapshot) and
HccnUbPorts over a fake tool whose ports a test sets through files."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest
from ascend_common.schemas.exporter import UbPorts
from dcmi_exporter.backends.dcmi.hccn import (
    HccnError,
    HccnTool,
    HccnUbPorts,
    PortRow,
    count_down,
    parse_port_info,
    parse_port_table,
)

SEPARATOR = "+--------+--------+--------+----------+-------------+------------+"
HEADER = "| UdieID | PortID | Speed  | PortType | Link Status | Media Type |"


def table(*rows: str) -> str:
    """hccnToolTable: separator, header, separator, rows, separator."""
    return "\n".join([SEPARATOR, HEADER, SEPARATOR, *rows, SEPARATOR])


def row(udie: int, port: int, kind: str, status: str) -> str:
    return f"| {udie}      | {port}      | 200    | {kind}      | {status}        | Optical    |"


SAMPLE = table(row(0, 4, "ETH", "DOWN"), row(0, 5, "ETH", "UP"), row(1, 8, "UB", "DOWN"), row(1, 9, "UB", "UP"))


@pytest.mark.parametrize(
    ("name", "text", "want"),
    [
        (
            "01-parse mixed ETH and UB ports with up/down status",
            SAMPLE,
            [
                PortRow(0, 4, "ETH", "DOWN"),
                PortRow(0, 5, "ETH", "UP"),
                PortRow(1, 8, "UB", "DOWN"),
                PortRow(1, 9, "UB", "UP"),
            ],
        ),
        ("02-only header and separators, no data rows", table(), []),
        (
            "03-data row with too few columns should return error",
            table("| 0      | 4      | ETH      | DOWN        |"),
            None,
        ),
        (
            "04-data row with non-integer UdieID should return error",
            table(row(0, 4, "ETH", "DOWN").replace("0 ", "ab", 1)),
            None,
        ),
        ("05-empty output should return empty ports without error", "", []),
        (
            "06-stop parsing at the third separator and ignore trailing data",
            table(row(0, 4, "ETH", "DOWN")) + "\n" + row(1, 8, "UB", "DOWN"),
            [PortRow(0, 4, "ETH", "DOWN")],
        ),
    ],
)
def test_get_all_ub_ports_from_hccn_lines(name: str, text: str, want: list[PortRow] | None) -> None:
    if want is None:
        with pytest.raises(HccnError):
            parse_port_table(text)
    else:
        assert parse_port_table(text) == want, name


@pytest.mark.parametrize(
    ("name", "rows", "wired", "want"),
    [
        (
            "01-mix bonding down, ub down and up ports, snapshot should aggregate down count by type",
            [
                PortRow(0, 4, "ETH", "DOWN"),
                PortRow(0, 5, "ETH", "UP"),
                PortRow(1, 8, "UB", "DOWN"),
                PortRow(1, 9, "UB", "DOWN"),
                PortRow(1, 10, "UB", "UP"),
            ],
            True,
            UbPorts(ub_down=2, bonding_down=1),
        ),
        (
            "02-all ports up, snapshot should be zero",
            [PortRow(0, 4, "ETH", "UP"), PortRow(1, 8, "UB", "UP")],
            True,
            UbPorts(ub_down=0, bonding_down=0),
        ),
        ("04-empty ports list, snapshot down count should be zero", [], True, UbPorts(ub_down=0, bonding_down=0)),
        (
            "unwired UB ports are not counted",
            [PortRow(1, 8, "UB", "DOWN"), PortRow(0, 4, "ETH", "DOWN")],
            False,
            UbPorts(ub_down=0, bonding_down=1),
        ),
    ],
)
def test_get_ub_ports_down_snapshot(name: str, rows: list[PortRow], wired: bool, want: UbPorts) -> None:
    assert count_down(rows, lambda _row: wired) == want, name


def test_port_info_is_trimmed_key_value() -> None:
    assert parse_port_info("port_enable : on\nspeed: 200\nbad line\n")["port_enable"] == "on"


# ---------------------------------------------------------------------- over a fake tool


def fake_tool(tmp_path: Path) -> Path:
    """A tool that prints `<state>/dev_info_<logic>` and `<state>/port_<logic>_<udie>_<port>`, and
    appends its arguments to `<state>/calls`."""
    state = tmp_path / "state"
    state.mkdir()
    path = tmp_path / "hccn_tool"
    path.write_text(
        f"""#!/bin/sh
echo "$*" >> {state}/calls
case "$*" in
  "-g -dev_info -i "*) cat {state}/dev_info_$4 ;;
  "-g -port_info -i "*) f={state}/port_$4_$6_$8; [ -e $f ] || exit 3; cat $f ;;
  *) exit 2 ;;
esac
"""
    )
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return state


async def test_a_wired_down_port_counts_an_unwired_one_does_not_and_port_enable_is_read_once(tmp_path: Path) -> None:
    state = fake_tool(tmp_path)
    (state / "dev_info_3").write_text(table(row(0, 1, "UB", "DOWN"), row(0, 2, "UB", "DOWN"), row(1, 4, "ETH", "DOWN")))
    (state / "port_3_0_1").write_text("port_enable : on\n")
    (state / "port_3_0_2").write_text("port_enable : off\n")
    ports = HccnUbPorts(HccnTool(tmp_path / "hccn_tool"))
    assert await ports.snapshot(3) == UbPorts(ub_down=1, bonding_down=1)
    assert await ports.snapshot(3) == UbPorts(ub_down=1, bonding_down=1)
    calls = (state / "calls").read_text().splitlines()
    assert calls.count("-g -dev_info -i 3") == 2  # the table every time
    assert calls.count("-g -port_info -i 3 -u 0 -p 1") == 1  # whether wired: once
    assert calls.count("-g -port_info -i 3 -u 0 -p 2") == 1


async def test_an_unreadable_port_enable_counts_as_wired_and_is_asked_again(tmp_path: Path) -> None:
    state = fake_tool(tmp_path)
    (state / "dev_info_0").write_text(table(row(0, 1, "UB", "DOWN")))
    ports = HccnUbPorts(HccnTool(tmp_path / "hccn_tool"))
    assert await ports.snapshot(0) == UbPorts(ub_down=1, bonding_down=0)
    (state / "port_0_0_1").write_text("port_enable : off\n")
    assert await ports.snapshot(0) == UbPorts(ub_down=0, bonding_down=0)


async def test_the_port_comes_back_up(tmp_path: Path) -> None:
    state = fake_tool(tmp_path)
    (state / "port_0_0_1").write_text("port_enable : on\n")
    (state / "dev_info_0").write_text(table(row(0, 1, "UB", "DOWN")))
    ports = HccnUbPorts(HccnTool(tmp_path / "hccn_tool"))
    assert await ports.snapshot(0) == UbPorts(ub_down=1, bonding_down=0)
    (state / "dev_info_0").write_text(table(row(0, 1, "UB", "UP")))
    assert await ports.snapshot(0) == UbPorts(ub_down=0, bonding_down=0)


async def test_a_failing_table_is_an_error(tmp_path: Path) -> None:
    fake_tool(tmp_path)  # no dev_info file: cat fails
    with pytest.raises(HccnError):
        await HccnUbPorts(HccnTool(tmp_path / "hccn_tool")).snapshot(0)
