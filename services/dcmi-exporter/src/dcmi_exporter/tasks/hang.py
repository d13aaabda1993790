"""Hung-job detection, the shell: samples every chip each `--hang-interval` seconds and raises
or clears `200001002` through the poller (the rule is `hang.py`).

AI core, HBM and the process list come from the current snapshot (no DCMI call of its own);
traffic and CPU time come from the backend's HangProbe. Every chip of the snapshot is sampled,
including chips found after start (the reference registers one group, once).
"""

from __future__ import annotations

import asyncio
import logging

from ascend_common.adapters.lifecycle import TaskScope
from ascend_common.clock import Clock
from ascend_common.faults.codes import HANG_CODE
from ascend_common.schemas.exporter import Assertion, Chip, ChipState, EventSource, FaultEventData

from dcmi_exporter.backends.base import HangProbe
from dcmi_exporter.backends.failing import FailingChips
from dcmi_exporter.node.poller import ChipPoller
from dcmi_exporter.tasks.hang_rule import HangConfig, HangState, Sample, Transition, step
from dcmi_exporter.tasks.periodic import ChipRounds, read_chips

log = logging.getLogger(__name__)


class HangTask(ChipRounds):
    name = "hang-detection"
    failed = "hang detection round failed"

    def __init__(
        self,
        poller: ChipPoller,
        probe: HangProbe,
        config: HangConfig,
        interval_s: float,
        clock: Clock,
        tasks: TaskScope,
        deadline_s: float | None = None,
    ) -> None:
        # The first round one interval after start, as in the reference.
        super().__init__(poller, interval_s, clock, tasks, deadline_s)
        self.probe = probe
        self.config = config
        self._states: dict[int, HangState] = {}
        self._late = FailingChips(
            log, "hang detection sample abandoned at the round's deadline", "hang detection samples in time again"
        )

    def state(self, logic: int) -> HangState:
        return self._states.get(logic, HangState())

    async def tick(self) -> None:
        """One round over every chip of the snapshot (a round that overruns the interval skips the
        ticks it covered rather than running late rounds back to back)."""
        chips = list(self.poller.snapshot.chips)
        samples = await read_chips(chips, self._sample, self.deadline_s, self._late)
        for chip, sample in zip(chips, samples, strict=True):
            logic = chip.logic_id
            now = self.poller.snapshot.by_logic.get(logic)
            if now is None or now.state is not ChipState.OK:
                sample = None  # it stopped answering while its traffic was read: nothing to trust
            state, transition = step(self.state(logic), sample, self.config)
            self._states[logic] = state
            if transition is not None:
                self._report(logic, transition, state, sample)

    async def _sample(self, chip: Chip) -> Sample | None:
        try:
            sample = await self._read(chip)
        except Exception:
            log.exception("hang detection sample failed", extra={"logic_id": chip.logic_id, "chip": chip.name})
            sample = None
        self._late.succeeded(chip)
        return sample

    async def _read(self, chip: Chip) -> Sample | None:
        dyn = chip.dynamic
        if chip.state is not ChipState.OK or dyn is None:
            return None
        util, procs = dyn.utilization, dyn.processes
        if not (util.is_ok and util.value is not None and procs.is_ok and procs.value is not None):
            return None
        aicore, hbm = util.value.aicore_pct, util.value.hbm_pct
        if aicore is None or hbm is None:
            return None
        pids = tuple(sorted(p.pid for p in procs.value))
        if not pids or not self.config.enabled:
            # Not met whatever the rest says (detectNPU returns before any tool runs).
            return Sample(pids, aicore, hbm, None, 0)
        traffic, cpu = await asyncio.gather(self.probe.traffic(chip), self.probe.cpu_times(pids))
        return Sample(pids, aicore, hbm, traffic, cpu.seconds, cpu.starts)

    def _report(self, logic: int, transition: Transition, state: HangState, sample: Sample | None) -> None:
        chip = self.poller.snapshot.by_logic.get(logic)
        name = chip.name if chip is not None else ""
        fields = {"logic_id": logic, "chip": name, "code": HANG_CODE, "pids": list(state.pids or ())}
        if transition == "occur":
            log.warning(
                "chip looks hung: a job holds it and makes no progress",
                extra={**fields, "rounds": state.count, "sample": sample.__dict__ if sample else None},
            )
            assertion = Assertion.OCCUR
        else:
            log.info("hung chip makes progress again", extra=fields)
            assertion = Assertion.RECOVER
        fault = FaultEventData(
            code=HANG_CODE,
            assertion=assertion,
            severity=None,
            source=EventSource.HANG,
            raised_at_ms=int(self.clock.now() * 1000),  # ms, as every other fault (the reference: s)
        )
        self.poller.set_derived(logic, fault)
