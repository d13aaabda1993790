"""The hang task's rounds: the first one interval after start, then one per interval; a round
that fails does not end detection; the config file is read once at start."""

from __future__ import annotations

import asyncio
import itertools
import logging
from pathlib import Path

import pytest
from dcmi_exporter.runtime import Exporter, load_hang_config
from dcmi_exporter.settings import ExporterSettings
from dcmi_exporter.tasks.hang_rule import HangConfig

INTERVAL = 0.2


async def test_rounds_start_one_interval_after_start_and_survive_a_failure(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    exp = Exporter.from_settings(ExporterSettings(socket=tmp_path / "sock", hang_interval=INTERVAL))
    assert exp.hang is not None
    loop = asyncio.get_running_loop()
    times: list[float] = []

    async def tick() -> None:
        times.append(loop.time())
        if len(times) == 2:
            raise RuntimeError("a bug in one round")

    monkeypatch.setattr(exp.hang, "tick", tick)
    started = loop.time()
    await exp.start()
    try:
        with caplog.at_level(logging.ERROR, logger="dcmi_exporter.tasks.hang"):
            while len(times) < 4:
                await asyncio.sleep(0.05)
    finally:
        await exp.stop()
    assert times[0] - started >= INTERVAL * 0.9
    gaps = [b - a for a, b in itertools.pairwise(times)]
    assert all(INTERVAL * 0.5 < g < INTERVAL * 3 for g in gaps), gaps
    assert any("round failed" in r.getMessage() for r in caplog.records)


def test_config_file_absent_or_unreadable_gives_the_defaults(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    assert load_hang_config(None) == HangConfig()
    with caplog.at_level(logging.ERROR, logger="dcmi_exporter.runtime"):
        assert load_hang_config(tmp_path / "absent.json") == HangConfig()
    assert any("unreadable" in r.getMessage() for r in caplog.records)
    path = tmp_path / "hang.json"
    path.write_text('{"HangDetection":{"Enabled":false}}')
    assert load_hang_config(path) == HangConfig(enabled=False)
