"""The chips' read loops share one grid of poll ticks, so an idle exporter wakes once a period
for all its chips instead of once per chip (a chip's slow read must not shift it off the grid)."""

from __future__ import annotations

import asyncio
import itertools
import time
from collections import defaultdict

import pytest
from ascend_common.chips import ChipAddress
from ascend_common.clock import SystemClock
from ascend_common.schemas.exporter import ChipDynamic
from ascend_common.tokens import TokenTable
from dcmi_exporter.backends.sim import SimBackend
from dcmi_exporter.node.poller import next_tick
from dcmi_exporter.runtime import Exporter
from dcmi_exporter.settings import ExporterSettings

PERIOD_S = 0.5
SLOW_S = 0.25  # one read of chip 0 takes this long: the old loops kept it this far behind


@pytest.mark.parametrize(
    ("now", "tick"),
    [(10.0, 11.0), (10.999, 11.0), (11.0, 12.0), (11.2, 12.0), (9.5, 10.0), (25.5, 26.0)],
)
def test_next_tick_is_the_first_tick_of_the_grid_after_now(now: float, tick: float) -> None:
    """Ticks one period apart from the origin: a read that ends late waits for the next one, never a
    full period from its own end."""
    assert next_tick(origin=10.0, period=1.0, now=now) == pytest.approx(tick)


async def test_a_slow_read_does_not_shift_its_chip_off_the_shared_ticks() -> None:
    clock = SystemClock()
    backend = SimBackend("910b-8", clock=clock)
    starts: dict[int, list[float]] = defaultdict(list)
    read = backend.read_dynamic

    def recorded(chip: ChipAddress) -> ChipDynamic:
        starts[chip.logic_id].append(time.monotonic())  # worker threads: list.append is atomic
        return read(chip)

    backend.read_dynamic = recorded  # type: ignore[method-assign]
    settings = ExporterSettings(poll_period=PERIOD_S, call_timeout=2.0)
    exporter = Exporter(settings, backend, clock, TokenTable())
    await exporter.poller.start()
    await exporter.poller.discovered.wait()
    backend.hang(0, SLOW_S)  # the next read of chip 0 (only) waits this long
    await asyncio.sleep(PERIOD_S * 5.5)
    await exporter.stop()

    slow, other = starts[0][-3:], starts[1][-3:]
    assert len(slow) == len(other) == 3
    for a, b in zip(slow, other, strict=True):
        assert abs(a - b) < SLOW_S / 2, (slow, other)
    gaps = [b - a for a, b in itertools.pairwise(other)]
    assert all(abs(g - PERIOD_S) < PERIOD_S / 3 for g in gaps), gaps
