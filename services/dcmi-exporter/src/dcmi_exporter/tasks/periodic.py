"""The one scaffold of the exporter's periodic tasks: how a task starts, keeps its period, logs a
failing round and stops. A task is only its rule: its rounds (`schedule`: what to do and how often),
and where it has them a `begin` before the first round and a `closed` after the stop.

- A round runs on a grid of ticks its period apart, the first one period after the start (or at
  once, `at_start`); a round that overruns skips the ticks it covered rather than running late rounds
  back to back.
- A round that raises is a bug or a source gone bad: logged with its traceback when the rounds start
  failing, at debug while they go on failing, and once more when one succeeds again; the next round
  runs (a bug in one round must not end them, nor log a traceback every period).
- Reads of several chips in one round share the round's deadline (`read_chips`), so a wedged chip
  costs its own result and never the next round.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import ClassVar, TypeVar

from ascend_common.adapters.lifecycle import TaskScope
from ascend_common.clock import Clock
from ascend_common.schemas.exporter import Chip

from dcmi_exporter.backends.failing import FailingChips
from dcmi_exporter.node.poller import ChipPoller, next_tick

log = logging.getLogger(__name__)
T = TypeVar("T")
# The least a task's round may take before its unfinished reads are cancelled: the hccn_tool runner's
# default timeout, so a round shorter than one tool run does not cut every run short.
ROUND_FLOOR_S = 10.0


def round_deadline(period: float, floor_s: float = ROUND_FLOOR_S) -> float:
    """How long one round of a periodic task may read: its period, and never less than `floor_s`."""
    return max(period, floor_s)


@dataclass(frozen=True)
class Round:
    """One periodic round of a task: `tick` every `period_s`."""

    name: str  # its asyncio task's name
    period_s: float
    tick: Callable[[], Awaitable[None]]
    failed: str  # the log line of a round that raised
    at_start: bool = False  # a first round as soon as the task begins, not one period later


class PeriodicTask:
    """Started in its scope (`essential`: a loop that ends on its own stops the service, see
    `ascend_common.adapters.lifecycle`), stopped with it."""

    name: ClassVar[str]  # the task's asyncio name
    essential: ClassVar[bool] = True  # False: `begin` may decline (a node without the task's hardware)

    def __init__(self, tasks: TaskScope) -> None:
        self._tasks = tasks

    def schedule(self) -> Sequence[Round]:
        raise NotImplementedError

    async def begin(self) -> bool:
        """Before the first round; False: nothing to do on this node (the task ends, logged by it)."""
        return True

    def closed(self) -> None:
        """After the rounds stopped."""

    async def start(self) -> None:
        start = self._tasks.essential if self.essential else self._tasks.spawn
        start(self._run(), self.name)

    async def stop(self) -> None:
        await self._tasks.stop()
        self.closed()

    async def _run(self) -> None:
        if not await self.begin():
            return
        await asyncio.gather(*(every_round(r) for r in self.schedule()))


class ChipRounds(PeriodicTask):
    """A task of one round over the node's chips every `interval_s` (`tick`), whose reads share the
    round's deadline (default: `round_deadline` of the interval)."""

    failed: ClassVar[str]  # the log line of a round that raised

    def __init__(
        self, poller: ChipPoller, interval_s: float, clock: Clock, tasks: TaskScope, deadline_s: float | None = None
    ) -> None:
        super().__init__(tasks)
        self.poller = poller
        self.interval_s = interval_s
        self.clock = clock
        self.deadline_s = deadline_s if deadline_s is not None else round_deadline(interval_s)

    def schedule(self) -> list[Round]:
        return [Round(self.name, self.interval_s, self.tick, self.failed)]

    async def tick(self) -> None:
        raise NotImplementedError


async def every_round(round_: Round) -> None:
    """Run the round on its grid of ticks for good (see the module's docstring)."""
    loop = asyncio.get_running_loop()
    failing = False
    origin = loop.time()
    first = round_.at_start
    while True:
        if not first:
            await asyncio.sleep(max(0.0, next_tick(origin, round_.period_s, loop.time()) - loop.time()))
        first = False
        try:
            await round_.tick()
        except Exception:
            if failing:
                log.debug(round_.failed, extra={"task": round_.name}, exc_info=True)
            else:
                log.exception(round_.failed, extra={"task": round_.name})
            failing = True
            continue
        if failing:
            log.info("periodic round succeeds again", extra={"task": round_.name})
            failing = False


async def read_chips(
    chips: Sequence[Chip], read: Callable[[Chip], Awaitable[T]], deadline_s: float, failing: FailingChips
) -> list[T | None]:
    """`read` of every chip at once, in one round's deadline: a read still running `deadline_s` after
    the start is cancelled and gives None, logged through `failing` (once per chip until it answers),
    so a wedged chip costs its own result this round and the round ends in time for the next one
    (a plain gather would wait for it, and every later round with it)."""
    tasks = [asyncio.ensure_future(read(chip)) for chip in chips]
    try:
        if tasks:
            await asyncio.wait(tasks, timeout=deadline_s)
    finally:
        late = [task for task in tasks if not task.done()]
        for task in late:
            task.cancel()
        if late:
            # Each read ends soon once cancelled (the hccn_tool runner kills and reaps within its bound).
            await asyncio.wait(late)
    out: list[T | None] = []
    for chip, task in zip(chips, tasks, strict=True):
        if task.cancelled():
            failing.failed(chip, f"no answer within the round's deadline ({deadline_s:g} s)")
            out.append(None)
        else:
            out.append(task.result())
    return out
