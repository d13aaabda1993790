"""Hung-job detection on the dcmi backend: the C double of libdcmi.so, a fake `hccn_tool` (a
script in a tmp dir) and a fake host /proc. The rounds are driven directly (one poll of every
chip, then one detection round), so "sample N" is exact."""

from __future__ import annotations

import logging
import os
import stat
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any, TypeAlias

import pytest
from ascend_common.faults.codes import HANG_CODE
from ascend_common.schemas.exporter import Assertion, EventSource, EventType, FaultEventData
from dcmi_exporter.backends.dcmi.hang_probe import DcmiHangProbe
from dcmi_exporter.node.snapshot import codes_of
from dcmi_exporter.runtime import Exporter
from dcmi_exporter.settings import ExporterSettings

import tests.cdouble.fixtures as _fx
from tests.support.waiting import until

cdouble_build_dir = _fx.cdouble_build_dir
dcmi_double_path = _fx.dcmi_double_path
dcmi_double = _fx.dcmi_double

Control: TypeAlias = Any  # tests/cdouble/fixtures.py:DoubleControl
ROCE = 'echo "roce_tx_all_pkt_num:1000"; echo "roce_rx_all_pkt_num:500"\n'
CLK_TCK = os.sysconf("SC_CLK_TCK")


def fake_tool(tmp_path: Path, body: str) -> Path:
    path = tmp_path / "hccn_tool"
    path.write_text("#!/bin/sh\n" + body)
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path


def fake_proc(tmp_path: Path, cpu_s: dict[int, int]) -> Path:
    root = tmp_path / "proc"
    for pid, seconds in cpu_s.items():
        (root / str(pid)).mkdir(parents=True, exist_ok=True)
        ticks = seconds * CLK_TCK
        (root / str(pid) / "stat").write_text(
            f"{pid} (python3 train.py) S 1 {pid} {pid} 0 -1 0 0 0 0 0 {ticks} 0 0 0\n"
        )
    return root


@pytest.fixture
async def exporter(dcmi_double: Control, tmp_path: Path) -> AsyncIterator[Exporter]:
    # Chip 0 and 1 run pid 42 and 43: idle by every reading (AI core 3 %, HBM 40 %, CPU 7 s).
    for logic, pid in ((0, 42), (1, 43)):
        dcmi_double.set_int("util_aicore", logic, 3)
        dcmi_double.set_int("util_hbm", logic, 40)
        dcmi_double.set_procs(logic, [(pid, 1 << 30)])
    dcmi_double.set_codes(0, [0x80E01801])
    settings = ExporterSettings(
        backend="dcmi",
        library=dcmi_double.path,
        socket=tmp_path / "sock",
        poll_period=60,  # the test polls
        hang_interval=3600,  # the test runs the rounds
        hccn_tool=fake_tool(tmp_path, ROCE),
        host_proc=fake_proc(tmp_path, {42: 7, 43: 7}),
    )
    exp = Exporter.from_settings(settings)
    await exp.start()
    await until(lambda: exp.poller.snapshot.node.ready, what="the first read of every chip")
    try:
        yield exp
    finally:
        await exp.stop()


async def sample(exp: Exporter) -> None:
    """One poll of every chip, then one detection round."""
    for logic in exp.poller.addresses:
        await exp.poller.read_chip(logic)
    assert exp.hang is not None
    await exp.hang.tick()


def hang_faults(exp: Exporter, logic: int) -> list[FaultEventData]:
    events = exp.events.after(0) or []
    return [
        e.item.fault
        for e in events
        if e.item.type is EventType.FAULT
        and e.item.logic_id == logic
        and e.item.fault
        and e.item.fault.code == HANG_CODE
    ]


def codes(exp: Exporter, logic: int) -> list[str]:
    return codes_of(exp.poller.snapshot.by_logic[logic])


