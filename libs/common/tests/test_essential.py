"""A loop a service cannot run without ends: it is logged, and the exit status says so."""

from __future__ import annotations

import asyncio
import logging

import pytest
from ascend_common import essential


@pytest.fixture(autouse=True)
def fresh(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(essential, "_ended", [])
    monkeypatch.setattr(essential, "_stop_service", False)  # never SIGTERM the test process


async def crashes() -> None:
    await asyncio.sleep(0)
    raise KeyError("chip 7")


async def returns() -> None:
    await asyncio.sleep(0)


async def runs_forever() -> None:
    await asyncio.Event().wait()


@pytest.mark.parametrize(("loop", "logged"), [(crashes, "KeyError: 'chip 7'"), (returns, "")])
async def test_an_ended_loop_is_logged_and_fails_the_exit_status(
    loop: object, logged: str, caplog: pytest.LogCaptureFixture
) -> None:
    assert essential.exit_status() == 0
    task = essential.essential(loop(), "ingest")  # type: ignore[operator]
    await asyncio.wait([task])
    await asyncio.sleep(0)  # done callbacks run on the next turn
    [record] = [r for r in caplog.records if r.levelno == logging.ERROR]
    assert record.task == "ingest"  # type: ignore[attr-defined]
    assert logged in (caplog.text if logged else "")
    assert essential.exit_status() == 1


async def test_a_cancelled_loop_is_a_normal_stop() -> None:
    task = essential.essential(runs_forever(), "ingest")
    await asyncio.sleep(0)
    task.cancel()
    await asyncio.wait([task])
    await asyncio.sleep(0)
    assert essential.exit_status() == 0
