"""The periodic tasks' one scaffold (tasks/periodic.py): rounds on their grid, a failing round logged
once per spell with its traceback and its recovery once, `begin` declining, `closed` after the stop."""

from __future__ import annotations

import asyncio
import logging

import pytest
from ascend_common.adapters.lifecycle import Lifecycle
from dcmi_exporter.tasks.periodic import PeriodicTask, Round

PERIOD = 0.05


class Flaky(PeriodicTask):
    """Its rounds 2 and 3 raise; it records when each round ran."""

    name = "flaky"

    def __init__(self, lifecycle: Lifecycle, *, at_start: bool = False, begins: bool = True) -> None:
        super().__init__(lifecycle.scope("flaky"))
        self.ran: list[float] = []
        self.at_start = at_start
        self.begins = begins
        self.closes = 0

    async def begin(self) -> bool:
        return self.begins

    def schedule(self) -> list[Round]:
        return [Round(self.name, PERIOD, self.tick, "flaky round failed", self.at_start)]

    async def tick(self) -> None:
        self.ran.append(asyncio.get_running_loop().time())
        if len(self.ran) in (2, 3):
            raise RuntimeError(f"round {len(self.ran)} broke")

    def closed(self) -> None:
        self.closes += 1


async def until_rounds(task: Flaky, n: int) -> None:
    async with asyncio.timeout(5):
        while len(task.ran) < n:
            await asyncio.sleep(PERIOD / 5)


async def test_a_failing_spell_is_logged_once_and_its_end_once(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, logger="dcmi_exporter.tasks.periodic")
    task = Flaky(Lifecycle())
    await task.start()
    try:
        await until_rounds(task, 5)
    finally:
        await task.stop()
    records = [r for r in caplog.records if r.name == "dcmi_exporter.tasks.periodic"]
    failed = [r for r in records if r.getMessage() == "flaky round failed"]
    assert [r.levelno for r in failed] == [logging.ERROR, logging.DEBUG], "the spell's first with its traceback"
    assert failed[0].exc_info is not None and "round 2 broke" in str(failed[0].exc_info[1])
    assert [r.getMessage() for r in records if r.levelno == logging.INFO] == ["periodic round succeeds again"]
    assert all(getattr(r, "task", None) == "flaky" for r in records)
    assert task.closes == 1


async def test_the_first_round_comes_one_period_after_the_start_or_at_once() -> None:
    loop = asyncio.get_running_loop()
    for at_start, earliest, latest in ((False, PERIOD * 0.9, PERIOD * 20), (True, 0.0, PERIOD * 0.9)):
        task = Flaky(Lifecycle(), at_start=at_start)
        started = loop.time()
        await task.start()
        try:
            await until_rounds(task, 1)
        finally:
            await task.stop()
        assert earliest <= task.ran[0] - started < latest, at_start


async def test_a_task_that_declines_runs_no_round() -> None:
    task = Flaky(Lifecycle(), begins=False)
    await task.start()
    await asyncio.sleep(PERIOD * 4)
    await task.stop()
    assert task.ran == [] and task.closes == 1