async def test_occur_at_sample_6_kept_through_polls_and_recover(exporter: Exporter, dcmi_double: Control) -> None:
    for n in range(1, 6):
        await sample(exporter)
        assert hang_faults(exporter, 0) == [], f"sample {n}"
    await sample(exporter)  # 6
    [occur] = hang_faults(exporter, 0)
    assert (occur.assertion, occur.source, occur.severity) == (Assertion.OCCUR, EventSource.HANG, None)
    assert abs(occur.raised_at_ms / 1000 - exporter.clock.now()) < 5  # ms, not s
    assert [f.assertion for f in hang_faults(exporter, 1)] == [Assertion.OCCUR]
    assert [f.assertion for f in hang_faults(exporter, 2)] == []  # no processes: never
    # dcmi_get_device_errorcode_v2 reports 80E01801 alone, poll after poll: 200001002 stays.
    for _ in range(3):
        for logic in exporter.poller.addresses:
            await exporter.poller.read_chip(logic)
        assert codes(exporter, 0) == ["80E01801", HANG_CODE]
    dcmi_double.set_int("util_aicore", 0, 10)
    await sample(exporter)  # 7: busy
    assert [f.assertion for f in hang_faults(exporter, 0)] == [Assertion.OCCUR, Assertion.RECOVER]
    assert hang_faults(exporter, 0)[1].source is EventSource.HANG
    assert codes(exporter, 0) == ["80E01801"]
    assert codes(exporter, 1) == [HANG_CODE]


async def test_moving_cpu_time_is_no_hang(exporter: Exporter, tmp_path: Path) -> None:
    for n in range(8):
        fake_proc(tmp_path, {42: 7 + 5 * n, 43: 7})
        await sample(exporter)
    assert hang_faults(exporter, 0) == []
    assert [f.assertion for f in hang_faults(exporter, 1)] == [Assertion.OCCUR]


async def test_a_new_process_restarts_the_count(exporter: Exporter, dcmi_double: Control, tmp_path: Path) -> None:
    for _ in range(3):
        await sample(exporter)
    fake_proc(tmp_path, {77: 1})
    dcmi_double.set_procs(0, [(42, 1 << 30), (77, 1 << 20)])
    for n in range(4, 9):
        await sample(exporter)
        assert hang_faults(exporter, 0) == [], f"sample {n}"
    await sample(exporter)  # 9
    assert [f.assertion for f in hang_faults(exporter, 0)] == [Assertion.OCCUR]


@pytest.mark.parametrize("body", ["echo '<html>garbage</html>'\n", "echo 'no device' >&2; exit 2\n"])
async def test_a_broken_tool_leaves_traffic_unknown_logged_once_per_chip(
    exporter: Exporter, tmp_path: Path, body: str, caplog: pytest.LogCaptureFixture
) -> None:
    fake_tool(tmp_path, body)
    with caplog.at_level(logging.WARNING, logger="dcmi_exporter.backends.dcmi.hccn"):
        for _ in range(6):
            await sample(exporter)
    # Unknown in every round: AI core, HBM and CPU decide (the reference's delta 0).
    assert [f.assertion for f in hang_faults(exporter, 0)] == [Assertion.OCCUR]
    tool_lines = [r for r in caplog.records if r.name == "dcmi_exporter.backends.dcmi.hccn"]
    assert sorted(r.__dict__["logic_id"] for r in tool_lines) == [0, 1]


async def test_a_stuck_tool_makes_only_that_rounds_traffic_unknown(exporter: Exporter, tmp_path: Path) -> None:
    assert exporter.hang is not None
    exporter.hang.probe = DcmiHangProbe(exporter.settings.hccn_tool, exporter.settings.host_proc, timeout_s=0.3)
    marker = tmp_path / "stuck"
    fake_tool(tmp_path, f"if [ -e {marker} ]; then exec sleep 30; fi\n{ROCE}")
    for _ in range(2):
        await sample(exporter)
    marker.touch()
    await sample(exporter)  # 3: no traffic; the baseline had some
    marker.unlink()
    assert exporter.hang.state(0).count == 0
    await sample(exporter)  # 4: traffic again, but the baseline (3) had none
    assert exporter.hang.state(0).count == 0
    await sample(exporter)  # 5: counted again
    assert exporter.hang.state(0).count == 1
    for _ in range(4):
        await sample(exporter)
    assert [f.assertion for f in hang_faults(exporter, 0)] == [Assertion.OCCUR]  # at sample 9


async def test_a_pid_missing_from_the_host_proc_is_warned_once(
    exporter: Exporter, dcmi_double: Control, caplog: pytest.LogCaptureFixture
) -> None:
    dcmi_double.set_procs(2, [(999, 1 << 20)])  # not in the fake /proc: as without hostPID
    with caplog.at_level(logging.WARNING, logger="dcmi_exporter.backends.dcmi.hang_probe"):
        for _ in range(3):
            await sample(exporter)
    lines = [r for r in caplog.records if r.name == "dcmi_exporter.backends.dcmi.hang_probe"]
    assert len(lines) == 1 and "hostPID" in lines[0].getMessage() and lines[0].__dict__["pids"] == [999]
