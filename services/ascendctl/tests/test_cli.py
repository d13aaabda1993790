"""ascendctl against a real sim exporter and fault-manager (processes on Unix sockets)."""

from __future__ import annotations

import asyncio
import json
import socket
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from ascendctl.cli import app
from typer.testing import CliRunner, Result

from tests.support.exporter import ExporterProc, start_exporter
from tests.support.faultmanager import FaultManagerProc, start_fault_manager, wait_ready
from tests.support.waiting import until

RESTART_NPU = "8C1FA006"


@dataclass
class Stack:
    exporter: ExporterProc
    fm: FaultManagerProc
    token_file: Path

    def run(self, *args: str) -> Result:
        env = {
            "ASCENDCTL_EXPORTER_SOCKET": str(self.exporter.socket),
            "ASCENDCTL_FAULT_MANAGER_SOCKET": str(self.fm.socket),
            "COLUMNS": "220",
        }
        return CliRunner().invoke(app, list(args), env=env)

    def json(self, *args: str) -> object:
        result = self.run("--json", *args)
        assert result.exit_code == 0, result.output
        return json.loads(result.stdout)


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    tmp = tmp_path_factory.mktemp("ascendctl")
    exporter = start_exporter(tmp / "exporter")
    fm = start_fault_manager(tmp / "fm", exporter)
    try:
        asyncio.run(wait_ready(fm))
        yield Stack(exporter, fm, tmp / "exporter" / "tokens")
    finally:
        fm.stop()
        exporter.stop()


def chip_names(stack: Stack) -> dict[int, str]:
    body = stack.json("chips")
    assert isinstance(body, dict)
    return {c["logic_id"]: c["name"] for c in body["chips"]}


def verdicts(stack: Stack) -> dict[str, dict[str, object]]:
    body = stack.json("verdicts")
    assert isinstance(body, dict)
    return {v["chip"]: v for v in body["verdicts"]}


def test_chips_table_lists_eight_chips(stack: Stack) -> None:
    result = stack.run("chips")
    assert result.exit_code == 0, result.output
    # Not a terminal: kubectl's plain columns, a header and one line per chip (the "8 chips" title is a
    # terminal's only).
    header, *lines = result.stdout.splitlines()
    assert header.split()[:3] == ["LOGIC", "PHY", "NAME"]
    assert len(lines) == 8
    for name in chip_names(stack).values():
        assert name in result.stdout


def test_json_chips_is_the_api_json(stack: Stack) -> None:
    body = stack.json("chips")
    assert isinstance(body, dict)
    assert len(body["chips"]) == 8
    assert {"last_event_id", "chips"} <= body.keys()


async def test_inject_then_verdict_and_history(stack: Stack) -> None:
    name = chip_names(stack)[2]
    await until(lambda: len(verdicts(stack)) == 8, what="a verdict for each of the 8 chips")
    result = stack.run("sim", "inject", "--chip", "2", "--code", RESTART_NPU, "--token-file", str(stack.token_file))
    assert result.exit_code == 0, result.output
    assert "injected 8C1FA006" in result.stdout

    await until(lambda: verdicts(stack)[name]["fault_level"] == "RestartNPU", what=f"{name}'s RestartNPU verdict")
    v = verdicts(stack)[name]
    assert v["schedulable"] is False and v["codes"] == [RESTART_NPU]
    table = stack.run("verdicts")
    assert table.exit_code == 0, table.output
    [row] = [line for line in table.stdout.splitlines() if line.split()[:1] == [name]]
    assert "RestartNPU" in row and RESTART_NPU in row

    def recorded() -> bool:
        page = stack.json("faults", "--chip", name)
        assert isinstance(page, dict)
        return any(f["code"] == RESTART_NPU and f["assertion"] == "occur" for f in page["faults"])

    await until(recorded, what=f"{name}'s fault in the history")
    result = stack.run("faults", "--chip", name, "--limit", "5")
    assert result.exit_code == 0, result.output
    assert RESTART_NPU in result.stdout and "occur" in result.stdout


async def test_separate_and_unseparate(stack: Stack) -> None:
    name = chip_names(stack)[5]
    result = stack.run("separate", name)
    assert result.exit_code == 0, result.output
    assert "manually separated" in result.stdout
    await until(lambda: verdicts(stack)[name]["manually_separated"] is True, what=f"{name} manually separated")
    assert verdicts(stack)[name]["schedulable"] is False

    result = stack.run("unseparate", name)
    assert result.exit_code == 0, result.output
    await until(lambda: verdicts(stack)[name]["manually_separated"] is False, what=f"{name} released")


def test_deviceinfo_shows_the_configmap(stack: Stack) -> None:
    result = stack.run("deviceinfo")
    assert result.exit_code == 0, result.output
    assert "mindx-dl-deviceinfo-node-a" in result.stdout
    assert "DeviceInfoCfg" in result.stdout
    objects = stack.json("deviceinfo")
    assert isinstance(objects, list) and len(objects) == 1
    assert "DeviceInfoCfg" in objects[0]["data"]


def test_api_errors_print_the_detail(stack: Stack) -> None:
    result = stack.run("separate", "Ascend910-99")
    assert result.exit_code == 1
    assert "no chip 'Ascend910-99' on this node" in result.stderr
    assert "Traceback" not in result.output

    # this fault-manager runs without --hot-reset: the 409 reason is printed
    result = stack.run("reset", chip_names(stack)[0])
    assert result.exit_code == 1
    assert "--hot-reset" in result.stderr


def test_sim_inject_needs_a_sim_token(stack: Stack, tmp_path: Path) -> None:
    tokens = tmp_path / "tokens"
    tokens.write_text("t-reset-" + "1" * 24 + " reset\n")
    result = stack.run("sim", "inject", "--chip", "1", "--code", RESTART_NPU, "--token-file", str(tokens))
    assert result.exit_code == 1
    assert "no token with scope 'sim'" in result.stderr


def test_unreachable_socket_exits_2_naming_it(tmp_path: Path) -> None:
    missing = tmp_path / "missing.sock"
    result = CliRunner().invoke(app, ["--exporter-socket", str(missing), "chips"])
    assert result.exit_code == 2
    assert str(missing) in result.stderr and "unreachable" in result.stderr
    assert result.exception is None or isinstance(result.exception, SystemExit)

    # a stale socket file that nobody listens on
    stale = tmp_path / "stale.sock"
    with socket.socket(socket.AF_UNIX) as s:
        s.bind(str(stale))
    result = CliRunner().invoke(app, ["--fault-manager-socket", str(stale), "verdicts"])
    assert result.exit_code == 2
    assert str(stale) in result.stderr and "unreachable" in result.stderr
