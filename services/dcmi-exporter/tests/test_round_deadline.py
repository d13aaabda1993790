"""One deadline per round of the periodic tasks (issue 32 item 4): `read_chips` cancels the reads
still running at the deadline, keeps the others' results and logs each late chip once."""

from __future__ import annotations

import asyncio
import logging
import time

import pytest
from ascend_common.chips import ChipAddress
from ascend_common.schemas.exporter import Chip
from dcmi_exporter.backends.failing import FailingChips
from dcmi_exporter.node.snapshot import chip_discovered, placeholder_static
from dcmi_exporter.tasks.periodic import read_chips, round_deadline

log = logging.getLogger("tests.round_deadline")


def chip(logic: int) -> Chip:
    return chip_discovered(ChipAddress(card_id=logic, device_id=0, logic_id=logic, phy_id=logic), placeholder_static(0))


def test_a_round_may_read_for_its_period_and_never_less_than_the_floor() -> None:
    assert round_deadline(0.2) == 10.0
    assert round_deadline(60.0) == 60.0
    assert round_deadline(0.2, 0.5) == 0.5


async def test_a_wedged_read_is_cancelled_at_the_deadline_and_the_others_are_kept(
    caplog: pytest.LogCaptureFixture,
) -> None:
    cancelled: list[int] = []
    failing = FailingChips(log, "late", "in time again")

    async def read(c: Chip) -> int:
        if c.logic_id == 1:
            try:
                await asyncio.sleep(60)
            except asyncio.CancelledError:
                cancelled.append(c.logic_id)
                raise
        return c.logic_id * 10

    chips = [chip(0), chip(1), chip(2)]
    with caplog.at_level(logging.INFO, logger="tests.round_deadline"):
        for _ in range(3):  # three rounds: logged once
            started = time.monotonic()
            assert await read_chips(chips, read, 0.2, failing) == [0, None, 20]
            assert time.monotonic() - started < 2.0
    assert cancelled == [1, 1, 1]
    late = [r for r in caplog.records if r.getMessage() == "late"]
    assert [(r.__dict__["logic_id"], r.__dict__["error"]) for r in late] == [
        (1, "no answer within the round's deadline (0.2 s)")
    ]


async def test_a_round_cancelled_from_outside_cancels_every_read() -> None:
    running: list[asyncio.Task[object]] = []

    async def read(c: Chip) -> None:
        task = asyncio.current_task()
        assert task is not None
        running.append(task)
        await asyncio.sleep(60)

    round_ = asyncio.create_task(read_chips([chip(0), chip(1)], read, 30.0, FailingChips(log, "late", "back")))
    await asyncio.sleep(0.05)
    round_.cancel()
    with pytest.raises(asyncio.CancelledError):
        await round_
    assert len(running) == 2 and all(t.cancelled() for t in running)


async def test_no_chips_no_wait() -> None:
    assert await read_chips([], lambda c: asyncio.sleep(60), 30.0, FailingChips(log, "late", "back")) == []
