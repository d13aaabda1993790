"""ascendctl's output as operators use kubectl's: full values when piped, nothing cut in a terminal,
`-o json|yaml|wide` after every command, the global `--json` kept."""

from __future__ import annotations

import asyncio
import io
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml
from ascendctl.cli import app
from ascendctl.output import Column, console, print_table
from rich.console import Console
from typer.testing import CliRunner, Result

from tests.support.exporter import ExporterProc, start_exporter
from tests.support.faultmanager import FaultManagerProc, start_fault_manager, wait_ready


@dataclass
class A5Node:
    exporter: ExporterProc
    fm: FaultManagerProc

    @property
    def env(self) -> dict[str, str]:
        return {
            "ASCENDCTL_EXPORTER_SOCKET": str(self.exporter.socket),
            "ASCENDCTL_FAULT_MANAGER_SOCKET": str(self.fm.socket),
        }

    def run(self, *args: str) -> Result:
        return CliRunner().invoke(app, list(args), env=self.env | {"COLUMNS": "80"})

    def out(self, *args: str) -> str:
        result = self.run(*args)
        assert result.exit_code == 0, result.output
        return result.stdout


@pytest.fixture(scope="module")
def a5(tmp_path_factory: pytest.TempPathFactory) -> Iterator[A5Node]:
    tmp = tmp_path_factory.mktemp("ascendctl-a5")
    # A long poll period: two commands in a row read the same snapshot (but for one tick, see below).
    exporter = start_exporter(tmp / "exporter", "--poll-period", "60", profile="a5-superpod-8")
    fm = start_fault_manager(tmp / "fm", exporter)
    try:
        asyncio.run(wait_ready(fm))
        yield A5Node(exporter, fm)
    finally:
        fm.stop()
        exporter.stop()


def api_chips(node: A5Node) -> list[dict[str, object]]:
    body = json.loads(node.out("--json", "chips"))
    return list(body["chips"])


def test_ascendctl_chips_piped_through_cat_shows_every_full_family_name_and_hbm_figure(a5: A5Node) -> None:
    # A real pipe, as an operator types it; a narrow COLUMNS must not matter to a pipe.
    env = {k: v for k, v in os.environ.items() if k != "COLUMNS"} | a5.env | {"COLUMNS": "40"}
    piped = subprocess.run(
        f"{sys.executable} -m ascendctl.cli chips | cat", shell=True, env=env, capture_output=True, text=True,
        timeout=60, check=True,
    )  # fmt: skip
    assert "…" not in piped.stdout and "..." not in piped.stdout
    header, *lines = piped.stdout.splitlines()
    assert header.split()[:4] == ["LOGIC", "PHY", "NAME", "FAMILY"]
    chips = api_chips(a5)
    assert len(lines) == len(chips) == 8
    rows = {line.split()[2]: line.split() for line in lines}
    for chip in chips:
        dyn = chip["dynamic"]
        assert isinstance(dyn, dict)
        hbm = dyn["hbm"]["value"]
        row = rows[str(chip["name"])]
        assert row[3] == chip["family"] == "Ascend950"
        assert row[7].split("/")[1] == str(hbm["total_mb"]) == "147456"
        assert row[7].split("/")[0].isdigit()


def equal_twice(node: A5Node, first: tuple[str, ...], second: tuple[str, ...]) -> tuple[object, object]:
    """`first`, `second`, `first` again: a poll tick (every 60 s) falls between at most one pair."""
    a, b, c = (json.loads(node.out(*args)) for args in (first, second, first))
    return (a, b) if a == b else (b, c)


@pytest.mark.parametrize("command", ["chips", "verdicts", "resets", "deviceinfo"])
def test_dash_o_json_after_the_command_equals_the_global_json(a5: A5Node, command: str) -> None:
    got, want = equal_twice(a5, (command, "-o", "json"), ("--json", command))
    assert got == want
    got, want = equal_twice(a5, (command, "--json"), (command, "--output", "json"))
    assert got == want


def test_dash_o_yaml_is_the_same_data(a5: A5Node) -> None:
    as_yaml = yaml.safe_load(a5.out("verdicts", "-o", "yaml"))
    as_json = json.loads(a5.out("verdicts", "-o", "json"))
    assert as_yaml == as_json and len(as_json["verdicts"]) == 8


def test_dash_o_wide_adds_columns(a5: A5Node) -> None:
    narrow = a5.out("chips").splitlines()[0].split()
    wide = a5.out("chips", "-o", "wide").splitlines()[0].split()
    assert wide[: len(narrow)] == narrow
    assert {"CARD", "DEVICE", "CHIP", "PRODUCT", "POWER"} <= set(wide)
    verdicts_wide = a5.out("verdicts", "-o", "wide").splitlines()
    assert "NETWORK" in verdicts_wide[0] and len(verdicts_wide) == 9


def test_global_json_and_another_output_disagree(a5: A5Node) -> None:
    result = a5.run("--json", "chips", "-o", "yaml")
    assert result.exit_code != 0
    assert "disagree" in result.output


def test_an_unknown_output_is_refused(a5: A5Node) -> None:
    result = a5.run("chips", "-o", "table")
    assert result.exit_code == 2
    assert "json" in result.output and "yaml" in result.output


# --- a terminal: nothing cut ------------------------------------------------------------------------

COLUMNS = [
    Column("logic", keep=True), Column("name", keep=True), Column("family", keep=True), Column("state"),
    Column("codes", keep=True), Column("HBM used/total MB", keep=True), Column("a long free text"),
    Column("wide only", wide=True),
]  # fmt: skip
ROWS = [
    [str(i), f"npu-{i}", "Ascend950", "ok", "80E01801,8C1FA006,80CB8009", f"{1000 + i}/147456", "words " * 12, "w"]
    for i in range(8)
]


def terminal(width: int) -> tuple[Console, io.StringIO]:
    buf = io.StringIO()
    return Console(file=buf, force_terminal=True, width=width, highlight=False, color_system=None), buf


@pytest.mark.parametrize("width", [80, 60])
def test_in_a_terminal_no_id_code_or_name_is_cut(width: int) -> None:
    out, buf = terminal(width)
    print_table("8 chips", COLUMNS, ROWS, wide=False, out=out)
    text = buf.getvalue()
    assert "8 chips" in text and "…" not in text
    for row in ROWS:
        for value in row[:6]:
            assert value in text, f"{value!r} cut at width {width}"
    assert "wide only" not in text


def test_plain_columns_are_kubectls() -> None:
    out = Console(file=io.StringIO(), force_terminal=False, width=20)
    print_table("8 chips", COLUMNS, ROWS, wide=True, out=out)
    text = out.file.getvalue()  # type: ignore[attr-defined]
    header, *lines = text.splitlines()
    assert header.startswith("LOGIC   NAME    FAMILY      STATE") and header.endswith("WIDE ONLY")
    assert len(lines) == 8 and "8 chips" not in text
    assert lines[0].split()[:6] == ["0", "npu-0", "Ascend950", "ok", "80E01801,8C1FA006,80CB8009", "1000/147456"]


def test_outside_a_terminal_messages_are_not_wrapped(tmp_path: Path) -> None:
    with (tmp_path / "out").open("w") as f:
        assert console(terminal=False).soft_wrap and not Console(file=f).is_terminal
